/* The host's namespaces (lib/host-ns.h). */
#include "lib/host-ns.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "lib/macro.h"

static const struct {
	const char *name;
	unsigned long ino;
} kinds[_HOST_NS_MAX] = {
	[HOST_NS_PID] = {"pid", 0xEFFFFFFCUL}, /* PROC_PID_INIT_INO */
	[HOST_NS_IPC] = {"ipc", 0xEFFFFFFFUL}, /* PROC_IPC_INIT_INO */
	[HOST_NS_UTS] = {"uts", 0xEFFFFFFEUL}, /* PROC_UTS_INIT_INO */
};

int host_ns_is_initial(enum host_ns which)
{
	char path[32];
	struct stat st;

	if ((unsigned)which >= _HOST_NS_MAX)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/self/ns/%s", kinds[which].name);
	if (stat(path, &st) < 0)
		return negative_errno();
	return st.st_ino == kinds[which].ino;
}

const char *host_ns_name(enum host_ns which)
{
	return (unsigned)which < _HOST_NS_MAX ? kinds[which].name : NULL;
}

int host_ns_user_is_initial(void)
{
	struct stat st;

	if (stat("/proc/self/ns/user", &st) < 0)
		return negative_errno();
	return st.st_ino == 0xEFFFFFFDUL; /* PROC_USER_INIT_INO */
}
