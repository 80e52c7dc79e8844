/* Before the child starts: the data directory, the base users, serve.conf. */
#include "pistisd-entry/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/mono-clock.h"
#include "trusted/trusted.h"

#define ENSURE_BASE_TIMEOUT_MS 60000

void entry_wait_set(sigset_t *ret)
{
	static const int synchronous[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL,
					  SIGTRAP, SIGSYS, SIGABRT};

	sigfillset(ret);
	for (size_t i = 0; i < ELEMENTSOF(synchronous); i++)
		sigdelset(ret, synchronous[i]);
}

int entry_prepare_data(const char *dir)
{
	_cleanup_close_ int fd = -1;
	unsigned removed = 0;
	struct stat st;
	bool created;
	int r;

	created = mkdir(dir, 0755) == 0;
	if (!created && errno != EEXIST)
		return log_error_errno(-errno, "Failed to create the data directory '%s': %m", dir);
	/* O_NOFOLLOW: /data holds the registry, trusted scripts and secrets; a symlink there
	 * would let whoever controls its target decide where they go. */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(-errno,
				       "Failed to open the data directory '%s' (it must be a "
				       "directory, not a symlink): %m",
				       dir);
	if (fstat(fd, &st) < 0)
		return log_error_errno(-errno, "Failed to stat '%s': %m", dir);

	/* Fix through the fd we checked. Only what is unsafe is changed: a foreign owner, or
	 * write/special bits for group or other; a stricter mode an operator chose stays. The
	 * new mode is computed from scratch, never from the old one. */
	if (st.st_uid != 0 || st.st_gid != 0) {
		if (fchown(fd, 0, 0) < 0)
			return log_error_errno(-errno,
					       "Failed to make the data directory '%s' owned "
					       "by root: %m",
					       dir);
		if (!created)
			log_notice("data directory '%s' was owned by %u:%u; now root:root", dir,
				   (unsigned)st.st_uid, (unsigned)st.st_gid);
	}
	/* ACLs survive chown and chmod: an agent that owned the directory in an earlier life
	 * of the volume could have left a named entry the mask hides now (reopened by any
	 * later chmod g+w) and a default ACL every directory made in /data would inherit. Both
	 * go, whoever set them, before the mode is fixed. */
	r = fd_remove_acls(fd, &removed);
	if (r < 0)
		return log_error_errno(r, "Failed to remove the ACLs of '%s': %m", dir);
	for (size_t i = 0; i < ELEMENTSOF(fd_acl_xattrs); i++)
		if (removed & (1u << i))
			log_notice("data directory '%s' had an ACL (%s); removed", dir,
				   fd_acl_xattrs[i]);
	if (created || (st.st_mode & 07022)) {
		if (fchmod(fd, 0755) < 0)
			return log_error_errno(-errno, "Failed to chmod '%s' to 0755: %m", dir);
		if (!created && (st.st_mode & 07022))
			log_notice("data directory '%s' had mode %04o; now 0755", dir,
				   (unsigned)(st.st_mode & 07777));
	}
	if (created) {
		log_info("created the data directory '%s' (root:root 0755)", dir);
		return 0;
	}
	return entry_repair_state(fd, dir);
}

/* A stop signal (docker stop, Ctrl-C) that came before the child started, or 0. */
static int startup_stop_sig;

/* Adds to set every signal that stops entry (entry_signal_stops). */
static void add_stop_signals(sigset_t *set)
{
	for (int s = 1; s < NSIG; s++)
		if (entry_signal_stops(s))
			sigaddset(set, s);
}

int entry_startup_stop(void)
{
	struct timespec zero = {0, 0};
	sigset_t stop;
	int sig;

	if (startup_stop_sig)
		return startup_stop_sig;
	sigemptyset(&stop);
	add_stop_signals(&stop);
	/* Taken, not only looked at: the supervision loop never runs after one. */
	sig = sigtimedwait(&stop, NULL, &zero);
	if (sig > 0)
		startup_stop_sig = sig;
	return startup_stop_sig;
}

