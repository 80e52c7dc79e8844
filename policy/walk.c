/* The walk that applies rules: fd-based, never follows a symlink, never opens a FIFO,
 * socket or device for I/O, stays on one file system, bounded in depth, fds, memory and
 * time, and writes a node only when it is not already right. The reasons are in
 * SECURITY.md ("Walking trees the agent can write"); the order of changes on one node is
 * explained at apply_pre(). */
#include "policy/policy.h"

#include <acl/libacl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/acl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "lib/macro.h"
#include "policy/internal.h"

/* Syscalls newer than the libc headers we build against; since 5.x new syscalls have one
 * number on every architecture. */
#define POLICY_SYS_fchmodat2 452
#define POLICY_SYS_listxattrat 465
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

#define DENTS_BUF (64 * 1024)
#define FD_RESERVE 32 /* fds kept free for the rest of the process */

const char *policy_proc_fd(int fd, char buf[POLICY_PROC_FD_MAX])
{
	snprintf(buf, POLICY_PROC_FD_MAX, "/proc/self/fd/%d", fd);
	return buf;
}

ssize_t policy_getxattr_fd(int fd, bool opath, const char *name, void *buf, size_t size)
{
	char p[POLICY_PROC_FD_MAX];
	ssize_t n = opath ? getxattr(policy_proc_fd(fd, p), name, buf, size)
			  : fgetxattr(fd, name, buf, size);

	return n < 0 ? (errno == ENOTSUP ? -ENODATA : negative_errno()) : n;
}

struct frame {
	int fd;
	size_t path_len;
	struct stat st; /* of the fd, after the pre-order changes */
	struct policy_target tgt;
	bool pending; /* post-order: final mode / default ACL still to do */
	bool acl_set;
	bool has_below;
	bool secrets;
	bool seek;
	off_t resume;
};

struct walker {
	int root_fd;
	const struct policy_rules *rules;
	const struct policy_walk_opts *o;
	struct policy_stats st;
	const struct policy_rule *rule;
	dev_t dev;
	char *path;
	size_t path_len, path_cap;
	struct frame *frames;
	unsigned depth, max_depth;
	char *dents;
	bool tighten_called;
	int abort_r;
	struct timespec deadline;
	bool has_deadline;
};

static bool no_listxattrat, no_fchmodat2;

