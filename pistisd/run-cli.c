/* `pistisd run --agent ID [options] -- CMD [ARG…]`: run one command as an agent, confined,
 * through the spawn core, streaming its output; exits with its code (128+signal). The
 * small poll loop here (pidfd, outputs, our stdin, a signalfd) is the reference driver of
 * the spawn API; the daemon drives the same calls from libwebsockets' loop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "lib/agent-limits.h"
#include "lib/caps.h"
#include "lib/env-build.h"
#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/id-map.h"
#include "lib/log.h"
#include "lib/parse-num.h"
#include "lib/macro.h"
#include "pistisd/cli.h"
#include "pistisd/ipc.h"
#include "pistisd/spawn.h"
#include "policy/policy.h"
#include "sandbox-users/ident.h"
#include "sandbox-users/users.h"
#include "trusted/trusted.h"

#define RUN_MAX_ENV 64
/* SPAWN_CWD_ROOTS, for messages */
#define RUN_CWD_ROOTS_TEXT "/workspaces, /workspace or /data"

extern char **environ;

/* "NAME=VALUE" of NAME in our environment, the first as getenv(3) finds it; NULL when
 * unset. NAME holds no '=' (envb_set_name_refusal). */
static const char *environ_entry(const char *name)
{
	size_t n = strlen(name);

	for (char **e = environ; e && *e; e++)
		if (!strncmp(*e, name, n) && (*e)[n] == '=')
			return *e;
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pistisd run --agent ID [OPTIONS] -- CMD [ARG]...\n\n"
		"Run CMD as the agent's user, confined the way pistisd runs every agent command:\n"
		"own session, no capabilities, seccomp, no_new_privs, rlimits, a cgroup (or the\n"
		"process group), abstract UNIX sockets of its own tree only (Landlock), the\n"
		"agent's environment. Output is streamed; the exit code is CMD's, or\n"
		"128+signal. SIGTERM or SIGHUP (or a second SIGINT) stops CMD's whole tree:\n"
		"SIGTERM, 2 s, then SIGKILL; a first SIGINT, SIGQUIT, SIGUSR1, SIGUSR2 go to\n"
		"CMD itself. Needs root.\n\n"
		"Options:\n"
		"  --agent ID          agent id (its user is created or confirmed first)\n"
		"  --uid N             the uid the agent must have (passed to users ensure)\n"
		"  --root DIR          the root filesystem holding /etc and /data (default /);\n"
		"                      the command runs chrooted into it when it is not /\n"
		"  --cwd DIR           working directory beneath /workspaces, /workspace\n"
		"                      or /data, resolved as the agent without symlinks\n"
		"                      (default: the agent's home)\n"
		"  --pty               run on a new pseudo-terminal (--cols N, --rows N)\n"
		"  --stdin             pass our stdin to the command (default /dev/null)\n"
		"  --timeout S         wall-clock limit in seconds (fractions allowed)\n"
		"  --idle-timeout S    stop after S seconds without output\n"
		"  --max-output BYTES  keep at most BYTES of output (K/M/G suffixes)\n"
		"  --env NAME          set NAME to its value in our own environment (set but\n"
		"                      empty: empty; unset: an error); once per name,\n"
		"                      repeatable (not the names pi-env sets itself, nor\n"
		"                      loader, interpreter, git, ssh or sudo variables:\n"
		"                      docs/pi-env.md)\n"
		"  --env NAME=VALUE    the same, VALUE given here: every user reads it in our\n"
		"                      /proc/PID/cmdline where /proc has no hidepid, so pass\n"
		"                      secrets as --env NAME\n"
		"  --keep-children     do not kill what the command leaves running, nor remove\n"
		"                      the SysV IPC objects it leaves\n"
		"  --share-abstract-sockets\n"
		"                      let CMD connect to abstract UNIX sockets bound outside\n"
		"                      its own tree (default: not, where Landlock ABI >= 6)\n"
		"  --memory-max BYTES  cgroup memory.max, 1M to 1024T (K/M/G/T suffixes);\n"
		"                      refused where the memory controller is not delegated\n"
		"  --pids-max N        cgroup pids.max and NPROC (where the pids controller is\n"
		"                      not delegated, NPROC holds alone)\n"
		"  --cpu-weight N      cgroup cpu.weight (1-10000); refused where the cpu\n"
		"                      controller is not delegated\n"
		"  --json              print one JSON result line on stderr at the end\n"
		"  -h, --help          this text\n\n"
		"Exit codes: CMD's code, 128+signal, 100 usage, 111 system error, 126 cannot\n"
		"exec, 127 not found. See docs/spawn.md.\n");
}

