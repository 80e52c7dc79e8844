/* sandbox-users file-system primitives: see fs.h. */
#include "sandbox-users/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"

static bool openat2_enabled = true;
static bool openat2_missing; /* cached ENOSYS */

void ufs_set_openat2(bool enabled)
{
	openat2_enabled = enabled;
}

static int open_dir_fallback(int dir_fd, const char *path)
{
	char comp[256];
	int fd = -1;

	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/");
		int next;
		if (n == 0) {
			p++;
			continue;
		}
		if (n >= sizeof(comp) || (n == 1 && p[0] == '.') ||
		    (n == 2 && !memcmp(p, "..", 2))) {
			safe_close(fd);
			return -EINVAL;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		next = openat(fd >= 0 ? fd : dir_fd, comp,
			      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
		if (next < 0) {
			int r = -errno;
			struct stat st;
			/* O_NOFOLLOW|O_DIRECTORY on a link says ENOTDIR; say what it is. */
			if (r == -ENOTDIR &&
			    fstatat(fd >= 0 ? fd : dir_fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode))
				r = -ELOOP;
			safe_close(fd);
			return r;
		}
		safe_close(fd);
		fd = next;
		p += n;
	}
	if (fd < 0)
		fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int ufs_open_dir(int dir_fd, const char *path)
{
	if (path[0] == '/' || strstr(path, ".."))
		return -EINVAL;
	if (openat2_enabled && !openat2_missing) {
		struct open_how how = {
			.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};
		long fd = syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		/* ENOSYS: kernel < 5.6; EPERM: a seccomp profile that filters it. ENOTDIR
		 * (a final link under O_NOFOLLOW|O_DIRECTORY): let the walk name the cause. */
		if (errno == ENOTDIR)
			return open_dir_fallback(dir_fd, path);
		if (errno != ENOSYS && errno != EPERM)
			return -errno;
		openat2_missing = true;
	}
	return open_dir_fallback(dir_fd, path);
}

int ufs_mkdir_owned(int parent_fd, const char *name, uid_t uid, gid_t gid, mode_t mode,
		    unsigned flags)
{
	_cleanup_close_ int fd = -1;
	bool created = false, replaced = false;
	struct stat st;

	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	for (;;) {
		/* Created 0700 root-owned, opened, then handed over through the fd:
		 * the agent never sees a window with a looser mode. */
		if (mkdirat(parent_fd, name, 0700) == 0)
			created = true;
		else if (errno != EEXIST)
			return -errno;
		fd = openat(parent_fd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
		if (fd >= 0)
			break;
		if (errno != ELOOP && errno != ENOTDIR)
			return -errno;
		if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		if (!S_ISLNK(st.st_mode))
			return -ENOTDIR;
		if (!(flags & UFS_REPLACE_SYMLINK) || replaced)
			return -ELOOP;
		/* unlinkat removes the link itself, never its target. Once only: an agent
		 * racing us with new links gets a refusal, not a loop. */
		if (unlinkat(parent_fd, name, 0) < 0 && errno != ENOENT)
			return -errno;
		replaced = true;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (!created && st.st_uid != uid) {
		/* In a directory the agent can write it may have moved in a directory it does
		 * not own (root's, another agent's): never adopt it. Elsewhere only a root-owned
		 * directory (made by an operator or an image) is taken over. */
		if ((flags & UFS_AGENT_PARENT) || st.st_uid != 0)
			return -EPERM;
	}
	if (!created && (flags & UFS_KEEP_EXISTING))
		return TAKE_FD(fd);
	if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0)
		return -errno;
	/* From scratch, after chown (which clears set-id bits): never OR into st_mode. */
	if ((st.st_mode & 07777) != mode || st.st_uid != uid || st.st_gid != gid)
		if (fchmod(fd, mode) < 0)
			return -errno;
	return TAKE_FD(fd);
}

int ufs_lock(int dir_fd, const char *name, unsigned timeout_ms)
{
	_cleanup_close_ int fd = -1;
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	struct timespec start, now;
	long delay_us = 200;

	fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
	if (fd < 0)
		return -errno;
	clock_gettime(CLOCK_MONOTONIC, &start);
	/* The lock lckpwdf() takes (a POSIX write lock on the whole file), so shadow-utils
	 * and we exclude each other. Polled with F_SETLK instead of lckpwdf's F_SETLKW +
	 * alarm(): a library must not own SIGALRM, and pistisd runs an event loop. */
	for (;;) {
		if (fcntl(fd, F_SETLK, &fl) == 0)
			return TAKE_FD(fd);
		if (errno != EAGAIN && errno != EACCES && errno != EINTR)
			return -errno;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long elapsed_ms = (now.tv_sec - start.tv_sec) * 1000 +
				  (now.tv_nsec - start.tv_nsec) / 1000000;
		if (elapsed_ms >= (long)timeout_ms)
			return -ETIMEDOUT;
		struct timespec ts = {0, delay_us * 1000};
		nanosleep(&ts, NULL);
		if (delay_us < 20000)
			delay_us *= 2;
	}
}

int ufs_read_file(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_len,
		  struct stat *ret_st)
{
	_cleanup_close_ int fd = -1;
	struct stat st;

	fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	if (ret_st)
		*ret_st = st;
	return fd_read_all(fd, max, ret, ret_len);
}

static int write_new(int dir_fd, const char *tmp, const void *data, size_t len, uid_t uid,
		     gid_t gid, mode_t mode)
{
	_cleanup_close_ int fd = -1;
	int r;

	/* A leftover from a crashed writer (we hold the lock, so it is not live). */
	if (unlinkat(dir_fd, tmp, 0) < 0 && errno != ENOENT)
		return -errno;
	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	/* Owner, then mode: shadow stays root:shadow 0640 as the image had it. */
	if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode & 07777) < 0) {
		r = -errno;
		goto fail;
	}
	r = loop_write(fd, data, len);
	if (r < 0)
		goto fail;
	if (fsync(fd) < 0) {
		r = -errno;
		goto fail;
	}
	if (close(TAKE_FD(fd)) < 0) {
		r = -errno;
		goto fail;
	}
	return 0;
fail:
	(void)unlinkat(dir_fd, tmp, 0);
	return r;
}

int ufs_stage(struct ufs_staged *s, int dir_fd, const char *name, const void *data, size_t len,
	      uid_t uid, gid_t gid, mode_t mode, bool backup)
{
	int r;

	memset(s, 0, sizeof(*s));
	if (strlen(name) >= sizeof(s->name) - 1)
		return -ENAMETOOLONG;
	s->dir_fd = dir_fd;
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->tmp, sizeof(s->tmp), "%s+", name);
	s->backup = backup;
	r = write_new(dir_fd, s->tmp, data, len, uid, gid, mode);
	if (r < 0)
		return r;
	s->staged = true;
	return 0;
}

