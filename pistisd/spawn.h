#pragma once

/* The spawn core: run one command as an agent, confined, without blocking.
 *
 *   struct spawn_ctx *ctx;            spawn_ctx_new_why(&ctx, NULL) once: compiles the seccomp
 *                                                              BPF, finds cgroup v2
 *   struct spawn_proc *p;             spawn_start(ctx, &opts, &p, &err)
 *       returns after the child's execve (at most SPAWN_EXEC_DEADLINE_MS) with p->pid, p->pidfd and the parent's
 *       ends p->fd_in (or -1), p->fd_out, p->fd_err (-1 with a pty: all on fd_out = master).
 *       A failure in the child between fork and exec comes back as err.step + err.error:
 *       "setresuid: Operation not permitted" (spawn_error_string).
 *   Or without blocking (a daemon serving many agents): spawn_start_async returns right
 *       after clone with p->exec_fd >= 0; watch it for input (and wake up within
 *       spawn_next_timeout_ms) and call spawn_exec_poll(p, 0, &err) until it is not 0:
 *       1 = exec'd (p->exec_fd is -1 from then on), < 0 = the start failed exactly as
 *       spawn_start would have said (child killed and reaped, cgroup given back, fds
 *       closed; spawn_free(p) is all that is left to do). Until then the command has not
 *       exec'd: do not read its output; spawn_signal, spawn_stop, spawn_resize and writes
 *       to fd_in work (signals other than SIGKILL/SIGSTOP/SIGCONT arrive just before the
 *       execve, where the child unblocks them).
 *   Event loop (any: poll, epoll, libwebsockets' foreign loop):
 *       watch p->pidfd, p->fd_out, p->fd_err for input; when readable call
 *       spawn_read(p, fd, buf, size) (0 = EOF: fd is closed and set to -1; data over the
 *       output cap is counted and dropped) and spawn_reap(p) for the pidfd (which it
 *       closes once the process is reaped: an epoll user takes it out of its set first,
 *       since a spawn child not yet exec'd holds copies of all the caller's fds).
 *       Timeouts: poll at most spawn_next_timeout_ms(p) ms, then call spawn_tick(p).
 *   Control: spawn_signal(p, sig) forwards a signal to the main process; spawn_stop(p)
 *       cancels: SIGTERM to the whole tree, grace period, SIGKILL.
 *   Done when spawn_done(p): the main process is reaped and the outputs are closed (or
 *       drained for opts.drain_ms after the main process exited). spawn_result(p) then
 *       says how it ended; spawn_free(p) kills leftovers (unless keep_children), removes
 *       the command's cgroup and closes everything.
 *   spawn_wait(p, ...) is a small poll(2) loop doing all of the above, for the CLI, tests
 *   and benchmarks. Not thread-safe: one event loop owns a ctx. */

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "pistisd/cgroup.h"
#include "pistisd/privs.h"

#define SPAWN_DRAIN_MS_DEFAULT 100
/* From clone to execve at most this long; then the child is killed (an agent can stop it
 * once it has the agent's uid). spawn_start blocks at most this long; spawn_start_async
 * leaves the waiting to the caller's loop (spawn_exec_poll). */
#define SPAWN_EXEC_DEADLINE_MS 2000
#define SPAWN_GRACE_MS_DEFAULT 2000
#define SPAWN_UMASK_DEFAULT 0007

/* The commands' oom_score_adj: pistisd's own plus SPAWN_OOM_SCORE_RAISE, at most 1000
 * (docs/spawn.md). SPAWN_OOM_KEEP: /proc unreadable, left as inherited. */
#define SPAWN_OOM_SCORE_RAISE 500
#define SPAWN_OOM_KEEP (-2000)
/* /proc/PID/sessionid of a process whose loginuid was never set. */
#define SPAWN_AUDIT_SID_UNSET 4294967295u
int spawn_oom_score_adj(int proc_fd);

enum spawn_stdio {
	SPAWN_STDIO_PIPES = 0, /* stdout, stderr: pipes; stdin /dev/null or a pipe */
	SPAWN_STDIO_PTY,       /* a new pty: controlling terminal, stdin/out/err on the slave */
};

/* The largest file an agent's process may write (RLIMIT_FSIZE) unless the caller says
 * otherwise; the file operations' helper (fsops.c) has the same bound. */