/* "1", "2.5", "0.25" seconds → milliseconds. */
static int parse_seconds(const char *s, uint64_t *ret_ms)
{
	uint64_t whole = 0, frac = 0, scale = 1000;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		whole = whole * 10 + (uint64_t)(*p - '0');
		if (whole > 86400ULL * 365)
			return -ERANGE;
	}
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (scale > 1) {
				scale /= 10;
				frac += (uint64_t)(*p - '0') * scale;
			}
	if (*p || p == s)
		return -EINVAL;
	*ret_ms = whole * 1000 + frac;
	return *ret_ms ? 0 : -EINVAL;
}

struct loop {
	struct spawn_proc *p;
	bool pty;
	bool forward_stdin;
	int sig_fd;
	unsigned interrupts;	     /* SIGINTs received */
	struct spawn_error exec_err; /* the start failed (run_loop returned 1) */
};

/* Where the command's stderr, as forwarded, ended without a newline (its stdout too, where
 * ours go to the same file: 2>&1, a terminal), what we write next must still start a line of
 * its own: --json's result (red team: a command that wrote a forged result without one made
 * the last line "{forged} {real}", and `tail -n1 | jq` read the forged one first) and every
 * log line after the output (the log owes a newline: log_set_line_open; red team: a command
 * that ended with "pistisd: ok " had the real "output truncated" warning glued after it). */
static bool out_is_err; /* our stdout and stderr are one file */

static void forward_output(int fd, const char *buf, size_t n)
{
	if ((fd == STDERR_FILENO || out_is_err) && n > 0)
		log_set_line_open(buf[n - 1] != '\n');
	/* A reader that went away (EPIPE) must not stop the command's supervision. */
	(void)loop_write(fd, buf, n);
}

/* How long what the command's end killed may take to be gone before its SysV objects are
 * left to it (a process tearing down GiBs of memory: hundreds of ms). */
#define LEFTOVERS_GONE_MS 3000

/* The SysV IPC objects the command left, as serve removes them at an agent's last
 * command's end (pistisd/ipc.h): only when the agent has no process left, since another
 * command of its (another `pistisd run`, serve's) may still use them. Listing first: the
 * /proc pass runs only when the agent left something. A process the command's end killed
 * (tree_killed) is not gone at once: while it tears its memory down it is no zombie yet
 * and counts as the agent's, so the look is repeated for a while (red team: with a 2 GiB
 * leftover the objects stayed in 3 of 4 runs); one that outlives that, or another
 * command's, keeps them. */
static void remove_left_ipc(const struct spawn_ctx *ctx, const struct users_identity *ident,
			    bool tree_killed)
{
	int proc_fd = spawn_ctx_proc_fd(ctx);
	struct ipc_obj v[1];
	size_t n = 0;
	int k;

	/* The kernel's in-use counts first, three calls: most commands leave no object at all,
	 * and the listing reads three /proc tables through a 16 KiB stack buffer (pages first
	 * touched here, ~10 µs each on a guest with shadow page tables). Counts refused: the
	 * listing decides, as before. */
	if (ipc_namespace_objects() == 0)
		return;
	if (ipc_agent_objects(proc_fd, ident->uid, v, ELEMENTSOF(v), &n) < 0 || n == 0)
		return;
	for (unsigned ms = 0; spawn_agent_has_processes(ctx, ident->uid); ms += 5) {
		if (!tree_killed || ms >= LEFTOVERS_GONE_MS)
			return;
		(void)nanosleep(&(struct timespec){.tv_nsec = 5 * 1000 * 1000}, NULL);
	}
	k = ipc_remove_agent_objects(proc_fd, ident->uid);
	if (k > 0)
		log_info("removed %d SysV IPC object(s) agent '%s' left (shared memory, message "
			 "queues, semaphores)",
			 k, ident->name);
	else if (k < 0)
		log_warning_errno(k, "Failed to remove the SysV IPC objects agent '%s' left: %m",
				  ident->name);
}

