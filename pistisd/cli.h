#pragma once

/* Entry points of pistisd's multi-call CLI. Each lives in its component's folder and
 * returns an exit code (0, 1 "not conforming/failed check", 100 usage, 111 system error). */

int check_cli_main(int argc, char **argv);	/* pistisd/check.c */
int users_cli_main(int argc, char **argv);	/* sandbox-users/cli.c */
int policy_cli_main(int argc, char **argv);	/* policy/cli.c */
int trusted_cli_main(int argc, char **argv);	/* trusted/cli.c */
int trusted_exec_main(int argc, char **argv);	/* trusted/exec.c: the wrappers' interpreter */
int trusted_interp_main(int argc, char **argv); /* trusted/exec.c: a clean start */
int run_cli_main(int argc, char **argv);	/* pistisd/run-cli.c */
int serve_cli_main(int argc, char **argv);	/* pistisd/serve.c */

/* Exit codes shared by every pistis binary (s6 style). */
enum {
	EXIT_USAGE = 100,
	EXIT_SYSTEM = 111,
	EXIT_CANNOT_EXEC = 126,
	EXIT_NOT_FOUND = 127,
};
