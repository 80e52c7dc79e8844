/* Reading, checking and atomically replacing the rules file. */
#include "policy/internal.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/macro.h"
#include "lib/mountinfo.h"
#include "lib/statx.h"

static int fail(struct policy_error *err, int r, unsigned line, const char *msg, const char *path)
{
	if (err) {
		char e[256];

		/* The path cut with a mark (escape_c_quote): a cut one cannot pass for another,
		 * whole one. msg is text (names in it escaped): %-s, once. */
		escape_c_quote(path, strlen(path), sizeof(e) - ESCAPE_QUOTE_EXTRA, e, sizeof(e));
		err->line = line;
		escape_format(err->msg, sizeof(err->msg), "%-s: %-s", e, msg);
	}
	return r;
}

/* dir beneath root_fd, no symlink on the way; with trusted, refused (-EPERM) unless
 * root-owned and not writable by group or others: the one rule for the rules file's
 * directory, read (policy_rules_load) or written (open_rules_dir). */
static int open_dir(int root_fd, const char *dir, bool trusted, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r = policy_resolve(root_fd, dir, O_RDONLY | O_DIRECTORY, &fd);

	if (r < 0)
		return r;
	if (trusted) {
		if (fstat(fd, &st) < 0)
			return negative_errno();
		if (st.st_uid != 0 || (st.st_mode & 022))
			return -EPERM;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int policy_rules_load(int root_fd, const char *path, bool from_root, bool trusted,
		      struct policy_rules **ret, char **ret_bytes, size_t *ret_len,
		      struct policy_error *err)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	struct stat st;
	int r;

	if (err)
		err->line = 0, err->msg[0] = '\0';
	if (from_root) {
		/* Its directory too: where others may write it, the file could be replaced, or
		 * removed so that the built-in defaults apply instead of the operator's rules. */
		_cleanup_close_ int dfd = -1;
		_cleanup_free_ char *dir = strdup(path);
		char *slash = dir ? strrchr(dir, '/') : NULL;

		if (!slash || slash == dir)
			return dir ? -EINVAL : -ENOMEM;
		*slash = '\0';
		r = open_dir(root_fd, dir, trusted, &dfd);
		if (r == -ELOOP)
			return fail(err, r, 0, "is a symlink (or a directory on the way is)", dir);
		if (r == -EPERM)
			return fail(
				err, r, 0,
				"must be owned by root and not writable by group or others (the "
				"rules file in it could be replaced or removed)",
				dir);
		if (r < 0)
			return r;
		fd = openat(dfd, slash + 1,
			    O_RDONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ELOOP)
			return fail(err, -ELOOP, 0, "is a symlink (or a directory on the way is)",
				    path);
		if (fd < 0)
			return negative_errno();
	} else {
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd < 0)
			return negative_errno();
	}
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return fail(err, -EINVAL, 0, "is not a regular file", path);
	/* A rules file decides what agents may touch: only root may have written it. */
	if (trusted && (st.st_uid != 0 || (st.st_mode & 022)))
		return fail(err, -EPERM, 0,
			    "must be owned by root and not writable by group or others", path);
	r = fd_read_all(fd, POLICY_FILE_MAX, &buf, &len);
	if (r == -EFBIG)
		return fail(err, r, 0, "is larger than 1 MiB", path);
	if (r < 0)
		return r;
	r = policy_rules_parse(buf, len, ret, err);
	if (r >= 0 && ret_bytes) {
		*ret_bytes = TAKE_PTR(buf);
		*ret_len = len;
	}
	return r;
}

/* The directories a rule must name by their own path, never by another: the root, /data,
 * pistis's own trees and the trusted commands' (a bind mount of /data elsewhere, named by a
 * rule or a path beneath it, would be walked with the rule's access: the homes, the
 * registry, the secrets, since the walk knows them by path). */
#define OWN_DIRS_N (2 + POLICY_RESERVED_N + POLICY_TRUSTED_N)

struct own_dirs {
	const char *path[OWN_DIRS_N];
	struct stat st[OWN_DIRS_N];
	bool have[OWN_DIRS_N];
	/* Where each lies on its file system (its path from the file system's root, NULL
	 * when unknown), and /proc/self/mountinfo (NULL when unreadable): a bind mount of a
	 * directory inside one of them shares no inode with it, only the file system. */
	char *fs_path[OWN_DIRS_N];
	char *mountinfo;
};

