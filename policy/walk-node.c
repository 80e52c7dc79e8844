/* What the walk does to one node (walk-node.c): look at it, compute what must change,
 * make the changes in a fail-safe order. The walk itself (walk.c) decides which node and
 * through which fd. */
#include "policy/policy.h"

#include <acl/libacl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/acl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/macro.h"
#include "lib/statx.h"
#include "policy/internal.h"
#include "sandbox-users/users.h"

/* Syscalls newer than the libc headers we build against; since 5.x new syscalls have one
 * number on every architecture. */
#define POLICY_SYS_fchmodat2 452
#define POLICY_SYS_listxattrat 465
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

#define XLIST_MAX POLICY_XLIST_MAX

static atomic_bool no_listxattrat, no_fchmodat2;

const char *policy_proc_fd(int fd, char buf[POLICY_PROC_FD_MAX])
{
	snprintf(buf, POLICY_PROC_FD_MAX, "/proc/thread-self/fd/%d", fd);
	return buf;
}

ssize_t policy_getxattr_fd(int fd, bool opath, const char *name, void *buf, size_t size)
{
	char p[POLICY_PROC_FD_MAX];
	ssize_t n = opath ? getxattr(policy_proc_fd(fd, p), name, buf, size)
			  : fgetxattr(fd, name, buf, size);

	return n < 0 ? (errno == ENOTSUP ? -ENODATA : negative_errno()) : n;
}

/* statx also says whether the node is a mount root. On overlayfs non-directories carry
 * the st_dev of their layer, so "st_dev changed" would stop at every lower-layer file;
 * STATX_ATTR_MOUNT_ROOT (5.8) is the exact question, st_dev the fallback. */
int policy_node_stat(int dfd, const char *name, int flags, struct stat *st, int *ret_mount)
{
	return statx_node(dfd, name, flags, st, ret_mount);
}

/* The default ACL's bytes, to tell ours from a planted one: none, ours, or foreign (any
 * other bytes or error, -ERANGE included: too big to be ours; removing it is safe). */
static int default_acl_state(int fd, bool opath)
{
	uint8_t buf[256];
	ssize_t m = policy_getxattr_fd(fd, opath, POLICY_XATTR_ACL_DEFAULT, buf, sizeof(buf));

	if (m == -ENODATA)
		return POLICY_ACL_DEF_NONE;
	if (m == POLICY_DEFAULT_ACL_SIZE &&
	    !memcmp(buf, policy_default_acl_xattr, POLICY_DEFAULT_ACL_SIZE))
		return POLICY_ACL_DEF_OURS;
	return POLICY_ACL_DEF_FOREIGN;
}

/* A mark of this key's name counts only with the node's own tag, read through its fd;
 * with another it is a foreign mark. */
static int xstate_check_tag(struct policy_mark_key *k, int fd, bool opath, struct policy_xstate *x)
{
	int r = policy_mark_valid(k, fd, opath);

	if (r < 0)
		return r;
	x->closed_mark = r > 0;
	x->mark_foreign |= r == 0;
	return 0;
}

/* Parse a listxattr() name list for the two ACL names; the default ACL's bytes are read
 * only when present (directories). */
