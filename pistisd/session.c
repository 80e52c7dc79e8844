/* pistisd serve: commands. Each command is spawned through the spawn core; its output is
 * cut into binary frames with a per-command sequence number and kept until the server
 * acknowledges it (exec.ack), so a dropped connection or a relay restart loses nothing:
 * the next exec.attach names the last sequence the client holds and the rest is resent.
 * Unacknowledged output is bounded (PROTO_MAX_BUFFERED): past it pistisd stops reading the
 * command's pipes, so a slow or absent reader pauses the command instead of growing memory. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "lib/env-build.h"
#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/sha256.h"
#include "lib/macro.h"
#include "lib/proto.h"
#include "pistisd/ipc.h"
#include "pistisd/scope.h"
#include "pistisd/serve.h"
#include "pistisd/spawn.h"
#include "policy/policy.h"
#include "sandbox-users/users.h"
#include "trusted/trusted.h"

#define LINGER_US (600LL * LWS_US_PER_SEC) /* keep an exited, unacknowledged command 10 min */
#define STDIN_MAX (1024u * 1024u)	   /* stdin bytes queued for a command */
#define STDIN_ACK_STEP (128u * 1024u)	   /* an exec.stdin event per this much written */
#define PIPE_BYTES (1024 * 1024)	   /* F_SETPIPE_SZ of a command's output pipes */
/* exec.start waits this long for the child's execve in place (the common case, ~0.2 ms)
 * before leaving it to the event loop: a start an agent stalls then costs the loop at most
 * this, never SPAWN_EXEC_DEADLINE_MS. */
#define EXEC_WAIT_INLINE_MS 1

struct frame {
	struct frame *next;
	uint64_t seq;
	size_t len; /* header + payload */
	bool big;   /* a full-size buffer from the pool */
	uint8_t stream;
	uint16_t flags;
	bool written;  /* handed to the link once: its bytes are fixed from then on */
	uint8_t buf[]; /* LWS_PRE + len */
};

/* Who reads a command's output: the "reader" its exec.start or latest exec.attach named
 * (server-min names the client connection), else that request's id. Unacknowledged output
 * is bounded per reader as well as per command and in all (reader_max), so a reader that
 * stops acknowledging pauses its own commands only, and the others keep being read. The
 * same count and bound per agent (key: its uid), whichever readers its commands have: one
 * agent's commands, each read by a client of its own that never acknowledged, filled the
 * total and paused every other agent's (red team, redteam-dos.sh). */
struct reader {
	struct reader *next;
	uint64_t buffered;
	unsigned refs; /* commands it reads */
	char key[PROTO_MAX_ID + 1];
};

struct cmd {
	struct cmd *next;
	struct reader *rd;
	struct reader *ag; /* its agent's count (a reader list of their own: T.agents) */
	uint32_t id;
	char owner[PROTO_MAX_ID + 1]; /* request id of the exec.start/attach that receives events */
	char tag[PROTO_MAX_TAG + 1];
	char agent[PROTO_MAX_AGENT + 1];
	uid_t uid;
	struct spawn_proc *p;
	struct watch w_out, w_err, w_pid, w_in, w_exec;
	struct frame *head, *tail;
	uint64_t next_seq; /* last sequence assigned */
	uint64_t sent;	   /* last sequence written on the current connection */
	uint64_t acked;
	size_t buffered;
	bool attached, paused, done, exit_sent;
	bool paused_for_total; /* paused by the total bound alone (resume_paused) */
	char *exit_json;
	uint64_t stdin_seq;
	uint8_t *in_buf; /* a ring of STDIN_MAX bytes: in_len of them from in_head on */
	size_t in_head, in_len;
	bool in_close;
	bool in_refused; /* a frame overflowed the queue: the rest of stdin is refused */
	uint64_t in_written, in_told; /* stdin bytes written to the command; last told */
	lws_sorted_usec_list_t tick, linger;
	uint64_t linger_due_ns; /* spawn_now_ns: a freeze does not count (docs/spawn.md) */
	char *audit_argv, *cwd;
	bool shell, pty;
	bool has_stdin; /* started with "stdin": "pipe" or a pty */
	/* Until the child has exec'd (spawn_exec_poll): no output is read, and the answer to
	 * exec.start (exec.started, or the error) is still owed to start_id. */
	bool starting;
	char start_id[PROTO_MAX_ID + 1];
	char user[sizeof(((struct serve_agent *)0)->name)];
};

static struct {
	struct spawn_ctx *spawn;
	struct cmd *cmds;
	uint32_t next_id;
	unsigned n_cmds;
	struct cmd *rr; /* round-robin position for fair sending */
	int root_fd;
	bool hold_starts; /* a policy apply is tightening */
	bool stopping;	  /* pistisd serve got a stop signal: no command starts again */
	/* Unacknowledged output of all commands together, and its bound: 8 MiB per command
	 * times 256 commands would be 2 GiB of a sandbox's memory. */
	uint64_t buffered, max_buffered;
	bool share_abstract; /* --share-abstract-sockets */
	/* --memory-max, --cpu-weight, and --pids-max (also each agent's NPROC; 0: the
	 * default): each agent's, all its commands together */
	struct cgroup_limits agent_lim;
	struct reader *readers;
	struct reader *agents;
	lws_sorted_usec_list_t reap; /* dying command cgroups left to remove */
} T = {.root_fd = -1, .max_buffered = SESSION_MAX_BUFFERED_DEFAULT};

/* One reader's share of max_buffered: a quarter (16 of the default 64 MiB, two commands'
 * full windows), at least one frame. So it takes four readers that all stop reading to
 * fill the bound that pauses everyone. */
static uint64_t reader_max(void)
{
	uint64_t m = T.max_buffered / 4;

	return m < PROTO_MAX_FRAME_PAYLOAD ? PROTO_MAX_FRAME_PAYLOAD : m;
}

/* The count named key in *list (T.readers, T.agents), made on first use; NULL when out of
 * memory. */
static struct reader *count_get(struct reader **list, const char *key)
{
	struct reader *rd;

	for (rd = *list; rd; rd = rd->next)
		if (!strcmp(rd->key, key))
			break;
	if (!rd) {
		rd = calloc(1, sizeof(*rd));
		if (!rd)
			return NULL;
		snprintf(rd->key, sizeof(rd->key), "%s", key);
		rd->next = *list;
		*list = rd;
	}
	rd->refs++;
	return rd;
}

static struct reader *reader_get(const char *key)
{
	return count_get(&T.readers, key);
}

static struct reader *agent_count_get(uid_t uid)
{
	char key[16];

	snprintf(key, sizeof(key), "%u", (unsigned)uid);
	return count_get(&T.agents, key);
}

static void count_put(struct reader **list, struct reader *rd)
{
	if (!rd || --rd->refs > 0)
		return;
	for (struct reader **pp = list; *pp; pp = &(*pp)->next)
		if (*pp == rd) {
			*pp = rd->next;
			break;
		}
	free(rd);
}

static void reader_put(struct reader *rd)
{
	count_put(&T.readers, rd);
}

/* The request's "reader", else its id; -EINVAL, answered, when "reader" is not an id. */
static int reader_key(const struct proto_request *req, const char **ret)
{
	struct proto_error err = {0};
	const char *s = NULL;
	int r = proto_get_string(req->root, "reader", PROTO_MAX_READER, &s, &err);

	if (r == -ENOENT) {
		*ret = req->id;
		return 0;
	}
	if (r < 0 || !proto_id_valid(s, PROTO_MAX_READER)) {
		serve_send_error(req->id, PROTO_E_BAD_REQUEST,
				 "\"reader\" must be 1..%d bytes of [A-Za-z0-9._:-]",
				 PROTO_MAX_READER);
		return -EINVAL;
	}
	*ret = s;
	return 0;
}

void session_set_max_buffered(uint64_t bytes)
{
	T.max_buffered = bytes;
}

void session_set_share_abstract_sockets(bool share)
{
	T.share_abstract = share;
}

void session_set_pids_max(uint64_t n)
{
	T.agent_lim.pids_max = n;
}

void session_set_agent_limits(uint64_t memory_max, unsigned cpu_weight)
{
	T.agent_lim.memory_max = memory_max;
	T.agent_lim.cpu_weight = cpu_weight;
}

/* A memory or CPU limit asked for holds or serve does not start (as pistisd run), saying
 * why: the controller is not delegated to our cgroup at all, or it is but cannot be enabled
 * beneath it. -EOPNOTSUPP when one does not hold (said here). Only asked when a limit is:
 * fuzz-serve's stand-in context has no cgroup part to look at. */
static int limits_hold(void)
{
	unsigned have, delegated, miss = 0;
	int r;

	if (!T.agent_lim.memory_max && !T.agent_lim.cpu_weight && !T.agent_lim.pids_max)
		return 0;
	/* Docker's, and a service manager's, cgroup holds PID 1 or the daemon: no controller
	 * can be enabled beneath it until they are moved into a leaf beside pistis/. Only
	 * for the limits that refuse to start otherwise: --pids-max alone holds as NPROC, and
	 * moved nothing before (a test's serve would have moved its test runner). */
	r = T.agent_lim.memory_max || T.agent_lim.cpu_weight ? spawn_ctx_cgroup_make_room(T.spawn)
							     : 0;
	if (r > 0)
		log_notice("Moved %d process(es) of pistisd's cgroup into its '%s' so that its "
			   "controllers can be enabled for the agents (cgroup v2 lets no cgroup "
			   "with processes give controllers to its children)",
			   r, CGROUP_SELF_LEAF);
	else if (r < 0 && r != -ENODEV)
		log_warning_errno(r,
				  "Failed to move the processes of pistisd's cgroup into "
				  "its '%s' (the agents' limits need that): %m",
				  CGROUP_SELF_LEAF);
	have = spawn_ctx_cgroup_features(T.spawn);
	delegated = spawn_ctx_cgroup_delegated(T.spawn);
	if (T.agent_lim.memory_max && !(have & CGROUP_HAS_MEMORY))
		miss |= CGROUP_HAS_MEMORY;
	if (T.agent_lim.cpu_weight && !(have & CGROUP_HAS_CPU))
		miss |= CGROUP_HAS_CPU;
	if (T.agent_lim.pids_max && !(have & CGROUP_HAS_PIDS))
		log_warning("--pids-max holds as NPROC only (an agent's processes and threads in "
			    "all its commands, each uid's): no pids controller for pistis's "
			    "cgroups here");
	if (!miss)
		return 0;
	log_error("Refusing to start: %s%s%s need%s the %s controller%s, which %s (tree control: "
		  "%s; docs/spawn.md, cgroup v2); start without %s",
		  (miss & CGROUP_HAS_MEMORY) ? "--memory-max" : "",
		  miss == (CGROUP_HAS_MEMORY | CGROUP_HAS_CPU) ? " and " : "",
		  (miss & CGROUP_HAS_CPU) ? "--cpu-weight" : "",
		  miss == (CGROUP_HAS_MEMORY | CGROUP_HAS_CPU) ? "" : "s",
		  miss == (CGROUP_HAS_MEMORY | CGROUP_HAS_CPU) ? "memory and cpu"
		  : (miss & CGROUP_HAS_MEMORY)		       ? "memory"
							       : "cpu",
		  miss == (CGROUP_HAS_MEMORY | CGROUP_HAS_CPU) ? "s" : "",
		  (delegated & miss) == miss
			  ? "pistisd's cgroup has but cannot enable for its children: it holds "
			    "processes (cgroup v2's no-internal-processes rule; give pistisd a "
			    "cgroup of its own)"
			  : "pistisd's cgroup was not given (not delegated, or cgroup v2 not "
			    "writable here)",
		  spawn_ctx_tree_control(T.spawn),
		  miss == (CGROUP_HAS_MEMORY | CGROUP_HAS_CPU) ? "them" : "it");
	return -EOPNOTSUPP;
}

uint64_t session_buffered(void)
{
	return T.buffered;
}

/* An agent holds share or more of the unacknowledged output while all commands together
 * hold half the bound or more. Only then does its share pause it: an agent whose stalled
 * readers hold its quarter while the others leave room keeps its other commands read (a
 * client of its that crashed must not stop its next one), and one whose readers push the
 * total to half stops there, so the other half is left to the others. */