#define SPAWN_FSIZE_DEFAULT ((rlim_t)16 << 30)

/* rlimits in the child; a field of 0 keeps the default noted (use RLIM_INFINITY for none). */
struct spawn_rlimits {
	rlim_t nproc;  /* default 512 (per uid: counts all of the agent's processes) */
	rlim_t nofile; /* default 4096 */
	rlim_t fsize;  /* default 16 GiB */
	rlim_t core;   /* always 0 unless core_allowed */
	bool core_allowed;
	/* POSIX message queues' bytes per uid (RLIMIT_MSGQUEUE); default 0, none: a queue
	 * outlives its command, and one agent could take all fs.mqueue.queues_max of the IPC
	 * namespace (RLIM_INFINITY: the kernel's own bound alone). */
	rlim_t msgqueue;
};

struct spawn_opts {
	/* What to run: argv[0] with a '/' is a path, else searched in envp's PATH. */
	char *const *argv;
	char *const *envp; /* the agent's environment (envb_build); NULL: empty */
	/* Who: refused unless inside the agent range (privs_check_agent_ids). */
	uid_t uid;
	gid_t gid;
	gid_t groups[PRIVS_MAX_GROUPS]; /* exactly these supplementary groups */
	size_t n_groups;
	/* Where: cwd resolved as the agent beneath cwd_root_fd (RESOLVE_BENEATH, no symlinks,
	 * no mount crossing); cwd NULL or "" or ".": the root itself. */
	int cwd_root_fd;
	const char *cwd;
	/* A lock the start holds until the child has the agent's uid (policy_apply_share): the
	 * child keeps its copy of this fd (CLOEXEC) through its first close of pistisd's fds
	 * and closes it right after the id change; the caller closes its own once the start
	 * call returns. < 3 (a zeroed spawn_opts): none. */
	int hold_fd;
	/* stdio */
	enum spawn_stdio stdio;
	bool stdin_pipe;	   /* pipes mode: give the caller a pipe to the command's stdin */
	unsigned short cols, rows; /* pty size; 0: 80x24 */
	/* limits */
	struct spawn_rlimits rlimits;
	mode_t umask;		     /* (mode_t)-1: SPAWN_UMASK_DEFAULT */
	const char *cgroup_agent;    /* agent cgroup directory name; NULL: no cgroup */
	struct cgroup_limits cgroup; /* memory.max, pids.max, cpu.weight */
	/* The same for all the agent's commands together, on its cgroup above the command's
	 * (pistisd serve); NULL: left as they are (cgroup_cmd_create). */
	const struct cgroup_limits *cgroup_agent_limits;
	/* The ONE switch for setuid programs (trusted commands run through sudo): false =
	 * no_new_privs on, empty bounding set. true = no no_new_privs, the seccomp filter is
	 * installed while still root (before the id change), and the bounding set keeps
	 * bounding_keep (default SPAWN_SETUID_BOUNDING: what sudo needs to become pi-tools).
	 * See docs/spawn.md. */
	bool allow_setuid;
	uint64_t bounding_keep;
	/* Abstract UNIX sockets shared with every process of the network namespace, as
	 * without Landlock; false (the default): where the kernel has Landlock ABI >= 6 each
	 * command connects only to names bound within its own tree (scope.h). */
	bool share_abstract_sockets;
	/* control */
	uint64_t timeout_ms;	  /* wall clock, 0: none */
	uint64_t idle_timeout_ms; /* no output for that long, 0: none */
	uint64_t grace_ms;	  /* SIGTERM → SIGKILL, 0: SPAWN_GRACE_MS_DEFAULT */
	uint64_t drain_ms;	  /* read on after the main process exits, 0: default 100 */
	uint64_t max_output;	  /* bytes over stdout+stderr kept, 0: unlimited */
	bool keep_children;	  /* do not kill what the command leaves running */
	/* Called right before the library closes fd_in, fd_out or fd_err on its own (end of
	 * output, drain time over), or the exec_fd spawn_start_async handed out (the start
	 * is decided), while the fd is still open: an event loop must take it
	 * out of its poll set now. Afterwards the number may be reused, and epoll keeps a
	 * registration for as long as the open file lives on (a pty master's dup in fd_in). */
	void (*on_close)(void *userdata, int fd);
	void *on_close_userdata;
};

