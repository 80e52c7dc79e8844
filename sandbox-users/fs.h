#pragma once

/* The file-system side of sandbox-users, all relative to a root directory fd: resolving
 * beneath it without following links, creating owned directories, locking and replacing
 * files atomically. Never follows a symlink an agent may have planted. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Open directory path (relative, no "..") beneath dir_fd with no symlink anywhere:
 * openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), falling back to one
 * openat(O_NOFOLLOW|O_DIRECTORY) per component where openat2 is missing. */
int ufs_open_dir(int dir_fd, const char *path);

/* Tests: force the per-component fallback (false) or allow openat2 again (true). */
void ufs_set_openat2(bool enabled);

enum {
	UFS_REPLACE_SYMLINK = 1 << 0, /* a symlink at name is removed (never followed) */
	UFS_AGENT_PARENT = 1 << 1,    /* parent is writable by the agent: adopt nothing */
	UFS_KEEP_EXISTING = 1 << 2,   /* an existing dir keeps its owner and mode */
	UFS_NO_MOUNT = 1 << 3,	      /* an existing mount point is refused (-EBUSY) */
	UFS_WHOLE = 1 << 4,	      /* a new one appears at name only as made (below) */
	UFS_REPLACE_NONDIR = 1 << 5,  /* a file, FIFO, socket or device at name is removed too */
};

/* statx of name in dfd (flags as for fstatat; "" with AT_EMPTY_PATH for dfd itself) into
 * st's type, mode, owner, group and device, and whether it is a mount root:
 * STATX_ATTR_MOUNT_ROOT where the kernel reports it (5.8), else st_dev differs from
 * parent_fd's. */
int ufs_stat_mount(int parent_fd, int dfd, const char *name, int flags, struct stat *st,
		   bool *ret_mount);

/* The check on every fd sandbox-users opens as a file (opened O_NONBLOCK, so that a FIFO
 * or a device cannot block the open): a regular file (-EBADFD otherwise), root-owned with
 * UFS_ROOT_OWNED and not group/other-writable with UFS_NO_GROUP_OTHER_WRITE (-EPERM
 * otherwise). O_NONBLOCK stays (a regular file ignores it); ufs_lock clears it. */
enum {
	UFS_ROOT_OWNED = 1 << 0,
	UFS_NO_GROUP_OTHER_WRITE = 1 << 1,
	UFS_LOCK_READ = 1 << 2, /* ufs_lock only: a read lock (lckpwdf's readers' side) */
};
int ufs_check_regular(int fd, unsigned flags);

/* Make name in parent_fd a directory owned by uid:gid with exactly mode (set on the
 * opened fd: fchown, then fchmod from scratch). An existing directory owned by another
 * non-root uid is refused (-EPERM); with UFS_AGENT_PARENT only one owned by uid itself,
 * created by this call, or left by a call cut short after its mkdirat (root's, no group or
 * other access, empty) is accepted. A non-directory is refused (-ENOTDIR), a symlink
 * too (-ELOOP) unless UFS_REPLACE_SYMLINK. A root-owned one that is not kept as it is
 * (UFS_KEEP_EXISTING) loses its access and default ACLs. UFS_WHOLE: a missing one is
 * made as ".NAME.new" (or a leftover of that name of root's taken over), given its owner
 * and mode, and renamed to name only then (RENAME_NOREPLACE), so that a call cut short
 * never leaves name half made, which UFS_KEEP_EXISTING would then keep so. Returns the
 * directory fd or -errno. */
int ufs_mkdir_owned(int parent_fd, const char *name, uid_t uid, gid_t gid, mode_t mode,
		    unsigned flags);

/* lckpwdf()-compatible lock: a POSIX write lock on the whole file name in dir_fd
 * (created 0600 when missing), waiting at most timeout_ms; a read lock with UFS_LOCK_READ
 * (the file opened for reading), which keeps every writer out and lets other readers in. The file must be a regular,
 * root-owned file (a FIFO, device or socket is never opened for writing: -EBADFD; another
 * owner: -EPERM; a symlink: -ELOOP), plus the ufs_check_regular flags. Returns the fd
 * holding the lock (close it to unlock) or -errno (-ETIMEDOUT). */
int ufs_lock(int dir_fd, const char *name, unsigned timeout_ms, unsigned flags);

/* Map every whole page of p[0..n) now (MADV_POPULATE_WRITE), instead of one page fault
 * per page as it is first written; a hint, errors are ignored. */
void ufs_prefault(void *p, size_t n);

/* The pieces v[0..n) as one NUL-terminated malloc'd string (the formatters' result). */
int ufs_iov_join(const struct iovec *v, size_t n, char **ret, size_t *ret_len);

/* Read a regular file (no symlink; opened O_NONBLOCK, anything else is -EBADFD) of at
 * most max bytes into one buffer of len + 1 bytes from uarena_alloc (free it with
 * uarena_free; sandbox-users/arena.h), NUL-terminated; -ENOENT when
 * missing. ret_st (optional) is the fstat of the fd read, for the caller's owner check;
 * ret_fd (optional) gets the fd, still open, else it is closed. */
int ufs_read_file(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_len,
		  struct stat *ret_st, int *ret_fd);

/* Staged replacement of dir_fd/name, in three steps so that one batch of files shares its
 * syncs (docs/users.md, "Files written, and how"):
 *   ufs_stage      rewrites the previous backup "<name>-" in place under a write lease
 *                  when no one else has it open and it is a one-link regular file of the
 *                  right owner and mode (with backup; see docs/users.md, "The backup's
 *                  inode, reused"), else writes "<name>+" (a new file, O_EXCL) with owner
 *                  and mode; starts its writeback (a hint), no sync yet;
 *   ufs_sync       makes the data of every staged file durable: each is fdatasync'ed
 *                  (and closed, which ends the lease);
 *   ufs_commit     swaps a rewritten backup and name (RENAME_EXCHANGE), else keeps the
 *                  current file as "<name>-" (a hard link, else a copy) and renames the
 *                  synced staged file over name.
 * abort removes the staged file (a rewritten backup becomes a link to the current file).
 * The caller fsyncs dir_fd where the rename must be durable before it goes on. */
struct ufs_staged {
	int dir_fd;
	int fd; /* the staged file until ufs_sync, else -1 */
	char name[64];
	char tmp[66];
	char bak[66];
	bool staged;
	bool synced;
	bool backup;
	bool recycled; /* staged in place of the old backup, "<name>-" (lease held) */
};
int ufs_stage(struct ufs_staged *s, int dir_fd, const char *name, const struct iovec *iov,
	      size_t n_iov, uid_t uid, gid_t gid, mode_t mode, bool backup);
int ufs_sync(struct ufs_staged *const *v, size_t n);
int ufs_commit(struct ufs_staged *s);
void ufs_abort(struct ufs_staged *s);
/* Whether ufs_stage may rewrite the previous backup in place (default on; tests). */
void ufs_set_recycle(bool enabled);
