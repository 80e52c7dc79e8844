/* pi-env: build an agent's environment from nothing and exec a command in it.
 * A chain-loader in the s6/doas tradition: parse, build (lib/env-build.c), close every fd
 * above 2, execve. No stdio, no locale: it sits in front of every agent command. */

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/env-build.h"
#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/version.h"

extern char **environ;

enum {
	EXIT_USAGE = 100,
	EXIT_SYSTEM = 111,
	EXIT_CANNOT_EXEC = 126,
	EXIT_NOT_FOUND = 127,
};

static const char help_text[] =
	"Usage: pi-env [OPTION]... [--] CMD [ARG]...\n"
	"       pi-env [OPTION]... --print [-0]\n"
	"Build an environment from nothing (a fixed allowlist, never a copy of the\n"
	"inherited one) and execute CMD in it, searching CMD in the new PATH.\n"
	"\n"
	"  --agent-user NAME  set USER and LOGNAME (and SHELL=/bin/sh unless --shell)\n"
	"  --home DIR         set HOME\n"
	"  --tmpdir DIR       set TMPDIR\n"
	"  --shell FILE       set SHELL\n"
	"  --path P           PATH (absolute directories; default\n"
	"                     " ENVB_DEFAULT_PATH ")\n"
	"  --keep NAME        also pass NAME through from the inherited environment\n"
	"  --set NAME=VALUE   set NAME (validated like inherited values)\n"
	"  --proxy URL        set HTTP_PROXY, HTTPS_PROXY (and lower case) to URL\n"
	"  --no-proxy LIST    NO_PROXY/no_proxy with --proxy (default\n"
	"                     localhost,127.0.0.1)\n"
	"  --print            print the environment, one entry a line, instead of running\n"
	"  -0                 with --print: end entries with NUL instead of newline\n"
	"  -h, --help, --version\n"
	"\n"
	"Passed through when valid: LANG LANGUAGE LC_* TERM COLORTERM COLUMNS LINES\n"
	"NO_COLOR FORCE_COLOR CLICOLOR PI_*. Everything else is dropped.\n"
	"Exit: CMD's status; 100 usage, 111 system error, 126 cannot execute, 127 not\n"
	"found. See docs/pi-env.md.\n";

struct args {
	struct envb_opts opts;
	const char **keep, **set;
	size_t n_keep, n_set;
	bool print, nul;
	char **cmd; /* NULL-terminated, or NULL with --print */
};

static int usage_error(const char *msg, const char *what)
{
	log_error("%s '%s' (see pi-env --help)", msg, what);
	return EXIT_USAGE;
}