/* CAP_SETUID, CAP_SETGID, CAP_AUDIT_WRITE: the least sudo needs to switch users. */
#define SPAWN_SETUID_BOUNDING ((UINT64_C(1) << 7) | (UINT64_C(1) << 6) | (UINT64_C(1) << 29))

enum spawn_step {
	SPAWN_STEP_NONE = 0,
	SPAWN_STEP_SIGNALS,
	SPAWN_STEP_CGROUP,
	SPAWN_STEP_OOM_SCORE,
	SPAWN_STEP_SETSID,
	SPAWN_STEP_STDIO,
	SPAWN_STEP_CTTY,
	SPAWN_STEP_KEYRING,
	SPAWN_STEP_RLIMIT,
	SPAWN_STEP_BOUNDING,
	SPAWN_STEP_SECCOMP,
	SPAWN_STEP_SETGROUPS,
	SPAWN_STEP_SETRESGID,
	SPAWN_STEP_SETRESUID,
	SPAWN_STEP_CAPS,
	SPAWN_STEP_PDEATHSIG,
	SPAWN_STEP_PARENT,
	SPAWN_STEP_CWD,
	SPAWN_STEP_NNP,
	SPAWN_STEP_CLOSE_FDS,
	SPAWN_STEP_EXEC,
	SPAWN_STEP_PARENT_SIDE,	 /* failed before the child existed */
	SPAWN_STEP_PTY,		 /* opening /dev/ptmx (parent side) */
	SPAWN_STEP_EXEC_TIMEOUT, /* no exec within SPAWN_EXEC_DEADLINE_MS: killed */
	SPAWN_STEP_SCOPE,	 /* landlock_restrict_self (scope.h) */
	SPAWN_STEP_SCHED,	 /* real-time policy, I/O class or negative nice undone */
	SPAWN_STEP_EXEC_INTERP,	 /* execve ENOENT, but the file is there: its interpreter is not */
	_SPAWN_STEP_MAX,
};

struct spawn_error {
	enum spawn_step step;
	int error; /* positive errno */
};
const char *spawn_step_name(enum spawn_step step);
/* "setresuid: Operation not permitted" into buf. */
const char *spawn_error_string(const struct spawn_error *e, char *buf, size_t size);

/* Who an agent's command runs as: uid and gid, and exactly two supplementary groups, its
 * own and pi-sandbox (which every agent is in). */
void spawn_opts_as_agent(struct spawn_opts *o, uid_t uid, gid_t gid);

enum spawn_end {
	SPAWN_END_RUNNING = 0,
	SPAWN_END_EXITED,    /* exit_code */
	SPAWN_END_SIGNALED,  /* term_signal, core_dumped */
	SPAWN_END_TIMEOUT,   /* the wall-clock timeout stopped it */
	SPAWN_END_IDLE,	     /* the no-output timeout stopped it */
	SPAWN_END_CANCELLED, /* spawn_stop */
};
const char *spawn_end_name(enum spawn_end end);

struct spawn_result {
	enum spawn_end end;
	int exit_code;	 /* EXITED; for the others the raw status is still decoded below */
	int term_signal; /* the signal that ended the main process, 0 if it exited */
	bool core_dumped;
	int raw_status;
	uint64_t wall_us;
	struct rusage rusage;
	uint64_t out_bytes, err_bytes; /* seen, including dropped */
	uint64_t dropped_bytes;	       /* over max_output */
	bool truncated;
	bool left_children_killed;    /* the tree was killed after the main process exited */
	const char *tree_control;     /* "cgroup", "session" (the command's own audit session
				       * and its process group) or "pgid": how the tree is held */
	const char *abstract_sockets; /* "scoped" or "shared" (share_abstract_sockets, or no
				       * Landlock ABI 6 here) */
};