static bool agent_over(const struct reader *ag, uint64_t share)
{
	return ag->buffered >= share && T.buffered >= T.max_buffered / 2;
}

/* What each command may hold before its agent's bound pauses it: an agent whose stalled
 * readers (clients killed mid-command, whose output waits 10 minutes for an attach) hold
 * its share kept every later command of its paused, an `echo` included, until those ended
 * (dynamic analysis soak). Under this each still reads, so a reader that acknowledges
 * goes on, at worst a floor at a time.
 * The floor is only for an agent under half the bound (AGENT_FLOOR_UNTIL): ended commands
 * do not count against an agent's 32, so its short commands, each ending under the floor
 * and read by a reader that never acknowledges, piled up to the table's 256 (16 MiB) past
 * its share, and under --max-buffered 8 filled the bound on all commands by themselves:
 * every other agent's output paused for the 10 minutes they wait (red team,
 * redteam-floor.sh). At half, all its commands pause, as before the floor: one agent alone
 * holds at most half the bound and a read of each of its 32 running commands (those
 * under the floor read again once it is under half: a read each again at most). */
#define AGENT_FLOOR (64u * 1024u)
#define AGENT_FLOOR_UNTIL (T.max_buffered / 2)
static bool agent_holds(const struct cmd *c, uint64_t share)
{
	return (c->buffered >= AGENT_FLOOR || c->ag->buffered >= AGENT_FLOOR_UNTIL) &&
	       agent_over(c->ag, share);
}

/* After output was acknowledged or dropped: every command paused for the bounds and
 * now under the halves of its own, its reader's and its agent's reads again. */
static void set_paused(struct cmd *c, bool paused);
static void resume_paused(void)
{
	/* Each by the bound that paused it: one paused for its own or its reader's count
	 * reads again once both are under half and the total is under the maximum; only one
	 * paused for the total waits for the total to be under half. Before, any total over
	 * half kept every paused command paused, so two readers that stopped acknowledging
	 * (a quarter each) stalled every other command that had paused for its own bound,
	 * acknowledged or not. */
	for (struct cmd *x = T.cmds; x; x = x->next)
		if (x->paused && x->buffered < PROTO_MAX_BUFFERED / 2 &&
		    x->rd->buffered < reader_max() / 2 &&
		    ((x->buffered < AGENT_FLOOR / 2 && x->ag->buffered < AGENT_FLOOR_UNTIL) ||
		     !agent_over(x->ag, reader_max() / 2)) &&
		    T.buffered < (x->paused_for_total ? T.max_buffered / 2 : T.max_buffered))
			set_paused(x, false);
}

static void count_buffered(struct cmd *c, size_t n)
{
	bool own;

	c->buffered += n;
	c->rd->buffered += n;
	c->ag->buffered += n;
	T.buffered += n;
	own = c->buffered >= PROTO_MAX_BUFFERED || c->rd->buffered >= reader_max() ||
	      agent_holds(c, reader_max());
	if (own || T.buffered >= T.max_buffered) {
		c->paused_for_total = !own;
		set_paused(c, true);
	}
	/* Every command of an agent over its share stops being read now, not each at its own
	 * next read: 32 commands would take up to a frame each past the share. */
	if (agent_over(c->ag, reader_max()))
		for (struct cmd *x = T.cmds; x; x = x->next)
			if (x->ag == c->ag && !x->paused && !x->starting &&
			    agent_holds(x, reader_max())) {
				x->paused_for_total = false;
				set_paused(x, true);
			}
}

/* Output acknowledged or dropped: off the command's, its reader's, its agent's and the
 * total count. */
static void uncount_buffered(struct cmd *c, size_t n)
{
	c->buffered -= n;
	c->rd->buffered -= n;
	c->ag->buffered -= n;
	T.buffered -= n;
}

static void log_orphans(const char *agent, unsigned killed, unsigned alive, void *userdata)
{
	(void)userdata;
	if (killed)
		log_warning("Killed %u command tree(s) of agent '%s' that no pistisd owned (left "
			    "by a pistisd that died)",
			    killed, agent);
	if (alive)
		log_warning("%u command tree(s) of agent '%s' that no pistisd owned still have "
			    "processes %u ms after cgroup.kill (in D state, waiting on I/O?): "
			    "they end when that lets go, or see their cgroup.procs",
			    alive, agent, CGROUP_REAP_KILL_MS);
}

static void remove_orphaned_ipc(void);
static void kill_orphaned_sessions(void);

int session_apply_share(int *ret_fd)
{
	return policy_apply_share(T.root_fd, ret_fd);
}

int session_init(void)
{
	const char *step = NULL;
	int why, r = spawn_ctx_new_why(&T.spawn, &step);
	if (r < 0)
		return log_error_errno(r, "Failed to prepare the spawn core: %s: %m", step);
	/* A profile that lets rulesets be made but refuses landlock_restrict_self would fail
	 * every command (the child fails closed): find out once, and run them shared. */
	if (spawn_ctx_can_scope(T.spawn, NULL) && !T.share_abstract &&
	    (r = scope_probe_child()) < 0) {
		spawn_ctx_disable_scope(T.spawn, -r);
		log_warning("Abstract UNIX sockets are shared by every agent and the host: "
			    "landlock_restrict_self is refused here (%s; a seccomp profile?)",
			    strerror(-r));
	} else if (!spawn_ctx_can_scope(T.spawn, &why)) {
		log_warning("Abstract UNIX sockets are shared by every agent and the host: no "
			    "Landlock scope here (%s; needs Landlock ABI >= 6, Linux 6.12)",
			    why == EINVAL ? "Landlock ABI below 6" : strerror(why));
	} else if (T.share_abstract) {
		log_notice("Abstract UNIX sockets are shared by every agent and the host "
			   "(--share-abstract-sockets)");
	}
	r = limits_hold();
	if (r < 0)
		return r;
	/* A restarted daemon starts clean: the commands of one that died (SIGKILL, OOM) still
	 * run as their agents, with no timeout and no reader, and this one numbers commands
	 * from 1 again. Before dialling, so no command of ours exists yet (docs/spawn.md). */
	r = cgroup_reap_orphans(spawn_ctx_cgroup_base_fd(T.spawn), log_orphans, NULL);
	if (r < 0)
		log_warning_errno(r, "Failed to kill every orphaned command tree: %m");
	kill_orphaned_sessions();
	remove_orphaned_ipc();
	T.root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (T.root_fd < 0)
		return log_error_errno(-errno, "Failed to prepare the spawn core: open /: %m");
	T.next_id = 1;
	return 0;
}

/* A command's cgroup still populated when it is freed (its processes killed, some still
 * exiting) is removed from here, in passes until none is left: never waited for in the
 * loop, where one agent's slow-dying processes would stall every other agent. */
/* Each cgroup is retried less and less often (spawn_ctx_reap_dying); one still there after
 * SPAWN_DYING_STUCK_S is told once, and the lines at most one a minute, the ones held back
 * counted in the next (an agent that can make processes no kill ends could fill the log).
 * The next pass is when the first of them is due, REAP_PASS_MIN_MS at the soonest: a
 * pass every 20 ms while one is stuck woke serve 50 times a second for nothing, each
 * cgroup being due once a second at most by then. */
#define STUCK_LOG_INTERVAL_NS (60ull * 1000000000ull)
#define REAP_PASS_MIN_MS 20u

static void reap_dying(lws_sorted_usec_list_t *sul)
{
	static uint64_t last_told_ns;
	static size_t untold;

	if (!T.spawn)
		return;
	if (spawn_ctx_reap_dying(T.spawn, 0)) {
		unsigned ms = spawn_ctx_dying_due_ms(T.spawn);

		lws_sul_schedule(serve_lws_context(), 0, sul, reap_dying,
				 (lws_usec_t)(ms > REAP_PASS_MIN_MS ? ms : REAP_PASS_MIN_MS) *
					 LWS_US_PER_MS);
	}
	untold += spawn_ctx_take_stuck(T.spawn);
	if (untold && (!last_told_ns || spawn_now_ns() - last_told_ns >= STUCK_LOG_INTERVAL_NS)) {
		log_warning("%zu command cgroup(s) still not empty after %u s of cgroup.kill: a "
			    "process that cannot be killed (in D state, waiting on I/O?); retried "
			    "every second, the processes are listed in their cgroup.procs",
			    untold, SPAWN_DYING_STUCK_S);
		last_told_ns = spawn_now_ns();
		untold = 0;
	}
}

static void cmd_free(struct cmd *c);
static void ipc_probes_stop(void);
static void frame_free(struct frame *f);
static void pool_trim(void);

/* What an agent's last command leaves, swept when it ends: see kill_strays. */
struct sweep {
	uid_t uid;
	uint32_t cmd_id; /* the last command, for the audit lines */
	char agent[PROTO_MAX_AGENT + 1];
	bool pgid;	    /* its tree was a process group (no cgroup): kill the leftovers */
	bool keep_children; /* keep the SysV objects, as keep_children keeps the processes */
	bool used;
};

/* Sweeps put off because a file operation of the agent was running when its last command
 * ended (its helper runs as the agent, so nothing could be told apart from a leftover);
 * each runs once the agent's last file operation has ended, unless a command of the agent
 * runs by then (whose own end sweeps). */
#define SWEEPS_PENDING_MAX 256
static struct sweep pending[SWEEPS_PENDING_MAX];
static lws_sorted_usec_list_t pending_sul;

void session_done(void)
{
	/* What still runs is SIGKILLed with pistisd (spawn_free): on record too, as a command
	 * that ended any other way is. */
	for (struct cmd *c = T.cmds; c; c = c->next)
		if (c->p && !c->done)
			log_notice(
				"audit exec cmd=%u agent=\"%s\" uid=%u end=killed reason=\"pistisd "
				"serve exited\" %-s cwd=%-s",
				c->id, c->agent, (unsigned)c->uid,
				c->audit_argv ? c->audit_argv : "argv=?",
				c->cwd ? c->cwd : "\"~\"");
	while (T.cmds)
		cmd_free(T.cmds);
	ipc_probes_stop();
	lws_sul_cancel(&T.reap);
	lws_sul_cancel(&pending_sul);
	memset(pending, 0, sizeof(pending));
	spawn_ctx_free(T.spawn);
	T.spawn = NULL;
	T.root_fd = safe_close(T.root_fd);
}