static int xstate_from_list(const char *list, ssize_t n, struct policy_mark_key *k, int fd,
			    bool opath, struct policy_xstate *x)
{
	memset(x, 0, sizeof(*x));
	for (ssize_t i = 0; i < n;) {
		const char *name = list + i;
		size_t l = strnlen(name, (size_t)(n - i));

		if (!strcmp(name, POLICY_XATTR_ACL_ACCESS))
			x->acl_access = true;
		else if (!strcmp(name, POLICY_XATTR_CAPS))
			x->caps = true;
		else if (!strncmp(name, POLICY_XATTR_CLOSED_V1,
				  sizeof(POLICY_XATTR_CLOSED_V1) - 1)) {
			int kind = policy_mark_name_kind(k, name);

			x->closed_mark |= kind == POLICY_MARK_NAME_OURS;
			x->mark_foreign |= kind == POLICY_MARK_NAME_FOREIGN;
		} else if (!strcmp(name, POLICY_XATTR_ACL_DEFAULT)) {
			if (fd < 0)
				return -EAGAIN; /* caller re-reads through an fd */
			x->acl_default = default_acl_state(fd, opath);
		}
		i += (ssize_t)l + 1;
	}
	/* Through the fd a mark of this key's name counts only with the node's own tag; by
	 * name, the name is taken for it (the walk checks the tag through the fd wherever
	 * that decides whether root's node opens). */
	return x->closed_mark && fd >= 0 ? xstate_check_tag(k, fd, opath, x) : 0;
}

/* Each ACL asked for by name: for a node whose xattr names do not fit one listxattr()
 * (E2BIG past XATTR_LIST_MAX, 64 KiB: anyone who may write a node may add user.* names
 * to it until they do). The list failing must never hide an ACL, nor keep the walk off
 * the node and what lies below it. */
static int xstate_by_name(struct policy_mark_key *k, int fd, bool opath, struct policy_xstate *x)
{
	ssize_t m = policy_getxattr_fd(fd, opath, POLICY_XATTR_ACL_ACCESS, NULL, 0);

	memset(x, 0, sizeof(*x));
	if (m < 0 && m != -ENODATA)
		return (int)m;
	x->acl_access = m >= 0;
	m = policy_getxattr_fd(fd, opath, POLICY_XATTR_CAPS, NULL, 0);
	if (m < 0 && m != -ENODATA)
		return (int)m;
	x->caps = m >= 0;
	x->acl_default = default_acl_state(fd, opath);
	/* Marks: the first version's name and this key's (another key's names stay unseen
	 * here: a mark that is not this key's counts for nothing either way). */
	m = policy_getxattr_fd(fd, opath, POLICY_XATTR_CLOSED_V1, NULL, 0);
	if (m < 0 && m != -ENODATA)
		return (int)m;
	x->mark_foreign = m >= 0;
	if (policy_mark_key_loaded(k)) {
		m = policy_getxattr_fd(fd, opath, k->name, NULL, 0);
		if (m < 0 && m != -ENODATA)
			return (int)m;
		if (m >= 0)
			return xstate_check_tag(k, fd, opath, x);
	}
	return 0;
}

/* The kernel allocates a buffer of the size it is given (kvmalloc: whole pages for 64 KiB)
 * before it knows how long the list is; almost every node has no xattr or a few short ones.
 * Ask with a small size first and only on -ERANGE with XATTR_LIST_MAX. */
#define XLIST_FIRST 512

ssize_t policy_listxattr_fd(int fd, bool opath, char *list, size_t size)
{
	char p[POLICY_PROC_FD_MAX];

	return opath ? listxattr(policy_proc_fd(fd, p), list, size) : flistxattr(fd, list, size);
}

int policy_xstate_fd(char list[POLICY_XLIST_MAX], struct policy_mark_key *k, int fd, bool opath,
		     struct policy_xstate *x)
{
	ssize_t n = policy_listxattr_fd(fd, opath, list, XLIST_FIRST);

	if (n < 0 && errno == ERANGE)
		n = policy_listxattr_fd(fd, opath, list, XLIST_MAX);
	if (n < 0 && errno == ENOTSUP)
		n = 0;
	if (n < 0 && errno == E2BIG)
		return xstate_by_name(k, fd, opath, x);
	if (n < 0)
		return negative_errno();
	return xstate_from_list(list, n, k, fd, opath, x);
}

/* By name, without opening the node: listxattrat(AT_SYMLINK_NOFOLLOW) (Linux 6.13). Only
 * used to decide that a non-directory is already right; any change re-reads through the
 * node's own fd. -ENOSYS when the kernel lacks it. */