/* Runs PISTISD with argv (argv[0] its path) and waits, bounded: PID 1 must not hang forever
 * on a stuck helper. Only SIGCHLD and the stop signals are taken here; the others stay
 * pending for the supervision loop. A stop signal gives the helper GRACE_MS to finish (it
 * rewrites /etc/passwd and the sudoers drop-in: better done than cut short), a second one
 * or the end of that SIGKILLs it; either way entry_startup_stop() says so afterwards and
 * the child is never started. Before, a `docker stop` during a slow ensure-base waited up
 * to its 60 s bound, and then the child was started only to be stopped. Other zombies
 * (none yet at start-up, but a PID 1 can be handed some) are left to that loop's reaper.
 * 0 with *status, -ENOENT when PISTISD does not exist, or a logged -errno (-ETIME: killed
 * at the deadline, -EINTR: killed after a stop signal). */
static int run_pistisd(char *const argv[], const char *what, int64_t grace_ms, int *status)
{
	sigset_t waitset, empty;
	int64_t deadline;
	pid_t pid;

	if (access(argv[0], X_OK) < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		return log_error_errno(-errno, "Cannot execute '%s': %m", argv[0]);
	}

	sigemptyset(&empty);
	sigemptyset(&waitset);
	sigaddset(&waitset, SIGCHLD);
	add_stop_signals(&waitset);
	pid = fork();
	if (pid < 0)
		return log_error_errno(-errno, "Failed to fork for %s: %m", what);
	if (pid == 0) {
		/* A group of its own, so the SIGKILL at its deadline reaches what it started too
		 * (visudo, under `trusted install`). Also set by the parent: whichever runs first.
		 * On a terminal (docker run -t) that group is made the foreground one, as for the
		 * child: a background one writing its lines there with `stty tostop` set is
		 * stopped by SIGTTOU until the deadline. SIGTTOU is still blocked here. */
		(void)setpgid(0, 0);
		if (isatty(STDIN_FILENO))
			(void)tcsetpgrp(STDIN_FILENO, getpid());
		/* Dispositions are already the defaults (main reset them). */
		(void)sigprocmask(SIG_SETMASK, &empty, NULL);
		execv(argv[0], argv);
		_exit(errno == ENOENT ? ENTRY_EXIT_NOT_FOUND : ENTRY_EXIT_CANNOT_EXEC);
	}
	(void)setpgid(pid, pid); /* EACCES once it has exec'd: it did it itself */

	deadline = mono_ms() + ENSURE_BASE_TIMEOUT_MS;
	if (startup_stop_sig && mono_ms() + grace_ms < deadline)
		deadline = mono_ms() + grace_ms;
	for (;;) {
		pid_t p = waitpid(pid, status, WNOHANG);
		int64_t left = deadline - mono_ms();
		struct timespec ts;
		char b[24];
		int sig;

		if (p == pid)
			return 0;
		if (p < 0 && errno != EINTR)
			return log_error_errno(-errno, "waitpid: %m");
		if (left <= 0) {
			/* The group: a helper killed alone left what it had started running
			 * (and, entry not PID 1, running on after entry exited). */
			(void)kill(-pid, SIGKILL);
			(void)kill(pid, SIGKILL);
			(void)waitpid(pid, status, 0);
			if (startup_stop_sig) {
				log_warning("'%s %s' was not done when entry stopped; killed it",
					    argv[0], what);
				return -EINTR;
			}
			log_error("'%s %s' did not finish in %d s; killed it", argv[0], what,
				  ENSURE_BASE_TIMEOUT_MS / 1000);
			return -ETIME;
		}
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000;
		sig = sigtimedwait(&waitset, NULL, &ts);
		if (sig <= 0 || sig == SIGCHLD)
			continue;
		snprintf(b, sizeof(b), "SIG%s", entry_signal_name(sig));
		if (startup_stop_sig) {
			log_notice("%s again: killing '%s %s' now", b, argv[0], what);
			deadline = mono_ms();
			continue;
		}
		startup_stop_sig = sig;
		log_notice("%s during '%s %s': the child will not be started; SIGKILL to it in "
			   "%lld.%03lld s unless it is done",
			   b, argv[0], what, (long long)(grace_ms / 1000),
			   (long long)(grace_ms % 1000));
		if (mono_ms() + grace_ms < deadline)
			deadline = mono_ms() + grace_ms;
	}
}