static struct cmd *cmd_by_id(uint64_t id)
{
	for (struct cmd *c = T.cmds; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

/* The newest command with this tag, of this agent when one is named. Tags are the
 * caller's words, not unique: without an agent, a tag that commands of two agents hold
 * names neither (*ambiguous), so one agent's tag can never reach the other's command. */
static struct cmd *cmd_by_tag(const char *tag, const char *agent, bool *ambiguous)
{
	struct cmd *found = NULL;

	*ambiguous = false;
	for (struct cmd *c = T.cmds; c; c = c->next) {
		if (!c->tag[0] || strcmp(c->tag, tag) || (agent && strcmp(c->agent, agent)))
			continue;
		if (found && strcmp(found->agent, c->agent))
			*ambiguous = true;
		found = c; /* newest wins: the list is newest-last */
	}
	return *ambiguous ? NULL : found;
}

/* spawn_opts.on_close: the spawn core is about to close one of the command's stream fds
 * (end of output, drain over, a pty's input with its output): drop its watch while the fd
 * is still open, so EPOLL_CTL_DEL reaches the right registration. */
static void on_spawn_close(void *userdata, int fd)
{
	struct cmd *c = userdata;
	struct watch *ws[] = {&c->w_out, &c->w_err, &c->w_in, &c->w_exec};

	for (size_t i = 0; i < ELEMENTSOF(ws); i++)
		if (ws[i]->fd == fd) {
			serve_unwatch(ws[i]);
			ws[i]->fd = -1;
		}
}

static void cmd_free(struct cmd *c)
{
	for (struct cmd **pp = &T.cmds; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (T.rr == c)
		T.rr = NULL;
	T.n_cmds--;
	serve_unwatch(&c->w_out);
	serve_unwatch(&c->w_err);
	serve_unwatch(&c->w_pid);
	serve_unwatch(&c->w_in);
	serve_unwatch(&c->w_exec);
	lws_sul_cancel(&c->tick);
	lws_sul_cancel(&c->linger);
	if (c->p) {
		spawn_free(c->p);
		reap_dying(&T.reap);
	}
	while (c->head) {
		struct frame *f = c->head;
		c->head = f->next;
		frame_free(f);
	}
	uncount_buffered(c, c->buffered);
	reader_put(c->rd);
	count_put(&T.agents, c->ag);
	pool_trim();
	resume_paused();
	free(c->exit_json);
	free(c->in_buf);
	free(c->audit_argv);
	free(c->cwd);
	free(c);
}

static void linger_expired(lws_sorted_usec_list_t *sul)
{
	struct cmd *c = lws_container_of(sul, struct cmd, linger);
	uint64_t now = spawn_now_ns();

	if (now < c->linger_due_ns) { /* lws' clock counted a freeze */
		lws_sul_schedule(serve_lws_context(), 0, sul, linger_expired,
				 (lws_usec_t)((c->linger_due_ns - now) / 1000u) + 1);
		return;
	}
	log_info("Command %u: nobody acknowledged its end in time; dropping it", c->id);
	cmd_free(c);
}

/* How many table entries agent holds, ended ones (kept for their reader's final ack)
 * included. */
static unsigned entries_of(const char *agent)
{
	unsigned n = 0;

	for (struct cmd *x = T.cmds; x; x = x->next)
		n += !strcmp(x->agent, agent);
	return n;
}

/* The table is full: an ended command, kept only for its reader's final ack, of the agent
 * holding the most entries is dropped (its oldest, as its linger would have), if that agent
 * holds more than agent does; else agent's own oldest ended one. Without the first, one
 * agent whose readers never ack filled the table for 10 minutes at a time and every other
 * agent's exec.start got "too many commands"; without the second, an agent that held the
 * most itself (the only agent of a sandbox, whose clients went away before the end of 256
 * commands) got it for 10 minutes, with none of its commands running (red team,
 * serve-soak.sh). Running commands are never dropped. */
static void make_room_for(const char *agent)
{
	struct cmd *victim = NULL, *own = NULL;
	unsigned most = entries_of(agent);

	for (struct cmd *x = T.cmds; x; x = x->next) {
		unsigned n;
		if (!x->done || (victim && !strcmp(x->agent, victim->agent)))
			continue;
		if (!own && !strcmp(x->agent, agent))
			own = x; /* the first in the list: agent's oldest ended one */
		n = entries_of(x->agent);
		if (n > most) {
			most = n;
			victim = x; /* the first ended one in the list: that agent's oldest */
		}
	}
	if (!victim)
		victim = own;
	if (!victim)
		return;
	log_info("Command %u of agent \"%s\" dropped before its final acknowledgement: the "
		 "command table is full, and that agent holds the most of it (%u)",
		 victim->id, victim->agent, most);
	cmd_free(victim);
}

static void maybe_finish(struct cmd *c)
{
	if (c->done && c->exit_sent && c->acked >= c->next_seq)
		cmd_free(c);
}

static void set_paused(struct cmd *c, bool paused)
{
	if (c->paused == paused)
		return;
	c->paused = paused;
	/* EPOLL_CTL_DEL rather than events=0: epoll reports HUP regardless of the mask. */
	if (paused) {
		serve_unwatch(&c->w_out);
		serve_unwatch(&c->w_err);
	} else {
		if (c->p && c->p->fd_out >= 0)
			(void)serve_watch(&c->w_out, c->p->fd_out, EPOLLIN, c->w_out.fn);
		if (c->p && c->p->fd_err >= 0)
			(void)serve_watch(&c->w_err, c->p->fd_err, EPOLLIN, c->w_err.fn);
	}
}

/* Output frames. A read goes straight into a full-size frame buffer (one copy less than
 * reading into a stack buffer); a short read is moved into an exact-size frame so that
 * many small frames cannot hold many large buffers (the 8 MiB bound counts payload bytes).
 * Full-size buffers are recycled through a pool: musl's malloc returns large blocks to the
 * kernel on free, and a page fault per 4 KiB of every frame cost more than the copy. The
 * pool holds as many as one command may keep unacknowledged (PROTO_MAX_BUFFERED), so a
 * command streaming at full speed allocates nothing; once a command has ended and its
 * output is all acknowledged, the pool shrinks back to FRAME_POOL_IDLE. */
#define FRAME_BIG (sizeof(struct frame) + LWS_PRE + PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD)
#define FRAME_POOL (PROTO_MAX_BUFFERED / PROTO_MAX_FRAME_PAYLOAD + 1)
#define FRAME_POOL_IDLE 8
static struct frame *pool[FRAME_POOL];
static unsigned pool_n;

static void pool_trim(void)
{
	while (pool_n > FRAME_POOL_IDLE)
		free(pool[--pool_n]);
}

static struct frame *frame_big(void)
{
	struct frame *f = pool_n ? pool[--pool_n] : malloc(FRAME_BIG);
	if (f)
		f->big = true;
	return f;
}

static void frame_free(struct frame *f)
{
	if (f && f->big && pool_n < FRAME_POOL)
		pool[pool_n++] = f;
	else
		free(f);
}

/* Queue f (its payload already in place) as the command's next frame. */
static void queue_frame(struct cmd *c, struct frame *f, uint8_t stream, uint16_t flags, size_t len)
{
	f->next = NULL;
	f->seq = ++c->next_seq;
	f->len = PROTO_FRAME_HEADER + len;
	f->stream = stream;
	f->flags = flags;
	f->written = false;
	proto_frame_header_put(f->buf + LWS_PRE, stream, flags, c->id, f->seq);
	if (c->tail)
		c->tail->next = f;
	else
		c->head = f;
	c->tail = f;
	count_buffered(c, len);
	if (c->attached)
		serve_want_write();
}

static int push_frame(struct cmd *c, uint8_t stream, uint16_t flags, const void *data, size_t len)
{
	struct frame *f = malloc(sizeof(*f) + LWS_PRE + PROTO_FRAME_HEADER + len);

	if (!f)
		return -ENOMEM;
	f->big = false;
	if (len)
		memcpy(f->buf + LWS_PRE + PROTO_FRAME_HEADER, data, len);
	queue_frame(c, f, stream, flags, len);
	return 0;
}

static void schedule_tick(struct cmd *c);

/* The command's stdin is over (closed by it or by us, the command ended): the queue and its
 * STDIN_MAX ring go. Kept until cmd_free, each ended command, which an agent's 32 do not
 * count, held the 1 MiB it was sent and never read for the 10 minutes it waits for an
 * acknowledgement: one agent's 148 of them took serve from 1 to 154 MB (red team,
 * redteam-floor.sh). */
static void stdin_drop(struct cmd *c)
{
	free(c->in_buf);
	c->in_buf = NULL;
	c->in_len = c->in_head = 0;
}

static void build_exit(struct cmd *c)
{
	const struct spawn_result *res = spawn_result(c->p);
	uint64_t ms = res->wall_us / 1000;
	cJSON *o = cJSON_CreateObject();

	c->done = true;
	stdin_drop(c); /* queue_stdin takes none now */
	if (!o)
		return;
	cJSON_AddNumberToObject(o, "cmd", c->id);
	cJSON_AddStringToObject(o, "end", spawn_end_name(res->end));
	if (res->term_signal) {
		cJSON_AddNumberToObject(o, "signal", res->term_signal);
		cJSON_AddBoolToObject(o, "core", res->core_dumped);
	} else
		cJSON_AddNumberToObject(o, "code", res->exit_code);
	cJSON_AddNumberToObject(o, "last_seq", (double)c->next_seq);
	cJSON_AddNumberToObject(o, "stdout_bytes", (double)res->out_bytes);
	cJSON_AddNumberToObject(o, "stderr_bytes", (double)res->err_bytes);
	cJSON_AddBoolToObject(o, "truncated", res->truncated);
	cJSON_AddNumberToObject(o, "duration_ms", (double)ms);
	cJSON_AddStringToObject(o, "tree", res->tree_control ? res->tree_control : "pgid");
	cJSON_AddStringToObject(o, "abstract_sockets",
				res->abstract_sockets ? res->abstract_sockets : "shared");
	cJSON_AddBoolToObject(o, "left_children_killed", res->left_children_killed);
	c->exit_json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	/* The audit record: one line per command. The fields of fixed size first: a log line
	 * has a bound (lib/log.c), and a long cwd or argv must not cut the end and code off.
	 * code is what `pistis exec` exits with: 128+N for a death by signal N, never the 0
	 * that read as a success. argv and cwd are escaped already (escape_c_field): %-s, so
	 * not a second time. */
	log_notice("audit exec cmd=%u agent=\"%s\" uid=%u end=%s code=%d signal=%d stdout=%llu "
		   "stderr=%llu duration_ms=%llu %-s cwd=%-s",
		   c->id, c->agent, (unsigned)c->uid, spawn_end_name(res->end),
		   res->term_signal ? 128 + res->term_signal : res->exit_code, res->term_signal,
		   (unsigned long long)res->out_bytes, (unsigned long long)res->err_bytes,
		   (unsigned long long)ms, c->audit_argv ? c->audit_argv : "argv=?",
		   c->cwd ? c->cwd : "\"~\"");
	c->linger_due_ns = spawn_now_ns() + (uint64_t)LINGER_US * 1000u;
	lws_sul_schedule(serve_lws_context(), 0, &c->linger, linger_expired, LINGER_US);
	if (c->attached)
		serve_want_write();
}

/* Rounds of the pgid mode's sweep at an agent's last command's end, 10 ms apart: a round
 * that killed something is followed by another, which finds what the first could not (the
 * trusted commands past a batch, or whose sudo the agent pass killed after the trusted
 * pass had gone by: re-parented, they are orphans now). */
#define LEFTOVER_ROUNDS 8

/* foreign: a process of uid outside our root (spawn_uid_beyond_root), or 0. kill(-1) as
 * the agent reaches every process of its uid in the PID namespace: where one is not ours
 * (another sandbox's agent of that uid, the PID namespace shared with it), only the /proc
 * pass runs, which is ours only (red team, shared-pidns.sh). */
static void kill_agent_leftovers(uint32_t cmd_id, const char *agent, uid_t uid, pid_t foreign)
{
	int k, u, killed = 0;

	for (unsigned round = 0; round < LEFTOVER_ROUNDS; round++) {
		if (round)
			(void)nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
		k = spawn_kill_agent_processes(T.spawn, &uid, 1);
		/* The /proc pass (which counts, for the log) misses a process that keeps
		 * forking and letting its parent exit; kill(-1) as the agent does not. */
		u = foreign > 0 ? 0 : spawn_kill_uid(uid);
		if (u < 0)
			log_warning_errno(u, "Failed to kill what runs as agent \"%s\": %m", agent);
		if (k <= 0)
			break;
		killed += k;
	}
	if (killed > 0)
		log_notice(
			"audit exec cmd=%u agent=\"%s\": killed %d process(es) that had left its "
			"process group (no cgroup), the agent's last command having ended",
			cmd_id, agent, killed);
}

/* Whether a command of uid other than except is still running. */
static bool agent_command_running(uid_t uid, const struct cmd *except)
{
	for (const struct cmd *x = T.cmds; x; x = x->next)
		if (x != except && !x->done && x->uid == uid)
			return true;
	return false;
}

static void sweep_put_off(const struct sweep *w);
static int ipc_probe_start(const struct sweep *w);

/* The agent's SysV IPC objects, removed in the loop: what no kill reaches (pistisd/ipc.h). */
static void sweep_ipc(const struct sweep *w)
{
	int k = ipc_remove_agent_objects(spawn_ctx_proc_fd(T.spawn), w->uid);

	if (k > 0)
		log_notice("audit exec cmd=%u agent=\"%s\": removed %d SysV IPC object(s) (shared "
			   "memory, message queues, semaphores) the agent left, its last command "
			   "having ended",
			   w->cmd_id, w->agent, k);
	else if (k < 0)
		log_warning_errno(k, "Failed to remove the SysV IPC objects agent \"%s\" left: %m",
				  w->agent);
}

/* Finding an agent's objects means reading all of /proc/sysvipc, every agent's objects
 * included: one agent that held the 68,000 the kernel's defaults allow (one command kept
 * running, so that its own were never swept) made every other agent's command end cost
 * serve 50-120 ms of its loop, stalling every agent's output, acks and pings (red team).
 * Where the namespace holds more than this many, the listing runs in a forked child and
 * the loop waits for nothing; the removal itself stays in the loop (below), and runs only
 * for an agent the child found objects of. */
#define SWEEP_IPC_INLINE_MAX 512

struct ipc_probe {
	struct watch w;
	pid_t pid;
	struct sweep sw;
	bool again; /* the agent's command ended again meanwhile: its objects listed anew */
	struct ipc_probe *next;
};
static struct ipc_probe *probes;

static void ipc_probe_free(struct ipc_probe *q)
{
	serve_unwatch(&q->w);
	safe_close(q->w.fd);
	if (q->pid > 0) {
		(void)kill(q->pid, SIGKILL);
		while (waitpid(q->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	for (struct ipc_probe **pp = &probes; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	free(q);
}

static void ipc_probes_stop(void)
{
	while (probes)
		ipc_probe_free(probes);
}

/* The child's count: 0 = none of the agent's, else (objects, or the listing failed) the
 * removal runs as it did in the loop, unless a command of the agent runs by now (whose
 * own end sweeps again) or a file operation of its (the sweep waits for it, as before).
 * None, but a command of the agent ended since the child was made: a new child looks
 * again (that command may have made objects after the listing). */
static void on_ipc_probe(struct watch *w, uint32_t events)
{
	struct ipc_probe *q = w->owner;
	int64_t n = -1;
	ssize_t r = read(w->fd, &n, sizeof(n));
	struct sweep sw = q->sw;
	bool again;

	(void)events;
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r != (ssize_t)sizeof(n))
		n = -1; /* the child failed: look in the loop, as before */
	while (q->pid > 0 && waitpid(q->pid, NULL, 0) < 0 && errno == EINTR)
		;
	q->pid = 0;
	again = q->again;
	ipc_probe_free(q);
	if (!T.spawn || agent_command_running(sw.uid, NULL))
		return;
	sw.pgid = false; /* its leftovers were killed when the command ended */
	if (n != 0 && fsops_running_for(sw.uid))
		sweep_put_off(&sw);
	else if (n != 0)
		sweep_ipc(&sw);
	else if (again && ipc_probe_start(&sw) < 0)
		sweep_ipc(&sw);
}

/* Forks the child that counts the agent's objects; 0, or -errno (then the caller looks in
 * the loop). The child is root and a copy of serve's memory, token wiped, and keeps only
 * its answer pipe and /proc: a copy of an fd serve closes meanwhile would keep that fd's
 * epoll registration alive. */
static int ipc_probe_start(const struct sweep *w)
{
	int p[2], proc_fd = spawn_ctx_proc_fd(T.spawn);
	struct ipc_probe *q;
	pid_t pid;

	if (proc_fd < 0)
		return -ENOENT;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(q);
		return negative_errno();
	}
	pid = fork();
	if (pid < 0) {
		int r = negative_errno();
		close(p[0]);
		close(p[1]);
		free(q);
		return r;
	}
	if (pid == 0) {
		int out = fcntl(p[1], F_DUPFD_CLOEXEC, 5), pf = fcntl(proc_fd, F_DUPFD_CLOEXEC, 5);
		size_t n = 0;
		int64_t v;

		serve_forget_secrets();
		if (out < 0 || pf < 0 || dup3(out, 3, O_CLOEXEC) < 0 || dup3(pf, 4, O_CLOEXEC) < 0)
			_exit(1);
		(void)close_all_fds_from(5);
		v = ipc_agent_objects(4, w->uid, NULL, 0, &n) < 0 ? -1 : (int64_t)n;
		_exit(write(3, &v, sizeof(v)) == (ssize_t)sizeof(v) ? 0 : 1);
	}
	close(p[1]);
	q->pid = pid;
	q->sw = *w;
	q->w.owner = q;
	q->w.fd = p[0];
	q->next = probes;
	probes = q;
	if (fd_set_nonblock(p[0], 1) < 0 || serve_watch(&q->w, p[0], EPOLLIN, on_ipc_probe) < 0) {
		int r = negative_errno();
		ipc_probe_free(q);
		return r < 0 ? r : -EIO;
	}
	return 0;
}

static void sweep_run(const struct sweep *w)
{
	long n = w->keep_children ? 0 : ipc_namespace_objects();
	pid_t other, child = 0, foreign;

	/* Our last command of the agent is not its last anywhere when another pistisd (an
	 * operator's `pistisd run`, a second serve on this /data) runs one: the sweep by uid
	 * killed that command, and the IPC sweep took the objects it uses (red team,
	 * redteam-concurrent.sh). Left then, as beside a command of our own: that daemon's
	 * command ends with its own sweep, a tightening policy.apply still reaches all. */
	if ((w->pgid || n != 0) &&
	    (other = spawn_uid_commanded_elsewhere(T.spawn, w->uid, &child)) > 0) {
		log_notice("audit exec cmd=%u agent=\"%s\": what runs as the agent, and its SysV "
			   "IPC objects, are left: another pistisd (pid %d) runs a command of it "
			   "(pid %d)",
			   w->cmd_id, w->agent, (int)other, (int)child);
		return;
	}
	/* A process of the uid outside our root: another sandbox's agent of that uid where the
	 * PID namespace is shared with it (docker run --pid container:X, a Kubernetes pod with
	 * shareProcessNamespace, whose IPC namespace is shared too). Its SysV objects have the
	 * same owner as ours, and the IPC sweep removed them while it ran (red team,
	 * shared-pidns.sh). */
	foreign = w->pgid || n != 0 ? spawn_uid_beyond_root(T.spawn, w->uid) : 0;
	if (foreign > 0)
		log_notice("audit exec cmd=%u agent=\"%s\": a process of uid %u outside this "
			   "sandbox's root (pid %d: a PID namespace shared with another sandbox?) "
			   "keeps the sweep to this root's processes and the agent's SysV IPC "
			   "objects",
			   w->cmd_id, w->agent, (unsigned)w->uid, (int)foreign);
	if (w->pgid)
		kill_agent_leftovers(w->cmd_id, w->agent, w->uid, foreign);
	/* What no kill reaches: the SysV IPC objects the agent made and left (pistisd/ipc.h).
	 * Kept with what keep_children keeps, which may still use them, and where another
	 * sandbox's process of the uid may. */
	if (w->keep_children || foreign > 0)
		return;
	if (n >= 0 && n <= SWEEP_IPC_INLINE_MAX) {
		sweep_ipc(w);
		return;
	}
	/* One child an agent at a time: one that ends commands in a loop makes no more. */
	for (struct ipc_probe *q = probes; q; q = q->next)
		if (q->sw.uid == w->uid) {
			q->sw = *w;
			q->again = true;
			return;
		}
	if (ipc_probe_start(w) < 0)
		sweep_ipc(w);
}

static void sweeps_pending_run(lws_sorted_usec_list_t *sul)
{
	(void)sul;
	if (!T.spawn)
		return;
	for (size_t i = 0; i < SWEEPS_PENDING_MAX; i++) {
		struct sweep w = pending[i];
		if (!w.used || fsops_running_for(w.uid))
			continue;
		pending[i].used = false;
		if (!agent_command_running(w.uid, NULL))
			sweep_run(&w);
	}
}

/* fsops.c: the agent's last file operation has ended. */
void session_fsops_ended(uid_t uid)
{
	for (size_t i = 0; i < SWEEPS_PENDING_MAX; i++)
		if (pending[i].used && pending[i].uid == uid) {
			/* From the loop, not from inside fsops' own bookkeeping. */
			lws_sul_schedule(serve_lws_context(), 0, &pending_sul, sweeps_pending_run,
					 0);
			return;
		}
}

static void sweep_put_off(const struct sweep *w)
{
	size_t free_i = SWEEPS_PENDING_MAX;

	for (size_t i = 0; i < SWEEPS_PENDING_MAX; i++) {
		if (pending[i].used && pending[i].uid == w->uid) {
			pending[i] = *w; /* the newest last command's */
			return;
		}
		if (!pending[i].used && free_i == SWEEPS_PENDING_MAX)
			free_i = i;
	}
	if (free_i == SWEEPS_PENDING_MAX) {
		log_warning("agent \"%s\": what its last command left is not swept (%d agents' "
			    "sweeps already wait for their file operations)",
			    w->agent, SWEEPS_PENDING_MAX);
		return;
	}
	pending[free_i] = *w;
}

/* Where command trees are process groups (no cgroup v2), a grandchild that called setsid()
 * left its command's group, and with it the command's timeout, cancel and end. When the
 * command that just ended was the last thing running as its agent (no other command, no
 * file operation), every process still running with the agent's uid is such a grandchild
 * of one of its commands: it goes now, with the SysV IPC objects the agent left. With
 * other commands running nothing tells whose it is, so it stays (a tightening policy.apply
 * still reaches it). With only file operations running, the sweep waits for the last of
 * them to end (a helper the agent stops would otherwise keep its leftovers alive: red
 * team). */
static void kill_strays(const struct cmd *c)
{
	const char *tree = spawn_result(c->p)->tree_control;
	struct sweep w = {
		.uid = c->uid,
		.cmd_id = c->id,
		/* Only a tree that was a process group: an audit session held all the command
		 * started (its trusted commands too) and was killed with it, by session id,
		 * which no other sandbox's process has. The sweep goes by uid, and the same
		 * uid is every sandbox's first agent: in a PID namespace shared with the host
		 * (docker run --pid host), it killed the processes of agents of every other
		 * sandbox on the machine at each command end (red team, reproduced). */
		.pgid = !tree || !strcmp(tree, "pgid"),
		.keep_children = c->p->opts_copy.keep_children,
		.used = true,
	};

	if (agent_command_running(c->uid, c))
		return;
	snprintf(w.agent, sizeof(w.agent), "%s", c->agent);
	if (fsops_running_for(c->uid))
		sweep_put_off(&w);
	else
		sweep_run(&w);
}

/* At start-up: the SysV IPC objects of agents with no process left, which a daemon that
 * died (or the volume's earlier life, in this IPC namespace) could not remove. */
static int registry_uids(uid_t **ret, size_t *ret_n);

static bool uid_listed(const uid_t *uids, size_t n, uid_t uid)
{
	for (size_t i = 0; i < n; i++)
		if (uids[i] == uid)
			return true;
	return false;
}

static void remove_orphaned_ipc(void)
{
	int proc_fd = spawn_ctx_proc_fd(T.spawn);
	_cleanup_free_ uid_t *uids = NULL;
	struct ipc_obj v[256];
	size_t n = 0, n_uids = 0;

	/* The host's IPC namespace seen from a PID namespace of our own: left alone
	 * (ipc_namespace_seen). */
	if (!ipc_namespace_seen()) {
		log_notice("The IPC namespace is the host's (docker run --ipc host?): SysV objects "
			   "of agents' uids that no process here holds are left as they are");
		return;
	}
	/* Only this sandbox's agents' (the registry's), not every uid of the agent range. */
	if (proc_fd < 0 || registry_uids(&uids, &n_uids) < 0 || !n_uids ||
	    ipc_agent_objects(proc_fd, (uid_t)-1, v, ELEMENTSOF(v), &n) < 0)
		return;
	for (size_t i = 0; i < n && i < ELEMENTSOF(v); i++) {
		bool seen = false;
		int k;
		for (size_t j = 0; j < i && !seen; j++)
			seen = v[j].uid == v[i].uid;
		if (seen || !uid_listed(uids, n_uids, v[i].uid) ||
		    spawn_agent_has_processes(T.spawn, v[i].uid))
			continue;
		k = ipc_remove_agent_objects(proc_fd, v[i].uid);
		if (k > 0)
			log_notice(
				"audit start: removed %d SysV IPC object(s) of uid %u, which has "
				"no process left",
				k, (unsigned)v[i].uid);
	}
}

static void check_done(struct cmd *c)
{
	if (!c->done && c->p && spawn_done(c->p)) {
		serve_unwatch(&c->w_pid);
		lws_sul_cancel(&c->tick);
		kill_strays(c);
		build_exit(c);
		/* Until its end is acknowledged (up to LINGER_US) only the result is needed: the
		 * cgroup goes back to the agent's slots, whose next command reuses it. */
		spawn_release(c->p);
		reap_dying(&T.reap);
	}
}

static void on_output(struct watch *w, uint32_t events)
{
	struct cmd *c = w->owner;
	uint8_t stream = w == &c->w_err ? PROTO_STREAM_STDERR : PROTO_STREAM_STDOUT;
	struct frame *t = c->tail, *f = NULL;
	uint8_t *dst;
	size_t room;
	ssize_t n;

	/* While this stream's last frame has never gone out (the link is busy), more output
	 * joins it: fewer, larger frames when output outruns the link, none delayed when it
	 * does not. A frame still small when it is sent is moved into an exact-size copy then
	 * (take_frame), so what waits for an ack holds no spare buffer. Never a frame written
	 * before: after a re-attach it is resent, and the relay drops a sequence number it has
	 * forwarded already. */
	if (t && t->big && !t->written && t->stream == stream && !t->flags &&
	    t->len < PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD) {
		size_t have = t->len - PROTO_FRAME_HEADER;
		dst = t->buf + LWS_PRE + PROTO_FRAME_HEADER + have;
		room = PROTO_MAX_FRAME_PAYLOAD - have;
	} else {
		f = frame_big();
		if (!f) {
			log_error("Command %u: out of memory buffering output", c->id);
			return;
		}
		dst = f->buf + LWS_PRE + PROTO_FRAME_HEADER;
		room = PROTO_MAX_FRAME_PAYLOAD;
	}
	n = spawn_read(c->p, w->fd, dst, room);
	if (n == -EAGAIN || n == -EINTR) {
		frame_free(f);
		return;
	}
	if (n <= 0) {
		/* EOF (or EIO from a pty master whose slave closed): the stream ends. */
		frame_free(f);
		serve_unwatch(w);
		w->fd = -1;
		(void)push_frame(c, stream, PROTO_FRAME_EOF, NULL, 0);
	} else if (f) {
		queue_frame(c, f, stream, 0, (size_t)n);
	} else {
		t->len += (size_t)n;
		count_buffered(c, (size_t)n);
	}
	check_done(c);
	schedule_tick(c);
}

static void on_pidfd(struct watch *w, uint32_t events)
{
	struct cmd *c = lws_container_of(w, struct cmd, w_pid);

	/* Out of the epoll set before spawn_reap closes the pidfd: a spawn child that has not
	 * exec'd yet holds a copy of every fd of ours (a stalled one for up to
	 * SPAWN_EXEC_DEADLINE_MS), so the registration would outlive the close and report a
	 * freed watch. */
	serve_unwatch(w);
	(void)spawn_reap(c->p);
	if (!c->p->reaped && c->p->pidfd >= 0)
		(void)serve_watch(w, c->p->pidfd, EPOLLIN, on_pidfd);
	check_done(c);
	schedule_tick(c);
}

/* After the main process exits, spawn_tick closes the outputs once the drain time has
 * passed (a background child may hold them open). Output already in the pipe must not be
 * lost to that: while the command is paused (its reader is 8 MiB behind) or the pipes
 * still hold bytes, the drain waits. */
static bool output_pending(struct cmd *c)
{
	int fds[2] = {c->p->fd_out, c->p->fd_err};

	for (unsigned i = 0; i < 2; i++) {
		int n = 0;
		if (fds[i] < 0)
			continue;
		if (c->paused || (ioctl(fds[i], FIONREAD, &n) == 0 && n > 0))
			return true;
	}
	return false;
}

static void exec_settled(struct cmd *c, int r, const struct spawn_error *se);

static void on_tick(lws_sorted_usec_list_t *sul)
{
	struct cmd *c = lws_container_of(sul, struct cmd, tick);

	if (c->starting) {
		/* SPAWN_EXEC_DEADLINE_MS is up (or another timer of the command): a child that
		 * has not exec'd by now is killed ("timed out before exec"), c freed. */
		struct spawn_error se;
		int r = spawn_exec_poll(c->p, 0, &se);
		if (r != 0)
			exec_settled(c, r, &se);
		if (r < 0)
			return;
	}
	if (c->p->reaped && output_pending(c)) {
		/* The drain time is over but the reader has not taken everything: what the
		 * command left behind is killed now all the same (a paused command must not
		 * keep processes alive, nor a steady writer hold the drain off); the pipes
		 * stay open until their buffered bytes are read to EOF. keep_children keeps
		 * them, as documented. */
		if (!c->p->opts_copy.keep_children && spawn_next_timeout_ms(c->p) == 0)
			(void)spawn_kill_leftovers(c->p);
		lws_sul_schedule(serve_lws_context(), 0, &c->tick, on_tick, 50 * LWS_US_PER_MS);
		return;
	}
	spawn_tick(c->p);
	check_done(c);
	if (!c->done)
		schedule_tick(c);
}

static void schedule_tick(struct cmd *c)
{
	int ms;

	if (c->done)
		return;
	ms = spawn_next_timeout_ms(c->p);
	if (ms < 0)
		lws_sul_cancel(&c->tick);
	else
		lws_sul_schedule(serve_lws_context(), 0, &c->tick, on_tick,
				 (lws_usec_t)ms * 1000 + 1000);
}

/* The reader's stdin credit: how much of its stdin the command has taken, every
 * STDIN_ACK_STEP and whenever the queue runs empty. A client keeps what it sent and was not
 * yet told written under the stdin_window of exec.started (docs/protocol.md), so a fast
 * sender never overflows the queue of a slow reader. */
static void tell_stdin_written(struct cmd *c)
{
	cJSON *o;

	if (c->in_written == c->in_told || c->done || !c->owner[0] ||
	    (c->in_len && c->in_written - c->in_told < STDIN_ACK_STEP))
		return;
	c->in_told = c->in_written;
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "cmd", c->id);
	cJSON_AddNumberToObject(o, "written", (double)c->in_written);
	serve_send_json(proto_event_build("exec.stdin", c->owner, o));
}

/* stdin: queued bytes go to the pipe (or pty) as it accepts them; never blocks. */
static void flush_stdin(struct cmd *c)
{
	int fd = c->p ? c->p->fd_in : -1;

	if (fd < 0) {
		stdin_drop(c);
		return;
	}
	/* A ring, not a buffer moved down after each write: a command that reads its stdin a
	 * pipe page at a time had serve move up to 1 MiB for every 4 KiB it took. */
	while (c->in_len) {
		size_t first =
			c->in_len < STDIN_MAX - c->in_head ? c->in_len : STDIN_MAX - c->in_head;
		struct iovec v[2] = {{c->in_buf + c->in_head, first},
				     {c->in_buf, c->in_len - first}};
		ssize_t n = writev(fd, v, v[1].iov_len ? 2 : 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN) /* EPIPE: the command closed its stdin */
				stdin_drop(c);
			break;
		}
		c->in_head = (c->in_head + (size_t)n) % STDIN_MAX;
		c->in_len -= (size_t)n;
		c->in_written += (uint64_t)n;
	}
	if (!c->in_len)
		c->in_head = 0;
	tell_stdin_written(c);
	if (c->in_len) {
		(void)serve_watch(&c->w_in, fd, EPOLLOUT, c->w_in.fn);
		return;
	}
	serve_unwatch(&c->w_in);
	if (c->in_close && !c->pty) {
		/* pipes mode: closing our end is the EOF; with a pty we send ^D instead */
		c->p->fd_in = safe_close(c->p->fd_in);
		stdin_drop(c);
	}
}

static void on_stdin_writable(struct watch *w, uint32_t events)
{
	flush_stdin(lws_container_of(w, struct cmd, w_in));
}

static int queue_stdin(struct cmd *c, const uint8_t *data, size_t len)
{
	if (!c->p || c->p->fd_in < 0 || c->done)
		return -EPIPE;
	if (c->in_len + len > STDIN_MAX)
		return -ENOBUFS;
	if (!c->in_buf && !(c->in_buf = malloc(STDIN_MAX)))
		return -ENOMEM;
	size_t tail = (c->in_head + c->in_len) % STDIN_MAX;
	size_t first = len < STDIN_MAX - tail ? len : STDIN_MAX - tail;
	memcpy(c->in_buf + tail, data, first);
	memcpy(c->in_buf, data + first, len - first);
	c->in_len += len;
	flush_stdin(c);
	return 0;
}

void session_frame(const struct proto_frame *f)
{
	struct cmd *c = cmd_by_id(f->cmd);
	int r;

	if (!c)
		return serve_send_error(NULL, PROTO_E_NOT_FOUND, "no command %u", f->cmd);
	if (f->stream != PROTO_STREAM_STDIN)
		return serve_send_error(c->owner, PROTO_E_BAD_FRAME,
					"only stdin frames go to a sandbox");
	/* stdin frames are numbered 1, 2, 3…: a gap or repeat is refused, not guessed at. */
	if (f->seq != c->stdin_seq + 1)
		return serve_send_error(
			c->owner, PROTO_E_BAD_SEQUENCE, "stdin frame %llu, expected %llu",
			(unsigned long long)f->seq, (unsigned long long)c->stdin_seq + 1);
	c->stdin_seq = f->seq;
	if (c->in_refused)
		return;
	if (f->len) {
		r = queue_stdin(c, f->payload, f->len);
		if (r == -ENOBUFS) {
			/* A reader past its stdin_window: dropping this frame and taking the next
			 * would hand the command a stream with a hole in it. Its stdin ends here
			 * instead (EOF once the queue drains), and the reader is told. */
			c->in_refused = c->in_close = true;
			flush_stdin(c);
			return serve_send_error(c->owner, PROTO_E_LIMIT,
						"stdin: over %u bytes the command has not read; "
						"stdin closed at byte %llu",
						STDIN_MAX,
						(unsigned long long)(c->in_written + c->in_len));
		}
		/* Input for a command whose stdin is gone (it ended, closed its stdin, its
		 * terminal went with it: keys typed as it exits, the ^D a terminal sends
		 * when its own input ends) goes nowhere, as ssh drops it. No error: the
		 * client printed it over the command's last output ("internal: stdin:
		 * Broken pipe"). A command started without stdin is told so. */
		if (r == -EPIPE && c->has_stdin)
			r = 0;
		if (r == -EPIPE)
			serve_send_error(c->owner, PROTO_E_BAD_REQUEST,
					 "stdin: command %u was started without stdin "
					 "(\"stdin\": \"pipe\" or \"pty\" gives it one)",
					 c->id);
		else if (r < 0)
			serve_send_error(c->owner, proto_err_from_errno(r), "stdin: %s",
					 strerror(-r));
	}
	if (f->flags & PROTO_FRAME_EOF) {
		c->in_close = true;
		if (c->p && c->pty)
			(void)queue_stdin(c, (const uint8_t *)"\x04", 1);
		flush_stdin(c);
	}
}

/* The audit line's budget for the command: each argument's escaped bytes, and the list's
 * (the line as a whole is cut at lib/log.c's 2 KiB). */
#define AUDIT_ARG_MAX 240
#define AUDIT_SHELL_MAX 800
#define AUDIT_ARGV_MAX 960
#define AUDIT_CWD_MAX 400

/* The command for its audit line: how many arguments, how many bytes and the SHA-256 of
 * the whole argv as the command got it (each argument with its NUL; the shell form as
 * /bin/sh -c TEXT), then the arguments C-escaped, each cut at AUDIT_ARG_MAX with a mark
 * outside its quotes (escape_c_field), and arguments past AUDIT_ARGV_MAX left out as
 * +N more. So nothing an agent runs can hide its end behind padding: a cut says so, and
 * the digest names the whole. */
static char *argv_for_audit(char *const *argv, const char *shell)
{
	static char *const sh_argv[] = {(char *)"/bin/sh", (char *)"-c", NULL};
	struct sha256_ctx h;
	uint8_t d[SHA256_DIGEST_SIZE];
	char hex[2 * SHA256_DIGEST_SIZE + 1];
	size_t argc = 0, bytes = 0, cap = AUDIT_ARGV_MAX + 2 * AUDIT_SHELL_MAX + 256, n;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	sha256_init(&h);
	for (char *const *a = shell ? sh_argv : argv; *a; a++, argc++) {
		sha256_update(&h, *a, strlen(*a) + 1);
		bytes += strlen(*a) + 1;
	}
	if (shell) {
		sha256_update(&h, shell, strlen(shell) + 1);
		bytes += strlen(shell) + 1;
		argc++;
	}
	sha256_final(&h, d);
	for (size_t i = 0; i < sizeof(d); i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	n = (size_t)snprintf(out, cap, "argc=%zu argv_bytes=%zu argv_sha256=%s argv=[", argc, bytes,
			     hex);
	if (shell) {
		_cleanup_free_ char *f = escape_c_field(shell, AUDIT_SHELL_MAX);
		n += (size_t)snprintf(out + n, cap - n, "\"/bin/sh\",\"-c\",%s]", f ? f : "?");
		return out;
	}
	for (size_t i = 0; argv[i]; i++) {
		_cleanup_free_ char *f = escape_c_field(argv[i], AUDIT_ARG_MAX);
		size_t l = f ? strlen(f) : 1;

		if (n + l + 40 > AUDIT_ARGV_MAX + 128) {
			n += (size_t)snprintf(out + n, cap - n, "%s+%zu more", i ? "," : "",
					      argc - i);
			break;
		}
		n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? "," : "", f ? f : "?");
	}
	snprintf(out + n, cap - n, "]");
	return out;
}

static void send_start_error(const char *id, const struct spawn_error *se)
{
	char msg[160];

	spawn_error_string(se, msg, sizeof(msg));
	/* as a shell tells them apart (127, 126): the program is not there, or it is there
	 * and execve refused it (no x bit, a directory, not a program, its interpreter
	 * missing); anything else is ours */
	serve_send_error(id,
			 se->step == SPAWN_STEP_EXEC && se->error == ENOENT ? PROTO_E_NOT_FOUND
			 : se->step == SPAWN_STEP_EXEC || se->step == SPAWN_STEP_EXEC_INTERP
				 ? PROTO_E_CANNOT_EXEC
			 : se->step == SPAWN_STEP_CWD ? proto_err_from_errno(-se->error)
						      : PROTO_E_INTERNAL,
			 "cannot start: %s", msg);
}

/* The start of c is decided (spawn_exec_poll said r != 0): on failure exec.start is
 * answered with the error and the command forgotten (c is freed); once exec'd, its output
 * and exit are watched and exec.start is answered with exec.started. Nothing of the
 * command reached the server before this. */
/* The audit record of a command that reached the spawn core and never ran (a cwd the agent
 * may not enter, argv[0] not found, a step that failed, no exec in time): one line, as a
 * command's at its end, so that what an agent tried is on record whether or not it ran. */
static void audit_not_started(const struct cmd *c, const struct spawn_error *se)
{
	char msg[160];

	spawn_error_string(se, msg, sizeof(msg));
	log_notice("audit exec cmd=%u agent=\"%s\" uid=%u end=not-started error=\"%s\" %-s cwd=%-s",
		   c->id, c->agent, (unsigned)c->uid, msg, c->audit_argv ? c->audit_argv : "argv=?",
		   c->cwd ? c->cwd : "\"~\"");
}

static void exec_settled(struct cmd *c, int r, const struct spawn_error *se)
{
	cJSON *o;

	if (r < 0) {
		audit_not_started(c, se);
		send_start_error(c->start_id, se);
		cmd_free(c);
		return;
	}
	c->starting = false;
	serve_unwatch(&c->w_exec); /* spawn_exec_poll closed the fd (on_spawn_close) */
	/* A 1 MiB pipe: the command writes on while we send, and one read fills a whole frame
	 * (the default 64 KiB pipe made every read short). Not for a pty (EBADF: harmless). */
	if (!c->pty) {
		if (c->p->fd_out >= 0)
			(void)fcntl(c->p->fd_out, F_SETPIPE_SZ, PIPE_BYTES);
		if (c->p->fd_err >= 0)
			(void)fcntl(c->p->fd_err, F_SETPIPE_SZ, PIPE_BYTES);
	}
	if (c->p->fd_out >= 0)
		(void)serve_watch(&c->w_out, c->p->fd_out, EPOLLIN, on_output);
	if (c->p->fd_err >= 0)
		(void)serve_watch(&c->w_err, c->p->fd_err, EPOLLIN, on_output);
	if (c->p->pidfd >= 0)
		(void)serve_watch(&c->w_pid, c->p->pidfd, EPOLLIN, on_pidfd);
	schedule_tick(c);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "event", "exec.started");
	cJSON_AddNumberToObject(o, "cmd", c->id);
	cJSON_AddNumberToObject(o, "pid", c->p->pid);
	cJSON_AddStringToObject(o, "user", c->user);
	cJSON_AddNumberToObject(o, "uid", c->uid);
	if (c->tag[0])
		cJSON_AddStringToObject(o, "tag", c->tag);
	if (c->p->fd_in >= 0)
		cJSON_AddNumberToObject(o, "stdin_window", STDIN_MAX);
	serve_send_json(proto_ok_build(c->start_id, o));
}

static void on_exec(struct watch *w, uint32_t events)
{
	struct cmd *c = lws_container_of(w, struct cmd, w_exec);
	struct spawn_error se;
	int r = spawn_exec_poll(c->p, 0, &se);

	if (r != 0)
		exec_settled(c, r, &se);
}

/* What the environment builder may copy from our own environment: all of it but the PI_*
 * names. Ours is the container's (docker run -e, a pod's env:, what pistisd-entry had), the
 * operator's and no agent's; the builder passes every PI_* it is given, so a
 * PI_DB_URL=postgres://app:pw@db/x set there reached every command of every agent (red
 * team). A command's PI_* come from its own exec.start alone; the locale and terminal names
 * still pass. Built once: nothing in pistisd changes its environment. NULL: out of memory. */
static char *const *serve_inherited_env(void)
{
	extern char **environ;
	static char **env;
	size_t n = 0, k = 0;

	if (env)
		return env;
	while (environ && environ[n])
		n++;
	env = calloc(n + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "PI_", 3))
			env[k++] = environ[i];
	return env;
}

/* exec.start refused before the spawn core saw it: the answer, and its audit line (what
 * was asked, by which agent, and why not), as many as serve_audit_refused_allowed lets. st
 * is NULL when the request itself could not be read. */
static void exec_refuse(const struct proto_request *req, const struct proto_exec_start *st,
			enum proto_err code, const char *fmt, ...) _printf_(4, 5);
static void exec_refuse(const struct proto_request *req, const struct proto_exec_start *st,
			enum proto_err code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	bool audit;

	va_start(ap, fmt);
	audit = serve_refusev(req->id, code, msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!audit)
		return;
	if (!st) {
		log_notice("audit refused op=exec.start id=\"%s\" code=%s message=\"%s\"", req->id,
			   proto_err_name(code), msg);
		return;
	}
	{
		_cleanup_free_ char *agent = escape_c_field(st->agent, 64);
		_cleanup_free_ char *argv = argv_for_audit(st->argv, st->shell);
		_cleanup_free_ char *cwd = st->cwd ? escape_c_field(st->cwd, AUDIT_CWD_MAX) : NULL;

		log_notice("audit refused op=exec.start id=\"%s\" code=%s agent=%-s message=\"%s\" "
			   "%-s cwd=%-s",
			   req->id, proto_err_name(code), agent ? agent : "?", msg,
			   argv ? argv : "argv=?", cwd ? cwd : "\"~\"");
	}
}

static void exec_start(const struct proto_request *req)
{
	struct proto_error err = {0};
	struct proto_exec_start st = {0};
	struct spawn_opts so;
	struct spawn_error se = {0};
	struct serve_agent a;
	struct cmd *c = NULL;
	char **envp = NULL;
	const char *bad = NULL;
	unsigned per_agent = 0;
	char *sh_argv[] = {(char *)"/bin/sh", (char *)"-c", NULL, NULL};
	const char *cwd_root = NULL, *cwd_rel = NULL, *key = NULL;
	_cleanup_close_ int cwd_fd = -1, share_fd = -1;
	int r;

	if (T.stopping)
		return exec_refuse(req, NULL, PROTO_E_UNAVAILABLE,
				   "pistisd is stopping (a stop signal): no new command starts");
	if (T.hold_starts)
		return exec_refuse(req, NULL, PROTO_E_UNAVAILABLE,
				   "a policy apply is tightening permissions; retry when it ends");
	if (proto_exec_start_parse(req->root, &st, &err) < 0)
		return exec_refuse(req, NULL, err.code, "%s", err.message);
	if (reader_key(req, &key) < 0)
		goto out;
	for (struct cmd *x = T.cmds; x; x = x->next) {
		if (!strcmp(x->owner, req->id)) {
			exec_refuse(req, &st, PROTO_E_DUPLICATE_ID,
				    "id \"%s\" names a live command", req->id);
			goto out;
		}
		if (!x->done && !strcmp(x->agent, st.agent))
			per_agent++;
	}
	if (per_agent < PROTO_MAX_COMMANDS_PER_AGENT && T.n_cmds >= PROTO_MAX_COMMANDS)
		make_room_for(st.agent);
	/* Which bound, and whose commands hold it: "too many commands (0 for this agent)"
	 * read as the agent's own fault when the sandbox's table was full (red team, scale). */
	if (per_agent >= PROTO_MAX_COMMANDS_PER_AGENT) {
		exec_refuse(req, &st, PROTO_E_LIMIT,
			    "too many commands: this agent runs %u, the most one agent may",
			    per_agent);
		goto out;
	}
	if (T.n_cmds >= PROTO_MAX_COMMANDS) {
		unsigned running = 0;
		for (struct cmd *x = T.cmds; x; x = x->next)
			running += !x->done;
		exec_refuse(req, &st, PROTO_E_LIMIT,
			    "too many commands: the sandbox holds %u, the most it may (%u "
			    "running, %u ended and not yet acknowledged by their readers); "
			    "this agent runs %u",
			    T.n_cmds, running, T.n_cmds - running, per_agent);
		goto out;
	}
	r = serve_resolve_agent(st.agent, &a);
	if (r < 0) {
		char q[PROTO_PEER_NAME_SIZE];

		exec_refuse(req, &st, proto_err_from_errno(r), "agent %s: %s",
			    proto_peer_name(st.agent, q, sizeof(q)), serve_resolve_error());
		goto out;
	}
	{
		/* the request's PI_* names, and the client's TERM on a pty: it is the client's
		 * terminal that draws what the command prints (serve's own TERM, or
		 * ENVB_PTY_TERM without one, only where the client sent none) */
		const char *set[PROTO_MAX_ENV + 2];
		char term[sizeof("TERM=") + 64];
		size_t n_set = 0;
		struct envb_opts eo = {
			.user = a.name,
			.home = a.home,
			.tmpdir = a.tmpdir,
			.set = set,
			.term = st.pty ? ENVB_PTY_TERM : NULL,
		};

		for (size_t i = 0; i < st.n_env && n_set < PROTO_MAX_ENV; i++)
			set[n_set++] = st.env[i];
		if (st.term) {
			snprintf(term, sizeof(term), "TERM=%s", st.term);
			set[n_set++] = term;
		}
		set[n_set] = NULL;
		/* only the builder's allowlist is copied from our environment (locale, TERM),
		 * never a PI_* of ours (serve_inherited_env) */
		char *const *inherited = serve_inherited_env();

		r = inherited ? envb_build(&eo, inherited, &envp, &bad) : -ENOMEM;
		if (r < 0) {
			exec_refuse(req, &st, PROTO_E_BAD_REQUEST, "environment: %s%s%s",
				    strerror(-r), bad ? " at " : "", bad ? bad : "");
			goto out;
		}
	}
	/* The same rule as `pistisd run --cwd`: SPAWN_CWD_ROOTS or beneath them (each
	 * may be its own mount, so the root of the walk is the matching root itself), the rest
	 * resolved as the agent without symlinks or mount crossings. */
	if (spawn_cwd_split(st.cwd ? st.cwd : a.home, &cwd_root, &cwd_rel) < 0) {
		exec_refuse(req, &st, PROTO_E_BAD_REQUEST,
			    "cwd must be /workspaces, /workspace or /data or beneath them");
		goto out;
	}
	cwd_fd = openat(T.root_fd, cwd_root + 1, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd_fd < 0) {
		exec_refuse(req, &st, proto_err_from_errno(-errno), "cannot open %s: %s", cwd_root,
			    strerror(errno));
		goto out;
	}
	memset(&so, 0, sizeof(so));
	sh_argv[2] = (char *)st.shell;
	so.argv = st.shell ? sh_argv : st.argv;
	so.envp = envp;
	spawn_opts_as_agent(&so, a.uid, a.gid);
	so.cwd_root_fd = cwd_fd;
	so.cwd = cwd_rel;
	/* One cgroup per agent, one per command under it, where the host delegates one
	 * (cgroup.kill stops the whole tree, setsid'ed grandchildren included); otherwise the
	 * process group. exec.exit says which ("tree"). */
	so.cgroup_agent = a.name;
	so.stdio = st.pty ? SPAWN_STDIO_PTY : SPAWN_STDIO_PIPES;
	so.stdin_pipe = st.stdin_mode == PROTO_STDIN_PIPE;
	so.cols = (unsigned short)st.cols;
	so.rows = (unsigned short)st.rows;
	so.umask = (mode_t)-1;
	so.timeout_ms = st.timeout_ms;
	so.max_output = st.output_cap;
	/* The one switch for setuid programs: on exactly when the image has trusted commands
	 * (docs/trusted.md). Looked up per command (an openat2 and an fstat), so an operator's
	 * `pistisd trusted add/remove` takes effect without a restart. */
	so.allow_setuid = trusted_configured(T.root_fd);
	so.share_abstract_sockets = T.share_abstract;
	so.rlimits.nproc = T.agent_lim.pids_max; /* 0: spawn's default, 512 */
	/* Memory, CPU weight and pids.max per agent, on <agent>/ above its command cgroups:
	 * what an operator of several agents divides is the sandbox among agents, and an
	 * agent with eight commands must not get eight shares. Always passed, so that limits
	 * an earlier serve set are taken away when this one has none. */
	so.cgroup_agent_limits = &T.agent_lim;
	/* Held by the start until the child has the agent's uid: a policy apply (the command
	 * line's, or this serve's own) that holds the state directory stops every agent
	 * process it finds once it has it, so none may start meanwhile; this serve's hold
	 * (hold_starts) covers only its own apply's tightening. */
	r = session_apply_share(&share_fd);
	if (r == -EWOULDBLOCK) {
		exec_refuse(req, &st, PROTO_E_UNAVAILABLE,
			    "a policy apply is running in this root (it holds %s); retry when it "
			    "ends",
			    POLICY_STATE_DIR);
		goto out;
	}
	if (r < 0) {
		exec_refuse(req, &st, PROTO_E_INTERNAL, "cannot lock %s: %s", POLICY_STATE_DIR,
			    strerror(-r));
		goto out;
	}
	so.hold_fd = share_fd;

	c = calloc(1, sizeof(*c));
	if (!c) {
		exec_refuse(req, &st, PROTO_E_INTERNAL, "out of memory");
		goto out;
	}
	c->rd = reader_get(key);
	c->ag = c->rd ? agent_count_get(a.uid) : NULL;
	if (!c->ag) {
		reader_put(c->rd);
		exec_refuse(req, &st, PROTO_E_INTERNAL, "out of memory");
		free(c);
		c = NULL;
		goto out;
	}
	c->w_out.fd = c->w_err.fd = c->w_pid.fd = c->w_in.fd = c->w_exec.fd = -1;
	c->w_out.owner = c->w_err.owner = c;
	c->w_in.fn = on_stdin_writable;
	c->pty = st.pty;
	c->has_stdin = st.pty || st.stdin_mode == PROTO_STDIN_PIPE;
	so.on_close = on_spawn_close;
	so.on_close_userdata = c;
	/* Returns right after clone: the exec is awaited below for a moment, then by the loop
	 * (exec_settled), so a spawn child the agent stops holds up only its own command. */
	c->id = T.next_id++;
	if (T.next_id == 0)
		T.next_id = 1;
	snprintf(c->owner, sizeof(c->owner), "%s", req->id);
	snprintf(c->start_id, sizeof(c->start_id), "%s", req->id);
	snprintf(c->tag, sizeof(c->tag), "%s", st.tag ? st.tag : "");
	snprintf(c->agent, sizeof(c->agent), "%s", st.agent);
	snprintf(c->user, sizeof(c->user), "%s", a.name);
	c->uid = a.uid;
	c->attached = true;
	c->shell = !!st.shell;
	c->audit_argv = argv_for_audit(st.argv, st.shell);
	/* C-escaped and quoted like argv: a '"' in a directory name must not close the audit
	 * field, and a long one is cut with a mark (last on the line, after argv). */
	if (st.cwd)
		c->cwd = escape_c_field(st.cwd, AUDIT_CWD_MAX);
	r = spawn_start_async(T.spawn, &so, &c->p, &se);
	share_fd = safe_close(share_fd); /* the child's copy holds it on */
	if (r < 0) {
		reap_dying(&T.reap); /* a child killed before its exec may leave its cgroup late */
		audit_not_started(c, &se);
		send_start_error(req->id, &se);
		reader_put(c->rd);
		count_put(&T.agents, c->ag);
		free(c->audit_argv);
		free(c->cwd);
		free(c);
		c = NULL;
		goto out;
	}
	c->starting = true;
	/* Listed from now on, so it counts against the limits (and its tag names it) while
	 * it starts; newest last, so a tag names the latest command. */
	{
		struct cmd **pp = &T.cmds;
		while (*pp)
			pp = &(*pp)->next;
		*pp = c;
	}
	T.n_cmds++;
	r = spawn_exec_poll(c->p, EXEC_WAIT_INLINE_MS, &se);
	if (r != 0)
		exec_settled(c, r, &se);
	else if (serve_watch(&c->w_exec, c->p->exec_fd, EPOLLIN, on_exec) < 0)
		/* cannot watch it: wait here as spawn_start would (bounded) */
		exec_settled(c, spawn_exec_poll(c->p, -1, &se), &se);
	else
		schedule_tick(c); /* SPAWN_EXEC_DEADLINE_MS, in case the child never gets there */
out:
	envb_free(envp);
	proto_exec_start_done(&st);
}

/* The optional "agent" of a request that names commands: 0 with *agent (NULL: none
 * given); -EINVAL, answered, when it is there but not a name. */
static int get_agent_filter(const struct proto_request *req, const char **agent)
{
	struct proto_error err = {0};
	int r = proto_get_string(req->root, "agent", PROTO_MAX_AGENT, agent, &err);

	if ((r < 0 && r != -ENOENT) || (*agent && !**agent)) {
		serve_send_error(req->id, PROTO_E_BAD_REQUEST, "\"agent\" must be a name");
		return -EINVAL;
	}
	return 0;
}

/* The command a request names by "cmd" or "tag". With "agent", only that agent's
 * commands: a server acting for an agent names it, and a guessed number or a reused tag
 * then cannot reach another agent's command. */
static struct cmd *find_cmd(const struct proto_request *req)
{
	struct proto_error err = {0};
	const char *tag = NULL, *agent = NULL;
	bool ambiguous = false;
	uint64_t id;
	struct cmd *c = NULL;

