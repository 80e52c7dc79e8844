#pragma once

/* Internal to the spawn core: what the parent prepares for the child (fork-style, or
 * vfork-style: spawn-vfork.h), and the child's entry point. Everything the child needs is
 * computed before clone(); the child only makes system calls (no malloc, no stdio, no libc
 * locks) and writes only its own stack. */

#include <linux/filter.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "pistisd/privs.h"
#include "pistisd/seccomp-profile.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

/* clone3's struct clone_args, as far as Linux 5.7 (CLONE_INTO_CGROUP). */
struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
		set_tid_size, cgroup;
};

struct child_report {
	int step;  /* enum spawn_step */
	int error; /* errno */
};

struct child_args {
	int err_fd; /* CLOEXEC write end: a struct child_report on failure, EOF on exec */
	int stdin_fd, stdout_fd, stderr_fd;
	int ctty_fd; /* pty slave to make the controlling terminal, or -1 */
	int cgroup_procs_fd;
	int proc_fd;	   /* /proc (spawn_ctx's), for oom_score_adj */
	int oom_score_adj; /* written while root, or SPAWN_OOM_KEEP */
	int cwd_root_fd;
	int hold_fd; /* kept until set_ids, then closed (spawn_opts.hold_fd); < 3: none */
	/* The CPUs the command may run on, where its maker was held to one (spawn-vfork.c,
	 * same_cpu): set at step 6 (reset scheduling). NULL: it has its maker's already. */
	const cpu_set_t *affinity;
	const char *cwd;
	bool no_openat2;
	char *const *argv;
	char *const *envp;
	const char *path; /* PATH of envp */
	uid_t uid;
	gid_t gid;
	gid_t groups[PRIVS_MAX_GROUPS];
	size_t n_groups;
	struct {
		int resource;
		struct rlimit lim;
	} rl[8];
	int n_rl;
	mode_t umask;
	int last_cap;
	bool allow_setuid;
	bool scope_abstract; /* a Landlock domain of its own for abstract sockets (scope.h) */
	bool keyctl_refused; /* keyctl is refused to pistisd too (spawn_keyctl_refused) */
	bool audit_session;  /* set loginuid to uid: a new audit session (step 2c) */
	uint64_t bounding_keep;
	struct sock_fprog bpf;
	pid_t parent;
};

int spawn_child_main(void *arg);

/* Resolve rel beneath root_fd (openat2, or the per-component fallback) and return an
 * O_PATH fd of the directory; exposed for the unit tests. -ELOOP for a symlink, -EXDEV
 * for ".." or a mount crossing, -ENOTDIR. */
int spawn_resolve_dir(int root_fd, const char *rel, bool no_openat2);