struct spawn_ctx;
struct spawn_proc {
	pid_t pid;
	int pidfd;
	int fd_in;	    /* -1 unless stdin_pipe (pipes mode) or pty (dup of master) */
	int fd_out;	    /* stdout pipe, or the pty master */
	int fd_err;	    /* stderr pipe; -1 with a pty */
	int exec_fd;	    /* spawn_start_async: readable once the start is decided
			     * (spawn_exec_poll); -1 from then on. Goes through on_close. */
	int cgroup_fd;	    /* the command's cgroup, -1: process group */
	int cgroup_applied; /* CGROUP_HAS_* limits really applied */
	/* private below */
	struct spawn_ctx *ctx;
	struct spawn_opts opts_copy;
	char cgroup_agent[65], cgroup_cmd[48];
	uint64_t start_ns, last_output_ns, exited_ns, stop_ns, kill_ns;
	enum spawn_end stop_reason;
	bool reaped;   /* exited: status taken (WNOWAIT), still a zombie until released */
	bool released; /* really reaped: its pid may be reused, its group is not signalled */
	bool sigkilled;
	bool cloned_into_cgroup; /* born in its cgroup (clone3), not moved by its first step */
	bool vforked;		 /* made vfork-style (spawn-vfork.c), not fork-style */
	bool cgroup_empty;    /* seen empty after the leader exited (no second read to pool it) */
	bool audit_sid_known; /* audit_sid is the command's own audit session (no cgroup) */
	unsigned audit_sid;
	int exec_report[2];	     /* the child's struct child_report, as read so far */
	size_t exec_report_got;	     /* bytes of it */
	struct spawn_error exec_err; /* a failed start, for a spawn_exec_poll called again */
	bool exec_announce;	     /* exec_fd was handed out: its close goes through on_close */
	struct spawn_result result;
};

/* ctx: BPF compiled once, cgroup v2 discovered, env PISTIS_NO_OPENAT2 and
 * PISTIS_NO_CLONE3 (tests: the cgroup.procs path) read once. On failure *why (when why is
 * not NULL) names the step that failed, for a message: "/dev/null (not the null device,
 * character device 1:3)". */
int spawn_ctx_new_why(struct spawn_ctx **ret, const char **why);
/* Where starts may go the vfork-style way, make the spawner thread now rather than at the
 * first start (pistisd run: it is made while the caller builds the environment), on the
 * CPU the caller runs on, where it stays: for a process that starts one command and waits
 * for it (spawn-vfork.h, same_cpu). */
void spawn_ctx_prepare_start(struct spawn_ctx *ctx);
/* Frees everything, after waiting up to 200 ms for dying command cgroups to empty. */
void spawn_ctx_free(struct spawn_ctx *ctx);

/* Removes the command cgroups a finished command left populated (its processes killed
 * but still exiting; a slot is let go of once empty), waiting up to wait_ms (0: one pass,
 * for an event loop's timer). Each is looked at and killed again at intervals doubling
 * from 10 ms to 1 s (a pass before its time passes it over). Returns how many are still
 * there: call again later while it is not 0. */
size_t spawn_ctx_reap_dying(struct spawn_ctx *ctx, unsigned wait_ms);
/* How long until the first dying command cgroup is due for its next look (0: one is due
 * now, or none is dying): when an event loop's next pass is worth making. */
unsigned spawn_ctx_dying_due_ms(const struct spawn_ctx *ctx);
/* Dying this long, a command cgroup is told as stuck (spawn_ctx_take_stuck): gigabytes of
 * memory take seconds to tear down here, a process in D state as long as its I/O hangs. */
#define SPAWN_DYING_STUCK_S 10u
/* How many dying command cgroups have been killed again and again for SPAWN_DYING_STUCK_S
 * and are still not gone (a process that cannot be killed, such as one in D state), not
 * counted by an earlier call: each is counted once, for a caller's log line. */
size_t spawn_ctx_take_stuck(struct spawn_ctx *ctx);
/* "cgroup" when command trees live in cgroups, else "pgid" (a command's result may say
 * "session": its own audit session holds what left its process group). */
const char *spawn_ctx_tree_control(const struct spawn_ctx *ctx);
/* Whether commands can get the abstract-socket scope here (Landlock ABI >= 6), and the
 * errno of the probe when not (for the start-up log). */
bool spawn_ctx_can_scope(const struct spawn_ctx *ctx, int *ret_why);
/* From now on commands run with abstract sockets shared: what pistisd serve does when
 * scope_probe_child finds landlock_restrict_self refused (error: its errno). */
