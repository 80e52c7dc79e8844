/* The environment builder: every allowlist rule, every dangerous name, duplicates, limits,
 * --set/--keep validation. */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/env-build.h"
#include "lib/macro.h"
#include "lib/tap.h"

static const char *get(char **env, const char *name)
{
	size_t n = strlen(name);

	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

static size_t count(char **env)
{
	size_t n = 0;

	while (env[n])
		n++;
	return n;
}

static size_t total_bytes(char **env)
{
	size_t n = 0;

	for (; *env; env++)
		n += strlen(*env) + 1;
	return n;
}

/* A string of n copies of c (callers free). */
static char *repeat(const char *prefix, char c, size_t n)
{
	size_t p = strlen(prefix);
	char *s = malloc(p + n + 1);

	if (!s)
		abort();
	memcpy(s, prefix, p);
	memset(s + p, c, n);
	s[p + n] = '\0';
	return s;
}

/* Build from a single inherited entry with default opts; return the value of name. */
static char *one(const char *entry, const char *name)
{
	struct envb_opts o = {0};
	char *inh[] = {(char *)entry, NULL};
	char **env = NULL;
	const char *v;
	char *copy;

	if (envb_build(&o, inh, &env, NULL) < 0)
		abort();
	v = get(env, name);
	copy = v ? strdup(v) : NULL;
	envb_free(env);
	return copy;
}

TEST(empty_inherited_gives_only_path)
{
	struct envb_opts o = {0};
	char *inh[] = {NULL};
	char **env = NULL;

	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	ASSERT_EQ(count(env), 1u);
	ASSERT_STREQ(env[0], "PATH=" ENVB_DEFAULT_PATH);
	envb_free(env);

	ASSERT_EQ(envb_build(&o, NULL, &env, NULL), 0);
	ASSERT_EQ(count(env), 1u);
	envb_free(env);
}

/* A pty command's TERM: the caller's valid one, else --set's, else the default; a dropped
 * (invalid) inherited TERM gets the default too; without .term nothing is added. */
TEST(default_term_only_where_none_is_valid)
{
	struct envb_opts o = {.term = ENVB_PTY_TERM};
	char *none[] = {(char *)"LANG=C", NULL};
	char *own[] = {(char *)"TERM=screen-256color", NULL};
	char *bad[] = {(char *)"TERM=../../tmp/x", (char *)"TERM=vt100", NULL};
	const char *set[] = {"TERM=dumb", NULL};
	char **env = NULL;
	const char *why = NULL;

	ASSERT_EQ(envb_build(&o, none, &env, NULL), 0);
	ASSERT_STREQ(get(env, "TERM"), "xterm");
	ASSERT_EQ(total_bytes(env), strlen("PATH=" ENVB_DEFAULT_PATH) + 1 + 7 + 11);
	envb_free(env);
	ASSERT_EQ(envb_build(&o, own, &env, NULL), 0);
	ASSERT_STREQ(get(env, "TERM"), "screen-256color");
	envb_free(env);
	ASSERT_EQ(envb_build(&o, bad, &env, NULL), 0);
	ASSERT_STREQ(get(env, "TERM"), "xterm");
	ASSERT_EQ(count(env), 2u);
	envb_free(env);
	o.set = set;
	ASSERT_EQ(envb_build(&o, own, &env, NULL), 0);
	ASSERT_STREQ(get(env, "TERM"), "dumb");
	envb_free(env);

	struct envb_opts plain = {0};

	ASSERT_EQ(envb_build(&plain, none, &env, NULL), 0);
	ASSERT_TRUE(get(env, "TERM") == NULL);
	envb_free(env);

	struct envb_opts slash = {.term = "../x"};

	ASSERT_EQ(envb_build(&slash, none, &env, &why), -EINVAL);
	ASSERT_STREQ(why, "../x");
}

/* Every allowlisted name passes with a valid value. */
TEST(allowlist_passes)
{
	static const char *const entries[] = {
		"LANG=en_US.UTF-8",
		"LANGUAGE=de_DE:en",
		"LC_ALL=C.UTF-8",
		"LC_CTYPE=C",
		"LC_COLLATE=POSIX",
		"LC_MESSAGES=fr_FR.UTF-8",
		"LC_MONETARY=en_GB",
		"LC_NUMERIC=de_DE",
		"LC_TIME=sr_RS@latin",
		"LC_ADDRESS=C",
		"LC_IDENTIFICATION=C",
		"LC_MEASUREMENT=C",
		"LC_NAME=C",
		"LC_PAPER=en_US",
		"LC_TELEPHONE=C",
		"TERM=xterm-256color",
		"COLORTERM=truecolor",
		"COLUMNS=80",
		"LINES=24",
		"NO_COLOR=1",
		"FORCE_COLOR=3",
		"CLICOLOR=1",
		"PI_AGENT_ID=abc",
		"PI_X=with space, UTF-8 \xc3\xa9",
	};
	char *inh[ELEMENTSOF(entries) + 1];
	struct envb_opts o = {0};
	char **env = NULL;

	for (size_t i = 0; i < ELEMENTSOF(entries); i++)
		inh[i] = (char *)entries[i];
	inh[ELEMENTSOF(entries)] = NULL;
	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	ASSERT_EQ(count(env), ELEMENTSOF(entries) + 1);
	for (size_t i = 0; i < ELEMENTSOF(entries); i++)
		EXPECT_STREQ(env[i + 1], entries[i]); /* inherited order, after PATH */
	envb_free(env);
}

/* Nothing else is ever copied, whatever its name. */
TEST(dangerous_and_unknown_names_dropped)
{
	static const char *const entries[] = {
		"LD_PRELOAD=/tmp/evil.so",
		"LD_LIBRARY_PATH=/tmp",
		"LD_AUDIT=/tmp/a.so",
		"GCONV_PATH=/tmp",
		"GLIBC_TUNABLES=glibc.malloc.check=3",
		"BASH_ENV=/tmp/x",
		"ENV=/tmp/x",
		"SHELLOPTS=xtrace",
		"PS4=$(id)",
		"BASH_FUNC_ls%%=() { id; }",
		"PYTHONPATH=/tmp",
		"PYTHONSTARTUP=/tmp/x",
		"NODE_OPTIONS=--require /tmp/x",
		"PERL5OPT=-d",
		"PERL5LIB=/tmp",
		"RUBYOPT=-r/tmp/x",
		"GIT_SSH_COMMAND=id",
		"GIT_DIR=/tmp",
		"TZ=/etc/shadow",
		"TZ=UTC",
		"AWS_SECRET_ACCESS_KEY=x",
		"GITHUB_TOKEN=x",
		"SSH_AUTH_SOCK=/tmp/s",
		"PATH=/tmp/evil",
		"HOME=/root",
		"USER=root",
		"LOGNAME=root",
		"SHELL=/tmp/sh",
		"TMPDIR=/tmp/evil",
		"HTTP_PROXY=http://evil",
		"https_proxy=http://evil",
		"NO_PROXY=*",
		"LC_FOO=C",
		"LC_=C",
		"lang=C",
		"term=xterm",
		"PI_lower=x",
		"PI_=x",
		"PI-X=x",
		"PI_API_KEY=x",
		"PI_RELAY_TOKEN=x",
		"PI_DB_PASSWORD=x",
		"PI_SECRET=x",
		"PIX=x",
		"=x",
		"NOEQUALS",
		"IFS= ",
		"CDPATH=/tmp",
		"MALLOC_CHECK_=3",
	};
	char *inh[ELEMENTSOF(entries) + 2];
	struct envb_opts o = {0};
	char **env = NULL;
	char long_pi[80];

	/* PI_ + 65 characters: one over the limit. */
	snprintf(long_pi, sizeof(long_pi), "PI_%065d=x", 0);
	for (size_t i = 0; i < ELEMENTSOF(entries); i++)
		inh[i] = (char *)entries[i];
	inh[ELEMENTSOF(entries)] = long_pi;
	inh[ELEMENTSOF(entries) + 1] = NULL;
	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	ASSERT_EQ(count(env), 1u);
	ASSERT_STREQ(env[0], "PATH=" ENVB_DEFAULT_PATH);
	envb_free(env);

	/* PI_ plus exactly 64 is the longest name that passes. */
	char *max_pi = repeat("PI_", 'Z', 64);
	char *e = malloc(strlen(max_pi) + 3);
	sprintf(e, "%s=1", max_pi);
	char *v = one(e, max_pi);
	EXPECT_STREQ(v, "1");
	free(v);
	free(e);
	free(max_pi);
}

struct value_case {
	const char *entry;
	const char *name;
	bool kept;
};

TEST(value_rules)
{
	static const struct value_case cases[] = {
		{"LANG=../../tmp/x", "LANG", false},
		{"LANG=/usr/lib/locale/x", "LANG", false},
		{"LANG=en%n", "LANG", false},
		{"LANG=", "LANG", false},
		{"LANG=en US", "LANG", false},
		{"LANG=en_US.UTF-8@euro", "LANG", true},
		{"LANGUAGE=en_GB:en", "LANGUAGE", true},
		{"LC_ALL=C.UTF-8\n", "LC_ALL", false},
		{"LC_CTYPE=\xc3\xa9", "LC_CTYPE", false},
		{"TERM=xterm-256color", "TERM", true},
		{"TERM=screen.xterm+x", "TERM", true},
		{"TERM=../../tmp/ti", "TERM", false},
		{"TERM=", "TERM", false},
		{"TERM=a%s", "TERM", false},
		{"TERM=\x1b]0;x", "TERM", false},
		{"COLORTERM=24bit", "COLORTERM", true},
		{"COLUMNS=80", "COLUMNS", true},
		{"COLUMNS=99999", "COLUMNS", true},
		{"COLUMNS=100000", "COLUMNS", false},
		{"COLUMNS=0", "COLUMNS", false},
		{"COLUMNS=080", "COLUMNS", false},
		{"COLUMNS=8a", "COLUMNS", false},
		{"COLUMNS=-1", "COLUMNS", false},
		{"COLUMNS=", "COLUMNS", false},
		{"LINES= 24", "LINES", false},
		{"NO_COLOR=", "NO_COLOR", true},
		{"NO_COLOR=1", "NO_COLOR", true},
		{"FORCE_COLOR=%s%s", "FORCE_COLOR", false},
		{"FORCE_COLOR=/x", "FORCE_COLOR", false},
		{"CLICOLOR=12345678901234567", "CLICOLOR", false},
		{"PI_X=a\tb", "PI_X", true},
		{"PI_X=a\nb", "PI_X", false},
		{"PI_X=a\rb", "PI_X", false},
		{"PI_X=\x1b[31m", "PI_X", false},
		{"PI_X=\x7f", "PI_X", false},
		{"PI_X=\xff", "PI_X", false},
		{"PI_X=\xc0\xaf", "PI_X", false},	  /* overlong '/' */
		{"PI_X=\xe0\x80\xaf", "PI_X", false},	  /* overlong '/' */
		{"PI_X=\xed\xa0\x80", "PI_X", false},	  /* surrogate */
		{"PI_X=\xf4\x90\x80\x80", "PI_X", false}, /* above U+10FFFF */
		{"PI_X=\xc3", "PI_X", false},		  /* truncated */
		{"PI_X=\xf0\x9f\x98\x80", "PI_X", true},  /* U+1F600 */
		{"PI_X=a\xc2\x9b"
		 "2Jb",
		 "PI_X", false}, /* U+009B CSI */
		{"PI_X=a\xc2\x85"
		 "b",
		 "PI_X", false},				 /* U+0085 NEL */
		{"PI_X=\xc2\x80", "PI_X", false},		 /* U+0080 */
		{"PI_X=\xc2\x9f", "PI_X", false},		 /* U+009F */
		{"PI_X=\xc2\xa0\xc3\xa9", "PI_X", true},	 /* U+00A0, U+00E9 */
		{"PI_X=a\xe2\x80\xa8", "PI_X", false},		 /* U+2028 LINE SEPARATOR */
		{"PI_X=\xe2\x80\xa9", "PI_X", false},		 /* U+2029 PARAGRAPH SEPARATOR */
		{"PI_X=\xe2\x80\xaa", "PI_X", false},		 /* U+202A LRE */
		{"PI_X=\xe2\x80\xae", "PI_X", false},		 /* U+202E RLO */
		{"PI_X=\xe2\x81\xa6", "PI_X", false},		 /* U+2066 LRI */
		{"PI_X=\xe2\x81\xa9", "PI_X", false},		 /* U+2069 PDI */
		{"PI_X=\xe2\x80\x8e", "PI_X", false},		 /* U+200E LRM */
		{"PI_X=\xe2\x80\x8f", "PI_X", false},		 /* U+200F RLM */
		{"PI_X=\xd8\x9c", "PI_X", false},		 /* U+061C ALM */
		{"PI_X=\xe2\x80\xa7\xe2\x80\xaf", "PI_X", true}, /* U+2027, U+202F */
		{"PI_X=\xe2\x80\x8d\xe2\x81\xa5", "PI_X", true}, /* U+200D ZWJ, U+2065 */
		{"PI_X=\xd8\x9b\xd8\x9d", "PI_X", true},	 /* U+061B, U+061D */
		{"PI_X=/and%percent", "PI_X", true},
		{"PI_X=", "PI_X", true},
		{"PI_KEYBOARD=us", "PI_KEYBOARD", true},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char *v = one(cases[i].entry, cases[i].name);

		if ((v != NULL) != cases[i].kept) {
			tap_report(__FILE__, __LINE__, "case %zu (%s): expected %s", i,
				   cases[i].name, cases[i].kept ? "kept" : "dropped");
			_metadata->failed = true;
		} else if (v) {
			EXPECT_STREQ(v, strchr(cases[i].entry, '=') + 1);
		}
		free(v);
	}
}

TEST(value_length_limits)
{
	char *ok = repeat("PI_X=", 'a', ENVB_MAX_VALUE);
	char *over = repeat("PI_X=", 'a', ENVB_MAX_VALUE + 1);
	char *mib = repeat("PI_X=", 'a', 1024 * 1024);
	char *lang = repeat("LANG=", 'a', 129);
	char *v;

	v = one(ok, "PI_X");
	EXPECT_NOT_NULL(v);
	free(v);
	v = one(over, "PI_X");
	EXPECT_NULL(v);
	free(v);
	v = one(mib, "PI_X");
	EXPECT_NULL(v);
	free(v);
	v = one(lang, "LANG");
	EXPECT_NULL(v);
	free(v);
	free(ok);
	free(over);
	free(mib);
	free(lang);
}

TEST(duplicates_keep_the_first)
{
	struct envb_opts o = {0};
	char *inh[] = {"TERM=vt100", "PI_A=1", "TERM=xterm", "PI_A=2", "PI_A=3", NULL};
	char **env = NULL;

	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	EXPECT_STREQ(get(env, "TERM"), "vt100");
	EXPECT_STREQ(get(env, "PI_A"), "1");
	EXPECT_EQ(count(env), 3u);
	envb_free(env);
}

/* getenv() would have returned the first: an invalid first must not let a later one in. */
TEST(invalid_first_drops_the_name)
{
	struct envb_opts o = {0};
	char *inh[] = {"TERM=../evil", "TERM=xterm", "PI_B=a\nb", "PI_B=ok", NULL};
	char **env = NULL;

	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	EXPECT_NULL(get(env, "TERM"));
	EXPECT_NULL(get(env, "PI_B"));
	EXPECT_EQ(count(env), 1u);
	envb_free(env);
}

TEST(agent_fields)
{
	struct envb_opts o = {.user = "pi-agent-1a2b3c4d",
			      .home = "/data/sandbox-home/pi-agent-1a2b3c4d",
			      .tmpdir = "/data/sandbox-home/pi-agent-1a2b3c4d/.tmp",
			      .path = "/usr/bin:/bin"};
	char *inh[] = {"HOME=/root",   "USER=root", "SHELL=/bin/evil", "PATH=/tmp", "TMPDIR=/x",
		       "LOGNAME=root", NULL};
	char **env = NULL;

	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	ASSERT_EQ(count(env), 6u);
	EXPECT_STREQ(env[0], "PATH=/usr/bin:/bin");
	EXPECT_STREQ(get(env, "HOME"), o.home);
	EXPECT_STREQ(get(env, "TMPDIR"), o.tmpdir);
	EXPECT_STREQ(get(env, "USER"), o.user);
	EXPECT_STREQ(get(env, "LOGNAME"), o.user);
	EXPECT_STREQ(get(env, "SHELL"), "/bin/sh");
	envb_free(env);

	o.shell = "/bin/bash";
	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	EXPECT_STREQ(get(env, "SHELL"), "/bin/bash");
	envb_free(env);

	/* No user: no USER/LOGNAME/SHELL at all (never the inherited ones). */
	struct envb_opts bare = {0};
	ASSERT_EQ(envb_build(&bare, inh, &env, NULL), 0);
	EXPECT_NULL(get(env, "USER"));
	EXPECT_NULL(get(env, "SHELL"));
	EXPECT_NULL(get(env, "HOME"));
	envb_free(env);
}

TEST(proxy_only_when_asked)
{
	static const char *const names[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
					    "https_proxy"};
	struct envb_opts o = {.proxy = "http://127.0.0.1:3128"};
	char *inh[] = {"NO_PROXY=*", "ALL_PROXY=socks5://evil", NULL};
	char **env = NULL;
	const char *bad = NULL;

	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		EXPECT_STREQ(get(env, names[i]), o.proxy);
	EXPECT_STREQ(get(env, "NO_PROXY"), "localhost,127.0.0.1");
	EXPECT_STREQ(get(env, "no_proxy"), "localhost,127.0.0.1");
	EXPECT_NULL(get(env, "ALL_PROXY"));
	EXPECT_EQ(count(env), 7u);
	envb_free(env);

	o.no_proxy = "localhost,.internal";
	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	EXPECT_STREQ(get(env, "no_proxy"), "localhost,.internal");
	envb_free(env);

	struct envb_opts none = {.no_proxy = "x"};
	EXPECT_EQ(envb_build(&none, inh, &env, &bad), -EINVAL);
	EXPECT_TRUE(bad == none.no_proxy);

	static const char *const bad_proxies[] = {"127.0.0.1:3128", "http://a b", "://x",
						  "http://\n",	    "1http://x",  "http:/x"};
	for (size_t i = 0; i < ELEMENTSOF(bad_proxies); i++) {
		struct envb_opts p = {.proxy = bad_proxies[i]};

		bad = NULL;
		EXPECT_EQ(envb_build(&p, inh, &env, &bad), -EINVAL);
		EXPECT_TRUE(bad == p.proxy);
	}
}

TEST(field_validation)
{
	static const struct {
		struct envb_opts o;
		int field; /* 0 path 1 home 2 tmpdir 3 user 4 shell */
	} cases[] = {
		{{.path = "relative:/bin"}, 0},
		{{.path = "/bin::/usr/bin"}, 0},
		{{.path = "/bin:"}, 0},
		{{.path = ""}, 0},
		{{.path = "/bin\n"}, 0},
		{{.home = "home"}, 1},
		{{.home = ""}, 1},
		{{.tmpdir = "/t\x1b"}, 2},
		{{.user = "-rf"}, 3},
		{{.user = "a b"}, 3},
		{{.user = ""}, 3},
		{{.user = "a/b"}, 3},
		{{.user = "abcdefghijklmnopqrstuvwxyz0123456"}, 3},
		{{.shell = "sh"}, 4},
	};
	char **env = NULL;

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const struct envb_opts *o = &cases[i].o;
		const char *want[] = {o->path, o->home, o->tmpdir, o->user, o->shell};
		const char *bad = NULL;

		EXPECT_EQ(envb_build(o, NULL, &env, &bad), -EINVAL);
		if (bad != want[cases[i].field]) {
			tap_report(__FILE__, __LINE__, "case %zu: wrong ret_bad", i);
			_metadata->failed = true;
		}
	}
	EXPECT_NULL(envb_field_refusal(ENVB_FIELD_PATH, "/a:/b/c"));
	EXPECT_NULL(envb_field_refusal(ENVB_FIELD_USER, "pi-agent-1a2b3c4d"));
	EXPECT_NOT_NULL(envb_field_refusal(ENVB_FIELD_NO_PROXY, "a b"));
}

