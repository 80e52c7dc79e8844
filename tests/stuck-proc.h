#pragma once

/* Test support shared by the probe (`probe stuck CGROUP`) and test-spawn: a process that no
 * SIGKILL ends until the test lets it, as one in D state on a hung disk. */

#include <stdbool.h>
#include <sys/types.h>

/* The state letter of /proc/PID/stat (after the command's closing parenthesis), 0 when the
 * process is gone. */
char proc_state_of(pid_t pid);

/* The stuck process blocks in the kernel's mutex_lock (uninterruptible) on a pipe's mutex,
 * which a holder keeps while its own write into that pipe faults on a userfaultfd page
 * nobody serves (the holder sleeps killable: its SIGKILL lets the mutex go, and the stuck
 * one then dies of the SIGKILL it has pending). The stuck process is put in the cgroup
 * cg_fd before it blocks; its pid is returned, *ret_holder the holder's; -1 when it could
 * not be made (nothing left running). detach: both in sessions of their own with stdio on
 * /dev/null, for a caller that exits and leaves them running. */
pid_t stuck_process(int cg_fd, bool detach, pid_t *ret_holder);
