/* Resolve a rule's path beneath the root without ever following a symlink. */
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/macro.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

static bool force_fallback;
static bool no_openat2; /* ENOSYS (old kernel) or EPERM (seccomp) seen once */

void policy_resolve_force_fallback(bool on)
{
	force_fallback = on;
}

/* The next component of a normalised path at *p (slashes before it skipped): 1 with it in
 * name and *p past it, 0 at the end, -EINVAL for one too long, "." or "..". */
static int next_name(const char **p, char name[POLICY_NAME_MAX + 1])
{
	const char *s = *p + strspn(*p, "/");
	size_t n = strcspn(s, "/");

	*p = s;
	if (n == 0)
		return 0;
	if (n > POLICY_NAME_MAX)
		return -EINVAL;
	memcpy(name, s, n);
	name[n] = '\0';
	if (!strcmp(name, "..") || !strcmp(name, "."))
		return -EINVAL;
	*p = s + n;
	return 1;
}

/* Component by component: openat(O_PATH|O_NOFOLLOW) opens a symlink as itself, so fstat
 * tells us it is one and we stop (O_NOFOLLOW alone only guards the last component). */
static int resolve_fallback(int root_fd, const char *rel, int flags, int *ret_fd)
{
	_cleanup_close_ int cur = -1;
	char name[POLICY_NAME_MAX + 1];
	const char *p = rel;
	int k;

	cur = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return negative_errno();
	while ((k = next_name(&p, name)) > 0) {
		bool more = p[strspn(p, "/")] != '\0';
		struct stat st;
		int fd;

		fd = openat(cur, name, (more ? O_PATH : flags) | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ELOOP)
			return -ELOOP; /* last component: O_NOFOLLOW on a symlink without O_PATH */
		if (fd < 0)
			return negative_errno();
		safe_close(cur);
		cur = fd;
		if (fstat(cur, &st) < 0)
			return negative_errno();
		if (S_ISLNK(st.st_mode))
			return -ELOOP;
		if (more && !S_ISDIR(st.st_mode))
			return -ENOTDIR;
	}
	if (k < 0)
		return k;
	*ret_fd = TAKE_FD(cur);
	return 0;
}

static int resolve_raw(int root_fd, const char *abs, int flags, int *ret_fd)
{
	const char *rel = abs;
	int fd;

	while (*rel == '/')
		rel++;
	if (!*rel) {
		fd = openat(root_fd, ".", (flags | O_CLOEXEC) & ~O_NOFOLLOW);
		if (fd < 0)
			return negative_errno();
		*ret_fd = fd;
		return 0;
	}
	if (!force_fallback && !no_openat2) {
		struct open_how how = {
			.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};

		/* EAGAIN: a rename raced the lookup somewhere; the kernel asks for a retry. */
		for (int tries = 0; tries < 16; tries++) {
			fd = (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
			if (fd >= 0 || errno != EAGAIN)
				break;
		}
		if (fd >= 0) {
			*ret_fd = fd;
			return 0;
		}
		if (errno != ENOSYS && errno != EPERM)
			return negative_errno();
		no_openat2 = true;
	}
	return resolve_fallback(root_fd, rel, flags, ret_fd);
}

int policy_resolve(int root_fd, const char *abs, int flags, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	if (!(flags & O_PATH))
		return resolve_raw(root_fd, abs, flags, ret_fd);
	/* O_PATH|O_NOFOLLOW hands back a trailing symlink itself (and O_DIRECTORY would
	 * turn it into ENOTDIR, hiding it): open without O_DIRECTORY and look. */
	r = resolve_raw(root_fd, abs, flags & ~O_DIRECTORY, &fd);
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (S_ISLNK(st.st_mode))
		return -ELOOP;
	if ((flags & O_DIRECTORY) && !S_ISDIR(st.st_mode))
		return -ENOTDIR;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int policy_deepest_dir(int root_fd, const char *abs, int *ret_fd, struct stat *ret_link)
{
	_cleanup_close_ int cur = -1;
	char name[POLICY_NAME_MAX + 1];
	const char *p = abs;
	int k;

	if (ret_link)
		ret_link->st_mode = 0;
	cur = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return negative_errno();
	while ((k = next_name(&p, name)) > 0) {
		int fd = openat(cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0 && errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
			return negative_errno();
		if (fd < 0) {
			/* missing, not a directory, or a link: cur is the deepest; which one
			 * stopped the way is asked of the name itself (changed since: no link) */
			if (ret_link && fstatat(cur, name, ret_link, AT_SYMLINK_NOFOLLOW) < 0)
				ret_link->st_mode = 0;
			break;
		}
		safe_close(cur);
		cur = fd;
	}
	if (k < 0)
		return k;
	*ret_fd = TAKE_FD(cur);
	return 0;
}

int policy_first_symlink(int root_fd, const char *abs, int *ret_dir_fd, struct stat *ret_st)
{
	_cleanup_close_ int fd = -1;
	int r = policy_deepest_dir(root_fd, abs, &fd, ret_st);

	if (r < 0)
		return r;
	if (!S_ISLNK(ret_st->st_mode))
		return 0;
	*ret_dir_fd = TAKE_FD(fd);
	return 1;
}
