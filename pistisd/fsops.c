/* pistisd serve: file operations, run as the agent. Each request forks a helper that
 * becomes the agent (setgroups → setresgid → setresuid through the spawn core's privs_*,
 * each verified), forgets the relay token, and only then touches the file system: the
 * kernel's own permission checks decide, never root plus checks. Paths are resolved with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) beneath "/" (or a
 * per-component O_NOFOLLOW walk where openat2 is missing); the leaf is opened
 * O_PATH|O_NOFOLLOW and only the regular file it holds is reopened for I/O, so no symlink is
 * followed and no FIFO or device opened. The helper writes the whole JSON answer to a
 * pipe; the parent forwards it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/escape.h"
#include "lib/proto.h"
#include "lib/statx.h"
#include "pistisd/privs.h"
#include "pistisd/serve.h"
#include "pistisd/spawn.h"
#include "policy/policy.h"
#include "sandbox-users/users.h"

#define FSOP_TIMEOUT_US (30LL * LWS_US_PER_SEC)
#define FSOP_MAX_ANSWER (PROTO_MAX_FILE / 3 * 4 + 64 * 1024)
#define FSOP_MAX_RUNNING 16
#define FSOP_EXIT_REFUSED 3 /* the helper wrote a whole error answer */
#define FSOP_MAX_PER_AGENT                                                                         \
	4 /* one agent cannot take every slot (a helper it SIGSTOPs holds
			      * one for FSOP_TIMEOUT_US) */

struct fsop {
	struct watch w;
	pid_t pid;
	uid_t uid; /* the agent's */
	char id[PROTO_MAX_ID + 1];
	const char *op_name;
	bool changes; /* an operation that changes files (not read, list, stat) */
	char *audit; /* 'id=… agent="…" uid=N path="…" [to="…"]', C-escaped: the audit line */
	char *buf;
	size_t len;
	bool overflow;
	lws_sorted_usec_list_t timeout;
	uint64_t due_ns; /* spawn_now_ns: a freeze of the sandbox does not count */
};

static unsigned running;
static struct fsop *live[FSOP_MAX_RUNNING]; /* for fsops_stop_all */
static bool held;
static struct {
	uid_t uid;
	unsigned n;
} per_agent[FSOP_MAX_RUNNING];

static unsigned *agent_count(uid_t uid, bool add)
{
	for (unsigned i = 0; i < FSOP_MAX_RUNNING; i++)
		if (per_agent[i].n && per_agent[i].uid == uid)
			return &per_agent[i].n;
	for (unsigned i = 0; add && i < FSOP_MAX_RUNNING; i++)
		if (!per_agent[i].n) {
			per_agent[i].uid = uid;
			return &per_agent[i].n;
		}
	return NULL;
}

/* --- in the helper, as the agent ----------------------------------------------------- */

/* True when nothing but empty and "." components are left in p (NULL: none left): the
 * component just split off is the last one. "..." and ".." are components like any other
 * (".." is then refused), never the end of the path. */
static bool only_dots(const char *p)
{
	while (p && *p) {
		size_t n = strcspn(p, "/");

		if (n > 1 || (n == 1 && p[0] != '.'))
			return false;
		p += n + (p[n] == '/');
	}
	return true;
}

static int openat2_beneath(int dfd, const char *rel, int flags, mode_t mode)
{
	static bool no_openat2;
	struct open_how how = {
		/* openat2 refuses O_NOCTTY and friends next to O_PATH */
		.flags = (uint64_t)flags | O_CLOEXEC | (flags & O_PATH ? 0 : O_NOCTTY),
		.mode = mode,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_close_ int cur = -1;
	char buf[PROTO_MAX_PATH + 1], *p;

	if (!no_openat2 && !getenv("PISTIS_NO_OPENAT2")) {
		long fd = syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno != ENOSYS)
			return -errno;
		no_openat2 = true;
	}
	/* Fallback: one component at a time, each O_NOFOLLOW, never "..". */
	snprintf(buf, sizeof(buf), "%s", rel);
	cur = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return -errno;
	p = buf;
	while (p) {
		char *comp = strsep(&p, "/");
		bool last;
		int fd;
		if (!*comp || !strcmp(comp, "."))
			continue;
		if (!strcmp(comp, ".."))
			return -EXDEV;
		last = only_dots(p);
		fd = last ? openat(cur, comp, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode)
			  : openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY);
		if (fd < 0) {
			/* a symlink on the way is ELOOP, as RESOLVE_NO_SYMLINKS says (O_DIRECTORY
			 * said ENOTDIR: "bad_request" here, "denied" with openat2) */
			int r = -errno;
			struct stat st;
			if (r == -ENOTDIR && fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode))
				r = -ELOOP;
			return r;
		}
		safe_close(cur);
		cur = fd;
		if (last)
			break;
	}
	return TAKE_FD(cur);
}

/* The helper is a fork of pistisd that became the agent: its memory is a copy of the
 * daemon's (other agents' buffered output, their commands' environments), and ptrace's
 * access check always lets a process at its own /proc/PID/{mem,environ,maps}. Today those
 * files are root-owned because the helper is non-dumpable, so DAC refuses them; the helper
 * does not rely on that: no file operation looks inside a procfs, wherever it is mounted
 * (the agent's own commands still see /proc as usual: they are fresh executables). */
static int refuse_procfs(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return -errno;
	return sf.f_type == PROC_SUPER_MAGIC ? -EACCES : 0;
}

/* Split "/a/b/c" into the parent directory (opened beneath "/") and the leaf name. A '/'
 * after the leaf is dropped from it: what it says is do_op's to keep (names_dir_only). */
static int open_parent(const char *path, char leaf[256])
{
	char rel[PROTO_MAX_PATH + 1];
	const char *slash;
	size_t n;

	while (*path == '/')
		path++;
	snprintf(rel, sizeof(rel), "%s", path);
	n = strlen(rel);
	while (n > 1 && rel[n - 1] == '/')
		rel[--n] = 0;
	if (!n)
		return -EINVAL;
	slash = strrchr(rel, '/');
	if (strlen(slash ? slash + 1 : rel) >= 256)
		return -ENAMETOOLONG;
	snprintf(leaf, 256, "%s", slash ? slash + 1 : rel);
	/* "." or ".." as the leaf names no entry an operation could act on (unlinkat and
	 * renameat say EINVAL or EBUSY); the parent is opened first, so "f/." over a file f
	 * is ENOTDIR and "gone/." ENOENT, as the kernel resolves them */
	bool dot_leaf = !strcmp(leaf, "..") || !strcmp(leaf, ".");
	if (!slash)
		return dot_leaf ? -EINVAL : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	rel[slash - rel] = 0;
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	int r = openat2_beneath(root, rel, O_PATH | O_DIRECTORY, 0);
	close(root);
	if (r >= 0) {
		int k = dot_leaf ? -EINVAL : refuse_procfs(r);
		if (k < 0) {
			close(r);
			return k;
		}
	}
	return r;
}

