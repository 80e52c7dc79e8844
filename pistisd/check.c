/* `pistisd check`: probe the running kernel and the image for what pistis relies on.
 *
 * Kernel checks call the syscall itself (a feature compiled in but blocked by a container's
 * seccomp profile is as missing as one never built) or read /proc/sys. Image checks (sudo,
 * visudo, the setuid inventory) look beneath the root given, resolving inside it, and never
 * follow its symlinks out. The verdict and the output live in check-report.c. */
#include "pistisd/cgroup.h"
#include "pistisd/check.h"
#include "trusted/trusted.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/caps.h"
#include "lib/host-ns.h"
#include "lib/id-map.h"
#include "lib/macro.h"
#include "lib/mountinfo.h"
#include "lib/statx.h"
#include "lib/trust-path.h"
#include "pistisd/cli.h"
#include "pistisd/scope.h"
#include "pistisd/spawn.h"
#include "policy/policy.h"
#include "sandbox-users/users.h"

/* Syscall numbers and constants the libc headers may lack (musl 1.2.3, older glibc). The
 * numbers are the same on every architecture since the 4xx unification. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_seccomp
#define SYS_seccomp __NR_seccomp
#endif

/* struct open_how and RESOLVE_* from <linux/openat2.h>, spelled out so musl builds need no
 * newer uapi headers than they have. */
struct check_open_how {
	uint64_t flags;
	uint64_t mode;
	uint64_t resolve;
};
#define CHECK_RESOLVE_NO_XDEV 0x01
#define CHECK_RESOLVE_NO_MAGICLINKS 0x02
#define CHECK_RESOLVE_NO_SYMLINKS 0x04
#define CHECK_RESOLVE_BENEATH 0x08
#define CHECK_RESOLVE_IN_ROOT 0x10

/* The PATH an image's root would search; sudo and visudo live in one of these. */
static const char *const image_path[] = {
	"usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin",
};

static int check_openat2(int dfd, const char *path, uint64_t flags, uint64_t resolve)
{
	struct check_open_how how = {.flags = flags | O_CLOEXEC, .resolve = resolve};

	return RET_NERRNO(syscall(SYS_openat2, dfd, path, &how, sizeof(how)));
}

static const char *errno_name(int e)
{
	switch (e) {
	case ENOSYS:
		return "ENOSYS";
	case EPERM:
		return "EPERM";
	case EACCES:
		return "EACCES";
	case EINVAL:
		return "EINVAL";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case ENOENT:
		return "ENOENT";
	case EXDEV:
		return "EXDEV";
	case ELOOP:
		return "ELOOP";
	default:
		return "error";
	}
}

/* A syscall refused with EPERM by a process that is root is a seccomp profile talking. */
static const char *why_missing(int e)
{
	switch (e) {
	case ENOSYS:
		return "not in this kernel (ENOSYS)";
	case EPERM:
		return "blocked, likely by the container's seccomp profile (EPERM)";
	default:
		return errno_name(e);
	}
}

/* Wait for pid, a child of ours. Its wait status (never negative), or -errno when waitpid
 * failed: ECHILD when something else reaped it (another thread's wait, or SIGCHLD left
 * ignored: pistisd's main resets it, but check_run is linked into other programs), where a
 * status taken as 0 read as a probe that exited 0 and passed. */
static int wait_child(pid_t pid)
{
	int status = 0;

	while (waitpid(pid, &status, 0) != pid)
		if (errno != EINTR)
			return -errno;
	return status;
}

/* Whether /proc/sys is there at all: kernel/osrelease exists on every kernel. Without it (no
 * proc mounted, or /proc/sys masked by the runtime) a missing knob says nothing about the
 * kernel, and must not be reported as "absent". */
static bool proc_sys_readable(void)
{
	_cleanup_close_ int fd =
		open("/proc/sys/kernel/osrelease", O_RDONLY | O_CLOEXEC | O_NOCTTY);

	return fd >= 0;
}

/* Read a small integer from /proc/sys/<name>. -ENOENT when the knob does not exist,
 * -ENODATA when /proc/sys itself cannot be read (nothing is known then). */
static int read_sysctl(const char *name, long *ret)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	char path[PATH_MAX], *end = NULL;
	size_t len = 0;
	int r;

	if ((size_t)snprintf(path, sizeof(path), "/proc/sys/%s", name) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return errno == ENOENT && !proc_sys_readable() ? -ENODATA : -errno;
	r = fd_read_all(fd, 64, &buf, &len);
	if (r < 0)
		return r;
	errno = 0;
	long v = strtol(buf, &end, 10);
	if (errno || end == buf || (*end && *end != '\n'))
		return -EINVAL;
	*ret = v;
	return 0;
}

/* The value for a sysctl that could not be read. */
static const char *sysctl_unread(const char *name, int k, char *buf, size_t size)
{
	if (k == -ENODATA)
		snprintf(buf, size,
			 "/proc/sys is not readable (not mounted, or masked): %s unknown", name);
	else
		snprintf(buf, size, "/proc/sys/%s unreadable (%s)", name, errno_name(-k));
	return buf;
}

/* As root, with what pistisd needs (lib/caps.h): without them every command failed at its
 * own step, or ran past its timeout with its leftovers alive (no CAP_KILL). */
static void probe_capabilities(struct check_report *r)
{
	char names[256];
	uint64_t missing = 0;
	int k = caps_missing(&missing);

	if (k < 0)
		return check_set(r, CHECK_CAPABILITIES, CHECK_STATUS_FAIL, "capget: %s",
				 strerror(-k));
	if (!missing)
		return check_set(r, CHECK_CAPABILITIES, CHECK_STATUS_OK,
				 "root with every capability pistisd needs");
	caps_names(missing, names, sizeof(names));
	if (geteuid() != 0)
		return check_set(r, CHECK_CAPABILITIES, CHECK_STATUS_FAIL,
				 "not root (uid %u), so without %s", (unsigned)geteuid(), names);
	check_set(r, CHECK_CAPABILITIES, CHECK_STATUS_FAIL, "root without %s (dropped)", names);
}

/* systemd's userdb drop-ins (nss-systemd reads them): "UID.user" and "GID.group" links
 * beside each record. The first in the agents' range, written to found; false if none. */
static bool userdb_in_range(int root_fd, char *found, size_t size)
{
	static const char *const dirs[] = {"etc/userdb", "run/userdb", "run/host/userdb",
					   "usr/lib/userdb", "usr/local/lib/userdb"};

	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		int fd = check_openat2(root_fd, dirs[i], O_RDONLY | O_DIRECTORY,
				       CHECK_RESOLVE_IN_ROOT | CHECK_RESOLVE_NO_MAGICLINKS);
		struct dirent *de;
		DIR *d;

		if (fd < 0)
			fd = openat(root_fd, dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || !(d = fdopendir(fd))) {
			safe_close(fd);
			continue;
		}
		while ((de = readdir(d))) {
			char *end;
			unsigned long id;

			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			errno = 0;
			id = strtoul(de->d_name, &end, 10);
			if (errno || (strcmp(end, ".user") && strcmp(end, ".group")) ||
			    id > UINT32_MAX || !users_uid_is_agent((uid_t)id))
				continue;
			snprintf(found, size, "/%s/%.64s", dirs[i], de->d_name);
			closedir(d);
			return true;
		}
		closedir(d);
	}
	return false;
}

/* What probe_nss_sources found: the foreign sources, each once, escaped. */
struct nss_found {
	char list[384];
	size_t len;
	bool systemd, after_hash;
	/* compat named for passwd (group, initgroups), or the database not named at all
	 * (glibc before 2.33 defaults to "compat [NOTFOUND=return] files"): '+' lines then
	 * bring users (groups) from passwd_compat's (group_compat's) sources, nis by default */
	bool compat[2];
	char compat_src[2][96];
};

static void nss_add(struct nss_found *f, const char *tok, size_t n, const char *note)
{
	_cleanup_free_ char *e = NULL, *t = strndup(tok, n);
	const char *q;

	if (!t || !(e = escape_c_dup(t)))
		return;
	for (q = f->list; (q = strstr(q, e)); q += strlen(e))
		if ((q == f->list || q[-1] == ' ') && (q[strlen(e)] == ',' || !q[strlen(e)]))
			return; /* listed once */
	if (f->len + strlen(e) + strlen(note) + 3 < sizeof(f->list))
		f->len += (size_t)snprintf(f->list + f->len, sizeof(f->list) - f->len, "%s%s%s",
					   f->len ? ", " : "", e, note);
}

static bool nss_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* One line of nsswitch.conf as glibc (2.33 on, nss_database.c and nss_action_parse.c)
 * reads it: the database name ends at white space or ':' (so "passwd files sss" names
 * sss); sources end at white space or '[' ("sss[NOTFOUND=return]" is sss); a '[' where a
 * source should start ends the line's sources; and a '#' inside a line is no comment
 * ("passwd: files # sss" loads libnss_sss): only a line whose first word starts with
 * '#' names no database. Each database of interest seen is set in seen. */
static void nss_line(struct nss_found *f, const char *p, unsigned *seen)
{
	static const char *const dbs[] = {"passwd", "group", "initgroups", "passwd_compat",
					  "group_compat"};
	static const char *const known[] = {"files", "compat", "systemd", "mymachines"};
	const char *name;
	size_t n, db;
	bool after_hash = false;

	while (nss_space(*p))
		p++;
	name = p;
	while (*p && !nss_space(*p) && *p != ':')
		p++;
	if (!*p || p == name)
		return;
	n = (size_t)(p - name);
	for (db = 0; db < ELEMENTSOF(dbs); db++)
		if (strlen(dbs[db]) == n && !memcmp(name, dbs[db], n))
			break;
	if (db == ELEMENTSOF(dbs))
		return;
	*seen |= 1u << db;
	while (*p && (nss_space(*p) || *p == ':'))
		p++;
	if (db >= 3)
		f->compat_src[db - 3][0] = '\0';
	for (;;) {
		const char *tok;
		bool ok = false;

		while (nss_space(*p))
			p++;
		tok = p;
		while (*p && !nss_space(*p) && *p != '[')
			p++;
		if (p == tok)
			return; /* the end, or a '[' without a source: glibc stops there */
		n = (size_t)(p - tok);
		while (nss_space(*p))
			p++;
		if (*p == '[') {
			p = strchr(p, ']');
			if (!p)
				return; /* glibc refuses the line */
			p++;
		}
		if (db >= 3) {
			/* passwd_compat, group_compat: what compat's '+' lines read */
			char *d = f->compat_src[db - 3];
			size_t used = strlen(d);
			_cleanup_free_ char *t = strndup(tok, n), *e = t ? escape_c_dup(t) : NULL;

			if (e && used + strlen(e) + 3 < sizeof(f->compat_src[0]))
				snprintf(d + used, sizeof(f->compat_src[0]) - used, "%s%s",
					 used ? " " : "", e);
			continue;
		}
		if (tok[0] == '#') {
			after_hash = true;
			continue; /* "libnss_#…" is no module anyone has */
		}
		for (size_t i = 0; i < ELEMENTSOF(known); i++)
			ok = ok || (strlen(known[i]) == n && !memcmp(tok, known[i], n));
		if (n == 7 && !memcmp(tok, "systemd", 7))
			f->systemd = true;
		if (n == 6 && !memcmp(tok, "compat", 6))
			f->compat[db == 0 ? 0 : 1] = true;
		if (!ok)
			nss_add(f, tok, n, after_hash ? " (after a '#')" : "");
		f->after_hash = f->after_hash || (after_hash && !ok);
	}
}

/* The regular file name beneath the root (no link followed), at most max bytes, in a
 * malloc'd NUL-terminated *ret; false when it is missing, not a regular file, larger or
 * unreadable. */
static bool read_root_regular(int root_fd, const char *name, size_t max, char **ret,
			      size_t *ret_len)
{
	_cleanup_close_ int fd = check_openat2(root_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK,
					       CHECK_RESOLVE_BENEATH | CHECK_RESOLVE_NO_MAGICLINKS);
	struct stat st;

	if (fd < 0 && errno == ENOSYS)
		fd = openat(root_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       fd_read_all(fd, max, ret, ret_len) == 0;
}

/* The first line of the root's etc/<name> that starts with '+' (NIS compat: "+", "+name",
 * "+@netgroup", with or without fields), 0 if none or unreadable. */
static size_t compat_plus_line(int root_fd, const char *name)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0, line = 1;

	/* sandbox-users' own limit for these files (32 MiB) */
	if (!read_root_regular(root_fd, name, 32u << 20, &text, &len))
		return 0;
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '+' && (i == 0 || text[i - 1] == '\n'))
			return line;
		line += text[i] == '\n';
	}
	return 0;
}

/* The first range of the root's etc/<name> (/etc/subuid, /etc/subgid: "owner:start:count",
 * shadow-utils' subid(5)) that meets the agents' ids, written to found; false if none.
 * Those ids are the uids of a rootless container's processes (podman, a user's LXC) on the
 * machine, and no passwd line names them. */
static bool subid_in_range(int root_fd, const char *name, char *found, size_t size)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;

	if (!read_root_regular(root_fd, name, 4u << 20, &text, &len))
		return false;
	for (char *line = text, *next; line && *line; line = next) {
		unsigned long long start, count, last;
		char *p, *end;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		p = strchr(line, ':');
		if (line[0] == '#' || !p)
			continue;
		errno = 0;
		start = strtoull(p + 1, &end, 10);
		if (errno || *end != ':' || !(count = strtoull(end + 1, &end, 10)) || errno)
			continue;
		/* start + count wraps for a count near 2^64 (strtoull takes "-1" for one): a
		 * range from 1000 with that count was skipped as ending below the agents' */
		last = count - 1 > ULLONG_MAX - start ? ULLONG_MAX : start + count - 1;
		if (start > USERS_AGENT_UID_MAX || last < USERS_AGENT_UID_MIN)
			continue;
		*p = '\0';
		_cleanup_free_ char *e = escape_c_dup(line);
		snprintf(found, size, "/%s: '%.64s' %llu-%llu", name, e ? e : "?", start, last);
		return true;
	}
	return false;
}