/* Supervise p until it is done. The start is asynchronous: the exec is decided by
 * spawn_exec_poll(p, 0) after each wake-up, not by a wait of its own. The error pipe is not
 * watched: whatever wakes us next (the command's first output, its exit, a signal for it, or
 * the exec deadline, which spawn_next_timeout_ms includes while the start is open) finds it
 * decided, so the parent does not wake up (and take a CPU from the command) just to learn
 * that the command has exec'd. No output is read before that. Returns 0, 1 when the start
 * failed (l->exec_err: the child is reaped, as after a failed spawn_start), or -errno. */
static int run_loop(struct loop *l)
{
	struct spawn_proc *p = l->p;
	char buf[32768], in_buf[32768];
	size_t in_len = 0, in_off = 0; /* read from our stdin, not yet taken by the command */
	bool in_eof = false;
	int in_fd = l->forward_stdin ? 0 : -1;

	while (!spawn_done(p)) {
		struct pollfd pf[6];
		int n = spawn_poll_fds(p, pf), r;

		/* The command's stdin is non-blocking: what it has not taken yet waits here,
		 * and our stdin is not read again until it has (back-pressure, nothing lost). */
		if (in_fd >= 0 && p->fd_in >= 0 && !p->reaped)
			pf[n++] = in_off < in_len
					  ? (struct pollfd){.fd = p->fd_in, .events = POLLOUT}
					  : (struct pollfd){.fd = in_fd, .events = POLLIN};
		pf[n++] = (struct pollfd){.fd = l->sig_fd, .events = POLLIN};
		r = spawn_poll(pf, (nfds_t)n, spawn_next_timeout_ms(p));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (p->exec_fd >= 0) {
			int k = spawn_exec_poll(p, 0, &l->exec_err);
			if (k < 0)
				return 1;
		}
		for (int i = 0; r > 0 && i < n; i++) {
			int fd = pf[i].fd;

			if (!pf[i].revents)
				continue;
			if (fd == in_fd ||
			    (in_fd >= 0 && fd == p->fd_in && (pf[i].events & POLLOUT))) {
				if (fd == in_fd) {
					ssize_t got = read(in_fd, in_buf, sizeof(in_buf));
					if (got < 0 && (errno == EINTR || errno == EAGAIN))
						continue;
					in_eof = got <= 0;
					in_off = 0;
					in_len = got > 0 ? (size_t)got : 0;
				}
				while (in_off < in_len) {
					ssize_t w =
						write(p->fd_in, in_buf + in_off, in_len - in_off);
					if (w > 0) {
						in_off += (size_t)w;
					} else if (w < 0 && errno == EINTR) {
						continue;
					} else if (w < 0 && errno == EAGAIN) {
						break;
					} else {
						/* The command closed its stdin (EPIPE): stop
						 * forwarding, drop the rest. */
						in_fd = -1;
						in_len = in_off = 0;
						break;
					}
				}
				if (in_fd >= 0 && in_eof && in_off >= in_len) {
					/* EOF on our stdin, all of it taken: close the command's
					 * (pipes) so it sees EOF. */
					in_fd = -1;
					if (!l->pty)
						p->fd_in = safe_close(p->fd_in);
				}
			} else if (fd == p->pidfd && !p->reaped) {
				int k = spawn_reap(p);
				if (k < 0)
					return k;
			} else if ((fd == p->fd_out || fd == p->fd_err) && p->exec_fd < 0) {
				bool out = fd == p->fd_out;
				ssize_t got = spawn_read(p, fd, buf, sizeof(buf));
				if (got > 0)
					forward_output(out ? 1 : 2, buf, (size_t)got);
			} else if (fd == l->sig_fd) {
				struct signalfd_siginfo si;
				if (read(l->sig_fd, &si, sizeof(si)) != sizeof(si))
					continue;
				if (si.ssi_signo == SIGWINCH) {
					struct winsize ws;
					if (l->pty && ioctl(1, TIOCGWINSZ, &ws) == 0)
						(void)spawn_resize(p, ws.ws_col, ws.ws_row);
				} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP ||
					   (si.ssi_signo == SIGINT && l->interrupts++ > 0)) {
					/* Stop, as a cancel does: SIGTERM to the whole tree,
					 * the grace period, then SIGKILL. A command that
					 * ignores SIGTERM cannot keep us, nor outlive us. */
					(void)spawn_stop(p);
				} else {
					/* The first SIGINT (a terminal's ^C), SIGQUIT,
					 * SIGUSR1, SIGUSR2: to the main process. */
					(void)spawn_signal(p, (int)si.ssi_signo);
				}
			}
		}
		spawn_tick(p);
	}
	return 0;
}

