/* pistisd: the sandbox daemon and its multi-call admin CLI. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "lib/log.h"
#include "lib/version.h"
#include "pistisd/cli.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{"serve", serve_cli_main, "connect to the relay and run commands (the daemon)"},
	{"check", check_cli_main, "probe the kernel and image for what pistis relies on"},
	{"users", users_cli_main, "agent identities: ensure, ensure-base, remove, list, show"},
	{"policy", policy_cli_main, "path rules: apply, plan, check, explain, save"},
	{"trusted", trusted_cli_main,
	 "trusted commands: add, remove, adopt, list, check, install,\nharden-setuid"},
	{"trusted-exec", trusted_exec_main, "interpreter of the /data/bin trusted wrappers"},
	{"trusted-interp", trusted_interp_main,
	 "interpreter of trusted scripts, for a clean start"},
	{"run", run_cli_main, "run one command as an agent, confined"},
};

/* The width of the names column; a longer name gets a line of its own. */
#define USAGE_NAME_WIDTH 8

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pistisd COMMAND [OPTIONS]…\n"
		"       pistisd --version | --help   (or the words version, help)\n\n"
		"The pistis sandbox daemon (runs as root inside the sandbox) and its admin CLI.\n\n"
		"Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strlen(commands[i].name) > USAGE_NAME_WIDTH)
			fprintf(f, "  %s\n%*s", commands[i].name, USAGE_NAME_WIDTH + 3, "");
		else
			fprintf(f, "  %-*s ", USAGE_NAME_WIDTH, commands[i].name);
		/* a description's further lines line up under its first */
		for (const char *p = commands[i].help; *p; p++)
			if (*p == '\n')
				fprintf(f, "\n%*s", USAGE_NAME_WIDTH + 3, "");
			else
				fputc(*p, f);
		fputc('\n', f);
	}
	fprintf(f,
		"\n`pistisd COMMAND --help` describes each command. Exit codes: 0 ok, 1 check\n"
		"failed, 100 usage, 111 system error. Documentation: docs/ in the source tree.\n");
}

int main(int argc, char **argv)
{
	log_set_program("pistisd");
	/* Root daemon that may hold a relay token: never dumpable, so an agent cannot
	 * ptrace it or read its memory through /proc even on a lax Yama setting. */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* A file size limit it was started with (docker --ulimit fsize, systemd LimitFSIZE)
	 * killed it with SIGXFSZ in the middle of a write once /etc/passwd or the registry
	 * outgrew it: serve gone, and the failure path that puts the '-' backups right never
	 * ran. Ignored, the write fails with EFBIG, reported and undone like ENOSPC. What it
	 * starts resets every disposition (spawn, trusted-exec), or writes nothing that size
	 * (visudo, sudo -l). */
	(void)signal(SIGXFSZ, SIG_IGN);
	/* SIGCHLD ignored by whoever started us survives execve, and with it the kernel reaps
	 * our children itself: every wait for one fails with ECHILD. `pistisd run` then lost
	 * its command's status (exit 111, "Failed while supervising 'sh': No child process")
	 * and serve never saw a command end: no exec.exit, the client waited for ever (red
	 * team, redteam-ends.sh). pistisd-entry resets every disposition for its child; a
	 * pistisd started by anything else (a supervisor, a script that ignores SIGCHLD to
	 * spare itself zombies) did not. The one disposition that changes what the kernel
	 * does for us; the others only decide whether a signal stops us, the caller's choice
	 * (run and serve block theirs for a signalfd, which gets them ignored or not). */
	(void)signal(SIGCHLD, SIG_DFL);

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		version_print("pistisd", VERSION_ALL_LIBS);
		return 0;
	}
	/* A #! line's argument arrives whole: "trusted-interp INTERP [ARG]". */
	if (!strncmp(argv[1], "trusted-interp", 14) && (argv[1][14] == ' ' || argv[1][14] == '\t'))
		return trusted_interp_main(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		return commands[i].fn(argc - 1, argv + 1);
	}
	log_error("unknown command '%s'; see 'pistisd --help'", argv[1]);
	return EXIT_USAGE;
}