/* The directories above path's leaf that are missing, made in one walk down the path: each
 * component is made (mkdirat) beneath the directory fd of the one before, then opened
 * beneath it as openat2_beneath opens (no symlink, a procfs refused), so a directory the
 * agent swaps for a symlink after it was made is not followed. One walk, not one from "/"
 * per component: a path of 2,000 components cost 2,000 walks of up to 2,000 opens each
 * under the per-component fallback (19 s of the helper's 30; red team). "." and empty
 * components are passed over, as the kernel does ("a/./b" failed as the directory "."
 * could not be made); a ".." above the leaf is refused (EXDEV, as the fallback's walk
 * says), before anything is made. *ret_made: the offset (in path without its leading '/')
 * of the first '/' whose directory this call made, or SIZE_MAX for none;
 * remove_made_parents takes it. A failure part-way removes what was made. */
static void remove_made_parents(const char *path, size_t made);

/* A ".." above the leaf: looked for before anything is made, so nothing is left behind */
static bool dotdot_above_leaf(const char *p)
{
	for (;;) {
		size_t n = strcspn(p, "/");
		if (!p[n])
			return false;
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return true;
		p += n + 1;
	}
}

static int mkdir_parents(const char *path, size_t *ret_made)
{
	char rel[PROTO_MAX_PATH + 1], *p, *comp;
	_cleanup_close_ int cur = -1;
	int r = 0;

	*ret_made = SIZE_MAX;
	while (*path == '/')
		path++;
	snprintf(rel, sizeof(rel), "%s", path);
	if (dotdot_above_leaf(rel))
		return -EXDEV;
	cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -errno;
	p = rel;
	/* every component with a '/' after it: the leaf's is open_parent's */
	while (r == 0 && (comp = strsep(&p, "/")) && p) {
		int next;
		if (!*comp || !strcmp(comp, "."))
			continue;
		if (mkdirat(cur, comp, 0777) == 0) {
			if (*ret_made == SIZE_MAX)
				*ret_made = (size_t)(comp - rel) + strlen(comp);
		} else if (errno != EEXIST) {
			r = -errno;
			break;
		}
		next = openat2_beneath(cur, comp, O_PATH | O_DIRECTORY, 0);
		if (next < 0) {
			r = next;
			break;
		}
		safe_close(cur);
		cur = next;
		r = refuse_procfs(cur);
	}
	if (r < 0) {
		remove_made_parents(path, *ret_made);
		*ret_made = SIZE_MAX;
	}
	return r;
}

/* An operation that changed nothing (a write refused for space, a file or directory that
 * could not be made) leaves no directory mkdir_parents made for it: deepest first, each
 * only while empty (rmdir), each beneath its parent's fd. It runs as the agent, so it
 * can remove nothing the agent could not; a directory the agent filled meanwhile stays.
 * The parents' fds come from walks down from the first directory made, each keeping the
 * last REMOVE_WINDOW of them: a walk from "/" per directory cost 14 s of the helper's 30
 * for 1,900 directories under the per-component fallback (red team). */
#define REMOVE_WINDOW 64

static void remove_made_parents(const char *path, size_t made)
{
	char rel[PROTO_MAX_PATH + 1];
	size_t name[PROTO_MAX_PATH / 2 + 1]; /* the made directories' names: offsets in rel */
	unsigned k = 0;
	_cleanup_close_ int base = -1;
	size_t first, n;

	if (made == SIZE_MAX)
		return;
	while (*path == '/')
		path++;
	snprintf(rel, sizeof(rel), "%s", path);
	n = strlen(rel);
	if (made >= n || rel[made] != '/')
		return;
	for (first = made; first > 0 && rel[first - 1] != '/';)
		first--;
	/* the directory holding the first one made: "/" or the path up to it */
	rel[first] = 0;
	base = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (base >= 0 && first > 0) {
		int fd = openat2_beneath(base, rel, O_PATH | O_DIRECTORY, 0);
		safe_close(base);
		base = fd;
	}
	if (base < 0)
		return;
	rel[first] = path[first];
	/* the names with a '/' after them, as mkdir_parents made them: "a/./b" and "a//b"
	 * name no directory of their own in "." and "" */
	for (size_t i = first, s = first; i < n; i++)
		if (rel[i] == '/') {
			rel[i] = 0;
			if (rel[s] && strcmp(rel + s, "."))
				name[k++] = s;
			s = i + 1;
		}
	for (unsigned hi = k; hi > 0;) {
		unsigned lo = hi > REMOVE_WINDOW ? hi - REMOVE_WINDOW : 0, kept = 0;
		int holder[REMOVE_WINDOW]; /* holder[j - lo]: the directory name j is in */
		int cur = fcntl(base, F_DUPFD_CLOEXEC, 3);
		bool whole = cur >= 0;

		for (unsigned j = 0; whole && j < hi; j++) {
			if (j >= lo) {
				holder[kept] = fcntl(cur, F_DUPFD_CLOEXEC, 3);
				whole = holder[kept] >= 0;
				kept += whole;
			}
			if (whole && j + 1 < hi) {
				int next = openat2_beneath(cur, rel + name[j], O_PATH | O_DIRECTORY,
							   0);
				safe_close(cur);
				cur = next;
				whole = cur >= 0;
			}
		}
		safe_close(cur);
		/* not empty (or gone): nor are the ones above */
		for (unsigned j = lo + kept; whole && j-- > lo;)
			whole = unlinkat(holder[j - lo], rel + name[j], AT_REMOVEDIR) == 0;
		for (unsigned j = 0; j < kept; j++)
			close(holder[j]);
		if (!whole)
			return;
		hi = lo;
	}
}

/* reopen_leaf without a procfs: open the name again and keep the fd only if it is the
 * inode pfd holds; O_TRUNC waits until that is known, so a file swapped in meanwhile is
 * neither truncated nor used (-ENOENT: the file judged is no longer at that name). */
