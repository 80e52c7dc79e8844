/* sandbox-users, the side with effects: load the registry and /etc under their locks,
 * let db.c decide, write back atomically, make the homes. */
#include "sandbox-users/scan.h"
#include "sandbox-users/users.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/key-file.h"
#include "lib/macro.h"
#include "lib/id-map.h"
#include "lib/statx.h"
#include "sandbox-users/arena.h"
#include "sandbox-users/db.h"
#include "sandbox-users/fs.h"
#include "sandbox-users/ident.h"
#include "sandbox-users/users-internal.h"

/* The last reason twice: raw (for JSON answers, which escape it) and as text, each name in
 * it escaped once (for a log's %-s): names from the image's /etc may hold a quote. */
static char last_error[600], last_error_text[600];

const char *users_last_error(void)
{
	return last_error;
}

const char *users_last_error_text(void)
{
	return last_error_text;
}

bool users_error_is_sentence(int r)
{
	return last_error[0] && (r == -ERANGE || r == -EUSERS);
}

static int set_error(int r, const char *fmt, ...) _printf_(2, 3);
static int set_error(int r, const char *fmt, ...)
{
	va_list ap, aq;

	va_start(ap, fmt);
	va_copy(aq, ap);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	escape_vformat(last_error_text, sizeof(last_error_text), "cut", 0, fmt, aq);
	va_end(aq);
	va_end(ap);
	return r;
}

static void clear_error(void)
{
	last_error[0] = last_error_text[0] = '\0';
}

/* The ids the base users' lines name, and an agent's (id NULL: the base only), must be ones
 * this user namespace maps (lib/id-map.h) before a line is written or a home made: in a
 * namespace that maps only 0-9999 (rootless Docker or Podman, --userns-remap, unprivileged
 * LXC with a small range) the lines were written, the home made root's 0700, and then its
 * chown failed with a bare "cannot make /data/sandbox-home/... (Invalid argument)"; the
 * agent's next command failed at setresgid. Now nothing is written and the reason is
 * named. */
static int ids_mapped(const struct users_identity *id)
{
	const struct id_map_need base[] = USERS_ID_MAP_BASE;
	struct id_map_need needs[ELEMENTSOF(base) + 2];
	size_t n = ELEMENTSOF(base);
	char why[512];
	int r;

	memcpy(needs, base, sizeof(base));
	if (id) {
		needs[n++] = (struct id_map_need){"the agent", id->uid, id->uid, false};
		needs[n++] = (struct id_map_need){"the agent's group", id->gid, id->gid, true};
	}
	r = id_map_check_needs(needs, n, false, why, sizeof(why));
	if (r == -ERANGE)
		return set_error(r,
				 "%s: give the container a user namespace that maps uids and gids "
				 "0-65535 (pistisd check: id_map)",
				 why);
	return r < 0 ? set_error(r, "%s", why) : 0;
}

struct ctx {
	int root_fd, etc_fd, data_fd, reg_fd; /* reg_fd: data/pistis */
	int reg_lock, pwd_lock;
	struct users_db db;
	struct stat st[_PWFILE_KIND_MAX];
	struct stat reg_st;
	bool reg_present;
	/* The registry as the lock-free fast path read it, with its fd kept open, for
	 * load_registry to take over when the file has not been replaced since. */
	char *pre_reg;
	size_t pre_reg_len;
	struct stat pre_reg_st;
	int pre_reg_fd;
};

#define CTX_NULL                                                                                   \
	{                                                                                          \
		.root_fd = -1, .etc_fd = -1, .data_fd = -1, .reg_fd = -1, .reg_lock = -1,          \
		.pwd_lock = -1, .pre_reg_fd = -1                                                   \
	}

static bool memory_left_to_exit;

void users_leave_memory_to_exit(void)
{
	memory_left_to_exit = true;
}

static void ctx_done(struct ctx *c)
{
	/* The fds always: they hold the locks, which go as soon as the call is over. */
	safe_close(c->pre_reg_fd);
	safe_close(c->pwd_lock);
	safe_close(c->reg_lock);
	safe_close(c->reg_fd);
	safe_close(c->data_fd);
	safe_close(c->etc_fd);
	safe_close(c->root_fd);
	if (!memory_left_to_exit) {
		uarena_free(c->pre_reg);
		users_db_done(&c->db);
	}
	/* After the frees above, which leave arena blocks alone: the arena goes at once. */
	uarena_end(memory_left_to_exit);
}

/* Whether the registry may be believed: root-owned and writable by nobody else. The one
 * rule for /data/pistis, its registry and its lock, on the fds themselves. */
static bool registry_trusted(const struct stat *st)
{
	return st->st_uid == 0 && !(st->st_mode & 0022);
}

/* Whether /etc and the files of the passwd family there may be believed and rewritten:
 * root_only_writable_at (agents are never in group 0; an ACL is never believed to keep
 * them out where the group bits allow write). Where anyone else may write them,
 * an agent could have given itself uid 0 or a place in another agent's group, and could
 * again after we checked. */
static bool etc_trusted(int etc_fd, const char *name, const struct stat *st)
{
	return root_only_writable_at(etc_fd, name, st);
}

static int etc_untrusted_error(const char *path, const struct stat *st)
{
	return set_error(-EPERM,
			 "%s is owned by %u:%u with mode %04o: it must be root's and writable by "
			 "no one else (root's group at most); not trusted",
			 path, (unsigned)st->st_uid, (unsigned)st->st_gid,
			 (unsigned)(st->st_mode & 07777));
}

/* What to add when a directory of ours could not be opened: ufs_open_dir refuses a
 * symbolic link with -ELOOP, which strerror alone ("Symbolic link loop") misnames. */
static const char *link_note(int r)
{
	return r == -ELOOP ? " (a symbolic link: refused)" : "";
}

/* The one way to /data/pistis, for every path (ensure, its lock-free fast path, lookup,
 * list, show, remove): opened without following links (made root 0700 when create), and
 * refused unless the opened directory is root-owned and not group/other-writable, so that
 * a registry planted in a directory an agent owns is never read. c->reg_fd stays -1 when
 * it is missing and !create. */
