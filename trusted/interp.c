/* trusted: the #! line of a trusted script — how the kernel splits it, which interpreters
 * pistis knows, and which of their options may stand there (docs/trusted.md, "The
 * interpreter"). Pure: no I/O, unit-tested and fuzzed with render.c. */
#include "trusted/trusted.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/escape.h"
#include "lib/macro.h"

/* [p, end) as the kernel reads a #! line after "#!": blanks, a word (into word), blanks,
 * and the rest with trailing blanks trimmed as one argument (into rest: never split). 1, or
 * -EINVAL with no word. The caller bounds end - p below TRUSTED_SHEBANG_MAX. */
static int word_and_rest(const char *p, const char *end, char word[TRUSTED_SHEBANG_MAX],
			 char rest[TRUSTED_SHEBANG_MAX])
{
	const char *a;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	for (a = p; a < end && *a != ' ' && *a != '\t'; a++)
		;
	if (a == p)
		return -EINVAL;
	memcpy(word, p, (size_t)(a - p));
	word[a - p] = '\0';
	while (a < end && (*a == ' ' || *a == '\t'))
		a++;
	while (end > a && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	memcpy(rest, a, (size_t)(end - a));
	rest[end - a] = '\0';
	return 1;
}

int trusted_shebang_parse(const char *text, size_t len, char interp[TRUSTED_SHEBANG_MAX],
			  char arg[TRUSTED_SHEBANG_MAX])
{
	const char *nl, *end;

	interp[0] = arg[0] = '\0';
	if (len < 2 || memcmp(text, "#!", 2))
		return 0;
	/* The kernel reads at most TRUSTED_SHEBANG_MAX bytes; a longer line is not what runs. */
	nl = memchr(text, '\n', len < TRUSTED_SHEBANG_MAX ? len : TRUSTED_SHEBANG_MAX);
	end = nl ? nl : text + len;
	if (!nl && len >= TRUSTED_SHEBANG_MAX)
		return -EINVAL;
	if (memchr(text, '\0', (size_t)(end - text)))
		return -EINVAL;
	return word_and_rest(text + 2, end, interp, arg);
}

bool trusted_interp_is_pistisd(const char *interp)
{
	const char *base = path_tail(interp);

	return !strcmp(base, "pistisd") || !strcmp(base, "pistisd-musl");
}

/* How the interpreters pistis knows read their command line. The kernel runs
 * `INTERP [ARG] SCRIPT ARGS…`, ARGS being whatever the caller of sudo chose: safe only when
 * INTERP takes SCRIPT as its program and hands ARGS to it. Each family lists the option
 * words that leave it so (flags that take no value, read no code from elsewhere and print
 * nothing the script holds: interp_option_why). */
enum interp_family {
	IF_NONE,
	IF_SHELL,
	IF_PYTHON,
	IF_PERL,
	IF_RUBY,
	IF_NODE,
	IF_PHP,
	IF_LUA,
	IF_TCL,
	/* Programs that take the caller's words as their own options and input files however
	 * they are started: GNU getopt finds `-e CMD` after SCRIPT (sed, make), or SCRIPT is
	 * their program text and ARGS what they read (awk, jq). */
	IF_OWN_ARGS
};

static enum interp_family interp_family_of(const char *interp)
{
	static const struct {
		const char *name;
		enum interp_family f;
	} names[] = {
		{"sh", IF_SHELL},	 {"dash", IF_SHELL},	{"bash", IF_SHELL},
		{"ash", IF_SHELL},	 {"zsh", IF_SHELL},	{"ksh", IF_SHELL},
		{"mksh", IF_SHELL},	 {"pdksh", IF_SHELL},	{"yash", IF_SHELL},
		{"posh", IF_SHELL},	 {"lksh", IF_SHELL},	{"python", IF_PYTHON},
		{"pypy", IF_PYTHON},	 {"perl", IF_PERL},	{"ruby", IF_RUBY},
		{"node", IF_NODE},	 {"nodejs", IF_NODE},	{"php", IF_PHP},
		{"lua", IF_LUA},	 {"luajit", IF_LUA},	{"tclsh", IF_TCL},
		{"sed", IF_OWN_ARGS},	 {"gsed", IF_OWN_ARGS}, {"awk", IF_OWN_ARGS},
		{"gawk", IF_OWN_ARGS},	 {"mawk", IF_OWN_ARGS}, {"nawk", IF_OWN_ARGS},
		{"jq", IF_OWN_ARGS},	 {"make", IF_OWN_ARGS}, {"gmake", IF_OWN_ARGS},
		{"expect", IF_OWN_ARGS},
	};
	const char *base = path_tail(interp);
	size_t len;

	/* python3.11, perl5.36.0, lua5.4, ksh93, tclsh8.6: the name without its version */
	for (len = strlen(base);
	     len > 0 && (isdigit((unsigned char)base[len - 1]) || base[len - 1] == '.'); len--)
		;
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (strlen(names[i].name) == len && !strncmp(base, names[i].name, len))
			return names[i].f;
	return IF_NONE;
}

static bool word_in(const char *w, size_t n, const char *const *list)
{
	for (; *list; list++)
		if (strlen(*list) == n && !strncmp(w, *list, n))
			return true;
	return false;
}

/* Why an option word is refused, after "option 'WORD' to INTERP ". Each family below is an
 * allow-list: a word it does not take is refused, with the reason of its class when the
 * word is a known member of one (what it does), with WHY_NOT_PLAIN otherwise. The script's
 * stdout and stderr are the agent's: an option that prints what the script holds or reads,
 * loads code the #! line does not pin, or opens a debugger hands the agent the secrets the
 * script exists to keep from it. */
static const char WHY_NOT_PLAIN[] =
	"may take the script as its value, read code or input the caller chooses (its stdin, "
	"its arguments) or print what the script holds: only the plain flags docs/trusted.md "
	"lists for it are allowed on the #! line";
static const char WHY_TRACE[] = "traces every command, its values expanded, to the caller's "
				"stderr: a secret the script holds in a variable is printed to "
				"the agent";
static const char WHY_SH_VERBOSE[] =
	"prints every line the shell reads to the caller's stderr, those of a file the script "
	"sources too: a secrets file it reads with '.' is printed to the agent";
static const char WHY_NET_DEBUGGER[] =
	"starts a debugger on the network that every agent shares: any agent that reaches it "
	"runs code in the script, as pi-tools, and reads its secrets";
static const char WHY_STDIN_DEBUGGER[] =
	"runs the script under a debugger that reads its commands from the caller's stdin when "
	"that is no terminal (perl5db.pl; -d:NAME a Devel:: module): the agent prints any "
	"variable, a secret too";
static const char WHY_WARNINGS[] =
	"turns on warnings, which print the values they are about to the caller's stderr "
	"(perl: 'Argument \"<the value>\" isn't numeric'): a secret the script handles "
	"reaches the agent";
static const char WHY_DEBUG_OUTPUT[] =
	"prints the interpreter's debugging output (a trace of what it parses or runs, every "
	"exception raised with its message) to the caller's stderr: the script's values and "
	"the sources it reads reach the agent";
static const char WHY_IMPORT_TRACE[] =
	"prints every module the script imports and the file it came from to the caller's "
	"stderr: what the script reads, and from where, reaches the agent";
static const char WHY_LOADS_CODE[] =
	"loads code the #! line does not pin (a module, library or file found through a search "
	"path, the caller's working directory or the option's value) and runs it as pi-tools";
static const char WHY_DIAGNOSTICS[] =
	"prints or writes what the script holds or does (a report with its environment, a "
	"heap snapshot, profile, trace, core dump or TLS keys) to the caller's stderr or to a "
	"file (in the caller's working directory by default)";

/* w (n bytes) is a prefix of p bytes, then one digit or more and nothing else */
static bool value_digits(const char *w, size_t n, size_t p)
{
	if (n <= p)
		return false;
	for (size_t i = p; i < n; i++)
		if (!isdigit((unsigned char)w[i]))
			return false;
	return true;
}

/* Does the option name of w (after "--", up to '=' or the end) equal name, or start with it
 * when prefix? Node reads '_' as '-' in an option's name (--inspect_brk is --inspect-brk),
 * V8's flags too. */
static bool node_name(const char *w, size_t n, const char *name, bool prefix)
{
	size_t i = 2, k = 0;

	for (; i < n && w[i] != '=' && name[k]; i++, k++)
		if (w[i] != name[k] && !(w[i] == '_' && name[k] == '-'))
			return false;
	return !name[k] && (prefix || i == n || w[i] == '=');
}

static const char *shell_option_why(const char *w, size_t n)
{
	static const char *const longs[] = {"--",      "--posix",      "--norc",      "--noprofile",
					    "--login", "--restricted", "--noediting", NULL};

	if (w[0] == '-' && w[1] == '-') {
		if (n == 9 && !strncmp(w, "--verbose", 9))
			return WHY_SH_VERBOSE;
		if (n == 10 && !strncmp(w, "--debugger", 10)) /* bash: bashdb's profile first */
			return WHY_LOADS_CODE;
		return word_in(w, n, longs) ? NULL : WHY_NOT_PLAIN;
	}
	if (n == 1)
		return w[0] == '-' ? NULL : WHY_NOT_PLAIN; /* `sh - SCRIPT`: the end of options */
	if (memchr(w, 'x', n))
		return WHY_TRACE;
	/* -v prints every line the shell reads, not only the script's: those of a file it
	 * sources too, `. /data/.secrets/env` and its TOKEN=… (red team, reproduced with
	 * dash and bash). */
	if (memchr(w, 'v', n))
		return WHY_SH_VERBOSE;
	/* not -c (SCRIPT would be the command), -s (commands from the caller's stdin), -o/-O
	 * (SCRIPT taken as an option name), -i */
	for (size_t i = 1; i < n; i++)
		if (!strchr("aefhklmnpuBCEHPT", w[i]))
			return WHY_NOT_PLAIN;
	return NULL;
}

/* -X NAME[=VALUE], attached (python3 -X…, 3.11's list) */
static const char *python_x_why(const char *v, size_t n)
{
	static const char *const ok[] = {
		"utf8", "utf8=0", "utf8=1", "frozen_modules=on", "frozen_modules=off", NULL};
	static const char *const warnings[] = {"dev", "tracemalloc", "warn_default_encoding", NULL};

	if (word_in(v, n, ok) ||
	    (n > 19 && !strncmp(v, "int_max_str_digits=", 19) && value_digits(v, n, 19)))
		return NULL;
	if (n >= 10 && !strncmp(v, "importtime", 10))
		return WHY_IMPORT_TRACE;
	/* `-X tracemalloc=25` and `-X dev` as well as the plain names */
	for (const char *const *p = warnings; *p; p++)
		if (n >= strlen(*p) && !strncmp(v, *p, strlen(*p)))
			return WHY_WARNINGS;
	/* bytecode read from (and sources compiled into) a directory the line names */
	if (n >= 14 && !strncmp(v, "pycache_prefix", 14))
		return WHY_LOADS_CODE;
	return WHY_NOT_PLAIN;
}

/* -W ACTION[:MESSAGE[:CATEGORY[:MODULE[:LINENO]]]], attached. Python takes an action by any
 * prefix ("i" is ignore); only ignore and error leave warnings as quiet as they are or
 * quieter, the others (default, always, module, once) print more of them. A CATEGORY with a
 * dot is imported (warnings._getcategory: __import__ of its module, from the search path
 * python has at that point: a module in the working directory was not found, one of the
 * standard library's with a side effect at import would be). */
static const char *python_w_why(const char *v, size_t n)
{
	size_t a = 0, field = 0;

	while (a < n && v[a] != ':')
		a++;
	if (!a || !((a <= 6 && !strncmp(v, "ignore", a)) || (a <= 5 && !strncmp(v, "error", a))))
		return WHY_WARNINGS;
	for (size_t i = a; i < n; i++) {
		if (v[i] == ':')
			field++;
		else if (field == 2 && v[i] == '.')
			return WHY_LOADS_CODE;
	}
	return NULL;
}

static const char *python_option_why(const char *w, size_t n)
{
	if (n == 2 && w[1] == '-')
		return NULL;
	if (w[1] == 'X' && n > 2)
		return python_x_why(w + 2, n - 2);
	if (w[1] == 'W' && n > 2)
		return python_w_why(w + 2, n - 2);
	/* not -c, -m (SCRIPT the command or module), -i (then the caller's stdin as a
	 * prompt), `-` (stdin) */
	for (size_t i = 1; i < n; i++) {
		if (w[i] == 'v') /* -v, -vv: each import, each file tried */
			return WHY_IMPORT_TRACE;
		if (w[i] == 'd') /* the parser's debug output (a debug build's) */
			return WHY_DEBUG_OUTPUT;
		if (!strchr("bBEIOPqRsSuVx", w[i]))
			return WHY_NOT_PLAIN;
	}
	return NULL;
}

static const char *perl_option_why(const char *w, size_t n)
{
	if (n == 2 && w[1] == '-')
		return NULL;
	if (w[1] == 'C') { /* -C, -CSDA: attached or none */
		for (size_t i = 2; i < n; i++)
			if (!isalnum((unsigned char)w[i]))
				return WHY_NOT_PLAIN;
		return NULL;
	}
	/* not -n, -p, -a, -i (the caller's arguments become input files), -s (they set the
	 * script's variables), -e, -E, -x, -S, `-`. Perl reads a letter group left to right,
	 * the first letter that takes a value taking the rest of the word: the first letter
	 * that is not plain decides. */
	for (size_t i = 1; i < n; i++) {
		switch (w[i]) {
		case 'w': /* 'Argument "s3cret" isn't numeric' (reproduced) */
		case 'W':
			return WHY_WARNINGS;
		case 'd': /* -d, -dt, -d:NAME */
			return WHY_STDIN_DEBUGGER;
		case 'D': /* -Dt traces each op, -Dx dumps the syntax tree (a DEBUGGING perl) */
			return WHY_DEBUG_OUTPUT;
		case 'M':
		case 'm':
		case 'I':
			return WHY_LOADS_CODE;
		default:
			if (!strchr("XTtUl", w[i]))
				return WHY_NOT_PLAIN;
		}
	}
	return NULL;
}

static const char *ruby_option_why(const char *w, size_t n)
{
	static const char *const longs[] = {"--", "--jit", "--yjit", "--disable-gems", NULL};
	static const char *const enable[] = {"--enable=frozen-string-literal",
					     "--enable=frozen_string_literal", "--enable=jit",
					     "--enable=yjit", NULL};

	if (w[0] == '-' && w[1] == '-') {
		if (word_in(w, n, longs) || word_in(w, n, enable))
			return NULL;
		if (n > 10 && !strncmp(w, "--disable=", 10)) { /* turns features off only */
			for (size_t i = 10; i < n; i++)
				if (!islower((unsigned char)w[i]) && !strchr("-_,", w[i]))
					return WHY_NOT_PLAIN;
			return NULL;
		}
		if ((n >= 7 && !strncmp(w, "--debug", 7)) ||
		    (n >= 9 && !strncmp(w, "--yydebug", 9)) || (n >= 6 && !strncmp(w, "--dump", 6)))
			return WHY_DEBUG_OUTPUT;
		if (n == 9 && !strncmp(w, "--verbose", 9))
			return WHY_WARNINGS;
		return WHY_NOT_PLAIN;
	}
	/* -W0 (no warnings) and -W1 (the default level); -W, -W2, -w and -v (the version, then
	 * verbose mode) turn every warning on */
	if (n == 3 && w[1] == 'W' && (w[2] == '0' || w[2] == '1'))
		return NULL;
	if (n > 2 && w[1] == 'W' && w[2] == ':') { /* -W:no-deprecated off, -W:deprecated on */
		if (n <= 6 || strncmp(w + 3, "no-", 3))
			return WHY_WARNINGS;
		for (size_t i = 6; i < n; i++)
			if (!islower((unsigned char)w[i]))
				return WHY_NOT_PLAIN;
		return NULL;
	}
	for (size_t i = 1; i < n; i++) {
		switch (w[i]) {
		case 'w':
		case 'W':
		case 'v':
			return WHY_WARNINGS;
		case 'd': /* $DEBUG: every exception raised is printed, rescued ones too */
		case 'y': /* the parser's trace */
			return WHY_DEBUG_OUTPUT;
		case 'r':
		case 'I':
			return WHY_LOADS_CODE;
		default:
			if (w[i] != 'U')
				return WHY_NOT_PLAIN;
		}
	}
	return NULL;
}

/* Node takes only "--" words here: a bare --require, -r, -e, -p, -i… would take SCRIPT as
 * its value or read the caller's input. Which V8 and node options print or load what is
 * open-ended (hundreds of --trace-… flags alone): the few named here pass, nothing else. */
static const char *node_option_why(const char *w, size_t n)
{
	static const char *const plain[] = {"enable-source-maps",
					    "use-strict",
					    "pending-deprecation",
					    "throw-deprecation",
					    "preserve-symlinks",
					    "preserve-symlinks-main",
					    "expose-gc",
					    "no-warnings",
					    "no-deprecation",
					    "no-addons",
					    "no-global-search-paths",
					    NULL};
	static const char *const sizes[] = {"max-old-space-size", "max-semi-space-size",
					    "stack-size", "max-http-header-size", NULL};
	static const char *const rejections[] = {
		"strict", "warn", "none", "throw", "warn-with-error-code", NULL};
	static const char *const loads[] = {"require",
					    "import",
					    "loader",
					    "experimental-loader",
					    "env-file",
					    "snapshot-blob",
					    "openssl-config",
					    "icu-data-dir",
					    "experimental-policy",
					    NULL};
	static const char *const diagnostics[] = {"report",
						  "cpu-prof",
						  "heap-prof",
						  "heapsnapshot",
						  "prof",
						  "diagnostic-dir",
						  "redirect-warnings",
						  "trace",
						  "tls-keylog",
						  "perf-",
						  "log",
						  "abort-on-uncaught-exception",
						  NULL};
	const char *eq = memchr(w, '=', n);

	if (w[0] != '-' || w[1] != '-')
		return WHY_NOT_PLAIN;
	if (n == 2)
		return NULL;
	for (const char *const *p = plain; *p; p++)
		if (!eq && node_name(w, n, *p, false))
			return NULL;
	for (const char *const *p = sizes; *p; p++)
		if (eq && node_name(w, n, *p, false) && value_digits(w, n, (size_t)(eq + 1 - w)))
			return NULL;
	if (eq && node_name(w, n, "unhandled-rejections", false)) {
		return word_in(eq + 1, n - (size_t)(eq + 1 - w), rejections) ? NULL : WHY_NOT_PLAIN;
	}
	/* the inspector (--inspect=, --inspect-brk=, --inspect-wait=, --inspect-port=, and
	 * --debug… its old spelling) listens on TCP in the sandbox's network namespace,
	 * which every agent shares (red team: `--inspect=127.0.0.1:9229` passed as
	 * "--NAME=VALUE", and another process's `node inspect` read a file through it) */
	if (node_name(w, n, "inspect", true) || node_name(w, n, "debug", true))
		return WHY_NET_DEBUGGER;
	/* --require=./x.js ran the caller's working directory's x.js first (reproduced) */
	for (const char *const *p = loads; *p; p++)
		if (node_name(w, n, *p, true))
			return WHY_LOADS_CODE;
	/* --report-uncaught-exception wrote report.*.json, 0644, the environment in it, to the
	 * working directory (reproduced) */
	for (const char *const *p = diagnostics; *p; p++)
		if (node_name(w, n, *p, true))
			return WHY_DIAGNOSTICS;
	return WHY_NOT_PLAIN;
}

/* -dNAME=VALUE, attached; only settings that make it quieter or bound it */
static const char *php_d_why(const char *v, size_t n)
{
	static const char *const quiet[] = {"display_errors=0",
					    "display_errors=off",
					    "display_errors=Off",
					    "display_startup_errors=0",
					    "error_reporting=0",
					    "log_errors=0",
					    NULL};
	static const char *const loads[] = {"auto_prepend_file", "auto_append_file", "include_path",
					    "extension",	 "zend_extension",   "opcache.",
					    "user_ini.",	 "sendmail_path",    NULL};
	static const char *const errors[] = {"display_",    "error_",  "log_errors",
					     "html_errors", "docref_", NULL};

	if (word_in(v, n, quiet))
		return NULL;
	if ((n > 13 && !strncmp(v, "memory_limit=", 13) &&
	     (value_digits(v, n - (strchr("KMG", v[n - 1]) ? 1 : 0), 13) ||
	      (n == 15 && !strncmp(v + 13, "-1", 2)))) ||
	    (n > 19 && !strncmp(v, "max_execution_time=", 19) && value_digits(v, n, 19)))
		return NULL;
	/* Xdebug (-dxdebug.mode=debug) dials its client on the network every agent shares */
	if (n >= 6 && !strncmp(v, "xdebug", 6))
		return WHY_NET_DEBUGGER;
	for (const char *const *p = loads; *p; p++)
		if (n >= strlen(*p) && !strncmp(v, *p, strlen(*p)))
			return WHY_LOADS_CODE;
	/* display_errors=1 (or stderr), error_reporting=E_ALL, error_log=FILE: PHP 8's
	 * warnings name values ('Undefined array key "…"') */
	for (const char *const *p = errors; *p; p++)
		if (n >= strlen(*p) && !strncmp(v, *p, strlen(*p)))
			return WHY_WARNINGS;
	return WHY_NOT_PLAIN;
}

static const char *php_option_why(const char *w, size_t n)
{
	if (w[1] == 'd' && n > 2)
		return php_d_why(w + 2, n - 2);
	for (size_t i = 1; i < n; i++) {
		if (w[i] == 'z' || w[i] == 'c') /* a Zend extension, a php.ini */
			return WHY_LOADS_CODE;
		if (!strchr("nqCH", w[i]))
			return WHY_NOT_PLAIN;
	}
	return NULL;
}

static const char *lua_option_why(const char *w, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		if (w[i] == 'l') /* require()s a library first */
			return WHY_LOADS_CODE;
		/* 5.4's warnings: an error in a __gc metamethod printed with its message */
		if (w[i] == 'W')
			return WHY_WARNINGS;
		if (w[i] != 'E')
			return WHY_NOT_PLAIN;
	}
	return NULL;
}