	if (get_agent_filter(req, &agent) < 0)
		return NULL;
	if (proto_get_u64(req->root, "cmd", UINT32_MAX, &id, &err) == 0) {
		c = cmd_by_id(id);
		if (c && agent && strcmp(c->agent, agent))
			c = NULL; /* not_found, as for a number nobody holds */
	} else if (proto_get_string(req->root, "tag", PROTO_MAX_TAG, &tag, &err) == 0)
		c = cmd_by_tag(tag, agent, &ambiguous);
	else {
		serve_send_error(req->id, PROTO_E_BAD_REQUEST, "\"cmd\" or \"tag\" is required");
		return NULL;
	}
	if (ambiguous)
		serve_send_error(req->id, PROTO_E_NOT_UNIQUE,
				 "tag \"%s\" is held by commands of more than one agent; name the "
				 "\"agent\"",
				 tag);
	else if (!c)
		serve_send_error(req->id, PROTO_E_NOT_FOUND, "no such command");
	return c;
}

static void drop_acked(struct cmd *c, uint64_t seq)
{
	if (seq > c->next_seq)
		seq = c->next_seq;
	while (c->head && c->head->seq <= seq) {
		struct frame *f = c->head;
		c->head = f->next;
		uncount_buffered(c, f->len - PROTO_FRAME_HEADER);
		frame_free(f);
	}
	if (!c->head) {
		c->tail = NULL;
		if (c->done)
			pool_trim();
	}
	if (seq > c->acked)
		c->acked = seq;
	resume_paused();
}

static void exec_attach(const struct proto_request *req)
{
	struct proto_error err = {0};
	struct reader *rd;
	const char *key;
	uint64_t after = 0;
	struct cmd *c = find_cmd(req);
	cJSON *o;
	int r;

	if (!c)
		return;
	/* Its reader is the exec.start that is still waiting for its answer. */
	if (c->starting)
		return serve_send_error(req->id, PROTO_E_UNAVAILABLE,
					"command %u is still starting", c->id);
	r = proto_get_u64(req->root, "after", UINT64_MAX >> 11, &after, &err);
	if (r < 0 && r != -ENOENT)
		return serve_send_error(req->id, err.code, "%s", err.message);
	if (after > c->next_seq)
		return serve_send_error(req->id, PROTO_E_BAD_SEQUENCE,
					"after=%llu is beyond the last sequence %llu",
					(unsigned long long)after, (unsigned long long)c->next_seq);
	log_debug("attach cmd=%u by %s after=%llu acked=%llu next=%llu", c->id, req->id,
		  (unsigned long long)after, (unsigned long long)c->acked,
		  (unsigned long long)c->next_seq);
	if (reader_key(req, &key) < 0)
		return;
	rd = reader_get(key);
	if (!rd)
		return serve_send_error(req->id, PROTO_E_INTERNAL, "out of memory");
	/* The client holds everything up to `after`: that is an acknowledgement too. */
	drop_acked(c, after);
	if (after < c->acked)
		after = c->acked; /* older frames were acknowledged (by an earlier reader) and are gone */
	/* What is still unacknowledged is the new reader's to acknowledge now. */
	c->rd->buffered -= c->buffered;
	reader_put(c->rd);
	rd->buffered += c->buffered;
	c->rd = rd;
	resume_paused();
	snprintf(c->owner, sizeof(c->owner), "%s", req->id);
	c->attached = true;
	c->sent = after;
	c->exit_sent = false;
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "event", "exec.attached");
	cJSON_AddNumberToObject(o, "cmd", c->id);
	cJSON_AddNumberToObject(o, "from", (double)after);
	cJSON_AddBoolToObject(o, "running", !c->done);
	if (c->tag[0])
		cJSON_AddStringToObject(o, "tag", c->tag);
	if (c->p && c->p->fd_in >= 0 && !c->in_refused) {
		/* the new reader's stdin credit starts from what pistisd holds */
		cJSON_AddNumberToObject(o, "stdin_window", STDIN_MAX);
		cJSON_AddNumberToObject(o, "stdin_received", (double)(c->in_written + c->in_len));
		cJSON_AddNumberToObject(o, "stdin_written", (double)c->in_written);
		c->in_told = c->in_written;
	}
	serve_send_json(proto_ok_build(req->id, o));
	serve_want_write();
}

