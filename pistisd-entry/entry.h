#pragma once

/* pistisd-entry: the container's PID 1. The pure parts (argument parsing, durations, the
 * restart policy, exit-status mapping, serve.conf) live in entry.c and conf.c and are
 * unit-tested; supervise.c does the signals, forks and waits. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENTRY_DEFAULT_PISTISD "/usr/local/bin/pistisd"
#define ENTRY_DEFAULT_DATA "/data"
#define ENTRY_CONF_REL "pistis/serve.conf" /* beneath the data directory */
#define ENTRY_DEFAULT_GRACE_MS 10000
#define ENTRY_DEFAULT_DELAY_MS 1000
#define ENTRY_DEFAULT_DELAY_MAX_MS 30000
#define ENTRY_DEFAULT_MAX_RESTARTS 10
/* A run at least this long counts as healthy: the next failure starts the backoff over. */
#define ENTRY_STABLE_MS 60000
/* Bounds of every duration option (one day) and of --max-restarts. */
#define ENTRY_MAX_DURATION_MS (86400LL * 1000)
#define ENTRY_MAX_RESTARTS_LIMIT 1000000u

enum {
	ENTRY_EXIT_USAGE = 100,
	ENTRY_EXIT_SYSTEM = 111,
	ENTRY_EXIT_CANNOT_EXEC = 126,
	ENTRY_EXIT_NOT_FOUND = 127,
};

struct entry_opts {
	bool restart;	  /* false with --no-restart */
	bool prepare;	  /* false with --no-prepare: leave the data dir and users alone */
	bool harden;	  /* false with --no-harden-mounts: leave mounts and /proc alone */
	int64_t grace_ms; /* after forwarding a stop signal, before SIGKILL */
	int64_t delay_ms; /* first restart delay; doubles per consecutive failure */
	int64_t delay_max_ms;
	unsigned max_restarts; /* consecutive quick failures before giving up; 0: unlimited */
	const char *data_dir;
	const char *pistisd;
	bool verbose;
	char **cmd; /* NULL: the default child, `pistisd serve` configured from serve.conf/env */
};

enum entry_parse_result {
	ENTRY_PARSE_RUN = 0,
	ENTRY_PARSE_HELP = 1,
	ENTRY_PARSE_VERSION = 2,
};

/* Parses argv into *ret (defaults first). Returns an entry_parse_result, or -EINVAL with
 * *ret_error set to a static message and *ret_arg to the offending argument (or NULL). */
int entry_parse_args(int argc, char **argv, struct entry_opts *ret, const char **ret_error,
		     const char **ret_arg);

/* "10", "0.5", "1.25" seconds → milliseconds (at most 3 decimals, 0…one day); -EINVAL or
 * -ERANGE otherwise. */
int entry_parse_seconds(const char *s, int64_t *ret_ms);

/* Delay before the n-th consecutive restart (n ≥ 1): delay_ms·2^(n-1), capped at max_ms. */
int64_t entry_backoff_ms(unsigned n, int64_t delay_ms, int64_t max_ms);

/* What to do after the child died. failures counts consecutive quick failures so far (the
 * caller keeps it); ran_ms is how long the child ran. */
enum entry_after_exit {
	ENTRY_RESTART,
	ENTRY_GIVE_UP,
};
enum entry_after_exit entry_decide(const struct entry_opts *o, unsigned *failures, int64_t ran_ms,
				   int64_t *ret_delay_ms);

/* A wait status as a shell shows it: the exit code, or 128 + the terminating signal. */
int entry_exit_code(int wstatus);

/* "TERM" for SIGTERM, …; NULL for signals without a name here. */
const char *entry_signal_name(int sig);

/* Signals forwarded to the child's process group, and the subset that also stops entry. */
bool entry_signal_forwarded(int sig);
bool entry_signal_stops(int sig);

/* --- serve.conf and the default child (conf.c) ---------------------------------------- */
#define ENTRY_CONF_MAX_BYTES 16384
#define ENTRY_CONF_MAX_VALUE 4096

struct entry_serve_conf {
	char *relay;
	char *token_file;
	char *ca;
	char *pin;
	char *name;
	char *log_format;
	char *pids_max;
	char *max_buffered;
	char *memory_max;
	char *cpu_weight;
	bool verbose;
	bool share_abstract_sockets;
};

/* Parses serve.conf text ("key = value" lines, '#' comments; keys relay, token-file, ca, pin,
 * name, log-format, pids-max, max-buffered, memory-max, cpu-weight, and the yes/no keys
 * verbose, share-abstract-sockets) into *conf, replacing fields it names. Returns 0 or -EINVAL with *ret_line (1-based) and *ret_error
 * (static) describing the first bad line. */
int entry_conf_parse(const char *text, size_t len, struct entry_serve_conf *conf,
		     unsigned *ret_line, const char **ret_error);

/* Overrides from the environment: PISTIS_RELAY, PISTIS_TOKEN_FILE (a path: the token itself
 * is never taken from the environment). getenv_fn is getenv in the binary, a stub in tests. */
int entry_conf_from_env(struct entry_serve_conf *conf, const char *(*getenv_fn)(const char *));

void entry_conf_done(struct entry_serve_conf *conf);

/* argv for `PISTISD serve --relay=… --token-file=… …`, NULL-terminated, in one malloc'd
 * block (free it with free()). -ENOENT when relay or token-file is missing. */
int entry_serve_argv(const struct entry_serve_conf *conf, const char *pistisd, char ***ret);
