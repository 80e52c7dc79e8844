/* pistisd-entry's pure parts: arguments, durations, backoff and the restart policy, exit
 * statuses, signal sets, serve.conf and the default child's argv. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/tap.h"
#include "pistisd-entry/entry.h"

/* argv is static: the options keep pointers into it (o->cmd), which the tests read after
 * parse returns. */
static int parse(struct entry_opts *o, const char **err, const char **arg, ...)
{
	static char *argv[32];
	int argc = 1;
	va_list ap;

	argv[0] = (char *)"pistisd-entry";

	va_start(ap, arg);
	for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return entry_parse_args(argc, argv, o, err, arg);
}
#define DECIDE(...) ((int)entry_decide(__VA_ARGS__))
#define PARSE(o, ...) parse(o, &err, &arg, __VA_ARGS__, (char *)NULL)

TEST(args_defaults)
{
	struct entry_opts o;
	const char *err, *arg;

	ASSERT_EQ(PARSE(&o, NULL), ENTRY_PARSE_RUN);
	EXPECT_TRUE(o.restart);
	EXPECT_TRUE(o.prepare);
	EXPECT_TRUE(o.harden);
	EXPECT_EQ(o.grace_ms, 10000);
	EXPECT_EQ(o.delay_ms, 1000);
	EXPECT_EQ(o.delay_max_ms, 30000);
	EXPECT_EQ(o.max_restarts, 10u);
	EXPECT_STREQ(o.data_dir, "/data");
	EXPECT_STREQ(o.pistisd, "/usr/local/bin/pistisd");
	EXPECT_NULL(o.cmd);
}

TEST(args_all)
{
	struct entry_opts o;
	const char *err, *arg;

	ASSERT_EQ(PARSE(&o, "--no-restart", "--grace", "2.5", "--data=/srv/d", "--pistisd",
			"/opt/pistisd", "--restart-delay", "0.05", "--restart-delay-max=0.2",
			"--max-restarts", "0", "--no-prepare", "--no-harden-mounts", "-v", "--",
			"sh", "-c", "--grace 1"),
		  ENTRY_PARSE_RUN);
	EXPECT_FALSE(o.restart);
	EXPECT_FALSE(o.prepare);
	EXPECT_FALSE(o.harden);
	EXPECT_TRUE(o.verbose);
	EXPECT_EQ(o.grace_ms, 2500);
	EXPECT_EQ(o.delay_ms, 50);
	EXPECT_EQ(o.delay_max_ms, 200);
	EXPECT_EQ(o.max_restarts, 0u);
	EXPECT_STREQ(o.data_dir, "/srv/d");
	EXPECT_STREQ(o.pistisd, "/opt/pistisd");
	ASSERT_NOT_NULL(o.cmd);
	EXPECT_STREQ(o.cmd[0], "sh");
	EXPECT_STREQ(o.cmd[2], "--grace 1"); /* after "--" nothing is an option */
	EXPECT_NULL(o.cmd[3]);
}