static int registry_dir_open(struct ctx *c, bool create)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	if (create) {
		/* An existing one keeps its mode until it passed the check below: a root-owned
		 * but world-writable /data/pistis is refused, not quietly repaired over
		 * whatever was planted in it meanwhile. */
		r = ufs_mkdir_owned(c->data_fd, "pistis", 0, 0, 0700, UFS_KEEP_EXISTING);
		if (r == -EPERM)
			return set_error(r, "/data/pistis is not owned by root; refusing to trust "
					    "or repair it");
		if (r < 0)
			return set_error(r, "cannot make /data/pistis root-only");
	} else {
		r = ufs_open_dir(c->data_fd, "pistis");
		if (r == -ENOENT)
			return 0;
		if (r < 0)
			return set_error(r, "cannot open /data/pistis%s", link_note(r));
	}
	fd = r;
	if (fstat(fd, &st) < 0)
		return set_error(-errno, "cannot stat /data/pistis");
	if (!registry_trusted(&st))
		return set_error(-EPERM,
				 "/data/pistis is owned by uid %u with mode %04o: it must be "
				 "root-owned and not group/other-writable; its registry is not "
				 "trusted",
				 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	/* 0755 made by an operator or an image: root-only from now on. */
	if (create && (st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
		return set_error(-errno, "cannot make /data/pistis root-only");
	c->reg_fd = TAKE_FD(fd);
	return 0;
}

/* The one way to the registry's bytes: read through ufs_read_file (no link, a regular file,
 * O_NONBLOCK) from the checked directory, and refused unless the file read is root-owned
 * and not group/other-writable. -ENOENT when there is none yet (no error set). */
static int registry_read(struct ctx *c, char **ret, size_t *ret_len, struct stat *ret_st,
			 int *ret_fd)
{
	_cleanup_uarena_ char *buf = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	r = ufs_read_file(c->reg_fd, USERS_REGISTRY_FILE, REGISTRY_SIZE_MAX, &buf, ret_len, &st,
			  ret_fd ? &fd : NULL);
	if (r == -ENOENT)
		return r;
	if (r == -EBADFD)
		return set_error(r, "/data/pistis/%s is not a regular file", USERS_REGISTRY_FILE);
	if (r < 0)
		return set_error(r, "cannot read /data/pistis/%s", USERS_REGISTRY_FILE);
	if (!registry_trusted(&st))
		return set_error(-EPERM,
				 "/data/pistis/%s is owned by uid %u with mode %04o: it must be "
				 "root-owned and not group/other-writable; not trusted",
				 USERS_REGISTRY_FILE, (unsigned)st.st_uid,
				 (unsigned)(st.st_mode & 07777));
	if (ret_st)
		*ret_st = st;
	if (ret_fd)
		*ret_fd = TAKE_FD(fd);
	*ret = TAKE_PTR(buf);
	return 0;
}

/* Whether two stats of one name are of the same version of the file: the same inode
 * (st_dev, st_ino) with the same size, mtime and ctime. Every writer here replaces a file
 * by rename (a new inode); one that writes in place changes size or times. */
static bool same_version(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Whether the registry read before the lock is still the registry: the same inode under
 * the name, unchanged. Every writer of the registry holds the lock we now hold and
 * replaces the file by rename, never in place; the fd kept open since the read pins the
 * inode, so its number cannot have been reused by a newer file. Size, mtime and ctime
 * (and so owner and mode) must match too, against anyone writing in place without the
 * lock, which the lock could not have kept out of a second read either. */
static bool pre_registry_current(const struct ctx *c)
{
	const struct stat *a = &c->pre_reg_st;
	struct stat b;

	if (!c->pre_reg || c->pre_reg_fd < 0 ||
	    fstatat(c->reg_fd, USERS_REGISTRY_FILE, &b, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return same_version(a, &b) && a->st_uid == b.st_uid && a->st_mode == b.st_mode;
}

/* Both locks go through here: a FIFO, device or socket in place of a lock file would block
 * or do worse; it is refused with the file named. */
static int lock_file(int dir_fd, const char *path, const char *name, unsigned flags)
{
	int r = ufs_lock(dir_fd, name, USERS_LOCK_TIMEOUT_MS, flags);

	if (r == -EBADFD)
		return set_error(r,
				 "cannot lock %s: not a regular file (a FIFO, device or socket "
				 "is refused)",
				 path);
	if (r == -EPERM)
		return set_error(r, "cannot lock %s: not root-owned%s", path,
				 (flags & UFS_NO_GROUP_OTHER_WRITE) ? ", or group/other-writable"
								    : "");
	if (r == -ELOOP)
		return set_error(r, "cannot lock %s: it is a symlink", path);
	if (r == -EROFS)
		return set_error(
			r,
			"cannot lock %s: read-only file system: agents' users are written "
			"into /etc/passwd and /etc/group, and the registry into /data, so "
			"both must be writable (docker run --read-only cannot hold agents)",
			path);
	if (r == -ETIMEDOUT)
		return set_error(r, "cannot lock %s within %u s (is another user tool running?)",
				 path, USERS_LOCK_TIMEOUT_MS / 1000);
	if (r < 0)
		return set_error(r, "cannot lock %s", path);
	return r;
}

static int registry_lock(struct ctx *c)
{
	return lock_file(c->reg_fd, "/data/pistis/" USERS_REGISTRY_LOCK, USERS_REGISTRY_LOCK,
			 UFS_NO_GROUP_OTHER_WRITE);
}

/* pi-tools' shell: the image's nologin, else /bin/false. Looked for only when pi-tools is
 * about to be created. */
static void pick_nologin(struct ctx *c)
{
	static const char *const shells[] = {"usr/sbin/nologin", "sbin/nologin"};
	struct stat st;

	c->db.nologin = "/bin/false";
	for (size_t i = 0; i < ELEMENTSOF(shells); i++)
		if (fstatat(c->root_fd, shells[i], &st, 0) == 0 && S_ISREG(st.st_mode)) {
			c->db.nologin = i == 0 ? "/usr/sbin/nologin" : "/sbin/nologin";
			break;
		}
}

static int ctx_open(struct ctx *c, const char *root, bool create_data)
{
	struct stat st;
	int r;

	*c = (struct ctx)CTX_NULL;
	uarena_begin(); /* ended by ctx_done */
	c->root_fd = open(root ? root : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->root_fd < 0)
		return set_error(-errno, "cannot open root directory '%s'", root ? root : "/");
	r = ufs_open_dir(c->root_fd, "etc");
	if (r < 0)
		return set_error(r, "cannot open '%s/etc'%s", root ? root : "", link_note(r));
	c->etc_fd = r;
	if (fstat(c->etc_fd, &st) < 0)
		return set_error(-errno, "cannot stat /etc");
	if (!etc_trusted(c->etc_fd, "", &st))
		return etc_untrusted_error("/etc", &st);

	r = ufs_open_dir(c->root_fd, "data");
	if (r == -ENOENT && create_data) {
		if (mkdirat(c->root_fd, "data", 0755) < 0 && errno != EEXIST)
			return set_error(-errno, "cannot create /data");
		r = ufs_open_dir(c->root_fd, "data");
	}
	if (r < 0 && !(r == -ENOENT && !create_data))
		return set_error(r, "cannot open /data%s", link_note(r));
	c->data_fd = r < 0 ? -1 : r;
	if (c->data_fd >= 0) {
		r = registry_dir_open(c, create_data);
		if (r < 0)
			return r;
	}
	return 0;
}

static int load_registry(struct ctx *c)
{
	_cleanup_uarena_ char *buf = NULL;
	size_t len = 0, line = 0;
	const char *why = NULL;
	int r;

	registry_done(&c->db.reg);
	c->reg_present = false;
	if (c->reg_fd < 0)
		return 0;
	if (pre_registry_current(c)) {
		buf = TAKE_PTR(c->pre_reg);
		len = c->pre_reg_len;
		c->reg_st = c->pre_reg_st;
		r = 0;
	} else
		r = registry_read(c, &buf, &len, &c->reg_st, NULL);
	uarena_free(c->pre_reg);
	c->pre_reg = NULL;
	c->pre_reg_fd = safe_close(c->pre_reg_fd);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	c->reg_present = true;
	/* Every line's syntax and the duplicates are checked here; a name's derivation
	 * from its id when the record is used (db.c), not 50,000 SHA-256 per call. */
	r = registry_parse_owned(TAKE_PTR(buf), len, true, &c->db.reg, &line, &why);
	if (r < 0)
		return set_error(r, "/data/pistis/%s:%zu: %s; nothing written", USERS_REGISTRY_FILE,
				 line, why ? why : "invalid");
	return 0;
}

static int load_etc(struct ctx *c)
{
	for (int k = 0; k < _PWFILE_KIND_MAX; k++) {
		_cleanup_uarena_ char *buf = NULL;
		const char *name = pwfile_kind_name(k), *why = NULL;
		size_t len = 0, line = 0;
		int r;

		pwfile_done(&c->db.f[k]);
		c->db.present[k] = false;
		r = ufs_read_file(c->etc_fd, name, PWFILE_SIZE_MAX, &buf, &len, &c->st[k], NULL);
		if (r == -ENOENT && (k == PWFILE_SHADOW || k == PWFILE_GSHADOW)) {
			/* Not every base has them; an empty, absent file stays absent. */
			c->db.f[k].kind = k;
			continue;
		}
		/* ufs_read_file's refusals, said as the registry's and the locks' are (a FIFO
		 * said "File descriptor in bad state", a symlink "Symbolic link loop") */
		if (r == -EBADFD)
			return set_error(r,
					 "/etc/%s is not a regular file (a FIFO, device, socket or "
					 "directory is refused); nothing written",
					 name);
		if (r == -ELOOP)
			return set_error(r,
					 "/etc/%s is a symlink (refused: it is replaced by rename, "
					 "never followed); nothing written",
					 name);
		if (r < 0)
			return set_error(r, "cannot read /etc/%s", name);
		if (!etc_trusted(c->etc_fd, name, &c->st[k])) {
			char path[32];

			snprintf(path, sizeof(path), "/etc/%s", name);
			return etc_untrusted_error(path, &c->st[k]);
		}
		r = pwfile_parse_owned(k, TAKE_PTR(buf), len, &c->db.f[k], &line, &why);
		if (r < 0)
			return set_error(r, "/etc/%s:%zu: %s; nothing written", name, line,
					 why ? why : "invalid");
		c->db.present[k] = true;
	}
	return 0;
}

/* The directories of a new agent's homes that users_homes_ensure will make, made here
 * already, root-owned 0700 and empty, while the staged files are being written out: the
 * inode allocation of a mkdir (a walk of the inode bitmap, on ext4 past every recently
 * freed inode) then overlaps the device's writes instead of following the data barrier.
 * They carry no uid: users_homes_ensure hands them to the agent (fchown, fchmod through
 * the fd) only after the registry is durable, as before, and takes a root-owned home
 * over just as it takes one an operator made. tmp is not made here: in a directory the
 * agent writes only a tmp it owns or this very call made is taken. A best effort: any
 * error is left for users_homes_ensure to meet and report, but for one it would meet after
 * the registry was written: a directory there of another uid's (the home of an agent
 * forgotten since, whose uid went to another: red team), or something that is no
 * directory and no symlink. That is refused now, with nothing written. *made: which ones
 * it made (bit 0 the home, bit 1 the agent directory), for homes_precreate_undo. */
static int homes_precreate(int data_fd, const struct users_identity *id, unsigned *made)
{
	static const char *const parents[] = {"sandbox-home", "agents"};

	*made = 0;
	for (size_t i = 0; i < ELEMENTSOF(parents); i++) {
		_cleanup_close_ int p = -1;
		struct stat st;
		/* The parents as users_homes_ensure leaves them (root 0711); a root-owned
		 * parent is all this needs. */
		p = ufs_mkdir_owned(data_fd, parents[i], 0, 0, 0711, 0);
		if (p < 0)
			break;
		if (mkdirat(p, id->name, 0700) == 0) {
			*made |= 1u << i;
			continue;
		}
		if (errno != EEXIST || fstatat(p, id->name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    S_ISLNK(st.st_mode))
			continue;
		if (!S_ISDIR(st.st_mode))
			return set_error(-ENOTDIR,
					 "cannot make /data/%s/%s: something else is there; "
					 "nothing written",
					 parents[i], id->name);
		if (st.st_uid != 0 && st.st_uid != id->uid)
			return set_error(-EPERM,
					 "cannot make /data/%s/%s: it exists with another owner "
					 "(uid %u, an earlier agent's?); nothing written",
					 parents[i], id->name, (unsigned)st.st_uid);
	}
	return 0;
}

/* A failed write-back removes the empty directories homes_precreate made (rmdir: never
 * one with anything in it). */
static void homes_precreate_undo(int data_fd, const struct users_identity *id, unsigned made)
{
	static const char *const parents[] = {"sandbox-home", "agents"};

	for (size_t i = 0; i < ELEMENTSOF(parents); i++) {
		_cleanup_close_ int p = -1;
		if (!(made & (1u << i)))
			continue;
		p = openat(data_fd, parents[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (p >= 0)
			(void)unlinkat(p, id->name, AT_REMOVEDIR);
	}
}

/* The registry's rename, durable (the fsync of its directory) before anything goes on;
 * what failing leaves is said after the cause: left. */
static int commit_registry(struct ctx *c, struct ufs_staged *reg, const char *left)
{
	int r = ufs_commit(reg);

	if (r < 0)
		return set_error(r, "cannot replace /data/pistis/%s; %s", USERS_REGISTRY_FILE,
				 left);
	if (fsync(c->reg_fd) < 0)
		return set_error(-errno, "cannot sync /data/pistis");
	return 0;
}

/* Whether the file (or directory, name "") at path can be replaced by rename, asked
 * before anything is staged: a rename over a file mounted there (docker run -v
 * /etc/passwd:/etc/passwd, a Kubernetes subPath) fails with EBUSY, and one over an
 * immutable or append-only file, or in such a directory (chattr +i, +a), with EPERM. The
 * registry is committed first and /etc in four renames, so meeting either at its rename
 * left the registry, /etc/shadow, /etc/gshadow and /etc/group naming an agent that
 * /etc/passwd lacked, said only "cannot replace /etc/passwd (Resource busy)", and every
 * later ensure failed the same way (red team). Nor is writing into a mounted file an
 * option: it is often the host's own /etc/passwd. */
static int replaceable(int dfd, const char *name, const char *path)
{
	int r = statx_rename_blocker(dfd, name);

	if (r < 0)
		return set_error(r, "cannot stat %s; nothing written", path);
	if (r == STATX_NODE_MOUNT_ROOT)
		return set_error(
			-EBUSY,
			"%s is a mount point (a file mounted over it, e.g. docker run -v "
			"%s:%s): pistisd users replaces it by rename, which a mount "
			"refuses, and never writes into a file shared with another system; "
			"nothing written: give the container its own %s",
			path, path, path, path);
	if (r != 0) {
		char flag = r == STATX_NODE_IMMUTABLE ? 'i' : 'a';

		return set_error(-EPERM,
				 "%s is %s (chattr +%c): pistisd users replaces the account files "
				 "by rename, which that forbids; nothing written: clear it with "
				 "chattr -%c %s",
				 path, flag == 'i' ? "immutable" : "append-only", flag, flag, path);
	}
	return 0;
}

/* Every name write_back will replace, and the directories it renames in, replaceable. */
static int write_back_possible(struct ctx *c)
{
	char path[32];
	bool any_etc = false;
	int r;

	for (int k = 0; k < _PWFILE_KIND_MAX; k++) {
		if (!c->db.present[k] || !c->db.f[k].changed)
			continue;
		snprintf(path, sizeof(path), "/etc/%s", pwfile_kind_name(k));
		r = replaceable(c->etc_fd, pwfile_kind_name(k), path);
		if (r < 0)
			return r;
		any_etc = true;
	}
	if (any_etc && (r = replaceable(c->etc_fd, "", "/etc")) < 0)
		return r;
	if (!c->db.reg.changed || c->reg_fd < 0)
		return 0;
	if (c->reg_present && (r = replaceable(c->reg_fd, USERS_REGISTRY_FILE,
					       "/data/pistis/" USERS_REGISTRY_FILE)) < 0)
		return r;
	return replaceable(c->reg_fd, "", "/data/pistis");
}

/* Each /etc file about to be replaced still the version load_etc read (inode, size,
 * mtime, ctime): a tool that does not take /etc/.pwd.lock (busybox's adduser, musl has no
 * lckpwdf, a script's sed -i or >>) that replaced or edited one meanwhile would otherwise
 * lose its change to our rename, the account it added gone without a word. Asked after
 * the slow part (the sync), right before the first rename; the staged copies of the
 * attributes (copy_xattrs, by name) are of this same version then. */
static int etc_unchanged(struct ctx *c)
{
	for (int k = 0; k < _PWFILE_KIND_MAX; k++) {
		const struct stat *a = &c->st[k];
		struct stat b;

		if (!c->db.present[k] || !c->db.f[k].changed)
			continue;
		if (fstatat(c->etc_fd, pwfile_kind_name(k), &b, AT_SYMLINK_NOFOLLOW) < 0)
			return set_error(-errno, "cannot stat /etc/%s; nothing changed",
					 pwfile_kind_name(k));
		if (!same_version(a, &b))
			return set_error(
				-EAGAIN,
				"/etc/%s changed while pistisd users held /etc/.pwd.lock (a "
				"tool that does not take that lock wrote it); nothing "
				"changed: run it again",
				pwfile_kind_name(k));
	}
	return 0;
}

/* Stage every changed file, make all of their data durable at once, then commit:
 * 1. write the new content of the registry and each changed /etc file (no sync yet):
 *    into the previous backup "<name>-" when no one has it open, else into "<name>+";
 * 2. ufs_sync: start writeback of all, then fdatasync each — nothing is renamed over a
 *    real file before its new content is on disk, so a crash or a full disk at any point
 *    leaves every file whole (old or new), never partial;
 * 3. the registry's rename, then fsync of its directory: the record is durable before any
 *    /etc file names the user, and before a home or a process can carry the uid;
 * 4. the /etc renames (shadow before passwd), no directory sync: losing one in a crash
 *    rolls /etc back to its previous whole version, which the next ensure completes from
 *    the registry exactly as after a rebuild (docs/users.md, "Files written, and how").
 * A forget (remove --forget drops the record) goes the other way: the /etc renames, an
 * fsync of /etc, then the registry. Cut short, the record is still there for the next
 * remove to find; the other way round left the user in /etc with no record, which no
 * remove could take out (a new ensure of the id got another name). */
static int write_back(struct ctx *c, const struct users_identity *ids, size_t n_ids, bool forget)
{
	/* shadow before passwd: a user never shows up in passwd before its shadow line. */
	static const int order[] = {PWFILE_SHADOW, PWFILE_GSHADOW, PWFILE_GROUP, PWFILE_PASSWD};
	struct ufs_staged reg = {.fd = -1}, etc[ELEMENTSOF(order)];
	struct ufs_staged *all[1 + ELEMENTSOF(order)];
	_cleanup_uarena_ char *reg_tail = NULL;
	struct iovec reg_iov[2];
	size_t reg_n = 0, n_all = 0;
	unsigned char made[USERS_BATCH_MAX] = {0};
	int r = 0;

	if (n_ids > ELEMENTSOF(made))
		n_ids = ELEMENTSOF(made); /* callers take at most USERS_BATCH_MAX ids */
	r = write_back_possible(c);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(order); i++)
		etc[i] = (struct ufs_staged){.fd = -1};
	if (c->db.reg.changed) {
		r = registry_pieces(&c->db.reg, reg_iov, &reg_n, &reg_tail);
		if (r < 0)
			return set_error(r, "cannot format the registry");
		r = ufs_stage(&reg, c->reg_fd, USERS_REGISTRY_FILE, reg_iov, reg_n, 0, 0, 0600,
			      c->reg_present);
		if (r < 0)
			return set_error(r, "cannot write /data/pistis/%s+; nothing changed",
					 USERS_REGISTRY_FILE);
		all[n_all++] = &reg;
	}
	for (size_t i = 0; i < ELEMENTSOF(order); i++) {
		int k = order[i];
		_cleanup_uarena_ struct iovec *iov = NULL;
		size_t n_iov = 0;
		if (!c->db.present[k] || !c->db.f[k].changed)
			continue;
		r = pwfile_iov(&c->db.f[k], &iov, &n_iov);
		if (r >= 0)
			r = ufs_stage(&etc[i], c->etc_fd, pwfile_kind_name(k), iov, n_iov,
				      c->st[k].st_uid, c->st[k].st_gid, c->st[k].st_mode, true);
		if (r < 0) {
			set_error(r, "cannot write /etc/%s+; nothing changed", pwfile_kind_name(k));
			goto abort;
		}
		all[n_all++] = &etc[i];
	}
	/* The homes' directories while the writes are under way (they wait for nothing). */
	for (size_t i = 0; i < n_ids && n_all > 0 && c->data_fd >= 0; i++) {
		unsigned m;

		r = homes_precreate(c->data_fd, &ids[i], &m);
		made[i] = (unsigned char)m;
		if (r < 0)
			goto abort;
	}
	r = ufs_sync(all, n_all);
	if (r < 0) {
		/* The first not synced is the one that failed (ufs_sync stops syncing there). */
		size_t i = 0;

		while (i + 1 < n_all && all[i]->synced)
			i++;
		set_error(r, "cannot write %s/%s to disk; nothing changed",
			  all[i] == &reg ? "/data/pistis" : "/etc",
			  all[i]->recycled ? all[i]->bak : all[i]->tmp);
		goto abort;
	}
	r = etc_unchanged(c);
	if (r < 0)
		goto abort;
	if (c->db.reg.changed && !forget) {
		r = commit_registry(c, &reg, "nothing changed");
		if (r < 0)
			goto abort;
	}
	for (size_t i = 0; i < ELEMENTSOF(order); i++) {
		r = ufs_commit(&etc[i]);
		if (r < 0) {
			set_error(r, "cannot replace /etc/%s", pwfile_kind_name(order[i]));
			goto abort;
		}
	}
	if (forget) {
		/* The /etc renames durable before the record goes: a crash must not leave
		 * the user in /etc without its record, which no later remove could find. */
		if (fsync(c->etc_fd) < 0) {
			r = set_error(-errno, "cannot sync /etc; the agent stays in the registry");
			goto abort;
		}
		r = commit_registry(c, &reg,
				    "the agent is out of /etc but still in the registry (remove "
				    "it again)");
		if (r < 0)
			goto abort;
	}
	return 0;
abort:
	ufs_abort(&reg);
	for (size_t i = 0; i < ELEMENTSOF(order); i++)
		ufs_abort(&etc[i]);
	for (size_t i = 0; i < n_ids; i++)
		if (made[i])
			homes_precreate_undo(c->data_fd, &ids[i], made[i]);
	return r;
}

/* Take the registry lock, then lckpwdf's: always in this order, so no deadlock. */
static int lock_and_load(struct ctx *c)
{
	int r;

	if (c->reg_fd < 0)
		return set_error(-ENOENT, "/data/pistis is missing");
	r = registry_lock(c);
	if (r < 0)
		return r;
	c->reg_lock = r;
	/* Debian's lckpwdf() creates it root 0600; only the type and the owner are asked of
	 * it (another image's mode is its own business). */
	r = lock_file(c->etc_fd, "/etc/.pwd.lock", ".pwd.lock", 0);
	if (r < 0)
		return r;
	c->pwd_lock = r;
	r = load_registry(c);
	if (r < 0)
		return r;
	r = load_etc(c);
	if (r < 0)
		return r;
	if (pwfile_find_name(&c->db.f[PWFILE_PASSWD], USERS_TOOLS_USER) < 0)
		pick_nologin(c);
	return 0;
}

static int db_error(struct ctx *c, int r)
{
	snprintf(last_error, sizeof(last_error), "%s", c->db.err);
	snprintf(last_error_text, sizeof(last_error_text), "%s", c->db.err_text);
	return r;
}

static int agent_dir_error(int r, const char *path)
{
	if (r == -EBUSY)
		return set_error(r, "%s is a mount point; refusing to hand it to the agent", path);
	if (r == -EPERM)
		return set_error(r, "cannot make %s: it exists with another owner", path);
	return set_error(r, "cannot make %s", path);
}

int users_homes_ensure(int data, const struct users_identity *id)
{
	_cleanup_close_ int homes = -1, agents = -1, home = -1, tmp = -1, own = -1;
	int r;

	if (data < 0)
		return set_error(-ENOENT, "cannot open /data");
	/* Parents: root 0711, so agents can pass through to their own directory but
	 * cannot list the others. */
	r = ufs_mkdir_owned(data, "sandbox-home", 0, 0, 0711, 0);
	if (r < 0)
		return set_error(r, "cannot make /data/sandbox-home root-owned 0711");
	homes = r;
	r = ufs_mkdir_owned(data, "agents", 0, 0, 0711, 0);
	if (r < 0)
		return set_error(r, "cannot make /data/agents root-owned 0711");
	agents = r;
	/* The agent's own entries live in root-owned parents; a symlink left there by an
	 * earlier life of the volume is removed, never followed. A mount point there (a bind
	 * mount of a root directory, a volume) is refused: chown and chmod would hand over
	 * whatever is mounted. */
	r = ufs_mkdir_owned(homes, id->name, id->uid, id->gid, 0700,
			    UFS_REPLACE_SYMLINK | UFS_NO_MOUNT);
	if (r < 0)
		return agent_dir_error(r, id->home);
	home = r;
	r = ufs_mkdir_owned(agents, id->name, id->uid, id->gid, 0700,
			    UFS_REPLACE_SYMLINK | UFS_NO_MOUNT);
	if (r < 0)
		return agent_dir_error(r, id->agent_dir);
	own = r;
	/* tmp sits in a directory the agent writes: take nothing it did not make itself.
	 * Whatever else is there is the agent's own doing, in its own home: a file or FIFO
	 * in tmp's place made every later ensure fail (every command and file operation of
	 * the agent, for good: nothing through serve could remove it), so it goes as a
	 * symlink does. */
	r = ufs_mkdir_owned(home, "tmp", id->uid, id->gid, 0700,
			    UFS_REPLACE_SYMLINK | UFS_REPLACE_NONDIR | UFS_AGENT_PARENT |
				    UFS_NO_MOUNT);
	if (r < 0)
		return agent_dir_error(r, id->tmpdir);
	tmp = r;
	return 0;
}

/* Everything users_homes_ensure would make or repair is already as it would leave it:
 * /data/sandbox-home and /data/agents root:root 0711, the agent's home, its tmp and its
 * /data/agents directory owned by the agent (uid and gid), 0700, none of them a mount
 * point, nothing followed. Then users_homes_ensure would only re-open and re-stat all
 * five (mkdirat EEXIST, open, stat each), so the caller skips it. */
static bool homes_complete(int data_fd, const struct users_identity *id)
{
	const int fl = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
	_cleanup_close_ int homes = -1, home = -1, agents = -1;
	struct stat st;
	bool mount = true;

	/* One statx per directory answers type, owner, mode and "mount point?" at once: a
	 * mount point sends the caller to users_homes_ensure, which refuses it. */
#define DIR_AS(uid_, gid_, mode_)                                                                  \
	(S_ISDIR(st.st_mode) && st.st_uid == (uid_) && st.st_gid == (gid_) &&                      \
	 (st.st_mode & 07777) == (mode_))
#define PARENT_OK(fd) (fstat(fd, &st) == 0 && DIR_AS(0, 0, 0711))
#define OWN_DIR(parent, dfd, name, flags)                                                          \
	(ufs_stat_mount(parent, dfd, name, flags, &st, &mount) == 0 && !mount &&                   \
	 DIR_AS(id->uid, id->gid, 0700))
	if (data_fd < 0 || (homes = openat(data_fd, "sandbox-home", fl)) < 0 || !PARENT_OK(homes) ||
	    (home = openat(homes, id->name, fl)) < 0 || !OWN_DIR(homes, home, "", AT_EMPTY_PATH))
		return false;
	if (!OWN_DIR(home, home, "tmp", AT_SYMLINK_NOFOLLOW))
		return false;
	if ((agents = openat(data_fd, "agents", fl)) < 0 || !PARENT_OK(agents) ||
	    !OWN_DIR(agents, agents, id->name, AT_SYMLINK_NOFOLLOW))
		return false;
#undef OWN_DIR
#undef PARENT_OK
#undef DIR_AS
	return true;
}

/* Lookup tables over the four files where they are missing (never built, or dropped by
 * an edit): for a call that checks many agents on one copy. Best effort: without them
 * every find walks the lines, as before. */
static void db_index(struct users_db *db)
{
	for (int k = 0; k < _PWFILE_KIND_MAX; k++)
		if (db->present[k] && !db->f[k].ix)
			(void)pwfile_index(&db->f[k]);
}

/* What a writing call changes in the copy lock_and_load read (c->db), before write_back:
 * 0, or -errno with the reason set. */
typedef int (*locked_change_fn)(struct ctx *c, void *userdata);

/* Three tries in all (locked_write). */
#define LOCKED_TRIES 3

/* Lock, read, change, write back. A write_back that found /etc changed under it by a
 * writer that ignores the lock (etc_unchanged: nothing written) reads everything again,
 * changes it again and tries again: serve and `pistisd run` ensure with no one to "run it
 * again", pistisd-entry runs ensure-base at a container's start, and a batch or a remove
 * that a busybox adduser crossed is as plainly worth a second look. ids are the
 * identities change fills (their homes are made beside the write). */
static int locked_write(struct ctx *c, locked_change_fn change, void *userdata,
			const struct users_identity *ids, size_t n_ids, bool forget)
{
	for (unsigned tries = 1;; tries++) {
		int r = lock_and_load(c);
		if (r < 0)
			return r;
		r = change(c, userdata);
		if (r < 0)
			return r;
		r = write_back(c, ids, n_ids, forget);
		if (r != -EAGAIN || tries == LOCKED_TRIES)
			return r;
		/* Both locks go and are taken again in their order (lock_and_load). */
		c->pwd_lock = safe_close(c->pwd_lock);
		c->reg_lock = safe_close(c->reg_lock);
	}
}

struct ensure_args {
	const char *const *agent_ids;
	size_t n;
	uid_t want_uid;
	struct users_identity *ret;
};

static int change_ensure(struct ctx *c, void *userdata)
{
	const struct ensure_args *a = userdata;

	for (size_t i = 0; i < a->n; i++) {
		int r;

		/* Lookup tables (users_check says why); an agent's new lines keep them. */
		if (a->n > 1)
			db_index(&c->db);
		r = users_db_ensure(&c->db, a->agent_ids[i], a->want_uid, &a->ret[i]);
		if (r < 0)
			return db_error(c, r);
		r = ids_mapped(&a->ret[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

static int ensure_locked(struct ctx *c, const char *agent_id, uid_t want_uid,
			 struct users_identity *ret)
{
	struct ensure_args a = {&agent_id, 1, want_uid, ret};

	return locked_write(c, change_ensure, &a, ret, 1, false);
}

/* Whether the password field of a line pwfile_scan found can never match (db.c's rule:
 * "!" or "*" first, or "x" in passwd); the locked path refuses it otherwise. */
static bool scan_locked(const char *buf, const struct pwfile_line *l, bool x_ok)
{
	const char *p = buf + l->off + l->name_len + 1, *end = buf + l->off + l->len;

	if (p >= end || *p == ':')
		return false;
	return *p == '!' || *p == '*' || (x_ok && *p == 'x' && (p + 1 == end || p[1] == ':'));
}

/* Field i of a line pwfile_scan found (checked strictly there, so it has them all). */
static void scan_field(const char *buf, const struct pwfile_line *l, unsigned i, const char **ret,
		       size_t *ret_len)
{
	const char *p = buf + l->off, *end = buf + l->off + l->len, *c;

	for (; i > 0 && (c = scan_chr(p, (size_t)(end - p), ':')); i--)
		p = c + 1;
	c = scan_chr(p, (size_t)(end - p), ':');
	*ret = p;
	*ret_len = (size_t)((c ? c : end) - p);
}

/* db.c's rule for the agent's own group line: field i lists no one, or only name. */
static bool scan_field_only(const char *buf, const struct pwfile_line *l, unsigned i,
			    const char *name)
{
	const char *p;
	size_t n, nl = strlen(name);

	scan_field(buf, l, i, &p, &n);
	return n == 0 || (n == nl && !memcmp(p, name, nl));
}

/* Whether name shows up in data only where an agent (or pi-tools, sb NULL) may be listed:
 * as the name of its own group's line (own), or in the members (last) field of that line or
 * of pi-sandbox's (sb), both found by pwfile_scan. Any other place (a member of shadow or sudo, an administrator
 * in gshadow, a comment, a longer name that contains it) says no, and the locked path
 * decides with a full parse. Judged by offsets, not by walking back to each line's start:
 * pi-sandbox's line lists every agent (36 KB at 2,000), and walking it for each look cost
 * the confirmation a third of its time. */
static bool scan_memberships_own(const char *data, size_t len, const char *name,
				 const struct pwfile_line *own, const struct pwfile_line *sb)
{
	const size_t nl = strlen(name);
	const char *end = data + len, *q = data, *om, *sm = NULL;
	size_t on, sn = 0;

	scan_field(data, own, 3, &om, &on);
	if (sb)
		scan_field(data, sb, 3, &sm, &sn);
	while ((q = scan_find(q, (size_t)(end - q), name, nl))) {
		bool in_own = q >= om && q + nl <= om + on,
		     in_sb = sm && q >= sm && q + nl <= sm + sn;
		if (q != data + own->off && !in_own && !in_sb)
			return false;
		q += nl;
	}
	return true;
}

/* Whether every occurrence of needle in data lies on the line that starts "name:" (the
 * agent's own line). For the fast path's uniqueness checks: its uid or gid anywhere else
 * (a duplicated record, another user or group with the id, or just a longer number or a
 * comment that contains it) sends the caller to the locked path, whose full parse
 * refuses a true duplicate with the file and line. */
static bool scan_only_own_line(const char *data, size_t len, const char *needle, size_t nn,
			       const char *name)
{
	const size_t nl = strlen(name);
	const char *end = data + len, *q = data;

	while ((q = scan_find(q, (size_t)(end - q), needle, nn))) {
		const char *ls = scan_rchr(data, (size_t)(q - data), '\n');
		ls = ls ? ls + 1 : data;
		if ((size_t)(end - ls) <= nl || memcmp(ls, name, nl) || ls[nl] != ':')
			return false;
		q++;
	}
	return true;
}

/* The read-only check for an agent that already exists: find only the lines that matter
 * (its registry record, its passwd/group/shadow/gshadow lines, the base entries) without
 * parsing whole files, each found line checked strictly. Anything missing or odd sends
 * the caller down the locked path, which parses everything and reports errors. */
static bool fast_complete(struct ctx *c, const char *agent_id, uid_t want_uid,
			  struct users_identity *ret)
{
	struct registry_record rec;
	char *reg = NULL;
	char *buf[_PWFILE_KIND_MAX] = {NULL};
	size_t reg_len = 0, len[_PWFILE_KIND_MAX] = {0};
	bool ok = false;

	if (c->reg_fd < 0 || registry_read(c, &reg, &reg_len, &c->pre_reg_st, &c->pre_reg_fd) < 0)
		return false;
	/* Kept for the locked path (a new agent, the usual reason to get there), which
	 * takes it over unless the registry was replaced meanwhile: read once, not twice. */
	c->pre_reg = reg;
	c->pre_reg_len = reg_len;
	if (registry_scan(reg, reg_len, agent_id, &rec) < 0 || rec.state != REGISTRY_ACTIVE ||
	    (want_uid != (uid_t)-1 && want_uid != rec.uid))
		return false;
	for (int k = 0; k < _PWFILE_KIND_MAX; k++) {
		struct stat st;
		int r = ufs_read_file(c->etc_fd, pwfile_kind_name(k), PWFILE_SIZE_MAX, &buf[k],
				      &len[k], &st, NULL);
		if (r == -ENOENT && (k == PWFILE_SHADOW || k == PWFILE_GSHADOW))
			continue;
		/* An untrusted file: the locked path says why. */
		if (r < 0 || !etc_trusted(c->etc_fd, pwfile_kind_name(k), &st))
			goto out;
	}
	/* Each file's lines of the agent and of pistis's names, found in one pass over it,
	 * with whether a second line of each follows (check_single_line in db.c: initgroups
	 * reads every line, NSS only the first; the locked path refuses one). */
	const char *const user_names[] = {rec.name, USERS_TOOLS_USER};
	const char *const group_names[] = {rec.name, USERS_SANDBOX_GROUP, USERS_TOOLS_USER};
	struct pwfile_found pw[2], sh[2], gr[3], gs[3];
#define FOUND(f, k, x_ok) (f.r == 0 && !f.second && scan_locked(buf[k], &f.line, x_ok))
	if (pwfile_scan_names(PWFILE_PASSWD, buf[PWFILE_PASSWD], len[PWFILE_PASSWD], user_names, 2,
			      pw) < 0 ||
	    pwfile_scan_names(PWFILE_GROUP, buf[PWFILE_GROUP], len[PWFILE_GROUP], group_names, 3,
			      gr) < 0)
		goto out;
	if (buf[PWFILE_SHADOW] && pwfile_scan_names(PWFILE_SHADOW, buf[PWFILE_SHADOW],
						    len[PWFILE_SHADOW], user_names, 2, sh) < 0)
		goto out;
	if (buf[PWFILE_GSHADOW] && pwfile_scan_names(PWFILE_GSHADOW, buf[PWFILE_GSHADOW],
						     len[PWFILE_GSHADOW], group_names, 3, gs) < 0)
		goto out;
	if (!FOUND(pw[0], PWFILE_PASSWD, true) || pw[0].line.id != rec.uid ||
	    pw[0].line.gid != rec.uid)
		goto out;
	if (buf[PWFILE_SHADOW] && !FOUND(sh[0], PWFILE_SHADOW, false))
		goto out;
	/* Its own group: the gid, no group password, no one else in it (db.c). A second
	 * line of it would also be caught by scan_memberships_own below (its name where no
	 * agent may be named). */
	const struct pwfile_line *own_g = &gr[0].line, *own_gs = &gs[0].line;
	if (!FOUND(gr[0], PWFILE_GROUP, true) || own_g->id != rec.uid ||
	    !scan_field_only(buf[PWFILE_GROUP], own_g, 3, rec.name))
		goto out;
	if (buf[PWFILE_GSHADOW] && (!FOUND(gs[0], PWFILE_GSHADOW, false) ||
				    !scan_field_only(buf[PWFILE_GSHADOW], own_gs, 2, "") ||
				    !scan_field_only(buf[PWFILE_GSHADOW], own_gs, 3, rec.name)))
		goto out;
	/* Its uid on no other record, passwd line or group line: one uid, one agent. A
	 * record's uid never has a leading zero (registry.c refuses one), and a passwd or
	 * group id that may have one, or a sign or space, sends the call to the locked
	 * path, so the text searches below see every spelling of the number. */
	if (scan_find(reg, reg_len, "\n0", 2) ||
	    scan_odd_number(buf[PWFILE_PASSWD], len[PWFILE_PASSWD]) ||
	    scan_odd_number(buf[PWFILE_GROUP], len[PWFILE_GROUP]))
		goto out;
	char num[16], rn[16];
	int nn = snprintf(num, sizeof(num), ":%u:", rec.uid);
	int rl = snprintf(rn, sizeof(rn), "\n%u:", rec.uid); /* a record's start: header first */
	const char *first = scan_find(reg, reg_len, rn, (size_t)rl);
	if (!first || scan_find(first + 1, reg_len - (size_t)(first + 1 - reg), rn, (size_t)rl))
		goto out;
	if (!scan_only_own_line(buf[PWFILE_PASSWD], len[PWFILE_PASSWD], num, (size_t)nn,
				rec.name) ||
	    !scan_only_own_line(buf[PWFILE_GROUP], len[PWFILE_GROUP], num, (size_t)nn, rec.name))
		goto out;
	const struct pwfile_line *sb_g = &gr[1].line, *sb_gs = &gs[1].line;
	if (!FOUND(gr[1], PWFILE_GROUP, true) || sb_g->id != USERS_SANDBOX_GID ||
	    !pwfile_scan_member_has(PWFILE_GROUP, buf[PWFILE_GROUP], sb_g, rec.name))
		goto out;
	if (buf[PWFILE_GSHADOW] &&
	    (!FOUND(gs[1], PWFILE_GSHADOW, false) ||
	     !pwfile_scan_member_has(PWFILE_GSHADOW, buf[PWFILE_GSHADOW], sb_gs, rec.name)))
		goto out;
	/* A member of its own group and pi-sandbox, of nothing else (db.c). */
	if (!scan_memberships_own(buf[PWFILE_GROUP], len[PWFILE_GROUP], rec.name, own_g, sb_g) ||
	    (buf[PWFILE_GSHADOW] && !scan_memberships_own(buf[PWFILE_GSHADOW], len[PWFILE_GSHADOW],
							  rec.name, own_gs, sb_gs)))
		goto out;
	/* pi-tools and its group with their ids and no password, as ensure_base wants them;
	 * its group its own and it a member of no other, its ids on no other line (db.c). */
	const struct pwfile_line *tl_g = &gr[2].line, *tl_gs = &gs[2].line;
	if (!FOUND(pw[1], PWFILE_PASSWD, true) || pw[1].line.id != USERS_TOOLS_UID ||
	    pw[1].line.gid != USERS_TOOLS_UID)
		goto out;
	if (!FOUND(gr[2], PWFILE_GROUP, true) || tl_g->id != USERS_TOOLS_UID ||
	    !scan_field_only(buf[PWFILE_GROUP], tl_g, 3, USERS_TOOLS_USER) ||
	    !scan_memberships_own(buf[PWFILE_GROUP], len[PWFILE_GROUP], USERS_TOOLS_USER, tl_g,
				  NULL))
		goto out;
	if (buf[PWFILE_SHADOW] && !FOUND(sh[1], PWFILE_SHADOW, false))
		goto out;
	if (buf[PWFILE_GSHADOW] &&
	    (!FOUND(gs[2], PWFILE_GSHADOW, false) ||
	     !scan_field_only(buf[PWFILE_GSHADOW], tl_gs, 2, "") ||
	     !scan_field_only(buf[PWFILE_GSHADOW], tl_gs, 3, USERS_TOOLS_USER) ||
	     !scan_memberships_own(buf[PWFILE_GSHADOW], len[PWFILE_GSHADOW], USERS_TOOLS_USER,
				   tl_gs, NULL)))
		goto out;
	nn = snprintf(num, sizeof(num), ":%u:", USERS_TOOLS_UID);
	if (!scan_only_own_line(buf[PWFILE_PASSWD], len[PWFILE_PASSWD], num, (size_t)nn,
				USERS_TOOLS_USER) ||
	    !scan_only_own_line(buf[PWFILE_GROUP], len[PWFILE_GROUP], num, (size_t)nn,
				USERS_TOOLS_USER))
		goto out;
#undef FOUND
	users_identity_fill(ret, agent_id, rec.name, rec.uid);
	ok = true;
out:
	for (int k = 0; k < _PWFILE_KIND_MAX; k++)
		uarena_free(buf[k]);
	return ok;
}

/* The policy walk's closing-mark key beside the registry, made once: only root may read
 * it (docs/policy.md, "What the mark's value is"). ensure-base and every ensure that takes
 * the locks make it, so a root with agents has one. */
static int mark_key_ensure(struct ctx *c)
{
	int r = key_file_ensure(c->reg_fd, USERS_MARK_KEY_FILE, USERS_MARK_KEY_SIZE);

	if (r == -EBADMSG)
		return set_error(r,
				 "/data/pistis/%s is not root's 0600 file of %d bytes: it is not "
				 "used; remove it (a new key is made, and what none rules closed "
				 "stays closed under a write rule until they are applied again)",
				 USERS_MARK_KEY_FILE, USERS_MARK_KEY_SIZE);
	if (r < 0)
		return set_error(r, "cannot make /data/pistis/%s", USERS_MARK_KEY_FILE);
	return 0;
}

int users_ensure(const char *root, const char *agent_id, uid_t want_uid, struct users_identity *ret)
{
	_cleanup_(ctx_done) struct ctx c = CTX_NULL;
	struct users_identity id;
	int r;

	clear_error();
	if (ident_agent_id_check(agent_id) < 0)
		return set_error(-EINVAL,
				 "invalid agent id: 1-%d bytes of [A-Za-z0-9._@+=/-], "
				 "starting with a letter or digit",
				 USERS_AGENT_ID_MAX);
	r = ctx_open(&c, root, true);
	if (r < 0)
		return r;
	/* Fast path without locks: every file is replaced by rename, so each read is a
	 * consistent snapshot; when the identity is complete there is nothing to write. */
	bool locked = false;
	if (fast_complete(&c, agent_id, want_uid, &id)) {
		/* An agent made before the volume moved into a user namespace that does not
		 * map its ids: it has its lines and home, but no command can become it. */
		r = ids_mapped(&id);
		if (r < 0)
			return r;
	} else {
		r = ensure_locked(&c, agent_id, want_uid, &id);
		if (r >= 0)
			r = mark_key_ensure(&c);
		if (r < 0)
			return r;
		locked = true; /* homes are made under the locks, which c holds until the end */
	}
	/* Whoever makes or repairs homes holds the registry lock: a concurrent ensure of the
	 * same agent would otherwise meet its tmp root-owned before the chown, and refuse
	 * it. Complete homes (the common case) are only confirmed, without the lock. */
	if (locked || !homes_complete(c.data_fd, &id)) {
		if (!locked) {
			r = registry_lock(&c);
			if (r < 0)
				return r;
			c.reg_lock = r;
		}
		r = users_homes_ensure(c.data_fd, &id);
		if (r < 0)
			return r;
	}
	id.written = locked;
	if (ret)
		*ret = id;
	return 0;
}

int users_ensure_many(const char *root, const char *const *agent_ids, size_t n,
		      struct users_identity *ret)
{
	_cleanup_(ctx_done) struct ctx c = CTX_NULL;
	int r;

	clear_error();
	if (n == 0 || n > USERS_BATCH_MAX)
		return set_error(-E2BIG, "1 to %d agent ids at once", USERS_BATCH_MAX);
	for (size_t i = 0; i < n; i++)
		if (ident_agent_id_check(agent_ids[i]) < 0)
			return set_error(-EINVAL,
					 "invalid agent id #%zu: 1-%d bytes of [A-Za-z0-9._@+=/-], "
					 "starting with a letter or digit",
					 i + 1, USERS_AGENT_ID_MAX);
	r = ctx_open(&c, root, true);
	if (r < 0)
		return r;
	r = locked_write(&c, change_ensure, &(struct ensure_args){agent_ids, n, (uid_t)-1, ret},
			 ret, n, false);
	for (size_t i = 0; r >= 0 && i < n; i++)
		ret[i].written = true; /* the batch writes every one of them */
	if (r >= 0)
		r = mark_key_ensure(&c);
	if (r < 0)
		return r;
	/* The identities are recorded now: every home is made, and the first that cannot be
	 * (an agent's own tmp replaced by a FIFO in an earlier life) is reported with its id
	 * after the rest, so one agent cannot leave the others without homes. Its next
	 * ensure tries again, as a single ensure's would. */
	{
		char why[sizeof(last_error)], why_text[sizeof(last_error_text)];
		int first = 0;

		for (size_t i = 0; i < n; i++) {
			clear_error();
			r = users_homes_ensure(c.data_fd, &ret[i]);
			if (r < 0 && !first) {
				first = r;
				if (!last_error[0])
					set_error(r, "cannot make the home: %s", strerror(-r));
				/* cut to fit: the agent's name goes first then */
				if (snprintf(why, sizeof(why), "%s (agent #%zu, %s)", last_error,
					     i + 1, ret[i].name) >= (int)sizeof(why))
					snprintf(why, sizeof(why), "agent #%zu, %s: %.300s", i + 1,
						 ret[i].name, last_error);
				/* the text is cut with a mark, between two escapes */
				if (escape_format(why_text, sizeof(why_text),
						  "%-s (agent #%zu, %s)", last_error_text, i + 1,
						  ret[i].name) >= sizeof(why_text))
					escape_format(why_text, sizeof(why_text),
						      "agent #%zu, %s: %-s", i + 1, ret[i].name,
						      last_error_text);
			}
		}
		if (first) {
			memcpy(last_error, why, sizeof(why));
			memcpy(last_error_text, why_text, sizeof(why_text));
			return first;
		}
	}
	return 0;
}

static int change_ensure_base(struct ctx *c, void *userdata)
{
	int r = users_db_ensure_base(&c->db);

	return r < 0 ? db_error(c, r) : 0;
}

int users_ensure_base(const char *root)
{
	/* The trusted commands' directories, made before any agent runs: /data/bin is on every
	 * agent's PATH, and where agents may write /data (a write rule on it) the first to make
	 * one would choose what the others run, or, for the secrets' directory, put its own
	 * links and inodes where a trusted command writes its secrets (a later "none" rule
	 * would hand them to pi-tools as they are). An existing one of the owner's is kept as
	 * it is (bin, trusted: a none rule makes them 0700) or put right (.secrets, also when
	 * root's: an operator's); anyone else's, or a link, is refused, never adopted. So is
	 * a root's bin or trusted that agents could write (group write but for group root,
	 * other write, an ACL: an old write rule's root:pi-sandbox 2770): what is in it may
	 * be an agent's, and nothing here looks; the operator does. */
	static const struct {
		const char *name;
		uid_t uid;
		mode_t mode;
		unsigned flags;
		const char *owners;
		const char *runs; /* who would run what an agent left there */
	} dirs[] = {
		{"bin", 0, 0755, UFS_KEEP_EXISTING | UFS_WHOLE, "root's",
		 "every agent has it on its PATH"},
		{"trusted", 0, 0755, UFS_KEEP_EXISTING | UFS_WHOLE, "root's",
		 "trusted commands run what is in it as pi-tools"},
		{".secrets", USERS_TOOLS_UID, 0700, 0, "pi-tools' or root's", NULL},
	};
	_cleanup_(ctx_done) struct ctx c = CTX_NULL;
	int r;

	clear_error();
	r = ctx_open(&c, root, true);
	if (r < 0)
		return r;
	r = ids_mapped(NULL);
	if (r < 0)
		return r;
	r = locked_write(&c, change_ensure_base, NULL, NULL, 0, false);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		int fd = ufs_mkdir_owned(c.data_fd, dirs[i].name, dirs[i].uid, dirs[i].uid,
					 dirs[i].mode, dirs[i].flags);

		if (fd == -EPERM)
			return set_error(fd, "/data/%s is not %s: someone else made it; remove it",
					 dirs[i].name, dirs[i].owners);
		if (fd == -ELOOP)
			return set_error(fd, "/data/%s is a symbolic link; remove it",
					 dirs[i].name);
		if (fd < 0)
			return set_error(fd, "/data/%s: cannot make it %s %04o", dirs[i].name,
					 dirs[i].uid ? "pi-tools'" : "root's",
					 (unsigned)dirs[i].mode);
		if (dirs[i].flags & UFS_KEEP_EXISTING) {
			struct stat st;
			bool acl = fd_has_acl(fd) != NULL;

			r = fstat(fd, &st) < 0 ? -errno : 0;
			safe_close(fd);
			if (r < 0)
				return set_error(r, "/data/%s: cannot stat it", dirs[i].name);
			if ((st.st_mode & 0002) || ((st.st_mode & 0020) && st.st_gid != 0) || acl)
				return set_error(
					-EPERM,
					"/data/%s is root's but agents could write it (group %u, "
					"mode %04o%s), and %s: look at what is in it, then chmod "
					"go-w,g-s, chgrp root and setfacl -b it, or remove it",
					dirs[i].name, (unsigned)st.st_gid,
					(unsigned)(st.st_mode & 07777), acl ? ", an ACL" : "",
					dirs[i].runs);
			continue;
		}
		safe_close(fd);
	}
	return mark_key_ensure(&c);
}

int users_lookup(const char *root, const char *agent_id, struct users_identity *ret)
{
	_cleanup_(ctx_done) struct ctx c = CTX_NULL;
	int r;

	clear_error();
	if (ident_agent_id_check(agent_id) < 0)
		return set_error(-EINVAL, "invalid agent id");
	r = ctx_open(&c, root, false);
	if (r < 0)
		return r;
	r = load_registry(&c);
	if (r < 0)
		return r;
	r = users_db_lookup(&c.db, agent_id, ret);
	if (r == -ENOENT)
		return set_error(r, "agent '%s' has no active identity", agent_id);
	if (r < 0)
		return db_error(&c, r);
	return r;
}

struct remove_args {
	const char *agent_id;
	bool forget;
};

static int change_remove(struct ctx *c, void *userdata)
{
	const struct remove_args *a = userdata;
	int r = users_db_remove(&c->db, a->agent_id, a->forget);

	return r < 0 ? db_error(c, r) : 0;
}

int users_remove(const char *root, const char *agent_id, bool forget)
{
	_cleanup_(ctx_done) struct ctx c = CTX_NULL;
	int r;

	clear_error();
	if (ident_agent_id_check(agent_id) < 0)
		return set_error(-EINVAL, "invalid agent id");
	r = ctx_open(&c, root, true);
	if (r < 0)
		return r;
	return locked_write(&c, change_remove, &(struct remove_args){agent_id, forget}, NULL, 0,
			    forget);
}

int users_list(const char *root, struct users_entry **ret, size_t *ret_n)
{
	_cleanup_(ctx_done) struct ctx c = CTX_NULL;
	struct users_entry *v;
	int r;

	clear_error();
	r = ctx_open(&c, root, false);
	if (r < 0)
		return r;
	r = load_registry(&c);
	if (r < 0)
		return r;
	v = calloc(c.db.reg.n ? c.db.reg.n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < c.db.reg.n; i++) {
		struct registry_record *rec = &c.db.reg.recs[i];
		const char *why = NULL;
		/* list shows every record: each one's name is checked against its id. */
		if (registry_verify(rec, &why) < 0) {
			free(v);
			return set_error(-EINVAL, "/data/pistis/%s:%u: %s", USERS_REGISTRY_FILE,
					 rec->line, why);
		}
		snprintf(v[i].agent_id, sizeof(v[i].agent_id), "%.*s", (int)rec->id_len, rec->id);
		snprintf(v[i].name, sizeof(v[i].name), "%s", rec->name);
		v[i].uid = rec->uid;
		v[i].active = rec->state == REGISTRY_ACTIVE;
	}
	*ret = v;
	*ret_n = c.db.reg.n;
	return 0;
}

int users_check(const char *root, const char *agent_id, users_warn_fn warn, void *userdata)
{
	_cleanup_(ctx_done) struct ctx c = CTX_NULL;
	int r;

	clear_error();
	r = ctx_open(&c, root, false);
	if (r < 0)
		return r;
	r = load_registry(&c);
	if (r < 0)
		return r;
	/* No lock: every file is replaced by rename, so each read is a whole version, and a
	 * warning is advice (the next ensure decides again, under the locks). */
	r = load_etc(&c);
	if (r < 0) {
		warn(NULL, last_error, last_error_text, userdata);
		return 0;
	}
	r = users_db_ensure_base(&c.db);
	if (r < 0) {
		warn(NULL, c.db.err, c.db.err_text, userdata);
		return 0;
	}
	/* Each agent's ensure on the same copy: a refused one may leave its lines half
	 * added in memory, which no other agent's checks read (its name and ids are its own).
	 * Every agent (list): the files' lookup tables, else each check walks every line and
	 * N agents cost N² (5,000: 3.2 s); a refused agent's edits may drop them, and they are
	 * built again for the next. */
	for (size_t i = 0; i < c.db.reg.n; i++) {
		const struct registry_record *rec = &c.db.reg.recs[i];
		char id[USERS_AGENT_ID_MAX + 1];

		if (rec->state != REGISTRY_ACTIVE)
			continue;
		snprintf(id, sizeof(id), "%.*s", (int)rec->id_len, rec->id);
		if (agent_id && strcmp(id, agent_id))
			continue;
		if (!agent_id)
			db_index(&c.db);
		r = users_db_ensure(&c.db, id, (uid_t)-1, NULL);
		if (r < 0)
			warn(id, c.db.err, c.db.err_text, userdata);
	}
	return 0;
}