TEST(set_validation)
{
	static const struct {
		const char *entry;
		bool ok;
	} cases[] = {
		{"FOO=bar", true},
		{"FOO=", true},
		{"FOO=a=b", true},
		{"_X1=y", true},
		{"PI_TOKEN_FILE=/run/x", true}, /* an explicit value is the caller's choice */
		{"TZ=Europe/Paris", true},
		{"TZ=:Europe/Paris", true},
		{"TZ=UTC0", true},
		{"LANG=C.UTF-8", true},
		{"FOO", false},
		{"=x", false},
		{"1A=x", false},
		{"A B=x", false},
		{"A-B=x", false},
		{"A\n=x", false},
		{"FOO=a\nb", false},
		{"FOO=\xff", false},
		{"FOO=\xc2\x9b"
		 "2J",
		 false},
		{"LANG=../x", false},
		{"TERM=a/b", false},
		{"COLUMNS=abc", false},
		{"TZ=/etc/shadow", false},
		{"TZ=:/etc/shadow", false},
		{"TZ=../../etc/shadow", false},
		{"TZ=Europe/../../x", false},
		{"TZ=", false},
		{"PATH=/tmp", false},
		{"HOME=/x", false},
		{"TMPDIR=/x", false},
		{"USER=root", false},
		{"LOGNAME=root", false},
		{"SHELL=/bin/sh", false},
		{"HTTP_PROXY=http://x", false},
		{"https_proxy=http://x", false},
		{"no_proxy=x", false},
		{"LD_PRELOAD=/x", false},
		{"LD_LIBRARY_PATH=/x", false},
		{"GCONV_PATH=/x", false},
		{"GLIBC_TUNABLES=x", false},
		{"BASH_ENV=/x", false},
		{"ENV=/x", false},
		{"SHELLOPTS=xtrace", false},
		{"PS4=x", false},
		{"BASH_FUNC_x%%=()", false},
		{"BASH_FUNC_x=y", false},
		{"PYTHONPATH=/x", false},
		{"NODE_OPTIONS=x", false},
		{"PERL5OPT=x", false},
		{"GIT_DIR=/x", false},
		{"SUDO_ASKPASS=/x", false},
		{"IFS=x", false},
	};
	char **env = NULL;

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const char *set[] = {cases[i].entry, NULL};
		struct envb_opts o = {.set = set};
		const char *bad = NULL;
		int r = envb_build(&o, NULL, &env, &bad);

		if ((r == 0) != cases[i].ok || (!cases[i].ok && (r != -EINVAL || bad != set[0])) ||
		    (envb_set_refusal(set[0]) == NULL) != cases[i].ok) {
			tap_report(__FILE__, __LINE__, "case %zu (%s): r=%d", i, cases[i].entry, r);
			_metadata->failed = true;
		}
		if (r == 0) {
			const char *eq = strchr(set[0], '=');

			EXPECT_EQ(count(env), 2u);
			EXPECT_EQ(strncmp(env[1], set[0], (size_t)(eq - set[0]) + 1), 0);
			EXPECT_STREQ(strchr(env[1], '=') + 1, eq + 1);
			envb_free(env);
		}
	}

	/* 1 MiB value. */
	char *big = repeat("FOO=", 'a', 1024 * 1024);
	const char *set_big[] = {big, NULL};
	struct envb_opts ob = {.set = set_big};
	const char *bad = NULL;
	EXPECT_EQ(envb_build(&ob, NULL, &env, &bad), -EINVAL);
	EXPECT_TRUE(bad == big);
	free(big);

	/* The same name twice is ambiguous: refused, pointing at the second. */
	const char *dup[] = {"FOO=1", "FOO=2", NULL};
	struct envb_opts od = {.set = dup};
	EXPECT_EQ(envb_build(&od, NULL, &env, &bad), -EINVAL);
	EXPECT_TRUE(bad == dup[1]);
}

