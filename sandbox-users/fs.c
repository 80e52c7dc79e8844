/* sandbox-users file-system primitives: see fs.h. */
#include "sandbox-users/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"
#include "lib/statx.h"
#include "sandbox-users/arena.h"

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

/* 1 when directory fd holds no entry but "." and "..", 0 when it holds one, or -errno.
 * Listed through a descriptor of its own, so fd's offset is left alone. */
static int dir_is_empty(int fd)
{
	_cleanup_close_ int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char buf[512] __attribute__((aligned(8)));
	long n;

	if (dfd < 0)
		return -errno;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0)
		for (long pos = 0; pos < n;) {
			const struct linux_dirent64 *d = (const void *)(buf + pos);

			pos += d->d_reclen;
			if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
				return 0;
		}
	return n < 0 ? -errno : 1;
}

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* UFS_WHOLE: name made whole beside it and renamed into place; 0 when name exists (the
 * caller's checks judge it), its fd when this call put it there, or -errno. */
static int mkdir_whole(int parent_fd, const char *name, uid_t uid, gid_t gid, mode_t mode,
		       unsigned flags)
{
	char tmp[NAME_MAX + 1];
	_cleanup_close_ int fd = -1;
	struct stat st, st2;

	if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	if (snprintf(tmp, sizeof(tmp), ".%s.new", name) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = ufs_mkdir_owned(parent_fd, tmp, uid, gid, mode,
			     flags & ~(UFS_WHOLE | UFS_KEEP_EXISTING | UFS_REPLACE_SYMLINK |
				       UFS_REPLACE_NONDIR));
	if (fd < 0)
		return fd;
	if (syscall(SYS_renameat2, parent_fd, tmp, parent_fd, name, RENAME_NOREPLACE) < 0) {
		int r = -errno;

		(void)unlinkat(parent_fd, tmp, AT_REMOVEDIR);
		return r == -EEXIST ? 0 : r;
	}
	/* What the name holds now is what was made, not something renamed over it since. */
	if (fstat(fd, &st) < 0 || fstatat(parent_fd, name, &st2, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (st.st_dev != st2.st_dev || st.st_ino != st2.st_ino)
		return -EAGAIN;
	return TAKE_FD(fd);
}

int ufs_mkdir_owned(int parent_fd, const char *name, uid_t uid, gid_t gid, mode_t mode,
		    unsigned flags)
{
	_cleanup_close_ int fd = -1;
	bool created = false, replaced = false;
	struct stat st;

	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	if (flags & UFS_WHOLE) {
		int made = mkdir_whole(parent_fd, name, uid, gid, mode, flags);

		if (made != 0)
			return made;
	}
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
		if (!S_ISLNK(st.st_mode) && (!(flags & UFS_REPLACE_NONDIR) || replaced))
			return -ENOTDIR;
		if (S_ISLNK(st.st_mode) && (!(flags & UFS_REPLACE_SYMLINK) || replaced))
			return -ELOOP;
		/* unlinkat removes the link itself, never its target, and a name of a file,
		 * never the file's other names (a hard link). Once only: an agent racing us
		 * with new links gets a refusal, not a loop. */
		if (unlinkat(parent_fd, name, 0) < 0 && errno != ENOENT)
			return -errno;
		replaced = true;
	}
	if (flags & UFS_NO_MOUNT) {
		bool mount = false;
		int r = ufs_stat_mount(parent_fd, fd, "", AT_EMPTY_PATH, &st, &mount);
		if (r < 0)
			return r;
		/* A mount point (a bind mount of some root directory, a volume) is never
		 * handed to an agent: chown and chmod would act on what is mounted there. */
		if (mount)
			return -EBUSY;
	} else if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	/* Between mkdirat and openat the name may have changed hands: in a parent the agent
	 * writes, it can rename our new directory away and move one of its choosing in (a
	 * directory of another agent's, or a pi-sandbox one it may write). Only a directory
	 * as mkdirat left it, root's with no access for group or others, is ours; anything
	 * else goes through the checks of an existing one. The agent cannot have moved in a
	 * root-owned directory closed to it: renaming a directory into another parent needs
	 * write permission on the directory itself. */
	if (created && (st.st_uid != 0 || (st.st_mode & 0077)))
		created = false;
	/* The same directory left by a call cut short between its mkdirat and its chown (a
	 * kill, an I/O error): root's, closed, and empty, as only root can put anything in
	 * it. Refused, it stopped every later ensure of the agent ("exists with another
	 * owner") until an operator removed it. The agent cannot have moved such a directory
	 * in from elsewhere (that needs write permission on the directory itself), and in
	 * its own directory there is no other root's to rename. */
	if (!created && (flags & UFS_AGENT_PARENT) && st.st_uid == 0 && !(st.st_mode & 0077) &&
	    st.st_nlink == 2 && dir_is_empty(fd) > 0)
		created = true;
	if (!created && st.st_uid != uid) {
		/* In a directory the agent can write it may have moved in a directory it does
		 * not own (root's, another agent's): never adopt it. Elsewhere only a root-owned
		 * directory (made by an operator or an image) is taken over. */
		if ((flags & UFS_AGENT_PARENT) || st.st_uid != 0)
			return -EPERM;
	}
	if (!created && (flags & UFS_KEEP_EXISTING))
		return TAKE_FD(fd);
	/* A root-owned one (made now, by an operator, or this call's parents) keeps no ACL:
	 * a new directory inherits its parent's default ACL, which an agent that owned /data
	 * in an earlier life of the volume could have set there (pistisd-entry strips /data's
	 * own, not those its directories inherited then). Inherited into /data/sandbox-home,
	 * it named that agent in every new home and in every file made there, umask ignored,
	 * hidden by the 0700 mask until the home's owner opened its group bits. Removed
	 * before the mode is set (a removed access ACL leaves its mask as the group bits).
	 * What an agent set on its own directory is its own. */
	if (st.st_uid == 0) {
		int r = fd_remove_acls(fd, NULL);
		if (r < 0)
			return r;
	}
	bool chowned = st.st_uid != uid || st.st_gid != gid;
	if (chowned && fchown(fd, uid, gid) < 0)
		return -errno;
	/* From scratch, never ORed into st_mode; after chown, which may clear set-id bits,
	 * also when mode has any (a new directory's 0700 is right as mkdir made it). */
	if ((st.st_mode & 07777) != mode || (chowned && (mode & 06000)))
		if (fchmod(fd, mode) < 0)
			return -errno;
	return TAKE_FD(fd);
}

int ufs_stat_mount(int parent_fd, int dfd, const char *name, int flags, struct stat *st,
		   bool *ret_mount)
{
	struct stat pst;
	int mount, r;

	r = statx_node(dfd, name, flags, st, &mount);
	if (r < 0)
		return r;
	/* STATX_ATTR_MOUNT_ROOT (5.8) is the exact question. On overlayfs a lower-layer
	 * non-directory reports its layer's st_dev, so "st_dev differs from the parent's" is
	 * only the fallback (it is right for directories, which is all we ask about). */
	if (mount >= 0) {
		*ret_mount = mount;
		return 0;
	}
	if (fstat(parent_fd, &pst) < 0)
		return -errno;
	*ret_mount = pst.st_dev != st->st_dev;
	return 0;
}

int ufs_check_regular(int fd, unsigned flags)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	if ((flags & UFS_ROOT_OWNED) && st.st_uid != 0)
		return -EPERM;
	if ((flags & UFS_NO_GROUP_OTHER_WRITE) && (st.st_mode & 0022))
		return -EPERM;
	return 0;
}

int ufs_lock(int dir_fd, const char *name, unsigned timeout_ms, unsigned flags)
{
	_cleanup_close_ int fd = -1;
	bool read = flags & UFS_LOCK_READ;
	struct flock fl = {.l_type = read ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET};
	struct timespec start, now;
	long delay_us = 200;
	struct stat st;
	int r;

	/* Looked at by name first, so that a FIFO, a device or a socket is never even opened
	 * (a FIFO without a reader would block O_WRONLY forever; O_NONBLOCK turns that into
	 * ENXIO); the fd is checked again below, for a swap between the two. */
	if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(st.st_mode))
			return -ELOOP;
		if (!S_ISREG(st.st_mode))
			return -EBADFD;
	} else if (errno != ENOENT)
		return -errno;
	fd = openat(dir_fd, name,
		    (read ? O_RDONLY : O_WRONLY) | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY |
			    O_NONBLOCK,
		    0600);
	if (fd < 0)
		return errno == ENXIO ? -EBADFD : -errno;
	r = ufs_check_regular(fd, flags | UFS_ROOT_OWNED);
	if (r < 0)
		return r;
	/* Anyone who can open the lock file can hold a read lock on it, and the write lock
	 * below waits for every reader: one that group or others may read (an image that
	 * ships it 0644) is made 0600 through the fd. Done on the first lock after boot, which
	 * precedes every agent process (an agent's commands start after its ensure), so no
	 * agent holds an fd from before. A file with other links is left as it is: the mode
	 * is the other names' too. */
	if (fstat(fd, &st) == 0 && (st.st_mode & 0077) && st.st_nlink == 1)
		(void)fchmod(fd, 0600);
	/* O_NONBLOCK was for the open only; the fd goes to the caller without it. F_SETFL
	 * with 0: the open above set no other status flag (O_APPEND, O_DIRECT, ...), so no
	 * F_GETFL is needed to keep them. */
	if (fcntl(fd, F_SETFL, 0) < 0)
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

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL, which is ignored */
#endif

void ufs_prefault(void *p, size_t n)
{
	const uintptr_t page = 4096;
	uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + n) & ~(page - 1);

	if (uarena_owns(p))
		return; /* populated by the arena as it was handed out */
	/* One call maps every whole page of the buffer, about half the cost of taking a fault
	 * on each as it is first written. Only a hint: any error leaves the faults to come. */
	if (e > a + 4 * page)
		(void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
}

/* fd_read_all_with's allocator here: the arena, a fresh buffer prefaulted. */
static void *prefaulted_realloc(void *p, size_t n)
{
	void *q = uarena_realloc(p, n);

	if (q && !p)
		ufs_prefault(q, n);
	return q;
}

static const struct fd_allocator ufs_allocator = {prefaulted_realloc, uarena_free};

int ufs_iov_join(const struct iovec *v, size_t n, char **ret, size_t *ret_len)
{
	size_t total = 0;
	char *out, *o;

	for (size_t i = 0; i < n; i++)
		total += v[i].iov_len;
	out = o = malloc(total + 1);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		o = mempcpy(o, v[i].iov_base, v[i].iov_len);
	*o = '\0';
	*ret = out;
	*ret_len = total;
	return 0;
}

int ufs_read_file(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_len,
		  struct stat *ret_st, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	r = fd_open_regular(dir_fd, name, &st, &fd);
	if (r < 0)
		return r;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	r = fd_read_all_with(fd, max, (size_t)st.st_size, &ufs_allocator, ret, ret_len);
	if (r < 0)
		return r;
	if (ret_st)
		*ret_st = st;
	if (ret_fd)
		*ret_fd = TAKE_FD(fd);
	return 0;
}

static int write_iov(int fd, const struct iovec *iov, size_t n)
{
	struct iovec cur[64];

	while (n > 0) {
		size_t k = n < ELEMENTSOF(cur) ? n : ELEMENTSOF(cur);
		size_t want = 0;
		ssize_t w;
		memcpy(cur, iov, k * sizeof(*cur));
		for (size_t i = 0; i < k; i++)
			want += cur[i].iov_len;
		/* Short writes: go on from where the kernel stopped. */
		size_t first = 0;
		while (want > 0) {
			w = writev(fd, cur + first, (int)(k - first));
			if (w < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			if (w == 0)
				return -EIO;
			want -= (size_t)w;
			while (w > 0 && first < k) {
				if ((size_t)w >= cur[first].iov_len) {
					w -= (ssize_t)cur[first].iov_len;
					first++;
				} else {
					cur[first].iov_base = (char *)cur[first].iov_base + w;
					cur[first].iov_len -= (size_t)w;
					w = 0;
				}
			}
		}
		iov += k;
		n -= k;
	}
	return 0;
}

/* A new file tmp in dir_fd holding iov, owned uid:gid with mode; not synced. Returns the
 * open fd (for ufs_sync) or -errno, with nothing left behind. */
static int write_new(int dir_fd, const char *tmp, const struct iovec *iov, size_t n_iov, uid_t uid,
		     gid_t gid, mode_t mode)
{
	const int oflags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY;
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	/* O_CREAT|O_EXCL makes a new regular file or fails: it never opens what is there
	 * (a FIFO, a device, a link), so unlike every other open here it needs no
	 * O_NONBLOCK. Created with the target's permission bits less group/other write,
	 * which the fchmod below adds back only after the owner is right; most of the time
	 * (0644, 0640, 0600 under umask 022) nothing is left to change. */
	fd = openat(dir_fd, tmp, oflags, mode & 0755);
	if (fd < 0 && errno == EEXIST) {
		/* A leftover from a crashed writer (we hold the lock, so it is not live): the
		 * name itself is removed (never followed), and the open is tried once more. */
		if (unlinkat(dir_fd, tmp, 0) < 0 && errno != ENOENT)
			return -errno;
		fd = openat(dir_fd, tmp, oflags, mode & 0755);
	}
	if (fd < 0)
		return -errno;
	/* The rule for every fd opened here all the same: a regular file, checked on the fd. */
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EBADFD;
		goto fail;
	}
	/* Owner, then mode: shadow stays root:shadow 0640 as the image had it. Each call only
	 * where the new file differs; chown clears set-id bits, so a mode with any is set
	 * again after it. */
	bool chowned = false;
	if (st.st_uid != uid || st.st_gid != gid) {
		if (fchown(fd, uid, gid) < 0) {
			r = -errno;
			goto fail;
		}
		chowned = true;
	}
	if (((chowned && (mode & 06000)) || (st.st_mode & 07777) != (mode & 07777)) &&
	    fchmod(fd, mode & 07777) < 0) {
		r = -errno;
		goto fail;
	}
	r = write_iov(fd, iov, n_iov);
	if (r < 0)
		goto fail;
	return TAKE_FD(fd);
fail:
	(void)unlinkat(dir_fd, tmp, 0);
	return r;
}

/* renameat2's flag (linux/fs.h); musl has no renameat2() wrapper before 1.2.5. */
#define UFS_RENAME_EXCHANGE (1 << 1)

static bool recycle_enabled = true;

void ufs_set_recycle(bool enabled)
{
	recycle_enabled = enabled;
}

/* A rewritten backup bak whose content did not take effect (a write that failed half-way,
 * an aborted batch) becomes a hard link to the current file name: a true version of the
 * file, never content that never was. Best effort; the real file is untouched either way. */
static void backup_from_current(int dir_fd, const char *name, const char *bak)
{
	if (unlinkat(dir_fd, bak, 0) == 0)
		(void)linkat(dir_fd, name, dir_fd, bak, 0);
}

/* The previous backup "<name>-" rewritten in place as the staged file, when that is safe:
 * a regular file with one link and the very owner and mode the new file needs, that no
 * one but us has open. The last is what a write lease asserts: F_SETLEASE F_WRLCK fails
 * (EAGAIN) while any other open file (an fd, a mapping) refers to the inode, and while we
 * hold it, anyone opening the file waits in open() until we close it, i.e. until the new
 * content is complete and synced. So no reader ever sees this file half-written: not one
 * that opened it back when it was the current file (the lease is refused), not one that
 * opens the backup now (it waits). Returns the fd (lease held; closing it releases the
 * lease) or -errno; any error means "make a new file instead". */
static int recycle_backup(int dir_fd, const char *name, const char *bak, const struct iovec *iov,
			  size_t n_iov, uid_t uid, gid_t gid, mode_t mode)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	off_t total = 0;
	int r;

	/* O_NONBLOCK: a FIFO planted there cannot block the open, and a lease someone else
	 * holds makes the open fail instead of wait. */
	fd = openat(dir_fd, bak, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != uid || st.st_gid != gid ||
	    (st.st_mode & 07777) != (mode & 07777))
		return -ESTALE;
	/* A lease break signals the holder (SIGIO, whose default is to terminate): it gets
	 * SIGURG instead, ignored by default, and then no one at all (owner 0). */
	if (fcntl(fd, F_SETSIG, SIGURG) < 0 || fcntl(fd, F_SETLEASE, F_WRLCK) < 0 ||
	    fcntl(fd, F_SETOWN, 0) < 0)
		return -errno;
	r = write_iov(fd, iov, n_iov);
	for (size_t i = 0; i < n_iov; i++)
		total += (off_t)iov[i].iov_len;
	if (r == 0 && st.st_size > total && ftruncate(fd, total) < 0)
		r = -errno;
	if (r < 0) {
		backup_from_current(dir_fd, name, bak); /* half rewritten (a full disk) */
		return r;
	}
	return TAKE_FD(fd);
}