/* Account sources beyond /etc/passwd and /etc/group in the root's nsswitch.conf (passwd,
 * group, initgroups): their users and groups are invisible to pistisd users, which never
 * asks NSS (a static binary cannot load glibc's modules, and musl has none), so one with an
 * id in the agents' range would share it with an agent. files and compat read the same
 * files, but compat's '+' lines bring in passwd_compat's (group_compat's) sources, nis by
 * default; systemd's dynamic users (61184-65519) and homed users (60001-60513) and
 * mymachines' (from 524288) are outside the range, but systemd's userdb records may name
 * any id and are looked at. Read as glibc reads it (nss_line), not as a person would: a
 * source after a '#', or glued to its "[…]", is still loaded (red team). */
static void probe_nss_sources(struct check_report *r, int root_fd)
{
	static const char *const files[2] = {"etc/passwd", "etc/group"};
	_cleanup_free_ char *text = NULL;
	struct nss_found f = {.compat_src = {"nis", "nis"}};
	char userdb[128] = "", subids[160] = "";
	unsigned seen = 0;
	bool have_conf;
	int fd, k;

	/* O_NONBLOCK|O_NOCTTY and a regular file only, as read_root_regular: a FIFO there
	 * held this open for ever, and with it `pistisd check` and serve's start-up, which
	 * runs it (red team); a link to a terminal would have been opened as one. */
	fd = check_openat2(root_fd, "etc/nsswitch.conf", O_RDONLY | O_NONBLOCK | O_NOCTTY,
			   CHECK_RESOLVE_IN_ROOT | CHECK_RESOLVE_NO_MAGICLINKS);
	if (fd < 0 && errno == ENOSYS)
		fd = openat(root_fd, "etc/nsswitch.conf",
			    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno != ENOENT)
		return check_set(r, CHECK_NSS_SOURCES, CHECK_STATUS_WARN,
				 "cannot read /etc/nsswitch.conf (%s)", errno_name(errno));
	have_conf = fd >= 0;
	if (have_conf) {
		struct stat st;

		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			safe_close(fd);
			return check_set(r, CHECK_NSS_SOURCES, CHECK_STATUS_WARN,
					 "/etc/nsswitch.conf is not a regular file (a FIFO, device "
					 "or socket): not read; every account lookup in the root "
					 "would wait on a FIFO there");
		}
		k = fd_read_all(fd, 256 * 1024, &text, NULL);
		safe_close(fd);
		if (k < 0)
			return check_set(r, CHECK_NSS_SOURCES, CHECK_STATUS_WARN,
					 "cannot read /etc/nsswitch.conf (%s)", errno_name(-k));
		for (char *line = text, *next; line && *line; line = next) {
			next = strchr(line, '\n');
			if (next)
				*next++ = '\0';
			nss_line(&f, line, &seen);
		}
	}
	/* A database not named: glibc before 2.33 reads it "compat [NOTFOUND=return]
	 * files" (the default without nsswitch.conf too); 2.33 on "files". */
	if (!(seen & 1u))
		f.compat[0] = true;
	if (!(seen & 6u))
		f.compat[1] = true;
	for (int i = 0; i < 2; i++) {
		char note[160];
		size_t line = f.compat[i] ? compat_plus_line(root_fd, files[i]) : 0;
		const char *src = f.compat_src[i];

		if (!line || !src[0])
			continue; /* "passwd_compat:" with no source: '+' lines read nothing */
		snprintf(note, sizeof(note), " (compat: '+' line %zu of /%s)", line, files[i]);
		nss_add(&f, src, strlen(src), note);
	}
	if (f.systemd && userdb_in_range(root_fd, userdb, sizeof(userdb))) {
		char note[160];

		snprintf(note, sizeof(note), " (userdb record %s)", userdb);
		nss_add(&f, "systemd", 7, note);
	}
	/* Subordinate ids: not NSS, but ids of the machine no passwd line names either. */
	for (int i = 0; i < 2 && !subids[0]; i++)
		subid_in_range(root_fd, i ? "etc/subgid" : "etc/subuid", subids, sizeof(subids));
	if (!f.len && subids[0])
		return check_set(r, CHECK_NSS_SOURCES, CHECK_STATUS_WARN,
				 "subordinate ids of a rootless container's user (%s) meet "
				 "10100-59999: its processes would share uids with agents",
				 subids);
	if (!f.len)
		return check_set(r, CHECK_NSS_SOURCES, CHECK_STATUS_OK, "%s%s",
				 !have_conf ? "no /etc/nsswitch.conf: users and groups from the "
					      "files only"
					    : "passwd and group from the files",
				 f.systemd ? " and systemd (its dynamic and homed ids are outside "
					     "10100-59999)"
					   : "");
	check_set(r, CHECK_NSS_SOURCES, CHECK_STATUS_WARN,
		  "users or groups also from %s (nsswitch.conf%s)%s%s%s: pistisd users sees only "
		  "/etc/passwd and /etc/group, so one of theirs with an id in 10100-59999 would "
		  "share it with an agent",
		  f.list, f.after_hash ? "; glibc reads no comment inside a line" : "",
		  subids[0] ? ", and subordinate ids (" : "", subids, subids[0] ? ")" : "");
}

/* The pistisd that runs: its path is what pistisd-entry execs as root at every restart
 * and what the trusted-command wrappers name, so it must be root's alone with every
 * directory on the way (a sticky root-owned one, /tmp, included: no one else renames what
 * root put there). One an agent may write is root for that agent at the next restart
 * (red team: entry ran a pistisd in a 0777 directory without a word). A file replaced by
 * rename since start (an upgrade while serve runs: /proc/self/exe says "(deleted)") is
 * what the next restart runs: warn, so the version serving is not taken for the new one. */
static void probe_pistisd_binary(struct check_report *r)
{
	static const struct trust_rule rule = {.also_owner = (uid_t)-1,
					       .flags = TRUST_STICKY | TRUST_ROOT_GROUP};
	static const char deleted[] = " (deleted)";
	char exe[PATH_MAX], why[PATH_MAX + 512];
	_cleanup_close_ int fd = -1;
	struct stat st;
	ssize_t n;
	size_t len;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0 || stat("/proc/self/exe", &st) < 0)
		return check_set(r, CHECK_PISTISD_BINARY, CHECK_STATUS_WARN,
				 "cannot read /proc/self/exe: %s", strerror(errno));
	exe[n] = '\0';
	len = (size_t)n;
	if (st.st_uid != 0 || (st.st_mode & 002) || ((st.st_mode & 020) && st.st_gid != 0))
		return check_set(
			r, CHECK_PISTISD_BINARY, CHECK_STATUS_FAIL,
			"the running pistisd (%s) is owned by %u:%u with mode %04o: it must "
			"be root's and writable by no one else",
			exe, (unsigned)st.st_uid, (unsigned)st.st_gid,
			(unsigned)(st.st_mode & 07777));
	if (len > sizeof(deleted) - 1 && !strcmp(exe + len - (sizeof(deleted) - 1), deleted)) {
		exe[len - (sizeof(deleted) - 1)] = '\0';
		return check_set(r, CHECK_PISTISD_BINARY, CHECK_STATUS_WARN,
				 "%s was replaced or removed since this pistisd started (pistisd "
				 "%s): the next start runs what is there now",
				 exe, PISTIS_VERSION);
	}
	fd = trust_file_open(exe, &rule, "the pistisd that runs as root", why, sizeof(why));
	if (fd < 0)
		return check_set(r, CHECK_PISTISD_BINARY, CHECK_STATUS_FAIL, "%s", why);
	check_set(r, CHECK_PISTISD_BINARY, CHECK_STATUS_OK,
		  "%s (pistisd %s): root's alone, every directory on the way too", exe,
		  PISTIS_VERSION);
}

/* The user namespace: every id pistis sets or gives to a file must be mapped (setresuid,
 * fchown: EINVAL otherwise), and setgroups allowed, or every command fails at its own step
 * (users ensure "cannot make /data/sandbox-home/... (Invalid argument)", run "setgroups:
 * Operation not permitted"). Mapped, the value says to which host ids: whether another
 * sandbox maps the same ones cannot be seen from inside (Docker's userns-remap maps every
 * container of a daemon alike). */
static void probe_id_map(struct check_report *r)
{
	const struct id_map_need needs[] = USERS_ID_MAP_ALL;
	const struct id_map *uids;
	uint32_t lo, hi, tools;
	char why[512];
	int k;

	k = id_map_check_needs(needs, ELEMENTSOF(needs), true, why, sizeof(why));
	if (k < 0)
		return check_set(r, CHECK_ID_MAP, CHECK_STATUS_FAIL, "%s", why);
	k = id_map_self(false, &uids);
	if (k == -ENOENT)
		return check_set(r, CHECK_ID_MAP, CHECK_STATUS_OK,
				 "no user namespaces in this kernel: ids are the host's");
	if (k < 0)
		return check_set(r, CHECK_ID_MAP, CHECK_STATUS_FAIL,
				 "cannot read /proc/self/uid_map (%s)", strerror(-k));
	if (host_ns_user_is_initial() == 1 || id_map_is_initial(uids))
		return check_set(r, CHECK_ID_MAP, CHECK_STATUS_OK,
				 "the host's user namespace: agents' uids are the host's, the same "
				 "in every sandbox on the machine that has none of its own");
	(void)id_map_outer(uids, USERS_AGENT_UID_MIN, &lo);
	(void)id_map_outer(uids, USERS_AGENT_UID_MAX, &hi);
	(void)id_map_outer(uids, USERS_TOOLS_UID, &tools);
	check_set(r, CHECK_ID_MAP, CHECK_STATUS_OK,
		  "a user namespace: agents' uids %u-%u are host uids %u-%u%s, pi-tools' %u; "
		  "whether another sandbox maps the same host ids cannot be seen from here",
		  USERS_AGENT_UID_MIN, USERS_AGENT_UID_MAX, lo, hi,
		  hi - lo == USERS_AGENT_UID_MAX - USERS_AGENT_UID_MIN ? "" : " (in pieces)",
		  tools);
}

/* Namespaces shared with the host: every agent uid is also every other sandbox's there, so
 * what pistis does by uid (the process-group mode's sweep, the SysV removal) and what an
 * agent sees (every process of the machine, its SysV objects, its host name) reach past
 * the sandbox. */
static void probe_host_namespaces(struct check_report *r)
{
	char shared[64] = "";
	size_t len = 0;

	for (enum host_ns i = 0; i < _HOST_NS_MAX; i++)
		if (host_ns_is_initial(i) == 1)
			len += (size_t)snprintf(shared + len, sizeof(shared) - len, "%s%s",
						len ? ", " : "", host_ns_name(i));
	if (!len)
		return check_set(r, CHECK_HOST_NAMESPACES, CHECK_STATUS_OK,
				 "pid, ipc and uts namespaces of its own");
	check_set(r, CHECK_HOST_NAMESPACES, CHECK_STATUS_WARN,
		  "the host's %s namespace(s): agents see the machine's processes and SysV "
		  "objects%s",
		  shared,
		  host_ns_is_initial(HOST_NS_PID) == 1
			  ? "; the process-group mode's sweep by uid reaches every process of "
			    "that uid on the machine"
			  : "");
}

/* How many processes of /proc live in another mount namespace than ours, and the first one
 * (0: none): /proc/PID/ns/mnt where it can be read, else /proc/PID/mountinfo, which needs
 * no ptrace access (a mount is in one namespace only: no id in common, another one). */
static unsigned other_mount_ns_processes(pid_t *ret_first)
{
	struct mountinfo_ours ours = {0};
	DIR *d = NULL;
	struct stat self;
	struct dirent *de;
	unsigned n = 0;

	*ret_first = 0;
	if (stat("/proc/self/ns/mnt", &self) < 0)
		self.st_ino = 0;
	d = opendir("/proc");
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char name[64];
		struct stat st;
		long pid = strtol(de->d_name, NULL, 10);
		bool other;

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(name, sizeof(name), "/proc/%ld/ns/mnt", pid);
		if (self.st_ino && stat(name, &st) == 0)
			other = st.st_ino != self.st_ino || st.st_dev != self.st_dev;
		else
			other = mountinfo_pid_elsewhere(dirfd(d), &ours, (pid_t)pid);
		if (!other)
			continue;
		if (!n++ || pid == 1)
			*ret_first = (pid_t)pid;
	}
	closedir(d);
	mountinfo_ours_done(&ours);
	return n;
}

/* A PID namespace other than the host's that processes of another mount namespace share
 * with us: a sidecar (docker run --pid container:X, Kubernetes shareProcessNamespace, whose
 * PID 1 is the pod's pause process). Without a user namespace their uids are ours: an
 * agent of uid 10100 reads and kills the other container's processes of 10100. */
static void probe_shared_pid_ns(struct check_report *r)
{
	pid_t first;
	unsigned n;

	if (host_ns_is_initial(HOST_NS_PID) == 1)
		return check_set(r, CHECK_SHARED_PID_NS, CHECK_STATUS_WARN,
				 "the host's PID namespace (host_namespaces)");
	n = other_mount_ns_processes(&first);
	if (!n)
		return check_set(r, CHECK_SHARED_PID_NS, CHECK_STATUS_OK,
				 "no process of another mount namespace in ours");
	check_set(r, CHECK_SHARED_PID_NS, CHECK_STATUS_WARN,
		  "%u process(es) of another mount namespace (another container's) share the "
		  "PID namespace%s (pid %d): agents read and signal those of their own uid; "
		  "pistis's clean-ups leave them alone",
		  n, first == 1 ? ", PID 1 among them" : "", (int)first);
}