/* struct statx as the kernel lays it out (stable ABI): musl before 1.2.5 has no statx(). */
struct policy_statx {
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
#define PSTATX_BASIC (0x1u | 0x2u | 0x4u | 0x8u | 0x10u | 0x100u) /* type mode nlink uid gid ino */
#define PSTATX_ATTR_MOUNT_ROOT 0x2000u

/* statx also says whether the node is a mount root. On overlayfs non-directories carry
 * the st_dev of their layer, so "st_dev changed" would stop at every lower-layer file;
 * STATX_ATTR_MOUNT_ROOT (5.8) is the exact question, st_dev the fallback. */
static int node_stat(int dfd, const char *name, int flags, struct stat *st, int *ret_mount)
{
	struct policy_statx sx;

	if (syscall(SYS_statx, dfd, name, flags, PSTATX_BASIC, &sx) < 0)
		return negative_errno();
	memset(st, 0, sizeof(*st));
	st->st_mode = sx.mode;
	st->st_uid = sx.uid;
	st->st_gid = sx.gid;
	st->st_nlink = sx.nlink;
	st->st_ino = sx.ino;
	st->st_dev = makedev(sx.dev_major, sx.dev_minor);
	if (sx.attributes_mask & PSTATX_ATTR_MOUNT_ROOT)
		*ret_mount = (sx.attributes & PSTATX_ATTR_MOUNT_ROOT) ? 1 : 0;
	else
		*ret_mount = -1; /* unknown: caller compares st_dev */
	return 0;
}

/* The rule's own path may be a mount point (a volume); nothing beneath it may. */
static bool crosses_fs(const struct walker *w, const struct stat *st, int mount)
{
	if (w->depth == 0)
		return false;
	return mount > 0 || (mount < 0 && st->st_dev != w->dev);
}

/* What we know about a node's ACLs. */
enum { ACL_DEF_NONE, ACL_DEF_OURS, ACL_DEF_FOREIGN };
struct xstate {
	bool acl_access;
	int acl_default;
};

static void emit(struct walker *w, enum policy_event_kind kind, int error, unsigned changes,
		 const struct stat *st, const struct policy_target *t, bool violation)
{
	struct policy_event ev = {
		.kind = kind,
		.path = w->path,
		.path_len = w->path_len,
		.rule = w->rule,
		.error = error,
		.changes = changes,
		.violation = violation,
	};

	if (st) {
		ev.old_uid = st->st_uid, ev.old_gid = st->st_gid, ev.old_mode = st->st_mode;
		ev.new_uid = st->st_uid, ev.new_gid = st->st_gid, ev.new_mode = st->st_mode;
	}
	if (st && t) {
		ev.new_uid = t->uid == (uid_t)-1 ? st->st_uid : t->uid;
		ev.new_gid = t->gid;
		ev.new_mode = (st->st_mode & S_IFMT) | t->mode;
	}
	if (kind == POLICY_EV_ERROR || kind == POLICY_EV_NOT_DONE || kind == POLICY_EV_SYMLINK)
		w->st.errors++;
	if (violation)
		w->st.violations++;
	if (w->o->on_event)
		w->o->on_event(w->o->userdata, &ev);
}

static int path_push(struct walker *w, const char *name, size_t n)
{
	size_t need = w->path_len + 1 + n + 1;

	if (need > w->path_cap) {
		size_t cap = need * 2;
		char *p = realloc(w->path, cap);

		if (!p)
			return -ENOMEM;
		w->path = p;
		w->path_cap = cap;
	}
	if (!(w->path_len == 1 && w->path[0] == '/'))
		w->path[w->path_len++] = '/';
	memcpy(w->path + w->path_len, name, n);
	w->path_len += n;
	w->path[w->path_len] = '\0';
	return 0;
}

static void path_pop(struct walker *w, size_t len)
{
	w->path_len = len;
	w->path[len] = '\0';
}

/* Parse a listxattr() name list for the two ACL names; the default ACL's bytes are read
 * only when present (directories), to tell ours from a planted one. */
static int xstate_from_list(const char *list, ssize_t n, int fd, bool opath, struct xstate *x)
{
	memset(x, 0, sizeof(*x));
	for (ssize_t i = 0; i < n;) {
		const char *name = list + i;
		size_t l = strnlen(name, (size_t)(n - i));

		if (!strcmp(name, POLICY_XATTR_ACL_ACCESS))
			x->acl_access = true;
		else if (!strcmp(name, POLICY_XATTR_ACL_DEFAULT)) {
			uint8_t buf[256];
			ssize_t m;

			if (fd < 0)
				return -EAGAIN; /* caller re-reads through an fd */
			m = policy_getxattr_fd(fd, opath, POLICY_XATTR_ACL_DEFAULT, buf,
					       sizeof(buf));
			if (m == -ENODATA)
				x->acl_default = ACL_DEF_NONE;
			else if (m == POLICY_DEFAULT_ACL_SIZE &&
				 !memcmp(buf, policy_default_acl_xattr, POLICY_DEFAULT_ACL_SIZE))
				x->acl_default = ACL_DEF_OURS;
			else
				x->acl_default =
					ACL_DEF_FOREIGN; /* incl. -ERANGE: too big to be ours */
		}
		i += (ssize_t)l + 1;
	}
	return 0;
}

static int xstate_fd(int fd, bool opath, struct xstate *x)
{
	static char list[65536]; /* XATTR_LIST_MAX: one walk at a time per process */
	char p[POLICY_PROC_FD_MAX];
	ssize_t n = opath ? listxattr(policy_proc_fd(fd, p), list, sizeof(list))
			  : flistxattr(fd, list, sizeof(list));

	if (n < 0 && errno == ENOTSUP)
		n = 0;
	if (n < 0)
		return negative_errno();
	return xstate_from_list(list, n, fd, opath, x);
}

/* By name, without opening the node: listxattrat(AT_SYMLINK_NOFOLLOW) (Linux 6.13). Only
 * used to decide that a non-directory is already right; any change re-reads through the
 * node's own fd. -ENOSYS when the kernel lacks it. */
static int xstate_at(int dfd, const char *name, struct xstate *x)
{
	static char list[65536];
	long n;

	if (no_listxattrat)
		return -ENOSYS;
	n = syscall(POLICY_SYS_listxattrat, dfd, name, AT_SYMLINK_NOFOLLOW, list, sizeof(list));
	if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
		no_listxattrat = true;
		return -ENOSYS;
	}
	if (n < 0 && errno == ENOTSUP)
		n = 0;
	if (n < 0)
		return negative_errno();
	return xstate_from_list(list, (ssize_t)n, -1, false, x);
}

