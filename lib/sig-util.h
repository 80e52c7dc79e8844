#pragma once

/* Put every signal disposition back to SIG_DFL, ignored ones included, through the raw
 * rt_sigaction syscall: libc refuses the numbers it keeps for itself (musl: 32-34) with
 * EINVAL, yet an SIG_IGN inherited on them survives execve all the same. Handlers and
 * SIG_IGN alike go; SIGKILL and SIGSTOP cannot change. Which ones are not SIG_DFL is read
 * from /proc/self/status (SigIgn, SigCgt); without it each of the 64 is asked.
 * Async-signal-safe (no libc state), so it may run in a vfork-style child. Returns 0 or
 * -errno. */
int sigutil_reset_dispositions(void);
/* The same, from status: the calling process's /proc/self/status as proc_status_read gave
 * it, read since the last change of a disposition (NULL: read it here). */
int sigutil_reset_dispositions_status(const char *status);