/* The mountinfo line of mount id into buf, parsed. 0, or -ENOENT. */
static int mount_line(const char *mi, uint64_t id, char *buf, size_t size,
		      struct mountinfo_entry *e)
{
	char want[24];
	size_t wl = (size_t)snprintf(want, sizeof(want), "%llu ", (unsigned long long)id);

	for (const char *l = mi; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);

		if (len > wl && len < size && !memcmp(l, want, wl)) {
			memcpy(buf, l, len);
			buf[len] = '\0';
			return mountinfo_parse_line(buf, e) == 0 ? 0 : -ENOENT;
		}
		l = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

/* fd's path from the root of its file system: its mount's root (mountinfo's fourth field)
 * joined with where it lies beneath the mount point (the kernel's path of the fd). NULL
 * when something is unknown (no /proc, no STATX_MNT_ID) or out of memory. */
static char *fs_path_of(const char *mi, int fd)
{
	char link[PATH_MAX], proc[40], line[2 * PATH_MAX + 512];
	struct mountinfo_entry e;
	uint64_t id;
	ssize_t n;

	if (!mi || statx_mount_id(fd, &id) < 0 || mount_line(mi, id, line, sizeof(line), &e) < 0)
		return NULL;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, link, sizeof(link) - 1);
	if (n <= 0)
		return NULL;
	link[n] = '\0';
	if (link[0] != '/' || !mountinfo_path_under(link, e.mount_point))
		return NULL;
	const char *rest = strcmp(e.mount_point, "/") ? link + strlen(e.mount_point) : link;
	char *out = NULL;
	if (asprintf(&out, "%s%s", strcmp(e.root, "/") ? e.root : "", *rest ? rest : "/") < 0 ||
	    (strcmp(out, "/") && out[strlen(out) - 1] == '/')) {
		free(out);
		return NULL;
	}
	return out;
}

/* For a directory that is a mount root: the reserved or trusted tree its mount shows, or
 * a directory inside one (a bind mount of /data/agents/X at /srv/home), by the mount's
 * root on the same file system. -1 when none or unknown. */
static int own_dir_mounted(const struct own_dirs *o, int fd, const struct stat *st)
{
	char line[2 * PATH_MAX + 512];
	struct mountinfo_entry e;
	uint64_t id;

	if (!o->mountinfo || statx_mount_id(fd, &id) < 0 ||
	    mount_line(o->mountinfo, id, line, sizeof(line), &e) < 0)
		return -1;
	/* Not the root nor /data themselves: what else they hold is no one's (a bind mount
	 * of /data/keep), and the trees that are are in the list on their own. */
	for (size_t j = 2; j < OWN_DIRS_N; j++)
		if (o->have[j] && o->fs_path[j] && st->st_dev == o->st[j].st_dev &&
		    mountinfo_path_under(e.root, o->fs_path[j]))
			return (int)j;
	return -1;
}

/* Which own directory, under another name, the rule's path is or lies beneath: the index,
 * with *ret_len the length of the prefix of path that names it; -1 when none (or when the
 * way stops: a symlink, a missing name, a non-directory; what lies past that is the
 * walk's to report). Down from the root one name at a time (O_PATH|O_NOFOLLOW, never "..",
 * SECURITY.md), so each directory on the way is known by the prefix that reached it, and a
 * bind mount shows the inode it shares with the tree it mounts; a mount point on the way
 * whose mount shows a directory inside one (*ret_inside) is known by its mount's root on
 * the same file system. Bounded by the path's components (POLICY_PATH_MAX). */
static int own_dir_on_way(int root_fd, const struct own_dirs *o, const char *path, size_t *ret_len,
			  bool *ret_inside)
{
	_cleanup_close_ int cur = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char name[POLICY_NAME_MAX + 1];
	const char *p = path;
	struct stat st;
	size_t n;
	int fd;

	int mount;

	while (cur >= 0 && statx_node(cur, "", AT_EMPTY_PATH, &st, &mount) == 0 &&
	       S_ISDIR(st.st_mode)) {
		size_t len = p == path ? 1 : (size_t)(p - path); /* "/" for the root */
		int k = -1;

		for (size_t j = 0; j < OWN_DIRS_N; j++)
			if (o->have[j] && st.st_dev == o->st[j].st_dev &&
			    st.st_ino == o->st[j].st_ino &&
			    (strlen(o->path[j]) != len || memcmp(o->path[j], path, len))) {
				*ret_len = len;
				return (int)j;
			}
		/* A mount point on the way (not the root itself) that shows one of them or a
		 * directory inside one. Named by its own path it is that directory (a volume
		 * mounted at /data is /data). */
		if (mount == 1 && len > 1)
			k = own_dir_mounted(o, cur, &st);
		if (k >= 0 && (strlen(o->path[k]) != len || memcmp(o->path[k], path, len))) {
			*ret_len = len;
			*ret_inside = true;
			return k;
		}
		p += strspn(p, "/");
		n = strcspn(p, "/");
		if (n == 0 || n > POLICY_NAME_MAX)
			break;
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		fd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		safe_close(cur);
		cur = fd;
	}
	return -1;
}