static unsigned changes_for(const struct stat *st, const struct xstate *x,
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
	if (S_ISDIR(st->st_mode)) {
		bool want = t->flags & POLICY_T_DEFAULT_ACL;

		if (x->acl_default == ACL_DEF_FOREIGN || (x->acl_default == ACL_DEF_OURS && !want))
			c |= POLICY_CH_ACL_DEFAULT;
		if (want && x->acl_default != ACL_DEF_OURS)
			c |= POLICY_CH_ACL_SET;
	}
	return c;
}

/* Someone would have more access now than the target gives. */
static bool looser_than(const struct stat *st, const struct xstate *x,
			const struct policy_target *t)
{
	return (st->st_mode & 07777 & ~t->mode) || x->acl_access;
}

/* The intermediate mode before owner or ACL changes: only bits both the old and the new
 * state grant, no setuid/setgid/sticky; no group bits at all when the group changes,
 * so the old group never holds, even for a moment, what only the new one should. */
static mode_t tighten_mode(const struct stat *st, const struct policy_target *t)
{
	mode_t keep = st->st_gid != t->gid ? 0707 : 0777;

	return st->st_mode & t->mode & keep;
}

static int do_chmod(int fd, bool opath, mode_t mode)
{
	char p[POLICY_PROC_FD_MAX];

	if (!opath)
		return RET_NERRNO(fchmod(fd, mode));
	/* fchmod() refuses O_PATH fds; fchmodat2(AT_EMPTY_PATH) (6.6) takes them, else the
	 * fd's magic link, which names this inode and nothing an agent can swap. */
	if (!no_fchmodat2) {
		if (syscall(POLICY_SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
			return 0;
		if (errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP && errno != EPERM)
			return negative_errno();
		no_fchmodat2 = true;
	}
	return RET_NERRNO(chmod(policy_proc_fd(fd, p), mode));
}

static int do_removexattr(int fd, bool opath, const char *name)
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

static bool takes_away(const struct stat *st, const struct xstate *x, const struct policy_target *t)
{
	uid_t uid = t->uid == (uid_t)-1 ? st->st_uid : t->uid;

	return tighten_mode(st, t) != (st->st_mode & 07777) || x->acl_access ||
	       (S_ISDIR(st->st_mode) && x->acl_default != ACL_DEF_NONE) || st->st_uid != uid ||
	       st->st_gid != t->gid;
}

static int notify_tighten(struct walker *w)
{
	int r;

	if (w->tighten_called || !w->o->before_tighten)
		return 0;
	w->tighten_called = true;
	r = w->o->before_tighten(w->o->userdata);
	if (r < 0)
		w->abort_r = r;
	return r;
}

/* A non-directory may skip the intermediate chmod when nobody could gain in the window
 * between chown and the final chmod: no ACL to strip, no setuid/setgid bits, and the
 * change of owner or group hands nobody more than they had (the new group gets the old
 * group bits where it had the "other" bits; a former owner gets group/other bits).
 * Directories always take the step: their final mode waits for the whole subtree. */
static bool chown_window_is_safe(const struct stat *st, const struct xstate *x,
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

/* Everything that takes access away, in an order where no intermediate state is looser
 * than both the old and the new one:
 *   1. chmod to the bits both grant (drops setuid/setgid, group bits if the group changes)
 *      — before the ACLs go, because removing an access ACL hands the mask to the owning
 *      group;
 *   2. remove the planted access ACL and a foreign default ACL;
 *   3. chown (the new owner is root, pi-tools or unchanged; the group has no bits yet).
 * What gives access (the final mode, our default ACL) comes last, in apply_post(); for a
 * directory only after its subtree is done, so nothing beneath is reachable early. */
static int apply_pre(int fd, bool opath, struct stat *st, const struct xstate *x,
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
		r = do_removexattr(fd, opath, POLICY_XATTR_ACL_ACCESS);
		if (r < 0)
			return r;
	}
	if (S_ISDIR(st->st_mode) && x->acl_default != ACL_DEF_NONE &&
	    !(x->acl_default == ACL_DEF_OURS && (t->flags & POLICY_T_DEFAULT_ACL))) {
		r = do_removexattr(fd, opath, POLICY_XATTR_ACL_DEFAULT);
		if (r < 0)
			return r;
	}
	if (st->st_uid != uid || st->st_gid != t->gid) {
		if (fchownat(fd, "", uid, t->gid, AT_EMPTY_PATH) < 0)
			return negative_errno();
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

static int apply_post(int fd, bool opath, const struct stat *st, const struct policy_target *t,
		      bool want_acl_set)
{
	int r;

	if ((st->st_mode & 07777) != t->mode) {
		r = do_chmod(fd, opath, t->mode);
		if (r < 0)
			return r;
	}
	if (want_acl_set) {
		r = set_default_acl(fd);
		if (r < 0)
			return r;
	}
	return 0;
}

static bool time_is_up(struct walker *w)
{
	struct timespec now;

	if (!w->has_deadline)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > w->deadline.tv_sec ||
	       (now.tv_sec == w->deadline.tv_sec && now.tv_nsec >= w->deadline.tv_nsec);
}

static void tick(struct walker *w)
{
	w->st.entries++;
	if ((w->st.entries & 1023) == 0 && time_is_up(w) && !w->abort_r)
		w->abort_r = -ETIME;
	if ((w->st.entries & 4095) == 0 && w->o->on_progress)
		w->o->on_progress(w->o->userdata, &w->st);
}

static void push_frame(struct walker *w, int fd, const struct stat *st,
		       const struct policy_target *t, bool pending, bool acl_set, bool secrets)
{
	struct frame *f = &w->frames[w->depth++];

	*f = (struct frame){
		.fd = fd,
		.path_len = w->path_len,
		.st = *st,
		.tgt = *t,
		.pending = pending,
		.acl_set = acl_set,
		.secrets = secrets,
		.has_below = policy_rules_has_below(w->rules, w->path, w->path_len),
	};
}

/* A directory: opened (O_DIRECTORY|O_NOFOLLOW: a real directory or nothing), checked,
 * its pre-order changes made, pushed for reading. */
static void visit_dir(struct walker *w, int fd, bool secrets)
{
	_cleanup_close_ int dfd = fd;
	struct policy_target t;
	struct xstate x;
	struct stat st;
	unsigned changes;
	bool apply = w->o->mode == POLICY_APPLY, pending = false;
	int r, mount;

	w->st.dirs++;
	r = node_stat(dfd, "", AT_EMPTY_PATH, &st, &mount);
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, NULL, NULL, false);
	if (crosses_fs(w, &st, mount))
		return (void)(w->st.skipped++, emit(w, POLICY_EV_OTHER_FS, 0, 0, &st, NULL, false));
	policy_target_for(w->rule->access, secrets, st.st_mode, st.st_uid, &t);
	r = xstate_fd(dfd, false, &x);
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, &st, &t, false);
	changes = changes_for(&st, &x, &t);
	if (changes) {
		w->st.changed++;
		emit(w, POLICY_EV_CHANGE, 0, changes, &st, &t, w->o->mode == POLICY_CHECK);
	}
	if (changes && apply) {
		if (takes_away(&st, &x, &t) && notify_tighten(w) < 0)
			return;
		r = apply_pre(dfd, false, &st, &x, &t);
		if (r < 0)
			emit(w, POLICY_EV_ERROR, r, changes, &st, &t, false);
		else
			pending = (st.st_mode & 07777) != t.mode || (changes & POLICY_CH_ACL_SET);
	}
	if (w->depth >= w->max_depth) {
		/* Not descending: the subtree stays as it is, so this directory gets only the
		 * changes that take access away (already made), never the final loosening. */
		w->st.skipped++;
		emit(w, POLICY_EV_TOO_DEEP, 0, 0, &st, NULL, false);
		return;
	}
	push_frame(w, TAKE_FD(dfd), &st, &t, pending, (changes & POLICY_CH_ACL_SET) != 0, secrets);
}

/* A non-directory (or an entry of unknown type) named name in dfd. */
static void visit(struct walker *w, int dfd, const char *name, unsigned char d_type, bool secrets)
{
	_cleanup_close_ int fd = -1;
	struct policy_target t;
	struct xstate x;
	struct stat st, st2;
	unsigned changes;
	int r, mount = -1;

	tick(w);
	if (d_type == DT_LNK) {
		w->st.symlinks++;
		return;
	}
	if (d_type == DT_DIR || d_type == DT_UNKNOWN) {
		/* Try the directory first: O_NOFOLLOW|O_DIRECTORY fails on anything else. */
		fd = openat(dfd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
				    O_NOCTTY);
		if (fd >= 0)
			return visit_dir(w, TAKE_FD(fd), secrets);
		if (errno == ENOENT)
			return (void)(w->st.skipped++,
				      emit(w, POLICY_EV_VANISHED, 0, 0, NULL, NULL, false));
		if (errno != ENOTDIR && errno != ELOOP)
			return emit(w, POLICY_EV_ERROR, negative_errno(), 0, NULL, NULL, false);
	}
	r = node_stat(dfd, name, AT_SYMLINK_NOFOLLOW, &st, &mount);
	if (r == -ENOENT)
		return (void)(w->st.skipped++,
			      emit(w, POLICY_EV_VANISHED, 0, 0, NULL, NULL, false));
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, NULL, NULL, false);
	if (S_ISLNK(st.st_mode)) {
		w->st.symlinks++;
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		/* Became a directory since getdents: take it as one, through an fd. */
		fd = openat(dfd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
				    O_NOCTTY);
		if (fd < 0)
			return (void)(w->st.skipped++,
				      emit(w, POLICY_EV_VANISHED, 0, 0, NULL, NULL, false));
		return visit_dir(w, TAKE_FD(fd), secrets);
	}
	if (crosses_fs(w, &st, mount))
		return (void)(w->st.skipped++, emit(w, POLICY_EV_OTHER_FS, 0, 0, &st, NULL, false));

	r = xstate_at(dfd, name, &x);
	if (r == -ENOSYS || r == -ENOENT) {
		/* Old kernel: look through an O_PATH fd (never opened for I/O). */
		fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return (void)(w->st.skipped++,
				      emit(w, POLICY_EV_VANISHED, 0, 0, NULL, NULL, false));
		if (fstat(fd, &st) < 0)
			return emit(w, POLICY_EV_ERROR, negative_errno(), 0, NULL, NULL, false);
		if (S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode))
			return (void)(w->st.skipped++,
				      emit(w, POLICY_EV_VANISHED, 0, 0, NULL, NULL, false));
		r = xstate_fd(fd, true, &x);
	}
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, &st, NULL, false);

	policy_target_for(w->rule->access, secrets, st.st_mode, st.st_uid, &t);
	changes = changes_for(&st, &x, &t);
	if (!changes)
		return;
	if (st.st_nlink > 1 || (t.flags & POLICY_T_LEAVE)) {
		/* Another name may be outside the tree (/etc/shadow linked into a workspace):
		 * never chowned, never made more permissive — left as it is and reported. */
		w->st.skipped++;
		return emit(w, st.st_nlink > 1 ? POLICY_EV_HARDLINK : POLICY_EV_DEVICE, 0, changes,
			    &st, &t, w->o->mode == POLICY_CHECK && looser_than(&st, &x, &t));
	}
	w->st.changed++;
	emit(w, POLICY_EV_CHANGE, 0, changes, &st, &t, w->o->mode == POLICY_CHECK);
	if (w->o->mode != POLICY_APPLY)
		return;

	/* From here on only the fd counts: it must be the very node we looked at. */
	if (fd < 0) {
		fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return (void)(w->st.skipped++,
				      emit(w, POLICY_EV_VANISHED, 0, 0, NULL, NULL, false));
		if (fstat(fd, &st2) < 0)
			return emit(w, POLICY_EV_ERROR, negative_errno(), 0, NULL, NULL, false);
		if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino ||
		    (st2.st_mode & S_IFMT) != (st.st_mode & S_IFMT))
			return (void)(w->st.skipped++,
				      emit(w, POLICY_EV_VANISHED, 0, 0, NULL, NULL, false));
		/* Same inode as looked at by name (dev/ino/type checked above): its mode and
		 * owner are re-read from the fd; the ACL state read by name a moment ago
		 * stands (an ACL planted after this point is no different from one planted
		 * after the walk passed; the next apply strips it). */
		st = st2;
		policy_target_for(w->rule->access, secrets, st.st_mode, st.st_uid, &t);
		if (st.st_nlink > 1 || !changes_for(&st, &x, &t))
			return;
	}
	if (takes_away(&st, &x, &t) && notify_tighten(w) < 0)
		return;
	r = apply_pre(fd, true, &st, &x, &t);
	if (r >= 0)
		r = apply_post(fd, true, &st, &t, false);
	if (r < 0)
		emit(w, POLICY_EV_ERROR, r, changes, &st, &t, false);
}