/* The extended attributes a rewrite keeps: the security label (SELinux's shadow_t on
 * /etc/shadow; a new file in /etc gets etc_t, which confined domains may read), the
 * access ACL (a backup tool's read entry; the trust rule has already refused any that
 * could grant write), and user./trusted. ones. Never security.ima or security.evm (a
 * hash of the old content would fail appraisal of the new) or security.capability. */
static bool xattr_kept(const char *n)
{
	return !strncmp(n, "user.", 5) || !strncmp(n, "trusted.", 8) ||
	       !strcmp(n, "security.selinux") || !strcmp(n, "security.SMACK64") ||
	       !strcmp(n, "system.posix_acl_access");
}

/* 0 on success, or -errno; an empty list where the file system has none. */
static int xattr_list(int fd, char *buf, size_t size, ssize_t *ret_len)
{
	ssize_t n = flistxattr(fd, buf, size);

	if (n < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP))
		n = 0;
	if (n < 0)
		return -errno;
	*ret_len = n;
	return 0;
}

/* The staged file dst gets the kept attributes of the current file name (xattr_kept),
 * and loses those it has and name has not (a recycled backup carries the version
 * before). Staged files are new inodes or the previous version's: before, a rewrite
 * lost /etc/shadow's label and ACL, and the next one brought the old ones back from the
 * recycled backup (red team). Best effort where the kernel refuses (EPERM: a container
 * without CAP_SYS_ADMIN, a context= mount; EOPNOTSUPP): the file is then as before this
 * copy; any other error fails the stage. */