static void probe_seccomp(struct check_report *r)
{
	uint32_t action = SECCOMP_RET_KILL_PROCESS;
	int mode, status = 0;
	pid_t pid;

	mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	if (mode < 0) {
		check_set(r, CHECK_SECCOMP, CHECK_STATUS_MISSING,
			  "kernel built without CONFIG_SECCOMP (%s)", errno_name(errno));
		return;
	}

	/* Installing a filter is the only proof that filters work here: try an allow-all one
	 * in a throwaway child, so this process stays unfiltered. */
	pid = fork();
	if (pid < 0) {
		check_set(r, CHECK_SECCOMP, CHECK_STATUS_FAIL, "cannot probe: fork: %s",
			  strerror(errno));
		return;
	}
	if (pid == 0) {
		struct sock_filter insn[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
		struct sock_fprog prog = {.len = 1, .filter = insn};

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(errno & 0xff);
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			_exit(errno & 0xff);
		_exit(0);
	}
	/* Only the child's own exit says what the filter did: anything else is unknown,
	 * and unknown is not ok (seccomp is hard: serve must not start on a guess). */
	status = wait_child(pid);
	if (status < 0)
		return check_set(r, CHECK_SECCOMP, CHECK_STATUS_FAIL, "cannot probe: waitpid: %s",
				 strerror(-status));
	if (WIFSIGNALED(status))
		return check_set(r, CHECK_SECCOMP, CHECK_STATUS_FAIL,
				 "cannot probe: the probe child was killed by signal %d (%s)",
				 WTERMSIG(status), strsignal(WTERMSIG(status)));
	if (!WIFEXITED(status))
		return check_set(r, CHECK_SECCOMP, CHECK_STATUS_FAIL,
				 "cannot probe: the probe child ended with wait status %#x",
				 (unsigned)status);
	if (WEXITSTATUS(status) != 0) {
		int e = WEXITSTATUS(status);
		check_set(r, CHECK_SECCOMP, CHECK_STATUS_MISSING, "cannot install a filter: %s",
			  e == EINVAL ? "kernel without CONFIG_SECCOMP_FILTER (EINVAL)"
				      : why_missing(e));
		return;
	}

	/* KILL_PROCESS (4.14) is what the spawn filter uses for a foreign architecture. */
	if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) < 0) {
		check_set(r, CHECK_SECCOMP, CHECK_STATUS_WARN,
			  "filters work; SECCOMP_RET_KILL_PROCESS unavailable (%s), KILL_THREAD "
			  "will be used",
			  errno_name(errno));
		return;
	}
	check_set(r, CHECK_SECCOMP, CHECK_STATUS_OK, "filters work, KILL_PROCESS available%s%s",
		  mode == 2 ? "; pistisd itself runs under a filter (container profile)" : "",
		  spawn_keyctl_refused() ? "; keyctl refused to pistisd: commands keep its session "
					   "keyring, which none of them can use either"
					 : "");
}

static void probe_landlock(struct check_report *r)
{
	int abi = scope_landlock_abi(), scope;

	if (abi >= 1) {
		/* What spawn does with it: a ruleset scoped for abstract sockets (scope.h). */
		scope = scope_probe();
		if (scope == 0)
			scope = scope_probe_child();
		if (scope == 0)
			check_set(r, CHECK_LANDLOCK, CHECK_STATUS_OK,
				  "ABI %d: abstract UNIX sockets scoped per command", abi);
		else
			check_set(r, CHECK_LANDLOCK, CHECK_STATUS_MISSING,
				  "ABI %d: no abstract-socket scope (%s; needs ABI 6): agents "
				  "share abstract sockets",
				  abi, scope == -EINVAL ? "ABI below 6" : errno_name(-scope));
	} else if (abi == -EOPNOTSUPP) {
		check_set(r, CHECK_LANDLOCK, CHECK_STATUS_MISSING,
			  "built in but not enabled at boot (EOPNOTSUPP)");
	} else {
		check_set(r, CHECK_LANDLOCK, CHECK_STATUS_MISSING, "%s", why_missing(-abi));
	}
}

/* Commands run at pistisd's oom_score_adj + 500 (spawn step 2b); only a writer with
 * CAP_SYS_RESOURCE also makes that the floor the agent cannot go below, and the kernel
 * asks for it in the initial user namespace (has_capability_noaudit in __set_oom_adj):
 * root of any other holds it in name only, and its agents lowered their own score to
 * pistisd's while this said "their floor" (red team, a user namespace mapping 0-65535). */
static void probe_oom_floor(struct check_report *r)
{
	_cleanup_close_ int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int adj = spawn_oom_score_adj(proc);

	if (adj == SPAWN_OOM_KEEP)
		return check_set(r, CHECK_OOM_FLOOR, CHECK_STATUS_MISSING,
				 "/proc/self/oom_score_adj unreadable: commands keep pistisd's");
	if (caps_have(CAP_SYS_RESOURCE) && host_ns_user_is_initial() == 0)
		return check_set(r, CHECK_OOM_FLOOR, CHECK_STATUS_WARN,
				 "commands at oom_score_adj %d, but CAP_SYS_RESOURCE is held in a "
				 "user namespace only, which the kernel does not count for the "
				 "floor: an agent may lower its own back to pistisd's",
				 adj);
	if (caps_have(CAP_SYS_RESOURCE))
		return check_set(r, CHECK_OOM_FLOOR, CHECK_STATUS_OK,
				 "commands at oom_score_adj %d, their floor", adj);
	check_set(r, CHECK_OOM_FLOOR, CHECK_STATUS_WARN,
		  "commands at oom_score_adj %d, but no CAP_SYS_RESOURCE: an agent may lower its "
		  "own back to pistisd's",
		  adj);
}

static void probe_openat2(struct check_report *r)
{
	_cleanup_close_ int root = -1, fd = -1;
	const uint64_t strict = CHECK_RESOLVE_BENEATH | CHECK_RESOLVE_NO_SYMLINKS |
				CHECK_RESOLVE_NO_MAGICLINKS | CHECK_RESOLVE_NO_XDEV;
	int e;

	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		check_set(r, CHECK_OPENAT2, CHECK_STATUS_FAIL, "cannot open /: %s",
			  strerror(errno));
		return;
	}
	fd = check_openat2(root, ".", O_PATH | O_DIRECTORY, strict);
	if (fd < 0) {
		check_set(r, CHECK_OPENAT2, CHECK_STATUS_MISSING,
			  "%s; the per-component O_NOFOLLOW fallback would be used",
			  why_missing(-fd));
		return;
	}
	/* The flags must do what they say: ".." may not climb out of the directory. */
	e = check_openat2(root, "..", O_PATH | O_DIRECTORY, strict);
	if (e >= 0) {
		safe_close(e);
		check_set(r, CHECK_OPENAT2, CHECK_STATUS_FAIL,
			  "RESOLVE_BENEATH let \"..\" escape its directory");
		return;
	}
	if (e != -EXDEV) {
		check_set(r, CHECK_OPENAT2, CHECK_STATUS_FAIL,
			  "RESOLVE_BENEATH refused \"..\" with %s instead of EXDEV",
			  errno_name(-e));
		return;
	}
	check_set(r, CHECK_OPENAT2, CHECK_STATUS_OK, "RESOLVE_BENEATH|NO_SYMLINKS|NO_XDEV work");
}

static void probe_close_range(struct check_report *r)
{
	DIR *d;

	/* An empty range of fds that cannot be open: a no-op where the syscall exists. */
	if (syscall(SYS_close_range, ~0U, ~0U, 0) == 0) {
		check_set(r, CHECK_CLOSE_RANGE, CHECK_STATUS_OK, "available");
		return;
	}
	int e = errno;
	d = opendir("/proc/self/fd");
	if (d) {
		closedir(d);
		check_set(r, CHECK_CLOSE_RANGE, CHECK_STATUS_WARN,
			  "%s; the /proc/self/fd fallback works", why_missing(e));
	} else
		check_set(r, CHECK_CLOSE_RANGE, CHECK_STATUS_FAIL,
			  "%s, and /proc/self/fd is unreadable (%s)", why_missing(e),
			  errno_name(errno));
}

static void probe_pidfd(struct check_report *r)
{
	long fd = syscall(SYS_pidfd_open, getpid(), 0);

	if (fd >= 0) {
		safe_close((int)fd);
		check_set(r, CHECK_PIDFD, CHECK_STATUS_OK, "pidfd_open works");
	} else
		check_set(r, CHECK_PIDFD, CHECK_STATUS_MISSING, "%s", why_missing(errno));
}

static int read_small_file(const char *path, size_t max, char **ret)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	return fd_read_all(fd, max, ret, NULL);
}

static void probe_cgroup(struct check_report *r)
{
	_cleanup_free_ char *mountinfo = NULL, *self = NULL, *ctrl = NULL, *subtree = NULL;
	char mnt[PATH_MAX] = "", mroot[PATH_MAX] = "", dir[PATH_MAX];
	bool v1 = false;
	int k;

	k = mountinfo_read(&mountinfo);
	if (k < 0) {
		check_set(r, CHECK_CGROUP2, CHECK_STATUS_MISSING,
			  "cannot read /proc/self/mountinfo (%s)", errno_name(-k));
		check_set(r, CHECK_CGROUP_CONTROLLERS, CHECK_STATUS_MISSING, "no cgroup v2");
		return;
	}
	for (char *line = mountinfo, *next; line && *line; line = next) {
		struct mountinfo_entry e;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (mountinfo_parse_line(line, &e) < 0)
			continue;
		if (!strcmp(e.fstype, "cgroup"))
			v1 = true;
		else if (!strcmp(e.fstype, "cgroup2") && !mnt[0]) {
			snprintf(mroot, sizeof(mroot), "%s", e.root);
			snprintf(mnt, sizeof(mnt), "%s", e.mount_point);
		}
	}
	if (!mnt[0]) {
		check_set(r, CHECK_CGROUP2, CHECK_STATUS_MISSING, "no cgroup2 mount%s",
			  v1 ? " (cgroup v1 only)" : "");
		check_set(r, CHECK_CGROUP_CONTROLLERS, CHECK_STATUS_MISSING, "no cgroup v2");
		return;
	}

	/* Our cgroup: the "0::" line of /proc/self/cgroup, relative to the mount's root. */
	const char *path = NULL;
	k = read_small_file("/proc/self/cgroup", 65536, &self);
	if (k >= 0)
		for (char *line = self, *next; line && *line; line = next) {
			next = strchr(line, '\n');
			if (next)
				*next++ = '\0';
			if (!strncmp(line, "0::", 3))
				path = line + 3;
		}
	if (!path) {
		check_set(r, CHECK_CGROUP2, CHECK_STATUS_WARN,
			  "cgroup2 at %s, but this process is in no v2 cgroup", mnt);
		check_set(r, CHECK_CGROUP_CONTROLLERS, CHECK_STATUS_MISSING,
			  "no v2 cgroup of our own");
		return;
	}
	size_t rl = strcmp(mroot, "/") ? strlen(mroot) : 0;
	if (rl && strncmp(path, mroot, rl) == 0 && (path[rl] == '/' || !path[rl]))
		path += rl;
	else if (rl) {
		check_set(r, CHECK_CGROUP2, CHECK_STATUS_WARN,
			  "cgroup2 at %s (root %s) does not contain our cgroup %s", mnt, mroot,
			  path);
		check_set(r, CHECK_CGROUP_CONTROLLERS, CHECK_STATUS_MISSING,
			  "our cgroup is not visible");
		return;
	}
	snprintf(dir, sizeof(dir), "%s%s", mnt, strcmp(path, "/") ? path : "");

	bool writable = access(dir, W_OK) == 0;
	char file[PATH_MAX + 32];
	_cleanup_free_ char *type = NULL;

	/* A threaded cgroup (or a threaded subtree's root) holds no command cgroup: what is
	 * made beneath is "domain invalid", and spawn runs without (cgroup_domain). */
	snprintf(file, sizeof(file), "%s/cgroup.type", dir);
	if (read_small_file(file, 4096, &type) >= 0) {
		type[strcspn(type, "\n")] = '\0';
		if (strcmp(type, "domain")) {
			check_set(r, CHECK_CGROUP2, CHECK_STATUS_WARN,
				  "%s at %s; our cgroup %s is %s, not a domain: commands get no "
				  "cgroup here (each is an audit session)",
				  v1 ? "hybrid: v1 controllers plus cgroup2" : "cgroup v2", mnt,
				  path, type);
			check_set(r, CHECK_CGROUP_CONTROLLERS, CHECK_STATUS_MISSING,
				  "no command cgroups in a %s cgroup", type);
			return;
		}
	}
	check_set(r, CHECK_CGROUP2, v1 || !writable ? CHECK_STATUS_WARN : CHECK_STATUS_OK,
		  "%s at %s; our cgroup %s (%s)",
		  v1 ? "hybrid: v1 controllers plus cgroup2" : "cgroup v2", mnt, path,
		  writable ? "writable" : "read-only");

	snprintf(file, sizeof(file), "%s/cgroup.controllers", dir);
	k = read_small_file(file, 4096, &ctrl);
	if (k < 0) {
		check_set(r, CHECK_CGROUP_CONTROLLERS, CHECK_STATUS_MISSING, "cannot read %s (%s)",
			  file, errno_name(-k));
		return;
	}
	snprintf(file, sizeof(file), "%s/cgroup.subtree_control", dir);
	if (read_small_file(file, 4096, &subtree) < 0)
		subtree = NULL;
	ctrl[strcspn(ctrl, "\n")] = '\0';
	if (subtree)
		subtree[strcspn(subtree, "\n")] = '\0';
	bool good = cgroup_list_has(ctrl, "memory") && cgroup_list_has(ctrl, "pids") &&
		    cgroup_list_has(ctrl, "cpu");
	check_set(r, CHECK_CGROUP_CONTROLLERS, good ? CHECK_STATUS_OK : CHECK_STATUS_WARN,
		  "available: %s%s; enabled for children: %s", ctrl[0] ? ctrl : "(none)",
		  good ? ""
		       : " (memory, pids or cpu missing: no per-agent limit of what is missing; "
			 "pistisd serve refuses --memory-max and --cpu-weight without theirs)",
		  subtree && subtree[0] ? subtree : "(none)");
}