static void finish_frame(struct walker *w, bool complete)
{
	struct frame *f = &w->frames[w->depth - 1];
	int r;

	path_pop(w, f->path_len);
	if (f->pending && complete) {
		r = apply_post(f->fd, false, &f->st, &f->tgt, f->acl_set);
		if (r < 0)
			emit(w, POLICY_EV_ERROR, r, POLICY_CH_MODE, &f->st, &f->tgt, false);
	} else if (!complete) {
		emit(w, POLICY_EV_NOT_DONE, w->abort_r, 0, &f->st, NULL, false);
	}
	safe_close(f->fd);
	w->depth--;
	if (w->depth > 0)
		path_pop(w, w->frames[w->depth - 1].path_len);
}

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Stream the directory on top of the stack. One shared getdents buffer: when a child
 * directory is pushed mid-buffer, the parent remembers d_off and seeks back on return,
 * so memory does not grow with depth and no listing is held whole. */
static void run_stack(struct walker *w, unsigned base)
{
	while (w->depth > base) {
		struct frame *f = &w->frames[w->depth - 1];
		long n;

		if (w->abort_r) {
			finish_frame(w, false);
			continue;
		}
		if (f->seek) {
			f->seek = false;
			if (lseek(f->fd, f->resume, SEEK_SET) < 0) {
				emit(w, POLICY_EV_ERROR, negative_errno(), 0, &f->st, NULL, false);
				finish_frame(w, false);
				continue;
			}
		}
		n = syscall(SYS_getdents64, f->fd, w->dents, DENTS_BUF);
		if (n < 0) {
			emit(w, POLICY_EV_ERROR, negative_errno(), 0, &f->st, NULL, false);
			finish_frame(w, false);
			continue;
		}
		if (n == 0) {
			finish_frame(w, true);
			continue;
		}
		for (long pos = 0; pos < n && !w->abort_r;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(w->dents + pos);
			const char *name = d->d_name;
			size_t len = strlen(name);
			unsigned before = w->depth;
			int64_t off = d->d_off;
			unsigned char type = d->d_type;

			pos += d->d_reclen;
			if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')))
				continue;
			if (path_push(w, name, len) < 0) {
				w->abort_r = -ENOMEM;
				break;
			}
			/* A more specific rule owns that subtree; it gets its own walk. */
			if (f->has_below &&
			    policy_rules_find(w->rules, w->path, w->path_len) >= 0) {
				path_pop(w, f->path_len);
				continue;
			}
			visit(w, f->fd, name, type,
			      f->secrets || (w->rule->access == POLICY_NONE &&
					     policy_path_under(POLICY_SECRETS_DIR,
							       strlen(POLICY_SECRETS_DIR), w->path,
							       w->path_len)));
			if (w->depth > before) {
				/* Descend now; come back to the next entry. */
				if (pos < n) {
					f->seek = true;
					f->resume = off;
				}
				break;
			}
			path_pop(w, f->path_len);
		}
	}
}