static int copy_xattrs(int dir_fd, const char *name, int dst)
{
	char src_list[4096], dst_list[4096], v[4096], w[4096];
	_cleanup_close_ int src = -1;
	ssize_t ns = 0, nd = 0;
	int r;

	src = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (src < 0)
		return errno == ENOENT ? 0 : -errno;
	if ((r = xattr_list(src, src_list, sizeof(src_list), &ns)) < 0 ||
	    (r = xattr_list(dst, dst_list, sizeof(dst_list), &nd)) < 0)
		return r == -ERANGE ? 0 : r; /* more than 4 KiB of names: not ours to judge */
	for (ssize_t i = 0; i < nd; i += (ssize_t)strlen(dst_list + i) + 1) {
		const char *n = dst_list + i;

		if (xattr_kept(n) && fgetxattr(src, n, NULL, 0) < 0 && errno == ENODATA &&
		    fremovexattr(dst, n) < 0 && errno != ENODATA && errno != EPERM &&
		    errno != EOPNOTSUPP)
			return -errno;
	}
	for (ssize_t i = 0; i < ns; i += (ssize_t)strlen(src_list + i) + 1) {
		const char *n = src_list + i;
		ssize_t lv, lw;

		if (!xattr_kept(n) || (lv = fgetxattr(src, n, v, sizeof(v))) < 0)
			continue; /* gone meanwhile, or over 4 KiB: left as it is */
		lw = fgetxattr(dst, n, w, sizeof(w));
		if (lw == lv && !memcmp(v, w, (size_t)lv))
			continue;
		if (fsetxattr(dst, n, v, (size_t)lv, 0) < 0 && errno != EPERM &&
		    errno != EOPNOTSUPP && errno != ENOTSUP)
			return -errno;
	}
	return 0;
}

