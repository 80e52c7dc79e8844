#include "lib/proc-status.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

ssize_t proc_status_read(char *buf, size_t size)
{
	size_t len = 0;
	long fd, n;

	if (size == 0)
		return -EFBIG;
	fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC | O_NOCTTY, 0);
	if (fd < 0)
		return errno > 0 ? -errno : -EIO;
	while ((n = syscall(SYS_read, fd, buf + len, size - 1 - len)) > 0) {
		len += (size_t)n;
		if (len == size - 1)
			break;
	}
	/* Full with more to come: refuse rather than parse a cut file. */
	char more;
	if (n > 0 && syscall(SYS_read, fd, &more, 1) > 0)
		n = -1, errno = EFBIG;
	int e = errno;
	(void)syscall(SYS_close, fd);
	if (n < 0)
		return e > 0 ? -e : -EIO;
	buf[len] = '\0';
	return (ssize_t)len;
}

const char *proc_status_field(const char *buf, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = buf;; p++) {
		if (!strncmp(p, key, kl) && p[kl] == ':' && p[kl + 1] == '\t')
			return p + kl + 2;
		p = strchr(p, '\n');
		if (!p)
			return NULL;
	}
}

int proc_status_hex(const char *buf, const char *key, uint64_t *ret)
{
	const char *p = proc_status_field(buf, key);
	uint64_t v = 0;
	int digits = 0;

	if (!p)
		return -ENOENT;
	for (; *p && *p != '\n'; p++, digits++) {
		int d = *p >= '0' && *p <= '9'	 ? *p - '0'
			: *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
						 : -1;
		if (d < 0 || digits == 16)
			return -EINVAL;
		v = v << 4 | (uint64_t)d;
	}
	if (digits == 0)
		return -EINVAL;
	*ret = v;
	return 0;
}