int policy_xstate_at(char list[POLICY_XLIST_MAX], struct policy_mark_key *k, int dfd,
		     const char *name, struct policy_xstate *x)
{
	long n;

	if (atomic_load_explicit(&no_listxattrat, memory_order_relaxed))
		return -ENOSYS;
	n = syscall(POLICY_SYS_listxattrat, dfd, name, AT_SYMLINK_NOFOLLOW, list, XLIST_FIRST);
	if (n < 0 && errno == ERANGE)
		n = syscall(POLICY_SYS_listxattrat, dfd, name, AT_SYMLINK_NOFOLLOW, list,
			    XLIST_MAX);
	if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
		atomic_store(&no_listxattrat, true);
		return -ENOSYS;
	}
	if (n < 0 && errno == ENOTSUP)
		n = 0;
	if (n < 0 && errno == E2BIG)
		return -ENOENT; /* the caller looks again through an fd (xstate_by_name) */
	if (n < 0)
		return negative_errno();
	return xstate_from_list(list, (ssize_t)n, k, -1, false, x);
}

unsigned policy_changes_for(const struct stat *st, const struct policy_xstate *x,
			    const struct policy_target *t)
{
	uid_t uid = t->uid == (uid_t)-1 ? st->st_uid : t->uid;
	unsigned c = 0;

	if (st->st_uid != uid || st->st_gid != t->gid)
		c |= POLICY_CH_OWNER;
	if ((st->st_mode & 07777) != t->mode)
		c |= POLICY_CH_MODE;
	if (x->acl_access)
		c |= POLICY_CH_ACL_ACCESS;
	if (x->caps && !S_ISDIR(st->st_mode))
		c |= POLICY_CH_CAPS;
	if (S_ISDIR(st->st_mode)) {
		bool want = t->flags & POLICY_T_DEFAULT_ACL;

		if (x->acl_default == POLICY_ACL_DEF_FOREIGN ||
		    (x->acl_default == POLICY_ACL_DEF_OURS && !want))
			c |= POLICY_CH_ACL_DEFAULT;
		if (want && x->acl_default != POLICY_ACL_DEF_OURS)
			c |= POLICY_CH_ACL_SET;
	}
	/* A file with a second name keeps a mark it has: it is left as it is, or trimmed
	 * (which may mark it), never opened while the other name is there. */
	if ((t->flags & POLICY_T_MARK) && (!x->closed_mark || x->mark_foreign))
		c |= POLICY_CH_MARK;
	else if (!(t->flags & (POLICY_T_MARK | POLICY_T_KEEP_MARK)) &&
		 (x->closed_mark || x->mark_foreign) && (S_ISDIR(st->st_mode) || st->st_nlink == 1))
		c |= POLICY_CH_UNMARK;
	return c;
}

bool policy_closed_to_agents(const struct stat *st, const struct policy_xstate *x)
{
	/* Read, for a directory also enter; a FIFO or a socket is as much a way in when it
	 * can be written (connect: red team, root's 0600 daemon socket moved in and opened
	 * let every agent talk to the daemon). */
	bool pipe = S_ISFIFO(st->st_mode) || S_ISSOCK(st->st_mode);
	mode_t see = S_ISDIR(st->st_mode) ? 05 : pipe ? 06 : 04;
	bool group = ((st->st_mode >> 3) & see) != 0;

	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode) && !pipe)
		return false;
	if (st->st_uid != 0 && st->st_uid != USERS_TOOLS_UID)
		return false;
	if (st->st_mode & see)
		return false;
	/* With an access ACL the group bits are its mask, and a named entry may be anyone's:
	 * an agent's, or only users no agent is (backup). Nothing tells without reading the
	 * entries, so such a node counts as closed: left as it is, never opened to every
	 * agent (red team: root's file only backup could read, moved in, was opened). An
	 * agent an entry names reads it as before. So does a group that is one agent's own:
	 * open to that agent, closed to the others (a Kubernetes fsGroup walk with an agent's
	 * gid gives root's private 0600 file that group and 0660; a write apply then shared
	 * it with every agent). Pistis never gives root's nodes an agent's group. */
	return !group || x->acl_access || st->st_gid != USERS_SANDBOX_GID;
}

