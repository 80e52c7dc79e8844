#include "lib/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Exit codes of a test child: 0 pass, 1 fail, 4 skip (kselftest's KSFT_SKIP). */
enum { TAP_EXIT_PASS = 0, TAP_EXIT_FAIL = 1, TAP_EXIT_SKIP = 4 };

static struct tap_metadata *head, *tail;

/* A byte shared with the runner, which a test child sets when its function has returned
 * ('e') or SKIP() ended it ('s'). An exit code alone cannot tell a test that ran to its
 * end from code under test that called exit(0) (or exit(4)) halfway, before the
 * assertions that would have failed. Memory, not a pipe: tests close every fd. */
static volatile char *ended;

static void tap_ended(char how)
{
	if (ended)
		*ended = how;
}

void tap_register(struct tap_metadata *m)
{
	/* Constructors run in file order: keep registration order for stable numbering. */
	if (tail)
		tail->next = m;
	else
		head = m;
	tail = m;
}

void tap_report(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stdout, "# %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

void tap_skip(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	(void)file, (void)line;
	fprintf(stdout, "# SKIP ");
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	tap_ended('s');
	_exit(TAP_EXIT_SKIP);
}

void tap_fail_now(void)
{
	fflush(stdout);
	_exit(TAP_EXIT_FAIL);
}

/* ThreadSanitizer runs these tests 5 to 15 times slower (`make check-tsan`): the same
 * tests, longer clocks. */
#ifdef PISTIS_TSAN
#define TIMEOUT_SCALE 8u
#else
#define TIMEOUT_SCALE 1u
#endif

static int wait_with_timeout(pid_t pid, unsigned timeout, int *status, int *timed_out)
{
	struct timespec start, now;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

	clock_gettime(CLOCK_MONOTONIC, &start);
	*timed_out = 0;
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			if (pidfd >= 0)
				close(pidfd);
			return -errno;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		long elapsed_ms = (now.tv_sec - start.tv_sec) * 1000 +
				  (now.tv_nsec - start.tv_nsec) / 1000000;
		if (elapsed_ms >= (long)timeout * 1000) {
			*timed_out = 1;
			kill(pid, SIGKILL);
			while (waitpid(pid, status, 0) < 0 && errno == EINTR)
				;
			break;
		}
		if (pidfd >= 0) {
			struct pollfd p = {.fd = pidfd, .events = POLLIN};
			long left = (long)timeout * 1000 - elapsed_ms;
			(void)poll(&p, 1, left > 1000 ? 1000 : (int)left);
		} else {
			usleep(10000);
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	return 0;
}

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>

/* LeakSanitizer's check stops the process's threads by ptrace from a thread of its own,
 * which a child that gave up root's dumpable flag or sits under a seccomp filter cannot
 * do (LSan then dies, failing a test that passed). Read Seccomp from our own status. */
static int leak_check_possible(void)
{
	char buf[4096];
	ssize_t r;
	int fd;

	if (prctl(PR_GET_DUMPABLE) != 1 && geteuid() != 0)
		return 0;
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return 0;
	buf[r] = '\0';
	const char *s = strstr(buf, "\nSeccomp:");
	return s && strtol(s + strlen("\nSeccomp:"), NULL, 10) == 0;
}

/* A test child ends with _exit, which skips LeakSanitizer's check at exit: run it here,
 * so `make check-asan` fails a test whose code path leaks. */
static void leak_check(struct tap_metadata *t)
{
	if (t->failed || !leak_check_possible())
		return;
	if (__lsan_do_recoverable_leak_check()) {
		printf("# memory leaked (LeakSanitizer's report is on stderr)\n");
		t->failed = 1;
	}
}
#else
static void leak_check(struct tap_metadata *t)
{
	(void)t;
}
#endif

static int run_one(struct tap_metadata *t, unsigned n)
{
	int status = 0, timed_out = 0;
	const char *verdict = NULL;
	char detail[128] = "";
	pid_t pid;

	fflush(stdout);
	*ended = 0;
	pid = fork();
	if (pid < 0) {
		printf("not ok %u %s # fork: %s\n", n, t->name, strerror(errno));
		return TAP_EXIT_FAIL;
	}
	if (pid == 0) {
		/* Own process group, so a test that spawns children can be reaped as a whole. */
		setpgid(0, 0);
		t->fn(t);
		leak_check(t);
		fflush(stdout);
		tap_ended('e');
		_exit(t->failed ? TAP_EXIT_FAIL : TAP_EXIT_PASS);
	}
	(void)wait_with_timeout(pid, t->timeout * TIMEOUT_SCALE, &status, &timed_out);
	kill(-pid, SIGKILL);

	int result = TAP_EXIT_FAIL;
	if (timed_out) {
		snprintf(detail, sizeof(detail), " # timed out after %us",
			 t->timeout * TIMEOUT_SCALE);
	} else if (WIFSIGNALED(status)) {
		if (t->term_signal && WTERMSIG(status) == t->term_signal)
			result = TAP_EXIT_PASS;
		else
			snprintf(detail, sizeof(detail), " # killed by signal %d",
				 WTERMSIG(status));
	} else if (WIFEXITED(status)) {
		int code = WEXITSTATUS(status);
		if (t->term_signal) {
			snprintf(detail, sizeof(detail), " # exited %d, expected signal %d", code,
				 t->term_signal);
		} else if ((code == TAP_EXIT_PASS && *ended == 'e') ||
			   (code == TAP_EXIT_SKIP && *ended == 's')) {
			result = code;
		} else if (code == TAP_EXIT_PASS || code == TAP_EXIT_SKIP) {
			snprintf(detail, sizeof(detail), " # exited %d before the test's end",
				 code);
		} else if (code != TAP_EXIT_FAIL) {
			snprintf(detail, sizeof(detail), " # exited %d", code);
		}
	}
	verdict = result == TAP_EXIT_FAIL ? "not ok" : "ok";
	printf("%s %u %s%s%s\n", verdict, n, t->name, result == TAP_EXIT_SKIP ? " # SKIP" : "",
	       detail);
	fflush(stdout);
	return result;
}

int tap_main(int argc, char **argv)
{
	const char *filter = NULL, *exact = NULL;
	unsigned n = 0, passed = 0, failed = 0, skipped = 0, planned = 0;

	if (argc > 2 && strcmp(argv[1], "-f") == 0)
		filter = argv[2];
	else if (argc > 1)
		exact = argv[1];

	setvbuf(stdout, NULL, _IOLBF, 0);
	void *page = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED) {
		printf("Bail out! mmap: %s\n", strerror(errno));
		return 1;
	}
	ended = page;
	for (struct tap_metadata *t = head; t; t = t->next)
		if ((!filter || strstr(t->name, filter)) && (!exact || !strcmp(t->name, exact)))
			planned++;
	printf("TAP version 13\n1..%u\n", planned);
	for (struct tap_metadata *t = head; t; t = t->next) {
		if ((filter && !strstr(t->name, filter)) || (exact && strcmp(t->name, exact)))
			continue;
		switch (run_one(t, ++n)) {
		case TAP_EXIT_PASS:
			passed++;
			break;
		case TAP_EXIT_SKIP:
			skipped++;
			break;
		default:
			failed++;
			break;
		}
	}
	printf("# %u passed, %u failed, %u skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}