int ufs_stage(struct ufs_staged *s, int dir_fd, const char *name, const struct iovec *iov,
	      size_t n_iov, uid_t uid, gid_t gid, mode_t mode, bool backup)
{
	int r;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	if (strlen(name) >= sizeof(s->name) - 1)
		return -ENAMETOOLONG;
	s->dir_fd = dir_fd;
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->tmp, sizeof(s->tmp), "%s+", name);
	snprintf(s->bak, sizeof(s->bak), "%s-", name);
	s->backup = backup;
	if (backup && recycle_enabled) {
		r = recycle_backup(dir_fd, s->name, s->bak, iov, n_iov, uid, gid, mode);
		if (r >= 0) {
			s->recycled = true;
			goto staged;
		}
	}
	r = write_new(dir_fd, s->tmp, iov, n_iov, uid, gid, mode);
	if (r < 0)
		return r;
staged:
	s->fd = r;
	s->staged = true;
	r = copy_xattrs(dir_fd, s->name, s->fd);
	if (r < 0) {
		ufs_abort(s);
		return r;
	}
	/* Writeback starts now, so the device writes this file while the caller stages the
	 * next ones (and makes the homes' directories): ufs_sync's fdatasync mostly finds it
	 * done. Only a hint (it makes nothing durable); fdatasync is what the guarantee rests
	 * on. */
	(void)sync_file_range(s->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	return 0;
}

