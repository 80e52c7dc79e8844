/* Bench helper for bench/users.sh: time users_ensure in-process.
 *   bench-users ROOT existing AGENT_ID N   ensure an agent that already exists, N times
 *   bench-users ROOT create PREFIX N       create N agents PREFIX-0 … PREFIX-(N-1)
 * Prints "<what> n=N total_ms=… per_op_us=…". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sandbox-users/users.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	struct users_identity id;
	char agent[USERS_AGENT_ID_MAX + 1];
	double t0, t1;
	long n;

	if (argc != 5 || (n = strtol(argv[4], NULL, 10)) <= 0) {
		fprintf(stderr, "usage: bench-users ROOT existing|create ID|PREFIX N\n");
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
