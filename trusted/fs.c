/* trusted: fd-based file helpers. Every path here is one pistisd owns (/data/trusted,
 * /data/bin, /etc/sudoers.d…); still, none is followed through a symlink, and each file
 * is checked on the fd that was opened. */
#include "trusted/internal.h"
#include "trusted/trusted.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/openat2.h>

#include "lib/caps.h"
#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/macro.h"
#include "lib/mountinfo.h"
#include "policy/policy.h"
#include "sandbox-users/users.h"

int trusted_open_dir(int dir_fd, const char *rel, bool create, mode_t mode, uid_t uid, gid_t gid,
		     bool fix, int *ret_fd)
{
	char buf[PATH_MAX];
	_cleanup_close_ int fd = -1;
	char *comp, *save = NULL;
	int cur = dir_fd;

	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		bool last = !save || !*save || strspn(save, "/") == strlen(save);
		bool made = false;
		struct stat st;
		int nfd;

		if (!strcmp(comp, "..") || !strcmp(comp, "."))
			return -EINVAL;
		nfd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && create) {
			/* Made root 0700 and opened before it gets its final owner and mode, so
			 * nobody can slip in between. */
			if (mkdirat(cur, comp, 0700) < 0 && errno != EEXIST)
				return -errno;
			made = true;
			nfd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0)
			return errno == ELOOP || errno == ENOTDIR ? -ENOTDIR : -errno;
		safe_close(fd);
		fd = cur = nfd;
		if (fstat(fd, &st) < 0)
			return -errno;
		if (made || (last && fix)) {
			mode_t want = last ? mode : 0755;
			uid_t wu = last ? uid : 0;
			gid_t wg = last ? gid : 0;

			/* Only root's (an operator's, an image's) or already the owner's is put
			 * right: anyone else's, with what it holds, is never taken over. */
			if (!made && st.st_uid != 0 && st.st_uid != wu)
				return -EPERM;
			if ((st.st_uid != wu || st.st_gid != wg) && fchown(fd, wu, wg) < 0)
				return -errno;
			if ((st.st_mode & 07777) != want && fchmod(fd, want) < 0)
				return -errno;
			if (!made && fd_remove_acls(fd, NULL) < 0)
				return -errno;
		} else if (last) {
			if (st.st_uid != uid || (st.st_mode & 022))
				return -EPERM;
		} else if (st.st_uid != 0 || (st.st_mode & 022)) {
			/* A parent someone else can write to could have its child swapped. */
			return -EPERM;
		}
	}
	if (fd < 0)
		return -EINVAL;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int trusted_lock(int root_fd, unsigned wait_ms, int *ret_fd)
{
	_cleanup_close_ int dir_fd = -1, fd = -1;
	struct stat st;
	int r;

	*ret_fd = -1;
	/* Made root 0700 when missing, as ensure-base makes it; never taken over otherwise. */
	r = trusted_open_dir(root_fd, "data/pistis", true, 0700, 0, 0, false, &dir_fd);
	if (r < 0)
		return r;
	/* O_NONBLOCK: a FIFO planted there must not hang the open; O_RDWR fails on a
	 * directory (EISDIR); O_NOFOLLOW on a link (ELOOP). */
	fd = openat(dir_fd, "trusted.lock",
		    O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
		return -EBADFD;
	if (st.st_uid != 0 || (st.st_mode & 077))
		return -EPERM;
	r = fd_flock_wait(fd, wait_ms);
	if (r < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int trusted_write_file(int dir_fd, const char *name, const void *data, size_t len, mode_t mode,
		       bool keep_tmp, char *ret_tmp, size_t tmp_size)
{
	char tmp[NAME_MAX + 1];
	_cleanup_close_ int fd = -1;
	unsigned char rnd[6];
	int r, tries;

	for (tries = 0; tries < 16; tries++) {
		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -EIO;
		if (snprintf(tmp, sizeof(tmp), ".%s.%02x%02x%02x%02x%02x%02x", name, rnd[0], rnd[1],
			     rnd[2], rnd[3], rnd[4], rnd[5]) >= (int)sizeof(tmp))
			return -ENAMETOOLONG;
		fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0)
		return -errno;
	r = loop_write(fd, data, len);
	if (r >= 0 && fchown(fd, 0, 0) < 0)
		r = -errno;
	if (r >= 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r >= 0 && fsync(fd) < 0)
		r = -errno;
	if (r >= 0 && !keep_tmp && renameat(dir_fd, tmp, dir_fd, name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(dir_fd, tmp, 0);
		return r;
	}
	if (keep_tmp && snprintf(ret_tmp, tmp_size, "%s", tmp) >= (int)tmp_size) {
		(void)unlinkat(dir_fd, tmp, 0);
		return -ENAMETOOLONG;
	}
	(void)fsync(dir_fd);
	return 0;
}

int trusted_read_file(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r = fd_open_regular(dir_fd, name, &st, &fd);

	return r < 0 ? r : fd_read_all(fd, max, ret, ret_len);
}

int trusted_open_in_root(int root_fd, const char *rel, int flags, int *ret_fd)
{
	static int have_openat2 = -1;
	struct open_how how = {
		.flags = (unsigned long long)(flags | O_CLOEXEC),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	char buf[PATH_MAX];
	char *comp, *save = NULL;
	_cleanup_close_ int fd = -1;
	int cur = root_fd;

	if (have_openat2 != 0) {
		int r = (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));

		if (r >= 0) {
			have_openat2 = 1;
			*ret_fd = r;
			return 0;
		}
		if (errno != ENOSYS)
			return -errno;
		have_openat2 = 0;
	}
	/* Fallback: follow no symlink at all (merged-/usr names like /bin/x then fail; the
	 * callers try the /usr path first). */
	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		bool last = !save || !*save;
		int nfd = openat(cur, comp,
				 (last ? flags : O_PATH | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);

		if (nfd < 0)
			return -errno;
		safe_close(fd);
		fd = cur = nfd;
	}
	if (fd < 0)
		return -EINVAL;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

#define DATA_BIN_NAME_SHOWN 48 /* escaped bytes of a name data_bin_entry quotes */
#define DATA_BIN_NAMES_SIZE (3 * (DATA_BIN_NAME_SHOWN + ESCAPE_QUOTE_EXTRA + 40))

/* One entry of /data/bin for trusted_data_bin_check: one that may not stay (not root's, or
 * group/other-writable and no symlink; a directory is not on PATH, one gone since is
 * fine) is counted and, among the first three, named in names (DATA_BIN_NAMES_SIZE bytes,
 * *l of them used): quoted and escaped, its ' too, as an agent may have chosen it, and cut
 * with a mark past DATA_BIN_NAME_SHOWN bytes (escape_c_quote). */
static void data_bin_entry(int bin, const char *name, unsigned *nbad, char *names, size_t *l)
{
	char q[DATA_BIN_NAME_SHOWN + ESCAPE_QUOTE_EXTRA];
	struct stat st;

	if (fstatat(bin, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
		return; /* gone since, or not on PATH */
	if (st.st_uid == 0 && (S_ISLNK(st.st_mode) || !(st.st_mode & 022)))
		return;
	/* the first three: the count says how many there are */
	if (++*nbad <= 3) {
		escape_c_quote(name, strlen(name), DATA_BIN_NAME_SHOWN, q, sizeof(q));
		*l += (size_t)snprintf(names + *l, DATA_BIN_NAMES_SIZE - *l,
				       "%s%s (owner %u, mode %04o)", *l ? ", " : "", q,
				       (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	}
}

int trusted_data_bin_check(int root_fd, unsigned *ret_n, char *why, size_t why_size)
{
	_cleanup_close_ int data = -1, bin = -1;
	struct stat st;
	unsigned n = 0, nbad = 0;
	size_t l = 0;
	char names[DATA_BIN_NAMES_SIZE] = "";
	/* getdents64 into the stack, not opendir: no heap for the listing (pistisd run checks
	 * this before every command), and a failed read is told from the end of the list. */
	union {
		char buf[4096];
		uint64_t align;
	} u;

	why[0] = '\0';
	*ret_n = 0;
	data = openat(root_fd, "data", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (data >= 0)
		bin = openat(data, "bin",
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (bin < 0 && errno == ENOENT) {
		snprintf(why, why_size, "no /data/bin");
		return 0;
	}
	if (bin < 0 || fstat(bin, &st) < 0) {
		int k = negative_errno();

		snprintf(why, why_size, "/data/bin: %s%s", strerror(-k),
			 k == -ENOTDIR || k == -ELOOP ? " (or a symlink)" : "");
		return k;
	}
	if (st.st_uid != 0 || (st.st_mode & 022)) {
		snprintf(why, why_size, "/data/bin is %u:%u %04o, not root's alone",
			 (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	for (;;) {
		long got = syscall(SYS_getdents64, bin, u.buf, sizeof(u.buf));

		if (got < 0) {
			int k = negative_errno();

			snprintf(why, why_size, "/data/bin: cannot list it: %s", strerror(-k));
			return k;
		}
		if (got == 0)
			break;
		for (long pos = 0; pos < got;) {
			const struct linux_dirent64 *de =
				(const struct linux_dirent64 *)(u.buf + pos);

			pos += de->d_reclen;
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			/* Past the bound nothing is known of the rest: not "all root's" (red
			 * team: 65,540 root files after an agent's one passed). */
			if (++n > TRUSTED_DATA_BIN_MAX) {
				snprintf(why, why_size,
					 "more than %u entries in /data/bin: not all looked at, "
					 "cannot tell whether each is root's alone",
					 TRUSTED_DATA_BIN_MAX);
				return 1;
			}
			data_bin_entry(bin, de->d_name, &nbad, names, &l);
		}
	}
	*ret_n = n;
	if (!nbad)
		return 0;
	/* names is text (each name escaped): %-s, once */
	escape_format(why, why_size,
		      "%u file(s) in /data/bin, on every agent's PATH, not root's alone: %-s%s",
		      nbad, names, nbad > 3 ? ", ..." : "");
	return 1;
}

/* An agent without no_new_privs gets the spawn core's seccomp filter and Landlock scope
 * only from a process holding CAP_SYS_ADMIN: the kernel's rule for both without
 * no_new_privs. Where pistisd lacks it (Docker's default capability set), every command
 * failed at that step ("landlock scope: Operation not permitted") once trusted commands
 * were configured; agents keep no_new_privs instead and trusted commands fail closed. */
const char *trusted_setuid_blocker(void)
{
	/* no_new_privs is inherited and never cleared: set on pistisd (docker run
	 * --security-opt no-new-privileges, Kubernetes allowPrivilegeEscalation: false), every
	 * agent has it whatever the spawn core does, and sudo refuses. Before, check said
	 * trusted_caps ok, trusted add warned of nothing, and agents kept CAP_SETUID in their
	 * bounding set for a sudo that could never run. */
	if (syscall(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 0)
		return "pistisd runs with no_new_privs (docker run --security-opt "
		       "no-new-privileges, Kubernetes allowPrivilegeEscalation: false), which "
		       "every agent inherits and no process can clear: sudo cannot run";
	if (!caps_have(CAP_SYS_ADMIN))
		return "pistisd lacks CAP_SYS_ADMIN, without which no agent runs without "
		       "no_new_privs under the spawn core's seccomp filter (Docker's default "
		       "capabilities: docker run --cap-add SYS_ADMIN)";
	return NULL;
}

bool trusted_setuid_possible(void)
{
	return !trusted_setuid_blocker();
}

static int shared_tree_suid(int root_fd, char **mi, char *which, size_t size);
static int write_tree_suid(int root_fd, char **mi, char *which, size_t size);

int trusted_dropin_state(int root_fd)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	static const char path[] = TRUSTED_SUDOERS_DIR "/" TRUSTED_DROPIN_NAME;
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct stat st;

	fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	if (fd < 0 && (errno == ENOSYS || errno == E2BIG))
		/* No openat2: etc and etc/sudoers.d are root's; the last component is still
		 * never followed, and the checks below are on the fd. */
		fd = openat(root_fd, path, (int)how.flags);
	if (fd < 0)
		return errno == ENOENT ? TRUSTED_DROPIN_NONE : TRUSTED_DROPIN_LOOSE;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) ||
	    st.st_size == 0)
		return TRUSTED_DROPIN_LOOSE;
	/* Its Defaults line and rule as this release writes them: a drop-in an older pistisd
	 * wrote (a plain machine's /etc outlives the upgrade; an image that kept one) held the
	 * Defaults of its day, which later red teams tightened (!env_check, closefrom,
	 * !use_pty, umask), and served on with them for as long as no one ran install. */
	if (fd_read_all(fd, TRUSTED_DROPIN_SIZE_MAX, &text, &len) < 0 ||
	    !trusted_dropin_text_current(text, len))
		return TRUSTED_DROPIN_OTHER;
	return TRUSTED_DROPIN_CURRENT;
}

bool trusted_configured(int root_fd)
{
	_cleanup_close_ int dir_fd = -1;

	if (root_fd < 0 || !trusted_setuid_possible())
		return false;
	if (trusted_dropin_state(root_fd) != TRUSTED_DROPIN_CURRENT)
		return false;
	/* sudo's digest does not stop the owner of a script, or of a directory above it,
	 * rewriting or replacing it between the hash and the interpreter's read: a path rule
	 * that made /data or /data/trusted writable by agents (a write rule on /data) leaves
	 * setuid off, so sudo refuses, rather than running what an agent may have changed.
	 * trusted_open_dir without create or fix: every component root's alone, no symlink. */
	if (trusted_open_dir(root_fd, TRUSTED_DIR, false, 0, 0, 0, false, &dir_fd) < 0)
		return false;
	/* Agents run without no_new_privs from here: only where no shared tree lets a setuid
	 * file of one agent's run as that agent for another. */
	char which[POLICY_PATH_MAX + 1];
	_cleanup_free_ char *mi = NULL; /* mountinfo: read once for both, once per command */
	return shared_tree_suid(root_fd, &mi, which, sizeof(which)) == 0 &&
	       write_tree_suid(root_fd, &mi, which, sizeof(which)) == 0;
}

/* The mount id of fd, from /proc/self/fdinfo (Linux 3.15). */
static int fd_mount_id(int fd, unsigned *ret)
{
	char p[64], buf[512], *m;
	_cleanup_close_ int f = -1;
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", fd);
	f = open(p, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return negative_errno();
	n = read(f, buf, sizeof(buf) - 1);
	if (n < 0)
		return negative_errno();
	buf[n] = '\0';
	m = strstr(buf, "\nmnt_id:");
	if (!m || sscanf(m + 8, "%u", ret) != 1)
		return -ENODATA;
	return 0;
}

/* The mount whose id is mount_id, and every mount at or beneath its mount point, nosuid:
 * 0, else 1 with which naming the first that is not; <0 when mountinfo cannot be read or
 * the mount is not in it. One read of mountinfo, two passes: the first over a copy finds
 * the mount point (parsing writes into the line). */
static int mounts_nosuid_under(unsigned mount_id, char *which, size_t size)
{
	_cleanup_free_ char *mi = NULL, *copy = NULL;
	const char *mp = NULL;
	char *line, *save = NULL;
	struct mountinfo_entry e;
	int r = mountinfo_read(&mi);

	if (r < 0)
		return r;
	copy = strdup(mi);
	if (!copy)
		return -ENOMEM;
	for (line = strtok_r(copy, "\n", &save); line && !mp; line = strtok_r(NULL, "\n", &save))
		if (mountinfo_parse_line(line, &e) == 0 && e.id == mount_id)
			mp = e.mount_point; /* points into copy */
	if (!mp)
		return -ENOENT;
	save = NULL;
	for (line = strtok_r(mi, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (mountinfo_parse_line(line, &e) == 0 &&
		    mountinfo_path_under(e.mount_point, mp) &&
		    !mountinfo_opt(e.mount_opts, "nosuid", NULL, NULL)) {
			snprintf(which, size, "%s (moved beneath %s?)", e.mount_point, mp);
			return 1;
		}
	return 0;
}

/* Every mount at or beneath the tree fd holds, as its mount point resolves now, nosuid: 0,
 * else 1 with which naming the first that is not; <0 when that cannot be told (counts as
 * not nosuid). fstatfs of the tree alone passed a volume mounted inside /workspaces or a
 * tmpfs inside /tmp without nosuid, and agent A's setuid file there ran as A for agent B
 * (red team). The tree's path is what /proc/self/fd/N reads and the mounts beneath it are
 * those mountinfo (mi, read by the caller) names there, both as this process's root sees
 * them. Each is judged by its mount point opened again, never followed through a symlink:
 * a mount another hides is judged by the one on top, the one a path reaches, as
 * pistisd-entry's remount by path sets it. */
static int tree_mounts_suid(int fd, const char *mi, char *which, size_t size)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_free_ char *copy = NULL;
	char link[64], path[PATH_MAX], *line, *save = NULL;
	struct mountinfo_entry e;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return negative_errno();
	path[n] = '\0';
	if (path[0] != '/')
		return -ENOENT; /* not beneath this root: cannot tell */
	copy = strdup(mi);
	if (!copy)
		return -ENOMEM;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		_cleanup_close_ int mfd = -1;
		struct statfs sf;

		if (mountinfo_parse_line(line, &e) < 0 ||
		    !mountinfo_path_under(e.mount_point, path))
			continue;
		snprintf(which, size, "%s", e.mount_point);
		mfd = (int)syscall(SYS_openat2, AT_FDCWD, e.mount_point, &how, sizeof(how));
		if (mfd < 0 && (errno == ENOSYS || errno == E2BIG))
			mfd = open(e.mount_point, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (mfd < 0 || fstatfs(mfd, &sf) < 0)
			return negative_errno(); /* moved or gone meanwhile: cannot tell */
		if (!(sf.f_flags & ST_NOSUID))
			return 1;
	}
	return 0;
}

int trusted_tree_mounts_suid(int fd, char *which, size_t size)
{
	_cleanup_free_ char *mi = NULL;
	int r = mountinfo_read(&mi);

	return r < 0 ? r : tree_mounts_suid(fd, mi, which, size);
}

/* 1 when the tree at fd is not nosuid, or a mount beneath it is not (a volume in
 * /workspaces, a tmpfs in /tmp): which then names that mount. *mi is the caller's
 * mountinfo, read here when still NULL (the caller frees it). */
static int tree_suid(int fd, char **mi, char *which, size_t size)
{
	struct statfs sf;
	int r;

	if (fstatfs(fd, &sf) < 0)
		return negative_errno();
	if (!(sf.f_flags & ST_NOSUID))
		return 1;
	if (!*mi && (r = mountinfo_read(mi)) < 0)
		return r;
	return tree_mounts_suid(fd, *mi, which, size);
}

/* A write rule's path that is missing or a link: see trusted_write_tree_suid. 0 when no
 * agent could have moved its tree away (the deepest directory on the way is not one agents
 * may write), or everything it could have been moved to, with the mounts beneath it, is
 * nosuid: the mount holding that directory and every mount beneath that mount's point. */
static int moved_away_nosuid(int root_fd, const char *path, char *which, size_t size)
{
	_cleanup_close_ int dfd = -1;
	struct statfs sf;
	struct stat st;
	unsigned id;
	int r;

	r = policy_deepest_dir(root_fd, path, &dfd, NULL);
	if (r < 0)
		return r;
	if (fstat(dfd, &st) < 0 || fstatfs(dfd, &sf) < 0)
		return negative_errno();
	if (!users_agents_may_write(&st))
		return 0; /* nobody but root moved anything out of it */
	if (!(sf.f_flags & ST_NOSUID))
		return 1;
	r = fd_mount_id(dfd, &id);
	if (r < 0)
		return r;			     /* cannot tell: not nosuid */
	return mounts_nosuid_under(id, which, size); /* <0: cannot tell, not nosuid */
}

/* trusted_write_tree_suid with *mi the caller's mountinfo, read here when still NULL (the
 * caller frees it): trusted_configured reads it once for both kinds of tree. */
static int write_tree_suid(int root_fd, char **mi, char *which, size_t size)
{
	_cleanup_(policy_rules_freep) struct policy_rules *rules = NULL;
	struct policy_error err;
	int r;

	snprintf(which, size, "%s", POLICY_RULES_PATH);
	r = policy_rules_load(root_fd, POLICY_RULES_PATH, true, true, &rules, NULL, NULL, &err);
	if (r == -ENOENT)
		r = policy_rules_parse(policy_defaults_json, policy_defaults_json_len(), &rules,
				       &err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < rules->n; i++) {
		const struct policy_rule *u = &rules->rules[i];
		_cleanup_close_ int fd = -1;

		if (u->access != POLICY_WRITE)
			continue;
		snprintf(which, size, "%s", u->path);
		r = policy_resolve(root_fd, u->path, O_PATH, &fd);
		/* Not there, or a symlink on the way: nothing is writable through the path
		 * now. But what the walk once made writable there may have been moved away by
		 * an agent that can write the deepest directory still on the way, and a
		 * rename carries the mounts beneath what it moves (red team: a write tree's
		 * suid submount moved aside, a link in its place, and setuid came back on). */
		if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP) {
			r = moved_away_nosuid(root_fd, u->path, which, size);
			if (r != 0)
				return r;
			continue;
		}
		if (r < 0)
			return r;
		r = tree_suid(fd, mi, which, size);
		if (r != 0)
			return r;
	}
	return 0;
}

int trusted_write_tree_suid(int root_fd, char *which, size_t size)
{
	_cleanup_free_ char *mi = NULL;

	return write_tree_suid(root_fd, &mi, which, size);
}

/* trusted_shared_tree_suid with the caller's mountinfo (write_tree_suid). */
static int shared_tree_suid(int root_fd, char **mi, char *which, size_t size)
{
	static const char *const trees[] = TRUSTED_SHARED_TREES;
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int r;

	for (size_t i = 0; i < ELEMENTSOF(trees); i++) {
		const char *rel = trees[i] + 1; /* beneath root_fd */
		_cleanup_close_ int fd = (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));

		if (fd < 0 && (errno == ENOSYS || errno == E2BIG))
			fd = openat(root_fd, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue; /* not there: nothing shared */
		snprintf(which, size, "%s", trees[i]);
		if (fd < 0)
			return negative_errno();
		r = tree_suid(fd, mi, which, size);
		if (r != 0)
			return r;
	}
	return 0;
}

int trusted_shared_tree_suid(int root_fd, char *which, size_t size)
{
	_cleanup_free_ char *mi = NULL;

	return shared_tree_suid(root_fd, &mi, which, size);
}
