/* The spawn core, parent side: set up fds, cgroup and the child's arguments, clone the
 * child (spawn-child.c; vfork-style through spawn-vfork.c where that is safe, else
 * fork-style), then supervise the command from any event loop.
 * docs/spawn.md has the exact order of the child's steps and the reason for each. */
#include "pistisd/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "lib/caps.h"
#include "lib/env-build.h"
#include "lib/fd-util.h"
#include "lib/static-slot.h"
#include "lib/macro.h"
#include "lib/mono-clock.h"
#include "lib/mountinfo.h"
#include "lib/proc-status.h"
#include "pistisd/scope.h"
#include "pistisd/spawn-child.h"
#include "pistisd/spawn-vfork.h"
#include "sandbox-users/users.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

/* Empty slots (cmd-s<n>) kept for the next command of the same agent: mkdir + rmdir in
 * cgroupfs cost more than the rest of a spawn together (bench/spawn.sh). A pooled slot
 * keeps its directory fd, and with it the slot's lock (cgroup.h). Only slots: a cgroup
 * made because every slot was busy is removed when its command ends, or the agent's next
 * commands would run in it for as long as it stays pooled (an agent with more than
 * CGROUP_SLOTS cgroups for good, its slots free beside it). */
#define CGROUP_POOL_MAX 16
struct pooled_cgroup {
	char agent[65];
	char cmd[48];
	int fd;
};

/* Command cgroups whose processes were killed but have not all exited yet (a process
 * with gigabytes to tear down takes its time, and the agent chooses how much): removed by
 * spawn_ctx_reap_dying, never waited for where the caller is an event loop. The fd keeps
 * the cgroup's lock (cgroup.h), so no other pistisd takes it for an orphan meanwhile.
 * A slot is on the list too while populated, and leaves it (unlocked, kept) once empty.
 * Each is looked at and killed again at intervals doubling from DYING_RETRY_FIRST_MS to
 * DYING_RETRY_MAX_MS: one that never empties (a process in D state, which no SIGKILL
 * ends until its I/O does; a cgroup.kill that does nothing) had cgroup.kill, which takes
 * the kernel's global cgroup_mutex, written at every 20 ms pass for ever. */
#define CGROUP_DYING_MAX 256
#define DYING_RETRY_FIRST_MS 10u
#define DYING_RETRY_MAX_MS 1000u

struct dying_cgroup {
	struct pooled_cgroup cg;
	uint64_t since_ns; /* when it went on the list */
	uint64_t due_ns;   /* the next look; not before */
	unsigned retry_ms; /* the interval after it */
	bool stuck_told;   /* counted once by spawn_ctx_take_stuck */
};

struct spawn_ctx {
	struct pooled_cgroup pool[CGROUP_POOL_MAX];
	size_t n_pool;
	struct dying_cgroup *dying; /* CGROUP_DYING_MAX of them, made on first need: 32 KB
				     * a `pistisd run` would map and fault in for nothing */
	size_t n_dying;
	struct seccomp_profile_bpf bpf;
	struct cgroup_ctx cg;
	int devnull_fd;
	int proc_fd; /* /proc, opened before any chroot; -1 if absent (pgid mode only) */
	int last_cap;
	bool can_raise_limits; /* CAP_SYS_RESOURCE held: a hard limit may go above ours */
	bool no_openat2;
	int scope;	      /* 0: the abstract-socket scope works here (scope_probe), or -errno */
	bool keyctl_refused;  /* keyctl refused to pistisd itself (spawn_keyctl_refused) */
	bool audit_sessions;  /* /proc/self/sessionid readable: every command gets an audit
			      * session of its own (spawn-child.c, step 2c); the tree of one
			      * without a cgroup is found by it */
	unsigned own_session; /* ours, which a command whose loginuid write failed keeps */
	bool vfork;	      /* vfork-style starts allowed (spawn-vfork.c); off after a refusal */
	int dumpable_fd;      /* /proc/sys/fs/suid_dumpable, read at every start; -1: fork-style */
	int oom_score_adj;    /* the commands' (spawn_oom_score_adj), or SPAWN_OOM_KEEP */
	char release[65];     /* uname -r */
	unsigned long counter;
	pid_t self;
};

static const char *const step_names[_SPAWN_STEP_MAX] = {
	[SPAWN_STEP_NONE] = "none",
	[SPAWN_STEP_SIGNALS] = "reset signals",
	[SPAWN_STEP_CGROUP] = "join cgroup",
	[SPAWN_STEP_OOM_SCORE] = "oom_score_adj",
	[SPAWN_STEP_SETSID] = "setsid",
	[SPAWN_STEP_STDIO] = "set up stdio",
	[SPAWN_STEP_CTTY] = "TIOCSCTTY",
	[SPAWN_STEP_KEYRING] = "join session keyring",
	[SPAWN_STEP_RLIMIT] = "setrlimit",
	[SPAWN_STEP_SCHED] = "reset scheduling",
	[SPAWN_STEP_BOUNDING] = "drop bounding set",
	[SPAWN_STEP_SECCOMP] = "seccomp",
	[SPAWN_STEP_SETGROUPS] = "setgroups",
	[SPAWN_STEP_SETRESGID] = "setresgid",
	[SPAWN_STEP_SETRESUID] = "setresuid",
	[SPAWN_STEP_CAPS] = "clear capabilities",
	[SPAWN_STEP_PDEATHSIG] = "PR_SET_PDEATHSIG",
	[SPAWN_STEP_PARENT] = "parent died",
	[SPAWN_STEP_CWD] = "enter working directory",
	[SPAWN_STEP_NNP] = "PR_SET_NO_NEW_PRIVS",
	[SPAWN_STEP_CLOSE_FDS] = "close_range",
	[SPAWN_STEP_EXEC] = "execve",
	[SPAWN_STEP_PARENT_SIDE] = "prepare",
	[SPAWN_STEP_PTY] = "open a pty (/dev/ptmx, devpts)",
	[SPAWN_STEP_EXEC_TIMEOUT] = "timed out before exec",
	[SPAWN_STEP_SCOPE] = "landlock scope",
	/* (one string in parentheses: clang warns of a missing comma otherwise) */
	[SPAWN_STEP_EXEC_INTERP] = ("execve (the file is there; the interpreter its #! line or "
				    "ELF header names is not)"),
};

const char *spawn_step_name(enum spawn_step step)
{
	return step >= 0 && step < _SPAWN_STEP_MAX && step_names[step] ? step_names[step] : "?";
}

void spawn_opts_as_agent(struct spawn_opts *o, uid_t uid, gid_t gid)
{
	o->uid = uid;
	o->gid = gid;
	o->groups[0] = gid;
	o->groups[1] = USERS_SANDBOX_GID;
	o->n_groups = 2;
}

const char *spawn_error_string(const struct spawn_error *e, char *buf, size_t size)
{
	/* openat2's answers for the working directory say little on their own. */
	const char *hint =
		e->step != SPAWN_STEP_CWD ? ""
		: e->error == ELOOP	  ? " (a component is a symlink: none is followed)"
		: e->error == EXDEV ? " (the path leaves /workspaces, /workspace or /data, by '..' "
				      "or across a mount)"
		: e->error == EACCES ? " (the agent may not search a directory on the way)"
				     : "";

	snprintf(buf, size, "%s: %s%s", spawn_step_name(e->step), strerror(e->error), hint);
	return buf;
}

const char *spawn_end_name(enum spawn_end end)
{
	switch (end) {
	case SPAWN_END_RUNNING:
		return "running";
	case SPAWN_END_EXITED:
		return "exited";
	case SPAWN_END_SIGNALED:
		return "signaled";
	case SPAWN_END_TIMEOUT:
		return "timeout";
	case SPAWN_END_IDLE:
		return "idle-timeout";
	case SPAWN_END_CANCELLED:
		return "cancelled";
	default:
		return "?";
	}
}

/* The time this process was found stopped, and when its caller promised to look at the
 * clock again (0: no promise). See spawn_clock_expect_wake. */
static uint64_t clock_stalled_ns, clock_wake_due_ns;

/* CLOCK_MONOTONIC runs on while the cgroup freezer holds us (docker pause), a SIGSTOP or a
 * paused VM: on the thaw every deadline that fell inside the freeze had passed, and a
 * command was killed as timed out, idle or "timed out before exec" for time in which
 * neither it nor we ran. The first read after such a wake-up, later than promised by more
 * than SPAWN_STALL_MIN_MS, takes the lateness out of the clock: it never goes back, and
 * every deadline measured with it moves on by the freeze. */
uint64_t spawn_now_ns(void)
{
	uint64_t now = mono_ns();

	if (clock_wake_due_ns && now > clock_wake_due_ns + SPAWN_STALL_MIN_MS * 1000000ull) {
		clock_stalled_ns += now - clock_wake_due_ns;
		clock_wake_due_ns = 0; /* counted once; the next promise arms it again */
	}
	return now - clock_stalled_ns;
}

uint64_t spawn_clock_stalled_ns(void)
{
	(void)spawn_now_ns();
	return clock_stalled_ns;
}

void spawn_clock_expect_wake(int ms)
{
	(void)spawn_now_ns(); /* a stall before this promise is counted against the last one */
	clock_wake_due_ns = ms < 0 ? 0 : mono_ns() + (uint64_t)ms * 1000000u;
}

int spawn_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	int r, e;

	if (timeout_ms > SPAWN_CLOCK_BEAT_MS)
		timeout_ms = SPAWN_CLOCK_BEAT_MS;
	spawn_clock_expect_wake(timeout_ms);
	r = poll(fds, n, timeout_ms);
	e = errno;
	spawn_clock_expect_wake(-1); /* what the caller does next is not a freeze */
	errno = e;
	return r;
}

int spawn_oom_score_adj(int proc_fd)
{
	char buf[16];
	long v;
	char *end;
	int fd = proc_fd < 0 ? -1 : openat(proc_fd, "self/oom_score_adj", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	safe_close(fd);
	if (n <= 0)
		return SPAWN_OOM_KEEP;
	buf[n] = '\0';
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || (*end && *end != '\n') || v < -1000 || v > 1000)
		return SPAWN_OOM_KEEP;
	v += SPAWN_OOM_SCORE_RAISE;
	return v > 1000 ? 1000 : (int)v;
}

bool spawn_keyctl_refused(void)
{
	/* A read that changes nothing; with a session keyring or without one it answers an
	 * id or ENOKEY, never EPERM or EACCES but from a filter or an LSM. */
	return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0, 0) < 0 &&
	       (errno == EPERM || errno == EACCES);
}

bool spawn_ctx_keyctl_refused(const struct spawn_ctx *ctx)
{
	return ctx->keyctl_refused;
}