TEST(set_name_refusal_matches_set_refusal)
{
	static const struct {
		const char *name;
		bool ok;
	} cases[] = {
		{"FOO", true},
		{"_X1", true},
		{"PI_API_KEY", true}, /* secret-looking: passing it is the point */
		{"GITHUB_TOKEN", true},
		{"TZ", true},
		{"LANG", true},
		{"", false},
		{"A=B", false},
		{"1A", false},
		{"A B", false},
		{"A\n", false},
		{"PATH", false},
		{"https_proxy", false},
		{"LD_PRELOAD", false},
		{"GCONV_PATH", false},
		{"BASH_FUNC_x%%", false},
		{"SSH_AUTH_SOCK", false},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const char *why = envb_set_name_refusal(cases[i].name);
		char entry[64];

		snprintf(entry, sizeof(entry), "%s=x", cases[i].name);
		/* The very reason "NAME=x" gets, so both forms of pistisd run --env say one
		 * thing ("A=B=x" is A set to "B=x"). */
		if ((why == NULL) != cases[i].ok ||
		    (!strchr(cases[i].name, '=') && why != envb_set_refusal(entry))) {
			tap_report(__FILE__, __LINE__, "case %zu (%s): %s", i, cases[i].name,
				   why ? why : "accepted");
			_metadata->failed = true;
		}
	}
}