static void exec_ack(const struct proto_request *req)
{
	struct proto_error err = {0};
	uint64_t seq = 0;
	struct cmd *c = find_cmd(req);

	if (!c)
		return;
	if (proto_get_u64(req->root, "seq", UINT64_MAX >> 11, &seq, &err) < 0)
		return serve_send_error(req->id, PROTO_E_BAD_REQUEST, "\"seq\" is required");
	log_debug("ack cmd=%u by %s seq=%llu", c->id, req->id, (unsigned long long)seq);
	drop_acked(c, seq);
	/* acks are not answered: one per window would double the control traffic */
	maybe_finish(c);
}

static void exec_signal(const struct proto_request *req)
{
	struct proto_error err = {0};
	uint64_t sig = 0;
	struct cmd *c = find_cmd(req);
	int r;

	if (!c)
		return;
	if (proto_get_u64(req->root, "signal", 64, &sig, &err) < 0 || sig == 0)
		return serve_send_error(req->id, PROTO_E_BAD_REQUEST, "\"signal\" must be 1..64");
	if (c->done)
		return serve_send_error(req->id, PROTO_E_NOT_FOUND, "command %u has ended", c->id);
	r = spawn_signal(c->p, (int)sig);
	if (r < 0)
		return serve_send_error(req->id, proto_err_from_errno(r), "signal: %s",
					strerror(-r));
	serve_send_json(proto_ok_build(req->id, NULL));
}