void spawn_ctx_disable_scope(struct spawn_ctx *ctx, int error);
/* Whether keyctl is refused to pistisd itself (EPERM or EACCES from a seccomp profile
 * such as Docker's default, or an LSM): commands then keep pistisd's session keyring,
 * which no process below pistisd can use either (docs/spawn.md, step 4). Read once by
 * spawn_ctx_new_why; spawn_keyctl_refused asks now (pistisd check). */
bool spawn_ctx_keyctl_refused(const struct spawn_ctx *ctx);
bool spawn_keyctl_refused(void);
unsigned spawn_ctx_cgroup_features(const struct spawn_ctx *ctx);
/* The CGROUP_HAS_* our own cgroup has delegated (its cgroup.controllers), enabled for
 * pistis's cgroups or not (features): which of the two is missing, for a message. */
unsigned spawn_ctx_cgroup_delegated(const struct spawn_ctx *ctx);
/* cgroup_make_room for the context's cgroups (pistisd serve, when a limit is asked for). */
int spawn_ctx_cgroup_make_room(struct spawn_ctx *ctx);
/* The agents' cgroup directory (<own>/pistis), -1 without cgroup v2; the ctx keeps it. */
int spawn_ctx_cgroup_base_fd(const struct spawn_ctx *ctx);
bool spawn_ctx_uses_openat2(const struct spawn_ctx *ctx);

/* Start. 0 and *ret on success; -errno with *ret_err filled (step, errno) on failure. */
int spawn_start(struct spawn_ctx *ctx, const struct spawn_opts *opts, struct spawn_proc **ret,
		struct spawn_error *ret_err);
/* The same, but returns right after clone: *ret has exec_fd >= 0 and the exec is still to
 * come. A failure before the child exists is returned here as by spawn_start. */
int spawn_start_async(struct spawn_ctx *ctx, const struct spawn_opts *opts, struct spawn_proc **ret,
		      struct spawn_error *ret_err);
/* Has the child of spawn_start_async exec'd? Waits at most wait_ms for it (0: not at all,
 * -1: until SPAWN_EXEC_DEADLINE_MS after the clone). 1: exec'd (or died before execve
 * without a report: the pidfd tells the rest), 0: not yet, -errno with *ret_err: failed,
 * or SPAWN_EXEC_DEADLINE_MS passed ("timed out before exec"); the child is then killed and
 * reaped, its cgroup given back and every fd closed (on_close is called for each). Called
 * again, it says the same. Called after the deadline, it still takes an EOF or a report
 * already in the pipe: only a child with nothing to show by then has timed out. */
int spawn_exec_poll(struct spawn_proc *p, int wait_ms, struct spawn_error *ret_err);

ssize_t spawn_read(struct spawn_proc *p, int fd, void *buf, size_t size);
int spawn_reap(struct spawn_proc *p);
int spawn_signal(struct spawn_proc *p, int sig);
/* Whether anything of the command's tree still runs (the main process or what it left). */
bool spawn_tree_alive(struct spawn_proc *p);
/* After the main process exited: SIGKILL what it left behind, now, without closing the
 * outputs (their buffered bytes can still be read to EOF). 1 when something was left, 0 when
 * not (or the main process still runs). */
int spawn_kill_leftovers(struct spawn_proc *p);

/* SIGKILL every live process whose real, effective, saved or fs uid is one of uids (n of
 * them, agents' uids; sorted in place; others in the agent range are never touched: a
 * plain host may have users there), whoever started it, and the trusted commands (pi-tools'
 * processes) they started, or an agent that killed their sudo did: what a tightening must
 * not leave running, tracked by a command or not (a setsid'ed grandchild outside any
 * process group pistisd knows, where there is no cgroup; one a restarted daemon never
 * knew), whose root directory is ours (as spawn_kill_agent_processes_in: another
 * sandbox's agents have the same uids where the PID namespace is shared). Read from
 * /proc, each signalled through a pidfd opened before its status is read. Returns how
 * many were signalled (0: none left), -errno when /proc cannot be read. */
int spawn_kill_agent_processes(const struct spawn_ctx *ctx, uid_t *uids, size_t n);