TEST(set_overrides_inherited)
{
	const char *set[] = {"TERM=dumb", "PI_MODE=set", NULL};
	struct envb_opts o = {.set = set};
	char *inh[] = {"TERM=xterm", "PI_MODE=inherited", NULL};
	char **env = NULL;

	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	EXPECT_STREQ(get(env, "TERM"), "dumb");
	EXPECT_STREQ(get(env, "PI_MODE"), "set");
	EXPECT_EQ(count(env), 3u);
	envb_free(env);
}

TEST(keep_validation)
{
	static const struct {
		const char *name;
		bool ok;
	} cases[] = {
		{"EDITOR", true},
		{"TZ", true},
		{"http_port", true},
		{"FOO_BAR", true},
		{"A=B", false},
		{"A B", false},
		{"", false},
		{"1X", false},
		{"LD_PRELOAD", false},
		{"LD_AUDIT", false},
		{"BASH_FUNC_x%%", false},
		{"BASH_ENV", false},
		{"PATH", false},
		{"HOME", false},
		{"GITHUB_TOKEN", false},
		{"AWS_SECRET_ACCESS_KEY", false},
		{"DB_PASSWORD", false},
		{"API_KEY", false},
		{"SSH_AUTH_SOCK", false},
		{"PYTHONHOME", false},
		{"GIT_CONFIG", false},
		{"HTTPS_PROXY", false},
		{"KRB5CCNAME", false},
	};
	char **env = NULL;

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const char *keep[] = {cases[i].name, NULL};
		struct envb_opts o = {.keep = keep};
		const char *bad = NULL;
		int r = envb_build(&o, NULL, &env, &bad);

		if ((r == 0) != cases[i].ok || (!cases[i].ok && bad != keep[0]) ||
		    (envb_keep_refusal(keep[0]) == NULL) != cases[i].ok) {
			tap_report(__FILE__, __LINE__, "case %zu (%s): r=%d", i, cases[i].name, r);
			_metadata->failed = true;
		}
		if (r == 0)
			envb_free(env);
	}
}