static void walk_rule(struct walker *w, const struct policy_rule *rule)
{
	_cleanup_close_ int pfd = -1;
	const char *name = ".";
	char parent[POLICY_PATH_MAX + 1];
	bool secrets = rule->access == POLICY_NONE &&
		       policy_path_under(POLICY_SECRETS_DIR, strlen(POLICY_SECRETS_DIR), rule->path,
					 rule->len);
	struct stat st;
	int r;

	w->rule = rule;
	if (w->path_cap < rule->len + 2) {
		char *p = realloc(w->path, rule->len + 2);

		if (!p) {
			w->abort_r = -ENOMEM;
			return;
		}
		w->path = p;
		w->path_cap = rule->len + 2;
	}
	memcpy(w->path, rule->path, rule->len + 1);
	w->path_len = rule->len;

	if (rule->len > 1) {
		const char *slash = strrchr(rule->path, '/');
		size_t plen = (size_t)(slash - rule->path);

		memcpy(parent, rule->path, plen);
		parent[plen ? plen : 1] = '\0';
		if (!plen)
			parent[0] = '/';
		name = slash + 1;
	} else {
		strcpy(parent, "/");
	}
	r = policy_resolve(w->root_fd, parent, O_PATH | O_DIRECTORY, &pfd);
	if (r == -ENOENT || r == -ENOTDIR) {
		w->st.skipped++;
		return emit(w, POLICY_EV_MISSING, r, 0, NULL, NULL, false);
	}
	if (r == -ELOOP)
		return emit(w, POLICY_EV_SYMLINK, r, 0, NULL, NULL, false);
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, NULL, NULL, false);
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT) {
			w->st.skipped++;
			return emit(w, POLICY_EV_MISSING, -ENOENT, 0, NULL, NULL, false);
		}
		return emit(w, POLICY_EV_ERROR, negative_errno(), 0, NULL, NULL, false);
	}
	if (S_ISLNK(st.st_mode))
		return emit(w, POLICY_EV_SYMLINK, -ELOOP, 0, &st, NULL, false);
	/* The walk stays on the file system of the rule's own path (a volume is fine). */
	w->dev = st.st_dev;
	visit(w, pfd, name, S_ISDIR(st.st_mode) ? DT_DIR : DT_UNKNOWN, secrets);
	run_stack(w, 0);
}

