/* cgroup v2 plumbing for the spawn core (see cgroup.h and docs/spawn.md). */
#include "pistisd/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#include "lib/fd-util.h"
#include "lib/macro.h"
#include "lib/mono-clock.h"

/* pistis/ is 0711: agents cannot list which agents have cgroups. Each agent's directory
 * is root:<the agent's gid> 0710: only the agent itself may pass (and read its own
 * memory.max, cpu.stat by path); another agent cannot reach its cmd-* cgroups, whose
 * cgroup.procs (0644, kernfs) would list its pids and group them into commands, around
 * /proc's hidepid. */
#define BASE_MODE 0711
#define AGENT_MODE 0710

static int write_at(int dir_fd, const char *file, const char *s)
{
	_cleanup_close_ int fd = openat(dir_fd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -errno;
	return loop_write(fd, s, strlen(s));
}

/* cgroupfs and /proc files are read whole, and are nearly always a few bytes: into the
 * caller's buffer (size bytes, the text NUL-terminated), and only a longer one
 * (cgroup.procs of a big tree) is read again from the start, into *ret_big (malloc'd).
 * fd_read_all's 4 KiB start buffer was a fresh mmap + page fault + munmap (a TLB flush) in
 * musl's malloc, five to seven times per command. */
static int read_into(int fd, size_t max, char *buf, size_t size, char **ret_big)
{
	ssize_t n = loop_read(fd, buf, size - 1);

	*ret_big = NULL;
	if (n < 0)
		return (int)n;
	if ((size_t)n < size - 1) {
		buf[n] = '\0';
		return 0;
	}
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	return fd_read_all(fd, max, ret_big, NULL);
}

/* The file whole, malloc'd (the caller keeps or frees it). */
static int read_whole(int fd, size_t max, char **ret)
{
	char buf[1024];
	size_t len;
	int r = read_into(fd, max, buf, sizeof(buf), ret);

	if (r < 0 || *ret)
		return r;
	len = strlen(buf) + 1;
	*ret = malloc(len);
	if (!*ret)
		return -ENOMEM;
	memcpy(*ret, buf, len);
	return 0;
}

static int read_at_max(int dir_fd, const char *file, size_t max, char **ret)
{
	_cleanup_close_ int fd = openat(dir_fd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -errno;
	return read_whole(fd, max, ret);
}

static int read_at(int dir_fd, const char *file, char **ret)
{
	return read_at_max(dir_fd, file, 64 * 1024, ret);
}

/* A file that is a few bytes by nature (cgroup.type, cgroup.events, cgroup.controllers):
 * *ret points into buf, or at *ret_big (malloc'd, the caller frees it) where it is longer.
 * Nothing is allocated in the common case: a small malloc and free whose size class held
 * nothing else was a fresh mmap + page fault + munmap in musl's malloc (~25 µs on a guest
 * with shadow page tables), twice in every cgroup_init, so in every `pistisd run`. */
static int read_small_at(int dir_fd, const char *file, char *buf, size_t size, char **ret_big,
			 const char **ret)
{
	_cleanup_close_ int fd = openat(dir_fd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int r;

	*ret_big = NULL;
	if (fd < 0)
		return -errno;
	r = read_into(fd, 64 * 1024, buf, size, ret_big);
	if (r >= 0)
		*ret = *ret_big ? *ret_big : buf;
	return r;
}

/* "0::/some/path" from /proc/self/cgroup, the unified hierarchy's line. Parsed where it
 * was read (a stack buffer, like read_whole's; only a longer file is allocated). */
static int own_cgroup(char *buf, size_t size)
{
	_cleanup_close_ int fd = openat(AT_FDCWD, "/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *big = NULL;
	char text[2048], *s = text, *p, *e;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = loop_read(fd, text, sizeof(text) - 1);
	if (n < 0)
		return (int)n;
	text[n] = '\0';
	if ((size_t)n == sizeof(text) - 1) {
		int r;

		if (lseek(fd, 0, SEEK_SET) < 0)
			return -errno;
		r = fd_read_all(fd, 64 * 1024, &big, NULL);
		if (r < 0)
			return r;
		s = big;
	}
	for (p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, "0::", 3))
			continue;
		p += 3;
		e = strchrnul(p, '\n');
		if ((size_t)(e - p) >= size || *p != '/')
			return -ENAMETOOLONG;
		memcpy(buf, p, (size_t)(e - p));
		buf[e - p] = 0;
		return 0;
	}
	return -ENOENT;
}

/* Without reading mountinfo (tens of µs, more on hosts with many mounts): the usual
 * places of the cgroup2 mount, accepted only when the directory found there provably is
 * our own cgroup: a cgroup2 file system, and either our pid listed in its cgroup.procs,
 * or, for "/", the real root (which alone has no cgroup.events). Anything else (a
 * bind-mounted subtree, a foreign layout) is left to find_mount. */
static int open_own_fast(const char *own, char *ret, size_t size)
{
	static const char *const mounts[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
	char pid[16];
	int n = snprintf(pid, sizeof(pid), "%d", (int)getpid());

	for (size_t i = 0; i < ELEMENTSOF(mounts); i++) {
		_cleanup_close_ int fd = -1;
		_cleanup_free_ char *procs = NULL;
		struct statfs sf;
		bool mine = false;

		if ((size_t)snprintf(ret, size, "%s%s", mounts[i], strcmp(own, "/") ? own : "") >=
		    size)
			return -ENAMETOOLONG;
		fd = openat(AT_FDCWD, ret, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 || fstatfs(fd, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
			continue;
		if (!strcmp(own, "/") && faccessat(fd, "cgroup.events", F_OK, 0) < 0 &&
		    errno == ENOENT)
			return TAKE_FD(fd);
		if (read_at(fd, "cgroup.procs", &procs) < 0)
			continue;
		for (const char *p = procs; p && *p && !mine;
		     p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
			mine = !strncmp(p, pid, (size_t)n) && (p[n] == '\n' || !p[n]);
		if (mine)
			return TAKE_FD(fd);
	}
	return -ENOENT;
}

/* The cgroup2 mount whose root is a prefix of our cgroup path. mountinfo fields:
 * id parent maj:min root mountpoint opts... - fstype source superopts */
static int find_mount(const char *own, char *ret, size_t size)
{
	_cleanup_close_ int fd = openat(AT_FDCWD, "/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *s = NULL;
	char *save = NULL, *line;
	int r;

	if (fd < 0)
		return -errno;
	r = fd_read_all(fd, 4 * 1024 * 1024, &s, NULL);
	if (r < 0)
		return r;
	for (line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char root[256], mnt[256], fstype[32];
		const char *dash = strstr(line, " - ");
		size_t rl;

		if (!dash || sscanf(dash, " - %31s", fstype) != 1 || strcmp(fstype, "cgroup2"))
			continue;
		if (sscanf(line, "%*s %*s %*s %255s %255s", root, mnt) != 2)
			continue;
		if (strchr(mnt, '\\') || strchr(root, '\\')) /* octal escapes: not ours */
			continue;
		rl = strcmp(root, "/") ? strlen(root) : 0;
		if (strncmp(own, root, rl) || (own[rl] != '/' && own[rl] != 0))
			continue;
		if ((size_t)snprintf(ret, size, "%s%s", mnt, own + rl) >= size)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

bool cgroup_list_has(const char *list, const char *word)
{
	size_t l = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += l)
		if ((p == list || p[-1] == ' ') && (p[l] == ' ' || p[l] == '\n' || !p[l]))
			return true;
	return false;
}

static const struct {
	const char *name;
	unsigned flag;
} ctl[] = {{"memory", CGROUP_HAS_MEMORY}, {"pids", CGROUP_HAS_PIDS}, {"cpu", CGROUP_HAS_CPU}};

/* The CGROUP_HAS_* of the controllers a cgroup.controllers text lists. */
static unsigned controller_bits(const char *list)
{
	unsigned got = 0;

	for (size_t i = 0; i < ELEMENTSOF(ctl); i++)
		if (cgroup_list_has(list, ctl[i].name))
			got |= ctl[i].flag;
	return got;
}

/* Enable memory, pids and cpu in dir's subtree where available; those already in
 * cgroup.subtree_control are not written again (each write takes the cgroup lock and
 * rebuilds the subtree's state). Returns the CGROUP_HAS_* now enabled. */
static unsigned enable_controllers(int dir_fd, const char *available)
{
	_cleanup_free_ char *enabled = NULL;
	unsigned got = 0;
	bool any = false;

	for (size_t i = 0; i < ELEMENTSOF(ctl); i++)
		any = any || cgroup_list_has(available, ctl[i].name);
	/* None of ours available (a host that delegates none): nothing to read or write. */
	if (!any)
		return 0;
	if (read_at(dir_fd, "cgroup.subtree_control", &enabled) < 0)
		enabled = NULL;
	for (size_t i = 0; i < ELEMENTSOF(ctl); i++) {
		char tok[16];

		if (!cgroup_list_has(available, ctl[i].name))
			continue;
		if (enabled && cgroup_list_has(enabled, ctl[i].name)) {
			got |= ctl[i].flag;
			continue;
		}
		snprintf(tok, sizeof(tok), "+%s", ctl[i].name);
		if (write_at(dir_fd, "cgroup.subtree_control", tok) >= 0)
			got |= ctl[i].flag;
	}
	return got;
}

/* Whether controllers may be enabled for dir's children: the real root (no cgroup.type;
 * v2 lets it hold processes beside them), or a cgroup that holds no process. In one that
 * does, v2 refuses memory (EBUSY) but takes cpu and pids, the threaded controllers: the
 * cgroup turns "domain threaded", every cgroup beneath "domain invalid", and no process
 * may join one (seen on a pure cgroup v2 host: a pistisd run from a shell's cgroup failed
 * its command at "join cgroup: Not supported", serve could not move into pistis-self). */
static bool may_enable(int dir_fd)
{
	_cleanup_free_ char *procs = NULL;

	if (faccessat(dir_fd, "cgroup.type", F_OK, 0) < 0 && errno == ENOENT)
		return true;
	return read_at(dir_fd, "cgroup.procs", &procs) >= 0 && !procs[0];
}

int cgroup_domain(int dir_fd)
{
	char buf[64];
	_cleanup_free_ char *big = NULL;
	const char *type = NULL;
	int r = read_small_at(dir_fd, "cgroup.type", buf, sizeof(buf), &big, &type);

	if (r == -ENOENT)
		return 0; /* the root cgroup has none */
	if (r < 0)
		return r;
	return !strcmp(type, "domain\n") ? 0 : -EOPNOTSUPP;
}

int cgroup_init(struct cgroup_ctx *ctx)
{
	char own[256], path[512], list[1024];
	_cleanup_close_ int own_fd = -1, base_fd = -1;
	_cleanup_free_ char *avail = NULL;
	const char *text = NULL;
	unsigned features = 0;
	int r;

	ctx->base_fd = -1;
	ctx->features = 0;
	ctx->delegated = 0;
	r = own_cgroup(own, sizeof(own));
	if (r < 0)
		return r;
	own_fd = open_own_fast(own, path, sizeof(path));
	if (own_fd < 0) {
		r = find_mount(own, path, sizeof(path));
		if (r < 0)
			return r;
		own_fd = openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (own_fd < 0)
			return -errno;
	}
	/* Born (or moved by cgroup_make_room) in the leaf that holds the processes of the
	 * cgroup pistis manages: that cgroup is ours, so that a restarted serve, and a
	 * `pistisd run` that a container runtime's exec put beside PID 1, find the same
	 * pistis/ (its orphans, its slots' locks). */
	{
		size_t pl = strlen(path), ll = strlen(CGROUP_SELF_LEAF);

		if (pl > ll + 1 && path[pl - ll - 1] == '/' &&
		    !strcmp(path + pl - ll, CGROUP_SELF_LEAF)) {
			int up = openat(own_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

			if (up < 0)
				return -errno;
			safe_close(own_fd);
			own_fd = up;
			path[pl - ll - 1] = '\0';
		}
	}
	/* Our cgroup must be a domain: in a threaded one (or the root of a threaded subtree,
	 * "domain threaded") every cgroup made beneath is "domain invalid", which no process
	 * may join, and every command failed at "join cgroup: Not supported". No cgroup then:
	 * each command is an audit session (docs/spawn.md). */
	r = cgroup_domain(own_fd);
	if (r < 0)
		return r;
	/* Made once, then only opened (a mkdir that says EEXIST still takes kernfs' locks). */
	base_fd = openat(own_fd, "pistis", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (base_fd < 0 && errno == ENOENT) {
		if (mkdirat(own_fd, "pistis", BASE_MODE) < 0 && errno != EEXIST)
			return -errno;
		base_fd = openat(own_fd, "pistis", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	}
	if (base_fd < 0)
		return -errno;
	/* The same for a pistis/ someone made threaded since. */
	r = cgroup_domain(base_fd);
	if (r < 0)
		return r;
	/* Made 0755 by an older pistisd: from now on agents cannot list it. */
	struct stat bst;
	if (fstat(base_fd, &bst) == 0 && (bst.st_mode & 07777) != BASE_MODE)
		(void)fchmod(base_fd, BASE_MODE);
	if (faccessat(base_fd, "cgroup.kill", F_OK, 0) == 0)
		features |= CGROUP_HAS_KILL;
	/* Controllers must be enabled in every ancestor's subtree_control. Our own cgroup
	 * may hold processes (ourselves), which v2 forbids for a non-root cgroup with enabled
	 * controllers ("no internal processes"): then we run without limits, still with
	 * cgroup.kill, and enable none there (may_enable: not even the threaded ones it
	 * would take). docs/spawn.md has the layout an operator can give us instead. */
	r = read_small_at(own_fd, "cgroup.controllers", list, sizeof(list), &avail, &text);
	if (r >= 0) {
		ctx->delegated = controller_bits(text);
		/* nothing delegated (a hybrid host's v2 tree): not even cgroup.procs read */
		unsigned got =
			ctx->delegated && may_enable(own_fd) ? enable_controllers(own_fd, text) : 0;
		free(avail);
		avail = NULL;
		if (got && read_small_at(base_fd, "cgroup.controllers", list, sizeof(list), &avail,
					 &text) >= 0)
			features |= enable_controllers(base_fd, text);
	}
	ctx->base_fd = TAKE_FD(base_fd);
	ctx->features = features;
	snprintf(ctx->base_path, sizeof(ctx->base_path), "%s/pistis", path);
	return 0;
}

static int read_procs(int cgroup_fd, pid_t **ret, size_t *ret_n);

/* Every process listed in from's cgroup.procs written to to's, in rounds until from lists
 * none (a process may fork between a read and the writes; at most 8 rounds). How many
 * were moved, or -errno. */
static int move_procs(int from_fd, int to_fd)
{
	_cleanup_close_ int procs = openat(to_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	int moved = 0;

	if (procs < 0)
		return -errno;
	for (int round = 0; round < 8; round++) {
		_cleanup_free_ pid_t *pids = NULL;
		size_t n = 0;
		int r = read_procs(from_fd, &pids, &n);

		if (r < 0)
			return r;
		if (n == 0)
			return moved;
		for (size_t i = 0; i < n; i++) {
			char b[16];
			int l = snprintf(b, sizeof(b), "%d", (int)pids[i]);

			/* ESRCH: it ended since the read */
			if (write(procs, b, (size_t)l) == l)
				moved++;
			else if (errno != ESRCH)
				return -errno;
		}
	}
	return -EBUSY;
}

int cgroup_make_room(struct cgroup_ctx *ctx)
{
	_cleanup_close_ int own_fd = -1, leaf_fd = -1;
	_cleanup_free_ char *avail = NULL;
	unsigned got;
	int moved, r;

	if (ctx->base_fd < 0)
		return -ENODEV;
	if (!(ctx->delegated & ~ctx->features))
		return 0; /* all we were given is enabled, or nothing was given */
	own_fd = openat(ctx->base_fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (own_fd < 0)
		return -errno;
	if (mkdirat(own_fd, CGROUP_SELF_LEAF, BASE_MODE) < 0 && errno != EEXIST)
		return -errno;
	leaf_fd = openat(own_fd, CGROUP_SELF_LEAF, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (leaf_fd < 0)
		return -errno;
	moved = move_procs(own_fd, leaf_fd);
	if (moved < 0)
		return moved;
	r = read_at(own_fd, "cgroup.controllers", &avail);
	if (r < 0)
		return r;
	got = enable_controllers(own_fd, avail);
	free(avail);
	avail = NULL;
	if (got && read_at(ctx->base_fd, "cgroup.controllers", &avail) >= 0)
		ctx->features |= enable_controllers(ctx->base_fd, avail);
	return moved;
}

void cgroup_done(struct cgroup_ctx *ctx)
{
	ctx->base_fd = safe_close(ctx->base_fd);
}

bool cgroup_name_ok(const char *name)
{
	size_t l = strlen(name);

	if (l == 0 || l > 64 || name[0] == '.' || !strncmp(name, "cgroup.", 7))
		return false;
	for (size_t i = 0; i < l; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

bool cgroup_cmd_is_slot(const char *cmd)
{
	return !strncmp(cmd, CGROUP_SLOT_PREFIX, strlen(CGROUP_SLOT_PREFIX));
}

/* Command cgroups are 0711: an agent may read its own memory.max by path, but cannot open
 * the directory, so it cannot take the flock that says a pistisd owns it (and with it
 * hide a tree from cgroup_reap_orphans, or keep a slot from everyone). */
#define CMD_MODE 0711

/* The mark of a command cgroup this pistisd made and nobody has cgroup.kill'ed since:
 * only into such a cgroup is a child cloned directly (clone3 CLONE_INTO_CGROUP; see
 * cgroup_clone_ok). A cgroup made by anyone else, or by an older pistisd, has no mark. */
#define FRESH_XATTR "user.pistis.fresh"

static void mark_fresh(int dir_fd)
{
	(void)fsetxattr(dir_fd, FRESH_XATTR, "1", 1, 0);
}

/* 1 marked, 0 not (ENODATA: xattrs work here, the mark is absent), -errno. */
static int fresh_mark(int dir_fd)
{
	char v;

	if (fgetxattr(dir_fd, FRESH_XATTR, &v, 1) < 0)
		return errno == ENODATA ? 0 : -errno;
	return v == '1';
}

bool cgroup_clone_ok(int dir_fd)
{
	return fresh_mark(dir_fd) == 1;
}

/* A claimed, empty slot that was cgroup.kill'ed (xattrs work here, the mark is gone)
 * while children are cloned into their cgroups: without the renewal every later command in
 * it would join by writing cgroup.procs, which takes the kernel's cgroup threadgroup lock
 * for writing (an RCU grace period: 0.1 to several ms a command). */
static bool slot_wants_renewal(const struct cgroup_ctx *ctx, int fd)
{
	return ctx->clone_into && fresh_mark(fd) == 0;
}

/* Claim one of the agent's reusable command cgroups: <agent>/cmd-s0..N-1, made on first
 * use and kept. A slot belongs to whoever holds flock(LOCK_EX) on its directory fd; the
 * lock lives as long as that fd, so a pistisd that dies frees its slots, and a slot still
 * populated (children kept, a crash) is passed over. A slot killed before is removed and
 * made afresh (slot_wants_renewal), once per call: if the rmdir fails, or another pistisd
 * takes the new one first, things go on as without it. Returns the locked directory fd and
 * writes the slot's name to cmd, or -EBUSY when every slot is taken. */
static int claim_slot(const struct cgroup_ctx *ctx, int agent_fd, char *cmd, size_t cmd_size)
{
	bool renewed = false;

	for (unsigned i = 0; i < CGROUP_SLOTS; i++) {
		char name[16];
		int fd;

		snprintf(name, sizeof(name), CGROUP_SLOT_PREFIX "%u", i);
		fd = openat(agent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno == ENOENT) {
			bool made = mkdirat(agent_fd, name, CMD_MODE) == 0;
			if (!made && errno != EEXIST)
				return -errno;
			fd = openat(agent_fd, name,
				    O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			if (made && fd >= 0)
				mark_fresh(fd);
		}
		if (fd < 0)
			return -errno;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0 || cgroup_populated(fd) != 0) {
			safe_close(fd);
			continue;
		}
		if (!renewed && slot_wants_renewal(ctx, fd) &&
		    unlinkat(agent_fd, name, AT_REMOVEDIR) == 0) {
			renewed = true;
			safe_close(fd);
			i--; /* the same slot again: made afresh, marked, locked */
			continue;
		}
		if ((size_t)snprintf(cmd, cmd_size, "%s", name) >= cmd_size) {
			safe_close(fd);
			return -ENAMETOOLONG;
		}
		return fd;
	}
	return -EBUSY;
}

/* A cgroup of its own whose name is already there: left by an earlier pistisd with the same
 * pid (the name carries it), which died between its command's end and the rmdir, or a
 * keep_children command's, whose processes have ended since (cgroup_reap_orphans removes
 * empty ones only when no process has the pid in the name, which is not the case here). Removed only when nobody holds its lock and it is empty, so that
 * the caller makes it afresh; else -EEXIST, and the caller takes another name: a cgroup a
 * live pistisd holds, or one with processes in it, is never joined (nor killed here; that
 * is the reaper's, at serve start-up). Locking an empty cgroup could meet its maker between
 * mkdir and flock (see reap_one), but only a process with our pid can make this name, and
 * in our pid namespace that is us; one in another namespace sharing this tree would fail
 * its own flock or open and report it, never join ours. */
static int remove_leftover(int agent_fd, const char *name)
{
	_cleanup_close_ int fd =
		openat(agent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return errno == ENOENT ? 0 : -EEXIST; /* gone since: make it */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 || cgroup_populated(fd) != 0)
		return -EEXIST;
	if (unlinkat(agent_fd, name, AT_REMOVEDIR) < 0)
		return errno == ENOENT ? 0 : -EEXIST;
	return 0;
}

/* The limits of all an agent's commands together, on <agent>/ (pistisd serve): each one
 * a controller exists for is written, "max"/100 where none is asked, so a serve restarted
 * without a limit takes away the one an earlier serve set. The agent cannot change them:
 * <agent>/ and its files are root's (AGENT_MODE; kernfs makes the files 0644), and it can
 * make no cgroup to move into. A limit asked for that cannot be written is an error: the
 * command does not run. With a memory limit, memory is enabled for the command cgroups
 * too (their memory.oom.group; <agent>/ made before our controllers were). Returns the
 * CGROUP_HAS_* of the limits asked for and set, or -errno. */
static int agent_limits(const struct cgroup_ctx *ctx, int agent_fd, const struct cgroup_limits *lim)
{
	char buf[32];
	int applied = 0, r;

	if (ctx->features & CGROUP_HAS_MEMORY) {
		if (lim->memory_max)
			snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->memory_max);
		r = write_at(agent_fd, "memory.max", lim->memory_max ? buf : "max");
		if (r < 0 && lim->memory_max)
			return r;
		/* No way around the limit through swap where swap is accounted (no file
		 * without swap accounting: nothing to escape into then). */
		(void)write_at(agent_fd, "memory.swap.max", lim->memory_max ? "0" : "max");
		if (lim->memory_max) {
			_cleanup_free_ char *on = NULL, *avail = NULL;

			if (read_at(agent_fd, "cgroup.subtree_control", &on) < 0 ||
			    !cgroup_list_has(on, "memory")) {
				if (read_at(agent_fd, "cgroup.controllers", &avail) >= 0)
					(void)enable_controllers(agent_fd, avail);
			}
			applied |= CGROUP_HAS_MEMORY;
		}
	}
	if (ctx->features & CGROUP_HAS_PIDS) {
		if (lim->pids_max)
			snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->pids_max);
		r = write_at(agent_fd, "pids.max", lim->pids_max ? buf : "max");
		if (r < 0 && lim->pids_max)
			return r;
		if (lim->pids_max)
			applied |= CGROUP_HAS_PIDS;
	}
	if (ctx->features & CGROUP_HAS_CPU) {
		snprintf(buf, sizeof(buf), "%u", lim->cpu_weight ? lim->cpu_weight : 100);
		r = write_at(agent_fd, "cpu.weight", buf);
		if (r < 0 && lim->cpu_weight)
			return r;
		if (lim->cpu_weight)
			applied |= CGROUP_HAS_CPU;
	}
	return applied;
}

int cgroup_cmd_create(struct cgroup_ctx *ctx, const char *agent, gid_t agent_gid, char *cmd,
		      size_t cmd_size, int reuse_fd, const struct cgroup_limits *agent_lim,
		      const struct cgroup_limits *lim, int *ret_dir_fd, int *ret_procs_fd)
{
	_cleanup_close_ int agent_fd = -1, dir_fd = reuse_fd, procs_fd = -1;
	char buf[32];
	int applied = 0, r;

	if (ctx->base_fd < 0)
		return -ENODEV;
	if (!cgroup_name_ok(agent) || !cgroup_name_ok(cmd))
		return -EINVAL;
	if (dir_fd >= 0)
		goto limits; /* this process's own, still locked or uniquely named */
	agent_fd = openat(ctx->base_fd, agent, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (agent_fd < 0 && errno == ENOENT) {
		if (mkdirat(ctx->base_fd, agent, AGENT_MODE) < 0 && errno != EEXIST)
			return -errno;
		agent_fd = openat(ctx->base_fd, agent,
				  O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (agent_fd >= 0 &&
		    (ctx->features & (CGROUP_HAS_MEMORY | CGROUP_HAS_PIDS | CGROUP_HAS_CPU))) {
			_cleanup_free_ char *avail = NULL;
			if (read_at(agent_fd, "cgroup.controllers", &avail) >= 0)
				(void)enable_controllers(agent_fd, avail);
		}
	}
	if (agent_fd < 0)
		return -errno;
	/* root:<agent gid> 0710, whether made just now (root:root) or by an older pistisd
	 * (0755): owner and mode through the fd, before any command cgroup is made in it. */
	struct stat ast;
	if (fstat(agent_fd, &ast) < 0)
		return -errno;
	if (ast.st_uid != 0 || ast.st_gid != agent_gid) {
		if (fchown(agent_fd, 0, agent_gid) < 0)
			return -errno;
		ast.st_mode = 0; /* chown may clear bits: set the mode again */
	}
	if ((ast.st_mode & 07777) != AGENT_MODE && fchmod(agent_fd, AGENT_MODE) < 0)
		return -errno;
	if (agent_lim) {
		r = agent_limits(ctx, agent_fd, agent_lim);
		if (r < 0)
			return r;
		applied |= r;
	}
	/* A reusable slot first: mkdir + rmdir in cgroupfs cost more than the rest of a
	 * spawn's cgroup work. Only when every slot is busy a cgroup of its own (cmd). */
	dir_fd = claim_slot(ctx, agent_fd, cmd, cmd_size);
	if (dir_fd < 0) {
		if (dir_fd != -EBUSY)
			return dir_fd;
		if (mkdirat(agent_fd, cmd, CMD_MODE) < 0) {
			if (errno != EEXIST)
				return -errno;
			r = remove_leftover(agent_fd, cmd);
			if (r < 0)
				return r;
			if (mkdirat(agent_fd, cmd, CMD_MODE) < 0)
				return -errno; /* EEXIST: another name, please */
		}
		dir_fd = openat(agent_fd, cmd, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		/* Held like a slot, so that cgroup_reap_orphans knows it has an owner. Nobody
		 * else can hold it yet: agents cannot open it (CMD_MODE), and the reaper locks
		 * only populated cgroups, which this one is not until it is ours. */
		if (dir_fd < 0 || flock(dir_fd, LOCK_EX | LOCK_NB) < 0) {
			r = -errno;
			goto fail;
		}
		mark_fresh(dir_fd);
	}
	/* Under an agent's memory limit the OOM killer's victim takes its whole command with
	 * it: the client sees its command killed by SIGKILL, not a shell that lost a child and
	 * went on. Set at each claim (a slot may come from a time without the limit; a reused
	 * one was set at its claim); the file exists once <agent>/ enables memory for its
	 * children (agent_limits). */
	if (agent_lim && agent_lim->memory_max && (ctx->features & CGROUP_HAS_MEMORY))
		(void)write_at(dir_fd, "memory.oom.group", "1");
limits:
	/* Every limit is rewritten, "max" where none is asked for: a reused cgroup keeps
	 * what the previous command had. */
	if ((ctx->features & CGROUP_HAS_MEMORY) && !(lim && lim->memory_max))
		(void)write_at(dir_fd, "memory.max", "max");
	if ((ctx->features & CGROUP_HAS_PIDS) && !(lim && lim->pids_max))
		(void)write_at(dir_fd, "pids.max", "max");
	if ((ctx->features & CGROUP_HAS_CPU) && !(lim && lim->cpu_weight))
		(void)write_at(dir_fd, "cpu.weight", "100");
	if (lim && lim->memory_max && (ctx->features & CGROUP_HAS_MEMORY)) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->memory_max);
		r = write_at(dir_fd, "memory.max", buf);
		if (r < 0)
			goto fail;
		/* No swap escape from the memory limit where swap accounting exists. */
		(void)write_at(dir_fd, "memory.swap.max", "0");
		applied |= CGROUP_HAS_MEMORY;
	}
	if (lim && lim->pids_max && (ctx->features & CGROUP_HAS_PIDS)) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)lim->pids_max);
		r = write_at(dir_fd, "pids.max", buf);
		if (r < 0)
			goto fail;
		applied |= CGROUP_HAS_PIDS;
	}
	if (lim && lim->cpu_weight && (ctx->features & CGROUP_HAS_CPU)) {
		snprintf(buf, sizeof(buf), "%u", lim->cpu_weight);
		r = write_at(dir_fd, "cpu.weight", buf);
		if (r < 0)
			goto fail;
		applied |= CGROUP_HAS_CPU;
	}
	if (ret_procs_fd) {
		procs_fd = openat(dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (procs_fd < 0) {
			r = -errno;
			goto fail;
		}
		*ret_procs_fd = TAKE_FD(procs_fd);
	}
	*ret_dir_fd = TAKE_FD(dir_fd);
	return applied | (int)(ctx->features & CGROUP_HAS_KILL);
fail:
	/* A slot stays (others may be waiting to open it); a cgroup of our own goes. */
	if (!cgroup_cmd_is_slot(cmd) &&
	    (agent_fd >= 0 ||
	     (agent_fd = openat(ctx->base_fd, agent,
				O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) >= 0))
		(void)unlinkat(agent_fd, cmd, AT_REMOVEDIR);
	return r;
}

/* The pids of cgroup.procs in cgroup_fd, read anew: *ret (malloc'd), *ret_n of them. */
static int read_procs(int cgroup_fd, pid_t **ret, size_t *ret_n)
{
	_cleanup_free_ char *s = NULL;
	_cleanup_free_ pid_t *v = NULL;
	size_t n = 0, cap = 0;
	int r = read_at_max(cgroup_fd, "cgroup.procs", 1 << 20, &s);

	if (r < 0)
		return r;
	for (char *q = s; *q;) {
		char *end;
		long pid = strtol(q, &end, 10);

		if (end == q)
			break;
		if (pid > 0 && pid <= INT_MAX) {
			if (n == cap) {
				pid_t *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
				if (!nv)
					return -ENOMEM;
				v = nv;
			}
			v[n++] = (pid_t)pid;
		}
		q = *end ? end + 1 : end;
	}
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

int cgroup_signal_procs(int cgroup_fd, int sig)
{
	_cleanup_free_ pid_t *first = NULL, *again = NULL;
	_cleanup_free_ int *pidfds = NULL;
	size_t n = 0, n_again = 0;
	int r, signalled = 0;

	r = read_procs(cgroup_fd, &first, &n);
	if (r < 0 || n == 0)
		return r;
	pidfds = malloc(n * sizeof(*pidfds));
	if (!pidfds)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		pidfds[i] = (int)syscall(SYS_pidfd_open, first[i], 0);
		/* Linux < 5.3: nothing to pin a process with; the list is all there is. */
		if (pidfds[i] < 0 && errno == ENOSYS && kill(first[i], sig) == 0)
			signalled++;
	}
	r = read_procs(cgroup_fd, &again, &n_again);
	if (r >= 0 && n_again > 0) { /* none listed again: none to signal (and no list) */
		qsort(again, n_again, sizeof(*again), cmp_pid);
		signalled += cgroup_signal_pinned(first, pidfds, n, again, n_again, sig);
	}
	for (size_t i = 0; i < n; i++)
		safe_close(pidfds[i]);
	return r < 0 ? r : signalled;
}

int cgroup_signal_pinned(const pid_t *pids, const int *pidfds, size_t n, const pid_t *again,
			 size_t n_again, int sig)
{
	int signalled = 0;

	/* A pinned process whose pid is listed again is the member: pids are unique among
	 * live processes, and a stranger that took an ended member's pid is not in the
	 * cgroup (a process forked in it is a member, and the pidfd then pins that one). */
	for (size_t i = 0; i < n; i++)
		if (pidfds[i] >= 0 && bsearch(&pids[i], again, n_again, sizeof(*again), cmp_pid) &&
		    syscall(SYS_pidfd_send_signal, pidfds[i], sig, NULL, 0) == 0)
			signalled++;
	return signalled;
}

int cgroup_kill(int dir_fd)
{
	int r;

	/* The mark goes first. Kernels that count each cgroup's cgroup.kill writes compare,
	 * for a child cloned with CLONE_INTO_CGROUP, the target's count with the parent's
	 * cgroup's, and SIGKILL the newborn when they differ (seen on 6.18): into a cgroup
	 * killed once, children are moved the old way (cgroup.procs) from then on. */
	(void)fremovexattr(dir_fd, FRESH_XATTR);
	r = write_at(dir_fd, "cgroup.kill", "1");
	if (r < 0 && r != -ENOENT)
		return r;
	/* Every member by pid as well, pinned (freeze-free best effort; repeat until empty
	 * in the caller): before 5.14 there is no cgroup.kill, and where there is, it passes
	 * over a process whose main thread has exited while its other threads run on (seen on
	 * 6.18: the zombie leader is listed in cgroup.procs, the threads keep running), which
	 * a SIGKILL to its pid ends. */
	int k = cgroup_signal_procs(dir_fd, SIGKILL);
	return r == 0 || k >= 0 ? 0 : k;
}

int cgroup_populated(int dir_fd)
{
	char buf[256];
	_cleanup_free_ char *big = NULL;
	const char *ev = NULL, *p;
	int r = read_small_at(dir_fd, "cgroup.events", buf, sizeof(buf), &big, &ev);

	if (r < 0)
		return r;
	p = strstr(ev, "populated ");
	if (!p)
		return -EIO;
	return p[10] == '1';
}

int cgroup_cmd_remove(struct cgroup_ctx *ctx, const char *agent, const char *cmd)
{
	_cleanup_close_ int agent_fd = -1;

	if (ctx->base_fd < 0)
		return -ENODEV;
	agent_fd = openat(ctx->base_fd, agent, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (agent_fd < 0)
		return -errno;
	if (unlinkat(agent_fd, cmd, AT_REMOVEDIR) < 0)
		return -errno;
	return 0;
}

/* Whether the pistisd that named a cgroup of its own "cmd-<pid>-<n>" is gone: no process
 * has that pid (in our pid namespace) any more. A live pid may be a pistisd between its
 * mkdir and its flock, so only a dead one's empty cgroups are removed. */
static bool maker_gone(const char *name)
{
	const char *p = name + 4;
	char *end;
	long pid;

	if (*p < '1' || *p > '9')
		return false;
	errno = 0;
	pid = strtol(p, &end, 10);
	if (errno || *end != '-' || pid > INT_MAX)
		return false;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* A populated orphan found by the walk, killed and held (its lock) until it empties or the
 * time is up: agent_fd (its own, for the rmdir) and name say where it is, agent which
 * agent's counts it goes to. */
struct orphan {
	int fd, agent_fd;
	unsigned agent;
	char name[NAME_MAX + 1];
};

struct agent_count {
	char name[NAME_MAX + 1];
	unsigned killed, alive;
};

/* Orphans killed and waited for together: up to REAP_BATCH at a time, so that a tree
 * with thousands of them costs neither thousands of fds nor a wait per cgroup. */
#define REAP_BATCH 64u

/* One command cgroup, looked at: killed when populated and nobody holds its lock. An
 * empty one is never locked, not even for a moment: its maker may be between mkdir and
 * flock (cgroup_cmd_create), and it is populated only once its maker holds it. 1 killed
 * and held (*ret_fd, its lock taken), 0 not, -errno. */
static int reap_one(int agent_fd, const char *name, int *ret_fd)
{
	_cleanup_close_ int fd =
		openat(agent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	int populated, r;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	/* Made 0755 by an older pistisd: from now on agents cannot open it (CMD_MODE). */
	(void)fchmod(fd, CMD_MODE);
	populated = cgroup_populated(fd);
	if (populated == 0 && !cgroup_cmd_is_slot(name) && maker_gone(name)) {
		/* Empty, left by a pistisd that died between its command's end and the
		 * rmdir (or a keep_children command's, whose processes have ended since). */
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && cgroup_populated(fd) == 0)
			(void)unlinkat(agent_fd, name, AT_REMOVEDIR);
		return 0;
	}
	if (populated != 1)
		return 0;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? 0 : -errno;
	if (cgroup_populated(fd) != 1)
		return 0; /* its owner finished with it between the two looks */
	r = cgroup_kill(fd);
	if (r < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	return 1;
}

/* The batch, every one killed once already: cgroup.kill is asynchronous (and the fallback
 * before 5.14 one pass over cgroup.procs), so each is looked at and killed again every
 * millisecond until it is empty, then a cgroup of its own removed (a slot stays for the
 * next claimer, which renews it: claim_slot), for CGROUP_REAP_KILL_MS in all, not each:
 * N orphans from a crashed pistisd, some in D state, cost one wait, not N. One still
 * populated then (a process no SIGKILL ends yet) is counted alive and left as it is: it
 * was logged as gone while it ran on; its kill stays pending, its processes end when
 * whatever holds them lets go. Returns 0 or the last -errno. */
static int reap_wait(struct orphan *o, size_t n, struct agent_count *agents)
{
	int64_t start = mono_ms();
	size_t left = n;
	int r = 0;

	for (;;) {
		for (size_t i = 0; i < n; i++) {
			int k;

			if (o[i].fd < 0)
				continue;
			/* (a failed look counts as populated, a failed kill ends the wait for
			 * it uncounted: as when each was waited for alone) */
			if (cgroup_populated(o[i].fd) == 0) {
				if (!cgroup_cmd_is_slot(o[i].name))
					(void)unlinkat(o[i].agent_fd, o[i].name, AT_REMOVEDIR);
				agents[o[i].agent].killed++;
			} else if ((k = cgroup_kill(o[i].fd)) == 0) {
				continue;
			} else {
				r = k;
			}
			o[i].fd = safe_close(o[i].fd);
			left--;
		}
		if (!left || mono_ms() - start >= CGROUP_REAP_KILL_MS)
			break;
		(void)nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	for (size_t i = 0; i < n; i++) {
		if (o[i].fd >= 0)
			agents[o[i].agent].alive++;
		safe_close(o[i].fd);
		safe_close(o[i].agent_fd);
	}
	return r;
}

int cgroup_reap_orphans(int base_fd,
			void (*found)(const char *agent, unsigned killed, unsigned alive, void *u),
			void *userdata)
{
	struct orphan batch[REAP_BATCH];
	_cleanup_free_ struct agent_count *agents = NULL;
	size_t n = 0, n_agents = 0;
	DIR *base = NULL;
	struct dirent *de;
	int fd, k, r = 0;

	if (base_fd < 0)
		return 0;
	fd = openat(base_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	base = fdopendir(fd);
	if (!base) {
		safe_close(fd);
		return -errno;
	}
	while ((de = readdir(base))) {
		_cleanup_close_ int agent_fd = -1;
		struct agent_count *a;
		DIR *cmds = NULL;
		struct dirent *ce;

		if (de->d_type != DT_DIR || !cgroup_name_ok(de->d_name))
			continue;
		a = realloc(agents, (n_agents + 1) * sizeof(*agents));
		if (!a) {
			r = -ENOMEM;
			break;
		}
		agents = a;
		a = &agents[n_agents];
		*a = (struct agent_count){0};
		snprintf(a->name, sizeof(a->name), "%s", de->d_name);
		agent_fd = openat(dirfd(base), de->d_name,
				  O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		fd = agent_fd < 0 ? -1 : openat(agent_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || !(cmds = fdopendir(fd))) {
			r = -errno;
			safe_close(fd);
			continue;
		}
		n_agents++;
		while ((ce = readdir(cmds))) {
			struct orphan *o = &batch[n];

			if (ce->d_type != DT_DIR || strncmp(ce->d_name, "cmd-", 4))
				continue;
			o->fd = -1;
			k = reap_one(agent_fd, ce->d_name, &o->fd);
			if (k <= 0) {
				if (k < 0)
					r = k;
				continue;
			}
			o->agent_fd = fcntl(agent_fd, F_DUPFD_CLOEXEC, 3);
			if (o->agent_fd < 0)
				r = -errno; /* killed and waited for all the same, not removed */
			o->agent = (unsigned)(n_agents - 1);
			snprintf(o->name, sizeof(o->name), "%s", ce->d_name);
			n++;
			if (n == REAP_BATCH) {
				k = reap_wait(batch, n, agents);
				r = k < 0 ? k : r;
				n = 0;
			}
		}
		closedir(cmds);
	}
	closedir(base);
	k = reap_wait(batch, n, agents);
	r = k < 0 ? k : r;
	for (size_t i = 0; found && i < n_agents; i++)
		if (agents[i].killed || agents[i].alive)
			found(agents[i].name, agents[i].killed, agents[i].alive, userdata);
	return r;
}