static int make_backup(struct ufs_staged *s)
{
	char bak[66];
	_cleanup_free_ char *old = NULL;
	size_t old_len = 0;
	struct stat st;
	int r;

	snprintf(bak, sizeof(bak), "%s-", s->name);
	if (unlinkat(s->dir_fd, bak, 0) < 0 && errno != ENOENT)
		return -errno;
	/* The current file itself becomes the backup: no copy, same owner and mode. */
	if (linkat(s->dir_fd, s->name, s->dir_fd, bak, 0) == 0)
		return 0;
	if (errno == ENOENT)
		return 0; /* nothing to back up yet */
	if (errno != EPERM && errno != EOPNOTSUPP && errno != EMLINK)
		return -errno;
	r = ufs_read_file(s->dir_fd, s->name, 64u << 20, &old, &old_len, &st);
	if (r < 0)
		return r;
	return write_new(s->dir_fd, bak, old, old_len, st.st_uid, st.st_gid, st.st_mode);
}

int ufs_commit(struct ufs_staged *s)
{
	int r;

	if (!s->staged)
		return 0;
	if (s->backup) {
		r = make_backup(s);
		if (r < 0) {
			ufs_abort(s);
			return r;
		}
	}
	if (renameat(s->dir_fd, s->tmp, s->dir_fd, s->name) < 0) {
		r = -errno;
		ufs_abort(s);
		return r;
	}
	s->staged = false;
	return 0;
}

void ufs_abort(struct ufs_staged *s)
{
	if (s->staged)
		(void)unlinkat(s->dir_fd, s->tmp, 0);
	s->staged = false;
}