/* Returns -1 to go on, or an exit code. */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct {
		const char *name;
		size_t field; /* offset of the const char * in envb_opts */
	} value_opts[] = {
		{"--agent-user", offsetof(struct envb_opts, user)},
		{"--home", offsetof(struct envb_opts, home)},
		{"--tmpdir", offsetof(struct envb_opts, tmpdir)},
		{"--shell", offsetof(struct envb_opts, shell)},
		{"--path", offsetof(struct envb_opts, path)},
		{"--proxy", offsetof(struct envb_opts, proxy)},
		{"--no-proxy", offsetof(struct envb_opts, no_proxy)},
		{"--keep", 0},
		{"--set", 0},
	};
	int i;

	/* argc bounds both lists; the builder bounds what is in them. */
	a->keep = calloc((size_t)argc + 1, sizeof(char *));
	a->set = calloc((size_t)argc + 1, sizeof(char *));
	if (!a->keep || !a->set) {
		log_error_errno(ENOMEM, "Failed to parse arguments: %m");
		return EXIT_SYSTEM;
	}

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *value = NULL;
		size_t k;

		if (strcmp(arg, "--") == 0) {
			i++;
			break;
		}
		if (arg[0] != '-' || arg[1] == '\0')
			break;
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			(void)loop_write(STDOUT_FILENO, help_text, sizeof(help_text) - 1);
			return 0;
		}
		if (strcmp(arg, "--version") == 0) {
			version_print("pi-env", VERSION_NO_LIBS);
			return 0;
		}
		if (strcmp(arg, "--print") == 0) {
			a->print = true;
			continue;
		}
		if (strcmp(arg, "-0") == 0) {
			a->nul = true;
			continue;
		}
		for (k = 0; k < ELEMENTSOF(value_opts); k++) {
			size_t n = strlen(value_opts[k].name);

			if (strncmp(arg, value_opts[k].name, n) != 0)
				continue;
			if (arg[n] == '=') {
				value = arg + n + 1;
				break;
			}
			if (arg[n] == '\0') {
				if (i + 1 >= argc)
					return usage_error("missing value for", arg);
				value = argv[++i];
				break;
			}
		}
		if (k == ELEMENTSOF(value_opts))
			return usage_error("unknown option", arg);

		if (strcmp(value_opts[k].name, "--keep") == 0) {
			a->keep[a->n_keep++] = value;
		} else if (strcmp(value_opts[k].name, "--set") == 0) {
			a->set[a->n_set++] = value;
		} else {
			const char **field =
				(const char **)((char *)&a->opts + value_opts[k].field);

			if (*field)
				return usage_error("option given twice:", value_opts[k].name);
			*field = value;
		}
	}

	if (a->nul && !a->print)
		return usage_error("-0 needs", "--print");
	if (i < argc)
		a->cmd = argv + i;
	else if (!a->print) {
		log_error("missing command (see pi-env --help)");
		return EXIT_USAGE;
	}
	a->opts.keep = a->keep;
	a->opts.set = a->set;
	return -1;
}

/* Turn the builder's "this one is bad" pointer into a message naming the option. */
static int report_bad(const struct args *a, const char *bad)
{
	static const struct {
		const char *option;
		size_t field;
		enum envb_field kind;
	} fields[] = {
		{"--path", offsetof(struct envb_opts, path), ENVB_FIELD_PATH},
		{"--agent-user", offsetof(struct envb_opts, user), ENVB_FIELD_USER},
		{"--home", offsetof(struct envb_opts, home), ENVB_FIELD_DIR},
		{"--tmpdir", offsetof(struct envb_opts, tmpdir), ENVB_FIELD_DIR},
		{"--shell", offsetof(struct envb_opts, shell), ENVB_FIELD_DIR},
		{"--proxy", offsetof(struct envb_opts, proxy), ENVB_FIELD_PROXY},
		{"--no-proxy", offsetof(struct envb_opts, no_proxy), ENVB_FIELD_NO_PROXY},
	};
	char q[200 + ESCAPE_QUOTE_EXTRA];
	const char *why;

	/* Names quoted by escape_c_quote: escaped once and, past 200 bytes, cut with a mark
	 * outside the quotes, never silently (a cut name would read as another). */
	for (size_t i = 0; i < a->n_set; i++) {
		if (a->set[i] != bad)
			continue;
		why = envb_set_refusal(bad);
		/* Quote the name only: the value may be a megabyte or hold anything. */
		log_error("refused --set %-s: %s",
			  escape_c_quote(bad, strcspn(bad, "="), 200, q, sizeof(q)),
			  why ? why : "name set twice");
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < a->n_keep; i++) {
		if (a->keep[i] != bad)
			continue;
		why = envb_keep_refusal(bad);
		log_error("refused --keep %-s: %s",
			  escape_c_quote(bad, strlen(bad), 200, q, sizeof(q)),
			  why ? why : "invalid");
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
		const char *v = *(const char *const *)((const char *)&a->opts + fields[i].field);

		if (!v || v != bad)
			continue;
		why = envb_field_refusal(fields[i].kind, v);
		if (fields[i].kind == ENVB_FIELD_NO_PROXY && !a->opts.proxy)
			why = "needs --proxy";
		log_error("refused %s: %s", fields[i].option, why ? why : "invalid");
		return EXIT_USAGE;
	}
	log_error("refused an option value");
	return EXIT_USAGE;
}