int entry_ensure_base(const char *pistisd, int64_t grace_ms)
{
	char *argv[] = {(char *)pistisd, (char *)"users", (char *)"ensure-base", NULL};
	int status = 0, r = run_pistisd(argv, "users ensure-base", grace_ms, &status);

	if (r == -ENOENT)
		return r;
	if (r < 0)
		return ENTRY_EXIT_SYSTEM;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	log_error("'%s users ensure-base' failed (%s %d); not starting the child", pistisd,
		  WIFEXITED(status) ? "exit status" : "signal",
		  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	return entry_exit_code(status) ?: ENTRY_EXIT_SYSTEM;
}

/* Directory path opened without following a link, or NULL. */
static DIR *opendir_nofollow(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);

	if (!d && fd >= 0)
		close(fd);
	return d;
}

/* Whether directory PATH (not followed) holds any entry. */
static bool dir_has_entries(const char *path)
{
	DIR *d = opendir_nofollow(path);
	struct dirent *de;
	bool any = false;

	if (!d)
		return false;
	while (!any && (de = readdir(d)))
		any = strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return any;
}

/* Whether a trusted command's wrapper (/data/bin/NAME for each NAME in /data/trusted) is
 * missing, or is ours and names an interpreter that is not an executable file: a new image
 * that has pistisd elsewhere (/usr/bin instead of /usr/local/bin) keeps the volume's
 * wrappers, whose shebang names the old path, and every agent's call of a trusted command
 * failed ("bad interpreter") while the drop-in was current and nothing ran install. The
 * first such wrapper is named in why. Install writes them again (and checks all the rest). */
