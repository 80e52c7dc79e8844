/* Bench helper for bench/users.sh.
 *   bench-users ROOT existing AGENT_ID N   ensure an agent that already exists, N times,
 *                                          in-process
 *   bench-users ROOT create PREFIX N       create N agents PREFIX-0 … PREFIX-(N-1),
 *                                          in-process
 *   bench-users pair N [--settle DIR] CMD_A... -- CMD_B...
 *                                          run A then B, N times, interleaved: each run
 *                                          spawned alone (posix_spawn: vfork+exec, like
 *                                          hyperfine -N) and timed with CLOCK_MONOTONIC
 *                                          from spawn to reaped exit; "{}" in any argument
 *                                          becomes the step number 1..N; stdout and stderr
 *                                          go to /dev/null, every exit status must be 0.
 *                                          CMD_A and CMD_B are absolute paths. With
 *                                          --settle, the file system holding DIR is synced
 *                                          (syncfs, untimed) before every run: each run's
 *                                          fsyncs then flush only what that run wrote, not
 *                                          what the other side left for writeback.
 * Prints "<what> n=N total_ms=… per_op_us=…", or for pair one line per side with the
 * mean, median, p10 and p90 in µs and the ratios B/A. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox-users/users.h"

extern char **environ;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* argv with every "{}" replaced by step; the strings live in buf. */
static int expand(char **tmpl, size_t n, long step, char **out, char *buf, size_t size)
{
	char num[24];
	size_t used = 0;

	snprintf(num, sizeof(num), "%ld", step);
	for (size_t i = 0; i < n; i++) {
		const char *s = tmpl[i], *hole = strstr(s, "{}");
		int w = hole ? snprintf(buf + used, size - used, "%.*s%s%s", (int)(hole - s), s,
					num, hole + 2)
			     : snprintf(buf + used, size - used, "%s", s);
		if (w < 0 || (size_t)w >= size - used)
			return -E2BIG;
		out[i] = buf + used;
		used += (size_t)w + 1;
	}
	out[n] = NULL;
	return 0;
}

/* One run of argv, from posix_spawn to the reaped exit, in µs; -1 if it failed. */
static double run_one(char **argv, const posix_spawn_file_actions_t *fa)
{
	double t0 = now_us(), t1;
	pid_t pid;
	int st = -1, r;

	r = posix_spawn(&pid, argv[0], fa, NULL, argv, environ);
	if (r != 0) {
		fprintf(stderr, "bench-users: cannot spawn '%s': %s\n", argv[0], strerror(r));
		return -1;
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	t1 = now_us();
	if (st != 0) {
		fprintf(stderr, "bench-users: '%s %s' failed (wait status %d)\n", argv[0],
			argv[1] ? argv[1] : "", st);
		return -1;
	}
	return t1 - t0;
}

static void report(const char *what, double *t, long n, double *ret_mean, double *ret_med)
{
	double sum = 0;

	for (long i = 0; i < n; i++)
		sum += t[i];
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	*ret_mean = sum / (double)n;
	*ret_med = t[n / 2];
	printf("%s n=%ld mean_us=%.0f median_us=%.0f p10_us=%.0f p90_us=%.0f\n", what, n, *ret_mean,
	       *ret_med, t[n / 10], t[n * 9 / 10]);
}

static int pair(long n, char **argv, int argc, int settle)
{
	static char buf_a[8192], buf_b[8192];
	char *a[64], *b[64];
	int sep = -1, na, nb;
	posix_spawn_file_actions_t fa;
	double *ta, *tb, mean_a, med_a, mean_b, med_b;
	int devnull;

	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			sep = i;
			break;
		}
	na = sep;
	nb = argc - sep - 1;
	if (sep < 1 || nb < 1 || na >= 63 || nb >= 63 || argv[0][0] != '/' ||
	    argv[sep + 1][0] != '/') {
		fprintf(stderr, "usage: bench-users pair N [--settle DIR] /CMD_A [ARG]... -- "
				"/CMD_B [ARG]...\n");
		return 100;
	}
	ta = calloc((size_t)n, sizeof(*ta));
	tb = calloc((size_t)n, sizeof(*tb));
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (!ta || !tb || devnull < 0)
		return 111;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, devnull, 1);
	posix_spawn_file_actions_adddup2(&fa, devnull, 2);
	/* Interleaved, so that both sides see the same load on a shared machine. */
	for (long i = 0; i < n; i++) {
		if (expand(argv, (size_t)na, i + 1, a, buf_a, sizeof(buf_a)) < 0 ||
		    expand(argv + sep + 1, (size_t)nb, i + 1, b, buf_b, sizeof(buf_b)) < 0)
			return 100;
		if (settle >= 0)
			(void)syncfs(settle);
		ta[i] = run_one(a, &fa);
		if (settle >= 0)
			(void)syncfs(settle);
		tb[i] = run_one(b, &fa);
		if (ta[i] < 0 || tb[i] < 0)
			return 111;
	}
	report("A", ta, n, &mean_a, &med_a);
	report("B", tb, n, &mean_b, &med_b);
	printf("ratio B/A mean=%.2f median=%.2f\n", mean_b / mean_a, med_b / med_a);
	return 0;
}

int main(int argc, char **argv)
{
	struct users_identity id;
	char agent[USERS_AGENT_ID_MAX + 1];
	double t0, t1;
	long n;

	if (argc > 4 && !strcmp(argv[1], "pair") && (n = strtol(argv[2], NULL, 10)) > 0) {
		int settle = -1;
		if (!strcmp(argv[3], "--settle")) {
			settle = open(argv[4], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (settle < 0) {
				fprintf(stderr, "bench-users: cannot open '%s': %s\n", argv[4],
					strerror(errno));
				return 111;
			}
			argv += 2;
			argc -= 2;
		}
		return pair(n, argv + 3, argc - 3, settle);
	}
	if (argc != 5 || (n = strtol(argv[4], NULL, 10)) <= 0) {
		fprintf(stderr,
			"usage: bench-users ROOT existing|create ID|PREFIX N\n"
			"       bench-users pair N [--settle DIR] /CMD_A [ARG]... -- /CMD_B "
			"[ARG]...\n");
		return 100;
	}
	if (!strcmp(argv[2], "existing")) {
		int r = users_ensure(argv[1], argv[3], (uid_t)-1, &id); /* warm: create if new */
		if (r < 0) {
			fprintf(stderr, "ensure: %s: %s\n", users_last_error(), strerror(-r));
			return 111;
		}
		t0 = now_us();
		for (long i = 0; i < n; i++)
			if (users_ensure(argv[1], argv[3], (uid_t)-1, &id) < 0)
				return 111;
		t1 = now_us();
	} else if (!strcmp(argv[2], "create")) {
		t0 = now_us();
		for (long i = 0; i < n; i++) {
			snprintf(agent, sizeof(agent), "%s-%ld", argv[3], i);
			int r = users_ensure(argv[1], agent, (uid_t)-1, &id);
			if (r < 0) {
				fprintf(stderr, "ensure %s: %s: %s\n", agent, users_last_error(),
					strerror(-r));
				return 111;
			}
		}
		t1 = now_us();
	} else
		return 100;
	printf("%s n=%ld total_ms=%.1f per_op_us=%.1f\n", argv[2], n, (t1 - t0) / 1e3,
	       (t1 - t0) / (double)n);
	return 0;
}
