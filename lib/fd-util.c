#include "lib/fd-util.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/macro.h"

ssize_t loop_read(int fd, void *buf, size_t count)
{
	size_t done = 0;

	while (done < count) {
		ssize_t n = read(fd, (char *)buf + done, count - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int loop_write(int fd, const void *buf, size_t count)
{
	const char *p = buf;

	while (count > 0) {
		ssize_t n = write(fd, p, count);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		count -= (size_t)n;
	}
	return 0;
}

int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len)
{
	return fd_read_all_hint(fd, max, 0, ret, ret_len);
}

int fd_read_all_hint(int fd, size_t max, size_t size_hint, char **ret, size_t *ret_len)
{
	static const struct fd_allocator libc = {realloc, free};

	return fd_read_all_with(fd, max, size_hint, &libc, ret, ret_len);
}

int fd_read_all_with(int fd, size_t max, size_t size_hint, const struct fd_allocator *a, char **ret,
		     size_t *ret_len)
{
	size_t cap, len = 0;
	char *buf;
	int r = 0;

	if (max >= SIZE_MAX - 2)
		return -EINVAL;
	/* With a hint: one buffer of that size plus one byte to see EOF (and one for the NUL),
	 * grown only if the file grew meanwhile. */
	cap = size_hint ? (size_hint < max ? size_hint : max) + 2 : 4096;
	buf = a->realloc(NULL, cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (len == cap - 1) {
			char *nbuf;

			if (cap > max + 1) {
				r = -EFBIG;
				break;
			}
			cap = cap * 2 > max + 2 ? max + 2 : cap * 2;
			nbuf = a->realloc(buf, cap);
			if (!nbuf) {
				r = -ENOMEM;
				break;
			}
			buf = nbuf;
		}
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) {
			r = -EFBIG;
			break;
		}
	}
	if (r < 0) {
		a->free(buf);
		return r;
	}
	buf[len] = '\0';
	if (ret_len)
		*ret_len = len;
	*ret = buf;
	return 0;
}

int close_all_fds_from(int first)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)first, ~0U, 0) == 0)
		return 0;
	/* EPERM: a container seccomp profile older than close_range refuses syscalls it
	 * does not know that way; the fallback below still closes everything. */
	if (errno != ENOSYS && errno != EINVAL && errno != EPERM)
		return -errno;
#endif
	/* Pre-5.9 fallback: walk /proc/self/fd. Collect first, then close, so closing does
	 * not disturb the directory stream we read. */
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		for (int fd = first; fd < 65536; fd++)
			(void)close(fd);
		return 0;
	}
	int dfd = dirfd(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);

		if (*end || end == de->d_name || fd < first || fd == dfd)
			continue;
		(void)close((int)fd);
	}
	closedir(d);
	return 0;
}

int fd_open_null(int flags)
{
	struct stat st;
	int fd = open("/dev/null", flags | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 1 ||
	    minor(st.st_rdev) != 3) {
		(void)close(fd);
		return -ENODEV;
	}
	return fd;
}

int fd_ensure_std(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0)
			continue;
		/* Opened as root by pistisd and pistisd-entry, read and write, and then written
		 * to (the log, on a closed stderr): a /dev/null that is a symlink or a file (runc
		 * CVE-2025-31133's shape, an image's or a volume's) had pistisd's log lines
		 * written over the root-only file it named (red team, redteam-cve.sh 5). */
		int n = fd_open_null(O_RDWR);
		if (n < 0)
			return n == -ELOOP ? -ENODEV : n;
		if (fcntl(n, F_SETFL, 0) < 0) {
			(void)close(n);
			return -ENODEV;
		}
		if (n != fd) {
			(void)close(n);
			return -EBADF;
		}
	}
	return 0;
}

bool fd_same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int fd_open_regular(int dir_fd, const char *name, struct stat *ret_st, int *ret_fd)
{
	_cleanup_close_ int fd = -1;

	fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, ret_st) < 0)
		return -errno;
	if (!S_ISREG(ret_st->st_mode))
		return -EBADFD;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int fd_set_cloexec(int fd, int on)
{
	int flags = fcntl(fd, F_GETFD);

	if (flags < 0)
		return -errno;
	flags = on ? flags | FD_CLOEXEC : flags & ~FD_CLOEXEC;
	return fcntl(fd, F_SETFD, flags) < 0 ? -errno : 0;
}

int fd_set_nonblock(int fd, int on)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0)
		return -errno;
	flags = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, flags) < 0 ? -errno : 0;
}

int fd_flock_wait(int fd, unsigned wait_ms)
{
	for (unsigned waited = 0;; waited += 50) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK)
			return -errno;
		if (waited >= wait_ms)
			return -EWOULDBLOCK;
		(void)usleep(50 * 1000);
	}
}

/* Root's and writable by no one else, by the mode: not by others, by its group only when
 * the group is root's. */
static bool stat_root_only_writable(const struct stat *st)
{
	return st->st_uid == 0 && !(st->st_mode & 0002) &&
	       (st->st_gid == 0 || !(st->st_mode & 0020));
}

bool root_only_writable_at(int dfd, const char *name, const struct stat *st)
{
	char p[sizeof("/proc/self/fd/") + 12 + 1 + NAME_MAX];
	ssize_t n;

	if (!stat_root_only_writable(st))
		return false;
	if (!(st->st_mode & 0020))
		return true;
	/* Group root may write; but with an access ACL the group bits are its mask, and a
	 * named entry (an agent's uid) may be what writes. Through the fd's magic link:
	 * followed for the fd itself, not for a name beneath it. */
	if (snprintf(p, sizeof(p), "/proc/self/fd/%d%s%s", dfd, *name ? "/" : "", name) >=
	    (int)sizeof(p))
		return false;
	n = *name ? lgetxattr(p, XATTR_ACL_ACCESS, NULL, 0)
		  : getxattr(p, XATTR_ACL_ACCESS, NULL, 0);
	/* None, or a file system without xattrs: no ACL. Anything else (no /proc): unknown. */
	return n < 0 && (errno == ENODATA || errno == EOPNOTSUPP);
}

const char *const fd_acl_xattrs[2] = {XATTR_ACL_ACCESS, XATTR_ACL_DEFAULT};

const char *fd_has_acl(int fd)
{
	for (unsigned i = 0; i < ELEMENTSOF(fd_acl_xattrs); i++)
		if (fgetxattr(fd, fd_acl_xattrs[i], NULL, 0) >= 0)
			return fd_acl_xattrs[i];
	return NULL;
}

int fd_remove_acls(int fd, unsigned *ret_removed)
{
	unsigned removed = 0;

	for (unsigned i = 0; i < ELEMENTSOF(fd_acl_xattrs); i++) {
		/* Asked first: Linux 6.2 and later answer the removal of an ACL that is not
		 * there with success, so only this says whether there was one. */
		if (fgetxattr(fd, fd_acl_xattrs[i], NULL, 0) < 0) {
			if (errno == ENODATA || errno == EOPNOTSUPP)
				continue;
			return negative_errno();
		}
		if (fremovexattr(fd, fd_acl_xattrs[i]) == 0)
			removed |= 1u << i;
		else if (errno != ENODATA && errno != EOPNOTSUPP)
			return negative_errno();
	}
	if (ret_removed)
		*ret_removed = removed;
	return 0;
}

int fd_limit_raise(rlim_t want, rlim_t *ret_now)
{
	struct rlimit rl;

	*ret_now = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	*ret_now = rl.rlim_cur;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
		want = rl.rlim_max;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
		return 0;
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	*ret_now = want;
	return 0;
}