TEST(args_harden_is_separate_from_prepare)
{
	struct entry_opts o;
	const char *err, *arg;

	ASSERT_EQ(PARSE(&o, "--no-prepare", "--", "true"), ENTRY_PARSE_RUN);
	EXPECT_FALSE(o.prepare);
	EXPECT_TRUE(o.harden);
	ASSERT_EQ(PARSE(&o, "--no-harden-mounts", "--", "true"), ENTRY_PARSE_RUN);
	EXPECT_TRUE(o.prepare);
	EXPECT_FALSE(o.harden);
	/* Exact name only: no prefix, no value. */
	EXPECT_EQ(PARSE(&o, "--no-harden", "--", "true"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--no-harden-mounts=yes", "--", "true"), -EINVAL);
}

TEST(args_help_version)
{
	struct entry_opts o;
	const char *err, *arg;

	EXPECT_EQ(PARSE(&o, "--help"), ENTRY_PARSE_HELP);
	EXPECT_EQ(PARSE(&o, "-h"), ENTRY_PARSE_HELP);
	EXPECT_EQ(PARSE(&o, "--no-restart", "--version"), ENTRY_PARSE_VERSION);
	/* After "--" they belong to the command. */
	ASSERT_EQ(PARSE(&o, "--", "cmd", "--help"), ENTRY_PARSE_RUN);
	EXPECT_STREQ(o.cmd[1], "--help");
}

TEST(args_errors)
{
	struct entry_opts o;
	const char *err, *arg;

	EXPECT_EQ(PARSE(&o, "--nope"), -EINVAL);
	EXPECT_STREQ(arg, "--nope");
	EXPECT_EQ(PARSE(&o, "sh"), -EINVAL); /* a command needs "--" */
	EXPECT_STREQ(arg, "sh");
	EXPECT_EQ(PARSE(&o, "--"), -EINVAL); /* "--" and nothing */
	EXPECT_NULL(arg);
	EXPECT_EQ(PARSE(&o, "--grace"), -EINVAL); /* missing value */
	EXPECT_STREQ(arg, "--grace");
	EXPECT_EQ(PARSE(&o, "--grace", "-1"), -EINVAL);
	EXPECT_STREQ(arg, "-1");
	EXPECT_EQ(PARSE(&o, "--grace", "1e3"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--grace", "86401"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--data", "relative/dir"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--pistisd", "pistisd"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--max-restarts", "ten"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--max-restarts", "1000001"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--max-restarts", "-1"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--restart-delay", "5", "--restart-delay-max", "1"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--no-restartx"), -EINVAL);
	EXPECT_EQ(PARSE(&o, "--grace2=1"), -EINVAL);
	EXPECT_NOT_NULL(err);
}

TEST(seconds)
{
	static const struct {
		const char *in;
		int r;
		int64_t ms;
	} t[] = {
		{"0", 0, 0},
		{"10", 0, 10000},
		{"0.5", 0, 500},
		{"1.25", 0, 1250},
		{"0.001", 0, 1},
		{"86400", 0, 86400000},
		{"86400.0", 0, 86400000},
		{"86400.001", -ERANGE, 0},
		{"99999999999999999999", -ERANGE, 0},
		{"", -EINVAL, 0},
		{".5", -EINVAL, 0},
		{"5.", -EINVAL, 0},
		{"1.2345", -EINVAL, 0},
		{"+1", -EINVAL, 0},
		{" 1", -EINVAL, 0},
		{"1 ", -EINVAL, 0},
		{"0x10", -EINVAL, 0},
		{"1e2", -EINVAL, 0},
		{"1,5", -EINVAL, 0},
		{"-0", -EINVAL, 0},
		{"inf", -EINVAL, 0},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int64_t ms = -7;
		int r = entry_parse_seconds(t[i].in, &ms);

		if (r != t[i].r)
			tap_report(__FILE__, __LINE__, "'%s': got %d want %d", t[i].in, r, t[i].r);
		EXPECT_EQ(r, t[i].r);
		EXPECT_EQ(ms, t[i].r == 0 ? t[i].ms : -7);
	}
	EXPECT_EQ(entry_parse_seconds(NULL, &(int64_t){0}), -EINVAL);
}

TEST(backoff)
{
	EXPECT_EQ(entry_backoff_ms(0, 1000, 30000), 0);
	EXPECT_EQ(entry_backoff_ms(1, 1000, 30000), 1000);
	EXPECT_EQ(entry_backoff_ms(2, 1000, 30000), 2000);
	EXPECT_EQ(entry_backoff_ms(5, 1000, 30000), 16000);
	EXPECT_EQ(entry_backoff_ms(6, 1000, 30000), 30000);
	EXPECT_EQ(entry_backoff_ms(7, 1000, 30000), 30000);
	/* No overflow however many failures, however large the cap. */
	EXPECT_EQ(entry_backoff_ms(4000000000u, 1000, 30000), 30000);
	EXPECT_EQ(entry_backoff_ms(200, 1, ENTRY_MAX_DURATION_MS), ENTRY_MAX_DURATION_MS);
	EXPECT_EQ(entry_backoff_ms(200, ENTRY_MAX_DURATION_MS, ENTRY_MAX_DURATION_MS),
		  ENTRY_MAX_DURATION_MS);
	/* A zero delay stays zero (restart at once). */
	EXPECT_EQ(entry_backoff_ms(10, 0, 30000), 0);
	/* Monotonic up to the cap. */
	for (unsigned n = 1; n < 100; n++)
		EXPECT_LE(entry_backoff_ms(n, 300, 45000), entry_backoff_ms(n + 1, 300, 45000));
}

TEST(decide)
{
	struct entry_opts o = {
		.restart = true, .delay_ms = 100, .delay_max_ms = 1000, .max_restarts = 3};
	unsigned failures = 0;
	int64_t delay = -1;

	/* Quick failures: 1st, 2nd, 3rd restart with doubling delays, then give up. */
	EXPECT_EQ(DECIDE(&o, &failures, 10, &delay), (int)ENTRY_RESTART);
	EXPECT_EQ(delay, 100);
	EXPECT_EQ(DECIDE(&o, &failures, 10, &delay), (int)ENTRY_RESTART);
	EXPECT_EQ(delay, 200);
	EXPECT_EQ(DECIDE(&o, &failures, 10, &delay), (int)ENTRY_RESTART);
	EXPECT_EQ(delay, 400);
	EXPECT_EQ(failures, 3u);
	EXPECT_EQ(DECIDE(&o, &failures, 10, &delay), (int)ENTRY_GIVE_UP);
	EXPECT_EQ(delay, 0);

	/* A run of ENTRY_STABLE_MS forgives: back to the first delay. */
	failures = 3;
	EXPECT_EQ(DECIDE(&o, &failures, ENTRY_STABLE_MS, &delay), (int)ENTRY_RESTART);
	EXPECT_EQ(delay, 100);
	EXPECT_EQ(failures, 1u);
	/* Just under it does not. */
	failures = 3;
	EXPECT_EQ(DECIDE(&o, &failures, ENTRY_STABLE_MS - 1, &delay), (int)ENTRY_GIVE_UP);

	/* --no-restart: never. */
	o.restart = false;
	failures = 0;
	EXPECT_EQ(DECIDE(&o, &failures, 10, &delay), (int)ENTRY_GIVE_UP);

	/* --max-restarts 0: unlimited, the delay stays at the cap. */
	o.restart = true;
	o.max_restarts = 0;
	failures = 0;
	for (int i = 0; i < 1000; i++)
		ASSERT_EQ(DECIDE(&o, &failures, 0, &delay), (int)ENTRY_RESTART);
	EXPECT_EQ(delay, 1000);
}

TEST(exit_codes)
{
	/* Build real wait statuses from real children rather than by hand. */
	static const int codes[] = {0, 1, 3, 100, 127, 255};
	static const int sigs[] = {SIGTERM, SIGKILL, SIGINT, SIGSEGV};

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		int st;
		pid_t p = fork();

		ASSERT_GE(p, 0);
		if (p == 0)
			_exit(codes[i]);
		ASSERT_EQ(waitpid(p, &st, 0), p);
		EXPECT_EQ(entry_exit_code(st), codes[i]);
	}
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		int st;
		pid_t p = fork();

		ASSERT_GE(p, 0);
		if (p == 0) {
			signal(sigs[i], SIG_DFL);
			raise(sigs[i]);
			_exit(0);
		}
		ASSERT_EQ(waitpid(p, &st, 0), p);
		EXPECT_EQ(entry_exit_code(st), 128 + sigs[i]);
	}
}