bool policy_private_node(const struct stat *st, const struct policy_xstate *x)
{
	bool marked = x->closed_mark && (S_ISDIR(st->st_mode) || S_ISREG(st->st_mode));

	return !marked && (S_ISDIR(st->st_mode) || st->st_nlink == 1) &&
	       policy_closed_to_agents(st, x);
}

bool policy_marks_supported(int dfd, const char *name)
{
	char p[POLICY_PROC_FD_MAX + NAME_MAX + 2];
	ssize_t n;

	/* The magic link to dfd is followed; name itself is not (lgetxattr). */
	if (name && *name) {
		snprintf(p, sizeof(p), "/proc/thread-self/fd/%d/%s", dfd, name);
		n = lgetxattr(p, POLICY_XATTR_CLOSED_V1, NULL, 0);
	} else {
		n = getxattr(policy_proc_fd(dfd, p), POLICY_XATTR_CLOSED_V1, NULL, 0);
	}
	/* Only a file system that says it keeps no user.* xattrs goes without marks: any
	 * other failure (the rule's path renamed away for a moment by an agent that may
	 * write its parent) must not turn them off and open root's private files. */
	return n >= 0 || (errno != ENOTSUP && errno != EOPNOTSUPP);
}

/* Someone would have more access now than the target gives. */
bool policy_looser_than(const struct stat *st, const struct policy_xstate *x,
			const struct policy_target *t)
{
	return (st->st_mode & 07777 & ~t->mode) || x->acl_access ||
	       (x->caps && !S_ISDIR(st->st_mode));
}

/* A node left as it is (a second name) whose owner is not the one the rule names, nor
 * root: whatever the walk took off its mode, the owner can put back through any of its
 * names (an agent's own inode linked into a "none" tree, which a root process may later
 * write into). The tree does not conform while it is there. */
bool policy_owner_reopens(const struct stat *st, const struct policy_target *t)
{
	return t->uid != (uid_t)-1 && st->st_uid != t->uid && st->st_uid != 0;
}

/* The intermediate mode before owner or ACL changes: only bits both the old and the new
 * state grant, no setuid/setgid/sticky; no group bits at all when the group changes,
 * so the old group never holds, even for a moment, what only the new one should. */
static mode_t tighten_mode(const struct stat *st, const struct policy_target *t)
{
	mode_t keep = st->st_gid != t->gid ? 0707 : 0777;

	/* The sticky bit a pin asks for only takes away (renaming or removing what others
	 * own): at once, not after the directory's whole subtree (red team: for that walk a
	 * pinned directory was root's, group-writable and not sticky). */
	return (st->st_mode & t->mode & keep) | (t->mode & S_ISVTX);
}

void policy_trim_target(const struct stat *st, const struct policy_target *t,
			struct policy_target *ret)
{
	/* Owner and group as they are; each class of the mode keeps only what it has and
	 * the rule grants it: the owner's bits where it is the rule's owner, else what the
	 * rule grants everyone (the "other" bits); the same for the group; never a set-id
	 * bit. Access ACLs go (policy_changes_for counts one as a change against any
	 * target). */
	mode_t m = st->st_mode, tm = t->mode, o = tm & 07;
	mode_t u = (t->uid == (uid_t)-1 || st->st_uid == t->uid) ? (tm >> 6) & 07 : o;
	mode_t g = st->st_gid == t->gid ? (tm >> 3) & 07 : o;