/* Why family f refuses option word w (n bytes, starting with '-' or '+'): NULL when it is a
 * flag that leaves SCRIPT its program and ARGS its arguments, and shows the agent nothing
 * the script holds. */
static const char *interp_option_why(enum interp_family f, const char *w, size_t n)
{
	if (f == IF_SHELL) /* `+e` too, and a lone `-` */
		return shell_option_why(w, n);
	if (w[0] != '-' || n < 2)
		return WHY_NOT_PLAIN;
	switch (f) {
	case IF_PYTHON:
		return python_option_why(w, n);
	case IF_PERL:
		return perl_option_why(w, n);
	case IF_RUBY:
		return ruby_option_why(w, n);
	case IF_NODE:
		return node_option_why(w, n);
	case IF_PHP:
		return php_option_why(w, n);
	case IF_LUA:
		return lua_option_why(w, n);
	case IF_SHELL:
	case IF_TCL:
	case IF_NONE:
	case IF_OWN_ARGS:
	default:
		return WHY_NOT_PLAIN;
	}
}

int trusted_interp_arg_check(const char *interp, const char *arg, char *why, size_t why_size)
{
	enum interp_family f = interp_family_of(interp);
	const char *base = path_tail(interp), *p = arg;

	bool own_args = f == IF_OWN_ARGS;

	if (own_args) /* an option is refused as for any other (below) */
		f = IF_NONE;
	while (*p) {
		const char *reason;
		size_t n;

		p += strspn(p, " \t");
		n = strcspn(p, " \t");
		if (!n)
			break;
		if (p[0] != '-' && p[0] != '+') {
			if (f != IF_NONE) {
				escape_format(why, why_size,
					      "'%.*s' is not an option: %s runs it as its program, "
					      "with this script as its first argument",
					      (int)n, p, base);
				return 1;
			}
		} else if (f == IF_NONE) {
			escape_format(why, why_size,
				      "the script follows the option '%.*s', and %s is no "
				      "interpreter pistis knows to hand the caller's arguments to "
				      "the script (sh, bash, python, perl, ruby, node, php, lua, "
				      "tclsh): it would read them as its own options and input "
				      "files (sed -f, awk -f, jq -f, make -f, expect -f run code "
				      "and read files a caller names); wrap it in a /bin/sh script",
				      (int)n, p, base);
			return 1;
		} else if ((reason = interp_option_why(f, p, n))) {
			escape_format(why, why_size, "option '%.*s' to %s %-s", (int)n, p, base,
				      reason);
			return 1;
		}
		p += n;
	}
	/* With no option too: `#!/bin/sed` ran `sed /data/trusted/NAME -e '1e id'` for the
	 * caller's `NAME -e '1e id'` (GNU getopt takes options after SCRIPT): id as pi-tools
	 * (red team, redteam-trusted.sh 14). */
	if (own_args) {
		escape_format(why, why_size,
			      "%s reads the caller's arguments as its own options and input files "
			      "without any option here too (sed -e, make --eval, awk's and jq's "
			      "operands run code and read files a caller names); wrap it in a "
			      "/bin/sh script",
			      base);
		return 1;
	}
	return 0;
}

int trusted_interp_split(const char *arg, char inner[TRUSTED_SHEBANG_MAX],
			 char inner_arg[TRUSTED_SHEBANG_MAX])
{
	const size_t cmd_len = sizeof(TRUSTED_INTERP_CMD) - 1;
	size_t len = strlen(arg);

	inner[0] = inner_arg[0] = '\0';
	if (len >= TRUSTED_SHEBANG_MAX || strncmp(arg, TRUSTED_INTERP_CMD, cmd_len) ||
	    (arg[cmd_len] && arg[cmd_len] != ' ' && arg[cmd_len] != '\t'))
		return 0;
	/* the rest of the #! argument, split as the kernel splits the line itself */
	return word_and_rest(arg + cmd_len, arg + len, inner, inner_arg);
}