/* /proc/<name> (a "PID/sessionid") as a number: the audit session id. */
static bool read_session(int proc_fd, const char *name, unsigned *ret)
{
	char buf[16];
	_cleanup_close_ int fd = proc_fd < 0 ? -1 : openat(proc_fd, name, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	unsigned long v = 0;

	if (n <= 0)
		return false;
	for (ssize_t i = 0; i < n && buf[i] != '\n'; i++) {
		if (buf[i] < '0' || buf[i] > '9' || v > UINT_MAX / 10)
			return false;
		v = v * 10 + (unsigned)(buf[i] - '0');
	}
	if (v > UINT_MAX)
		return false;
	*ret = (unsigned)v;
	return true;
}

/* A process's first context is static storage (lib/static-slot.h; pistisd run and serve
 * make one): calloc'd, spawn_ctx_free's free was a munmap at the end of every `pistisd
 * run`, which waits for it. A context made while that one is in use is calloc'd. */
static struct spawn_ctx static_ctx;
static bool static_ctx_taken;

int spawn_ctx_new_why(struct spawn_ctx **ret, const char **why)
{
	struct spawn_ctx *ctx;
	const char *e, *step;
	int r;

	/* fds 0-2 must exist, or a pipe could land on them and be dup2'd over. */
	step = "fds 0-2 (a closed one is opened on /dev/null, which must be the null device, "
	       "character device 1:3, not a link or a file)";
	r = fd_ensure_std();
	if (r < 0)
		goto out;
	step = "memory";
	ctx = static_slot_get(&static_ctx_taken, &static_ctx, sizeof(*ctx), true);
	if (!ctx) {
		r = -ENOMEM;
		goto out;
	}
	ctx->devnull_fd = -1;
	ctx->proc_fd = -1;
	ctx->dumpable_fd = -1;
	ctx->cg.base_fd = -1;
	ctx->self = getpid();
	step = "the capability bounding set (PR_CAPBSET_READ)";
	r = privs_read_last_cap();
	if (r < 0)
		goto fail;
	ctx->last_cap = r;
	ctx->can_raise_limits = caps_have(CAP_SYS_RESOURCE);
	/* Compiled at build time: nothing to do but point at it. */
	seccomp_profile_load(&ctx->bpf);
	ctx->proc_fd = openat(AT_FDCWD, "/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* Every command's stdin. Opened as root, so it must be the null device itself: a
	 * /dev/null that is a symlink, a file or a FIFO (runc CVE-2025-31133: a container's
	 * /dev/null swapped for a link before the runtime used it) would hand each agent what
	 * it names, or hang here: fd_open_null. */
	r = fd_open_null(O_RDONLY | O_CLOEXEC);
	if (r < 0) {
		step = r == -ELOOP    ? "/dev/null (a symbolic link; it must be the null device, "
					"character device 1:3)"
		       : r == -ENODEV ? "/dev/null (not the null device, character device 1:3)"
				      : "/dev/null (opened without following a link)";
		goto fail;
	}
	ctx->devnull_fd = r;
	step = "/dev/null (F_SETFL)";
	if (fcntl(ctx->devnull_fd, F_SETFL, 0) < 0) {
		r = -errno;
		goto fail;
	}
	/* Read once: forcing the per-component fallback is for tests (crun's check-no-openat2). */
	e = getenv("PISTIS_NO_OPENAT2");
	ctx->no_openat2 = e && *e && strcmp(e, "0");
	/* No Landlock ABI 6 is not an error either: abstract sockets stay shared (what
	 * `pistisd check` reports as landlock). */
	ctx->scope = scope_probe();
	ctx->keyctl_refused = spawn_keyctl_refused();
	/* No cgroup v2 is not an error: command trees are then audit sessions or process
	 * groups. PISTIS_NO_CGROUP=1 makes it so (tests of those modes). */
	e = getenv("PISTIS_NO_CGROUP");
	if (e && *e && strcmp(e, "0")) {
		ctx->cg.base_fd = -1;
		ctx->cg.features = 0;
	} else
		(void)cgroup_init(&ctx->cg);
	/* The same for the cgroup.procs path (the one Docker's seccomp profile leaves us). */
	e = getenv("PISTIS_NO_CLONE3");
	ctx->cg.clone_into = !(e && *e && strcmp(e, "0"));
	/* And for the fork-style start everywhere (the vfork-style one needs the sysctl). */
	e = getenv("PISTIS_NO_VFORK");
	ctx->vfork = !(e && *e && strcmp(e, "0")) && ctx->proc_fd >= 0;
	if (ctx->vfork) {
		struct utsname u;
		ctx->dumpable_fd =
			openat(ctx->proc_fd, "sys/fs/suid_dumpable", O_RDONLY | O_CLOEXEC);
		ctx->vfork = ctx->dumpable_fd >= 0 && uname(&u) == 0;
		if (ctx->vfork)
			snprintf(ctx->release, sizeof(ctx->release), "%s", u.release);
	}
	ctx->oom_score_adj = spawn_oom_score_adj(ctx->proc_fd);
	/* PISTIS_NO_AUDIT_SESSION=1: the process group alone (tests of the sweeps that stand
	 * in for it where the loginuid cannot be set). */
	e = getenv("PISTIS_NO_AUDIT_SESSION");
	ctx->audit_sessions = !(e && *e && strcmp(e, "0")) &&
			      read_session(ctx->proc_fd, "self/sessionid", &ctx->own_session);
	*ret = ctx;
	return 0;
fail:
	spawn_ctx_free(ctx);
out:
	if (why)
		*why = step;
	return r;
}

/* Whether a dying cgroup is done with: a slot once empty (it stays, for its next claimer,
 * which renews a slot killed before: claim_slot), a cgroup of its own once removed. */
static bool dying_gone(struct spawn_ctx *ctx, const struct dying_cgroup *d)
{
	if (cgroup_cmd_is_slot(d->cg.cmd))
		return cgroup_populated(d->cg.fd) != 1;
	return cgroup_cmd_remove(&ctx->cg, d->cg.agent, d->cg.cmd) != -EBUSY;
}

static void dying_drop(struct spawn_ctx *ctx, size_t i)
{
	safe_close(ctx->dying[i].cg.fd);
	ctx->dying[i] = ctx->dying[--ctx->n_dying];
}

/* The agent's slots on the dying list that are empty by now, let go of before one of its
 * commands claims a slot (claim_slot passes over a slot whose lock the list holds): a pass
 * lets go of one only when it is due, up to a second later, and the command took another
 * slot, or a cgroup of its own, meanwhile. */
static void dying_slots_let_go(struct spawn_ctx *ctx, const char *agent)
{
	for (size_t i = 0; i < ctx->n_dying;) {
		const struct dying_cgroup *d = &ctx->dying[i];

		if (!strcmp(d->cg.agent, agent) && cgroup_cmd_is_slot(d->cg.cmd) &&
		    cgroup_populated(d->cg.fd) != 1)
			dying_drop(ctx, i);
		else
			i++;
	}
}

size_t spawn_ctx_reap_dying(struct spawn_ctx *ctx, unsigned wait_ms)
{
	uint64_t deadline = spawn_now_ns() + (uint64_t)wait_ms * 1000000u;

	for (;;) {
		uint64_t now = spawn_now_ns();
		/* a caller that waits looks at every one a last time at its deadline */
		bool last = wait_ms && now >= deadline;

		for (size_t i = 0; i < ctx->n_dying;) {
			struct dying_cgroup *d = &ctx->dying[i];

			if (!last && now < d->due_ns) {
				i++;
				continue;
			}
			if (!dying_gone(ctx, d)) {
				/* Still populated: cgroup.kill again (a process that was being
				 * forked when the last one went out), then less often. */
				(void)cgroup_kill(d->cg.fd);
				d->due_ns = now + (uint64_t)d->retry_ms * 1000000u;
				d->retry_ms = d->retry_ms * 2 < DYING_RETRY_MAX_MS
						      ? d->retry_ms * 2
						      : DYING_RETRY_MAX_MS;
				i++;
				continue;
			}
			dying_drop(ctx, i);
		}
		if (!ctx->n_dying || now >= deadline)
			return ctx->n_dying;
		(void)nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
}

unsigned spawn_ctx_dying_due_ms(const struct spawn_ctx *ctx)
{
	uint64_t now = spawn_now_ns(), first = UINT64_MAX;

	for (size_t i = 0; i < ctx->n_dying; i++)
		if (ctx->dying[i].due_ns < first)
			first = ctx->dying[i].due_ns;
	if (first == UINT64_MAX || first <= now)
		return 0;
	/* rounded up: a pass a moment early would find it not yet due, and sleep again */
	return (unsigned)((first - now + 999999u) / 1000000u);
}

size_t spawn_ctx_take_stuck(struct spawn_ctx *ctx)
{
	uint64_t now = spawn_now_ns();
	size_t n = 0;

	for (size_t i = 0; i < ctx->n_dying; i++) {
		struct dying_cgroup *d = &ctx->dying[i];
		if (!d->stuck_told && now - d->since_ns >= SPAWN_DYING_STUCK_S * 1000000000ull) {
			d->stuck_told = true;
			n++;
		}
	}
	return n;
}

void spawn_ctx_free(struct spawn_ctx *ctx)
{
	if (!ctx)
		return;
	(void)spawn_ctx_reap_dying(ctx, 200);
	for (size_t i = 0; i < ctx->n_dying; i++)
		safe_close(ctx->dying[i].cg.fd);
	free(ctx->dying);
	/* Slots stay for the next process (closing the fd unlocks them). */
	for (size_t i = 0; i < ctx->n_pool; i++)
		safe_close(ctx->pool[i].fd);
	cgroup_done(&ctx->cg);
	safe_close(ctx->devnull_fd);
	safe_close(ctx->proc_fd);
	safe_close(ctx->dumpable_fd);
	static_slot_put(&static_ctx_taken, &static_ctx, ctx);
}

const char *spawn_ctx_tree_control(const struct spawn_ctx *ctx)
{
	return ctx->cg.base_fd >= 0 ? "cgroup" : "pgid";
}

int spawn_ctx_cgroup_base_fd(const struct spawn_ctx *ctx)
{
	return ctx->cg.base_fd;
}

void spawn_ctx_prepare_start(struct spawn_ctx *ctx)
{
	if (ctx->vfork)
		spawn_vfork_prepare(ctx->last_cap, true);
}

unsigned spawn_ctx_cgroup_features(const struct spawn_ctx *ctx)
{
	return ctx->cg.base_fd >= 0 ? ctx->cg.features : 0;
}

unsigned spawn_ctx_cgroup_delegated(const struct spawn_ctx *ctx)
{
	return ctx->cg.base_fd >= 0 ? ctx->cg.delegated : 0;
}

int spawn_ctx_cgroup_make_room(struct spawn_ctx *ctx)
{
	return cgroup_make_room(&ctx->cg);
}

bool spawn_ctx_can_scope(const struct spawn_ctx *ctx, int *ret_why)
{
	if (ret_why)
		*ret_why = ctx->scope < 0 ? -ctx->scope : 0;
	return ctx->scope == 0;
}

void spawn_ctx_disable_scope(struct spawn_ctx *ctx, int error)
{
	ctx->scope = -(error > 0 ? error : EPERM);
}

bool spawn_ctx_uses_openat2(const struct spawn_ctx *ctx)
{
	return !ctx->no_openat2;
}

int spawn_cwd_split(const char *cwd, const char **ret_root, const char **ret_rel)
{
	static const char *const roots[] = SPAWN_CWD_ROOTS;

	if (!cwd)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
		size_t l = strlen(roots[i]);

		if (strncmp(cwd, roots[i], l) || (cwd[l] && cwd[l] != '/'))
			continue;
		/* Every '/' after the root goes: "/workspaces//p" is /workspaces/p, and a
		 * relative path that began with '/' would leave the root for openat2's
		 * RESOLVE_BENEATH (EXDEV). */
		const char *rel = cwd + l;
		while (*rel == '/')
			rel++;
		*ret_root = roots[i];
		*ret_rel = *rel ? rel : ".";
		return 0;
	}
	return -EINVAL;
}

static const char *env_path(char *const *envp)
{
	for (size_t i = 0; envp && envp[i]; i++)
		if (!strncmp(envp[i], "PATH=", 5))
			return envp[i] + 5;
	return ENVB_DEFAULT_PATH;
}

/* An agent's limit never above pistisd's own hard limit where pistisd cannot raise it
 * (docker run --ulimit nofile=64, systemd LimitNOFILE=, without CAP_SYS_RESOURCE: Docker's
 * default set). Before, the child's prlimit failed and every command with it ("setrlimit:
 * Operation not permitted"); the lower limit is the operator's, and a stricter one for the
 * agent. */
static void set_rlimit(struct child_args *a, int res, rlim_t v, bool can_raise)
{
	struct rlimit own;

	/* (a limit of 0 is never above ours: not asked) */
	if (!can_raise && v && getrlimit(res, &own) == 0 && own.rlim_max != RLIM_INFINITY &&
	    v > own.rlim_max)
		v = own.rlim_max;
	a->rl[a->n_rl].resource = res;
	a->rl[a->n_rl].lim.rlim_cur = v;
	a->rl[a->n_rl].lim.rlim_max = v;
	a->n_rl++;
}

static int open_pty(const struct spawn_opts *o, int *ret_master, int *ret_slave)
{
	_cleanup_close_ int m = -1, s = -1;
	struct winsize ws = {.ws_col = o->cols ? o->cols : 80, .ws_row = o->rows ? o->rows : 24};
	int unlock = 0;

	m = openat(AT_FDCWD, "/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -errno;
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0)
		return -errno;
	/* TIOCGPTPEER: the slave of exactly this master, no path lookup in /dev/pts. */
	s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		return -errno;
	if (ioctl(m, TIOCSWINSZ, &ws) < 0)
		return -errno;
	/* The agent owns its terminal (programs reopen /dev/tty); nobody else may write it. */
	if (fchown(s, o->uid, (gid_t)-1) < 0 || fchmod(s, 0600) < 0)
		return -errno;
	*ret_master = TAKE_FD(m);
	*ret_slave = TAKE_FD(s);
	return 0;
}

/* Close one of the parent's stream fds, telling the caller first (spawn_opts.on_close). */
static void close_stream(struct spawn_proc *p, int *fd)
{
	if (*fd < 0)
		return;
	if (p->opts_copy.on_close)
		p->opts_copy.on_close(p->opts_copy.on_close_userdata, *fd);
	*fd = safe_close(*fd);
}

/* The output side is over. With a pty, fd_in is a dup of the same master: its slave side
 * is gone, so input is over too, and closing the dup lets the open file die (a HUP'ing
 * master would otherwise stay ready in the caller's epoll set forever). */
static void close_output(struct spawn_proc *p, int *fd)
{
	close_stream(p, fd);
	if (p->opts_copy.stdio == SPAWN_STDIO_PTY && p->fd_out < 0)
		close_stream(p, &p->fd_in);
}

/* The error pipe is announced (on_close) only to a caller that was given it: one of
 * spawn_start_async, which may be watching it. */
static void close_exec_fd(struct spawn_proc *p)
{
	if (p->exec_announce)
		close_stream(p, &p->exec_fd);
	else
		p->exec_fd = safe_close(p->exec_fd);
}

static struct spawn_proc *proc_new(void)
{
	struct spawn_proc *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pid = -1;
	p->pidfd = p->fd_in = p->fd_out = p->fd_err = p->exec_fd = p->cgroup_fd = -1;
	return p;
}

static void proc_close(struct spawn_proc *p)
{
	p->pidfd = safe_close(p->pidfd);
	close_stream(p, &p->fd_in);
	close_stream(p, &p->fd_out);
	close_stream(p, &p->fd_err);
	close_exec_fd(p);
	p->cgroup_fd = safe_close(p->cgroup_fd);
}

static void cgroup_cleanup(struct spawn_proc *p, bool wait_empty)
{
	struct spawn_ctx *ctx = p->ctx;

	if (p->cgroup_fd < 0)
		return;
	/* A slot is pooled only while a child can still be cloned into it: one killed once
	 * is left for claim_slot, which renews it. */
	if (wait_empty && ctx->n_pool < CGROUP_POOL_MAX && cgroup_cmd_is_slot(p->cgroup_cmd) &&
	    (p->cgroup_empty || cgroup_populated(p->cgroup_fd) == 0) &&
	    (!ctx->cg.clone_into || cgroup_clone_ok(p->cgroup_fd))) {
		struct pooled_cgroup *pc = &ctx->pool[ctx->n_pool++];
		memcpy(pc->agent, p->cgroup_agent, sizeof(pc->agent));
		memcpy(pc->cmd, p->cgroup_cmd, sizeof(pc->cmd));
		pc->fd = TAKE_FD(p->cgroup_fd);
		return;
	}
	/* An empty slot is left in place, unlocked when proc_close closes its fd. A populated
	 * one goes on the dying list as a cgroup of its own does: left after one kill, a
	 * process that was being forked when it went out ran on as the agent's, in a slot
	 * every later claimer passes over, with no command, timeout or kill of its own. */
	if (cgroup_cmd_is_slot(p->cgroup_cmd)) {
		if (!wait_empty || p->cgroup_empty || cgroup_populated(p->cgroup_fd) != 1)
			return;
	} else if (cgroup_cmd_remove(&ctx->cg, p->cgroup_agent, p->cgroup_cmd) != -EBUSY ||
		   !wait_empty)
		return;
	if (ctx->n_dying >= CGROUP_DYING_MAX)
		return;
	if (!ctx->dying && !(ctx->dying = calloc(CGROUP_DYING_MAX, sizeof(*ctx->dying))))
		return; /* as with the list full */
	/* cgroup.kill is asynchronous and a killed process leaves its cgroup only once its
	 * memory is torn down: never waited for here (pistisd serve's loop would stall for
	 * every agent), but handed to spawn_ctx_reap_dying with the fd. With the list full
	 * (or no memory for it) the directory is left, for the next start-up's sweep of
	 * orphans. */
	(void)cgroup_kill(p->cgroup_fd);
	struct dying_cgroup *d = &ctx->dying[ctx->n_dying++];
	memcpy(d->cg.agent, p->cgroup_agent, sizeof(d->cg.agent));
	memcpy(d->cg.cmd, p->cgroup_cmd, sizeof(d->cg.cmd));
	d->cg.fd = TAKE_FD(p->cgroup_fd);
	d->since_ns = spawn_now_ns();
	d->due_ns = d->since_ns + DYING_RETRY_FIRST_MS * 1000000u;
	d->retry_ms = DYING_RETRY_FIRST_MS * 2;
	d->stuck_told = false;
}

/* Whether this start's child can be born in its command's cgroup by clone3's
 * CLONE_INTO_CGROUP: no moment outside it, and no write to cgroup.procs, which takes the
 * kernel's cgroup threadgroup lock for writing (an RCU grace period: rare stalls of 8-15
 * ms here under load). Only into a cgroup cgroup_clone_ok vouches for (see cgroup_kill for
 * the kernel behaviour that needs it), and not once clone3 was refused. Decided once a
 * start, for whichever way the child is made. */
static bool clone_into_cgroup(const struct spawn_ctx *ctx, int cgroup_fd)
{
	return cgroup_fd >= 0 && ctx->cg.clone_into && cgroup_clone_ok(cgroup_fd);
}

/* Otherwise the child joins by writing cgroup.procs as its first step, which reports the
 * step if the cgroup itself is the problem: the file is opened once a start. */
static int join_by_procs(int cgroup_fd, int *procs_fd, struct child_args *a)
{
	if (*procs_fd < 0) {
		*procs_fd = openat(cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (*procs_fd < 0)
			return negative_errno();
	}
	a->cgroup_procs_fd = *procs_fd;
	return 0;
}

/* Clone the fork-style child; returns as fork() does. into: clone3 into cgroup_fd first.
 * Where clone3 is refused (Docker's default seccomp profile answers ENOSYS, others EPERM)
 * or predates CLONE_INTO_CGROUP (before 5.7: EINVAL), that is remembered; then, and for
 * any other failure of clone3, the child joins through cgroup.procs. */
static pid_t clone_child(struct spawn_ctx *ctx, struct child_args *a, int cgroup_fd, bool into,
			 int *procs_fd, int *pidfd, enum spawn_step *ret_step)
{
	a->cgroup_procs_fd = -1;
	if (into) {
		struct clone3_args ca = {
			.flags = CLONE_PIDFD | CLONE_INTO_CGROUP,
			.pidfd = (uint64_t)(uintptr_t)pidfd,
			.exit_signal = SIGCHLD,
			.cgroup = (uint64_t)cgroup_fd,
		};
		pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));

		if (pid >= 0)
			return pid;
		if (errno == ENOSYS || errno == EPERM || errno == EINVAL || errno == E2BIG)
			ctx->cg.clone_into = false;
	}
	if (cgroup_fd >= 0) {
		int r = join_by_procs(cgroup_fd, procs_fd, a);
		if (r < 0) {
			*ret_step = SPAWN_STEP_CGROUP;
			errno = -r;
			return -1;
		}
	}
	return (pid_t)syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, pidfd, NULL, NULL);
}

