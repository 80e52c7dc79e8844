/* pistisd-entry's pure logic: arguments, durations, the restart policy, exit statuses. */
#include "pistisd-entry/entry.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/macro.h"
#include "lib/parse-num.h"

int entry_parse_seconds(const char *s, int64_t *ret_ms)
{
	int64_t whole = 0, frac = 0;
	int ndigits = 0, nfrac = 0;

	if (!s || !*s)
		return -EINVAL;
	/* Digits only: no sign, no spaces, no exponent, no hex (strtod would take all four). */
	for (; *s >= '0' && *s <= '9'; s++, ndigits++) {
		whole = whole * 10 + (*s - '0');
		if (whole > ENTRY_MAX_DURATION_MS / 1000)
			return -ERANGE;
	}
	if (*s == '.') {
		for (s++; *s >= '0' && *s <= '9'; s++, nfrac++) {
			if (nfrac == 3)
				return -EINVAL;
			frac = frac * 10 + (*s - '0');
		}
		if (nfrac == 0)
			return -EINVAL;
	}
	if (*s || ndigits == 0)
		return -EINVAL;
	for (int i = nfrac; i < 3; i++)
		frac *= 10;
	if (whole * 1000 + frac > ENTRY_MAX_DURATION_MS)
		return -ERANGE;
	*ret_ms = whole * 1000 + frac;
	return 0;
}

static int parse_count(const char *s, unsigned *ret)
{
	uint64_t v;
	int r = parse_uint_strict(s, ENTRY_MAX_RESTARTS_LIMIT, NULL, &v);

	if (r >= 0)
		*ret = (unsigned)v;
	return r;
}

int entry_parse_args(int argc, char **argv, struct entry_opts *ret, const char **ret_error,
		     const char **ret_arg)
{
	static const char *const value_opts[] = {
		"--grace",	  "--data", "--pistisd", "--restart-delay", "--restart-delay-max",
		"--max-restarts",
	};
	int i;

	*ret = (struct entry_opts){
		.restart = true,
		.prepare = true,
		.harden = true,
		.grace_ms = ENTRY_DEFAULT_GRACE_MS,
		.delay_ms = ENTRY_DEFAULT_DELAY_MS,
		.delay_max_ms = ENTRY_DEFAULT_DELAY_MAX_MS,
		.max_restarts = ENTRY_DEFAULT_MAX_RESTARTS,
		.data_dir = ENTRY_DEFAULT_DATA,
		.pistisd = ENTRY_DEFAULT_PISTISD,
	};
	*ret_error = NULL;
	*ret_arg = NULL;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *value = NULL, *eq;
		size_t k, n;

		if (!strcmp(a, "--")) {
			i++;
			if (i == argc) {
				*ret_error = "'--' must be followed by a command";
				return -EINVAL;
			}
			ret->cmd = argv + i;
			break;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return ENTRY_PARSE_HELP;
		if (!strcmp(a, "--version"))
			return ENTRY_PARSE_VERSION;
		if (!strcmp(a, "--no-restart")) {
			ret->restart = false;
			continue;
		}
		if (!strcmp(a, "--no-prepare")) {
			ret->prepare = false;
			continue;
		}
		if (!strcmp(a, "--no-harden-mounts")) {
			ret->harden = false;
			continue;
		}
		if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
			ret->verbose = true;
			continue;
		}

		/* --opt VALUE or --opt=VALUE */
		eq = strchr(a, '=');
		n = eq ? (size_t)(eq - a) : strlen(a);
		for (k = 0; k < ELEMENTSOF(value_opts); k++)
			if (strlen(value_opts[k]) == n && !strncmp(a, value_opts[k], n))
				break;
		if (k == ELEMENTSOF(value_opts)) {
			/* A bare command without "--" would be ambiguous with a mistyped
			 * option; insist on "--" so what runs is always what was meant. */
			*ret_error =
				a[0] == '-' ? "unknown option" : "the command must follow '--'";
			*ret_arg = a;
			return -EINVAL;
		}
		if (eq)
			value = eq + 1;
		else if (i + 1 < argc)
			value = argv[++i];
		else {
			*ret_error = "option needs a value";
			*ret_arg = a;
			return -EINVAL;
		}

		*ret_arg = value;
		switch (k) {
		case 0:
		case 3:
		case 4: {
			int64_t *field = k == 0	  ? &ret->grace_ms
					 : k == 3 ? &ret->delay_ms
						  : &ret->delay_max_ms;
			if (entry_parse_seconds(value, field) < 0) {
				*ret_error = "a duration must be seconds (up to 3 decimals, at "
					     "most 86400)";
				return -EINVAL;
			}
			break;
		}
		case 1:
		case 2:
			/* Absolute: PID 1's cwd is whatever the image says, and these name
			 * the persistent volume and the binary run as root. */
			if (value[0] != '/') {
				*ret_error = "the path must be absolute";
				return -EINVAL;
			}
			if (k == 1)
				ret->data_dir = value;
			else
				ret->pistisd = value;
			break;
		case 5:
			if (parse_count(value, &ret->max_restarts) < 0) {
				*ret_error = "--max-restarts must be a count (0: unlimited)";
				return -EINVAL;
			}
			break;
		default:
			*ret_error = "internal error";
			return -EINVAL;
		}
		*ret_arg = NULL;
	}

	if (ret->delay_max_ms < ret->delay_ms) {
		*ret_error = "--restart-delay-max is below --restart-delay";
		return -EINVAL;
	}
	return ENTRY_PARSE_RUN;
}