int ufs_sync(struct ufs_staged *const *v, size_t n)
{
	int r = 0;

	/* Writeback of every file was started as it was staged, so each fdatasync mostly
	 * waits for I/O already under way (and for its flush), instead of one write-and-flush
	 * round trip per file. */
	for (size_t i = 0; i < n; i++) {
		if (!v[i]->staged || v[i]->fd < 0)
			continue;
		if (fdatasync(v[i]->fd) < 0 && r == 0)
			r = -errno;
		if (close(v[i]->fd) < 0 && r == 0 && errno != EINTR)
			r = -errno;
		v[i]->fd = -1;
		v[i]->synced = r == 0;
	}
	return r;
}

static int make_backup(struct ufs_staged *s)
{
	const char *bak = s->bak;
	_cleanup_uarena_ char *old = NULL;
	size_t old_len = 0;
	struct stat st;
	int r;

	if (unlinkat(s->dir_fd, bak, 0) < 0 && errno != ENOENT)
		return -errno;
	/* The current file itself becomes the backup: no copy, same owner and mode. */
	if (linkat(s->dir_fd, s->name, s->dir_fd, bak, 0) == 0)
		return 0;
	if (errno == ENOENT)
		return 0; /* nothing to back up yet */
	if (errno != EPERM && errno != EOPNOTSUPP && errno != EMLINK)
		return -errno;
	r = ufs_read_file(s->dir_fd, s->name, 64u << 20, &old, &old_len, &st, NULL);
	if (r < 0)
		return r;
	r = write_new(s->dir_fd, bak, &(struct iovec){.iov_base = old, .iov_len = old_len}, 1,
		      st.st_uid, st.st_gid, st.st_mode);
	if (r < 0)
		return r;
	/* The backup need not be durable: it is the old content, still on disk under name
	 * until the rename below is. */
	safe_close(r);
	return 0;
}