/* The vfork-style start (spawn-vfork.c) where it is allowed (fs.suid_dumpable read now:
 * an admin may have changed it): by clone3 into the cgroup when into, else by clone with
 * the child joining through cgroup.procs. A refused clone3 sends the next starts to clone,
 * a refused clone turns the vfork-style start off for the context; busy, refused or not
 * possible here, this start goes the fork-style way. 0 with pid and pidfd, or < 0 for
 * that. */
static int vfork_child(struct spawn_ctx *ctx, struct child_args *a, int cgroup_fd, bool into,
		       int *procs_fd, pid_t *pid, int *pidfd)
{
	char buf[8] = "";
	ssize_t n;
	int r;

	if (!ctx->vfork)
		return -EOPNOTSUPP;
	n = pread(ctx->dumpable_fd, buf, sizeof(buf) - 1, 0);
	if (n < 2 || buf[1] != '\n' || buf[0] < '0' || buf[0] > '9' ||
	    !spawn_vfork_allowed(buf[0] - '0', ctx->release))
		return -EOPNOTSUPP;
	a->cgroup_procs_fd = -1;
	if (cgroup_fd >= 0 && !into) {
		r = join_by_procs(cgroup_fd, procs_fd, a);
		if (r < 0)
			return r; /* the fork-style start tries and reports it */
	}
	r = spawn_vfork_start(a, !into, into ? cgroup_fd : -1, pid, pidfd);
	if (r == -ENOSYS || r == -EPERM || r == -EINVAL || r == -E2BIG) {
		if (into)
			ctx->cg.clone_into = false;
		else
			ctx->vfork = false;
	}
	return r;
}

static int start(struct spawn_ctx *ctx, const struct spawn_opts *o, struct spawn_proc **ret,
		 struct spawn_error *ret_err)
{
	struct spawn_proc *p = NULL;
	struct child_args a = {0};
	_cleanup_close_ int err_r = -1, err_w = -1, in_child = -1, out_child = -1, err_child = -1,
			    procs_fd = -1, slave = -1;
	sigset_t all, old;
	int pidfd = -1, r;
	enum spawn_step step = SPAWN_STEP_PARENT_SIDE;
	bool into, scoped = ctx->scope == 0 && !o->share_abstract_sockets;
	pid_t pid;