int64_t entry_backoff_ms(unsigned n, int64_t delay_ms, int64_t max_ms)
{
	int64_t d = delay_ms;

	if (n == 0)
		return 0;
	/* Double n-1 times, stopping at the cap (so no overflow for any n). */
	for (unsigned i = 1; i < n && d < max_ms; i++)
		d = d > max_ms / 2 ? max_ms : d * 2;
	return d < max_ms ? d : max_ms;
}

enum entry_after_exit entry_decide(const struct entry_opts *o, unsigned *failures, int64_t ran_ms,
				   int64_t *ret_delay_ms)
{
	*ret_delay_ms = 0;
	if (!o->restart)
		return ENTRY_GIVE_UP;
	/* A healthy run forgives earlier failures: a daemon that crashes once a week restarts
	 * at once, while one that crashes at start-up backs off and eventually gives up. */
	if (ran_ms >= ENTRY_STABLE_MS)
		*failures = 0;
	if (o->max_restarts && *failures >= o->max_restarts)
		return ENTRY_GIVE_UP;
	if (*failures < UINT32_MAX)
		(*failures)++;
	*ret_delay_ms = entry_backoff_ms(*failures, o->delay_ms, o->delay_max_ms);
	return ENTRY_RESTART;
}

int entry_exit_code(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return ENTRY_EXIT_SYSTEM;
}

static const struct {
	int sig;
	const char *name;
	bool stops;
} signals[] = {
	{SIGTERM, "TERM", true},    {SIGINT, "INT", true},    {SIGQUIT, "QUIT", true},
	{SIGHUP, "HUP", false},	    {SIGUSR1, "USR1", false}, {SIGUSR2, "USR2", false},
	{SIGWINCH, "WINCH", false},
};

static const struct {
	int sig;
	const char *name;
} other_names[] = {
	{SIGKILL, "KILL"}, {SIGSEGV, "SEGV"}, {SIGABRT, "ABRT"}, {SIGPIPE, "PIPE"},
	{SIGALRM, "ALRM"}, {SIGBUS, "BUS"},   {SIGFPE, "FPE"},	 {SIGILL, "ILL"},
	{SIGSYS, "SYS"},   {SIGCHLD, "CHLD"}, {SIGTRAP, "TRAP"}, {SIGXCPU, "XCPU"},
	{SIGXFSZ, "XFSZ"}, {SIGSTOP, "STOP"}, {SIGTSTP, "TSTP"}, {SIGCONT, "CONT"},
};

const char *entry_signal_name(int sig)
{
	for (size_t i = 0; i < ELEMENTSOF(signals); i++)
		if (signals[i].sig == sig)
			return signals[i].name;
	for (size_t i = 0; i < ELEMENTSOF(other_names); i++)
		if (other_names[i].sig == sig)
			return other_names[i].name;
	return NULL;
}

bool entry_signal_forwarded(int sig)
{
	for (size_t i = 0; i < ELEMENTSOF(signals); i++)
		if (signals[i].sig == sig)
			return true;
	return false;
}

bool entry_signal_stops(int sig)
{
	for (size_t i = 0; i < ELEMENTSOF(signals); i++)
		if (signals[i].sig == sig)
			return signals[i].stops;
	return false;
}