static void probe_userns(struct check_report *r)
{
	long max = -1, clone = -1;
	int k = read_sysctl("user/max_user_namespaces", &max);
	char why[128];

	if (k < 0 && k != -ENOENT) {
		check_set(r, CHECK_USERNS, CHECK_STATUS_WARN, "%s",
			  sysctl_unread("user/max_user_namespaces", k, why, sizeof(why)));
		return;
	}
	if (k < 0) {
		check_set(r, CHECK_USERNS, CHECK_STATUS_OK, "user namespaces not built (%s)",
			  errno_name(-k));
		return;
	}
	(void)read_sysctl("kernel/unprivileged_userns_clone", &clone);
	if (max == 0 || clone == 0)
		check_set(r, CHECK_USERNS, CHECK_STATUS_OK,
			  "unprivileged creation off (max_user_namespaces=%ld%s)", max,
			  clone == 0 ? ", unprivileged_userns_clone=0" : "");
	else
		check_set(
			r, CHECK_USERNS, CHECK_STATUS_OK,
			"unprivileged creation allowed by the kernel (max_user_namespaces=%ld%s); "
			"the spawn filter denies it",
			max, clone == 1 ? ", unprivileged_userns_clone=1" : "");
}

/* A sysctl where `want` or more is right; below it is `low` (fail or warn). */
static void probe_sysctl_min(struct check_report *r, enum check_id id, const char *name, long want,
			     enum check_status low, enum check_status absent)
{
	long v = 0;
	int k = read_sysctl(name, &v);
	char why[128];

	if (k == -ENOENT)
		check_set(r, id, absent, "%s absent", name);
	else if (k < 0)
		check_set(r, id, CHECK_STATUS_FAIL, "%s", sysctl_unread(name, k, why, sizeof(why)));
	else
		check_set(r, id, v >= want ? CHECK_STATUS_OK : low, "%ld (want >= %ld)", v, want);
}

/* fs.protected_regular and fs.protected_fifos: 1 covers world-writable sticky directories
 * (/tmp, /dev/shm, shared by every agent), where an agent plants a file or FIFO under a name
 * another agent's tool opens O_CREAT: without it the victim writes into the planter's inode.
 * Below 1 is a failure (hard); 1 is a warning, since 2 also covers group-writable sticky
 * directories. */
static void probe_sysctl_need_want(struct check_report *r, enum check_id id, const char *name,
				   long need, long want)
{
	long v = 0;
	int k = read_sysctl(name, &v);
	char why[128];

	if (k == -ENOENT)
		check_set(r, id, CHECK_STATUS_MISSING, "%s absent", name);
	else if (k < 0)
		check_set(r, id, CHECK_STATUS_FAIL, "%s", sysctl_unread(name, k, why, sizeof(why)));
	else if (v < need)
		check_set(r, id, CHECK_STATUS_FAIL, "%ld (need >= %ld, want >= %ld)", v, need,
			  want);
	else
		check_set(r, id, v >= want ? CHECK_STATUS_OK : CHECK_STATUS_WARN,
			  "%ld (want >= %ld)", v, want);
}

/* A sysctl where 0 is right and anything else is `high`. */
static void probe_sysctl_zero(struct check_report *r, enum check_id id, const char *name,
			      enum check_status absent, const char *absent_why)
{
	long v = 0;
	int k = read_sysctl(name, &v);
	char why[128];

	if (k == -ENOENT)
		check_set(r, id, absent, "absent: %s", absent_why);
	else if (k < 0)
		check_set(r, id, CHECK_STATUS_WARN, "%s", sysctl_unread(name, k, why, sizeof(why)));
	else
		check_set(r, id, v == 0 ? CHECK_STATUS_OK : CHECK_STATUS_WARN, "%ld (want 0)", v);
}

/* fs.suid_dumpable: 0 is right; 2 ("suidsafe") keeps such processes root-only (their /proc
 * files and core dumps are root's), which holds with a warning; 1 ("debug") leaves a
 * process that changed its ids dumpable, so the agent it became can ptrace it or read its
 * memory before exec, and sudo's after it dropped privileges. */
static void probe_suid_dumpable(struct check_report *r)
{
	long v = 0;
	int k = read_sysctl("fs/suid_dumpable", &v);
	char why[128];

	if (k < 0)
		check_set(r, CHECK_SUID_DUMPABLE, CHECK_STATUS_FAIL, "%s",
			  sysctl_unread("fs/suid_dumpable", k, why, sizeof(why)));
	else
		check_set(r, CHECK_SUID_DUMPABLE,
			  v == 0   ? CHECK_STATUS_OK
			  : v == 2 ? CHECK_STATUS_WARN
				   : CHECK_STATUS_FAIL,
			  "%ld (want 0%s)", v, v == 2 ? "; 2 keeps dumps and /proc root's" : "");
}

/* kernel.core_pattern: a pipe ("|PROGRAM ARGS") has the kernel run PROGRAM as root, in the
 * host's namespaces (the knob is not namespaced), for every crash of a dumpable process —
 * an agent's own programs, and its sudo where suid_dumpable is 2 — whatever RLIMIT_CORE
 * says: pipes ignore the limit but for the value 1, and an agent may lower its own to 0.
 * So agents feed that program crashes of their choosing (apport's and systemd-coredump's
 * local-root bugs were reached so: CVE-2020-15702, CVE-2025-4598). A file pattern holds:
 * spawn's RLIMIT_CORE of 0 keeps agents' cores off the disk. */
static void probe_core_pattern(struct check_report *r)
{
	_cleanup_close_ int fd =
		open("/proc/sys/kernel/core_pattern", O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *buf = NULL;
	char v[sizeof(r->results[0].value)];
	size_t len = 0, prog;
	int k = fd < 0 ? -errno : fd_read_all(fd, 4096, &buf, &len);

	if (k < 0) {
		char why[128];

		check_set(r, CHECK_CORE_PATTERN, CHECK_STATUS_WARN, "%s",
			  sysctl_unread("kernel/core_pattern",
					k == -ENOENT && !proc_sys_readable() ? -ENODATA : k, why,
					sizeof(why)));
		return;
	}
	if (len && buf[len - 1] == '\n')
		len--;
	if (!len || buf[0] != '|') {
		check_set(r, CHECK_CORE_PATTERN, CHECK_STATUS_OK,
			  "a file pattern: agents' cores stay off (RLIMIT_CORE 0)");
		return;
	}
	for (prog = 1; prog < len && buf[prog] != ' ' && buf[prog] != '\t'; prog++)
		;
	/* The handler's name escaped once, here (it was escaped into the value, and the value
	 * again where it was printed); one too long for the value is cut with a mark. */
	escape_format(v, sizeof(v),
		      "a pipe to %.*s: every agent's crash runs it as root on the host",
		      (int)(prog - 1), buf + 1);
	check_set_text(r, CHECK_CORE_PATTERN, CHECK_STATUS_WARN, v);
}

/* /proc's superblock options, from the topmost mount at /proc in /proc/self/mountinfo. */
static void probe_proc_hidepid(struct check_report *r)
{
	_cleanup_free_ char *mi = NULL, *opts = NULL;
	char value[sizeof(r->results[0].value)];
	int k = mountinfo_read(&mi);

	if (k < 0) {
		check_set(r, CHECK_PROC_HIDEPID, CHECK_STATUS_WARN,
			  "cannot read /proc/self/mountinfo (%s)", errno_name(-k));
		return;
	}
	for (char *line = mi, *next; line && *line; line = next) {
		struct mountinfo_entry e;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (mountinfo_parse_line(line, &e) < 0 || strcmp(e.mount_point, "/proc"))
			continue;
		free(opts);
		/* Later lines are mounted later: the last one at /proc is the one seen. */
		opts = strcmp(e.fstype, "proc") ? NULL : strdup(e.super_opts);
		if (!opts && !strcmp(e.fstype, "proc")) {
			check_set(r, CHECK_PROC_HIDEPID, CHECK_STATUS_WARN, "out of memory");
			return;
		}
	}
	if (!opts) {
		check_set(r, CHECK_PROC_HIDEPID, CHECK_STATUS_WARN, "no proc mounted at /proc");
		return;
	}
	enum check_status st = check_hidepid_status(opts, value, sizeof(value));
	/* In the host's PID namespace this /proc is the machine's: pistisd-entry leaves it
	 * alone there, and hidepid on it hides every user's processes from every other. */
	check_set(r, CHECK_PROC_HIDEPID, st, "%s%s", value,
		  st != CHECK_STATUS_OK && host_ns_is_initial(HOST_NS_PID) == 1
			  ? "; the host's /proc (pistisd-entry does not remount it: hidepid there "
			    "applies to every user of the machine)"
			  : "");
}

/* Why a mount without nosuid matters, as the nosuid checks' values say it: agents get setuid
 * only where trusted commands are configured. */
static const char *nnp_why(bool trusted)
{
	return trusted ? "trusted commands configured: agents run without no_new_privs"
		       : "no trusted commands: agents keep no_new_privs";
}

/* The same for a tree every agent shares or may write: while it is not nosuid, agents keep
 * no_new_privs even where trusted commands are configured (trusted_configured). */
static const char *nnp_held_why(bool trusted)
{
	return trusted ? "trusted commands configured: agents keep no_new_privs, so trusted "
			 "commands fail, until it is nosuid"
		       : "no trusted commands: agents keep no_new_privs";
}

/* Every mount beneath path (a volume inside /workspaces, a tmpfs inside /tmp), as the
 * tree resolves like an agent would, must be nosuid too: -1 with the check set when one is
 * not (or that cannot be told), 0 when all are. */
static int probe_mounts_beneath(struct check_report *r, enum check_id id, const char *path,
				bool trusted)
{
	_cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
	char which[PATH_MAX];
	int k = fd < 0 ? negative_errno() : trusted_tree_mounts_suid(fd, which, sizeof(which));

	if (k == 0)
		return 0;
	if (fd < 0)
		snprintf(which, sizeof(which), "%s", path);
	check_set(r, id, trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN, "%s: %s (%s)", which,
		  k > 0 ? "a mount beneath it without nosuid" : "cannot tell whether it is nosuid",
		  nnp_held_why(trusted));
	return -1;
}

/* The mounts paths are on (statvfs resolves each like an agent would) must be nosuid,nodev:
 * the first path there is the tree, the rest trees beneath it that may be mounts of their
 * own (the agents' homes on a volume of their own, say); the first that is not is named.
 * Hard only where trusted commands are configured; elsewhere agents keep no_new_privs,
 * which makes setuid bits inert for them anyway. */
static void probe_nosuid(struct check_report *r, enum check_id id, const char *const *paths,
			 size_t n, bool trusted)
{
	const char *first = NULL, *no_nodev = NULL;

	for (size_t i = 0; i < n; i++) {
		const char *path = paths[i];
		struct statvfs sv;

		if (statvfs(path, &sv) < 0) {
			if (errno == ENOENT)
				continue;
			check_set(r, id, trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN,
				  "cannot statvfs %s (%s)", path, errno_name(errno));
			return;
		}
		if (!first)
			first = path;
		bool nosuid = sv.f_flag & ST_NOSUID, nodev = sv.f_flag & ST_NODEV;
		if (!nosuid) {
			check_set(r, id, trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN,
				  "%s: without %s (%s)", path, nodev ? "nosuid" : "nosuid,nodev",
				  nnp_why(trusted));
			return;
		}
		if (!nodev && !no_nodev)
			no_nodev = path;
	}
	if (!first) {
		check_set(r, id, CHECK_STATUS_OK, "%s does not exist", paths[0]);
		return;
	}
	/* Any other mount beneath the tree (a project's volume in /workspaces) */
	if (probe_mounts_beneath(r, id, first, trusted) < 0)
		return;
	/* nodev alone is a warning: agents cannot make device nodes (no CAP_MKNOD). */
	if (no_nodev)
		check_set(r, id, CHECK_STATUS_WARN, "%s: without nodev (%s)", no_nodev,
			  nnp_why(trusted));
	else
		check_set(r, id, CHECK_STATUS_OK, "%s: nosuid,nodev%s", paths[0],
			  n > 1 ? " (and the trees beneath that are mounts)" : "");
}

/* Whether an agent can change where MP (a mount point, absolute) is mounted at the next
 * start: the runtime mounts a volume at its configured path and follows the links on the
 * way (runc resolves a destination inside the root), so a component an agent can replace
 * now sends that volume, and what agents wrote into it, over /usr/local/bin or /etc next
 * time. A component can be replaced where its directory is one agents may write
 * (users_agents_may_write), unless that directory is sticky and the component not an
 * agent's. The directory is named in *ret (the first found); 1 found, 0 none. */
static int mount_point_replaceable(const char *mp, char *ret, size_t size)
{
	char dir[PATH_MAX];
	size_t len = strlen(mp);
	struct stat dst, cst;

	if (len >= sizeof(dir) || mp[0] != '/')
		return 0;
	memcpy(dir, mp, len + 1);
	/* From the mount point's parent up to "/": each directory and the component in it. */
	for (char *slash = strrchr(dir, '/'); slash; slash = strrchr(dir, '/')) {
		char comp[PATH_MAX];
		snprintf(comp, sizeof(comp), "%s", dir);
		if (slash == dir)
			dir[1] = '\0';
		else
			*slash = '\0';
		if (lstat(dir, &dst) < 0 || lstat(comp, &cst) < 0)
			return 0;
		if (S_ISDIR(dst.st_mode) && users_agents_may_write(&dst) &&
		    (!(dst.st_mode & S_ISVTX) || users_uid_is_agent(cst.st_uid) ||
		     cst.st_uid == USERS_TOOLS_UID)) {
			snprintf(ret, size, "%s", dir);
			return 1;
		}
		if (slash == dir)
			break;
	}
	return 0;
}

/* Every mount but "/" whose way down an agent can change before the next start
 * (mount_point_replaceable): counted, the first named. A warning: the move happens
 * outside pistis (the runtime's mount at the next start), so the operator must mount
 * volumes where no agent writes on the way (docs/security.md, "Volumes beneath trees
 * agents write"). */
static void probe_mount_points(struct check_report *r)
{
	_cleanup_free_ char *mi = NULL;
	char first[PATH_MAX] = "", where[PATH_MAX] = "";
	unsigned n = 0;

	int k = mountinfo_read(&mi);
	if (k < 0) {
		check_set(r, CHECK_MOUNT_POINTS, CHECK_STATUS_WARN,
			  "cannot read /proc/self/mountinfo (%s)", errno_name(-k));
		return;
	}
	for (char *line = mi, *next; line && *line; line = next) {
		struct mountinfo_entry e;
		char dir[PATH_MAX];

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (mountinfo_parse_line(line, &e) < 0 || !strcmp(e.mount_point, "/") ||
		    mount_point_replaceable(e.mount_point, dir, sizeof(dir)) <= 0)
			continue;
		if (n++ == 0) {
			snprintf(first, sizeof(first), "%s", e.mount_point);
			snprintf(where, sizeof(where), "%s", dir);
		}
	}
	if (!n) {
		check_set(r, CHECK_MOUNT_POINTS, CHECK_STATUS_OK,
			  "no mount point lies beneath a directory agents may write");
		return;
	}
	check_set(r, CHECK_MOUNT_POINTS, CHECK_STATUS_WARN,
		  "%u mount(s) beneath a directory agents may write, first %s beneath %s: an "
		  "agent can leave a link on its way, and the runtime mounts it where the link "
		  "points at the next start",
		  n, first, where);
}

/* trusted.h's TRUSTED_SCRATCH_TREES (the shared trees besides /data and /workspaces, which
 * have checks of their own), then the trees the path rules let agents write: the first one
 * there without nosuid. */
static void probe_nosuid_shared(struct check_report *r, int root_fd, bool trusted)
{
	static const char *const trees[] = {TRUSTED_SCRATCH_TREES};
	char seen[128] = "";
	size_t n = 0;

	for (size_t i = 0; i < ELEMENTSOF(trees); i++) {
		struct statvfs sv;
		if (statvfs(trees[i], &sv) < 0) {
			if (errno == ENOENT)
				continue;
			check_set(r, CHECK_NOSUID_SHARED,
				  trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN,
				  "cannot statvfs %s (%s)", trees[i], errno_name(errno));
			return;
		}
		if (!(sv.f_flag & ST_NOSUID)) {
			check_set(r, CHECK_NOSUID_SHARED,
				  trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN,
				  "%s: without nosuid (%s)", trees[i], nnp_held_why(trusted));
			return;
		}
		if (probe_mounts_beneath(r, CHECK_NOSUID_SHARED, trees[i], trusted) < 0)
			return;
		n += (size_t)snprintf(seen + n, sizeof(seen) - n, "%s%s", n ? ", " : "", trees[i]);
	}
	char which[POLICY_PATH_MAX + 1];
	int k = trusted_write_tree_suid(root_fd, which, sizeof(which));
	if (k != 0) {
		check_set(r, CHECK_NOSUID_SHARED, trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN,
			  "write rule %s: %s (%s)", which,
			  k > 0 ? "without nosuid" : "cannot tell whether it is nosuid",
			  nnp_held_why(trusted));
		return;
	}
	check_set(r, CHECK_NOSUID_SHARED, CHECK_STATUS_OK, "%s: nosuid; write rules' trees too",
		  n ? seen : "none there");
}

/* trusted.h's TRUSTED_SCRATCH_TREES inside the root (links followed inside it: a /var/tmp
 * that is a link to /tmp is judged as /tmp), the directories every agent may write: each one
 * others may write must be root's and sticky. Without the sticky bit agent A removes or
 * renames B's entries there (a socket, a lock file, a directory B made) and puts its own
 * in their place, and fs.protected_symlinks, _regular and _fifos, hard checks above, apply
 * to sticky directories only: in a 0777 /tmp, B's tools and the trusted commands follow
 * A's symlink and write into A's file as if those sysctls were 0 (red team: an image made
 * with `chmod 777 /tmp`; before, nothing said so). An owner other than root removes
 * anyone's entries, sticky or not. */
static void probe_sticky_shared(struct check_report *r, int root_fd)
{
	static const char *const trees[] = {TRUSTED_SCRATCH_TREES};
	char seen[128] = "";
	size_t n = 0;

	for (size_t i = 0; i < ELEMENTSOF(trees); i++) {
		const char *rel = trees[i] + 1;
		_cleanup_close_ int fd =
			check_openat2(root_fd, rel, O_PATH | O_DIRECTORY,
				      CHECK_RESOLVE_IN_ROOT | CHECK_RESOLVE_NO_MAGICLINKS);
		struct stat st;

		if (fd < 0 && errno == ENOSYS)
			fd = openat(root_fd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0 || fstat(fd, &st) < 0) {
			check_set(r, CHECK_STICKY_SHARED, CHECK_STATUS_FAIL,
				  "cannot look at %s (%s)", trees[i], errno_name(errno));
			return;
		}
		if (!trusted_others_write(st.st_mode, st.st_gid))
			continue;
		if (!(st.st_mode & S_ISVTX)) {
			check_set(r, CHECK_STICKY_SHARED, CHECK_STATUS_FAIL,
				  "%s: mode %04o, writable by others and not sticky: any agent "
				  "removes or replaces another's files there, and the "
				  "protected_* sysctls do not apply",
				  trees[i], (unsigned)(st.st_mode & 07777));
			return;
		}
		if (st.st_uid != 0) {
			check_set(
				r, CHECK_STICKY_SHARED, CHECK_STATUS_FAIL,
				"%s: owned by uid %u, mode %04o: its owner removes anyone's files "
				"there",
				trees[i], (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
			return;
		}
		n += (size_t)snprintf(seen + n, sizeof(seen) - n, "%s%s", n ? ", " : "", trees[i]);
	}
	check_set(r, CHECK_STICKY_SHARED, CHECK_STATUS_OK, "%s%s", n ? seen : "none",
		  n ? ": root's and sticky" : " writable by others");
}

/* Run PATH with ARGV inside the root (when it is not "/"), as root or, with as_nobody, as
 * uid and gid 65534 with no supplementary groups; stdin /dev/null, stdout to OUT (and
 * stderr too with merge_stderr, else /dev/null), fixed environment, at most 5 s and
 * size - 1 bytes; with first_line it stops at the first newline. Raw set*id calls: serve
 * runs this before its threads start, but a child of a threaded process must not use
 * libc's broadcasting ones. Returns the wait status, or -errno. */
static int run_capture(const char *root, const char *path, char *const argv[], bool as_nobody,
		       bool merge_stderr, bool first_line, char *out, size_t size)
{
	int pipefd[2] = {-1, -1}, k;
	size_t len = 0;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		k = -errno;
		safe_close(pipefd[0]);
		safe_close(pipefd[1]);
		return k;
	}
	if (pid == 0) {
		char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
				      (char *)"LC_ALL=C", NULL};
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (null < 0 || dup2(null, 0) < 0 || dup2(pipefd[1], 1) < 0 ||
		    dup2(merge_stderr ? pipefd[1] : null, 2) < 0)
			_exit(EXIT_SYSTEM);
		if (strcmp(root, "/") && (chroot(root) < 0 || chdir("/") < 0))
			_exit(EXIT_SYSTEM);
		if (as_nobody && (syscall(SYS_setgroups, 0, NULL) < 0 ||
				  syscall(SYS_setresgid, 65534, 65534, 65534) < 0 ||
				  syscall(SYS_setresuid, 65534, 65534, 65534) < 0))
			_exit(EXIT_SYSTEM);
		(void)close_all_fds_from(3);
		execve(path, argv, envp);
		_exit(EXIT_CANNOT_EXEC);
	}
	safe_close(pipefd[1]);

	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = 5000 - ((now.tv_sec - start.tv_sec) * 1000 +
				    (now.tv_nsec - start.tv_nsec) / 1000000);
		if (left <= 0 || len >= size - 1 || (first_line && memchr(out, '\n', len)))
			break;
		k = poll(&p, 1, (int)left);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		ssize_t n = read(pipefd[0], out + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	safe_close(pipefd[0]);
	/* We have what we wanted, or it had its five seconds: the rest is not wanted. */
	(void)kill(pid, SIGKILL);
	out[len] = '\0';
	return wait_child(pid);
}

/* Run `PROG -V` (inside the root when it is not "/") and keep the first line of stdout;
 * stderr to /dev/null: sudo warns there first ("unable to resolve host"). */
static int program_version(const char *root, const char *path, char *buf, size_t size)
{
	char *const argv[] = {(char *)path, (char *)"-V", NULL};
	char out[4096];
	size_t len;
	int status = run_capture(root, path, argv, false, false, true, out, sizeof(out));

	if (status < 0)
		return status;
	len = strlen(out);
	bool whole_line = memchr(out, '\n', len) != NULL;
	out[strcspn(out, "\n")] = '\0';
	/* A complete first line counts whatever the exit (it may have been our SIGKILL);
	 * a partial one only from a program that exited 0. */
	if (!out[0] || (!whole_line && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)))
		return -ENOEXEC;
	if (!strncmp(out, "sudo:", 5) || !strncmp(out, "visudo:", 7))
		return -ENOEXEC; /* an error message, not a version */
	len = strnlen(out, size - 1);
	memcpy(buf, out, len);
	buf[len] = '\0';
	return 0;
}

static const char *node_kind(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO:
		return "a FIFO";
	case S_IFDIR:
		return "a directory";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFSOCK:
		return "a socket";
	case S_IFLNK:
		return "a symlink";
	default:
		return "not a regular file";
	}
}