	*ret_err = (struct spawn_error){0};
	if (!o->argv || !o->argv[0] || !o->argv[0][0] || o->cwd_root_fd < 0) {
		r = -EINVAL;
		goto fail;
	}
	/* Refused before any fork: root, -1 and anything outside the agent range. */
	r = privs_check_agent_ids(o->uid, o->gid, o->groups, o->n_groups);
	if (r < 0)
		goto fail;
	p = proc_new();
	if (!p) {
		r = -ENOMEM;
		goto fail;
	}
	p->ctx = ctx;
	p->opts_copy = *o;
	p->opts_copy.argv = NULL;
	p->opts_copy.envp = NULL;
	p->opts_copy.cwd = NULL;
	p->result.tree_control = "pgid";
	p->result.abstract_sockets = scoped ? "scoped" : "shared";

	{
		int fds[2];
		if (pipe2(fds, O_CLOEXEC) < 0)
			goto fail_errno;
		err_r = fds[0];
		err_w = fds[1];
	}
	if (o->stdio == SPAWN_STDIO_PTY) {
		r = open_pty(o, &p->fd_out, &slave);
		if (r < 0) {
			step = SPAWN_STEP_PTY;
			goto fail;
		}
		p->fd_in = fcntl(p->fd_out, F_DUPFD_CLOEXEC, 3);
		if (p->fd_in < 0)
			goto fail_errno;
		a.stdin_fd = a.stdout_fd = a.stderr_fd = slave;
		a.ctty_fd = slave;
	} else {
		int fds[2];
		if (o->stdin_pipe) {
			if (pipe2(fds, O_CLOEXEC) < 0)
				goto fail_errno;
			in_child = fds[0];
			p->fd_in = fds[1];
			a.stdin_fd = in_child;
		} else {
			a.stdin_fd = ctx->devnull_fd;
		}
		if (pipe2(fds, O_CLOEXEC) < 0)
			goto fail_errno;
		p->fd_out = fds[0];
		out_child = fds[1];
		if (pipe2(fds, O_CLOEXEC) < 0)
			goto fail_errno;
		p->fd_err = fds[0];
		err_child = fds[1];
		a.stdout_fd = out_child;
		a.stderr_fd = err_child;
		a.ctty_fd = -1;
	}

	/* The parent's ends only (the child's are other open files, or the pty slave). */
	if (p->fd_out >= 0)
		(void)fd_set_nonblock(p->fd_out, 1);
	if (p->fd_err >= 0)
		(void)fd_set_nonblock(p->fd_err, 1);
	if (p->fd_in >= 0)
		(void)fd_set_nonblock(p->fd_in, 1);

	a.cgroup_procs_fd = -1;
	if (o->cgroup_agent && ctx->cg.base_fd >= 0) {
		int reuse_fd = -1;
		size_t i;

		snprintf(p->cgroup_agent, sizeof(p->cgroup_agent), "%s", o->cgroup_agent);
		for (i = 0; i < ctx->n_pool; i++)
			if (!strcmp(ctx->pool[i].agent, p->cgroup_agent))
				break;
		if (i < ctx->n_pool) {
			memcpy(p->cgroup_cmd, ctx->pool[i].cmd, sizeof(p->cgroup_cmd));
			reuse_fd = ctx->pool[i].fd;
			ctx->pool[i] = ctx->pool[--ctx->n_pool];
		} else
			dying_slots_let_go(ctx, p->cgroup_agent);
		/* reuse_fd is taken over, on failure too. -EEXIST: a cmd-<pid>-<n> of an
		 * earlier pistisd with our pid is still held or populated (cgroup_cmd_create
		 * removes an empty, unheld one): never joined, the next number is tried. */
		for (unsigned tries = 0;; tries++) {
			if (reuse_fd < 0)
				snprintf(p->cgroup_cmd, sizeof(p->cgroup_cmd), "cmd-%d-%lu",
					 (int)ctx->self, ++ctx->counter);
			r = cgroup_cmd_create(&ctx->cg, p->cgroup_agent, o->gid, p->cgroup_cmd,
					      sizeof(p->cgroup_cmd), reuse_fd,
					      o->cgroup_agent_limits, &o->cgroup, &p->cgroup_fd,
					      NULL);
			if (r != -EEXIST || reuse_fd >= 0 || tries == 15)
				break;
		}
		if (r < 0) {
			step = SPAWN_STEP_CGROUP;
			goto fail;
		}
		p->cgroup_applied = r;
		p->result.tree_control = "cgroup";
	}

	a.err_fd = err_w;
	a.argv = o->argv;
	a.envp = o->envp ? o->envp : (char *const[]){NULL};
	a.path = env_path(o->envp);
	a.uid = o->uid;
	a.gid = o->gid;
	memcpy(a.groups, o->groups, sizeof(a.groups));
	a.n_groups = o->n_groups;
	a.cwd_root_fd = o->cwd_root_fd;
	a.hold_fd = o->hold_fd;
	a.cwd = o->cwd;
	a.no_openat2 = ctx->no_openat2;
	a.umask = o->umask == (mode_t)-1 ? SPAWN_UMASK_DEFAULT : (o->umask & 0777);
	bool raise = ctx->can_raise_limits;
	set_rlimit(&a, RLIMIT_NPROC, o->rlimits.nproc ? o->rlimits.nproc : 512, raise);
	set_rlimit(&a, RLIMIT_NOFILE, o->rlimits.nofile ? o->rlimits.nofile : 4096, raise);
	set_rlimit(&a, RLIMIT_FSIZE, o->rlimits.fsize ? o->rlimits.fsize : SPAWN_FSIZE_DEFAULT,
		   raise);
	set_rlimit(&a, RLIMIT_CORE, o->rlimits.core_allowed ? o->rlimits.core : 0, raise);
	set_rlimit(&a, RLIMIT_MSGQUEUE, o->rlimits.msgqueue, raise);
	/* Never above the others: no real-time scheduling, no nice value below pistisd's
	 * (whatever limits pistisd itself was started with). */
	set_rlimit(&a, RLIMIT_RTPRIO, 0, raise);
	set_rlimit(&a, RLIMIT_NICE, 0, raise);
	a.last_cap = ctx->last_cap;
	a.proc_fd = ctx->proc_fd;
	a.oom_score_adj = ctx->oom_score_adj;
	a.allow_setuid = o->allow_setuid;
	a.scope_abstract = scoped;
	a.keyctl_refused = ctx->keyctl_refused;
	a.audit_session = ctx->audit_sessions;
	a.bounding_keep =
		o->allow_setuid ? (o->bounding_keep ? o->bounding_keep : SPAWN_SETUID_BOUNDING) : 0;
	a.bpf.len = ctx->bpf.len;
	a.bpf.filter = (struct sock_filter *)ctx->bpf.insns; /* only read */
	a.parent = getpid();

	/* A vfork-style child made by the spawner thread (spawn-vfork.c: on a copy of a's
	 * strings), else a fork-style one (no CLONE_VM: its own copy of everything the parent
	 * prepared). Either way a child an agent stops (it has the agent's uid from
	 * setresuid to execve) cannot stop us: the exec is awaited with a deadline
	 * (spawn_exec_poll), by spawn_start or by the caller's own loop. Raw clone, not
	 * fork(): no atfork handlers, no libc state touched, and the pidfd comes with it.
	 * All signals are blocked across the clone so no handler of ours runs in the child
	 * before it resets them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	p->start_ns = spawn_now_ns();
	into = clone_into_cgroup(ctx, p->cgroup_fd);
	r = vfork_child(ctx, &a, p->cgroup_fd, into, &procs_fd, &pid, &pidfd);
	if (r == 0) {
		p->vforked = true;
		p->cloned_into_cgroup = p->cgroup_fd >= 0 && a.cgroup_procs_fd < 0;
	} else {
		/* a clone3 the vfork-style start saw refused is not tried again */
		pid = clone_child(ctx, &a, p->cgroup_fd, into && ctx->cg.clone_into, &procs_fd,
				  &pidfd, &step);
		if (pid == 0) {
			(void)spawn_child_main(&a); /* execs or exits */
			syscall(SYS_exit_group, 111);
		}
		r = pid < 0 ? -errno : 0;
		p->cloned_into_cgroup = pid > 0 && p->cgroup_fd >= 0 && a.cgroup_procs_fd < 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		goto fail;
	p->pid = pid;
	p->pidfd = pidfd;

	p->exec_fd = TAKE_FD(err_r);
	p->last_output_ns = p->start_ns;
	*ret = p;
	return 0;

fail_errno:
	r = negative_errno();
fail:
	ret_err->step = step;
	ret_err->error = -r;
	if (p) {
		if (p->pid > 0 && !p->reaped) {
			(void)kill(p->pid, SIGKILL);
			(void)wait4(p->pid, NULL, 0, NULL);
		}
		cgroup_cleanup(p, true);
		proc_close(p);
		free(p);
	}
	return r;
}

int spawn_start_async(struct spawn_ctx *ctx, const struct spawn_opts *o, struct spawn_proc **ret,
		      struct spawn_error *ret_err)
{
	int r = start(ctx, o, ret, ret_err);

	if (r >= 0)
		(*ret)->exec_announce = true;
	return r;
}

/* The start failed (a report, a torn report, no exec in time, or our own poll/read
 * failing): the child is killed through its pidfd and reaped, and everything else goes as
 * after a failure before the clone. p stays allocated, done, for spawn_free. */
static int exec_failed(struct spawn_proc *p, enum spawn_step step, int r,
		       struct spawn_error *ret_err)
{
	if (p->pid > 0 && !p->reaped) {
		(void)syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
		(void)wait4(p->pid, NULL, 0, NULL);
		p->reaped = p->released = true;
	}
	p->exec_err = (struct spawn_error){.step = step, .error = -r};
	*ret_err = p->exec_err;
	cgroup_cleanup(p, true);
	proc_close(p);
	return r;
}

/* Wait for the child to exec (EOF on the CLOEXEC error pipe), fail (a report on it) or
 * die, for at most wait_ms and never past SPAWN_EXEC_DEADLINE_MS after the clone. A child
 * that does not get there in time (an agent can SIGSTOP it once it has the agent's uid) is
 * killed through its pidfd and reaped: "timed out before exec". */
_Static_assert(sizeof(((struct spawn_proc *)0)->exec_report) == sizeof(struct child_report),
	       "spawn_proc.exec_report holds one struct child_report");

static uint64_t exec_deadline_ns(const struct spawn_proc *p)
{
	return p->start_ns + SPAWN_EXEC_DEADLINE_MS * 1000000u;
}

