#include "lib/statx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/macro.h"

/* struct statx as the kernel lays it out (a stable ABI). */
struct kstatx {
	uint32_t mask, blksize;
	uint64_t attributes;
	uint32_t nlink, uid, gid;
	uint16_t mode, spare0;
	uint64_t ino, size, blocks, attributes_mask;
	struct {
		int64_t sec;
		uint32_t nsec;
		int32_t pad;
	} atime, btime, ctime, mtime;
	uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
	uint64_t spare[14];
};

#define KSTATX_BASIC (0x1u | 0x2u | 0x4u | 0x8u | 0x10u | 0x100u) /* type mode nlink uid gid ino */
#define KSTATX_ATTR_MOUNT_ROOT 0x2000u

int statx_node(int dfd, const char *name, int flags, struct stat *st, int *ret_mount)
{
	struct kstatx sx;

	if (syscall(SYS_statx, dfd, name, flags, KSTATX_BASIC, &sx) < 0)
		return negative_errno();
	memset(st, 0, sizeof(*st));
	st->st_mode = sx.mode;
	st->st_uid = sx.uid;
	st->st_gid = sx.gid;
	st->st_nlink = sx.nlink;
	st->st_ino = sx.ino;
	st->st_dev = makedev(sx.dev_major, sx.dev_minor);
	if (sx.attributes_mask & KSTATX_ATTR_MOUNT_ROOT)
		*ret_mount = (sx.attributes & KSTATX_ATTR_MOUNT_ROOT) ? 1 : 0;
	else
		*ret_mount = -1;
	return 0;
}

int statx_attributes(int dfd, const char *name, int flags, uint64_t *ret_attrs, uint64_t *ret_known)
{
	const uint64_t asked = STATX_NODE_IMMUTABLE | STATX_NODE_APPEND | STATX_NODE_MOUNT_ROOT;
	struct kstatx sx;

	if (syscall(SYS_statx, dfd, name, flags, 0x1u /* STATX_TYPE */, &sx) < 0)
		return negative_errno();
	*ret_known = sx.attributes_mask & asked;
	*ret_attrs = sx.attributes & asked;
	return 0;
}

int statx_rename_blocker(int dfd, const char *name)
{
	uint64_t attrs = 0, known = 0;
	int r = statx_attributes(dfd, name, name[0] ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH, &attrs,
				 &known);

	if (r == -ENOSYS || r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if ((attrs & STATX_NODE_MOUNT_ROOT) && name[0])
		return STATX_NODE_MOUNT_ROOT;
	if (attrs & STATX_NODE_IMMUTABLE)
		return STATX_NODE_IMMUTABLE;
	return (int)(attrs & STATX_NODE_APPEND);
}

#define KSTATX_MNT_ID 0x1000u

int statx_mount_id(int fd, uint64_t *ret)
{
	struct kstatx sx;

	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, KSTATX_MNT_ID, &sx) < 0)
		return negative_errno();
	if (!(sx.mask & KSTATX_MNT_ID))
		return -EOPNOTSUPP;
	*ret = sx.spare[0]; /* stx_mnt_id, right after the device numbers */
	return 0;
}

#define KSTATX_INO 0x100u
#define KSTATX_BTIME 0x800u

int statx_birth(int fd, uint64_t *ret_ino, int64_t *ret_sec, uint32_t *ret_nsec,
		int *ret_have_btime)
{
	struct kstatx sx;

	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, KSTATX_INO | KSTATX_BTIME, &sx) < 0)
		return negative_errno();
	if (!(sx.mask & KSTATX_INO))
		return -EOPNOTSUPP;
	*ret_ino = sx.ino;
	*ret_have_btime = (sx.mask & KSTATX_BTIME) != 0;
	*ret_sec = *ret_have_btime ? sx.btime.sec : 0;
	*ret_nsec = *ret_have_btime ? sx.btime.nsec : 0;
	return 0;
}