/* Whether the image's sudo and visudo may be run to be asked: every name-service lookup
 * they make (sudo's first is its caller's passwd line, even for -V) opens these files as
 * its libc does, links followed, blocking. A FIFO there, or a link to one, held each run
 * for its 5 s: `check`, and serve's start-up with it, waited 15 s on a FIFO at /etc/passwd
 * (red team); a device there would be opened by root. Each is looked at through O_PATH,
 * which opens nothing, and its type read from the fd. False, with the first such file
 * named in why, when one is there and not a regular file. */
static bool image_programs_runnable(int root_fd, char *why, size_t size)
{
	static const char *const files[] = {"etc/nsswitch.conf", "etc/passwd", "etc/group"};
	struct stat st;

	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		_cleanup_close_ int fd =
			check_openat2(root_fd, files[i], O_PATH,
				      CHECK_RESOLVE_IN_ROOT | CHECK_RESOLVE_NO_MAGICLINKS);

		/* without openat2 a link is not followed: it stops the runs (a link to a
		 * regular file too: an image's absolute link cannot be resolved safely) */
		if (fd == -ENOSYS || fd == -EPERM)
			fd = RET_NERRNO(openat(root_fd, files[i], O_PATH | O_NOFOLLOW | O_CLOEXEC));
		if (fd < 0 || fstat(fd, &st) < 0 || S_ISREG(st.st_mode))
			continue; /* missing or unreachable: the program fails at once */
		snprintf(why, size, "/%s is %s, not a regular file", files[i],
			 node_kind(st.st_mode));
		return false;
	}
	return true;
}

static void probe_program(struct check_report *r, enum check_id id, int root_fd, const char *root,
			  const char *name, bool want_setuid, char *ret_path, size_t ret_size,
			  char *ret_version, size_t ret_version_size, const char *no_run)
{
	char rel[PATH_MAX], version[128] = "";
	struct stat st;
	bool in_root = strcmp(root, "/") != 0;

	for (size_t i = 0; i < ELEMENTSOF(image_path); i++) {
		_cleanup_close_ int fd = -1;

		snprintf(rel, sizeof(rel), "%s/%s", image_path[i], name);
		/* RESOLVE_IN_ROOT: the image's absolute symlinks (/sbin -> usr/sbin) resolve
		 * inside the image, not on the host. */
		fd = check_openat2(root_fd, rel, O_PATH,
				   CHECK_RESOLVE_IN_ROOT | CHECK_RESOLVE_NO_MAGICLINKS);
		if (fd == -ENOSYS || fd == -EPERM) {
			if (in_root) {
				check_set(r, id, CHECK_STATUS_WARN,
					  "not looked for: resolving inside %s needs openat2",
					  root);
				return;
			}
			fd = openat(root_fd, rel, O_PATH | O_CLOEXEC);
			if (fd < 0)
				fd = -errno;
		}
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111))
			continue;

		bool suid_root = st.st_uid == 0 && (st.st_mode & S_ISUID);
		char abs[PATH_MAX + 1];
		snprintf(abs, sizeof(abs), "/%s", rel);
		if (ret_path && suid_root)
			snprintf(ret_path, ret_size, "%s", abs);
		if (no_run[0])
			snprintf(version, sizeof(version), "version unknown (not run: %s)", no_run);
		else if (program_version(root, abs, version, sizeof(version)) < 0)
			snprintf(version, sizeof(version), "version unknown (-V did not run)");
		if (ret_version)
			snprintf(ret_version, ret_version_size, "%s", version);
		if (want_setuid && !suid_root)
			check_set(r, id, CHECK_STATUS_WARN, "%s, not setuid root (mode %04o), %s",
				  abs, (unsigned)(st.st_mode & 07777), version);
		else
			check_set(r, id, CHECK_STATUS_OK, "%s%s, %s", abs,
				  want_setuid ? ", setuid root" : "", version);
		return;
	}
	check_set(r, id, CHECK_STATUS_MISSING,
		  "not found in /usr/local/sbin:/usr/local/bin:"
		  "/usr/sbin:/usr/bin:/sbin:/bin%s%s",
		  in_root ? " of " : "", in_root ? root : "");
}

/* Whether sudo, asked as 65534 to run true with -R DIR, reads DIR/etc/nsswitch.conf: a sudo
 * with CVE-2025-32463 changes root to the caller's DIR before its policy decides, and its
 * name-service lookups then read that file (and would load the libraries it names, as
 * root). DIR is made here, root's and 0700, inside the root's /tmp, with an empty
 * nsswitch.conf and nothing else: no library for a vulnerable sudo to load. 1 read, 0 not
 * read, -errno when it could not be asked. */