static int reopen_by_name(int pfd, int dfd, const char *leaf, int flags)
{
	struct stat want, got;
	int fd;

	if (fstat(pfd, &want) < 0)
		return -errno;
	fd = openat(dfd, leaf, (flags & ~O_TRUNC) | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &got) < 0 || got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
		close(fd);
		return -ENOENT;
	}
	if ((flags & O_TRUNC) && ftruncate(fd, 0) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Reopen for I/O the inode the O_PATH fd pfd holds, never another: through the helper's own
 * fd link in a procfs mounted at /proc (a task may open its own fd links though it is
 * non-dumpable: proc_fd_permission; the kernel checks the agent's access to the inode as for
 * any open). "/proc" is taken without following and must be a procfs, so nothing the agent
 * made is walked; this is no agent-supplied path, so refuse_procfs has no say in it. Where no
 * procfs is there for this task, the leaf is opened by name (O_NOFOLLOW, O_NONBLOCK) and
 * kept only if it is the same inode (reopen_by_name): another file swapped in meanwhile is
 * closed untouched; a FIFO is opened (non-blocking, as the agent) and refused. */
static int reopen_leaf(int pfd, int dfd, const char *leaf, int flags)
{
	_cleanup_close_ int proc = -1, fds = -1;
	struct statfs sf;
	char name[16];
	int fd;

	flags |= O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	proc = open("/proc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (proc >= 0 && fstatfs(proc, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC) {
		fds = openat(proc, "thread-self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
		/* ENOENT: a procfs of a pid namespace this task is not in */
		if (fds < 0 && errno != ENOENT)
			return -errno;
	}
	if (fds < 0)
		return reopen_by_name(pfd, dfd, leaf, flags);
	snprintf(name, sizeof(name), "%d", pfd);
	fd = openat(fds, name, flags);
	return fd < 0 ? -errno : fd;
}

/* fs.protected_regular as the kernel applies it to an O_CREAT open of a file that exists
 * (may_create_in_sticky): in a sticky directory, a file owned by neither the caller nor the
 * directory's owner is refused when the directory is world-writable, or group-writable at
 * level 2. open_regular writes to an existing file through a reopen of its O_PATH fd,
 * without O_CREAT, which the kernel does not check: so fs.write and fs.edit would write
 * into a file another agent planted in /tmp for them (red team) where the agent's own
 * `>` is refused. The level is the sysctl's, read now (2, the strictest, where it cannot
 * be read). The caller is the agent's helper: its euid is the agent's. */
static int sticky_refuses(int dfd, const struct stat *st)
{
	struct stat d;
	char buf[8];
	int level = 2, fd;

	if (fstat(dfd, &d) < 0)
		return -errno;
	if (!(d.st_mode & S_ISVTX) || st->st_uid == d.st_uid || st->st_uid == geteuid())
		return 0;
	fd = open("/proc/sys/fs/protected_regular", O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		if (n >= 2 && buf[0] >= '0' && buf[0] <= '9' && buf[1] == '\n')
			level = buf[0] - '0';
		close(fd);
	}
	if (level == 0)
		return 0;
	return (d.st_mode & 0002) || ((d.st_mode & 0020) && level >= 2) ? -EACCES : 0;
}

/* Open the regular file leaf beneath dfd. The leaf is opened O_PATH|O_NOFOLLOW (which opens
 * nothing: no FIFO end, no device's open), judged on that fd's fstat, and only that inode is
 * reopened for I/O: a FIFO, socket or device is refused without ever being opened, whenever
 * the agent swaps it in. */
/* ret_created (may be NULL): whether this call made the file (O_CREAT, nothing there). */
static int open_regular(int dfd, const char *leaf, int flags, mode_t mode, struct stat *st,
			bool *ret_created)
{
	if (ret_created)
		*ret_created = false;
	/* Nothing there: create it O_EXCL, so a FIFO the agent makes in between is not opened
	 * by an O_CREAT open; one that appears is looked at again (a few times: the agent
	 * may race, but the answer is then its own error). */
	for (unsigned tries = 0; tries < 3; tries++) {
		_cleanup_close_ int pfd = openat(dfd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		int fd;

		if (pfd < 0) {
			if (errno != ENOENT || !(flags & O_CREAT))
				return -errno;
			fd = openat(dfd, leaf,
				    flags | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
				    mode);
			if (fd < 0 && errno == EEXIST)
				continue;
			if (fd < 0)
				return -errno;
		} else {
			if (fstat(pfd, st) < 0)
				return -errno;
			if (!S_ISREG(st->st_mode))
				return S_ISDIR(st->st_mode)   ? -EISDIR
				       : S_ISLNK(st->st_mode) ? -ELOOP /* what O_NOFOLLOW says */
							      : -EINVAL;
			if ((flags & O_ACCMODE) != O_RDONLY) {
				int r = sticky_refuses(dfd, st);
				if (r < 0)
					return r;
			}
			fd = reopen_leaf(pfd, dfd, leaf, flags & ~O_CREAT);
			if (fd < 0)
				return fd;
		}
		if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
			int r = S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
			close(fd);
			return r;
		}
		if (ret_created)
			*ret_created = pfd < 0;
		return fd;
	}
	return -EEXIST;
}

static int read_leaf(int dfd, const char *leaf, uint64_t offset, uint64_t limit, bool prompt,
		     cJSON *o)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ uint8_t *buf = NULL;
	_cleanup_free_ char *b64 = NULL;
	struct stat st;
	ssize_t n;

	fd = open_regular(dfd, leaf, O_RDONLY, 0, &st, NULL);
	if (fd < 0)
		return fd;
	/* a prompt file that is a hard link could be anyone's file planted by name */
	if (prompt && st.st_nlink > 1)
		return -EPERM;
	if (limit > PROTO_MAX_FILE)
		limit = PROTO_MAX_FILE;
	buf = malloc(limit ? limit : 1);
	if (!buf)
		return -ENOMEM;
	/* The file may change while it is read (a log being appended): a size taken before the
	 * read says nothing about where the read ended. eof means a pread returned 0 (the end
	 * of the file at that moment), or the piece reaches the size measured after the read;
	 * so eof is false only when the whole piece was read and more bytes were there after. */
	for (n = 0; (uint64_t)n < limit;) {
		ssize_t k = pread(fd, buf + n, limit - (uint64_t)n, (off_t)(offset + (uint64_t)n));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		n += k;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	b64 = proto_base64_encode(buf, (size_t)n);
	if (!b64)
		return -ENOMEM;
	cJSON_AddStringToObject(o, "data", b64);
	cJSON_AddNumberToObject(o, "size", (double)st.st_size);
	cJSON_AddNumberToObject(o, "offset", (double)offset);
	cJSON_AddNumberToObject(o, "length", (double)n);
	cJSON_AddBoolToObject(o, "eof",
			      (uint64_t)n < limit || (uint64_t)n + offset >= (uint64_t)st.st_size);
	return 0;
}

static int pwrite_all(int fd, const uint8_t *data, size_t len, int64_t offset)
{
	while (len > 0) {
		ssize_t k = pwrite(fd, data, len, (off_t)offset);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		data += k;
		len -= (size_t)k;
		offset += k;
	}
	return 0;
}

/* Room for the bytes about to be written at [offset, offset + len), before one is: any
 * agent can fill a file system others write (/workspaces, the volume), and the write over
 * the old bytes then failed with ENOSPC only where the file had to grow (or fill a hole),
 * leaving the old bytes before that point overwritten by the new ones and the tail lost,
 * with an answer that said only "No space left on device" (red team). FALLOC_FL_KEEP_SIZE
 * allocates holes and blocks past the end without changing the size, so a full file
 * system (or quota) refuses here, nothing written. Where the file system cannot
 * (EOPNOTSUPP, a copy-on-write one may still fail later) the write goes ahead as before.
 * A range past the agents' file size bound is refused here too: the write stopped at the
 * bound with EFBIG after writing the bytes below it. */
static int reserve_range(int fd, int64_t offset, size_t len)
{
	if ((uint64_t)offset + len > (uint64_t)SPAWN_FSIZE_DEFAULT)
		return -EFBIG;
	if (len == 0 || fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)len) == 0)
		return 0;
	return errno == EOPNOTSUPP || errno == ENOSYS ? 0 : -errno;
}

/* The answer to a write or an edit that failed: whether the file may have changed (the
 * failure came after the first pwrite was issued) or is as it was. -EINVAL with err
 * filled, as the request parsers answer. */