static void exec_resize(const struct proto_request *req)
{
	struct proto_error err = {0};
	uint64_t rows = 0, cols = 0;
	struct cmd *c = find_cmd(req);
	int r;

	if (!c)
		return;
	if (proto_get_u64(req->root, "rows", PROTO_MAX_WINSIZE, &rows, &err) < 0 ||
	    proto_get_u64(req->root, "cols", PROTO_MAX_WINSIZE, &cols, &err) < 0 || !rows || !cols)
		return serve_send_error(req->id, PROTO_E_BAD_REQUEST,
					"\"rows\" and \"cols\" must be 1..%u", PROTO_MAX_WINSIZE);
	r = spawn_resize(c->p, (unsigned short)cols, (unsigned short)rows);
	if (r < 0)
		return serve_send_error(req->id, proto_err_from_errno(r), "resize: %s",
					strerror(-r));
	serve_send_json(proto_ok_build(req->id, NULL));
}

static void exec_stdin_json(const struct proto_request *req)
{
	struct proto_error err = {0};
	const char *data = NULL;
	_cleanup_free_ uint8_t *bytes = NULL;
	size_t n = 0;
	struct cmd *c = find_cmd(req);
	int r;

	if (!c)
		return;
	if (proto_get_string(req->root, "data", STDIN_MAX * 2, &data, &err) < 0 ||
	    proto_base64_decode(data, strlen(data), &bytes, &n) < 0)
		return serve_send_error(req->id, PROTO_E_BAD_REQUEST, "\"data\" must be base64");
	r = queue_stdin(c, bytes, n);
	if (r < 0)
		return serve_send_error(req->id, proto_err_from_errno(r), "stdin: %s",
					strerror(-r));
	serve_send_json(proto_ok_build(req->id, NULL));
}

