#include "lib/sig-util.h"
#include "lib/proc-status.h"

#include <errno.h>
#include <stdint.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's struct sigaction for rt_sigaction (not libc's, whose layout differs). */
struct k_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
};

/* Only the signals /proc/self/status says are ignored (SigIgn) or caught (SigCgt): one
 * read of the file instead of 64 rt_sigaction calls. -errno when it cannot tell. */
static int reset_listed(const char *status)
{
	char buf[4096];
	uint64_t ign, cgt, set;
	int r;

	if (!status) {
		if (proc_status_read(buf, sizeof(buf)) < 0)
			return -ENOENT;
		status = buf;
	}
	r = proc_status_hex(status, "SigIgn", &ign);
	if (r == 0)
		r = proc_status_hex(status, "SigCgt", &cgt);
	if (r < 0)
		return r;
	set = ign | cgt;
	for (int sig = 1; sig < 65; sig++) {
		struct k_sigaction dfl = {0};

		if (!(set & (UINT64_C(1) << (sig - 1))) || sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask)) < 0)
			return errno > 0 ? -errno : -EINVAL;
	}
	return 0;
}

int sigutil_reset_dispositions(void)
{
	return sigutil_reset_dispositions_status(NULL);
}

int sigutil_reset_dispositions_status(const char *status)
{
	if (reset_listed(status) == 0)
		return 0;
	/* No /proc (or a status without the lines): ask the kernel signal by signal. */
	for (int sig = 1; sig < 65; sig++) {
		struct k_sigaction old = {0}, dfl = {0};

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (syscall(SYS_rt_sigaction, sig, NULL, &old, sizeof(old.mask)) < 0)
			continue; /* not a signal number on this kernel */
		if (old.handler == (void *)SIG_DFL)
			continue;
		if (syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask)) < 0)
			return errno > 0 ? -errno : -EINVAL;
	}
	return 0;
}