TEST(signal_sets)
{
	static const int fwd[] = {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGWINCH};
	static const int stops[] = {SIGTERM, SIGINT, SIGQUIT};
	static const int not_fwd[] = {SIGCHLD, SIGKILL, SIGSTOP, SIGPIPE, SIGALRM, SIGTSTP,
				      SIGTTIN, SIGTTOU, SIGSEGV, 0,	  1000};

	for (size_t i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++) {
		EXPECT_TRUE(entry_signal_forwarded(fwd[i]));
		EXPECT_NOT_NULL(entry_signal_name(fwd[i]));
	}
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		EXPECT_TRUE(entry_signal_stops(stops[i]));
	EXPECT_FALSE(entry_signal_stops(SIGHUP));
	EXPECT_FALSE(entry_signal_stops(SIGWINCH));
	EXPECT_FALSE(entry_signal_stops(SIGUSR1));
	for (size_t i = 0; i < sizeof(not_fwd) / sizeof(not_fwd[0]); i++) {
		EXPECT_FALSE(entry_signal_forwarded(not_fwd[i]));
		EXPECT_FALSE(entry_signal_stops(not_fwd[i]));
	}
	EXPECT_STREQ(entry_signal_name(SIGTERM), "TERM");
	EXPECT_STREQ(entry_signal_name(SIGKILL), "KILL");
	EXPECT_NULL(entry_signal_name(1000));
}