TEST(keep_passes_exact_name_with_checked_value)
{
	const char *keep[] = {"EDITOR", "TZ", "VISUAL", "MISSING", NULL};
	struct envb_opts o = {.keep = keep};
	char *inh[] = {"EDITOR=vim",	 "EDITORX=no",	"editor=no",
		       "TZ=/etc/shadow", "VISUAL=a\nb", NULL};
	char **env = NULL;

	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	EXPECT_STREQ(get(env, "EDITOR"), "vim");
	EXPECT_NULL(get(env, "EDITORX"));
	EXPECT_NULL(get(env, "editor"));
	EXPECT_NULL(get(env, "TZ"));
	EXPECT_NULL(get(env, "VISUAL"));
	EXPECT_NULL(get(env, "MISSING"));
	EXPECT_EQ(count(env), 2u);
	envb_free(env);

	char *inh2[] = {"TZ=Europe/Berlin", NULL};
	ASSERT_EQ(envb_build(&o, inh2, &env, NULL), 0);
	EXPECT_STREQ(get(env, "TZ"), "Europe/Berlin");
	envb_free(env);
}

TEST(total_size_cap)
{
	struct envb_opts o = {.max_bytes = 200};
	char *a = repeat("PI_A=", 'a', 100), *b = repeat("PI_B=", 'b', 100);
	char *inh[] = {"PI_S=small", a, b, "PI_T=tiny", NULL};
	char **env = NULL;

	/* PATH (45) + PI_S (11) + PI_A (106) fit in 200; PI_B would not; PI_T still does. */
	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	EXPECT_LE(total_bytes(env), 200u);
	EXPECT_NOT_NULL(get(env, "PI_S"));
	EXPECT_NOT_NULL(get(env, "PI_A"));
	EXPECT_NULL(get(env, "PI_B"));
	EXPECT_STREQ(get(env, "PI_T"), "tiny");
	envb_free(env);

	/* What the caller asks for itself must fit, or the build fails. */
	struct envb_opts tiny = {.max_bytes = 20};
	EXPECT_EQ(envb_build(&tiny, inh, &env, NULL), -E2BIG);

	char *big = repeat("FOO=", 'x', 300);
	const char *set[] = {big, NULL};
	struct envb_opts o2 = {.max_bytes = 200, .set = set};
	EXPECT_EQ(envb_build(&o2, NULL, &env, NULL), -E2BIG);
	free(big);
	free(a);
	free(b);
}