	*ret = (struct policy_target){
		.uid = st->st_uid,
		.gid = st->st_gid,
		.mode = (m & 0700 & (u << 6)) | (m & 0070 & (g << 3)) | (m & 0007 & o),
	};
}

bool policy_agents_may_write(const struct stat *st)
{
	return users_uid_is_agent(st->st_uid) ||
	       (st->st_gid == USERS_SANDBOX_GID && (st->st_mode & 0020)) || (st->st_mode & 0002);
}

bool policy_agents_may_write_x(const struct stat *st, const struct policy_xstate *x)
{
	return policy_agents_may_write(st) || x->acl_access ||
	       (users_uid_is_agent(st->st_gid) && (st->st_mode & 0020));
}

bool policy_hardlinks_protected(void)
{
	char c = 0;
	int fd = open("/proc/sys/fs/protected_hardlinks", O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return false;
	if (read(fd, &c, 1) != 1)
		c = 0;
	close(fd);
	return c == '1';
}

static int do_chmod(int fd, bool opath, mode_t mode)
{
	char p[POLICY_PROC_FD_MAX];

	if (!opath)
		return RET_NERRNO(fchmod(fd, mode));
	/* fchmod() refuses O_PATH fds; fchmodat2(AT_EMPTY_PATH) (6.6) takes them, else the
	 * fd's magic link, which names this inode and nothing an agent can swap. */
	if (!atomic_load_explicit(&no_fchmodat2, memory_order_relaxed)) {
		if (syscall(POLICY_SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
			return 0;
		if (errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP && errno != EPERM)
			return negative_errno();
		atomic_store(&no_fchmodat2, true);
	}
	return RET_NERRNO(chmod(policy_proc_fd(fd, p), mode));
}

int policy_removexattr_fd(int fd, bool opath, const char *name)
{
	char p[POLICY_PROC_FD_MAX];
	int r = opath ? removexattr(policy_proc_fd(fd, p), name) : fremovexattr(fd, name);

	if (r < 0 && errno != ENODATA)
		return negative_errno();
	return 0;
}

static int set_default_acl(int dir_fd)
{
	char p[POLICY_PROC_FD_MAX];
	acl_t acl = acl_from_text("u::rwx,g::rwx,o::---");
	int r;

	if (!acl)
		return negative_errno();
	/* acl_set_file on the fd's magic link: a default ACL cannot be set through an fd. */
	r = acl_set_file(policy_proc_fd(dir_fd, p), ACL_TYPE_DEFAULT, acl) < 0 ? negative_errno()
									       : 0;
	acl_free(acl);
	if (r == -ENOENT) /* no /proc: the same bytes through the fd */
		r = RET_NERRNO(fsetxattr(dir_fd, POLICY_XATTR_ACL_DEFAULT, policy_default_acl_xattr,
					 POLICY_DEFAULT_ACL_SIZE, 0));
	return r < 0 ? r : 0;
}

/* A new group takes access away from the new group's members, who had the "other" bits and
 * get the group bits, and from the old group's, who lose theirs: unless the node gave
 * nobody but its owner anything (a node under "none", say), when no one has anything to
 * lose (an access ACL is counted on its own). */
bool policy_takes_away(const struct stat *st, const struct policy_xstate *x,
		       const struct policy_target *t)
{
	uid_t uid = t->uid == (uid_t)-1 ? st->st_uid : t->uid;

	return tighten_mode(st, t) != (st->st_mode & 07777) || x->acl_access ||
	       (x->caps && !S_ISDIR(st->st_mode)) ||
	       (S_ISDIR(st->st_mode) && x->acl_default != POLICY_ACL_DEF_NONE) ||
	       st->st_uid != uid || (st->st_gid != t->gid && (st->st_mode & 0077));
}

/* A non-directory may skip the intermediate chmod when nobody could gain in the window
 * between chown and the final chmod: no ACL to strip, no setuid/setgid bits, and the
 * change of owner or group hands nobody more than they had (the new group gets the old
 * group bits where it had the "other" bits; a former owner gets group/other bits).
 * Directories always take the step: their final mode waits for the whole subtree. */
static bool chown_window_is_safe(const struct stat *st, const struct policy_xstate *x,
				 const struct policy_target *t)
{
	mode_t mo = st->st_mode;
	unsigned u = (mo >> 6) & 7, g = (mo >> 3) & 7, o = mo & 7;
	uid_t uid = t->uid == (uid_t)-1 ? st->st_uid : t->uid;

	if (x->acl_access || (mo & 07000))
		return false;
	if (st->st_gid != t->gid && g != o)
		return false;
	if (st->st_uid != uid && ((g | o) & ~u))
		return false;
	return true;
}

/* Until the chown, the node's old owner could still chmod it and set its ACLs: after the
 * tightening and the ACL removal above, before the chown took them from it (red team: a
 * default ACL planted in that window stayed on a directory that was root's now, under a
 * read rule, and every file root made there later was the agent's to write; a chmod 0777
 * kept root's directory open to the agent for its whole subtree walk, so entries made
 * after its listing stayed the agent's). The new owner is root or pi-tools and the old
 * one can change neither any more, so one look after the chown closes the window. A
 * file's final chmod, right after, sets its whole mode; a directory's waits for its
 * subtree, so its mode is tightened again here. */
static int recheck_after_owner_change(int fd, bool opath, struct stat *st, mode_t m,
				      const struct policy_target *t)
{
	int r, d;

	if (!S_ISDIR(st->st_mode)) {
		/* The final mode now, then the ACL: removing an access ACL leaves the group
		 * bits as its mask had them, which the old owner may have set to rwx. */
		r = do_chmod(fd, opath, t->mode);
		if (r < 0)
			return r;
		st->st_mode = (st->st_mode & S_IFMT) | t->mode;
		return policy_removexattr_fd(fd, opath, POLICY_XATTR_ACL_ACCESS);
	}
	if (fstat(fd, st) < 0)
		return negative_errno();
	if ((st->st_mode & 07777) != m) {
		r = do_chmod(fd, opath, m);
		if (r < 0)
			return r;
		st->st_mode = (st->st_mode & S_IFMT) | m;
	}
	r = policy_removexattr_fd(fd, opath, POLICY_XATTR_ACL_ACCESS);
	if (r < 0)
		return r;
	d = default_acl_state(fd, opath);
	if (d == POLICY_ACL_DEF_FOREIGN ||
	    (d == POLICY_ACL_DEF_OURS && !(t->flags & POLICY_T_DEFAULT_ACL)))
		return policy_removexattr_fd(fd, opath, POLICY_XATTR_ACL_DEFAULT);
	return 0;
}

/* Everything that takes access away, in an order where no intermediate state is looser
 * than both the old and the new one:
 *   1. chmod to the bits both grant (drops setuid/setgid, group bits if the group changes)
 *      — before the ACLs go, because removing an access ACL hands the mask to the owning
 *      group;
 *   2. remove the planted access ACL and a foreign default ACL;
 *   3. chown (the new owner is root, pi-tools or unchanged; the group has no bits yet).
 * What gives access (the final mode, our default ACL) comes last, in policy_apply_post(); for a
 * directory only after its subtree is done, so nothing beneath is reachable early. */
int policy_apply_pre(int fd, bool opath, struct stat *st, const struct policy_xstate *x,
		     const struct policy_target *t)
{
	uid_t uid = t->uid == (uid_t)-1 ? st->st_uid : t->uid;
	mode_t m = tighten_mode(st, t);
	int r;

	if (!S_ISDIR(st->st_mode) && chown_window_is_safe(st, x, t))
		m = st->st_mode & 07777; /* the final chmod does it all, atomically */
	if (m != (st->st_mode & 07777)) {
		r = do_chmod(fd, opath, m);
		if (r < 0)
			return r;
	}
	if (x->acl_access) {
		r = policy_removexattr_fd(fd, opath, POLICY_XATTR_ACL_ACCESS);
		if (r < 0)
			return r;
	}
	/* File capabilities lift whoever runs the file, as a setuid bit does, and a shared
	 * mmap write changes its bytes without dropping them; chown drops them, but a node
	 * whose owner and group are right is not chowned (root's cap_setuid binary made in
	 * a write tree's setgid directory is pi-sandbox's already). Taken off before the
	 * final mode, which may open the file to agents. */
	if (x->caps && !S_ISDIR(st->st_mode)) {
		r = policy_removexattr_fd(fd, opath, POLICY_XATTR_CAPS);
		if (r < 0)
			return r;
	}
	if (S_ISDIR(st->st_mode) && x->acl_default != POLICY_ACL_DEF_NONE &&
	    !(x->acl_default == POLICY_ACL_DEF_OURS && (t->flags & POLICY_T_DEFAULT_ACL))) {
		r = policy_removexattr_fd(fd, opath, POLICY_XATTR_ACL_DEFAULT);
		if (r < 0)
			return r;
	}
	if (st->st_uid != uid || st->st_gid != t->gid) {
		if (fchownat(fd, "", uid, t->gid, AT_EMPTY_PATH) < 0)
			return negative_errno();
		if (st->st_uid != uid) /* st: what the node has now */
			return recheck_after_owner_change(fd, opath, st, m, t);
		/* chown may clear setuid/setgid. A file: force the final chmod (one call,
		 * instead of an fstat to learn what chown left); a directory: re-read. */
		if (!S_ISDIR(st->st_mode)) {
			st->st_mode = (st->st_mode & S_IFMT) | (t->mode ^ 07777); /* != t->mode */
			return 0;
		}
		return RET_NERRNO(fstat(fd, st));
	}
	st->st_mode = (st->st_mode & S_IFMT) | m;
	return 0;
}

int policy_apply_post(struct policy_mark_key *k, int fd, bool opath, const struct stat *st,
		      const struct policy_target *t, unsigned post)
{
	int r;

	/* A node is never marked and open: the mark goes before the mode that opens the node
	 * (red team: an agent spinning on getxattr read the real tag of a file a write rule
	 * was opening, between its chmod 0660 and the mark's removal, and put it back on the
	 * file, shared now; when root later made it 0600 for a secret, the next apply opened
	 * it again: a tag read off a node names that node for as long as it lives). A walk
	 * stopped in between leaves it closed and unmarked: left closed (fail-safe). */
	if (post & POLICY_CH_UNMARK) {
		/* A directory the target opens to the group goes through group search only
		 * first: still closed to reading (its tag and listing, for which getxattr and
		 * getdents want read), but no longer taken for root's private directory. A
		 * walk stopped between the mark's removal and the opening chmod left it
		 * closed and unmarked, and every later apply left it so ("left … private"). */
		mode_t cur = st->st_mode & 07777;

		if (S_ISDIR(st->st_mode) && (t->mode & 0050) == 0050 && !(cur & 0050)) {
			r = do_chmod(fd, opath, cur | 0010);
			if (r < 0)
				return r;
		}
		r = policy_mark_drop(k, fd, opath, false);
		if (r < 0)
			return r;
	}
	if ((st->st_mode & 07777) != t->mode) {
		r = do_chmod(fd, opath, t->mode);
		if (r < 0)
			return r;
	}
	if (post & POLICY_CH_ACL_SET) {
		r = set_default_acl(fd);
		if (r < 0)
			return r;
	}
	/* The mark last: closed first, for the same reason (a walk stopped in between leaves
	 * the node closed and unmarked: a later write rule leaves it closed). */
	if (post & POLICY_CH_MARK)
		return policy_mark_set(k, fd, opath);
	return 0;
}
