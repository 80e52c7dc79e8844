#pragma once

/* Internal to the spawn core: the vfork-style start (spawn-vfork.c, docs/spawn.md). */

#include <stdbool.h>
#include <sys/types.h>

struct child_args;

/* Whether a child sharing pistisd's memory is out of its agent's reach with this
 * fs.suid_dumpable value on this kernel release (uname -r), and this build can make one. */
bool spawn_vfork_allowed(int suid_dumpable, const char *release);

/* Make the spawner thread now, where this build can (it drops its bounding set once made),
 * so that its creation overlaps the caller's own work before the first start instead of
 * delaying it; the first spawn_vfork_start makes it otherwise. Nothing else changes: each
 * start still decides whether it goes this way. same_cpu (a process that starts one
 * command and waits for it: pistisd run): the thread runs on the CPU the caller runs on
 * now, and each child it makes gets the caller's CPU affinity back (child_args.affinity). */
void spawn_vfork_prepare(int last_cap, bool same_cpu);

/* Start the child of a (copied: the caller may free what a points to once this returns)
 * with CLONE_VM | CLONE_VFORK from the spawner thread: with clone3, born in cgroup_fd
 * unless it is -1, or with legacy clone (cgroup_fd ignored: a->cgroup_procs_fd joins).
 * Returns 0 with the pid and pidfd once the child runs (its exec is then awaited through
 * a->err_fd as for a fork-style child); -EBUSY while the last such child has not exec'd,
 * -EOPNOTSUPP where this build or process cannot, else the clone's -errno. */
int spawn_vfork_start(const struct child_args *a, bool legacy, int cgroup_fd, pid_t *ret_pid,
		      int *ret_pidfd);
