/* Landlock scopes for agent commands: scope.h. Raw system calls (no libc wrappers exist
 * in musl or older glibc), the structure as in <linux/landlock.h> of Linux 6.12. */
#include "pistisd/scope.h"

#include <errno.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#define SCOPE_CREATE_RULESET_VERSION (1U << 0)
#define SCOPE_ABSTRACT_UNIX_SOCKET (UINT64_C(1) << 0)

/* struct landlock_ruleset_attr up to .scoped: no file-system or network access is
 * handled, so paths and ports stay what owners, modes and the filter make them. */
struct scope_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

int scope_landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, SCOPE_CREATE_RULESET_VERSION);

	return abi >= 1 ? (int)abi : -errno;
}

static long make_ruleset(void)
{
	const struct scope_ruleset_attr attr = {.scoped = SCOPE_ABSTRACT_UNIX_SOCKET};

	/* The kernel refuses a size it does not know: an ABI below 6 says E2BIG (size
	 * larger than its struct, with a non-zero tail) or EINVAL. */
	return syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
}

int scope_probe(void)
{
	long fd = make_ruleset();

	if (fd < 0)
		return errno == E2BIG ? -EINVAL : -errno;
	close((int)fd);
	return 0;
}

int scope_probe_child(void)
{
	static pid_t asked_by; /* the process the answer is for: a fork asks again */
	static int answer;
	int status = 0, r;
	pid_t pid;

	if (asked_by == getpid())
		return answer;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(errno & 0xff);
		r = scope_restrict_self();
		_exit(r < 0 ? -r & 0xff : 0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	answer = WIFEXITED(status) ? -WEXITSTATUS(status) : -EIO;
	asked_by = getpid();
	return answer;
}

int scope_restrict_self(void)
{
	long fd = make_ruleset();

	if (fd < 0)
		return -errno;
	if (syscall(SYS_landlock_restrict_self, fd, 0) < 0)
		return -errno;
	return 0;
}