/* A hostile environment with thousands of distinct PI_ names stays bounded. */
TEST(entry_cap)
{
	size_t n = 5000;
	char **inh = calloc(n + 1, sizeof(char *));
	char **env = NULL;
	struct envb_opts o = {.max_bytes = 1u << 20};

	ASSERT_NOT_NULL(inh);
	for (size_t i = 0; i < n; i++) {
		inh[i] = malloc(32);
		snprintf(inh[i], 32, "PI_%zu=v", i);
	}
	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	EXPECT_LE(count(env), (size_t)ENVB_MAX_ENTRIES);
	EXPECT_GE(count(env), (size_t)ENVB_MAX_ENTRIES - 1);
	envb_free(env);

	/* The default byte cap bounds it too. */
	struct envb_opts d = {0};
	ASSERT_EQ(envb_build(&d, inh, &env, NULL), 0);
	EXPECT_LE(total_bytes(env), (size_t)ENVB_MAX_BYTES_DEFAULT);
	envb_free(env);
	for (size_t i = 0; i < n; i++)
		free(inh[i]);
	free(inh);
}

TEST(output_invariants_on_mixed_input)
{
	const char *set[] = {"PI_FROM_SET=1", "TERM=dumb", NULL};
	const char *keep[] = {"EDITOR", NULL};
	struct envb_opts o = {.user = "u",
			      .home = "/h",
			      .tmpdir = "/t",
			      .proxy = "http://p:1",
			      .set = set,
			      .keep = keep};
	char *inh[] = {"EDITOR=a", "EDITOR=b",	 "TERM=x",	 "LANG=C", "LANG=D",
		       "PI_Z=1",   "HOME=/evil", "LD_PRELOAD=x", NULL};
	char **env = NULL;

	ASSERT_EQ(envb_build(&o, inh, &env, NULL), 0);
	for (size_t i = 0; env[i]; i++) {
		const char *eq = strchr(env[i], '=');

		ASSERT_NOT_NULL(eq);
		ASSERT_GT(eq - env[i], 0);
		EXPECT_NULL(strchr(env[i], '\n'));
		for (size_t j = 0; j < i; j++)
			EXPECT_FALSE(strncmp(env[i], env[j], (size_t)(eq - env[i]) + 1) == 0);
	}
	EXPECT_STREQ(get(env, "EDITOR"), "a");
	EXPECT_STREQ(get(env, "LANG"), "C");
	EXPECT_STREQ(get(env, "HOME"), "/h");
	EXPECT_NULL(get(env, "LD_PRELOAD"));
	EXPECT_EQ(count(env), 1 + 5 + 6 + 2 + 3u);
	envb_free(env);
}

