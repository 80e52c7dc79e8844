/* pistisd-entry: the container's ENTRYPOINT. PID 1 in the shape of tini: blocks every
 * signal, forwards the ones that matter to the child's process group, reaps every zombie,
 * prepares /data, hardens the mounts agents write to, starts `pistisd serve` and restarts it when it dies. See docs/entry.md. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "lib/caps.h"
#include "lib/fd-util.h"
#include "lib/id-map.h"
#include "lib/log.h"
#include "lib/sig-util.h"
#include "lib/macro.h"
#include "lib/trust-path.h"
#include "lib/version.h"
#include "pistisd-entry/entry.h"
#include "pistisd-entry/supervise.h"
#include "sandbox-users/users.h"

static const char help_text[] =
	"Usage: pistisd-entry [OPTION]... [-- CMD [ARG]...]\n"
	"The container's PID 1: reaps every zombie, forwards SIGTERM, SIGINT, SIGQUIT,\n"
	"SIGHUP, SIGUSR1, SIGUSR2 and SIGWINCH to the child's process group, prepares the\n"
	"data directory, and starts and supervises CMD (default: pistisd serve,\n"
	"configured from DATA/pistis/serve.conf or PISTIS_RELAY and PISTIS_TOKEN_FILE;\n"
	"serve.conf's keys: relay, token-file, ca, pin, name, log-format, max-buffered,\n"
	"verbose, share-abstract-sockets, and each agent's limits over all its commands:\n"
	"pids-max, memory-max (K/M/G/T), cpu-weight).\n"
	"In a container made afresh, it restores the trusted commands' sudoers drop-in\n"
	"from /data/trusted.\n"
	"\n"
	"  --no-restart            exit with the child's status when it dies\n"
	"  --max-restarts N        give up after N quick restarts in a row (default 10;\n"
	"                          0: never)\n"
	"  --restart-delay S       first restart delay in seconds (default 1), doubling\n"
	"  --restart-delay-max S   up to this (default 30)\n"
	"  --grace S               after a stop signal, SIGKILL what is left after S\n"
	"                          seconds (default 10)\n"
	"  --data DIR              the data directory entry prepares and reads serve.conf\n"
	"                          from (default /data; pistisd itself always uses /data)\n"
	"  --no-prepare            leave the data directory, the base users, the\n"
	"                          trusted commands' drop-in and the sticky bit of\n"
	"                          /tmp, /dev/shm, /var/tmp and /run/lock alone\n"
	"  --no-harden-mounts      leave mounts alone: by default the data directory,\n"
	"                          /workspaces, /workspace, /tmp, /dev/shm, /var/tmp and\n"
	"                          /run/lock are made nosuid,nodev and /proc gets\n"
	"                          hidepid=invisible\n"
	"  --pistisd PATH          the pistisd binary (default /usr/local/bin/pistisd)\n"
	"  -v, --verbose           debug logging\n"
	"  -h, --help, --version\n"
	"\n"
	"Exit: 128+N after stop signal N; otherwise the child's status (128+N if it was\n"
	"killed by signal N) once it is not restarted; 100 usage or configuration, 111\n"
	"system error, 126 CMD cannot be executed, 127 CMD not found. See docs/entry.md.\n";

/* A stop signal before the child started: nothing to forward it to and nothing to wait
 * for, so entry ends now instead of starting the child only to stop it (docker stop during
 * a slow `users ensure-base` used to wait for it, then start pistisd serve). */
static int stopped_before_start(int sig)
{
	const char *n = entry_signal_name(sig);

	log_notice("SIG%s before the child started: exiting without starting it", n ? n : "?");
	return 128 + sig;
}

/* Preparing /data and the base users, and every pistisd after it, need root with the
 * capabilities lib/caps.h names. Without them ensure-base failed on some file of /etc or
 * /data ("cannot make /data/pistis root-only (Permission denied)") that named no cause
 * (docker run --user 1000, --cap-drop ALL): say the cause, once, and start nothing. */
static int require_root(void)
{
	uint64_t missing = 0;
	char names[256];

	if (caps_missing(&missing) < 0 || !missing)
		return 0;
	caps_names(missing, names, sizeof(names));
	if (geteuid() != 0)
		log_error("Refusing to start: pistisd must run as root, and this container runs as "
			  "uid %u (docker run --user, Kubernetes runAsUser/runAsNonRoot): it gives "
			  "each agent a user of its own; agents never run as root",
			  (unsigned)geteuid());
	else
		log_error("Refusing to start: the container lacks %s, which pistisd needs to "
			  "confine agents (docker run --cap-drop, a securityContext that drops "
			  "them): give them back",
			  names);
	return -EPERM;
}

/* In a user namespace (rootless Docker or Podman, --userns-remap, Kubernetes hostUsers:
 * false, unprivileged LXC) every id pistis sets must be mapped, and setgroups allowed:
 * before, a map of 0-9999 let entry start, ensure-base fail on a bare "Invalid argument",
 * and a map denying setgroups started a serve whose every command then failed at its
 * setgroups step. The same test as `pistisd check`'s id_map, and the same opt-out
 * (PISTIS_ALLOW=id_map), which the pi-tools and pi-sandbox ids ensure-base writes and the
 * agents' own ids users ensure still need. */
static int require_id_map(void)
{
	const struct id_map_need needs[] = USERS_ID_MAP_ALL;
	char why[512];

	if (id_map_check_needs(needs, ELEMENTSOF(needs), true, why, sizeof(why)) == 0 ||
	    entry_serve_allows("id_map"))
		return 0;
	log_error("Refusing to start: %s; pistis gives each agent a uid and gid of its own from "
		  "10100 up, pi-tools 10002 and pi-sandbox 10010: map uids and gids 0-65535 into "
		  "the container with setgroups allowed, or PISTIS_ALLOW=id_map (pistisd check: "
		  "id_map)",
		  why);
	return -ERANGE;
}

