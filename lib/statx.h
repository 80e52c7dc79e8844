#pragma once

#include <stdint.h>
#include <sys/stat.h>

/* statx(2) of (dfd, name, flags) into the struct stat fields the tree walkers use (mode,
 * uid, gid, nlink, ino, dev; the rest zeroed), and whether the node is a mount root:
 * *ret_mount is 1 or 0 from STATX_ATTR_MOUNT_ROOT (5.8), or -1 when the kernel does not
 * say, and the caller falls back to comparing st_dev with the parent's. That fallback is
 * only right for directories: on overlayfs a lower-layer non-directory reports its layer's
 * st_dev. Raw syscall: musl before 1.2.5 has no statx(). Returns 0 or -errno. */
int statx_node(int dfd, const char *name, int flags, struct stat *st, int *ret_mount);

/* statx(2) attributes of (dfd, name, flags) that say a node cannot be replaced by rename:
 * STATX_NODE_IMMUTABLE and STATX_NODE_APPEND (chattr +i, +a) and STATX_NODE_MOUNT_ROOT (a
 * mount, e.g. a file bind-mounted over it). *ret_attrs holds those set, *ret_known those the
 * kernel and file system report at all (attributes_mask). 0 or -errno. */
#define STATX_NODE_IMMUTABLE 0x10u
#define STATX_NODE_APPEND 0x20u
#define STATX_NODE_MOUNT_ROOT 0x2000u
int statx_attributes(int dfd, const char *name, int flags, uint64_t *ret_attrs,
		     uint64_t *ret_known);

/* What keeps (dfd, name) from being replaced by rename, name "" for the directory dfd
 * itself, looked at without following a link: STATX_NODE_MOUNT_ROOT (a file mounted over
 * it; a directory that is a mount renames within itself and is fine), else
 * STATX_NODE_IMMUTABLE or STATX_NODE_APPEND (chattr +i, +a), else 0. 0 too where there is
 * nothing to replace (ENOENT) or no statx (ENOSYS: the rename will say). `pistisd users`
 * asks it before writing an account file and `pistisd check` before saying one can be
 * written. Other failures are -errno. */
int statx_rename_blocker(int dfd, const char *name);

/* The mount id of the mount fd's node is on (statx STATX_MNT_ID, Linux 5.8; mountinfo's
 * first field). 0, -EOPNOTSUPP where the kernel does not say, or -errno. */
int statx_mount_id(int fd, uint64_t *ret);

/* The inode number and birth time of the node behind fd (an O_PATH fd is fine): what names
 * one file for as long as it lives (an inode number alone is given again once the file is
 * gone). *ret_have_btime is false where the file system keeps no birth time (sec, nsec
 * 0). 0 or -errno. */
int statx_birth(int fd, uint64_t *ret_ino, int64_t *ret_sec, uint32_t *ret_nsec,
		int *ret_have_btime);