static void exec_close_stdin(const struct proto_request *req)
{
	struct cmd *c = find_cmd(req);

	if (!c)
		return;
	c->in_close = true;
	if (c->p && c->pty)
		(void)queue_stdin(c, (const uint8_t *)"\x04", 1);
	flush_stdin(c);
	serve_send_json(proto_ok_build(req->id, NULL));
}

static cJSON *status_of(const char *agent)
{
	cJSON *a = cJSON_CreateArray();

	for (struct cmd *c = T.cmds; c && a; c = c->next) {
		cJSON *o;
		if (agent && strcmp(c->agent, agent))
			continue;
		o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "cmd", c->id);
		cJSON_AddStringToObject(o, "agent", c->agent);
		if (c->tag[0])
			cJSON_AddStringToObject(o, "tag", c->tag);
		cJSON_AddBoolToObject(o, "running", !c->done);
		/* its exec is still awaited: not attachable yet, and it may still fail (and then
		 * vanish without an exec.exit) */
		if (c->starting)
			cJSON_AddBoolToObject(o, "starting", true);
		cJSON_AddNumberToObject(o, "last_seq", (double)c->next_seq);
		cJSON_AddNumberToObject(o, "acked", (double)c->acked);
		cJSON_AddNumberToObject(o, "buffered", (double)c->buffered);
		cJSON_AddStringToObject(o, "reader", c->rd->key);
		cJSON_AddNumberToObject(o, "reader_buffered", (double)c->rd->buffered);
		cJSON_AddNumberToObject(o, "agent_buffered", (double)c->ag->buffered);
		cJSON_AddBoolToObject(o, "paused", c->paused);
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

cJSON *session_status(const char *agent)
{
	return status_of(agent);
}

/* Before a tightening apply every process of every command goes, the ones a command left
 * behind after its main process ended included (a background writer holding an fd would
 * outlive the new modes): those are killed at once, with or without keep_children. */
unsigned session_stop_all(void)
{
	unsigned n = 0;

	for (struct cmd *c = T.cmds; c; c = c->next) {
		if (c->done || !c->p)
			continue;
		if (!c->p->reaped) {
			(void)spawn_stop(c->p);
			schedule_tick(c); /* the grace period ends in spawn_tick */
			n++;
		} else if (spawn_kill_leftovers(c->p) > 0) {
			n++;
		}
	}
	return n;
}

/* Every uid the registry holds, removed agents' (reserved) included: *ret (n of them, NULL
 * and 0 without a registry: no agent has ever run here). 0 or -errno. */
static int registry_uids(uid_t **ret, size_t *ret_n)
{
	_cleanup_free_ struct users_entry *e = NULL;
	uid_t *uids;
	size_t n = 0;
	int r;

	*ret = NULL;
	*ret_n = 0;
	r = users_list("/", &e, &n);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	uids = calloc(n ? n : 1, sizeof(*uids));
	if (!uids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		uids[i] = e[i].uid;
	*ret = uids;
	*ret_n = n;
	return 0;
}

int session_kill_agent_processes(void)
{
	_cleanup_free_ uid_t *uids = NULL;
	size_t n;
	int r = registry_uids(&uids, &n);

	return r < 0 ? r : spawn_kill_agent_processes(T.spawn, uids, n);
}

/* Where command trees are audit sessions (no cgroup), what the cgroup sweep does for a
 * restarted daemon: the sessions of the commands of one that died, which no pistisd
 * tracks any more (docs/spawn.md). */
static void kill_orphaned_sessions(void)
{
	_cleanup_free_ uid_t *uids = NULL;
	size_t n;
	int r = registry_uids(&uids, &n);

	if (r >= 0)
		r = spawn_kill_orphaned_sessions(T.spawn, uids, n);
	if (r < 0)
		log_warning_errno(r, "Failed to kill every orphaned command session: %m");
	else if (r > 0)
		log_warning("Killed %d process(es) of agents' command sessions that no pistisd "
			    "owned (left by a pistisd that died)",
			    r);
}

unsigned session_running(void)
{
	unsigned n = 0;

	for (struct cmd *c = T.cmds; c; c = c->next)
		if (!c->done && c->p && (!c->p->reaped || spawn_tree_alive(c->p)))
			n++;
	return n;
}

void session_hold_starts(bool hold)
{
	T.hold_starts = hold;
}

unsigned session_begin_stop(void)
{
	T.stopping = true;
	return session_stop_all();
}

void session_request(const struct proto_request *req)
{
	switch (req->op) {
	case PROTO_OP_EXEC_START:
		exec_start(req);
		break;
	case PROTO_OP_EXEC_ATTACH:
		exec_attach(req);
		break;
	case PROTO_OP_EXEC_ACK:
		exec_ack(req);
		break;
	case PROTO_OP_EXEC_SIGNAL:
		exec_signal(req);
		break;
	case PROTO_OP_EXEC_RESIZE:
		exec_resize(req);
		break;
	case PROTO_OP_EXEC_STDIN:
		exec_stdin_json(req);
		break;
	case PROTO_OP_EXEC_CLOSE_STDIN:
		exec_close_stdin(req);
		break;
	case PROTO_OP_EXEC_LIST: {
		const char *agent = NULL;
		cJSON *o;
		if (get_agent_filter(req, &agent) < 0)
			break;
		o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "commands", status_of(agent));
		serve_send_json(proto_ok_build(req->id, o));
		break;
	}
	default:
		serve_send_error(req->id, PROTO_E_UNKNOWN_OP, "not an exec operation");
		break;
	}
}

bool session_has_pending(void)
{
	for (struct cmd *c = T.cmds; c; c = c->next)
		if (c->attached && ((c->tail && c->tail->seq > c->sent) ||
				    (c->done && !c->exit_sent && c->sent >= c->next_seq)))
			return true;
	return false;
}

/* lws_write() masks a client's payload in place (RFC 6455 5.3: every client frame is XORed
 * with a fresh key), so writing a kept frame straight from its buffer would leave it
 * scrambled for the resend after a re-attach. Frames go out through a scratch buffer,
 * masked into it from the kept frame in one pass (our lws patch 0005); lws keeps its own
 * copy of anything the socket did not take, so the scratch buffer is free again when
 * lws_write returns. */
static bool write_frame(void *wsi, const struct frame *f)
{
	static uint8_t scratch[LWS_PRE + PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD];

	return lws_write_ws_masked_from(wsi, scratch + LWS_PRE, f->buf + LWS_PRE, f->len,
					LWS_WRITE_BINARY) >= 0;
}

/* The frame *pf is going out: a full-size buffer holding less than half of one is moved
 * into an exact-size copy first (it may wait long for its ack; the 8 MiB bound counts
 * payload bytes, not buffers). Out of memory: it stays as it is. */
static struct frame *take_frame(struct cmd *c, struct frame **pf)
{
	struct frame *f = *pf, *g;

	if (!f->big || f->len - PROTO_FRAME_HEADER >= PROTO_MAX_FRAME_PAYLOAD / 2)
		return f;
	g = malloc(sizeof(*g) + LWS_PRE + f->len);
	if (!g)
		return f;
	memcpy(g, f, sizeof(*g));
	memcpy(g->buf + LWS_PRE, f->buf + LWS_PRE, f->len);
	g->big = false;
	*pf = g;
	if (c->tail == f)
		c->tail = g;
	frame_free(f);
	return g;
}

/* Write one frame (or one exit event) of the next command in round-robin order, so one
 * chatty command cannot starve the others. */
bool session_write_one(void *wsi)
{
	struct cmd *start = T.rr && T.rr->next ? T.rr->next : T.cmds;
	struct cmd *c = start;

	if (!c)
		return false;
	do {
		if (c->attached) {
			struct frame **pf = &c->head, *f;
			while (*pf && (*pf)->seq <= c->sent)
				pf = &(*pf)->next;
			if ((f = *pf)) {
				T.rr = c;
				c->sent = f->seq;
				f = take_frame(c, pf);
				f->written = true;
				return write_frame(wsi, f);
			}
			if (c->done && !c->exit_sent && c->exit_json) {
				char *ev;
				cJSON *o = cJSON_Parse(c->exit_json);
				T.rr = c;
				c->exit_sent = true;
				ev = proto_event_build("exec.exit", c->owner, o);
				if (ev) {
					size_t len = strlen(ev);
					uint8_t *b = malloc(LWS_PRE + len);
					int n = -1;
					if (b) {
						memcpy(b + LWS_PRE, ev, len);
						n = lws_write(wsi, b + LWS_PRE, len,
							      LWS_WRITE_TEXT);
						free(b);
					}
					free(ev);
					return n >= 0;
				}
				return false;
			}
		}
		c = c->next ? c->next : T.cmds;
	} while (c != start);
	return false;
}

void session_disconnected(void)
{
	for (struct cmd *c = T.cmds; c; c = c->next) {
		c->attached = false;
		c->sent = c->acked;
		c->exit_sent = false;
	}
}