static const char *fake_env_relay, *fake_env_token;
static const char *fake_getenv(const char *name)
{
	if (!strcmp(name, "PISTIS_RELAY"))
		return fake_env_relay;
	if (!strcmp(name, "PISTIS_TOKEN_FILE"))
		return fake_env_token;
	if (!strcmp(name, "PISTIS_TOKEN"))
		return "secret-that-must-never-be-used";
	return NULL;
}

TEST(conf_parse_and_argv)
{
	static const char text[] = "# pistisd serve\n"
				   "relay = wss://relay.example:8443/ws\n"
				   "\ttoken-file=/data/pistis/token  \r\n"
				   "\n"
				   "   # indented comment\n"
				   "pin = AB:cd\n"
				   "name = box-1\n"
				   "log-format = json\n"
				   "pids-max = 4096\n"
				   "max-buffered = 256\n"
				   "memory-max = 512M\n"
				   "cpu-weight = 250\n"
				   "ca = -weird-leading-dash\n"
				   "verbose = yes\n"
				   "share-abstract-sockets = yes";
	struct entry_serve_conf c = {0};
	const char *err = NULL;
	unsigned line = 99;
	char **argv = NULL;

	ASSERT_EQ(entry_conf_parse(text, sizeof(text) - 1, &c, &line, &err), 0);
	EXPECT_STREQ(c.relay, "wss://relay.example:8443/ws");
	EXPECT_STREQ(c.token_file, "/data/pistis/token");
	EXPECT_TRUE(c.verbose);

	ASSERT_EQ(entry_serve_argv(&c, "/usr/local/bin/pistisd", &argv), 0);
	EXPECT_STREQ(argv[0], "/usr/local/bin/pistisd");
	EXPECT_STREQ(argv[1], "serve");
	EXPECT_STREQ(argv[2], "--relay=wss://relay.example:8443/ws");
	EXPECT_STREQ(argv[3], "--token-file=/data/pistis/token");
	EXPECT_STREQ(argv[4], "--ca=-weird-leading-dash");
	EXPECT_STREQ(argv[5], "--pin=AB:cd");
	EXPECT_STREQ(argv[6], "--name=box-1");
	EXPECT_STREQ(argv[7], "--log-format=json");
	EXPECT_STREQ(argv[8], "--pids-max=4096");
	EXPECT_STREQ(argv[9], "--max-buffered=256");
	EXPECT_STREQ(argv[10], "--memory-max=512M");
	EXPECT_STREQ(argv[11], "--cpu-weight=250");
	EXPECT_STREQ(argv[12], "--verbose");
	EXPECT_STREQ(argv[13], "--share-abstract-sockets");
	EXPECT_NULL(argv[14]);
	free(argv);

	/* A comment after a value, as docs/entry.md's example has them: not part of it. A
	 * '#' with no blank before it is. */
	static const char commented[] = "relay = wss://relay.example/sandbox     # or ws://…\n"
					"ca = /etc/ssl/certs/ca.crt\t# the default\n"
					"name = box#7   #   a name with a '#'\n"
					"verbose = no                 # yes: --verbose\n";
	ASSERT_EQ(entry_conf_parse(commented, sizeof(commented) - 1, &c, &line, &err), 0);
	EXPECT_STREQ(c.relay, "wss://relay.example/sandbox");
	EXPECT_STREQ(c.ca, "/etc/ssl/certs/ca.crt");
	EXPECT_STREQ(c.name, "box#7");
	EXPECT_FALSE(c.verbose);
	static const char only_comment[] = "relay = # nothing but a comment\n";
	EXPECT_EQ(entry_conf_parse(only_comment, sizeof(only_comment) - 1, &c, &line, &err),
		  -EINVAL);
	EXPECT_EQ(line, 1u);

	/* The environment wins over the file; the token itself is never read from it. */
	fake_env_relay = "/run/pistis/relay.sock";
	fake_env_token = NULL;
	ASSERT_EQ(entry_conf_from_env(&c, fake_getenv), 0);
	EXPECT_STREQ(c.relay, "/run/pistis/relay.sock");
	EXPECT_STREQ(c.token_file, "/data/pistis/token");
	fake_env_relay = "ws://x\n--evil";
	EXPECT_EQ(entry_conf_from_env(&c, fake_getenv), -EINVAL);
	entry_conf_done(&c);
	EXPECT_NULL(c.relay);
}