static int sudo_reads_chroot(const char *root, const char *sudo, char *out, size_t size)
{
	char dir[PATH_MAX], etc[PATH_MAX + 8], conf[PATH_MAX + 24];
	const char *rel;
	char buf[4096];
	int r, in = -1;

	if (snprintf(dir, sizeof(dir), "%s/tmp/pistis-sudo-probe.XXXXXX",
		     strcmp(root, "/") ? root : "") >= (int)sizeof(dir) ||
	    !mkdtemp(dir))
		return -errno ?: -ENAMETOOLONG;
	rel = dir + (strcmp(root, "/") ? strlen(root) : 0);
	snprintf(etc, sizeof(etc), "%s/etc", dir);
	snprintf(conf, sizeof(conf), "%s/nsswitch.conf", etc);
	_cleanup_close_ int fd = -1;
	if (mkdir(etc, 0755) < 0 ||
	    (fd = open(conf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0 ||
	    (in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) < 0 ||
	    inotify_add_watch(in, etc, IN_OPEN | IN_ACCESS) < 0) {
		r = -errno;
	} else {
		char *const argv[] = {(char *)"sudo", (char *)"-n",	   (char *)"-R",
				      (char *)rel,    (char *)"/bin/true", NULL};
		(void)run_capture(root, sudo, argv, true, true, false, out, size);
		ssize_t n = read(in, buf, sizeof(buf));
		r = n > 0;
	}
	safe_close(in);
	(void)unlink(conf);
	(void)rmdir(etc);
	(void)rmdir(dir);
	return r;
}

/* What the image's sudo does with the inputs its known local-root bugs needed, asked of
 * sudo itself as an unprivileged user (65534, no groups) inside the root: distributions
 * backport fixes and keep the upstream version, so the version string says nothing. Each
 * probe stops at the bug's first step, harmless to a vulnerable sudo too:
 *  - CVE-2021-3156 (Baron Samedit; upstream 1.8.2-1.8.31p2, 1.9.0-1.9.5p1): `sudoedit -s
 *    /`. A vulnerable sudo takes -s for sudoedit and says "/: not a regular file"; a fixed
 *    one prints its usage. Any user reaches it, whatever sudoers says.
 *  - CVE-2025-32463 (chroot; 1.9.14-1.9.17): sudo_reads_chroot.
 * With trusted commands configured agents run sudo with its setuid bit (no
 * no_new_privs): a sudo that does either makes every agent root, and the check fails
 * (hard). Without them agents keep no_new_privs and sudo cannot raise them: warn. A sudo
 * that cannot be asked here (65534 not in the image, no_new_privs on us, nosuid) or
 * answers neither way: warn, "not probed". */
static void probe_sudo_cves(struct check_report *r, const char *root, const char *sudo,
			    const char *version, bool trusted, const char *no_run)
{
	char *const samedit[] = {(char *)"sudoedit", (char *)"-s", (char *)"/", NULL};
	char out1[2048] = "", out2[2048] = "", found[96] = "";
	enum check_status bad = trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN;

	if (!sudo[0]) {
		check_set(r, CHECK_SUDO_CVES, CHECK_STATUS_OK, "no setuid-root sudo to probe");
		return;
	}
	if (no_run[0])
		return check_set(r, CHECK_SUDO_CVES, CHECK_STATUS_WARN,
				 "%s not probed: not run: %s", sudo, no_run);
	(void)run_capture(root, sudo, samedit, true, true, false, out1, sizeof(out1));
	/* Asking -R of a sudo without the bug is logged (user NOT in sudoers, mailed where
	 * the image has a mailer) at every start: only a sudo whose version may have it,
	 * or that names none we can read, is asked. */
	bool ask_chroot = check_sudo_may_chroot_first(version);
	int chroot_read = ask_chroot ? sudo_reads_chroot(root, sudo, out2, sizeof(out2)) : 0;
	bool samedit_bad = strstr(out1, "not a regular file") != NULL;
	bool samedit_ok = strstr(out1, "usage: sudoedit") != NULL;
	if (samedit_bad)
		snprintf(found, sizeof(found), "CVE-2021-3156 (sudoedit -s)");
	if (chroot_read > 0)
		snprintf(found + strlen(found), sizeof(found) - strlen(found),
			 "%sCVE-2025-32463 (-R)", found[0] ? ", " : "");
	if (found[0]) {
		check_set(r, CHECK_SUDO_CVES, bad, "%s behaves as a sudo with %s: %s", sudo, found,
			  trusted ? "every agent becomes root through it while trusted commands "
				    "are configured"
				  : "agents keep no_new_privs while no trusted commands are "
				    "configured, so they cannot use it");
		return;
	}
	if (!samedit_ok || chroot_read < 0 ||
	    (ask_chroot &&
	     (strstr(out2, "do not exist") || strstr(out2, "effective uid is not 0")))) {
		check_set(r, CHECK_SUDO_CVES, CHECK_STATUS_WARN,
			  "%s not probed: it did not answer as it does for an unprivileged user "
			  "(uid 65534 in the image, pistisd without no_new_privs)",
			  sudo);
		return;
	}
	check_set(r, CHECK_SUDO_CVES, CHECK_STATUS_OK, "%s: sudoedit -s is a usage error, and %s",
		  sudo,
		  ask_chroot ? "-R is not followed before its policy decides"
			     : "-R not asked (its version is outside 1.9.14-1.9.17, where the "
			       "chroot bug was)");
}

struct walk {
	struct check_report *r;
	size_t nodes;
	struct timespec deadline;
	char path[PATH_MAX];
	int error;
};

static bool walk_out_of_time(struct walk *w)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > w->deadline.tv_sec ||
	       (now.tv_sec == w->deadline.tv_sec && now.tv_nsec >= w->deadline.tv_nsec);
}

/* Whether name in dfd (a regular file by fstatat) carries security.capability: asked by
 * name through the directory fd's /proc/self/fd link, the last component not followed. */
static bool file_has_caps(int dfd, const char *name)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dfd, name) >= (int)sizeof(p))
		return false;
	return lgetxattr(p, "security.capability", NULL, 0) > 0;
}

/* A directory (fd) agents may write, on a mount where setuid bits count: listed. */
static void note_writable(struct walk *w, int fd, const struct stat *st)
{
	struct check_report *r = w->r;
	struct statfs sf;
	size_t n;

	if (!users_agents_may_write(st) || (fstatfs(fd, &sf) == 0 && (sf.f_flags & ST_NOSUID)))
		return;
	n = strlen(r->writable);
	if (r->n_writable++ < CHECK_WRITABLE_SHOWN) {
		/* Quoted and escaped: a name like "a, /etc" must not read as two entries. */
		char q[CHECK_WRITABLE_PATH_SHOWN + ESCAPE_QUOTE_EXTRA];

		escape_c_quote(w->path, strlen(w->path), CHECK_WRITABLE_PATH_SHOWN, q, sizeof(q));
		snprintf(r->writable + n, sizeof(r->writable) - n, "%s%s", n ? ", " : "", q);
	}
}

/* Whether the file system mounted at name (a directory beneath dfd: the root of another
 * file system) may honour setuid bits: false only when it is known to be nosuid. Such a
 * mount is walked like the root's own: a volume with a 1777 uploads directory in it is as
 * much a place where agent A leaves a setuid file for agent B (red team: only the mount's
 * root was judged, and a 1777 directory inside passed agent_writable), and a setuid
 * program on it runs for agents as one on the root's does. What a nosuid one holds lifts
 * nobody (note_writable passes its root over too). */
static bool mount_honours_setuid(int dfd, const char *name)
{
	_cleanup_close_ int top = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct statfs sf;

	return top < 0 || fstatfs(top, &sf) < 0 || !(sf.f_flags & ST_NOSUID);
}

/* Depth-first over directory fds; owns dfd. Acts only on what fstatat(NOFOLLOW) says about
 * the entry and, for directories, re-checks the opened fd is the inode it looked at, so a
 * concurrent rename cannot steer the walk (it only reports, but it must not wander). */
static void walk_dir(struct walk *w, int dfd, dev_t dev, size_t path_len, unsigned depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		safe_close(dfd);
		return;
	}
	while (!w->error && !w->r->walk_truncated && (de = readdir(d))) {
		const char *name = de->d_name;
		struct stat st;

		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		/* Kernel filesystems, whatever is mounted there now. */
		if (depth == 0 &&
		    (!strcmp(name, "proc") || !strcmp(name, "sys") || !strcmp(name, "dev")))
			continue;
		if (++w->nodes > CHECK_WALK_MAX_NODES ||
		    ((w->nodes & 1023) == 0 && walk_out_of_time(w))) {
			w->r->walk_truncated = true;
			break;
		}
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		size_t nl = strlen(name);
		if (path_len + 1 + nl >= sizeof(w->path)) {
			w->r->walk_too_deep++; /* this branch only: the walk goes on */
			continue;
		}
		w->path[path_len] = '/';
		memcpy(w->path + path_len + 1, name, nl + 1);

		/* File capabilities lift an agent like a setuid bit (cap_setuid+ep: the
		 * bounding set of trusted-command agents keeps CAP_SETUID); only an
		 * executable file can carry them into a process. */
		bool caps =
			S_ISREG(st.st_mode) && (st.st_mode & 0111) && file_has_caps(dirfd(d), name);
		if (S_ISREG(st.st_mode) && ((st.st_mode & (S_ISUID | S_ISGID)) || caps)) {
			int k = check_report_add_suid(w->r, w->path, st.st_mode, caps, st.st_uid,
						      st.st_gid);
			if (k < 0)
				w->error = k;
		} else if (S_ISDIR(st.st_mode) && st.st_dev != dev &&
			   !mount_honours_setuid(dirfd(d), name)) {
			/* Another file system's root, mounted nosuid: nothing in it counts. */
		} else if (S_ISDIR(st.st_mode)) {
			struct stat st2;
			int sub;

			sub = openat(dirfd(d), name,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
					     O_NOCTTY);
			if (sub < 0)
				goto next;
			if (fstat(sub, &st2) < 0 || st2.st_dev != st.st_dev ||
			    st2.st_ino != st.st_ino) {
				safe_close(sub);
				goto next;
			}
			note_writable(w, sub, &st2);
			/* An agent's own directory holds only what agents made, on its mount
			 * (nobody but root mounts): it was judged just now, and its insides
			 * add nothing but a way to make the walk run out (a million files, a
			 * tree thousands deep). Too deep: that branch only, never the walk. */
			if (users_uid_is_agent(st2.st_uid)) {
				w->r->walk_agent_dirs++;
				safe_close(sub);
			} else if (depth + 1 >= CHECK_WALK_MAX_DEPTH) {
				w->r->walk_too_deep++;
				safe_close(sub);
			} else
				walk_dir(w, sub, st2.st_dev, path_len + 1 + nl, depth + 1);
		}
	next:
		w->path[path_len] = '\0';
	}
	closedir(d);
}

static void set_agent_writable(struct check_report *r, bool trusted)
{
	/* A walk cut short cannot say "none": where the check is hard, it fails. Nor can
	 * one that left a branch too deep to enter (only root makes a root-owned tree: an
	 * agent's own directories are judged without being entered). */
	if (!r->n_writable && r->walk_truncated)
		check_set(r, CHECK_AGENT_WRITABLE, trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN,
			  "none found, but the walk stopped at a limit (%u entries, %u s) before "
			  "it was done: cannot tell (%s)",
			  CHECK_WALK_MAX_NODES, CHECK_WALK_MAX_SECONDS, nnp_why(trusted));
	else if (!r->n_writable && r->walk_too_deep)
		check_set(r, CHECK_AGENT_WRITABLE, trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN,
			  "none found, but %zu branch%s deeper than %u not walked: cannot tell "
			  "(%s)",
			  r->walk_too_deep, r->walk_too_deep == 1 ? "" : "es", CHECK_WALK_MAX_DEPTH,
			  nnp_why(trusted));
	else if (!r->n_writable)
		check_set(r, CHECK_AGENT_WRITABLE, CHECK_STATUS_OK,
			  "none on a mount without nosuid");
	else {
		/* r->writable is text, its paths escaped: a text value, never escaped again */
		char v[sizeof(r->writable) + 256];

		escape_format(v, sizeof(v), "%zu without nosuid: %-s%s (%s)", r->n_writable,
			      r->writable, r->n_writable > CHECK_WRITABLE_SHOWN ? ", ..." : "",
			      nnp_why(trusted));
		check_set_text(r, CHECK_AGENT_WRITABLE,
			       trusted ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN, v);
	}
}

static int probe_setuid_files(struct check_report *r, int root_fd, bool trusted)
{
	struct walk w = {.r = r};
	struct stat st;
	int fd;

	fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		check_set(r, CHECK_SETUID_FILES, CHECK_STATUS_WARN, "cannot read %s: %s", r->root,
			  strerror(errno));
		safe_close(fd);
		return 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &w.deadline);
	w.deadline.tv_sec += CHECK_WALK_MAX_SECONDS;
	walk_dir(&w, fd, st.st_dev, 0, 0);
	if (w.error < 0)
		return w.error;
	set_agent_writable(r, trusted);

	if (r->walk_truncated)
		check_set(r, CHECK_SETUID_FILES, CHECK_STATUS_WARN,
			  "%zu found in %zu entries before a walk limit (depth %u, %u entries, "
			  "%u s); the list is incomplete",
			  r->n_suid_all, w.nodes, CHECK_WALK_MAX_DEPTH, CHECK_WALK_MAX_NODES,
			  CHECK_WALK_MAX_SECONDS);
	else
		check_set(r, CHECK_SETUID_FILES,
			  r->n_suid_all ? CHECK_STATUS_WARN : CHECK_STATUS_OK,
			  "%zu setuid/setgid file%s in %zu entries (mounts without nosuid; /proc "
			  "/sys "
			  "/dev skipped; %zu agents' own director%s not entered; %zu branch%s "
			  "deeper than %u not entered)",
			  r->n_suid_all, r->n_suid_all == 1 ? "" : "s", w.nodes, r->walk_agent_dirs,
			  r->walk_agent_dirs == 1 ? "y" : "ies", r->walk_too_deep,
			  r->walk_too_deep == 1 ? "" : "es", CHECK_WALK_MAX_DEPTH);
	return 0;
}

/* Why name (in etc; "" for /etc itself) cannot be replaced by rename, as `pistisd users`
 * asks before it writes (statx_rename_blocker). Written to why; left empty when it can. */
