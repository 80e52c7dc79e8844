/* trusted: `pistisd trusted-exec`, the interpreter of the wrappers in /data/bin. The kernel
 * runs `PISTISD trusted-exec /data/bin/NAME ARGS…` for the agent that calls NAME; this execs
 * `sudo -n -u pi-tools -- /data/trusted/NAME ARGS…` and nothing else. And
 * `pistisd trusted-interp`, the interpreter a trusted script may name for a clean start.
 *
 * It runs as the agent, with no privilege, and the agent may call it directly with any argv
 * and environment: nothing here is a boundary (sudo is, and it only runs the pinned
 * scripts). It still takes NAME only from a path of the exact form /data/bin/NAME that is a
 * root-owned regular file, so a stray call never reaches sudo, and it hands sudo no
 * environment but TERM (never none). Hot path: no allocation, no stdio, a few syscalls. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/macro.h"
#include "lib/sig-util.h"
#include "pistisd/cli.h"
#include "trusted/trusted.h"

#define EXEC_ARGS_MAX 65536 /* arguments forwarded (the kernel's own limit is in bytes) */
#define EXEC_TERM_MAX 128   /* bytes of TERM=… passed on */

static void help(void)
{
	printf("Usage: pistisd trusted-exec /data/bin/NAME [ARGS]…\n\n"
	       "The interpreter of the trusted-command wrappers (their first line is\n"
	       "'#!PISTISD trusted-exec'): runs\n"
	       "`sudo -n -u pi-tools -- /data/trusted/NAME ARGS…` with no environment but\n"
	       "TERM (TERM=unknown where the caller has none, or one over 128 bytes), the\n"
	       "signals the caller ignored back to their defaults, each soft limit but the\n"
	       "core's raised to its hard one, and the interval timers, persona, timer slack\n"
	       "and THP switch reset.\n"
	       "NAME must match [a-z0-9][a-z0-9_-]{0,63} and /data/bin/NAME must be a\n"
	       "root-owned regular file (not a symlink) that group and others cannot write;\n"
	       "at most 65536 ARGS.\n"
	       "Exit codes: 100 bad usage, 126 sudo cannot be run, 127 sudo not found;\n"
	       "otherwise sudo's (and the script's). See docs/trusted.md.\n");
}

/* What the caller may have left that sudo hands on to the script: sudo restores its
 * caller's signal dispositions, so a signal ignored here stays ignored there (and a
 * non-interactive /bin/sh cannot undo that), and it keeps the caller's rlimits, persona
 * and interval timers. Timers are disarmed, the persona and timer slack and THP reset,
 * ignored signals go back to their defaults, the mask is emptied, and each soft limit but
 * the core's is raised to its hard one (the hard ones an agent lowered stay: raising them
 * needs CAP_SYS_RESOURCE). In trusted-exec it is no boundary (an agent can run sudo
 * itself, around it: docs/trusted.md, "What the caller still controls"); in
 * trusted-interp, the script's own interpreter, nothing comes between it and the script. */
static void caller_state_reset(void)
{
	static const int limits[] = {RLIMIT_CPU,	RLIMIT_FSIZE,	RLIMIT_DATA,
				     RLIMIT_STACK,	RLIMIT_NOFILE,	RLIMIT_AS,
				     RLIMIT_NPROC,	RLIMIT_MEMLOCK, RLIMIT_LOCKS,
				     RLIMIT_SIGPENDING, RLIMIT_MSGQUEUE};
	static const struct itimerval off;
	struct rlimit rl;
	sigset_t none;

	/* An interval timer outlives execve, setuid ones included: armed by the caller, it
	 * would end the script with SIGALRM (or SIGVTALRM, SIGPROF) at a moment of its
	 * choosing. */
	(void)setitimer(ITIMER_REAL, &off, NULL);
	(void)setitimer(ITIMER_VIRTUAL, &off, NULL);
	(void)setitimer(ITIMER_PROF, &off, NULL);
	/* A persona the caller chose (PER_LINUX32, UNAME26: uname says i686, 2.6.x) makes a
	 * script that picks a download by `uname -m` pick wrong; timer slack and THP are
	 * reset too. What cannot be undone without privilege stays (docs/trusted.md). */
	(void)personality(PER_LINUX);
	(void)prctl(PR_SET_TIMERSLACK, 0, 0, 0, 0);
	(void)prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
	/* libc's sigaction refuses the signals it keeps for itself (musl: 32-34), which a
	 * caller may have ignored all the same (seen in CI: 32 and 33) */
	(void)sigutil_reset_dispositions();
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		if (getrlimit(limits[i], &rl) == 0 && rl.rlim_cur != rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			(void)setrlimit(limits[i], &rl);
		}
}