static void print_json(const struct spawn_result *res, const struct spawn_proc *p,
		       const char *agent)
{
	/* the agent id as one JSON string, cut with a mark past 1 KiB escaped */
	_cleanup_free_ char *esc = escape_json_field(agent, 1024);

	if (log_line_open())
		fputc('\n', stderr);
	log_set_line_open(false);
	fprintf(stderr,
		"{\"agent\":%s,\"end\":\"%s\",\"exit_code\":%d,\"signal\":%d,\"core\":%s,"
		"\"wall_ms\":%.3f,\"user_ms\":%.3f,\"sys_ms\":%.3f,\"maxrss_kb\":%ld,"
		"\"out_bytes\":%" PRIu64 ",\"err_bytes\":%" PRIu64 ",\"truncated\":%s,"
		"\"dropped_bytes\":%" PRIu64 ",\"left_children_killed\":%s,\"tree\":\"%s\","
		"\"abstract_sockets\":\"%s\",\"limits\":{\"memory\":%s,\"pids\":%s,\"cpu\":%s}}\n",
		esc ? esc : "null", spawn_end_name(res->end),
		res->term_signal ? -1 : res->exit_code, res->term_signal,
		res->core_dumped ? "true" : "false", res->wall_us / 1000.0,
		res->rusage.ru_utime.tv_sec * 1000.0 + res->rusage.ru_utime.tv_usec / 1000.0,
		res->rusage.ru_stime.tv_sec * 1000.0 + res->rusage.ru_stime.tv_usec / 1000.0,
		res->rusage.ru_maxrss, res->out_bytes, res->err_bytes,
		res->truncated ? "true" : "false", res->dropped_bytes,
		res->left_children_killed ? "true" : "false", res->tree_control,
		res->abstract_sockets, (p->cgroup_applied & CGROUP_HAS_MEMORY) ? "true" : "false",
		(p->cgroup_applied & CGROUP_HAS_PIDS) ? "true" : "false",
		(p->cgroup_applied & CGROUP_HAS_CPU) ? "true" : "false");
}