int spawn_exec_poll(struct spawn_proc *p, int wait_ms, struct spawn_error *ret_err)
{
	uint64_t deadline = exec_deadline_ns(p);
	uint64_t until = wait_ms < 0 ? UINT64_MAX : spawn_now_ns() + (uint64_t)wait_ms * 1000000u;
	char *rep = (char *)p->exec_report;

	*ret_err = (struct spawn_error){0};
	if (p->exec_fd < 0) {
		*ret_err = p->exec_err;
		return p->exec_err.step ? -p->exec_err.error : 1;
	}
	for (;;) {
		struct pollfd pf = {.fd = p->exec_fd, .events = POLLIN};
		uint64_t now = spawn_now_ns(), end = deadline < until ? deadline : until;
		int k;
		ssize_t n;

		/* Past the deadline, one last look: what the child did is decided by the pipe,
		 * not by when the caller got round to asking (an event loop busy elsewhere, or
		 * running the deadline timer before the pipe's event). An EOF or a report already
		 * there counts; only an empty pipe is "timed out before exec". */
		bool late = now >= deadline;

		k = poll(&pf, 1, now >= end ? 0 : (int)((end - now + 999999u) / 1000000u));
		if (k < 0 && errno != EINTR)
			return exec_failed(p, SPAWN_STEP_PARENT_SIDE, -errno, ret_err);
		if (k == 0 && late)
			return exec_failed(p, SPAWN_STEP_EXEC_TIMEOUT, -ETIMEDOUT, ret_err);
		if (k == 0) {
			now = spawn_now_ns();
			if (now >= until && now < deadline)
				return 0;
		}
		if (k <= 0)
			continue;
		n = read(p->exec_fd, rep + p->exec_report_got,
			 sizeof(p->exec_report) - p->exec_report_got);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return exec_failed(p, SPAWN_STEP_PARENT_SIDE, -errno, ret_err);
		}
		p->exec_report_got += (size_t)n;
		if (n > 0 && p->exec_report_got < sizeof(p->exec_report))
			continue;
		if (p->exec_report_got == 0) {
			/* EOF: exec'd (or died, which the pidfd reports later) */
			close_exec_fd(p);
			return 1;
		}
		if (p->exec_report_got != sizeof(p->exec_report))
			/* a torn report: the child is in an unknown state */
			return exec_failed(p, SPAWN_STEP_PARENT_SIDE, -EIO, ret_err);
		{
			int step = p->exec_report[0], error = p->exec_report[1];
			return exec_failed(p,
					   step > 0 && step < _SPAWN_STEP_MAX
						   ? (enum spawn_step)step
						   : SPAWN_STEP_EXEC,
					   error > 0 ? -error : -EIO, ret_err);
		}
	}
}

int spawn_start(struct spawn_ctx *ctx, const struct spawn_opts *o, struct spawn_proc **ret,
		struct spawn_error *ret_err)
{
	struct spawn_proc *p;
	int r;

	r = start(ctx, o, &p, ret_err);
	if (r < 0)
		return r;
	r = spawn_exec_poll(p, -1, ret_err);
	if (r < 0) {
		spawn_free(p);
		return r;
	}
	*ret = p;
	return 0;
}

static bool cmd_session(struct spawn_proc *p);
static unsigned session_signal(struct spawn_proc *p, int sig);

static void tree_signal(struct spawn_proc *p, int sig)
{
	if (p->cgroup_fd >= 0) {
		if (sig == SIGKILL && cgroup_kill(p->cgroup_fd) >= 0) {
			/* A leader that has not joined the cgroup yet (spawn step 2, right after
			 * clone: a start given up at once) is not in it. */
			if (!p->reaped && p->pidfd >= 0)
				(void)syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0);
			return;
		}
		/* No cgroup.term: signal every member by pid (they cannot change cgroup). */
		(void)cgroup_signal_procs(p->cgroup_fd, sig);
	}
	/* The process group as well: setsid made pgid = pid. Without a cgroup this is all
	 * we have, and a grandchild that called setsid() itself escapes it. Only while the
	 * leader is unreaped (running or our zombie): its pid, and so the group id, cannot
	 * be reused until we release it, so the signal never reaches a stranger's group. */
	if (!p->released)
		(void)kill(-p->pid, sig);
	if (!p->reaped && p->pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0);
	/* And what left the group: the command's audit session holds it still. */
	if (cmd_session(p))
		(void)session_signal(p, sig);
}

/* fn(pid, arg) for every process /proc (proc_fd) lists, until fn returns true: 1 then, 0
 * when the listing ended, -errno when it could not be read. */
static int proc_each(int proc_fd, bool (*fn)(pid_t pid, void *arg), void *arg)
{
	char buf[8192];
	_cleanup_close_ int dfd = -1;
	long n;

	if (proc_fd < 0)
		return -ENOENT;
	dfd = openat(proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			const struct linux_dirent64 *de = (const void *)(buf + off);
			char *q;
			long pid;

			off += de->d_reclen;
			if (de->d_name[0] < '1' || de->d_name[0] > '9')
				continue;
			pid = strtol(de->d_name, &q, 10);
			if (*q || pid <= 0 || pid > INT_MAX)
				continue;
			if (fn((pid_t)pid, arg))
				return 1;
		}
	}
	return n < 0 ? negative_errno() : 0;
}

static bool in_pgrp(pid_t pid, void *arg)
{
	pid_t pgid = *(pid_t *)arg;

	/* ESRCH: gone since the listing. */
	return pid != pgid && getpgid(pid) == pgid;
}

/* A process other than the leader in process group pgid (the leader is our zombie, so
 * kill(-pgid, 0) would always succeed). The pids come from /proc; each one's group from
 * getpgid(2), one system call (reading /proc/PID/stat took three). Without /proc, or if
 * it cannot be read, assume yes. */
static bool pgrp_has_others(const struct spawn_ctx *ctx, pid_t pgid)
{
	return proc_each(ctx->proc_fd, in_pgrp, &pgid) != 0;
}

/* The command's audit session (spawn-child.c, step 2c), read from its leader while the
 * leader is unreleased (its pid cannot be another's), kept once it is one of its own:
 * neither unset nor ours, which a child whose loginuid write failed (or has not been
 * made yet) still has. From then on the result says "session". */
static bool cmd_session(struct spawn_proc *p)
{
	char name[32];
	unsigned v;

	if (p->audit_sid_known)
		return true;
	if (p->cgroup_fd >= 0 || p->released || p->pid <= 0 || !p->ctx->audit_sessions)
		return false;
	snprintf(name, sizeof(name), "%d/sessionid", (int)p->pid);
	if (!read_session(p->ctx->proc_fd, name, &v) || v == SPAWN_AUDIT_SID_UNSET ||
	    v == p->ctx->own_session)
		return false;
	p->audit_sid = v;
	p->audit_sid_known = true;
	p->result.tree_control = "session";
	return true;
}

/* Members one stop has signalled already (NPROC is 512 per agent by default): a later
 * round skips them, so only members new since the last listing keep the rounds going, not
 * the ones still dying of the first round's SIGKILL (red team: 480 such members made
 * every round find them all, eight passes of ~30 ms each inside serve's loop). */
#define SESSION_SEEN_MAX 1024

struct session_walk {
	int proc_fd;
	unsigned sid;
	pid_t leader; /* ours to signal through its pidfd, or our zombie */
	int sig;      /* 0: stop at the first member */
	unsigned found;
	size_t n_seen;
	pid_t seen[SESSION_SEEN_MAX];
};

/* Whether this stop signalled pid already; remembers it if not (as far as there is room:
 * past it, a member counts as new each round, the rounds' old cost). */
static bool session_seen(struct session_walk *w, pid_t pid)
{
	for (size_t i = 0; i < w->n_seen; i++)
		if (w->seen[i] == pid)
			return true;
	if (w->n_seen < SESSION_SEEN_MAX)
		w->seen[w->n_seen++] = pid;
	return false;
}

static bool in_session(int proc_fd, pid_t pid, unsigned sid)
{
	char name[32];
	unsigned v;

	snprintf(name, sizeof(name), "%d/sessionid", (int)pid);
	return read_session(proc_fd, name, &v) && v == sid;
}

/* Every member of the session but the leader: counted and, with a signal, signalled
 * through a pidfd taken after the first read and checked by a second, so a pid reused
 * between the two by a process outside the session is left alone. */
static bool session_member(pid_t pid, void *arg)
{
	struct session_walk *w = arg;
	int fd;

	if (pid == w->leader || !in_session(w->proc_fd, pid, w->sid))
		return false;
	if (!w->sig)
		return ++w->found;
	if (session_seen(w, pid))
		return false;
	w->found++;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd >= 0 && in_session(w->proc_fd, pid, w->sid))
		(void)syscall(SYS_pidfd_send_signal, fd, w->sig, NULL, 0);
	safe_close(fd);
	return false;
}

/* Signals every process of the command's audit session, setsid()'d grandchildren
 * included. A SIGKILL goes in rounds until one finds no member it had not signalled (at
 * most 8): a member may have forked between the listing and its kill, never after it.
 * Returns how many new members the last round found; an unreadable /proc counts as one. */
static unsigned session_signal(struct spawn_proc *p, int sig)
{
	struct session_walk w = {
		.proc_fd = p->ctx->proc_fd, .sid = p->audit_sid, .leader = p->pid, .sig = sig};

	for (int round = 0; round < (sig == SIGKILL ? 8 : 1); round++) {
		w.found = 0;
		if (proc_each(w.proc_fd, session_member, &w) < 0)
			return 1;
		if (!w.found)
			break;
	}
	return w.found;
}

static bool session_has_others(struct spawn_proc *p)
{
	struct session_walk w = {.proc_fd = p->ctx->proc_fd, .sid = p->audit_sid, .leader = p->pid};

	return proc_each(w.proc_fd, session_member, &w) != 0;
}

/* Where an orphan of one of our commands' trees is re-parented: the nearest child
 * subreaper above the process that died, all of which are ours or our parents' (a
 * non-PID-1 pistisd-entry is one), or PID 1. Ours and each parent up to PID 1, at most: */
#define REAPERS_MAX 32

struct sweep {
	int proc_fd;
	const uid_t *uids; /* sorted */
	size_t n_uids;
	const struct spawn_sweep_root *roots; /* NULL: any root */
	size_t n_roots;
	/* Our mount ids, read at the first root that cannot be read. */
	struct mountinfo_ours mnt;
	unsigned found;
	pid_t reapers[REAPERS_MAX];
	size_t n_reapers;
};

static int cmp_uid(const void *a, const void *b)
{
	uid_t x = *(const uid_t *)a, y = *(const uid_t *)b;
	return x < y ? -1 : x > y;
}

/* What the sweeps read of /proc/PID/status: real, effective, saved and fs uids, the
 * parent, the session (0 where the kernel does not say, before Linux 4.1). False when the
 * process is gone, a zombie, or its status cannot be read. A main thread that has exited
 * while other threads run on shows "Z" too, with "Threads" above 1: that process is alive
 * (it holds its fds, it runs), and a SIGKILL to its pid ends it. */
struct proc_ids {
	unsigned long uid[4];
	long ppid, sid;
	bool named_pistisd; /* Name: pistisd (what prctl or the exec'd file's name says) */
	bool filtered;	    /* Seccomp: 2, a filter (every command's process has pistis's) */
};