/* Builds in two threads at once: one gets the builder's static storage, the other its own
 * (lib/env-build.c, builder_get), and each result is exactly its own: every PI_ name of its
 * environment, with its own value, and no name of the other's. */
struct par_build {
	char tag;
	size_t n;
	int bad;
};

static void *par_build_main(void *arg)
{
	struct par_build *pb = arg;
	char **inh = calloc(pb->n + 1, sizeof(char *));
	struct envb_opts o = {.max_bytes = 1u << 20};

	if (!inh)
		abort();
	for (size_t i = 0; i < pb->n; i++) {
		inh[i] = malloc(32);
		if (!inh[i])
			abort();
		snprintf(inh[i], 32, "PI_%c%zu=%c", pb->tag, i, pb->tag);
	}
	for (int round = 0; round < 300 && !pb->bad; round++) {
		char **env = NULL;
		size_t mine = 0;

		if (envb_build(&o, inh, &env, NULL) < 0) {
			pb->bad = 1;
			break;
		}
		for (size_t i = 0; env[i]; i++) {
			if (strncmp(env[i], "PI_", 3))
				continue;
			const char *eq = strchr(env[i], '=');
			if (env[i][3] != pb->tag || !eq || eq[1] != pb->tag || eq[2])
				pb->bad = 2;
			else
				mine++;
		}
		if (mine != pb->n)
			pb->bad = 3;
		envb_free(env);
	}
	for (size_t i = 0; i < pb->n; i++)
		free(inh[i]);
	free(inh);
	return NULL;
}

TEST(builds_in_two_threads_at_once)
{
	struct par_build a = {'A', 400, 0}, b = {'B', 400, 0};
	pthread_t ta, tb;

	ASSERT_EQ(pthread_create(&ta, NULL, par_build_main, &a), 0);
	ASSERT_EQ(pthread_create(&tb, NULL, par_build_main, &b), 0);
	ASSERT_EQ(pthread_join(ta, NULL), 0);
	ASSERT_EQ(pthread_join(tb, NULL), 0);
	EXPECT_EQ(a.bad, 0);
	EXPECT_EQ(b.bad, 0);
}

TEST_HARNESS_MAIN