int run_cli_main(int argc, char **argv)
{
	enum {
		OPT_AGENT = 0x100,
		OPT_UID,
		OPT_ROOT,
		OPT_CWD,
		OPT_PTY,
		OPT_COLS,
		OPT_ROWS,
		OPT_STDIN,
		OPT_TIMEOUT,
		OPT_IDLE,
		OPT_MAXOUT,
		OPT_ENV,
		OPT_KEEP,
		OPT_SHARE_ABSTRACT,
		OPT_MEM,
		OPT_PIDS,
		OPT_CPU,
		OPT_JSON,
		OPT_HELP,
	};
	static const struct option opts[] = {
		{"agent", required_argument, NULL, OPT_AGENT},
		{"uid", required_argument, NULL, OPT_UID},
		{"root", required_argument, NULL, OPT_ROOT},
		{"cwd", required_argument, NULL, OPT_CWD},
		{"pty", no_argument, NULL, OPT_PTY},
		{"cols", required_argument, NULL, OPT_COLS},
		{"rows", required_argument, NULL, OPT_ROWS},
		{"stdin", no_argument, NULL, OPT_STDIN},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"idle-timeout", required_argument, NULL, OPT_IDLE},
		{"max-output", required_argument, NULL, OPT_MAXOUT},
		{"env", required_argument, NULL, OPT_ENV},
		{"keep-children", no_argument, NULL, OPT_KEEP},
		{"share-abstract-sockets", no_argument, NULL, OPT_SHARE_ABSTRACT},
		{"memory-max", required_argument, NULL, OPT_MEM},
		{"pids-max", required_argument, NULL, OPT_PIDS},
		{"cpu-weight", required_argument, NULL, OPT_CPU},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, OPT_HELP},
		{},
	};
	const char *agent = NULL, *root = "/", *cwd = NULL, *set[RUN_MAX_ENV + 1] = {NULL};
	size_t n_set = 0;
	uid_t want_uid = (uid_t)-1;
	bool json = false;
	struct spawn_opts so = {.umask = (mode_t)-1, .cwd_root_fd = -1};
	struct spawn_ctx *ctx = NULL;
	struct spawn_proc *p = NULL;
	struct spawn_error err;
	struct users_identity ident;
	struct envb_opts eo = {0};
	char **envp = NULL, ebuf[256];
	const char *cwd_root = NULL, *rel = NULL;
	const char *bad = NULL, *step = NULL;
	_cleanup_close_ int data_fd = -1, root_fd = -1, sig_fd = -1, share_fd = -1;
	sigset_t mask, oldmask;
	uint64_t v;
	int c, r, ret = EXIT_SYSTEM;

	optind = 1;
	opterr = 0; /* getopt would print a bad option raw: log_bad_option escapes it */
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) >= 0) {
		switch (c) {
		case OPT_AGENT:
			agent = optarg;
			break;
		case OPT_UID:
			if (parse_uint_strict(optarg, UINT32_MAX - 1, NULL, &v) < 0)
				goto bad_arg;
			if (!users_uid_is_agent((uid_t)v)) {
				log_error("--uid %s is outside the agent range %u..%u", optarg,
					  USERS_AGENT_UID_MIN, USERS_AGENT_UID_MAX);
				return EXIT_USAGE;
			}
			want_uid = (uid_t)v;
			break;
		case OPT_ROOT:
			root = optarg;
			break;
		case OPT_CWD:
			cwd = optarg;
			break;
		case OPT_PTY:
			so.stdio = SPAWN_STDIO_PTY;
			break;
		case OPT_COLS:
		case OPT_ROWS:
			if (parse_uint_strict(optarg, 9999, NULL, &v) < 0 || v == 0)
				goto bad_arg;
			if (c == OPT_COLS)
				so.cols = (unsigned short)v;
			else
				so.rows = (unsigned short)v;
			break;
		case OPT_STDIN:
			so.stdin_pipe = true;
			break;
		case OPT_TIMEOUT:
			if (parse_seconds(optarg, &so.timeout_ms) < 0)
				goto bad_arg;
			break;
		case OPT_IDLE:
			if (parse_seconds(optarg, &so.idle_timeout_ms) < 0)
				goto bad_arg;
			break;
		case OPT_MAXOUT:
			if (parse_size_strict(optarg, 0, UINT64_MAX, &so.max_output) < 0 ||
			    !so.max_output)
				goto bad_arg;
			break;
		case OPT_ENV: {
			/* Checked here, before anything is touched; the name only is quoted
			 * (the value may be long, hold anything, or be a secret). */
			size_t nl = strcspn(optarg, "=");
			const char *entry = optarg, *why = NULL;
			char q[200 + ESCAPE_QUOTE_EXTRA]; /* a longer name: cut, marked */

			if (!optarg[nl]) {
				/* NAME alone: "NAME=VALUE" as our environment holds it. Our
				 * /proc/PID/environ is root's alone, our cmdline every user's
				 * where /proc has no hidepid (docs/spawn.md, "Command lines"). */
				why = envb_set_name_refusal(optarg);
				if (!why)
					entry = environ_entry(optarg);
				if (!entry) {
					log_error("--env %-s: not set in pistisd run's environment "
						  "(export it; under sudo, add --preserve-env=%s)",
						  escape_c_quote(optarg, nl, 200, q, sizeof(q)),
						  optarg);
					return EXIT_USAGE;
				}
			}
			if (!why)
				why = envb_set_refusal(entry);
			for (size_t i = 0; !why && i < n_set; i++)
				if (!strncmp(set[i], entry, nl + 1))
					why = "name given twice";
			if (why) {
				log_error("--env %-s: %s",
					  escape_c_quote(optarg, nl, 200, q, sizeof(q)), why);
				return EXIT_USAGE;
			}
			if (n_set >= RUN_MAX_ENV) {
				log_error("at most %d --env options", RUN_MAX_ENV);
				return EXIT_USAGE;
			}
			set[n_set++] = entry;
			break;
		}
		case OPT_KEEP:
			so.keep_children = true;
			break;
		case OPT_SHARE_ABSTRACT:
			so.share_abstract_sockets = true;
			break;
		case OPT_MEM:
			/* serve's range (below a MiB no command even starts) */
			if (parse_size_strict(optarg, AGENT_MEMORY_MIN, AGENT_MEMORY_MAX,
					      &so.cgroup.memory_max) < 0)
				goto bad_arg;
			break;
		case OPT_PIDS:
			if (parse_uint_strict(optarg, 1u << 22, NULL, &v) < 0 || !v)
				goto bad_arg;
			so.cgroup.pids_max = v;
			so.rlimits.nproc = v;
			break;
		case OPT_CPU:
			if (parse_uint_strict(optarg, 10000, NULL, &v) < 0 || !v)
				goto bad_arg;
			so.cgroup.cpu_weight = (unsigned)v;
			break;
		case OPT_JSON:
			json = true;
			break;
		case OPT_HELP:
		case 'h':
			usage(stdout);
			return 0;
		default:
			log_bad_option(argv, optind, optopt, "pistisd run --help");
			return EXIT_USAGE;
		}
	}
	if (!agent || optind >= argc) {
		log_error(
			"run needs --agent ID and a command after '--'; see 'pistisd run --help'");
		return EXIT_USAGE;
	}
	/* Bad input is a usage error, found before anything is touched; the id itself is not
	 * echoed (it may hold control bytes). */
	if (ident_agent_id_check(agent) < 0) {
		log_error("invalid agent id: 1-%d bytes of [A-Za-z0-9._@+=/-], starting with a "
			  "letter or digit",
			  USERS_AGENT_ID_MAX);
		return EXIT_USAGE;
	}
	if (cwd && spawn_cwd_split(cwd, &cwd_root, &rel) < 0) {
		log_error("--cwd '%s' is not beneath " RUN_CWD_ROOTS_TEXT, cwd);
		return EXIT_USAGE;
	}
	if (!argv[optind][0]) {
		log_error("the command after '--' is empty; see 'pistisd run --help'");
		return EXIT_USAGE;
	}
	if (geteuid() != 0) {
		log_error(
			"pistisd run needs root (it switches to the agent's user); this is uid %u "
			"(docker run --user, Kubernetes runAsUser/runAsNonRoot)",
			(unsigned)geteuid());
		return EXIT_SYSTEM;
	}
	/* Without them every command failed at its own step, or ran past its timeout with
	 * its leftovers alive (no CAP_KILL): refuse before the first, naming them. */
	uint64_t missing = 0;
	if (caps_missing(&missing) == 0 && missing) {
		char names[256];

		caps_names(missing, names, sizeof(names));
		log_error("Refusing to run: pistisd lacks %s, without which no command is "
			  "confined and ended as promised (docker run --cap-drop, a "
			  "securityContext that drops them): give them back (pistisd check: "
			  "capabilities)",
			  names);
		return EXIT_SYSTEM;
	}

	/* A user namespace whose map was written by its unprivileged creator denies setgroups:
	 * each command failed at the spawn's setgroups step, after its agent was made. */
	if (id_map_setgroups_denied() == 1) {
		log_error("Refusing to run: setgroups(2) is denied in this user namespace "
			  "(/proc/self/setgroups: deny), so no command can be given the agent's "
			  "groups instead of root's: map the container's ids with newuidmap or as "
			  "root (pistisd check: id_map)");
		return EXIT_SYSTEM;
	}

	/* users_ensure covers the base users too (pi-sandbox, pi-tools): its lock-free read
	 * path checks them with the agent's lines, its locked path creates them. An existing
	 * agent therefore costs reads only: no lock, no write, no fsync. */
	r = users_ensure(root, agent, want_uid, &ident);
	if (r < 0) {
		const char *why = users_last_error_text(); /* text, names escaped: %-s */

		if (users_error_is_sentence(r))
			log_error("Failed to ensure the user of agent '%s': %-s", agent, why);
		else if (*why)
			log_error_errno(r, "Failed to ensure the user of agent '%s': %-s (%m)",
					agent, why);
		else
			log_error_errno(r, "Failed to ensure the user of agent '%s': %m", agent);
		return EXIT_SYSTEM;
	}
	/* Made just now (or again after a rebuild): trusted install could not ask sudo what
	 * it may run; a rule that grants more withdraws the drop-in before it runs. */
	if (ident.written && trusted_confirm_new_agent(root, ident.name) < 0)
		return EXIT_SYSTEM;

	/* Compile the filter and find cgroups before a chroot, which may lack /proc. */
	r = spawn_ctx_new_why(&ctx, &step);
	if (r < 0) {
		log_error_errno(r, "Failed to prepare the spawn core: %s: %m", step);
		return EXIT_SYSTEM;
	}
	/* The spawner thread is made (and drops its bounding set) on the other CPU while
	 * this one checks the root and builds the environment. */
	spawn_ctx_prepare_start(ctx);
	/* A limit asked for holds or nothing runs. --pids-max always holds as NPROC (the
	 * agent's processes, all commands together), the cgroup's pids.max only where that
	 * controller is delegated. */
	{
		unsigned have = spawn_ctx_cgroup_features(ctx);
		bool mem = so.cgroup.memory_max && !(have & CGROUP_HAS_MEMORY);
		bool cpu = so.cgroup.cpu_weight && !(have & CGROUP_HAS_CPU);

		if (mem || cpu) {
			log_error("Refusing to run: %s%s%s need%s the %s controller%s, which "
				  "pistis's cgroups do not have here (tree control: %s; "
				  "docs/spawn.md, cgroup v2); run without it",
				  mem ? "--memory-max" : "", mem && cpu ? " and " : "",
				  cpu ? "--cpu-weight" : "", mem && cpu ? "" : "s",
				  mem && cpu ? "memory and cpu"
				  : mem	     ? "memory"
					     : "cpu",
				  mem && cpu ? "s" : "", spawn_ctx_tree_control(ctx));
			goto out;
		}
		if (so.cgroup.pids_max && !(have & CGROUP_HAS_PIDS))
			log_warning("--pids-max holds as NPROC only (the agent's processes in all, "
				    "not this command's): no pids controller for pistis's cgroups "
				    "here");
	}
	if (strcmp(root, "/")) {
		if (chroot(root) < 0 || chdir("/") < 0) {
			log_error_errno(-errno, "Failed to enter root '%s': %m", root);
			goto out;
		}
	}
	if (!cwd)
		cwd = ident.home;
	if (spawn_cwd_split(cwd, &cwd_root, &rel) < 0) {
		log_error("working directory '%s' is not beneath " RUN_CWD_ROOTS_TEXT, cwd);
		ret = EXIT_USAGE;
		goto out;
	}
	data_fd = openat(AT_FDCWD, cwd_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (data_fd < 0) {
		log_error_errno(-errno, "Failed to open %s: %m", cwd_root);
		goto out;
	}
	/* Trusted commands configured in this image: no no_new_privs, so the wrappers' sudo
	 * can switch to pi-tools (docs/trusted.md); otherwise no setuid program works. */
	root_fd = openat(AT_FDCWD, "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		log_error_errno(-errno, "Failed to open the root: %m");
		goto out;
	}
	so.allow_setuid = trusted_configured(root_fd);
	/* /data/bin is first on the agent's PATH: a program there that is not root's alone (a
	 * relic of an earlier life of the volume) runs as this agent, chosen by its owner.
	 * serve refuses to start over the same (pistisd check: data_bin). */
	{
		char why[512];
		unsigned n;

		r = trusted_data_bin_check(root_fd, &n, why, sizeof(why));
		if (r != 0) {
			/* why is text, its names escaped: %-s, once */
			log_error("Refusing to run: %-s (remove them, or chown root and chmod go-w "
				  "them; pistisd check: data_bin)",
				  why);
			goto out;
		}
	}

	eo.user = ident.name;
	eo.home = ident.home;
	eo.tmpdir = ident.tmpdir;
	eo.set = set;
	eo.term = so.stdio == SPAWN_STDIO_PTY ? ENVB_PTY_TERM : NULL;
	r = envb_build(&eo, environ, &envp, &bad);
	if (r < 0) {
		char q[200 + ESCAPE_QUOTE_EXTRA];

		if (r == -EINVAL && bad)
			log_error("--env %-s is not allowed (docs/pi-env.md)",
				  escape_c_quote(bad, strcspn(bad, "="), 200, q, sizeof(q)));
		else
			log_error_errno(r, "Failed to build the agent's environment: %m");
		ret = r == -EINVAL ? EXIT_USAGE : EXIT_SYSTEM;
		goto out;
	}

	so.argv = argv + optind;
	so.envp = envp;
	spawn_opts_as_agent(&so, ident.uid, ident.gid);
	so.cwd_root_fd = data_fd;
	so.cwd = rel;
	so.cgroup_agent = ident.name;
	if (so.stdio == SPAWN_STDIO_PTY && !so.cols) {
		struct winsize ws;
		if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
			so.cols = ws.ws_col;
			so.rows = ws.ws_row;
		}
	}

	/* Signals arrive here as data (signalfd): forwarded to the command, or a stop
	 * (run_loop). */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGUSR2);
	sigaddset(&mask, SIGWINCH);
	sigprocmask(SIG_BLOCK, &mask, &oldmask);
	signal(SIGPIPE, SIG_IGN);
	out_is_err = fd_same_file(STDOUT_FILENO, STDERR_FILENO);
	sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sig_fd < 0) {
		log_error_errno(-errno, "Failed to create a signalfd: %m");
		goto out;
	}

	/* Held until the child has the agent's uid (serve's exec.start does the same): a policy
	 * apply stops the agents' processes once it holds the state directory, so none may
	 * start while it does. */
	r = policy_apply_share(root_fd, &share_fd);
	if (r < 0) {
		if (r == -EWOULDBLOCK)
			log_error("A policy apply is running in this root (it holds %s); nothing "
				  "started: retry when it ends",
				  POLICY_STATE_DIR);
		else
			log_error_errno(r, "Failed to lock %s: %m; nothing started",
					POLICY_STATE_DIR);
		goto out;
	}
	so.hold_fd = share_fd;
	r = spawn_start_async(ctx, &so, &p, &err);
	share_fd = safe_close(share_fd); /* the child's copy holds it on */
	if (r >= 0) {
		struct loop l = {.p = p,
				 .pty = so.stdio == SPAWN_STDIO_PTY,
				 .forward_stdin = so.stdio == SPAWN_STDIO_PTY || so.stdin_pipe,
				 .sig_fd = sig_fd};
		r = run_loop(&l);
		if (r == 1) {
			err = l.exec_err;
			r = -err.error;
		}
	}
	if (r < 0 && err.step) {
		log_error("Failed to run '%s' as agent '%s': %s", so.argv[0], agent,
			  spawn_error_string(&err, ebuf, sizeof(ebuf)));
		ret = err.step == SPAWN_STEP_EXEC
			      ? (err.error == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC)
		      : err.step == SPAWN_STEP_EXEC_INTERP ? EXIT_CANNOT_EXEC
							   : EXIT_SYSTEM;
		goto out;
	}
	if (r < 0) {
		log_error_errno(r, "Failed while supervising '%s': %m", so.argv[0]);
		goto out;
	}
	if (!so.keep_children)
		remove_left_ipc(ctx, &ident, spawn_result(p)->left_children_killed);
	{
		const struct spawn_result *res = spawn_result(p);
		if (json)
			print_json(res, p, agent);
		if (res->truncated)
			log_warning("output truncated: %" PRIu64 " bytes over --max-output dropped",
				    res->dropped_bytes);
		ret = res->term_signal ? 128 + res->term_signal : res->exit_code;
	}
out:
	spawn_free(p);
	envb_free(envp);
	spawn_ctx_free(ctx);
	return ret;

bad_arg:
	log_error("invalid value '%s' for --%s; see 'pistisd run --help'", optarg,
		  opts[c - OPT_AGENT].name);
	return EXIT_USAGE;
}