static bool proc_ids(int proc_fd, pid_t pid, struct proc_ids *ret)
{
	char name[32], buf[2048];
	_cleanup_close_ int fd = -1;
	const char *st, *u, *pp, *ss, *th, *nm;
	unsigned long threads = 0;
	ssize_t n;

	snprintf(name, sizeof(name), "%d/status", (int)pid);
	fd = openat(proc_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = 0;
	/* All near the top: the first read holds them (the rest of the file is not needed). */
	st = proc_status_field(buf, "State");
	pp = proc_status_field(buf, "PPid");
	u = proc_status_field(buf, "Uid");
	ss = proc_status_field(buf, "NSsid");
	th = proc_status_field(buf, "Threads");
	nm = proc_status_field(buf, "Name");
	ret->named_pistisd = nm && !strncmp(nm, "pistisd\n", 8);
	/* Further down; past the first read (a process in hundreds of groups) counts as none. */
	nm = proc_status_field(buf, "Seccomp");
	ret->filtered = nm && nm[0] == '2' && (nm[1] == '\n' || !nm[1]);
	ret->sid = 0;
	if (ss)
		(void)sscanf(ss, "%ld", &ret->sid);
	if (th)
		(void)sscanf(th, "%lu", &threads);
	return st && pp && u && (*st != 'Z' || threads > 1) && *st != 'X' &&
	       sscanf(pp, "%ld", &ret->ppid) == 1 &&
	       sscanf(u, "%lu %lu %lu %lu", &ret->uid[0], &ret->uid[1], &ret->uid[2],
		      &ret->uid[3]) == 4;
}

/* Whether any of the ids is one of s->uids. */
static bool ids_match(const struct sweep *s, const struct proc_ids *id)
{
	for (size_t i = 0; i < 4; i++) {
		uid_t x = (uid_t)id->uid[i];
		/* The range as well: a registry that named root would never make us kill it. */
		if (users_uid_is_agent(x) && bsearch(&x, s->uids, s->n_uids, sizeof(x), cmp_uid))
			return true;
	}
	return false;
}

static bool ids_all_tools(const struct proc_ids *id)
{
	for (size_t i = 0; i < 4; i++)
		if (id->uid[i] != USERS_TOOLS_UID)
			return false;
	return true;
}

/* Whether /proc/PID/status names a live process (not a zombie) any of whose real,
 * effective, saved or file-system uids is one of s->uids. */
static bool agent_process(const struct sweep *s, pid_t pid)
{
	struct proc_ids id;

	return proc_ids(s->proc_fd, pid, &id) && ids_match(s, &id);
}

/* How many parents up a trusted command's chain is followed (sudo, its monitor, the
 * script's shell and what that runs: a handful). */
#define TOOLS_CHAIN_MAX 16

static void find_reapers(struct sweep *s)
{
	struct proc_ids id;
	pid_t pid = getpid();

	while (s->n_reapers < REAPERS_MAX && pid > 0) {
		s->reapers[s->n_reapers++] = pid;
		if (pid == 1 || !proc_ids(s->proc_fd, pid, &id))
			break;
		pid = (pid_t)id.ppid;
	}
}

static bool is_reaper(const struct sweep *s, long pid)
{
	for (size_t i = 0; i < s->n_reapers; i++)
		if (s->reapers[i] == pid)
			return true;
	return false;
}

/* Whether pid is a trusted command one of s->uids started: pi-tools' in every id (sudo
 * made it so), and its parents, through other such processes, reach one of those agents'
 * processes (the sudo, which keeps the agent's real uid) or, orphaned, one of the
 * reapers (its sudo is gone, which a trusted command's never is while it runs: the agent
 * killed it) from a session an agent's process leads or none does any more (the agent's
 * setsid'ed grandchild or sudo's monitor, gone: nothing tells which agent's then, so any
 * agent's sweep takes it). No agent can signal it (another uid; sudo, without CAP_KILL,
 * cannot forward), so where no cgroup holds the command's tree only this finds it. A
 * chain through anything else (root's, another agent's sudo), from outside our pid
 * namespace (parent 0) or a living session of root's (a shell that started it and
 * pistisd) is left. */
static bool agents_trusted_command(const struct sweep *s, pid_t pid)
{
	struct proc_ids id, leader;

	if (!proc_ids(s->proc_fd, pid, &id) || !ids_all_tools(&id))
		return false;
	for (unsigned depth = 0; depth < TOOLS_CHAIN_MAX; depth++) {
		if (is_reaper(s, id.ppid))
			return id.sid > 0 && (!proc_ids(s->proc_fd, (pid_t)id.sid, &leader) ||
					      ids_match(s, &leader));
		if (!proc_ids(s->proc_fd, (pid_t)id.ppid, &id))
			return false; /* gone since: the next sweep sees where it went */
		if (ids_match(s, &id))
			return true;
		if (!ids_all_tools(&id))
			return false;
	}
	return false;
}

struct task_root {
	int task_fd;
	pid_t pid;
	struct stat *st;
	int r;
};

static bool thread_root(pid_t tid, void *arg)
{
	struct task_root *t = arg;
	char name[32];

	if (tid == t->pid)
		return false;
	snprintf(name, sizeof(name), "%d/root", (int)tid);
	t->r = fstatat(t->task_fd, name, t->st, 0) == 0 ? 0 : negative_errno();
	return t->r == 0;
}

/* The root directory of a thread of pid that still runs: /proc/PID/root, or where the
 * main thread has exited (it has no root any more: ENOENT) another thread's,
 * /proc/PID/task/TID/root. 0 or -errno. */
static int task_root(int proc_fd, pid_t pid, struct stat *ret)
{
	_cleanup_close_ int task_fd = -1;
	struct task_root t = {.pid = pid, .st = ret, .r = -ENOENT};
	char name[32];

	snprintf(name, sizeof(name), "%d/root", (int)pid);
	if (fstatat(proc_fd, name, ret, 0) == 0)
		return 0;
	if (errno != ENOENT)
		return negative_errno();
	snprintf(name, sizeof(name), "%d/task", (int)pid);
	task_fd = openat(proc_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (task_fd < 0)
		return negative_errno();
	t.task_fd = task_fd;
	if (proc_each(task_fd, thread_root, &t) < 0 && t.r == -ENOENT)
		return -ENOENT;
	return t.r;
}

static void sweep_done(struct sweep *s)
{
	mountinfo_ours_done(&s->mnt);
}

/* Whether the process's root directory is one of s->roots. Gone (ENOENT, ESRCH), it is
 * not. /proc/PID/root needs ptrace access (CAP_SYS_PTRACE, which Docker's default set
 * leaves out): unreadable, it counts as in unless its mounts are another mount
 * namespace's. In a PID namespace shared with another container (docker run --pid host or
 * --pid container:X, Kubernetes shareProcessNamespace) that container's agents have our
 * agents' uids, and counting them in killed them (red team, shared-pidns.sh). Our agents
 * cannot leave our mount namespace (unshare, setns, clone with CLONE_NEW* are refused). */
static bool in_roots(struct sweep *s, pid_t pid)
{
	struct stat st;
	int r;

	if (!s->roots)
		return true;
	r = task_root(s->proc_fd, pid, &st);
	if (r < 0)
		return r != -ENOENT && r != -ESRCH &&
		       !mountinfo_pid_elsewhere(s->proc_fd, &s->mnt, pid);
	for (size_t i = 0; i < s->n_roots; i++)
		if (st.st_dev == s->roots[i].dev && st.st_ino == s->roots[i].ino)
			return true;
	return false;
}

static bool sweep_one(pid_t pid, void *arg)
{
	struct sweep *s = arg;
	int pidfd;

	/* A first look without a pidfd: most processes on the host are no agent's, and a
	 * pidfd_open each doubled the sweep's cost (pgid mode runs it at every command end;
	 * red team: 30-100 ms in serve's loop with 400 processes about). */
	if (!agent_process(s, pid))
		return false;
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 && errno != ENOSYS)
		return false; /* gone */
	/* The pidfd is opened before the status that decides is read, and the signal goes
	 * through it: if the process ended and its pid was reused before that read, the
	 * signal finds the pidfd's process gone (ESRCH) and never reaches the stranger whose
	 * status was read. */
	if (agent_process(s, pid) && in_roots(s, pid)) {
		if (pidfd < 0 ? kill(pid, SIGKILL) == 0
			      : syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0)
			s->found++;
	}
	safe_close(pidfd);
	return false;
}

/* The agents' trusted commands, found before any of their processes is killed (a chain
 * broken by a kill would hide them), then killed together; more than a batch: the next
 * sweep takes the rest. */
#define TOOLS_BATCH 64
struct tools_sweep {
	struct sweep *s;
	int pidfd[TOOLS_BATCH];
	size_t n;
};

static bool collect_trusted(pid_t pid, void *arg)
{
	struct tools_sweep *t = arg;
	int pidfd;

	if (t->n == TOOLS_BATCH)
		return true;
	if (!agents_trusted_command(t->s, pid)) /* a first look, as in sweep_one */
		return false;
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 && errno != ENOSYS)
		return false; /* gone */
	if (agents_trusted_command(t->s, pid) && in_roots(t->s, pid)) {
		if (pidfd >= 0) {
			t->pidfd[t->n++] = pidfd;
			return false;
		}
		if (kill(pid, SIGKILL) == 0)
			t->s->found++;
	}
	safe_close(pidfd);
	return false;
}

int spawn_kill_agent_processes_in(int proc_fd, uid_t *uids, size_t n,
				  const struct spawn_sweep_root *roots, size_t n_roots)
{
	struct sweep s = {
		.proc_fd = proc_fd, .uids = uids, .n_uids = n, .roots = roots, .n_roots = n_roots};
	struct tools_sweep t = {.s = &s};
	int r;

	if (n == 0)
		return 0;
	qsort(uids, n, sizeof(*uids), cmp_uid);
	find_reapers(&s);
	r = proc_each(proc_fd, collect_trusted, &t);
	for (size_t i = 0; i < t.n; i++) {
		if (syscall(SYS_pidfd_send_signal, t.pidfd[i], SIGKILL, NULL, 0) == 0)
			s.found++;
		safe_close(t.pidfd[i]);
	}
	if (r >= 0)
		r = proc_each(proc_fd, sweep_one, &s);
	sweep_done(&s);
	return r < 0 ? r : (int)s.found;
}

/* Our root directory, for the sweeps that are ours only. */
static int own_root(struct spawn_sweep_root *ret)
{
	struct stat st;

	if (stat("/", &st) < 0)
		return negative_errno();
	*ret = (struct spawn_sweep_root){.dev = st.st_dev, .ino = st.st_ino};
	return 0;
}

int spawn_kill_agent_processes(const struct spawn_ctx *ctx, uid_t *uids, size_t n)
{
	struct spawn_sweep_root root;
	int r = own_root(&root);

	/* Ours only: in a PID namespace shared with other sandboxes (docker run --pid host,
	 * --pid container:X, Kubernetes shareProcessNamespace) or beside a chroot, the same
	 * uids are theirs too (every sandbox's first agent is 10100), and a tightening apply
	 * or the process-group mode's sweep killed their processes (red team,
	 * shared-pidns.sh). */
	if (r < 0)
		return r;
	return spawn_kill_agent_processes_in(ctx->proc_fd, uids, n, &root, 1);
}

struct beyond {
	struct sweep s;
	pid_t found;
};

static bool outside_root(pid_t pid, void *arg)
{
	struct beyond *b = arg;

	if (!agent_process(&b->s, pid) || in_roots(&b->s, pid))
		return false;
	b->found = pid;
	return true;
}

pid_t spawn_uid_beyond_root(const struct spawn_ctx *ctx, uid_t uid)
{
	struct spawn_sweep_root root;
	struct beyond b = {.s = {.proc_fd = ctx->proc_fd,
				 .uids = &uid,
				 .n_uids = 1,
				 .roots = &root,
				 .n_roots = 1}};

	if (own_root(&root) < 0 || proc_each(ctx->proc_fd, outside_root, &b) < 0)
		b.found = 0;
	sweep_done(&b.s);
	return b.found;
}

/* The audit sessions of commands a live pistisd still tracks (its children's), for
 * spawn_kill_orphaned_sessions. More than this many at once is no sandbox's. */
#define TRACKED_SESSIONS_MAX 4096

struct orphan_sweep {
	int proc_fd;
	struct sweep roots; /* ours only: in_roots */
	unsigned own_session;
	const uid_t *uids; /* sorted */
	size_t n_uids;
	size_t n_tracked;
	bool overflow;
	unsigned tracked[TRACKED_SESSIONS_MAX];
	unsigned found;
	size_t n_seen;
	pid_t seen[SESSION_SEEN_MAX];
};

/* A pistisd that runs: root in every id and named pistisd, which no agent can make. */
static bool live_pistisd(int proc_fd, pid_t pid)
{
	struct proc_ids id;

	if (pid <= 0 || !proc_ids(proc_fd, pid, &id) || !id.named_pistisd)
		return false;
	for (size_t i = 0; i < 4; i++)
		if (id.uid[i] != 0)
			return false;
	return true;
}