/* The numbers' edges that hold: a serve.conf entry takes exactly what pistisd serve does. */
TEST(conf_limits_edges)
{
	static const char *const good[] = {
		"cpu-weight = 1\n",
		"cpu-weight = 10000\n",
		"memory-max = 1M\n",
		"memory-max = 1048576\n",
		"memory-max = 1024K\n",
		"memory-max = 1024T\n",
		"memory-max = 1125899906842624\n",
		"memory-max = 3G\n",
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct entry_serve_conf c = {0};
		const char *err = NULL;
		unsigned line = 0;

		EXPECT_EQ(entry_conf_parse(good[i], strlen(good[i]), &c, &line, &err), 0);
		entry_conf_done(&c);
	}
}

/* A number is read within the length given, never on into what follows it in memory (the
 * last line of a file without its newline: strspn and strtoul read past the buffer). */
TEST(conf_number_ends_at_len)
{
	static const struct {
		const char *text; /* the file is all but the last 6 bytes */
		size_t field;
		const char *want;
	} cases[] = {
		{"pids-max = 4096999999", offsetof(struct entry_serve_conf, pids_max), "4096"},
		{"cpu-weight = 5000000", offsetof(struct entry_serve_conf, cpu_weight), "5"},
		{"max-buffered = 64000000", offsetof(struct entry_serve_conf, max_buffered), "64"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct entry_serve_conf c = {0};
		const char *err = NULL;
		unsigned line = 0;

		EXPECT_EQ(
			entry_conf_parse(cases[i].text, strlen(cases[i].text) - 6, &c, &line, &err),
			0);
		EXPECT_STREQ(*(char **)((char *)&c + cases[i].field), cases[i].want);
		entry_conf_done(&c);
	}
}

TEST(conf_env_only_and_missing)
{
	struct entry_serve_conf c = {0};
	char **argv = NULL;

	fake_env_relay = NULL;
	fake_env_token = NULL;
	ASSERT_EQ(entry_conf_from_env(&c, fake_getenv), 0);
	EXPECT_EQ(entry_serve_argv(&c, "/p", &argv), -ENOENT);
	fake_env_relay = "ws://127.0.0.1:1/";
	ASSERT_EQ(entry_conf_from_env(&c, fake_getenv), 0);
	EXPECT_EQ(entry_serve_argv(&c, "/p", &argv), -ENOENT); /* token-file still missing */
	fake_env_token = "/data/pistis/token";
	ASSERT_EQ(entry_conf_from_env(&c, fake_getenv), 0);
	ASSERT_EQ(entry_serve_argv(&c, "/p", &argv), 0);
	EXPECT_STREQ(argv[2], "--relay=ws://127.0.0.1:1/");
	EXPECT_STREQ(argv[3], "--token-file=/data/pistis/token");
	EXPECT_NULL(argv[4]);
	for (int i = 0; argv[i]; i++)
		EXPECT_NULL(strstr(argv[i], "secret"));
	free(argv);
	entry_conf_done(&c);
}

TEST(conf_errors)
{
	static const struct {
		const char *text;
		unsigned line;
	} bad[] = {
		{"relay\n", 1},
		{"# ok\nbogus = 1\n", 2},
		{"relay =\n", 1},
		{"relay =   \n", 1},
		{"relay = a\x01"
		 "b\n",
		 1},
		{"relay = a\x1b[31m\n", 1},
		{"token-file = /x\nverbose = maybe\n", 2},
		{"share-abstract-sockets = 1\n", 1},
		{"pids-max = 0\n", 1},
		{"name = x\npids-max = 4194305\n", 2},
		{"pids-max = 12k\n", 1},
		{"pids-max = -1\n", 1},
		{"pids-max = 0100\n", 1},
		{"pids-max = 99999999999999999999\n", 1},
		{"max-buffered = 0\n", 1},
		{"max-buffered = 65537\n", 1},
		{"max-buffered = 64M\n", 1},
		{"max-buffered = +64\n", 1},
		{"cpu-weight = 0\n", 1},
		{"cpu-weight = 10001\n", 1},
		{"cpu-weight = 1k\n", 1},
		{"cpu-weight = 050\n", 1},
		{"memory-max = 0\n", 1},
		{"memory-max = 1048575\n", 1}, /* under 1M: no command could start */
		{"memory-max = 1023K\n", 1},
		{"memory-max = 1025T\n", 1},
		{"memory-max = 1125899906842625\n", 1},
		{"memory-max = 99999999999999999999G\n", 1},
		{"memory-max = 512MB\n", 1},
		{"memory-max = 512m\n", 1},
		{"memory-max = 0512M\n", 1},
		{"memory-max = -1\n", 1},
		{"memory-max = 1.5G\n", 1},
		{"memory-max = G\n", 1},
		{"name = x\nmemory-max = 12345678901234567890123\n", 2},
		{"= value\n", 1},
		{"relay token = x\n", 1},
		{"RELAY = x\n", 1},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct entry_serve_conf c = {0};
		const char *err = NULL;
		unsigned line = 0;

		EXPECT_EQ(entry_conf_parse(bad[i].text, strlen(bad[i].text), &c, &line, &err),
			  -EINVAL);
		EXPECT_EQ(line, bad[i].line);
		EXPECT_NOT_NULL(err);
		entry_conf_done(&c);
	}

	/* NUL bytes, size and value limits. */
	{
		struct entry_serve_conf c = {0};
		const char *err = NULL;
		unsigned line = 0;
		char *big = malloc(ENTRY_CONF_MAX_BYTES + 2);

		ASSERT_NOT_NULL(big);
		EXPECT_EQ(entry_conf_parse("relay = a\0b\n", 12, &c, &line, &err), -EINVAL);
		memset(big, '#', ENTRY_CONF_MAX_BYTES + 1);
		EXPECT_EQ(entry_conf_parse(big, ENTRY_CONF_MAX_BYTES + 1, &c, &line, &err),
			  -EINVAL);
		EXPECT_EQ(entry_conf_parse(big, ENTRY_CONF_MAX_BYTES, &c, &line, &err), 0);
		memcpy(big, "relay = ", 8);
		memset(big + 8, 'a', ENTRY_CONF_MAX_VALUE + 1);
		EXPECT_EQ(entry_conf_parse(big, 8 + ENTRY_CONF_MAX_VALUE + 1, &c, &line, &err),
			  -EINVAL);
		EXPECT_EQ(entry_conf_parse(big, 8 + ENTRY_CONF_MAX_VALUE, &c, &line, &err), 0);
		EXPECT_EQ(strlen(c.relay), (size_t)ENTRY_CONF_MAX_VALUE);
		free(big);
		entry_conf_done(&c);
	}
}

TEST(conf_later_wins)
{
	static const char text[] = "relay = a\nrelay = b\nverbose = yes\nverbose = no\n";
	struct entry_serve_conf c = {0};
	const char *err = NULL;
	unsigned line = 0;

	ASSERT_EQ(entry_conf_parse(text, sizeof(text) - 1, &c, &line, &err), 0);
	EXPECT_STREQ(c.relay, "b");
	EXPECT_FALSE(c.verbose);
	entry_conf_done(&c);
}

TEST_HARNESS_MAIN
