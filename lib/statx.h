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

/* The mount id of the mount fd's node is on (statx STATX_MNT_ID, Linux 5.8; mountinfo's
 * first field). 0, -EOPNOTSUPP where the kernel does not say, or -errno. */
int statx_mount_id(int fd, uint64_t *ret);

/* The inode number and birth time of the node behind fd (an O_PATH fd is fine): what names
 * one file for as long as it lives (an inode number alone is given again once the file is
 * gone). *ret_have_btime is false where the file system keeps no birth time (sec, nsec
 * 0). 0 or -errno. */
int statx_birth(int fd, uint64_t *ret_ino, int64_t *ret_sec, uint32_t *ret_nsec,
		int *ret_have_btime);
