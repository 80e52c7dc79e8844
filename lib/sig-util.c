#include "lib/sig-util.h"

#include <errno.h>
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

int sigutil_reset_dispositions(void)
{
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