int policy_walk(int root_fd, const struct policy_rules *rules, const struct policy_walk_opts *opts,
		struct policy_stats *ret_stats)
{
	struct walker w = {
		.root_fd = root_fd,
		.rules = rules,
		.o = opts,
	};
	struct rlimit rl;
	int r;

	w.max_depth = opts->max_depth ? opts->max_depth : POLICY_DEPTH_MAX;
	/* One fd per level: the depth bound never exceeds what RLIMIT_NOFILE allows. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)w.max_depth + FD_RESERVE)
		w.max_depth = rl.rlim_cur > FD_RESERVE * 2 ? (unsigned)(rl.rlim_cur - FD_RESERVE)
							   : FD_RESERVE;
	if (opts->timeout_sec) {
		clock_gettime(CLOCK_MONOTONIC, &w.deadline);
		w.deadline.tv_sec += opts->timeout_sec;
		w.has_deadline = true;
	}
	w.frames = calloc(w.max_depth + 1, sizeof(*w.frames));
	w.dents = malloc(DENTS_BUF);
	w.path_cap = 4096;
	w.path = malloc(w.path_cap);
	if (!w.frames || !w.dents || !w.path) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < rules->n && !w.abort_r; i++)
		walk_rule(&w, &rules->rules[i]);
	r = w.abort_r;
out:
	if (ret_stats)
		*ret_stats = w.st;
	free(w.frames);
	free(w.dents);
	free(w.path);
	return r;
}
