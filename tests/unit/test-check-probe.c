/* `pistisd check`'s probes that fork (the real check.c, compiled in here), with waitpid
 * redirected to a seam that can fail or report the child killed: only a child's own exit
 * may decide a probe, and a wait that saw none must not read as a pass. */
#include <errno.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

static pid_t seam_waitpid(pid_t pid, int *status, int options);
#define waitpid seam_waitpid
#include "pistisd/check.c"
#undef waitpid

#include "lib/tap.h"

static enum {
	SEAM_REAL,
	SEAM_ECHILD,	 /* the child reaped by someone else (SIGCHLD ignored by our parent) */
	SEAM_KILLED,	 /* the child killed by SIGSYS (a container's profile that kills) */
	SEAM_EINTR_ONCE, /* interrupted once, then the real wait */
} seam;

static pid_t seam_waitpid(pid_t pid, int *status, int options)
{
	int real = 0;
	pid_t r;

	if (seam == SEAM_EINTR_ONCE) {
		seam = SEAM_REAL;
		errno = EINTR;
		return -1;
	}
	r = waitpid(pid, &real, options); /* reaped in every case: no zombie left */
	switch (seam) {
	case SEAM_ECHILD:
		errno = ECHILD;
		return -1;
	case SEAM_KILLED:
		*status = SIGSYS; /* a wait status: killed by signal SIGSYS, no core */
		return r;
	default:
		*status = real;
		return r;
	}
}

/* The seccomp row of a report made for it alone, copied out (the report is freed). */
static const struct check_result *seccomp_probed(void)
{
	static struct check_result res;
	struct check_report *r = check_report_new("/");

	if (!r)
		return NULL;
	probe_seccomp(r);
	res = r->results[CHECK_SECCOMP];
	check_report_free(r);
	return &res;
}

TEST(seccomp_probe_passes_on_the_real_wait)
{
	const struct check_result *c = seccomp_probed();

	ASSERT_NOT_NULL(c);
	ASSERT_EQ((int)c->status, (int)CHECK_STATUS_OK);
}

TEST(seccomp_probe_retries_an_interrupted_wait)
{
	const struct check_result *c;

	seam = SEAM_EINTR_ONCE;
	c = seccomp_probed();
	ASSERT_NOT_NULL(c);
	ASSERT_EQ((int)c->status, (int)CHECK_STATUS_OK);
}

TEST(seccomp_probe_fails_when_the_wait_fails)
{
	const struct check_result *c;

	seam = SEAM_ECHILD;
	c = seccomp_probed();
	ASSERT_NOT_NULL(c);
	ASSERT_EQ((int)c->status, (int)CHECK_STATUS_FAIL);
	ASSERT_NOT_NULL(strstr(c->value, "cannot probe: waitpid: "));
	ASSERT_NOT_NULL(strstr(c->value, strerror(ECHILD)));
}

TEST(seccomp_probe_fails_when_the_child_is_killed)
{
	const struct check_result *c;
	char want[64];

	seam = SEAM_KILLED;
	c = seccomp_probed();
	ASSERT_NOT_NULL(c);
	ASSERT_EQ((int)c->status, (int)CHECK_STATUS_FAIL);
	snprintf(want, sizeof(want), "killed by signal %d (", SIGSYS);
	ASSERT_NOT_NULL(strstr(c->value, want));
}

TEST_HARNESS_MAIN