static int check_rules(int root_fd, const struct policy_rules *r, const struct own_dirs *o,
		       struct policy_error *err);

int policy_rules_check_fs(int root_fd, const struct policy_rules *r, struct policy_error *err)
{
	struct own_dirs o = {.path = {"/", "/data"}};

	memcpy(o.path + 2, policy_reserved, sizeof(policy_reserved));
	memcpy(o.path + 2 + POLICY_RESERVED_N, policy_trusted, sizeof(policy_trusted));

	int ret = 0;

	if (mountinfo_read(&o.mountinfo) < 0)
		o.mountinfo = NULL;
	for (size_t j = 0; j < OWN_DIRS_N; j++) {
		_cleanup_close_ int fd = -1;
		o.have[j] = policy_resolve(root_fd, o.path[j], O_PATH | O_DIRECTORY, &fd) >= 0 &&
			    fstat(fd, &o.st[j]) == 0;
		o.fs_path[j] = o.have[j] ? fs_path_of(o.mountinfo, fd) : NULL;
	}
	ret = check_rules(root_fd, r, &o, err);
	for (size_t j = 0; j < OWN_DIRS_N; j++)
		free(o.fs_path[j]);
	free(o.mountinfo);
	return ret;
}

static int check_rules(int root_fd, const struct policy_rules *r, const struct own_dirs *o,
		       struct policy_error *err)
{
	for (size_t i = 0; i < r->n; i++) {
		const char *path = r->rules[i].path;
		bool inside = false;
		size_t len = 0;
		int fd = -1, k;
		struct stat st;

		/* An implied rule (line 0) is not the file's to get wrong: a symlink at its path
		 * is the walk's to report ("rule not applied"), and the file's rules still
		 * apply. */
		if (!r->rules[i].line)
			continue;
		k = own_dir_on_way(root_fd, o, path, &len, &inside);
		if (k >= 0) {
			char msg[320], e[136];

			escape_c_quote(path, len, sizeof(e) - ESCAPE_QUOTE_EXTRA, e, sizeof(e));
			if (len == r->rules[i].len && !inside)
				snprintf(msg, sizeof(msg),
					 "is %s under another name (a bind mount?): a rule names "
					 "it by its own path",
					 o->path[k]);
			else
				snprintf(msg, sizeof(msg),
					 "lies beneath %s under another name (%s, a bind "
					 "mount?): a rule names it by its own path",
					 o->path[k], e);
			return fail(err, -EINVAL, r->rules[i].line, msg, path);
		}
		k = policy_resolve(root_fd, path, O_PATH, &fd);
		if (k >= 0 && fstat(fd, &st) < 0)
			k = negative_errno();
		safe_close(fd);
		/* A link an agent made where it may write (not there when the rules were
		 * saved) is the walk's to report ("rule not applied"), like an implied rule's:
		 * refusing the whole file for it would let one agent hold up every tightening.
		 * Root's is the file's mistake. */
		if (k == -ELOOP) {
			_cleanup_close_ int dfd = -1;
			struct stat lst;

			if (policy_first_symlink(root_fd, r->rules[i].path, &dfd, &lst) == 1 &&
			    lst.st_uid != 0)
				continue;
			return fail(err, -ELOOP, r->rules[i].line,
				    "is a symlink, or a directory on the way is (rules name real "
				    "paths)",
				    r->rules[i].path);
		}
		/* Missing ("not there yet") is fine; the walk reports it. */
		if (k < 0 && k != -ENOENT && k != -ENOTDIR)
			return fail(err, k, r->rules[i].line, "cannot be resolved",
				    r->rules[i].path);
	}
	return 0;
}