/* The pid of a live process of uid whose root directory is not ours (another sandbox's
 * agent of the same uid, in a PID namespace shared with it; a host user's beside a chroot),
 * 0 when there is none or /proc cannot be read: where one is, spawn_kill_uid would kill
 * it too. */
pid_t spawn_uid_beyond_root(const struct spawn_ctx *ctx, uid_t uid);

/* Where command trees are audit sessions (no cgroup): SIGKILL every process of a command
 * session no live pistisd tracks, the leftovers of a daemon that died (its commands'
 * setsid()'d grandchildren survive it). A command session is one whose loginuid is one
 * of uids (n, sorted in place: the agents', which spawn-child.c's step 2c sets) and whose
 * id is neither unset nor ours; it is tracked while a child of a live pistisd (root in
 * every id, named pistisd: a `pistisd run`, another daemon) is in it. Only processes whose
 * root directory is ours (or cannot be read) are touched: beside a chroot's sandbox,
 * another sandbox's root may have the registry's uids. Members are signalled through a pidfd
 * taken before the look that decides, in rounds until one finds none new (at most 8).
 * Returns how many were signalled, 0 in cgroup or process-group
 * mode, -errno when /proc cannot be read. */
int spawn_kill_orphaned_sessions(const struct spawn_ctx *ctx, uid_t *uids, size_t n);

/* SIGKILL to every process of uid (an agent's: the range is checked), sent by a child
 * that has become uid: kill(-1) reaches every one at once, forks held off. 0 or -errno. */
int spawn_kill_uid(uid_t uid);

/* Whether a live process (not a zombie) runs as uid, by /proc; true when /proc cannot be
 * read. */
bool spawn_agent_has_processes(const struct spawn_ctx *ctx, uid_t uid);
/* The same beneath proc_fd (an open /proc), for a CLI without a spawn_ctx. */
bool spawn_uid_has_processes(int proc_fd, uid_t uid);

/* The pid of another live pistisd (root in every id, named pistisd: a `pistisd run`, a
 * second serve on the same /data) one of whose children runs as uid with our root
 * directory (or one that cannot be read), by /proc: a command of the agent that is that
 * daemon's, not ours (its pid in *ret_child, which may be
 * NULL). 0 when there is none or /proc cannot be read. */
pid_t spawn_uid_commanded_elsewhere(const struct spawn_ctx *ctx, uid_t uid, pid_t *ret_child);

/* /proc, opened at spawn_ctx_new_why (before any chroot); -1 without it. */
int spawn_ctx_proc_fd(const struct spawn_ctx *ctx);
/* The same through proc_fd (an open /proc), limited, when roots is not NULL, to the
 * processes whose root directory (/proc/PID/root) is one of the n_roots directories
 * (dev and inode): the agents that can reach one tree, not those of another chroot or
 * container root on the same machine with the same uids. Reading /proc/PID/root needs
 * ptrace access (CAP_SYS_PTRACE, which Docker's default set leaves out): a process whose
 * root cannot be read counts as in one of them, unless its /proc/PID/mountinfo (readable
 * by all) shows it in another mount namespace (another container's). */
struct spawn_sweep_root {
	dev_t dev;
	ino_t ino;
};
int spawn_kill_agent_processes_in(int proc_fd, uid_t *uids, size_t n,
				  const struct spawn_sweep_root *roots, size_t n_roots);
/* SIGKILL the processes of uids that can reach the tree root_fd names: those whose root
 * directory is that directory or one above it (the agents of a container or chroot
 * rooted there, or of the machine itself), sweeping a fresh /proc until a sweep finds none
 * (a process that forked meanwhile is caught by the next). *ret_killed: how many were
 * killed. -ETIME when some still run SPAWN_KILL_AGENTS_SEC after SIGKILL (stuck in an
 * uninterruptible sleep; *ret_killed then counts those), -errno when /proc or the chain
 * of directories cannot be read. For CLIs about to take access away or a uid back. */
#define SPAWN_KILL_AGENTS_SEC 10
int spawn_kill_agents_reaching(int root_fd, uid_t *uids, size_t n, unsigned *ret_killed);
int spawn_stop(struct spawn_proc *p);
int spawn_resize(struct spawn_proc *p, unsigned short cols, unsigned short rows);
/* -1: none. While the exec is pending it includes SPAWN_EXEC_DEADLINE_MS after the clone,
 * which spawn_exec_poll (not spawn_tick) enforces. */