static void account_file_stuck(int etc, const char *name, char *why, size_t size)
{
	int r = statx_rename_blocker(etc, name);

	if (r == STATX_NODE_MOUNT_ROOT)
		snprintf(why, size, "/etc/%s is a mount point", name);
	else if (r > 0)
		snprintf(why, size, "/etc%s%s is %s", name[0] ? "/" : "", name,
			 r == STATX_NODE_IMMUTABLE ? "immutable (chattr +i)"
						   : "append-only (chattr +a)");
}

/* What `pistisd users` believes (sandbox-users/users.c, etc_trusted): /etc and each file of
 * the passwd family root-owned and writable by root only (group root may write). Looked
 * at without following a link: users opens them O_NOFOLLOW and refuses a link. */
static void probe_account_files(struct check_report *r, int root_fd)
{
	static const char *const files[] = {"passwd", "group", "shadow", "gshadow"};
	_cleanup_close_ int etc = -1;
	struct stat st;
	char seen[64] = "", stuck[96] = "";

	etc = openat(root_fd, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0 || fstat(etc, &st) < 0) {
		check_set(r, CHECK_ACCOUNT_FILES, CHECK_STATUS_FAIL, "/etc: %s%s", strerror(errno),
			  errno == ENOTDIR ? " (or a symlink)" : "");
		return;
	}
	if (!root_only_writable_at(etc, "", &st)) {
		check_set(r, CHECK_ACCOUNT_FILES, CHECK_STATUS_FAIL, "/etc is %u:%u %04o",
			  (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777));
		return;
	}
	for (size_t k = 0; k < ELEMENTSOF(files); k++) {
		bool optional = k >= 2; /* not every base has shadow and gshadow */

		if (fstatat(etc, files[k], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT && optional)
				continue;
			check_set(r, CHECK_ACCOUNT_FILES, CHECK_STATUS_FAIL, "/etc/%s: %s",
				  files[k], strerror(errno));
			return;
		}
		if (!S_ISREG(st.st_mode)) {
			check_set(r, CHECK_ACCOUNT_FILES, CHECK_STATUS_FAIL,
				  "/etc/%s is not a regular file (%s)", files[k],
				  node_kind(st.st_mode));
			return;
		}
		if (!root_only_writable_at(etc, files[k], &st)) {
			check_set(r, CHECK_ACCOUNT_FILES, CHECK_STATUS_FAIL,
				  "/etc/%s is %u:%u %04o", files[k], (unsigned)st.st_uid,
				  (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777));
			return;
		}
		snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), " %s", files[k]);
		if (!stuck[0])
			account_file_stuck(etc, files[k], stuck, sizeof(stuck));
	}
	if (!stuck[0])
		account_file_stuck(etc, "", stuck, sizeof(stuck));
	if (stuck[0])
		return check_set(r, CHECK_ACCOUNT_FILES, CHECK_STATUS_WARN,
				 "root's, writable by root only, but %s: pistisd users replaces "
				 "these files by rename and refuses to add or change an agent here",
				 stuck);
	check_set(r, CHECK_ACCOUNT_FILES, CHECK_STATUS_OK, "root's, writable by root only: /etc%s",
		  seen);
}

/* /data/bin, first on every agent's PATH: only root's alone (trusted_data_bin_check). */
static void probe_data_bin(struct check_report *r, int root_fd)
{
	char why[512];
	unsigned n = 0;
	int k = trusted_data_bin_check(root_fd, &n, why, sizeof(why));

	/* why is text, the names in it escaped (agents chose some): not escaped again */
	if (k != 0)
		return check_set_text(r, CHECK_DATA_BIN, CHECK_STATUS_FAIL, why);
	if (why[0])
		return check_set_text(r, CHECK_DATA_BIN, CHECK_STATUS_OK, why);
	check_set(r, CHECK_DATA_BIN, CHECK_STATUS_OK, "%u entries, each root's alone", n);
}

/* pistis' own state in /data, one level down (the directories pistisd-entry takes back
 * from a Kubernetes fsGroup walk, docs/entry.md): a node whose group is neither root's nor
 * its owner's own and gives that group access (or a setgid directory, whose new files
 * get that group). Fail when the group is one agents hold (pi-sandbox, an agent's): they
 * read the secrets, other agents' homes, the key, and write the registry. Warn for another
 * group (pi-tools', which trusted commands run with, included): no agent holds it, but
 * every process of the container does (fsGroup is every container process's). */
#define DATA_STATE_ENTRIES_MAX 65536u

struct data_state {
	unsigned n, agents;
	char seen[3][160];
};

static void data_state_node(struct data_state *ds, const char *dir, const char *name,
			    const struct stat *st)
{
	gid_t g = st->st_gid;
	bool agents;

	if (g == 0 || g == st->st_uid || !((st->st_mode & 0070) || (st->st_mode & 02000)))
		return;
	/* pi-tools' group on what root keeps for trusted commands (a secret root owns, 0640)
	 * is how pi-tools is meant to read it */
	if (g == USERS_TOOLS_UID && !strcmp(dir, ".secrets"))
		return;
	/* An agent may share its own home with pi-sandbox (chgrp, chmod): its choice, which
	 * must not stop serve's start; only what root and pi-tools own fails. */
	agents = !users_uid_is_agent(st->st_uid) &&
		 (g == USERS_SANDBOX_GID || users_uid_is_agent((uid_t)g));
	if (ds->n < ELEMENTSOF(ds->seen))
		snprintf(ds->seen[ds->n], sizeof(ds->seen[0]), "/data%s%s%s%s %u:%u %04o",
			 *dir ? "/" : "", dir, *name ? "/" : "", name, (unsigned)st->st_uid,
			 (unsigned)g, (unsigned)(st->st_mode & 07777));
	ds->n++;
	ds->agents += agents;
}

static void data_state_dir(struct data_state *ds, int data_fd, const char *name, bool tmp)
{
	_cleanup_close_ int fd = openat(data_fd, name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
			    lfd = -1;
	DIR *d = NULL;
	struct dirent *de;
	struct stat st;
	unsigned seen = 0;

	if (fd < 0 || fstat(fd, &st) < 0)
		return;
	data_state_node(ds, name, "", &st);
	lfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	d = lfd < 0 ? NULL : fdopendir(lfd);
	if (!d)
		return;
	lfd = -1; /* the DIR has it */
	while ((de = readdir(d)) && seen++ < DATA_STATE_ENTRIES_MAX) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISLNK(st.st_mode))
			continue;
		data_state_node(ds, name, de->d_name, &st);
		if (tmp && S_ISDIR(st.st_mode)) {
			char sub[NAME_MAX + 8];
			struct stat tst;

			snprintf(sub, sizeof(sub), "%s/tmp", de->d_name);
			if (fstatat(fd, sub, &tst, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISDIR(tst.st_mode))
				data_state_node(ds, name, sub, &tst);
		}
	}
	closedir(d);
}

static void probe_data_state(struct check_report *r, int root_fd)
{
	_cleanup_close_ int data_fd =
		openat(root_fd, "data", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	size_t n_dirs;
	const struct users_state_dir *dirs = users_state_dirs(&n_dirs);
	struct data_state ds = {0};

	if (data_fd < 0)
		return check_set(r, CHECK_DATA_STATE, CHECK_STATUS_OK, "no /data");
	/* Not /data itself: a write rule on it makes it root:pi-sandbox 3770 (policy apply;
	 * pistisd-entry resets it at start), and what it holds that agents must not touch is
	 * judged below. */
	for (size_t i = 0; i < n_dirs; i++)
		data_state_dir(&ds, data_fd, dirs[i].name, dirs[i].homes);
	if (!ds.n)
		return check_set(r, CHECK_DATA_STATE, CHECK_STATUS_OK,
				 "each node its owner's, in root's or its owner's group");
	check_set(r, CHECK_DATA_STATE, ds.agents ? CHECK_STATUS_FAIL : CHECK_STATUS_WARN,
		  "%u node%s in a group not its owner's, %u of them root's or pi-tools' in a group "
		  "agents hold: %s%s%s%s%s%s",
		  ds.n, ds.n == 1 ? "" : "s", ds.agents, ds.seen[0], ds.n > 1 ? ", " : "",
		  ds.n > 1 ? ds.seen[1] : "", ds.n > 2 ? ", " : "", ds.n > 2 ? ds.seen[2] : "",
		  ds.n > 3 ? ", ..." : "");
}

/* Orchestrators' secret mounts: Docker's and Compose's /run/secrets (files mode 0444 by
 * default), Kubernetes' service-account token under /var/run/secrets (0644). Every user
 * reads them unless told otherwise, so an agent can, unless a none rule covers the
 * directory (docs/entry.md). Judged by trying: a child with an unprivileged uid and
 * pi-sandbox as its one group opens each regular file and link found there (links
 * resolved inside the root, as an agent's open would), at most SECRETS_MAX of them, at
 * most SECRETS_DEPTH directories down. */
#define SECRETS_MAX 64
#define SECRETS_DEPTH 4
#define SECRETS_PATH_MAX 256

struct secrets {
	char path[SECRETS_MAX][SECRETS_PATH_MAX];
	size_t n;
	bool more;
};

static void secrets_collect(int root_fd, const char *rel, unsigned depth, struct secrets *s)
{
	int fd = check_openat2(root_fd, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK,
			       CHECK_RESOLVE_IN_ROOT | CHECK_RESOLVE_NO_MAGICLINKS);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;

	if (!d) {
		safe_close(fd);
		return;
	}
	while ((de = readdir(d))) {
		char sub[SECRETS_PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name) >= sizeof(sub) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth < SECRETS_DEPTH) {
			secrets_collect(root_fd, sub, depth + 1, s);
		} else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
			if (s->n == SECRETS_MAX) {
				s->more = true;
				break;
			}
			memcpy(s->path[s->n++], sub, sizeof(sub));
		}
	}
	closedir(d);
}

/* Device nodes in the agents' /dev (the image's: commands run chrooted into it) that every
 * user may open, read or write: the seccomp filter allows ioctl on any fd, so such a node
 * hands agents the driver behind it (KVM_CREATE_VM works on an fd opened read-only). The
 * common ones are left out: null, zero, full, random, urandom, tty, ptmx, kmsg (judged by
 * dmesg_restrict), fuse (useless without mount, which the filter refuses), net/tun
 * (TUNSETIFF needs CAP_NET_ADMIN) and rfkill. /dev and the directories in it, two levels
 * down, at most DEV_MAX entries; pts is the agents' own terminals. */
#define DEV_MAX 4096
#define DEV_SHOWN 4
#define DEV_PATH_MAX 128

struct dev_scan {
	unsigned seen, open, shown;
	char names[DEV_SHOWN * (DEV_PATH_MAX + ESCAPE_QUOTE_EXTRA + 32)];
};

static bool dev_common(dev_t rdev)
{
	static const struct {
		unsigned major, minor;
	} common[] = {{1, 3},
		      {1, 5},
		      {1, 7},
		      {1, 8},
		      {1, 9},
		      {1, 11},
		      {5, 0},
		      {5, 2},
		      {10, 200} /* tun */,
		      {10, 229} /* fuse */,
		      {10, 242} /* rfkill */};

	for (size_t i = 0; i < ELEMENTSOF(common); i++)
		if (major(rdev) == common[i].major && minor(rdev) == common[i].minor)
			return true;
	return false;
}

static void dev_scan_dir(int dfd, const char *rel, unsigned depth, struct dev_scan *s)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		safe_close(dfd);
		return;
	}
	while ((de = readdir(d)) && s->seen < DEV_MAX) {
		char sub[DEV_PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (depth == 0 && !strcmp(de->d_name, "pts")) ||
		    (size_t)snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name) >= sizeof(sub) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		s->seen++;
		if (S_ISDIR(st.st_mode) && depth < 2) {
			int sfd = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sfd >= 0)
				dev_scan_dir(sfd, sub, depth + 1, s);
			continue;
		}
		if (!(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) || !(st.st_mode & 0006) ||
		    dev_common(st.st_rdev))
			continue;
		if (s->open++ < DEV_SHOWN) {
			char q[DEV_PATH_MAX + ESCAPE_QUOTE_EXTRA];
			size_t n = strlen(s->names);

			escape_c_quote(sub, strlen(sub), DEV_PATH_MAX, q, sizeof(q));
			snprintf(s->names + n, sizeof(s->names) - n, "%s%s (%c %u:%u %04o)",
				 n ? ", " : "", q, S_ISBLK(st.st_mode) ? 'b' : 'c',
				 major(st.st_rdev), minor(st.st_rdev), st.st_mode & 07777);
		}
	}
	closedir(d);
}

static void probe_dev_nodes(struct check_report *r, int root_fd)
{
	static struct dev_scan s;
	int fd = check_openat2(root_fd, "dev", O_RDONLY | O_DIRECTORY,
			       CHECK_RESOLVE_IN_ROOT | CHECK_RESOLVE_NO_MAGICLINKS);

	memset(&s, 0, sizeof(s));
	if (fd < 0)
		return check_set(r, CHECK_DEV_NODES, CHECK_STATUS_OK, "no /dev in the image");
	dev_scan_dir(fd, "/dev", 0, &s);
	if (!s.open)
		return check_set(r, CHECK_DEV_NODES, CHECK_STATUS_OK,
				 "%u entries, none but the common devices open to every user%s",
				 s.seen, s.seen >= DEV_MAX ? " (stopped at the bound)" : "");
	/* s.names is text, its names escaped: not escaped again */
	char v[sizeof(s.names) + 128];

	snprintf(v, sizeof(v), "%u device node(s) every user may open: %s%s", s.open, s.names,
		 s.open > DEV_SHOWN ? ", ..." : "");
	check_set_text(r, CHECK_DEV_NODES, CHECK_STATUS_WARN, v);
}

