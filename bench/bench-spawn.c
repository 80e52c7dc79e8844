/* In one process: N spawns of /bin/true through the spawn core (agent uid, seccomp,
 * cgroup, everything) against plain posix_spawn + waitpid, interleaved. Prints µs per
 * spawn and the ratios of the means and of the medians.
 * Usage: bench-spawn [N] [--no-cgroup]   (root)
 *        bench-spawn exec N -- CMD [ARG]...   median, mean and p99 wall of N runs of CMD
 *        (posix_spawn + CLOCK_MONOTONIC; bench/spawn.sh, bench/relay.sh) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pistisd/spawn.h"

extern char **environ;

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *t, int n, uint64_t total)
{
	qsort(t, (size_t)n, sizeof(*t), cmp);
	printf("%-22s n=%d mean=%.1f us median=%.1f us p90=%.1f us\n", what, n, total / 1000.0 / n,
	       t[n / 2] / 1000.0, t[n * 9 / 10] / 1000.0);
}

static int bench_exec(int n, char **cmd)
{
	uint64_t *t = calloc((size_t)n, sizeof(uint64_t)), total = 0;
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	posix_spawn_file_actions_t fa;

	if (!t || devnull < 0 || n <= 0)
		return 111;
	int stopped = 0;

	/* Output (and sudo's "unable to resolve host" on stderr) goes to /dev/null; the exit
	 * status is still checked. */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, devnull, 1);
	posix_spawn_file_actions_adddup2(&fa, devnull, 2);
	for (int i = -5; i < n; i++) {
		pid_t pid;
		int st = -1;
		uint64_t t0 = spawn_now_ns();
		if (posix_spawn(&pid, cmd[0], &fa, NULL, cmd, environ) != 0 ||
		    waitpid(pid, &st, WUNTRACED) != pid) {
			fprintf(stderr, "bench-spawn: '%s' failed\n", cmd[0]);
			return 111;
		}
		if (WIFSTOPPED(st)) {
			/* sudo stops itself now and then (job control without a terminal): that
			 * run is killed, counted and not timed, and repeated. */
			(void)kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			if (++stopped > 20) {
				fprintf(stderr, "bench-spawn: '%s' keeps stopping\n", cmd[0]);
				return 111;
			}
			i--;
			continue;
		}
		if (st != 0) {
			fprintf(stderr, "bench-spawn: '%s' failed (status %d)\n", cmd[0], st);
			return 111;
		}
		if (i < 0)
			continue; /* warm-up */
		t[i] = spawn_now_ns() - t0;
		total += t[i];
	}
	qsort(t, (size_t)n, sizeof(*t), cmp);
	printf("median_us=%.1f mean_us=%.1f p99_us=%.1f stopped=%d\n", t[n / 2] / 1000.0,
	       total / 1000.0 / n, t[(n * 99 + 99) / 100 - 1] / 1000.0, stopped);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 4 && !strcmp(argv[1], "exec") && !strcmp(argv[3], "--"))
		return bench_exec(atoi(argv[2]), argv + 4);
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	bool cg = !(argc > 2 && !strcmp(argv[2], "--no-cgroup"));
	char *targv[] = {"/bin/true", NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	uint64_t *t = calloc((size_t)n, sizeof(uint64_t)), total = 0, plain = 0, t0;
	uint64_t *tp = calloc((size_t)n, sizeof(uint64_t));
	struct spawn_ctx *ctx = NULL;
	struct spawn_opts o = {0};
	int r, vforked = 0, born_in_cgroup = 0;
	const char *sockets = "?";

	if (n <= 0 || !t || !tp)
		return 100;
	r = spawn_ctx_new_why(&ctx, NULL);
	if (r < 0) {
		fprintf(stderr, "bench-spawn: spawn_ctx_new_why: %s\n", strerror(-r));
		return 111;
	}
	o.argv = targv;
	o.envp = envp;
	spawn_opts_as_agent(&o, 10100, 10100);
	/* /tmp itself as the root, not "tmp" beneath "/": where /tmp is a mount of its own
	 * (a bind mount, a tmpfs), the core refuses to cross into it (RESOLVE_NO_XDEV). */
	o.cwd_root_fd = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
	o.cwd = ".";
	o.umask = (mode_t)-1;
	o.cgroup_agent = cg ? "bench-agent" : NULL;
	/* A/B of the Landlock abstract-socket scope (docs/spawn.md): what it costs a spawn. */
	o.share_abstract_sockets = getenv("PISTIS_BENCH_SHARE_ABSTRACT") != NULL;

	/* warm-up: page cache, cgroup dirs */
	for (int i = 0; i < 20; i++) {
		pid_t pid;
		posix_spawn(&pid, "/bin/true", NULL, NULL, targv, envp);
		waitpid(pid, NULL, 0);
	}

	/* Interleaved: one plain spawn and one through the core per round, their order swapped
	 * every round, so a burst of load from the machine's neighbours (which on a shared
	 * guest moves the figures by tens of percent within a minute) hits both sides alike
	 * instead of whichever batch happened to run then. */
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 2; k++) {
			if ((k == 0) == (i % 2 == 0)) {
				pid_t pid;
				int st;

				t0 = spawn_now_ns();
				if (posix_spawn(&pid, "/bin/true", NULL, NULL, targv, envp) != 0 ||
				    waitpid(pid, &st, 0) != pid || st != 0)
					return 111;
				tp[i] = spawn_now_ns() - t0;
				plain += tp[i];
			} else {
				struct spawn_proc *p = NULL;
				struct spawn_error err;

				t0 = spawn_now_ns();
				r = spawn_start(ctx, &o, &p, &err);
				if (r < 0) {
					char b[128];
					fprintf(stderr, "bench-spawn: %s\n",
						spawn_error_string(&err, b, sizeof(b)));
					return 111;
				}
				if (spawn_wait(p, NULL) < 0 || spawn_result(p)->exit_code != 0)
					return 111;
				vforked += p->vforked;
				born_in_cgroup += p->cloned_into_cgroup;
				sockets = spawn_result(p)->abstract_sockets;
				spawn_free(p);
				t[i] = spawn_now_ns() - t0;
				total += t[i];
			}
		}
	}
	report("posix_spawn", tp, n, plain);
	report(cg ? "spawn core (cgroup)" : "spawn core (pgid)", t, n, total);
	printf("ratio spawn/posix_spawn: mean = %.2f, median = %.2f, interleaved (tree control: "
	       "%s; "
	       "abstract sockets: %s; of %d spawns %d started vfork-style, %d born in their "
	       "cgroup: "
	       "docs/spawn.md)\n",
	       (double)total / (double)plain, (double)t[n / 2] / (double)tp[n / 2],
	       cg ? spawn_ctx_tree_control(ctx) : "pgid", sockets, n, vforked, born_in_cgroup);
	free(tp);
	spawn_ctx_free(ctx);
	free(t);
	return 0;
}