int spawn_next_timeout_ms(const struct spawn_proc *p);
void spawn_tick(struct spawn_proc *p);
bool spawn_done(const struct spawn_proc *p);
const struct spawn_result *spawn_result(const struct spawn_proc *p);
/* Once spawn_done(p): give back what the ended command still holds in the kernel (its
 * cgroup, to the pool or its slot, with its lock; the leader's pid; every fd), keeping the
 * result. For a caller that keeps p after the end (pistisd serve, until the end is
 * acknowledged); spawn_free is still to be called. Before the end it does nothing. */
void spawn_release(struct spawn_proc *p);
void spawn_free(struct spawn_proc *p);

/* Minimal loop: output goes to on_output(stream 1|2, data, len); extra_fd (or -1), when
 * readable, calls on_extra (e.g. a signalfd). Returns 0 when done, or -errno. */
struct spawn_wait_cb {
	void (*on_output)(void *userdata, int stream, const char *data, size_t len);
	int extra_fd;
	void (*on_extra)(void *userdata, struct spawn_proc *p);
	void *userdata;
};
int spawn_wait(struct spawn_proc *p, const struct spawn_wait_cb *cb);

/* The clock of every deadline of the spawn core (timeouts, idle timeouts, the exec
 * deadline, drain and grace): CLOCK_MONOTONIC less the time this process was found
 * stopped as a whole (a frozen cgroup, `docker pause`, SIGSTOP, a paused VM). The
 * process promises with spawn_clock_expect_wake(ms) that it will read the clock again
 * within ms (its poll timeout or a timer; -1: no promise, e.g. a poll without timeout);
 * a read later than that by over SPAWN_STALL_MIN_MS counts the lateness as stalled, so
 * a frozen command is not killed on the thaw for time it did not run (docs/spawn.md,
 * "Freezes"). Without promises it is CLOCK_MONOTONIC. spawn_clock_stalled_ns: the time
 * taken out so far. Not thread-safe: the caller's event loop thread only. */
#define SPAWN_STALL_MIN_MS 1000
/* How often a waiting caller should wake to keep its promises while a deadline is
 * pending: the part of a freeze not taken out of the clock is below this. */
#define SPAWN_CLOCK_BEAT_MS 1000
uint64_t spawn_now_ns(void);
void spawn_clock_expect_wake(int ms);
uint64_t spawn_clock_stalled_ns(void);
/* poll(2) for a loop that waits on one command: a timeout_ms (spawn_next_timeout_ms) over
 * SPAWN_CLOCK_BEAT_MS is cut to it and promised (spawn_clock_expect_wake), so a freeze
 * while a deadline is pending is not counted towards it; the promise ends with the poll. */
int spawn_poll(struct pollfd *fds, nfds_t n, int timeout_ms);
/* Fills pf with what a loop waiting on p polls for input: its pidfd until reaped, then
 * fd_out and fd_err while open. Returns how many (at most 3). */
static inline int spawn_poll_fds(const struct spawn_proc *p, struct pollfd pf[3])
{
	int n = 0;

	if (!p->reaped)
		pf[n++] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
	if (p->fd_out >= 0)
		pf[n++] = (struct pollfd){.fd = p->fd_out, .events = POLLIN};
	if (p->fd_err >= 0)
		pf[n++] = (struct pollfd){.fd = p->fd_err, .events = POLLIN};
	return n;
}

/* The working directories an agent may ask for by path: beneath one of these roots
 * (docs/spawn.md, "Working directory"). The one definition; callers open the matching root
 * as cwd_root_fd and pass the rest as cwd, which the child resolves as the agent. */
#define SPAWN_CWD_ROOTS                                                                            \
	{                                                                                          \
		"/workspaces", "/workspace", "/data"                                               \
	}
/* cwd is one of SPAWN_CWD_ROOTS or beneath one ("/data" or "/data/..."): *ret_root is that
 * root, *ret_rel the part after it ("." for the root itself; may still hold "..", "//"
 * or symlinks, which the resolution refuses). -EINVAL otherwise. */
int spawn_cwd_split(const char *cwd, const char **ret_root, const char **ret_rel);