int trusted_exec_main(int argc, char **argv)
{
	static const char *const sudos[] = {TRUSTED_SUDO_PATHS};
	char name[TRUSTED_NAME_MAX + 1];
	char script[sizeof("/" TRUSTED_DIR "/") + TRUSTED_NAME_MAX];
	/* In .bss: only the pages used are ever touched. */
	static char *sargv[6 + EXEC_ARGS_MAX + 1];
	char *envp[2] = {NULL, NULL};
	struct stat st;
	size_t i, n = 0;
	int err = ENOENT;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		help();
		return 0;
	}
	if (argc < 2 || trusted_exec_name(argv[1], name) < 0) {
		log_error("trusted-exec: %s: not a trusted command wrapper (/data/bin/NAME)",
			  argc < 2 ? "(no path)" : argv[1]);
		return EXIT_USAGE;
	}
	/* No symlink, nothing an agent made: the file the wrapper path names is root's. */
	if (lstat(argv[1], &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022)) {
		log_error("trusted-exec: %s is not a root-owned regular file", argv[1]);
		return EXIT_USAGE;
	}
	if ((size_t)(argc - 2) > EXEC_ARGS_MAX) {
		log_error("trusted-exec: more than %d arguments", EXEC_ARGS_MAX);
		return EXIT_USAGE;
	}
	snprintf(script, sizeof(script), "/" TRUSTED_DIR "/%s", name);
	sargv[n++] = (char *)"sudo";
	sargv[n++] = (char *)"-n";
	sargv[n++] = (char *)"-u";
	sargv[n++] = (char *)"pi-tools";
	sargv[n++] = (char *)"--";
	sargv[n++] = script;
	for (i = 2; i < (size_t)argc; i++)
		sargv[n++] = argv[i];
	sargv[n] = NULL;

	/* sudo's env_reset (with !env_keep and !env_check) passes the script none of it, TERM
	 * included (it sets TERM=unknown): pass sudo only TERM, as the /bin/sh wrapper
	 * effectively did. With none (or one too long), TERM=unknown: never an empty
	 * environment, which Debian 13's sudo 1.9.16p2 dies of before its policy runs
	 * (SIGSEGV, a NULL pointer read in sudoers.so; docs/trusted.md). */
	const char *term = getenv("TERM");
	char term_var[sizeof("TERM=") + EXEC_TERM_MAX];
	if (!term || strlen(term) > EXEC_TERM_MAX)
		term = "unknown";
	snprintf(term_var, sizeof(term_var), "TERM=%s", term);
	envp[0] = term_var;

	caller_state_reset();
	/* The order of trusted_find_sudo, so the sudo add checked is the one run. */
	for (i = 0; i < sizeof(sudos) / sizeof(sudos[0]); i++) {
		execve(sudos[i], sargv, envp);
		if (errno != ENOENT && errno != ENOTDIR) {
			err = errno;
			break;
		}
	}
	errno = err;
	log_error_errno(-err, "trusted-exec: cannot run sudo: %m");
	return err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
}

static void interp_help(void)
{
	printf("Usage: #!PISTISD trusted-interp INTERP [ARG]   (the first line of a script)\n\n"
	       "Runs INTERP [ARG] SCRIPT ARGS… after disarming the interval timers, setting\n"
	       "the persona back to PER_LINUX, resetting timer slack and THP, putting every\n"
	       "ignored signal back to its default, emptying the signal mask and raising each\n"
	       "soft limit but the core's to its hard one: what sudo hands on from whoever\n"
	       "called the trusted command.\n"
	       "INTERP must be an absolute path; ARG, the rest of the line, is one argument\n"
	       "(as the kernel reads a #! line). `pistisd trusted add`, `install` and `check`\n"
	       "check INTERP like any interpreter. Exit codes: 100 bad usage, 126 INTERP cannot\n"
	       "be run, 127 INTERP not found. See docs/trusted.md, \"A clean start\".\n");
}

/* The kernel runs `PISTISD "trusted-interp INTERP [ARG]" SCRIPT ARGS…` (a #! line's
 * argument is one argv element, split here as trusted_interp_split, the very function add
 * and check use, splits it). Runs as whoever runs the script: pi-tools under sudo, which
 * restored its caller's dispositions and kept its limits. The state reset is
 * caller_state_reset's; then INTERP [ARG] SCRIPT ARGS…, with the environment as it is (sudo
 * built it). */
int trusted_interp_main(int argc, char **argv)
{
	char inner[TRUSTED_SHEBANG_MAX], inner_arg[TRUSTED_SHEBANG_MAX];
	_cleanup_free_ char **nargv = NULL;
	int r, n = 0;

	if (argc == 2 && !strcmp(argv[0], TRUSTED_INTERP_CMD) &&
	    (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		interp_help();
		return 0;
	}
	r = trusted_interp_split(argv[0], inner, inner_arg);
	if (r <= 0 || argc < 2) {
		log_error("trusted-interp: usage: '#!PISTISD trusted-interp INTERP [ARG]' as the "
			  "first line of a script (see 'pistisd trusted-interp --help')");
		return EXIT_USAGE;
	}
	if (inner[0] != '/') {
		log_error("trusted-interp: interpreter '%s' is not an absolute path", inner);
		return EXIT_USAGE;
	}
	nargv = calloc((size_t)argc + 2, sizeof(*nargv));
	if (!nargv) {
		log_error("trusted-interp: out of memory");
		return EXIT_CANNOT_EXEC;
	}
	nargv[n++] = inner;
	if (inner_arg[0])
		nargv[n++] = inner_arg;
	for (int i = 1; i < argc; i++)
		nargv[n++] = argv[i];
	caller_state_reset();
	execve(inner, nargv, environ);
	r = errno;
	log_error_errno(-r, "trusted-interp: cannot run %s: %m", inner);
	return r == ENOENT || r == ENOTDIR ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
}