/* Entry runs --pistisd as root (ensure-base, trusted install, serve, and serve again at
 * every restart), by its path. Whoever may write that file, or a directory on its way,
 * chooses what root runs next: an image made with `chmod -R 777 /usr/local`, a pistisd
 * COPYed in with another owner, one kept in /workspaces or in an agent's home. Before,
 * entry ran such a file without a word (red team, tests/integration/redteam-upgrade.sh).
 * A sticky root-owned directory on the way (/tmp) is believed: no one else can rename
 * what root put there. Missing: the caller's "not found" path. */
static int require_trusted_pistisd(const char *path)
{
	static const struct trust_rule rule = {.also_owner = (uid_t)-1,
					       .flags = TRUST_STICKY | TRUST_ROOT_GROUP};
	char why[PATH_MAX + 512];
	_cleanup_close_ int fd = -1;

	fd = trust_file_open(path, &rule, "the pistisd that entry runs as root", why, sizeof(why));
	if (fd >= 0 || fd == -ENOENT)
		return 0;
	log_error("Refusing to start: %s: whoever may change it runs code as root when "
		  "entry starts it; install pistisd root's 0755 in a directory only root may "
		  "write (/usr/local/bin)",
		  why);
	return fd;
}

static void reset_dispositions(void)
{
	/* Whatever started us may have ignored signals (SIGCHLD ignored would make the kernel
	 * reap our children behind waitpid's back; SIGINT/SIGQUIT are ignored for background
	 * jobs of a shell), and children inherit ignored dispositions across exec, libc's own
	 * numbers included. */
	(void)sigutil_reset_dispositions();
}

int main(int argc, char **argv)
{
	_cleanup_free_ char **default_cmd = NULL;
	struct entry_opts o;
	const char *err = NULL, *arg = NULL;
	sigset_t set;
	char **cmd;
	int r, sig;

	/* First of all: as PID 1 of a namespace a signal with the default action from outside
	 * (docker stop) would kill us before the loop runs. Blocked signals stay pending. */
	entry_wait_set(&set);
	if (sigprocmask(SIG_SETMASK, &set, NULL) < 0)
		return ENTRY_EXIT_SYSTEM;
	reset_dispositions();

	log_set_program("pistisd-entry");
	/* Root, possibly holding what the child was configured with: no core dumps, no
	 * ptrace by non-root, /proc/PID files root's. exec resets it for the child. */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

	r = entry_parse_args(argc, argv, &o, &err, &arg);
	if (r == ENTRY_PARSE_HELP) {
		(void)loop_write(STDOUT_FILENO, help_text, sizeof(help_text) - 1);
		return 0;
	}
	if (r == ENTRY_PARSE_VERSION) {
		version_print("pistisd-entry", VERSION_NO_LIBS);
		return 0;
	}
	if (r < 0) {
		if (arg)
			log_error("%s: '%s' (see pistisd-entry --help)", err, arg);
		else
			log_error("%s (see pistisd-entry --help)", err);
		return ENTRY_EXIT_USAGE;
	}
	if (o.verbose)
		log_set_level(LOG_LVL_DEBUG);

	/* fds inherited from the runtime are no business of ours nor of the child's. */
	r = fd_ensure_std();
	if (r < 0)
		return log_error_errno(r,
				       "Failed to open /dev/null on fd 0-2 (it must be the null "
				       "device, character device 1:3, not a link or a file): %m"),
		       ENTRY_EXIT_SYSTEM;
	(void)close_all_fds_from(3);

	/* Not PID 1 (docker run --init, a sidecar started by a shell, tests): become the
	 * subreaper, so orphans of the child's tree are still reparented to us and reaped. */
	if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		log_warning_errno(-errno, "Failed to become a child subreaper; orphans will go to "
					  "PID 1: %m");

	if ((o.prepare || !o.cmd) && require_trusted_pistisd(o.pistisd) < 0)
		return ENTRY_EXIT_SYSTEM;
	if (o.prepare) {
		r = require_root();
		if (r >= 0)
			r = require_id_map();
		if (r < 0)
			return ENTRY_EXIT_SYSTEM;
		r = entry_prepare_data(o.data_dir);
		if (r < 0)
			return ENTRY_EXIT_SYSTEM;
		entry_sticky_scratch();
		r = entry_ensure_base(o.pistisd, o.grace_ms);
		if ((sig = entry_startup_stop()))
			return stopped_before_start(sig);
		if (r == -ENOENT)
			log_notice("'%s' not found: skipping 'users ensure-base'", o.pistisd);
		else if (r != 0)
			return ENTRY_EXIT_SYSTEM;
	}
	/* After prepare (the data directory exists then), before any child. */
	if (o.harden && entry_harden_mounts(o.data_dir) < 0)
		return ENTRY_EXIT_SYSTEM;
	/* After the hardening, which refuses to start where it fails and trusted commands
	 * are configured: one restored now is judged per command by serve instead. */
	if ((sig = entry_startup_stop()))
		return stopped_before_start(sig);
	if (o.prepare && entry_trusted_restore(o.data_dir, o.pistisd, o.grace_ms) < 0)
		return ENTRY_EXIT_SYSTEM;

	cmd = o.cmd;
	if (!cmd) {
		r = entry_default_cmd(o.data_dir, o.pistisd, &default_cmd);
		if (r != 0)
			return r;
		cmd = default_cmd;
	}
	if ((sig = entry_startup_stop()))
		return stopped_before_start(sig);
	return entry_supervise(&o, cmd);
}