static bool wrapper_stale(char *why, size_t size)
{
	DIR *d = opendir_nofollow(ENTRY_TRUSTED_DIR);
	struct dirent *de;
	bool stale = false;

	if (!d)
		return false;
	while (!stale && (de = readdir(d))) {
		char path[sizeof(ENTRY_DATA_BIN) + sizeof(de->d_name)], head[256];
		_cleanup_close_ int w = -1;
		struct stat st;
		ssize_t n;
		char *interp, *end;

		if (!trusted_name_valid(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", ENTRY_DATA_BIN, de->d_name);
		w = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (w < 0) {
			stale = errno == ENOENT;
			if (stale)
				snprintf(why, size, "no wrapper %s", path);
			continue;
		}
		n = read(w, head, sizeof(head) - 1);
		if (n <= 0 || !trusted_wrapper_is_ours(head, (size_t)n))
			continue; /* not ours: install says what it makes of it */
		head[n] = '\0';
		interp = head + 2;
		end = interp + strcspn(interp, " \t\n");
		*end = '\0';
		if (stat(interp, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
			stale = true;
			snprintf(why, size, "a wrapper whose interpreter %s is not there (%s)",
				 interp, path);
		}
	}
	closedir(d);
	return stale;
}

int entry_trusted_restore(const char *data_dir, const char *pistisd, int64_t grace_ms)
{
	char *argv[] = {(char *)pistisd, (char *)"trusted", (char *)"install", NULL};
	const char *suid;
	char stale[640] = "";
	_cleanup_close_ int root_fd = -1;
	int status = 0, r, state;

	/* Restored where the image has no drop-in (a container made afresh), and rewritten
	 * where it has one in another release's form (an image that kept an older one; a
	 * plain machine's /etc): serve believes only the form its own release writes, so
	 * such a drop-in keeps the trusted commands off until install has run. A current
	 * one is left alone unless a wrapper is stale (wrapper_stale). */
	if (!dir_has_entries(ENTRY_TRUSTED_DIR))
		return 0;
	/* As serve judges it: a drop-in serve does not believe (a link, another owner or
	 * mode, empty) is left for pistisd check to name. */
	root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	state = root_fd < 0 ? TRUSTED_DROPIN_LOOSE : trusted_dropin_state(root_fd);
	if (state == TRUSTED_DROPIN_LOOSE ||
	    (state == TRUSTED_DROPIN_CURRENT && !wrapper_stale(stale, sizeof(stale))))
		return 0;
	/* With the drop-in, every shared tree must be nosuid or `pistisd serve` refuses to
	 * start (nosuid_data, nosuid_workspaces, nosuid_shared are hard then): restored onto a
	 * tree the hardening could not reach (Docker's default capabilities, a symlinked
	 * /workspaces), it took the whole sandbox down, serve refused and was restarted until
	 * entry gave up, where the image without a drop-in had run with trusted commands off. */
	suid = entry_shared_tree_not_nosuid(data_dir);
	if (suid) {
		log_warning(
			"not restoring the trusted commands' sudoers drop-in from %s: '%s' is "
			"not mounted nosuid, and with the drop-in pistisd serve would refuse to "
			"start; trusted commands stay off. Mount it nosuid,nodev (or give entry "
			"CAP_SYS_ADMIN), then restart",
			ENTRY_TRUSTED_DIR, suid);
		return 0;
	}
	r = run_pistisd(argv, "trusted install", grace_ms, &status);
	if (r == -ENOENT || r == -ETIME || r == -EINTR)
		return 0;
	if (r < 0)
		return r;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		log_notice("restored the trusted commands' sudoers drop-in from %s (pistisd "
			   "trusted install): the image had %s%s",
			   ENTRY_TRUSTED_DIR,
			   state == TRUSTED_DROPIN_NONE	   ? "none"
			   : state == TRUSTED_DROPIN_OTHER ? "one another release wrote"
							   : "a current one, and the volume ",
			   stale);
	else
		log_warning("'%s trusted install' failed (%s %d): trusted commands stay off until "
			    "it succeeds",
			    pistisd, WIFEXITED(status) ? "exit status" : "signal",
			    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	return 0;
}

/* Files entry trusts (they decide what a root daemon dials and with which token) must be
 * root's and writable by root only; checked on the opened fd. */
static int check_trusted(int fd, const char *what, bool dir)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return log_error_errno(-errno, "Failed to stat '%s': %m", what);
	if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return log_error_errno(-EINVAL, "'%s' is not a %s", what,
				       dir ? "directory" : "regular file");
	if (st.st_uid != 0 || (st.st_mode & 022))
		return log_error_errno(-EPERM,
				       "Refusing '%s': owned by uid %u with mode %04o; it must be "
				       "root's and not group/other writable",
				       what, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return 0;
}

static const char *env_lookup(const char *name)
{
	return getenv(name);
}

static int load_conf(const char *data_dir, struct entry_serve_conf *conf)
{
	_cleanup_close_ int dfd = -1, fd = -1;
	_cleanup_free_ char *text = NULL;
	char path[PATH_MAX];
	const char *err = NULL;
	unsigned line = 0;
	size_t len = 0;
	int r;

	if (snprintf(path, sizeof(path), "%s/pistis", data_dir) >= (int)sizeof(path))
		return log_error_errno(-ENAMETOOLONG, "data directory path too long");
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return 0;
		return log_error_errno(-errno, "Failed to open '%s': %m", path);
	}
	r = check_trusted(dfd, path, true);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/%s", data_dir, ENTRY_CONF_REL);
	fd = openat(dfd, "serve.conf", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return log_error_errno(-errno, "Failed to open '%s': %m", path);
	}
	r = check_trusted(fd, path, false);
	if (r < 0)
		return r;
	r = fd_read_all(fd, ENTRY_CONF_MAX_BYTES, &text, &len);
	if (r < 0)
		return log_error_errno(r, "Failed to read '%s' (at most %d bytes): %m", path,
				       ENTRY_CONF_MAX_BYTES);
	r = entry_conf_parse(text, len, conf, &line, &err);
	if (r < 0)
		return log_error_errno(r, "%s:%u: %s", path, line, err);
	return 0;
}

int entry_default_cmd(const char *data_dir, const char *pistisd, char ***ret_argv)
{
	_cleanup_(entry_conf_done) struct entry_serve_conf conf = {0};
	int r;

	r = load_conf(data_dir, &conf);
	if (r < 0)
		return r == -ENOMEM ? ENTRY_EXIT_SYSTEM : ENTRY_EXIT_USAGE;
	r = entry_conf_from_env(&conf, env_lookup);
	if (r < 0) {
		log_error_errno(r, "PISTIS_RELAY or PISTIS_TOKEN_FILE holds control characters "
				   "or is too long");
		return r == -ENOMEM ? ENTRY_EXIT_SYSTEM : ENTRY_EXIT_USAGE;
	}
	r = entry_serve_argv(&conf, pistisd, ret_argv);
	if (r == -ENOENT) {
		log_error("no relay configured: set relay and token-file in %s/%s, or the "
			  "environment variables PISTIS_RELAY and PISTIS_TOKEN_FILE (a path; "
			  "never the token itself), or give a command after '--'",
			  data_dir, ENTRY_CONF_REL);
		return ENTRY_EXIT_USAGE;
	}
	if (r < 0) {
		log_error_errno(r, "Failed to build the command line: %m");
		return ENTRY_EXIT_SYSTEM;
	}
	return 0;
}