static int write_error(enum proto_op op, int r, bool begun, struct proto_error *err)
{
	err->code = proto_err_from_errno(r);
	snprintf(err->message, sizeof(err->message), "%s: %s%s", proto_op_name(op), strerror(-r),
		 begun ? "; the file may hold part of the new bytes" : ": nothing written");
	return -EINVAL;
}

/* Replacing a file's content writes the new bytes over the old, then cuts the rest: the
 * helper may be killed at any point (a policy apply's stop, the timeout, the agent), and a
 * file truncated first was left empty, its old content gone and the new never written
 * (red team), while the answer said to retry. Cut off mid-way it now holds the old content
 * with a prefix of the new one, and the answer says the operation may have been partly
 * done (fsop_interrupted). */
/* offset < 0: replace the content; else write at offset, the rest of the file kept */
/* *ret_untouched: on failure, whether nothing was changed (nothing made, nothing written) */
static int write_leaf(int dfd, const char *leaf, const uint8_t *data, size_t len, int64_t offset,
		      bool *ret_untouched, struct proto_error *err)
{
	_cleanup_close_ int fd = -1;
	struct stat st, now;
	bool created;
	int r;

	*ret_untouched = true;
	fd = open_regular(dfd, leaf, O_WRONLY | O_CREAT, 0666, &st, &created);
	if (fd < 0)
		return fd;
	r = reserve_range(fd, offset < 0 ? 0 : offset, len);
	if (r < 0) {
		/* "nothing written": nor an empty file left where there was none (a full file
		 * system still has inodes). Only the file made here, if the name still holds it
		 * (this helper is the agent: it may remove nothing the agent could not). */
		if (created && fstatat(dfd, leaf, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now.st_dev == st.st_dev && now.st_ino == st.st_ino)
			(void)unlinkat(dfd, leaf, 0);
		else
			*ret_untouched = !created;
		return write_error(PROTO_OP_FS_WRITE, r, false, err);
	}
	*ret_untouched = false;
	r = pwrite_all(fd, data, len, offset < 0 ? 0 : offset);
	if (r == 0 && offset < 0 && ftruncate(fd, (off_t)len) < 0)
		r = -errno;
	return r < 0 ? write_error(PROTO_OP_FS_WRITE, r, true, err) : 0;
}

/* fs.remove {recursive: true}: empty the directory dfd and everything beneath it, as the
 * agent, fd-based: every entry is looked at with AT_SYMLINK_NOFOLLOW and every directory
 * opened O_NOFOLLOW beneath its parent's fd, so a symlink is removed, never followed (a
 * directory swapped for a symlink mid-walk fails the open). Mount points are not crossed
 * (-EXDEV); depth and entries are bounded (-ELOOP, -E2BIG). */
#define REMOVE_DEPTH_MAX 256
#define REMOVE_ENTRIES_MAX 1000000u

static int remove_tree(int dfd, dev_t dev, unsigned depth, uint64_t *count)
{
	bool again = true;
	int r = 0;

	if (depth >= REMOVE_DEPTH_MAX)
		return -ELOOP;
	/* readdir while unlinking may skip entries: pass again until a pass removes nothing */
	while (again && r >= 0) {
		int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
		struct dirent *de;
		DIR *d;

		again = false;
		if (fd < 0)
			return -errno;
		d = fdopendir(fd);
		if (!d) {
			close(fd);
			return -errno;
		}
		rewinddir(d);
		while (r >= 0 && (de = readdir(d))) {
			struct stat st;
			int mnt;
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (++*count > REMOVE_ENTRIES_MAX) {
				r = -E2BIG;
				break;
			}
			r = statx_node(dfd, de->d_name, AT_SYMLINK_NOFOLLOW, &st, &mnt);
			if (r < 0) {
				r = r == -ENOENT ? 0 : r;
				continue;
			}
			if (S_ISDIR(st.st_mode)) {
				int sub;
				/* A mount root, a bind mount of the same file system included
				 * (st_dev alone missed it: red team); st_dev where the kernel
				 * does not say. */
				if (mnt == 1 || st.st_dev != dev) {
					r = -EXDEV;
					break;
				}
				sub = openat(dfd, de->d_name,
					     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub < 0) {
					r = -errno;
					break;
				}
				r = remove_tree(sub, dev, depth + 1, count);
				close(sub);
				if (r >= 0 && unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0)
					r = -errno;
			} else if (unlinkat(dfd, de->d_name, 0) < 0)
				r = -errno;
			again = true;
		}
		closedir(d);
	}
	return r;
}

static const char *type_name(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

/* remove_tree stopped at one of its bounds (-ELOOP depth, -E2BIG entries, -EXDEV a mount
 * point): say which, and that what it reached before is gone (strerror said "Symbolic
 * link loop" for the depth). -EINVAL with err filled, as the request parsers answer. */
static int remove_bound_error(int r, struct proto_error *err)
{
	char why[80];

	if (r == -ELOOP)
		snprintf(why, sizeof(why), "deeper than %d levels", REMOVE_DEPTH_MAX);
	else if (r == -E2BIG)
		snprintf(why, sizeof(why), "more than %u entries", REMOVE_ENTRIES_MAX);
	else
		snprintf(why, sizeof(why), "a mount point inside (not crossed)");
	err->code = r == -E2BIG ? PROTO_E_TOO_LARGE : PROTO_E_DENIED;
	snprintf(err->message, sizeof(err->message),
		 "fs.remove: the tree is %s: stopped there, what was reached before is removed; "
		 "remove the rest with a command",
		 why);
	return -EINVAL;
}

/* A path that ends in '/' ("a/f/") names a directory only (POSIX path resolution; open(2),
 * stat(2), unlink(2), rename(2) say ENOTDIR for anything else there). open_parent drops the
 * slash from the leaf, so "f/" read, wrote, removed or moved the file f (red team). */
static bool names_dir_only(const char *path)
{
	size_t n = strlen(path);

	return n > 0 && path[n - 1] == '/';
}

/* For a leaf named with a trailing '/', before the operation acts: ENOTDIR where it is no
 * directory (a file, a symlink, which is not followed, a FIFO); EISDIR where it is one and
 * the operation works on a file (read, edit, write), or where nothing is there and a write
 * would make a file (open(2) with O_CREAT says so, and makes nothing). fs.mkdir is the
 * kernel's already ("d/" makes d; "f/" over a file is EEXIST). What acts by name after this
 * look keeps to a directory itself, so a leaf the agent swaps meanwhile gains it nothing:
 * fs.list opens O_DIRECTORY, fs.stat and fs.remove judge their own look at it (and
 * unlinkat's AT_REMOVEDIR refuses a file swapped in after that), fs.move hands the slash to
 * renameat (ENOTDIR for a source that is no directory, the kernel's check). */
static int check_dir_only(enum proto_op op, int dfd, const char *leaf)
{
	bool on_file = op == PROTO_OP_FS_READ || op == PROTO_OP_FS_READ_PROMPT ||
		       op == PROTO_OP_FS_EDIT || op == PROTO_OP_FS_WRITE;
	struct stat st;

	if (op == PROTO_OP_FS_MKDIR)
		return 0;
	if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT && op == PROTO_OP_FS_WRITE ? -EISDIR : -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return on_file ? -EISDIR : 0;
}

static int do_op(enum proto_op op, cJSON *req, cJSON *o, struct proto_error *err)
{
	const char *path = NULL;
	char leaf[256];
	_cleanup_close_ int dfd = -1;
	size_t made = SIZE_MAX;		       /* mkdir_parents' */
	_cleanup_free_ uint8_t *wbytes = NULL; /* fs.write's, read before anything is made */
	size_t wlen = 0;
	int64_t woffset = -1;
	bool dir_only;
	int r;

	if (proto_get_string(req, "path", PROTO_MAX_PATH, &path, err) < 0 || !*path)
		return -EINVAL;
	dir_only = names_dir_only(path);
	if (op == PROTO_OP_FS_WRITE) {
		const char *data = NULL;
		uint64_t offset = 0;
		if (proto_get_string(req, "data", PROTO_MAX_STRING, &data, err) < 0)
			return -EINVAL;
		/* offset: a later piece of a large file, written there without truncating;
		 * without it the file is replaced by data */
		r = proto_get_u64(req, "offset", UINT64_C(1) << 52, &offset, err);
		if (r < 0 && r != -ENOENT)
			return r;
		if (r == 0)
			woffset = (int64_t)offset;
		r = proto_base64_decode(data, strlen(data), &wbytes, &wlen);
		if (r < 0)
			return r;
	}
	if (op == PROTO_OP_FS_WRITE || op == PROTO_OP_FS_MKDIR) {
		bool parents = true;
		r = proto_get_bool(req, "parents", &parents, err);
		if (r < 0 && r != -ENOENT)
			return r;
		/* a write to "a/f/" makes no file, nor the directories above it */
		if (parents && !(op == PROTO_OP_FS_WRITE && dir_only)) {
			r = mkdir_parents(path, &made);
			if (r < 0)
				return r;
		}
	}
	dfd = open_parent(path, leaf);
	if (dfd < 0) {
		remove_made_parents(path, made);
		return dfd;
	}
	r = dir_only ? check_dir_only(op, dfd, leaf) : 0;
	if (r < 0)
		return r;

	switch (op) {
	case PROTO_OP_FS_READ:
	case PROTO_OP_FS_READ_PROMPT: {
		/* one answer carries at most PROTO_MAX_FILE_CHUNK bytes (its base64 is one JSON
		 * string); a reader pages on with offset until eof */
		uint64_t max = PROTO_MAX_FILE_CHUNK;
		uint64_t offset = 0, limit = max;
		/* a bad offset or limit is an error, never the default: "offset": -1 read
		 * from 0. A limit over the maximum is the maximum. */
		r = proto_get_u64(req, "offset", UINT64_C(1) << 52, &offset, err);
		if (r < 0 && r != -ENOENT)
			return r;
		r = proto_get_u64(req, "limit", UINT64_C(1) << 53, &limit, err);
		if (r < 0 && r != -ENOENT)
			return r;
		/* 0 read nothing and said eof false: a reader paging on by length asked again
		 * for ever (red team) */
		if (r == 0 && limit == 0) {
			err->code = PROTO_E_BAD_REQUEST;
			snprintf(err->message, sizeof(err->message), "\"limit\" must be 1 or more");
			return -EINVAL;
		}
		return read_leaf(dfd, leaf, offset, limit < max ? limit : max,
				 op == PROTO_OP_FS_READ_PROMPT, o);
	}
	case PROTO_OP_FS_WRITE: {
		bool untouched;
		r = write_leaf(dfd, leaf, wbytes, wlen, woffset, &untouched, err);
		if (r == 0)
			cJSON_AddNumberToObject(o, "length", (double)wlen);
		else if (untouched)
			remove_made_parents(path, made);
		return r;
	}
	case PROTO_OP_FS_EDIT: {
		const char *old = NULL, *new = NULL;
		_cleanup_free_ char *content = NULL, *out = NULL;
		_cleanup_close_ int fd = -1;
		size_t len = 0, ol, nl;
		char *hit, *again;
		struct stat st;
		if (proto_get_string(req, "old", PROTO_MAX_STRING, &old, err) < 0 ||
		    proto_get_string(req, "new", PROTO_MAX_STRING, &new, err) < 0 || !*old)
			return -EINVAL;
		fd = open_regular(dfd, leaf, O_RDWR, 0, &st, NULL);
		if (fd < 0)
			return fd;
		r = fd_read_all(fd, PROTO_MAX_FILE, &content, &len);
		if (r < 0)
			return r;
		ol = strlen(old), nl = strlen(new);
		hit = memmem(content, len, old, ol);
		if (!hit)
			return -ENOENT;
		again = memmem(hit + 1, len - (size_t)(hit + 1 - content), old, ol);
		if (again)
			return -ENOTUNIQ;
		out = malloc(len - ol + nl + 1);
		if (!out)
			return -ENOMEM;
		memcpy(out, content, (size_t)(hit - content));
		memcpy(out + (hit - content), new, nl);
		memcpy(out + (hit - content) + nl, hit + ol, len - (size_t)(hit - content) - ol);
		/* From the first byte that changes, then cut what is left over (write_leaf),
		 * once there is room for it all (reserve_range). */
		r = reserve_range(fd, hit - content, len - ol + nl - (size_t)(hit - content));
		if (r < 0)
			return write_error(op, r, false, err);
		r = pwrite_all(fd, (const uint8_t *)out + (hit - content),
			       len - ol + nl - (size_t)(hit - content), hit - content);
		if (r == 0 && nl < ol && ftruncate(fd, (off_t)(len - ol + nl)) < 0)
			r = -errno;
		if (r < 0)
			return write_error(op, r, true, err);
		cJSON_AddNumberToObject(o, "length", (double)(len - ol + nl));
		return 0;
	}
	case PROTO_OP_FS_LIST: {
		_cleanup_close_ int fd = -1;
		DIR *d;
		struct dirent *de;
		cJSON *entries;
		unsigned n = 0;
		uint64_t skip = 0, seen = 0;
		size_t bytes = 0;
		/* offset: entries to pass over, from a `next` an earlier answer gave */
		r = proto_get_u64(req, "offset", UINT32_MAX, &skip, err);
		if (r < 0 && r != -ENOENT)
			return r;
		fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		r = refuse_procfs(fd);
		if (r < 0)
			return r;
		d = fdopendir(fd);
		if (!d)
			return -errno;
		fd = -1;
		entries = cJSON_AddArrayToObject(o, "entries");
		while ((de = readdir(d))) {
			cJSON *e;
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (seen++ < skip)
				continue;
			/* an answer must fit one message (PROTO_MAX_MESSAGE): names counted at
			 * their worst escaped size, half the message at most */
			bytes += strlen(de->d_name) * 6 + 32;
			if (++n > PROTO_MAX_LIST || bytes > PROTO_MAX_MESSAGE / 2) {
				cJSON_AddBoolToObject(o, "truncated", true);
				cJSON_AddNumberToObject(o, "next", (double)(skip + n - 1));
				break;
			}
			e = cJSON_CreateObject();
			if (proto_utf8_valid(de->d_name, strlen(de->d_name)))
				cJSON_AddStringToObject(e, "name", de->d_name);
			else {
				/* JSON carries UTF-8 only: any other name goes C-escaped */
				char esc[NAME_MAX * 4 + 1];

				escape_c(de->d_name, strlen(de->d_name), esc, sizeof(esc));
				cJSON_AddStringToObject(e, "name", esc);
				cJSON_AddBoolToObject(e, "escaped", true);
			}
			cJSON_AddStringToObject(e, "type",
						de->d_type == DT_REG   ? "file"
						: de->d_type == DT_DIR ? "dir"
						: de->d_type == DT_LNK ? "symlink"
								       : "other");
			cJSON_AddItemToArray(entries, e);
		}
		closedir(d);
		return 0;
	}
	case PROTO_OP_FS_STAT: {
		struct stat st;
		if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		if (dir_only && !S_ISDIR(st.st_mode))
			return -ENOTDIR;
		cJSON_AddStringToObject(o, "type", type_name(st.st_mode));
		cJSON_AddNumberToObject(o, "size", (double)st.st_size);
		cJSON_AddNumberToObject(o, "mode", st.st_mode & 07777);
		cJSON_AddNumberToObject(o, "uid", st.st_uid);
		cJSON_AddNumberToObject(o, "gid", st.st_gid);
		cJSON_AddNumberToObject(o, "mtime", (double)st.st_mtime);
		return 0;
	}
	case PROTO_OP_FS_MKDIR: {
		struct stat st;
		if (mkdirat(dfd, leaf, 0777) == 0)
			return 0;
		if (errno != EEXIST) {
			r = -errno;
			remove_made_parents(path, made);
			return r;
		}
		/* There already: ok for a directory only (a file or a symlink there answered
		 * ok, and a later write through the path failed; red team) */
		if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		return S_ISDIR(st.st_mode) ? 0 : -EEXIST;
	}
	case PROTO_OP_FS_REMOVE: {
		cJSON *rec = cJSON_GetObjectItemCaseSensitive(req, "recursive");
		uint64_t count = 0;
		struct stat st;
		int mnt;
		r = statx_node(dfd, leaf, AT_SYMLINK_NOFOLLOW, &st, &mnt);
		if (r < 0)
			return r;
		if (dir_only && !S_ISDIR(st.st_mode))
			return -ENOTDIR;
		if (S_ISDIR(st.st_mode) && cJSON_IsTrue(rec)) {
			/* The directory named is a mount point itself: not emptied either. */
			if (mnt == 1) {
				err->code = PROTO_E_DENIED;
				snprintf(err->message, sizeof(err->message),
					 "fs.remove: the directory is a mount point: nothing "
					 "removed");
				return -EINVAL;
			}
			_cleanup_close_ int sub =
				openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				return -errno;
			/* a procfs named as the leaf (its parent passed open_parent's check):
			 * nothing in it is listed or stat'ed, as for fs.list */
			r = refuse_procfs(sub);
			if (r < 0)
				return r;
			if (fstat(sub, &st) < 0)
				return -errno;
			r = remove_tree(sub, st.st_dev, 0, &count);
			if (r == -ELOOP || r == -E2BIG || r == -EXDEV)
				return remove_bound_error(r, err);
			if (r < 0)
				return r;
		}
		if (unlinkat(dfd, leaf, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
			return -errno;
		cJSON_AddNumberToObject(o, "removed", (double)count + 1);
		return 0;
	}
	case PROTO_OP_FS_MOVE: {
		const char *to = NULL;
		char leaf2[256], from_name[257], to_name[257];
		_cleanup_close_ int dfd2 = -1;
		if (proto_get_string(req, "to", PROTO_MAX_PATH, &to, err) < 0 || !*to)
			return -EINVAL;
		dfd2 = open_parent(to, leaf2);
		if (dfd2 < 0)
			return dfd2;
		/* the slashes as given, one each: renameat refuses a source that is no
		 * directory (a symlink included, never followed) where either has one */
		snprintf(from_name, sizeof(from_name), "%s%s", leaf, dir_only ? "/" : "");
		snprintf(to_name, sizeof(to_name), "%s%s", leaf2, names_dir_only(to) ? "/" : "");
		return renameat(dfd, from_name, dfd2, to_name) < 0 ? -errno : 0;
	}
	default:
		return -EOPNOTSUPP;
	}
}

/* The bounds the agent's own commands have (spawn.c): no file past SPAWN_FSIZE_DEFAULT,
 * a write beyond it failing with EFBIG (answered too_large) rather than the signal, and no
 * core of this copy of the daemon's memory. Lowering a limit needs no privilege. */
static int agent_limits(void)
{
	const struct rlimit fsize = {SPAWN_FSIZE_DEFAULT, SPAWN_FSIZE_DEFAULT}, core = {0, 0};

	if (setrlimit(RLIMIT_FSIZE, &fsize) < 0 || setrlimit(RLIMIT_CORE, &core) < 0 ||
	    signal(SIGXFSZ, SIG_IGN) == SIG_ERR)
		return -errno;
	return 0;
}

/* /dev/null on fds 0-2, in place of pistisd's stdin, stdout and stderr (its log: a file,
 * a pipe to a supervisor, an operator's terminal), which the helper held as the agent
 * (red team): not the agent's to hold, reachable or not. Opened as the spawn core opens
 * its own (no link followed, no FIFO waited on), and used only if it is the null device. */
static int stdio_to_null(void)
{
	_cleanup_close_ int fd = fd_open_null(O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return fd;
	for (int i = 0; i < 3; i++)
		if (fd != i && dup2(fd, i) < 0)
			return -errno;
	if (fd <= 2)
		(void)TAKE_FD(fd); /* it landed on a closed one of 0-2: kept there */
	return 0;
}

_noreturn_ static void helper(int out_fd, int share_fd, const struct proto_request *req,
			      const struct serve_agent *a, pid_t parent)
{
	struct proto_error err = {0};
	gid_t groups[2] = {a->gid, USERS_SANDBOX_GID};
	cJSON *o = cJSON_CreateObject();
	char *answer;
	int r;

	serve_forget_secrets();
	/* Only the answer pipe (fd 3) and, until the agent's uid, the apply share (fd 4): not
	 * the relay's socket, not other commands' pipes, not the epoll set (the kernel keeps
	 * them from the agent, non-dumpable; do not rely on it). */
	if (share_fd == 3 && (share_fd = fcntl(3, F_DUPFD_CLOEXEC, 5)) < 0)
		_exit(1);
	if (out_fd != 3) {
		if (dup3(out_fd, 3, O_CLOEXEC) < 0)
			_exit(1);
		out_fd = 3;
	}
	if (share_fd >= 0 && share_fd != 4) {
		if (dup3(share_fd, 4, O_CLOEXEC) < 0)
			_exit(1);
		share_fd = 4;
	}
	(void)close_all_fds_from(share_fd >= 0 ? 5 : 4);
	r = stdio_to_null();
	if (r < 0) {
		char msg[120];
		snprintf(msg, sizeof(msg), "cannot put /dev/null (the null device) on fds 0-2: %s",
			 strerror(-r));
		answer = proto_error_build(req->id, PROTO_E_INTERNAL, msg);
		goto out;
	}
	/* setgroups before setresgid before setresuid: after setresuid we lack CAP_SETGID */
	r = privs_check_agent_ids(a->uid, a->gid, groups, 2);
	if (r >= 0)
		r = privs_setgroups(groups, 2);
	if (r >= 0)
		r = privs_setresgid(a->gid);
	if (r >= 0)
		r = privs_setresuid(a->uid);
	/* Now an apply's stop of the agent's processes, which finds them by uid, finds this
	 * one: the apply may have /data/pistis (fsops_request). */
	if (r >= 0)
		share_fd = safe_close(share_fd);
	/* privs_setresuid left this copy of the daemon's memory not dumpable, whatever
	 * fs.suid_dumpable says (with 1 the agent could otherwise ptrace-attach to it for as
	 * long as the operation runs), and out of the agent's reach while it changed. */
	if (r >= 0)
		r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? -errno : 0;
	/* This copy of the daemon's memory must not outlive the daemon: the agent can stop
	 * it (its uid), and only pistisd's timeout would end it. Set after the id change,
	 * which clears it; a parent already gone is caught by the check after. */
	if (r >= 0)
		r = prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ? -errno : 0;
	if (r >= 0 && getppid() != parent)
		_exit(1);
	if (r < 0) {
		answer = proto_error_build(req->id, PROTO_E_INTERNAL, "cannot become the agent");
		goto out;
	}
	umask(0007); /* the spawn core's default for agent files */
	r = agent_limits();
	if (r < 0) {
		char msg[120];
		snprintf(msg, sizeof(msg),
			 "cannot set the agent's limits (file size, core, SIGXFSZ): %s",
			 strerror(-r));
		answer = proto_error_build(req->id, PROTO_E_INTERNAL, msg);
		goto out;
	}
	r = do_op(req->op, req->root, o, &err);
	if (r < 0) {
		char msg[200];
		if (err.code != PROTO_E_OK && r == -EINVAL && err.message[0])
			snprintf(msg, sizeof(msg), "%s", err.message);
		else
			snprintf(msg, sizeof(msg), "%s: %s", proto_op_name(req->op), strerror(-r));
		answer = proto_error_build(
			req->id, r == -EINVAL && err.code ? err.code : proto_err_from_errno(r),
			msg);
		cJSON_Delete(o);
	} else
		answer = proto_ok_build(req->id, o);
out:
	/* exit 0 or FSOP_EXIT_REFUSED says "the answer is whole" (and which it is, for the
	 * audit line): the parent forwards nothing else */
	_exit(answer && loop_write(out_fd, answer, strlen(answer)) == 0
		      ? (r < 0 ? FSOP_EXIT_REFUSED : 0)
		      : 1);
}

static void fsop_free(struct fsop *f)
{
	serve_unwatch(&f->w);
	safe_close(f->w.fd);
	lws_sul_cancel(&f->timeout);
	if (f->pid > 0) {
		(void)kill(f->pid, SIGKILL);
		(void)waitpid(f->pid, NULL, 0);
	}
	{
		unsigned *n = agent_count(f->uid, false);
		if (n && *n && !--*n)
			session_fsops_ended(f->uid);
	}
	for (unsigned i = 0; i < FSOP_MAX_RUNNING; i++)
		if (live[i] == f)
			live[i] = NULL;
	free(f->buf);
	free(f->audit);
	free(f);
	running--;
}

/* The request, C-escaped (an agent's path may hold a newline or a '"'), for the audit line
 * logged when the operation ends, after its result: each path at most AUDIT_PATH_MAX
 * escaped bytes, cut with a mark (escape_c_field), so both a long source and its
 * destination fit the log's line and neither hides the other. NULL when out of memory:
 * the line then says less. */
#define AUDIT_PATH_MAX 700

static char *audit_text(const struct proto_request *req, const char *agent, uid_t uid)
{
	const char *path = NULL, *to = NULL;
	struct proto_error err = {0};
	_cleanup_free_ char *ea = NULL, *ep = NULL, *et = NULL;
	char *out = NULL;

	/* Any string, over PROTO_MAX_PATH too (refused, it must still be named: it was
	 * logged as path=""; red team): escape_c_field cuts it to AUDIT_PATH_MAX, marked. */
	(void)proto_get_string(req->root, "path", PROTO_MAX_STRING, &path, &err);
	(void)proto_get_string(req->root, "to", PROTO_MAX_STRING, &to, &err);
	ea = escape_c_dup(agent);
	ep = escape_c_field(path ? path : "", AUDIT_PATH_MAX);
	if (to)
		et = escape_c_field(to, AUDIT_PATH_MAX);
	if (ea && ep && (!to || et) &&
	    asprintf(&out, "id=%s agent=\"%s\" uid=%u path=%s%s%s", req->id, ea, (unsigned)uid, ep,
		     to ? " to=" : "", to ? et : "") < 0)
		out = NULL;
	return out;
}

/* The error code of a whole error answer ({"id":…,"ok":false,"error":{"code":…}}). */
static const char *answer_code(const char *answer, char *buf, size_t size)
{
	cJSON *o = cJSON_Parse(answer);
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(o, "error"), "code");

	snprintf(buf, size, "%s", cJSON_IsString(c) ? c->valuestring : "error");
	cJSON_Delete(o);
	return buf;
}

/* f->audit is escaped already (audit_text): %-s, so the log does not escape it again. */
static void audit(const struct fsop *f, const char *result)
{
	log_notice("audit %s result=%s %-s", f->op_name, result, f->audit ? f->audit : "");
}

/* What an answer to an operation killed before it answered adds: one that changes files
 * may have done part of its work (a write a prefix of its bytes, a recursive remove some
 * of its entries), so "retry" alone would mislead. */
static const char *fsop_interrupted(const struct fsop *f)
{
	return f->changes ? "; it may have been partly done" : "";
}

static void fsop_timeout(lws_sorted_usec_list_t *sul)
{
	struct fsop *f = lws_container_of(sul, struct fsop, timeout);
	uint64_t now = spawn_now_ns();

	if (now < f->due_ns) { /* lws' clock counted a freeze, in which the helper did not run */
		lws_sul_schedule(serve_lws_context(), 0, sul, fsop_timeout,
				 (lws_usec_t)((f->due_ns - now) / 1000u) + 1);
		return;
	}
	audit(f, "timeout");
	serve_send_error(f->id, PROTO_E_LIMIT, "file operation timed out%s", fsop_interrupted(f));
	fsop_free(f);
}

static void on_answer(struct watch *w, uint32_t events)
{
	struct fsop *f = lws_container_of(w, struct fsop, w);
	char tmp[65536];
	ssize_t n = read(w->fd, tmp, sizeof(tmp));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		if (f->len + (size_t)n > FSOP_MAX_ANSWER)
			f->overflow = true;
		else {
			char *nb = realloc(f->buf, f->len + (size_t)n + 1);
			if (!nb)
				f->overflow = true;
			else {
				f->buf = nb;
				memcpy(f->buf + f->len, tmp, (size_t)n);
				f->len += (size_t)n;
				f->buf[f->len] = 0;
			}
		}
		return;
	}
	/* EOF: the helper exited (or died). It runs as the agent, so the agent may kill it
	 * in the middle of its answer: only a helper that exited 0 wrote a whole one, and
	 * half a message would be bad JSON that the relay drops, leaving the client waiting. */
	int status = 0;
	char code[32];
	if (waitpid(f->pid, &status, 0) < 0)
		status = -1;
	f->pid = 0;
	if (WIFSIGNALED(status)) {
		audit(f, "killed");
		serve_send_error(f->id, PROTO_E_INTERNAL,
				 "file operation helper killed by signal %d before it answered%s",
				 WTERMSIG(status), fsop_interrupted(f));
	} else if (!WIFEXITED(status) ||
		   (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != FSOP_EXIT_REFUSED)) {
		audit(f, "internal");
		serve_send_error(f->id, PROTO_E_INTERNAL,
				 "file operation helper could not write its answer");
	} else if (f->overflow || !f->len) {
		audit(f, "internal");
		serve_send_error(f->id, PROTO_E_INTERNAL, "file operation helper failed");
	} else {
		audit(f, WEXITSTATUS(status) == 0 ? "ok" : answer_code(f->buf, code, sizeof(code)));
		serve_send_json(TAKE_PTR(f->buf));
	}
	fsop_free(f);
}

/* A file operation refused before its helper: the answer, and its audit line within the
 * refusals' budget (serve_audit_refused_allowed), the agent and path as the request gave
 * them, escaped. */
static void fs_refuse(const struct proto_request *req, const char *agent, enum proto_err code,
		      const char *fmt, ...) _printf_(4, 5);
static void fs_refuse(const struct proto_request *req, const char *agent, enum proto_err code,
		      const char *fmt, ...)
{
	const cJSON *path = cJSON_GetObjectItemCaseSensitive(req->root, "path");
	char msg[256];
	va_list ap;
	bool audit;

	va_start(ap, fmt);
	audit = serve_refusev(req->id, code, msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (audit) {
		_cleanup_free_ char *ea = agent ? escape_c_field(agent, 64) : NULL;
		_cleanup_free_ char *ep =
			cJSON_IsString(path) ? escape_c_field(path->valuestring, AUDIT_PATH_MAX)
					     : NULL;

		log_notice(
			"audit refused op=%s id=\"%s\" code=%s agent=%-s message=\"%s\" path=%-s",
			proto_op_name(req->op), req->id, proto_err_name(code), ea ? ea : "?", msg,
			ep ? ep : "?");
	}
}

void fsops_request(const struct proto_request *req)
{
	struct proto_error err = {0};
	struct serve_agent a;
	const char *agent = NULL;
	_cleanup_close_ int share_fd = -1;
	struct fsop *f;
	int p[2], r;
	pid_t pid, parent;

	if (proto_get_string(req->root, "agent", PROTO_MAX_AGENT, &agent, &err) < 0 || !*agent)
		return fs_refuse(req, NULL, PROTO_E_BAD_REQUEST, "\"agent\" is required");
	if (held)
		return fs_refuse(req, agent, PROTO_E_UNAVAILABLE,
				 "a policy apply is tightening permissions; retry when it ends");
	if (running >= FSOP_MAX_RUNNING)
		return fs_refuse(req, agent, PROTO_E_LIMIT, "too many file operations at once");
	r = serve_resolve_agent(agent, &a);
	if (r < 0)
		return fs_refuse(req, agent, proto_err_from_errno(r), "agent: %s",
				 serve_resolve_error());
	{
		unsigned *n = agent_count(a.uid, false);
		if (n && *n >= FSOP_MAX_PER_AGENT)
			return fs_refuse(req, agent, PROTO_E_LIMIT,
					 "too many file operations of this agent at once");
	}
	/* Held by the helper until it has the agent's uid, as a command's start holds it: a
	 * policy apply (the command line's, or this serve's own) that holds /data/pistis stops
	 * every agent process it finds once it has it, so no helper may become the agent
	 * meanwhile and open a file the apply is about to take from it. */
	r = session_apply_share(&share_fd);
	if (r == -EWOULDBLOCK)
		return fs_refuse(req, agent, PROTO_E_UNAVAILABLE,
				 "a policy apply is running in this root (it holds %s); retry when "
				 "it ends",
				 POLICY_STATE_DIR);
	if (r < 0)
		return fs_refuse(req, agent, PROTO_E_INTERNAL, "cannot lock %s: %s",
				 POLICY_STATE_DIR, strerror(-r));
	f = calloc(1, sizeof(*f));
	if (!f || pipe2(p, O_CLOEXEC) < 0) {
		free(f);
		return serve_send_error(req->id, PROTO_E_INTERNAL, "%s", strerror(errno));
	}
	parent = getpid();
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		free(f);
		return serve_send_error(req->id, PROTO_E_INTERNAL, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		close(p[0]);
		helper(p[1], share_fd, req, &a, parent);
	}
	close(p[1]);
	share_fd = safe_close(share_fd);
	running++;
	(*agent_count(a.uid, true))++; /* a free slot exists: running < FSOP_MAX_RUNNING */
	for (unsigned i = 0; i < FSOP_MAX_RUNNING; i++)
		if (!live[i]) {
			live[i] = f;
			break;
		}
	f->uid = a.uid;
	f->pid = pid;
	f->op_name = proto_op_name(req->op);
	f->changes = req->op != PROTO_OP_FS_READ && req->op != PROTO_OP_FS_READ_PROMPT &&
		     req->op != PROTO_OP_FS_LIST && req->op != PROTO_OP_FS_STAT;
	f->audit = audit_text(req, agent, a.uid);
	snprintf(f->id, sizeof(f->id), "%s", req->id);
	(void)fd_set_nonblock(p[0], 1);
	f->w.fd = p[0];
	if (serve_watch(&f->w, p[0], EPOLLIN, on_answer) < 0) {
		serve_send_error(req->id, PROTO_E_INTERNAL, "epoll: %s", strerror(errno));
		fsop_free(f);
		return;
	}
	f->due_ns = spawn_now_ns() + (uint64_t)FSOP_TIMEOUT_US * 1000u;
	lws_sul_schedule(serve_lws_context(), 0, &f->timeout, fsop_timeout, FSOP_TIMEOUT_US);
}

void fsops_hold(bool hold)
{
	held = hold;
}

bool fsops_running_for(uid_t uid)
{
	unsigned *n = agent_count(uid, false);
	return n && *n;
}

/* A helper holds the fds it opened as the agent, and a rule tightened later does not revoke
 * them (a helper the agent SIGSTOPs after its open could write once the file is read-only):
 * kill every helper, SIGKILL and reaped before this returns. */
unsigned fsops_stop_all(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < FSOP_MAX_RUNNING; i++) {
		struct fsop *f = live[i];
		if (!f)
			continue;
		audit(f, "stopped");
		serve_send_error(f->id, PROTO_E_UNAVAILABLE,
				 "stopped: a policy apply is tightening permissions%s",
				 fsop_interrupted(f));
		fsop_free(f);
		n++;
	}
	return n;
}