int policy_state_dir_open(int root_fd, int *ret_fd)
{
	return open_dir(root_fd, POLICY_STATE_DIR, true, ret_fd);
}

int policy_apply_lock(int root_fd, unsigned wait_ms, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	int r = policy_state_dir_open(root_fd, &fd);

	*ret_fd = -1;
	/* No state yet: made here, root 0700 as ensure-base makes it, so that two applies in
	 * a root that has none (an image's build, a root prepared before its first start)
	 * exclude each other too: unlocked, they left a mix of both rule sets (red team,
	 * redteam-concurrent.sh). */
	if (r == -ENOENT) {
		_cleanup_close_ int data_fd = -1;
		char dir[] = POLICY_STATE_DIR;

		*strrchr(dir, '/') = '\0';
		r = policy_resolve(root_fd, dir, O_PATH | O_DIRECTORY, &data_fd);
		if (r >= 0 && mkdirat(data_fd, strrchr(POLICY_STATE_DIR, '/') + 1, 0700) < 0 &&
		    errno != EEXIST)
			r = negative_errno();
		if (r >= 0)
			r = policy_state_dir_open(root_fd, &fd);
	}
	/* No /data at all: no registry, so no agent that could hold it: the root directory
	 * itself. */
	if (r == -ENOENT) {
		fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		r = fd < 0 ? negative_errno() : 0;
	}
	/* A directory no one may trust (not root's, a link), which the rules' load and save
	 * refuse with their reasons. */
	if (r == -EPERM || r == -ELOOP || r == -ENOTDIR)
		return 0;
	if (r < 0)
		return r;
	/* On the directory itself: no lock file, so an apply changes nothing outside its
	 * trees. flock's lock belongs to the open file description: released on close, or
	 * when the process dies. */
	r = fd_flock_wait(fd, wait_ms);
	if (r < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int policy_apply_share(int root_fd, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	int r = policy_state_dir_open(root_fd, &fd);

	*ret_fd = -1;
	/* None there: an apply makes it before it locks it, and no agent runs without it (the
	 * registry lives there). One no one may trust: policy_apply_lock takes no lock on it
	 * either, and the rules' load refuses it. */
	if (r == -ENOENT || r == -EPERM || r == -ELOOP || r == -ENOTDIR)
		return 0;
	if (r < 0)
		return r;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0)
		return negative_errno();
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* The rules directory: open_dir's rule, created if /data exists. */
static int open_rules_dir(int root_fd, int *ret_fd)
{
	char dir[] = POLICY_RULES_PATH;
	char *slash = strrchr(dir, '/');
	int r;

	*slash = '\0';
	r = open_dir(root_fd, dir, true, ret_fd);
	if (r == -ENOENT) {
		_cleanup_close_ int pfd = -1;
		char *up = strrchr(dir, '/');

		*up = '\0';
		r = policy_resolve(root_fd, dir, O_PATH | O_DIRECTORY, &pfd);
		*up = '/';
		if (r < 0)
			return r;
		if (mkdirat(pfd, up + 1, 0755) < 0 && errno != EEXIST)
			return negative_errno();
		r = open_dir(root_fd, dir, true, ret_fd);
	}
	return r;
}

int policy_rules_save(int root_fd, const char *buf, size_t len)
{
	_cleanup_close_ int dfd = -1, fd = -1;
	const char *base = strrchr(POLICY_RULES_PATH, '/') + 1;
	char tmp[64];
	uint32_t rnd = 0;
	int r;

	r = open_rules_dir(root_fd, &dfd);
	if (r < 0)
		return r;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
		rnd = (uint32_t)getpid();
	snprintf(tmp, sizeof(tmp), ".%s.%08x.tmp", base, rnd);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return negative_errno();
	r = loop_write(fd, buf, len);
	if (r >= 0)
		r = RET_NERRNO(fchmod(fd, 0644)); /* whatever the umask */
	if (r >= 0)
		r = RET_NERRNO(fsync(fd));
	if (r >= 0)
		r = RET_NERRNO(renameat(dfd, tmp, dfd, base));
	if (r < 0) {
		(void)unlinkat(dfd, tmp, 0);
		return r;
	}
	/* The rename is durable only once the directory is on disk. Failing that, the new
	 * file is in place all the same, and what every reader now gets: said apart from
	 * "nothing replaced", for the caller to go on and apply what it saved. */
	return fsync(dfd) < 0 ? errno : 0;
}