int ufs_commit(struct ufs_staged *s)
{
	int r;

	if (!s->staged)
		return 0;
	/* Never rename data that is not durable yet over the real file. */
	if (!s->synced) {
		ufs_abort(s);
		return -EINVAL;
	}
	if (s->recycled) {
		/* One atomic swap: the new content becomes name, the current file the backup.
		 * No inode is created or freed. Where the file system cannot exchange, the
		 * staged file goes the usual way from here. */
		if (syscall(SYS_renameat2, s->dir_fd, s->bak, s->dir_fd, s->name,
			    UFS_RENAME_EXCHANGE) == 0) {
			s->staged = false;
			return 0;
		}
		if (errno != EINVAL && errno != ENOSYS && errno != ENOENT) {
			r = -errno;
			ufs_abort(s);
			return r;
		}
		if (renameat(s->dir_fd, s->bak, s->dir_fd, s->tmp) < 0) {
			r = -errno;
			ufs_abort(s);
			return r;
		}
		s->recycled = false;
	}
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
	if (!s->staged)
		return;
	if (s->fd >= 0)
		s->fd = safe_close(s->fd);
	if (s->recycled) {
		backup_from_current(s->dir_fd, s->name, s->bak);
	} else {
		(void)unlinkat(s->dir_fd, s->tmp, 0);
	}
	s->staged = s->recycled = false;
}