static void probe_orchestrator_secrets(struct check_report *r, int root_fd)
{
	static const char *const dirs[] = {"run/secrets", "var/run/secrets"};
	static struct secrets s;
	const gid_t group = USERS_SANDBOX_GID;
	struct stat first = {0};
	char seen[3 * SECRETS_PATH_MAX] = "";
	unsigned char idx;
	int pfd[2], status = 0, readable = 0;
	size_t len = 0;
	pid_t pid;

	s.n = 0;
	s.more = false;
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		_cleanup_close_ int fd =
			check_openat2(root_fd, dirs[i], O_PATH | O_DIRECTORY,
				      CHECK_RESOLVE_IN_ROOT | CHECK_RESOLVE_NO_MAGICLINKS);
		struct stat st;

		/* /var/run is /run on most images: one walk of it */
		if (fd < 0 || fstat(fd, &st) < 0 ||
		    (i && st.st_dev == first.st_dev && st.st_ino == first.st_ino))
			continue;
		if (!i)
			first = st;
		secrets_collect(root_fd, dirs[i], 1, &s);
	}
	if (!s.n)
		return check_set(r, CHECK_ORCHESTRATOR_SECRETS, CHECK_STATUS_OK,
				 "no file under /run/secrets or /var/run/secrets");
	if (geteuid() != 0)
		return check_set(r, CHECK_ORCHESTRATOR_SECRETS, CHECK_STATUS_WARN,
				 "%zu file(s) under /run/secrets not judged: needs root", s.n);
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return check_set(r, CHECK_ORCHESTRATOR_SECRETS, CHECK_STATUS_WARN,
				 "not judged: pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		safe_close(pfd[0]);
		if (setgroups(1, &group) < 0 || setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			_exit(111);
		for (size_t i = 0; i < s.n; i++) {
			int fd = check_openat2(root_fd, s.path[i], O_RDONLY | O_NONBLOCK | O_NOCTTY,
					       CHECK_RESOLVE_IN_ROOT | CHECK_RESOLVE_NO_MAGICLINKS);
			struct stat st;

			idx = (unsigned char)i;
			if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
			    write(pfd[1], &idx, 1) != 1)
				_exit(111);
			if (fd >= 0)
				close(fd);
		}
		_exit(0);
	}
	safe_close(pfd[1]);
	if (pid < 0) {
		safe_close(pfd[0]);
		return check_set(r, CHECK_ORCHESTRATOR_SECRETS, CHECK_STATUS_WARN,
				 "not judged: fork: %s", strerror(errno));
	}
	while (read(pfd[0], &idx, 1) == 1) {
		if (idx < s.n && len < sizeof(seen) - 1 && readable < 3)
			len += (size_t)snprintf(seen + len, sizeof(seen) - len, "%s/%s",
						readable ? ", " : "", s.path[idx]);
		readable++;
	}
	safe_close(pfd[0]);
	status = wait_child(pid);
	if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return check_set(r, CHECK_ORCHESTRATOR_SECRETS, CHECK_STATUS_WARN,
				 "not judged: the unprivileged child failed");
	if (readable)
		return check_set(r, CHECK_ORCHESTRATOR_SECRETS, CHECK_STATUS_WARN,
				 "agents can read %d of %zu%s file(s): %s%s", readable, s.n,
				 s.more ? "+" : "", seen, readable > 3 ? ", ..." : "");
	check_set(r, CHECK_ORCHESTRATOR_SECRETS, CHECK_STATUS_OK,
		  "%zu%s file(s) under /run/secrets, none readable by agents", s.n,
		  s.more ? "+" : "");
}

int check_walk(const char *root, struct check_report **ret)
{
	_cleanup_close_ int root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct check_report *r;
	int k;

	if (root_fd < 0)
		return -errno;
	r = check_report_new(root);
	if (!r)
		return -ENOMEM;
	k = probe_setuid_files(r, root_fd, false);
	if (k < 0) {
		check_report_free(r);
		return k;
	}
	*ret = r;
	return 0;
}

int check_run(const char *root, unsigned flags, struct check_report **ret)
{
	struct check_report *r = NULL;
	_cleanup_close_ int root_fd = -1;
	int k;

	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return -errno;
	r = check_report_new(root);
	if (!r)
		return -ENOMEM;

	probe_capabilities(r);
	probe_seccomp(r);
	probe_landlock(r);
	probe_openat2(r);
	probe_close_range(r);
	probe_pidfd(r);
	probe_cgroup(r);
	probe_userns(r);
	probe_sysctl_min(r, CHECK_PROTECTED_HARDLINKS, "fs/protected_hardlinks", 1,
			 CHECK_STATUS_FAIL, CHECK_STATUS_MISSING);
	probe_sysctl_min(r, CHECK_PROTECTED_SYMLINKS, "fs/protected_symlinks", 1, CHECK_STATUS_FAIL,
			 CHECK_STATUS_MISSING);
	probe_sysctl_need_want(r, CHECK_PROTECTED_REGULAR, "fs/protected_regular", 1, 2);
	probe_sysctl_need_want(r, CHECK_PROTECTED_FIFOS, "fs/protected_fifos", 1, 2);
	probe_sticky_shared(r, root_fd);
	probe_sysctl_min(r, CHECK_YAMA_PTRACE, "kernel/yama/ptrace_scope", 1, CHECK_STATUS_WARN,
			 CHECK_STATUS_MISSING);
	probe_sysctl_zero(r, CHECK_TIOCSTI, "dev/tty/legacy_tiocsti", CHECK_STATUS_MISSING,
			  "Linux < 6.2 always allows TIOCSTI");
	probe_sysctl_zero(r, CHECK_USERFAULTFD, "vm/unprivileged_userfaultfd", CHECK_STATUS_WARN,
			  "Linux < 5.2 lets everyone use userfaultfd, or it is not built");
	probe_sysctl_min(r, CHECK_PERF_EVENT, "kernel/perf_event_paranoid", 2, CHECK_STATUS_WARN,
			 CHECK_STATUS_OK);
	/* The filter refuses syslog(2); /dev/kmsg (0644 root) reads the same log, and only
	 * this sysctl refuses it to a caller without CAP_SYSLOG. */
	probe_sysctl_min(r, CHECK_DMESG_RESTRICT, "kernel/dmesg_restrict", 1, CHECK_STATUS_WARN,
			 CHECK_STATUS_MISSING);
	probe_suid_dumpable(r);
	probe_core_pattern(r);
	probe_proc_hidepid(r);
	probe_oom_floor(r);
	/* Present, or not known to be absent: the stricter verdict. */
	struct stat tst;
	bool trusted = lstat(CHECK_TRUSTED_SUDOERS, &tst) == 0 || errno != ENOENT;
	static const char *const data[] = {"/data", "/data/sandbox-home", "/data/agents"},
				 *const workspaces[] = {TRUSTED_WORKSPACE_TREES};
	probe_nosuid(r, CHECK_NOSUID_DATA, data, ELEMENTSOF(data), trusted);
	probe_nosuid(r, CHECK_NOSUID_WORKSPACES, workspaces, ELEMENTSOF(workspaces), trusted);
	probe_nosuid_shared(r, root_fd, trusted);
	probe_mount_points(r);
	char sudo[PATH_MAX + 1] = "";
	char sudo_version[128] = "";
	char no_run[96] = "";
	(void)image_programs_runnable(root_fd, no_run, sizeof(no_run));
	probe_program(r, CHECK_SUDO, root_fd, root, "sudo", true, sudo, sizeof(sudo), sudo_version,
		      sizeof(sudo_version), no_run);
	probe_sudo_cves(r, root, sudo, sudo_version, trusted, no_run);
	probe_program(r, CHECK_VISUDO, root_fd, root, "visudo", false, NULL, 0, NULL, 0, no_run);
	probe_account_files(r, root_fd);
	probe_data_state(r, root_fd);
	probe_data_bin(r, root_fd);
	probe_orchestrator_secrets(r, root_fd);
	probe_dev_nodes(r, root_fd);
	probe_host_namespaces(r);
	probe_shared_pid_ns(r);
	probe_nss_sources(r, root_fd);
	probe_id_map(r);
	probe_pistisd_binary(r);
	const char *blocker = trusted ? trusted_setuid_blocker() : NULL;
	if (!trusted)
		check_set(r, CHECK_TRUSTED_CAPS, CHECK_STATUS_OK,
			  "no trusted commands installed (no " CHECK_TRUSTED_SUDOERS ")");
	else if (trusted_dropin_state(root_fd) == TRUSTED_DROPIN_OTHER)
		check_set(r, CHECK_TRUSTED_CAPS, CHECK_STATUS_WARN,
			  "trusted commands are installed but stay off: " CHECK_TRUSTED_SUDOERS
			  " is not in the form this pistisd writes (another release's?): run "
			  "pistisd trusted install");
	else if (!blocker)
		check_set(r, CHECK_TRUSTED_CAPS, CHECK_STATUS_OK,
			  "CAP_SYS_ADMIN held, no no_new_privs");
	else
		check_set(r, CHECK_TRUSTED_CAPS, CHECK_STATUS_WARN,
			  "trusted commands are installed but stay off: %s", blocker);
	if (flags & CHECK_SKIP_SETUID_WALK) {
		check_set(r, CHECK_SETUID_FILES, CHECK_STATUS_WARN, "not walked (--no-walk)");
		check_set(r, CHECK_AGENT_WRITABLE, CHECK_STATUS_WARN, "not walked (--no-walk)");
	} else {
		k = probe_setuid_files(r, root_fd, trusted);
		if (k < 0) {
			check_report_free(r);
			return k;
		}
	}
	*ret = r;
	return 0;
}

#define HELP_COLUMNS 80

/* TITLE and the names of the checks (the hard ones only with hard_only), comma-separated
 * and wrapped at HELP_COLUMNS, then a full stop. */
static void help_names(const char *title, bool hard_only)
{
	size_t col = strlen(title);
	unsigned n = 0;

	fputs(title, stdout);
	for (unsigned i = 0; i < _CHECK_MAX; i++) {
		const char *name = check_name(i);

		if (hard_only && !check_is_hard(i))
			continue;
		if (n++) {
			putchar(',');
			col++;
		}
		/* room for the name and the ',' or '.' after it */
		if (col + 1 + strlen(name) + 1 > HELP_COLUMNS) {
			putchar('\n');
			col = 0;
		} else {
			putchar(' ');
			col++;
		}
		fputs(name, stdout);
		col += strlen(name);
	}
	puts(".");
}

static void help(void)
{
	printf("Usage: pistisd check [--json] [--root DIR] [--allow NAME[,NAME…]]… [--no-walk]\n\n"
	       "Probe the running kernel and the image for what pistis's promises rely on, and\n"
	       "say for each what it affects and what to do. The daemon runs the same checks at\n"
	       "start-up and refuses to start on the same verdict.\n\n"
	       "  --json          one JSON document instead of the table\n"
	       "  --root DIR      look at the image under DIR: only the image checks (sudo,\n"
	       "                  visudo, account_files, data_bin, data_state,\n"
	       "                  orchestrator_secrets, dev_nodes, sticky_shared,\n"
	       "                  setuid_files, agent_writable; nosuid_shared's\n"
	       "                  write rules) look there; kernel checks always describe\n"
	       "                  the running kernel, mount checks its mounts\n"
	       "  --allow NAMES   accept that these hard requirements do not hold (also\n"
	       "                  PISTIS_ALLOW=name,name); the promise they back is then off\n"
	       "  --no-walk       skip the setuid/setgid inventory (walks mounts without nosuid)\n"
	       "  -h, --help      this text\n\n");
	help_names("Hard requirements:", true);
	printf("nosuid_data, nosuid_workspaces, nosuid_shared, agent_writable and sudo_cves\n"
	       "fail only where trusted commands are configured (" CHECK_TRUSTED_SUDOERS "\n"
	       "exists); agent_writable only when the image is walked (not --no-walk).\n");
	help_names("All checks:", false);
	printf("\nExit: 0 every hard requirement holds (or is allowed), 1 one does not (named "
	       "on\n"
	       "stderr), 100 usage, 111 could not probe. See docs/check.md.\n");
}

static int parse_allow(const char *list, const char *from, check_mask_t *mask)
{
	const char *bad = NULL;
	size_t bad_len = 0;

	if (check_allow_parse(list, mask, &bad, &bad_len) < 0) {
		char q[64 + ESCAPE_QUOTE_EXTRA]; /* a longer name: cut, marked */

		log_error("unknown check %-s in %s; see 'pistisd check --help' for names",
			  escape_c_quote(bad, bad_len, 64, q, sizeof(q)), from);
		return -EINVAL;
	}
	return 0;
}

int check_cli_main(int argc, char **argv)
{
	static const struct option options[] = {
		{"help", no_argument, NULL, 'h'},	{"json", no_argument, NULL, 'j'},
		{"root", required_argument, NULL, 'r'}, {"allow", required_argument, NULL, 'a'},
		{"no-walk", no_argument, NULL, 'W'},	{},
	};
	struct check_report *r = NULL;
	const char *root = "/";
	check_mask_t allowed = 0;
	bool json = false;
	unsigned flags = 0;
	int c, k;

	opterr = 0; /* getopt would print a bad option raw: log_bad_option escapes it */
	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
			return 0;
		case 'j':
			json = true;
			break;
		case 'r':
			root = optarg;
			break;
		case 'a':
			if (parse_allow(optarg, "--allow", &allowed) < 0)
				return EXIT_USAGE;
			break;
		case 'W':
			flags |= CHECK_SKIP_SETUID_WALK;
			break;
		case '?':
			log_bad_option(argv, optind, optopt, "pistisd check --help");
			return EXIT_USAGE;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'; see 'pistisd check --help'", argv[optind]);
		return EXIT_USAGE;
	}
	const char *env = getenv("PISTIS_ALLOW");
	if (env && parse_allow(env, "PISTIS_ALLOW", &allowed) < 0)
		return EXIT_USAGE;

	k = check_run(root, flags, &r);
	if (k < 0)
		return log_error_errno(k, "Failed to check '%s': %m", root), EXIT_SYSTEM;
	r->allowed = allowed;

	if (json)
		check_format_json(r, stdout);
	else
		check_format_text(r, stdout);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		check_report_free(r);
		return log_error_errno(-EIO, "Failed to write the report: %m"), EXIT_SYSTEM;
	}

	int failed = check_first_failure(r);
	if (failed >= 0) {
		char v[4 * sizeof(r->results[0].value) + 1];

		log_error("hard requirement '%s' does not hold: %-s; %s", check_name(failed),
			  check_value_text(&r->results[failed], v, sizeof(v)),
			  check_advice(failed));
	}
	check_report_free(r);
	return failed >= 0 ? 1 : 0;
}
