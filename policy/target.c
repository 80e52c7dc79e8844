/* What each level puts on a node, and the kernel's permission check: pure functions. */
#include "policy/policy.h"

#include <string.h>

#include "sandbox-users/users.h"

/* u::rwx g::rwx o::--- as struct posix_acl_xattr_header + entries (linux/posix_acl_xattr.h):
 * version 2, then {tag, perm, id} little-endian, ids unused (-1) for the *_OBJ tags. */
const uint8_t policy_default_acl_xattr[POLICY_DEFAULT_ACL_SIZE] = {
	0x02, 0x00, 0x00, 0x00,				/* version */
	0x01, 0x00, 0x07, 0x00, 0xff, 0xff, 0xff, 0xff, /* ACL_USER_OBJ rwx */
	0x04, 0x00, 0x07, 0x00, 0xff, 0xff, 0xff, 0xff, /* ACL_GROUP_OBJ rwx */
	0x20, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, /* ACL_OTHER --- */
};

void policy_target_for(enum policy_access access, bool secrets, mode_t st_mode, uid_t st_uid,
		       struct policy_target *ret)
{
	bool dir = S_ISDIR(st_mode);
	bool exec = (st_mode & 0111) != 0;
	bool device = S_ISCHR(st_mode) || S_ISBLK(st_mode);

	(void)st_uid;
	memset(ret, 0, sizeof(*ret));
	/* Modes from scratch, never old | bits: a stale setuid bit must not come back
	 * (SECURITY.md). Executable files keep being runnable; nothing else is read from
	 * the old mode. */
	switch (access) {
	case POLICY_NONE:
		/* The secrets dir belongs to pi-tools (trusted commands read it as that
		 * user): "none" closes it to everyone else and keeps that owner. */
		ret->uid = secrets ? USERS_TOOLS_UID : 0;
		ret->gid = secrets ? USERS_TOOLS_UID : 0;
		ret->mode = dir ? 0700 : exec && S_ISREG(st_mode) ? 0700 : 0600;
		break;
	case POLICY_READ:
		ret->uid = 0;
		ret->gid = 0;
		ret->mode = dir ? 0755 : exec && S_ISREG(st_mode) ? 0755 : 0644;
		if (device)
			ret->flags |= POLICY_T_LEAVE;
		break;
	case POLICY_WRITE:
	default:
		/* Agents' files stay theirs (and root's stay root's); the group makes them
		 * shared. */
		ret->uid = (uid_t)-1;
		ret->gid = USERS_SANDBOX_GID;
		ret->mode = dir ? 02770 : exec && S_ISREG(st_mode) ? 0770 : 0660;
		if (dir)
			ret->flags |= POLICY_T_DEFAULT_ACL;
		if (device)
			ret->flags |= POLICY_T_LEAVE;
		break;
	}
}

void policy_target_pin(const struct policy_rules *r, const char *path, size_t len,
		       struct policy_target *t)
{
	/* Under a write rule an agent may rename anything in a directory it can write, if
	 * the sticky bit does not stop it (it stops renaming and removing entries the agent
	 * does not own, in a directory it does not own). A none or read rule is matched by
	 * path: renamed away, its tree would be write-level content at the next walk, root's
	 * files group-writable. So every directory from the write rule down to it is root's
	 * and sticky: the protected directory (root's) cannot be renamed, nor any directory
	 * on the way (root's too), and agents still create, write and remove their own files
	 * in them through the group. The same above a tree of pistis's own (the homes, its
	 * state): renamed away and replaced, it would be an agent's. */
	if (t->gid != USERS_SANDBOX_GID || !(t->flags & POLICY_T_DEFAULT_ACL) ||
	    !(policy_rules_stricter_below(r, path, len) || policy_reserved_below(path, len)))
		return;
	t->uid = 0;
	t->mode |= S_ISVTX;
	t->flags |= POLICY_T_PINNED;
}

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool in_groups(gid_t g, const gid_t *gids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (gids[i] == g)
			return true;
	return false;
}

/* The kernel's acl_permission_check/posix_acl_permission for a non-root caller. */
bool policy_permits(uid_t file_uid, gid_t file_gid, mode_t mode, const void *acl, size_t acl_len,
		    uid_t uid, const gid_t *gids, size_t ngids, unsigned want)
{
	const uint8_t *a = acl;
	size_t n;
	unsigned mask = 7;
	bool found = false, have_mask = false;

	want &= 7;
	if (uid == file_uid)
		return ((mode >> 6) & want) == want;
	if (!a || acl_len < 4 || le32(a) != 2 || (acl_len - 4) % 8 != 0) {
		if (in_groups(file_gid, gids, ngids))
			return ((mode >> 3) & want) == want;
		return (mode & want) == want;
	}
	n = (acl_len - 4) / 8;
	for (size_t i = 0; i < n; i++)
		if (le16(a + 4 + i * 8) == 0x10)
			mask = le16(a + 4 + i * 8 + 2) & 7, have_mask = true;
	(void)have_mask;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = a + 4 + i * 8;

		if (le16(e) == 0x02 && le32(e + 4) == uid)
			return (le16(e + 2) & mask & want) == want;
	}
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = a + 4 + i * 8;
		uint16_t tag = le16(e);
		bool match = (tag == 0x04 && in_groups(file_gid, gids, ngids)) ||
			     (tag == 0x08 && in_groups((gid_t)le32(e + 4), gids, ngids));

		if (!match)
			continue;
		if ((le16(e + 2) & mask & want) == want)
			return true;
		found = true;
	}
	if (found)
		return false;
	return (mode & want) == want;
}