static void track_session(struct orphan_sweep *o, unsigned sid)
{
	if (o->n_tracked < TRACKED_SESSIONS_MAX)
		o->tracked[o->n_tracked++] = sid;
	else
		o->overflow = true;
}

static bool session_tracked(const struct orphan_sweep *o, unsigned sid)
{
	for (size_t i = 0; i < o->n_tracked; i++)
		if (o->tracked[i] == sid)
			return true;
	return o->overflow; /* cannot tell: keep */
}

/* The audit session a command of a dead pistisd left, and its agent: the session is one of
 * the commands' own (set, not ours) and its loginuid, which spawn-child.c's step 2c made
 * the agent's uid, is one of o->uids. */
static bool command_session(const struct orphan_sweep *o, pid_t pid, unsigned *ret_sid)
{
	char name[32];
	unsigned sid, login;
	uid_t u;

	snprintf(name, sizeof(name), "%d/sessionid", (int)pid);
	if (!read_session(o->proc_fd, name, &sid) || sid == SPAWN_AUDIT_SID_UNSET ||
	    sid == o->own_session)
		return false;
	snprintf(name, sizeof(name), "%d/loginuid", (int)pid);
	if (!read_session(o->proc_fd, name, &login))
		return false;
	u = (uid_t)login;
	if (!users_uid_is_agent(u) || !bsearch(&u, o->uids, o->n_uids, sizeof(u), cmp_uid))
		return false;
	*ret_sid = sid;
	return true;
}

/* First pass: the sessions of the commands a live pistisd (a `pistisd run`, another
 * daemon) started and still waits for: its children's. */
static bool note_tracked(pid_t pid, void *arg)
{
	struct orphan_sweep *o = arg;
	struct proc_ids id;
	unsigned sid;

	if (!command_session(o, pid, &sid) || session_tracked(o, sid) ||
	    !proc_ids(o->proc_fd, pid, &id) || !live_pistisd(o->proc_fd, (pid_t)id.ppid))
		return false;
	track_session(o, sid);
	return false;
}

/* Second pass: SIGKILL every member of an untracked command session, through a pidfd
 * taken before the second look that decides. */
static bool kill_untracked(pid_t pid, void *arg)
{
	struct orphan_sweep *o = arg;
	struct proc_ids id;
	unsigned sid, again;
	int fd;

	if (!command_session(o, pid, &sid) || session_tracked(o, sid) ||
	    !proc_ids(o->proc_fd, pid, &id))
		return false;
	/* Every process of a command has the spawn core's seccomp filter, which nothing takes
	 * away (sudo neither): one without is no command's. On a plain machine a user of a
	 * directory service (sss, ldap) may have an agent's uid, which /etc/passwd does not
	 * show (check's nss_sources), and a login gives its session that loginuid: in serve's
	 * root, "/" there, such a session looked like a dead daemon's command and was killed
	 * at every start. */
	if (!id.filtered)
		return false;
	/* Started since the first pass by a live pistisd: tracked from now on. */
	if (live_pistisd(o->proc_fd, (pid_t)id.ppid)) {
		track_session(o, sid);
		return false;
	}
	for (size_t i = 0; i < o->n_seen; i++)
		if (o->seen[i] == pid)
			return false;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return false; /* gone */
	if (command_session(o, pid, &again) && again == sid && in_roots(&o->roots, pid) &&
	    syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) == 0) {
		o->found++;
		if (o->n_seen < SESSION_SEEN_MAX)
			o->seen[o->n_seen++] = pid;
	}
	safe_close(fd);
	return false;
}

static void orphan_sweep_freep(struct orphan_sweep **o)
{
	if (*o)
		sweep_done(&(*o)->roots);
	free(*o);
}

int spawn_kill_orphaned_sessions(const struct spawn_ctx *ctx, uid_t *uids, size_t n)
{
	_cleanup_(orphan_sweep_freep) struct orphan_sweep *o = NULL;
	struct spawn_sweep_root root;
	unsigned total = 0;
	int r;

	if (n == 0 || ctx->cg.base_fd >= 0 || !ctx->audit_sessions)
		return 0;
	/* Ours only, as users remove does: beside a chroot's sandbox, another sandbox's root
	 * (or the machine's own users) may have the uids our registry hands out. */
	r = own_root(&root);
	if (r < 0)
		return r;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	qsort(uids, n, sizeof(*uids), cmp_uid);
	o->proc_fd = ctx->proc_fd;
	o->roots = (struct sweep){.proc_fd = ctx->proc_fd, .roots = &root, .n_roots = 1};
	o->own_session = ctx->own_session;
	o->uids = uids;
	o->n_uids = n;
	r = proc_each(o->proc_fd, note_tracked, o);
	if (r < 0)
		return r;
	/* Rounds, as a command's own stop: a member may fork between a listing and its kill,
	 * never after it. */
	for (int round = 0; round < 8; round++) {
		o->found = 0;
		r = proc_each(o->proc_fd, kill_untracked, o);
		if (r < 0)
			return r;
		total += o->found;
		if (!o->found)
			break;
	}
	return (int)total;
}

/* As the agent (privs_run_as_agent): SIGKILL to every process it may signal, which is
 * every process of its uid, at once: kill(-1) walks the process list with forks held off,
 * and a process with SIGKILL pending cannot complete a fork, so one that keeps forking and
 * letting its parent exit is not missed as a /proc listing misses it. */
static int kill_every_process(const void *arg)
{
	(void)arg;
	return syscall(SYS_kill, -1, SIGKILL) < 0 && errno != ESRCH ? 1 : 0;
}

int spawn_kill_uid(uid_t uid)
{
	int r = privs_run_as_agent(uid, kill_every_process, NULL);

	return r == 0 ? 0 : r < 0 ? r : -EIO;
}

static bool is_agent_process(pid_t pid, void *arg)
{
	return agent_process(arg, pid);
}

bool spawn_uid_has_processes(int proc_fd, uid_t uid)
{
	struct sweep s = {.proc_fd = proc_fd, .uids = &uid, .n_uids = 1};

	/* An error (no /proc) counts as yes: the caller then leaves things as they are. */
	return proc_each(proc_fd, is_agent_process, &s) != 0;
}

bool spawn_agent_has_processes(const struct spawn_ctx *ctx, uid_t uid)
{
	return spawn_uid_has_processes(ctx->proc_fd, uid);
}

struct elsewhere {
	struct sweep s;
	pid_t self;
	pid_t found, child;
};

/* A process of the uid whose parent is a live pistisd other than us: its command. */
static bool commanded_elsewhere(pid_t pid, void *arg)
{
	struct elsewhere *e = arg;
	struct proc_ids id;

	if (!proc_ids(e->s.proc_fd, pid, &id) || !ids_match(&e->s, &id) || id.ppid == e->self ||
	    !live_pistisd(e->s.proc_fd, (pid_t)id.ppid) || !in_roots(&e->s, pid))
		return false;
	e->found = (pid_t)id.ppid;
	e->child = pid;
	return true;
}

pid_t spawn_uid_commanded_elsewhere(const struct spawn_ctx *ctx, uid_t uid, pid_t *ret_child)
{
	struct spawn_sweep_root root;
	int r;
	struct elsewhere e = {
		.s = {.proc_fd = ctx->proc_fd,
		      .uids = &uid,
		      .n_uids = 1,
		      .roots = &root,
		      .n_roots = 1},
		.self = getpid(),
	};

	/* Ours only: beside a chroot's sandbox, or with the PID namespace shared between
	 * sandboxes (docker run --pid host), another sandbox's daemon runs commands of the
	 * same uid (every sandbox's first agent is 10100), and taking those for ours left our
	 * own strays running. */
	if (own_root(&root) < 0)
		return 0;
	r = proc_each(ctx->proc_fd, commanded_elsewhere, &e);
	sweep_done(&e.s);
	if (r != 1)
		return 0;
	if (ret_child)
		*ret_child = e.child;
	return e.found;
}

int spawn_ctx_proc_fd(const struct spawn_ctx *ctx)
{
	return ctx->proc_fd;
}

/* Directories from the tree's root up to ours at most: a deeper root is no root of a
 * process that can reach the tree but through a mount, which the walk does not cross. */
#define ROOT_CHAIN_MAX 4096

/* root_fd's directory and each one above it, up to our own root ('..' of which is
 * itself): a process whose root is one of them can reach the tree by path. */