static int print_env(char **envp, char sep)
{
	char buf[8192];
	size_t used = 0;
	int r;

	for (char **e = envp; *e; e++) {
		size_t len = strlen(*e);

		if (used + len + 1 > sizeof(buf)) {
			r = loop_write(STDOUT_FILENO, buf, used);
			if (r < 0)
				return r;
			used = 0;
		}
		if (len + 1 > sizeof(buf)) {
			r = loop_write(STDOUT_FILENO, *e, len);
			if (r >= 0)
				r = loop_write(STDOUT_FILENO, &sep, 1);
			if (r < 0)
				return r;
			continue;
		}
		memcpy(buf + used, *e, len);
		used += len;
		buf[used++] = sep;
	}
	return loop_write(STDOUT_FILENO, buf, used);
}

/* execvp(3) semantics over the NEW PATH, never the inherited one; no /bin/sh fallback on
 * ENOEXEC (a script without #! is not run behind the caller's back). Returns an errno. */
static int exec_search(char **cmd, char **envp, const char *path)
{
	char full[PATH_MAX];
	size_t clen = strlen(cmd[0]);
	bool eacces = false;

	if (clen == 0)
		return ENOENT;
	if (strchr(cmd[0], '/')) {
		execve(cmd[0], cmd, envp);
		return errno;
	}
	for (const char *p = path; *p;) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p);

		if (dlen + 1 + clen < sizeof(full)) {
			memcpy(full, p, dlen);
			full[dlen] = '/';
			memcpy(full + dlen + 1, cmd[0], clen + 1);
			execve(full, cmd, envp);
			switch (errno) {
			case EACCES:
				eacces = true;
				break;
			case ENOENT:
			case ENOTDIR:
			case ESTALE:
			case ENODEV:
			case ETIMEDOUT:
			case ENAMETOOLONG:
			case ELOOP:
				break;
			default:
				return errno;
			}
		}
		p = *end ? end + 1 : end;
	}
	return eacces ? EACCES : ENOENT;
}

int main(int argc, char **argv)
{
	struct args a = {0};
	char **envp = NULL;
	const char *bad = NULL;
	int r;

	log_set_program("pi-env");
	if (argc < 1)
		return EXIT_USAGE;
	r = parse_args(argc, argv, &a);
	if (r >= 0)
		return r;

	r = envb_build(&a.opts, environ, &envp, &bad);
	if (r == -EINVAL)
		return report_bad(&a, bad);
	if (r == -E2BIG) {
		log_error("the environment asked for is over %u bytes or %u entries",
			  ENVB_MAX_BYTES_DEFAULT, ENVB_MAX_ENTRIES);
		return EXIT_USAGE;
	}
	if (r < 0) {
		log_error_errno(r, "Failed to build the environment: %m");
		return EXIT_SYSTEM;
	}

	if (a.print) {
		r = print_env(envp, a.nul ? '\0' : '\n');
		if (r < 0) {
			log_error_errno(r, "Failed to write the environment: %m");
			return EXIT_SYSTEM;
		}
		return 0;
	}

	/* std fds first, so nothing the command opens lands on 0-2; then nothing above 2
	 * survives into the command (runc CVE-2024-21626). */
	r = fd_ensure_std();
	if (r >= 0)
		r = close_all_fds_from(3);
	if (r < 0) {
		log_error_errno(r, "Failed to prepare file descriptors: %m");
		return EXIT_SYSTEM;
	}

	r = exec_search(a.cmd, envp, a.opts.path ? a.opts.path : ENVB_DEFAULT_PATH);
	if (r == ENOENT) {
		if (strchr(a.cmd[0], '/') || !a.cmd[0][0])
			log_error("cannot execute '%s': no such file", a.cmd[0]);
		else
			log_error("'%s' not found in PATH %s", a.cmd[0],
				  a.opts.path ? a.opts.path : ENVB_DEFAULT_PATH);
		return EXIT_NOT_FOUND;
	}
	log_error_errno(r, "cannot execute '%s': %m", a.cmd[0]);
	return EXIT_CANNOT_EXEC;
}