static int root_chain(int root_fd, struct spawn_sweep_root **ret, size_t *ret_n)
{
	_cleanup_free_ struct spawn_sweep_root *v = NULL;
	_cleanup_close_ int fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
	size_t n = 0;

	for (;;) {
		struct stat st;
		int up;

		if (fd < 0 || fstat(fd, &st) < 0)
			return negative_errno();
		if (n && v[n - 1].dev == st.st_dev && v[n - 1].ino == st.st_ino)
			break;
		if (n == ROOT_CHAIN_MAX)
			return -ELOOP;
		if (n % 64 == 0) {
			struct spawn_sweep_root *nv = reallocarray(v, n + 64, sizeof(*v));

			if (!nv)
				return -ENOMEM;
			v = nv;
		}
		v[n++] = (struct spawn_sweep_root){.dev = st.st_dev, .ino = st.st_ino};
		up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		safe_close(fd);
		fd = up;
	}
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

int spawn_kill_agents_reaching(int root_fd, uid_t *uids, size_t n, unsigned *ret_killed)
{
	_cleanup_free_ struct spawn_sweep_root *roots = NULL;
	_cleanup_close_ int proc_fd = -1;
	uint64_t deadline = spawn_now_ns() + SPAWN_KILL_AGENTS_SEC * 1000000000ull;
	size_t n_roots = 0;
	int r;

	*ret_killed = 0;
	if (n == 0)
		return 0;
	r = root_chain(root_fd, &roots, &n_roots);
	if (r < 0)
		return r;
	proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0)
		return negative_errno();
	for (;;) {
		int k = spawn_kill_agent_processes_in(proc_fd, uids, n, roots, n_roots);

		if (k <= 0)
			return k;
		if (spawn_now_ns() > deadline) {
			*ret_killed = (unsigned)k; /* those still there */
			return -ETIME;
		}
		*ret_killed += (unsigned)k;
		/* Time to die: the next sweep should not find them again, only what forked. */
		(void)nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
}

static bool tree_alive(struct spawn_proc *p)
{
	if (p->cgroup_fd >= 0)
		return cgroup_populated(p->cgroup_fd) > 0;
	if (p->released)
		return false;
	if (!p->reaped)
		return kill(-p->pid, 0) == 0;
	/* The group is inside the session (setpgid stays within a POSIX session, which the
	 * leader's setsid made its own): one test covers both. */
	return cmd_session(p) ? session_has_others(p) : pgrp_has_others(p->ctx, p->pid);
}

/* Reap the leader for good (its status was taken with WNOWAIT): after this, its pid, and
 * the group id, may be reused, so nothing signals the group any more. */
static void release_leader(struct spawn_proc *p)
{
	if (p->pid <= 0 || p->released)
		return;
	(void)wait4(p->pid, NULL, 0, p->reaped ? NULL : &p->result.rusage);
	p->released = true;
}

static void finish_outputs(struct spawn_proc *p)
{
	close_output(p, &p->fd_out);
	close_output(p, &p->fd_err);
	if (!p->opts_copy.keep_children) {
		if (tree_alive(p)) {
			p->result.left_children_killed = true;
			tree_signal(p, SIGKILL);
		} else if (p->cgroup_fd >= 0) {
			/* Nothing left in it, and only root can put anything back. */
			p->cgroup_empty = true;
		}
	}
	if (p->reaped)
		release_leader(p);
}

ssize_t spawn_read(struct spawn_proc *p, int fd, void *buf, size_t size)
{
	ssize_t n;
	uint64_t keep;

	if (fd < 0 || (fd != p->fd_out && fd != p->fd_err))
		return -EBADF;
	n = read(fd, buf, size);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -EAGAIN;
	if (n <= 0) {
		/* EOF, or EIO from a pty master once every slave fd is closed. */
		close_output(p, fd == p->fd_out ? &p->fd_out : &p->fd_err);
		if (p->reaped && p->fd_out < 0 && p->fd_err < 0)
			finish_outputs(p);
		return 0;
	}
	p->last_output_ns = spawn_now_ns();
	if (fd == p->fd_out)
		p->result.out_bytes += (uint64_t)n;
	else
		p->result.err_bytes += (uint64_t)n;
	if (!p->opts_copy.max_output)
		return n;
	keep = p->result.out_bytes + p->result.err_bytes - p->result.dropped_bytes - (uint64_t)n;
	keep = keep >= p->opts_copy.max_output ? 0 : p->opts_copy.max_output - keep;
	if ((uint64_t)n > keep) {
		p->result.dropped_bytes += (uint64_t)n - keep;
		p->result.truncated = true;
		n = (ssize_t)keep;
	}
	return n ? n : -EAGAIN;
}

/* The command's main process has exited: its pty's slave becomes root's, mode 0, through a
 * peer fd of the master (no path lookup). Fds already open (a kept background child) keep
 * working; what ends is opening /dev/pts/N by its path as the agent's uid, while pistisd
 * still holds the master to drain it (as long as a reader is paused) — after `users remove
 * --forget` that uid may be another agent's, which could then write into this command's
 * output stream. The peer is an O_PATH fd, which does not open the terminal: a real open
 * fails with EBUSY once the command has set TIOCEXCL on its slave, for every caller without
 * CAP_SYS_ADMIN (pistisd under Docker's defaults), and left the slave the agent's (red
 * team). Owner first, so the agent can no longer change the mode; the mode through the
 * fd's magic link (fchmod takes no O_PATH fd). Best effort: a failure leaves it as it was. */
static void pty_slave_revoke(struct spawn_proc *p)
{
	char path[sizeof("/proc/self/fd/") + 12];
	_cleanup_close_ int s = -1;

	if (p->opts_copy.stdio != SPAWN_STDIO_PTY || p->fd_out < 0)
		return;
	s = ioctl(p->fd_out, TIOCGPTPEER, O_PATH | O_CLOEXEC);
	if (s < 0) /* a kernel that would not hand out an O_PATH peer: as before */
		s = ioctl(p->fd_out, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (s < 0)
		return;
	if (fchownat(s, "", 0, 0, AT_EMPTY_PATH) < 0)
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", s);
	(void)chmod(path, 0);
}

int spawn_reap(struct spawn_proc *p)
{
	siginfo_t si = {0};
	int status = 0;

	if (p->reaped)
		return 1;
	/* WNOWAIT: the status and rusage, but the leader stays a zombie until finish_outputs
	 * has dealt with the rest of its process group (release_leader). */
	if (syscall(SYS_waitid, P_PIDFD, p->pidfd, &si, WEXITED | WNOHANG | WNOWAIT,
		    &p->result.rusage) < 0)
		return -errno;
	if (si.si_pid == 0)
		return 0;
	if (si.si_code == CLD_EXITED)
		status = (si.si_status & 0xff) << 8;
	else
		status = (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
	p->reaped = true;
	/* The leader is still our zombie: its audit session can be read now, whatever is
	 * done with its tree later (keep_children included), so the result says it. */
	(void)cmd_session(p);
	p->exited_ns = spawn_now_ns();
	p->result.raw_status = status;
	p->result.wall_us = (p->exited_ns - p->start_ns) / 1000;
	if (WIFEXITED(status)) {
		p->result.end = SPAWN_END_EXITED;
		p->result.exit_code = WEXITSTATUS(status);
	} else {
		p->result.end = SPAWN_END_SIGNALED;
		p->result.term_signal = WTERMSIG(status);
		p->result.core_dumped = WCOREDUMP(status);
	}
	if (p->stop_reason)
		p->result.end = p->stop_reason;
	p->pidfd = safe_close(p->pidfd);
	pty_slave_revoke(p);
	/* Output ended already: nothing to drain. */
	if (p->fd_out < 0 && p->fd_err < 0)
		finish_outputs(p);
	return 1;
}

bool spawn_tree_alive(struct spawn_proc *p)
{
	return tree_alive(p);
}

int spawn_kill_leftovers(struct spawn_proc *p)
{
	if (!p->reaped || !tree_alive(p))
		return 0;
	p->result.left_children_killed = true;
	tree_signal(p, SIGKILL);
	return 1;
}

int spawn_signal(struct spawn_proc *p, int sig)
{
	/* The main process is gone: what it left (still its tree: the cgroup, or the process
	 * group while the leader is held) gets the signal instead. */
	if (p->reaped) {
		if (!tree_alive(p))
			return -ESRCH;
		tree_signal(p, sig);
		return 0;
	}
	if (syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0) < 0)
		return -errno;
	return 0;
}

static void stop_with(struct spawn_proc *p, enum spawn_end why)
{
	uint64_t grace = p->opts_copy.grace_ms ? p->opts_copy.grace_ms : SPAWN_GRACE_MS_DEFAULT;

	if (p->stop_reason || p->reaped)
		return;
	p->stop_reason = why;
	p->stop_ns = spawn_now_ns();
	p->kill_ns = p->stop_ns + grace * 1000000u;
	tree_signal(p, SIGTERM);
	/* A stopped process (SIGSTOP, a job-control stop on its pty, a sibling's kill -STOP)
	 * runs no handler until it is continued: without this its SIGTERM trap never ran, and
	 * the grace ended in SIGKILL (as pistisd-entry and systemd do, TERM then CONT). */
	tree_signal(p, SIGCONT);
}

int spawn_stop(struct spawn_proc *p)
{
	if (p->reaped)
		return -ESRCH;
	stop_with(p, SPAWN_END_CANCELLED);
	return 0;
}

int spawn_resize(struct spawn_proc *p, unsigned short cols, unsigned short rows)
{
	struct winsize ws = {.ws_col = cols, .ws_row = rows};

	if (p->opts_copy.stdio != SPAWN_STDIO_PTY || p->fd_out < 0)
		return -ENOTTY;
	/* The kernel sends SIGWINCH to the terminal's foreground process group. */
	return ioctl(p->fd_out, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

static void deadline_min(uint64_t *best, uint64_t t)
{
	if (t && (!*best || t < *best))
		*best = t;
}

int spawn_next_timeout_ms(const struct spawn_proc *p)
{
	uint64_t next = 0, now = spawn_now_ns();
	const struct spawn_opts *o = &p->opts_copy;

	if (p->exec_fd >= 0)
		deadline_min(&next, exec_deadline_ns(p));
	if (p->reaped) {
		uint64_t drain = o->drain_ms ? o->drain_ms : SPAWN_DRAIN_MS_DEFAULT;
		if (p->fd_out >= 0 || p->fd_err >= 0)
			deadline_min(&next, p->exited_ns + drain * 1000000u);
	} else if (p->stop_reason) {
		if (!p->sigkilled)
			deadline_min(&next, p->kill_ns);
	} else {
		if (o->timeout_ms)
			deadline_min(&next, p->start_ns + o->timeout_ms * 1000000u);
		if (o->idle_timeout_ms)
			deadline_min(&next, p->last_output_ns + o->idle_timeout_ms * 1000000u);
	}
	if (!next)
		return -1;
	if (next <= now)
		return 0;
	/* A deadline past INT_MAX ms (~24.8 days; timeouts may be longer) is a wake-up at
	 * INT_MAX ms, after which the caller asks again: never a negative poll timeout
	 * ("forever") or a cancelled timer. */
	uint64_t ms = (next - now + 999999u) / 1000000u;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

void spawn_tick(struct spawn_proc *p)
{
	uint64_t now = spawn_now_ns();
	const struct spawn_opts *o = &p->opts_copy;

	if (p->reaped) {
		uint64_t drain = o->drain_ms ? o->drain_ms : SPAWN_DRAIN_MS_DEFAULT;
		if ((p->fd_out >= 0 || p->fd_err >= 0) && now >= p->exited_ns + drain * 1000000u)
			finish_outputs(p);
		return;
	}
	if (p->stop_reason) {
		if (!p->sigkilled && now >= p->kill_ns) {
			p->sigkilled = true;
			tree_signal(p, SIGKILL);
		}
		return;
	}
	if (o->timeout_ms && now >= p->start_ns + o->timeout_ms * 1000000u)
		stop_with(p, SPAWN_END_TIMEOUT);
	else if (o->idle_timeout_ms && now >= p->last_output_ns + o->idle_timeout_ms * 1000000u)
		stop_with(p, SPAWN_END_IDLE);
}

bool spawn_done(const struct spawn_proc *p)
{
	return p->reaped && p->fd_out < 0 && p->fd_err < 0;
}

const struct spawn_result *spawn_result(const struct spawn_proc *p)
{
	return &p->result;
}

void spawn_release(struct spawn_proc *p)
{
	if (!p || !spawn_done(p))
		return;
	release_leader(p);
	cgroup_cleanup(p, !p->opts_copy.keep_children);
	proc_close(p);
}

void spawn_free(struct spawn_proc *p)
{
	if (!p)
		return;
	if (!p->reaped) {
		tree_signal(p, SIGKILL);
		(void)wait4(p->pid, NULL, 0, NULL);
		p->reaped = p->released = true;
	}
	if (p->fd_out >= 0 || p->fd_err >= 0)
		finish_outputs(p);
	spawn_release(p); /* done now: reaped, outputs closed */
	free(p);
}

int spawn_wait(struct spawn_proc *p, const struct spawn_wait_cb *cb)
{
	char buf[16384];

	if (p->exec_fd >= 0) {
		struct spawn_error e;
		int r = spawn_exec_poll(p, -1, &e);
		if (r < 0)
			return r;
	}
	while (!spawn_done(p)) {
		struct pollfd pf[4];
		int n = spawn_poll_fds(p, pf), r, t;

		if (cb && cb->extra_fd >= 0 && cb->on_extra)
			pf[n++] = (struct pollfd){.fd = cb->extra_fd, .events = POLLIN};
		t = spawn_next_timeout_ms(p);
		r = spawn_poll(pf, (nfds_t)n, t);
		if (r < 0 && errno != EINTR)
			return -errno;
		for (int i = 0; r > 0 && i < n; i++) {
			if (!pf[i].revents)
				continue;
			if (pf[i].fd == p->pidfd && !p->reaped) {
				int k = spawn_reap(p);
				if (k < 0)
					return k;
			} else if (pf[i].fd == p->fd_out || pf[i].fd == p->fd_err) {
				int stream = pf[i].fd == p->fd_out ? 1 : 2;
				ssize_t got = spawn_read(p, pf[i].fd, buf, sizeof(buf));
				if (got > 0 && cb && cb->on_output)
					cb->on_output(cb->userdata, stream, buf, (size_t)got);
			} else if (cb && pf[i].fd == cb->extra_fd) {
				cb->on_extra(cb->userdata, p);
			}
		}
		spawn_tick(p);
	}
	return 0;
}
