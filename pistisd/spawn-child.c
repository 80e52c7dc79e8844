/* The spawn child: from clone() to execve(), in the order docs/spawn.md explains.
 * It is either a fork-style child (a raw clone without CLONE_VM: its own copy of pistisd's
 * memory) or a vfork-style one (spawn-vfork.c: pistisd's memory itself, while the thread
 * that made it waits). Either way libc's state is not updated for it, so it uses raw system
 * calls only and writes nothing but its own stack (and errno): no malloc, no stdio, nothing
 * that takes a libc lock or relies on libc knowing its thread (musl's setrlimit/set*id
 * broadcast to "all threads", which would be pistisd's). */
#include "pistisd/spawn-child.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/keyctl.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"
#include "lib/proc-status.h"
#include "lib/sig-util.h"
#include "pistisd/scope.h"
#include "pistisd/spawn.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* Report the failing step and errno to the parent, then exit. Never returns. */
_noreturn_ static void fail(const struct child_args *a, enum spawn_step step, int err)
{
	struct child_report rep = {.step = step, .error = err > 0 ? err : -err};

	if (rep.error == 0)
		rep.error = EIO;
	(void)syscall(SYS_write, a->err_fd, &rep, sizeof(rep));
	syscall(SYS_exit_group, step == SPAWN_STEP_EXEC		 ? (rep.error == ENOENT ? 127 : 126)
				: step == SPAWN_STEP_EXEC_INTERP ? 126
								 : 111);
	__builtin_unreachable();
}

static int setup_stdio(const struct child_args *a)
{
	if (a->ctty_fd >= 0 && syscall(SYS_ioctl, a->ctty_fd, TIOCSCTTY, 0) < 0)
		return negative_errno();
	/* dup2 clears FD_CLOEXEC on the target: exactly 0, 1, 2 survive execve. The sources
	 * are >= 3 (spawn_ctx_new_why made sure 0-2 exist), so no dup2 clobbers a later source. */
	if (syscall(SYS_dup2, a->stdin_fd, 0) < 0 || syscall(SYS_dup2, a->stdout_fd, 1) < 0 ||
	    syscall(SYS_dup2, a->stderr_fd, 2) < 0)
		return negative_errno();
	return 0;
}

static int resolve_fallback(int root_fd, const char *rel)
{
	char buf[4096];
	struct stat root_st, st;
	size_t len = strlen(rel);
	int cur = -1;

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	if (rel[0] == '/')
		return -EXDEV; /* what RESOLVE_BENEATH says for an absolute path */
	memcpy(buf, rel, len + 1);
	if (fstat(root_fd, &root_st) < 0)
		return negative_errno();
	cur = (int)syscall(SYS_openat, root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return negative_errno();
	for (char *c = buf, *next; c && *c; c = next) {
		int fd;

		next = strchr(c, '/');
		if (next)
			*next++ = 0;
		if (!*c || !strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			safe_close(cur);
			return -EXDEV;
		}
		/* One component at a time, never following a symlink; O_PATH still needs
		 * search permission on cur, checked as the agent. */
		fd = (int)syscall(SYS_openat, cur, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		safe_close(cur);
		if (fd < 0)
			return negative_errno();
		cur = fd;
		if (fstat(cur, &st) < 0) {
			safe_close(cur);
			return negative_errno();
		}
		if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
			safe_close(cur);
			return S_ISLNK(st.st_mode) ? -ELOOP : -ENOTDIR;
		}
		/* No mount crossing (a bind mount of the same device is not seen here; openat2's
		 * RESOLVE_NO_XDEV sees it). */
		if (st.st_dev != root_st.st_dev) {
			safe_close(cur);
			return -EXDEV;
		}
	}
	return cur;
}

int spawn_resolve_dir(int root_fd, const char *rel, bool no_openat2)
{
	if (!rel || !*rel)
		rel = ".";
	if (!no_openat2) {
		struct open_how how = {
			.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
				   RESOLVE_NO_XDEV,
		};
		long fd = syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));

		if (fd >= 0)
			return (int)fd;
		if (errno != ENOSYS && errno != E2BIG)
			return negative_errno();
	}
	return resolve_fallback(root_fd, rel);
}

/* execve said ENOENT: is it path itself that is missing, or what the file names to run it
 * (a #! line's interpreter, an ELF program's loader)? Asked as the agent, like the exec. */
static bool exists_as_agent(const char *path)
{
	return syscall(SYS_faccessat, AT_FDCWD, path, F_OK, 0) == 0;
}

/* -errno of the exec; *interp set when ENOENT came from a missing interpreter. */
static int exec_search(const struct child_args *a, bool *interp)
{
	const char *file = a->argv[0], *p = a->path;
	size_t flen = strlen(file);
	char buf[4096];
	bool eacces = false;

	*interp = false;
	if (strchr(file, '/')) {
		int r;

		syscall(SYS_execve, file, a->argv, a->envp);
		r = negative_errno();
		if (r == -ENOENT && exists_as_agent(file))
			*interp = true;
		return r;
	}
	if (flen > NAME_MAX)
		return -ENAMETOOLONG;
	/* The agent's PATH (the new environment's), never pistisd's. Empty elements would
	 * mean "the current directory"; they are skipped, not honoured. */
	while (*p) {
		const char *e = strchrnul(p, ':');
		size_t l = (size_t)(e - p);

		if (l > 0 && l + 1 + flen < sizeof(buf)) {
			memcpy(buf, p, l);
			buf[l] = '/';
			memcpy(buf + l + 1, file, flen + 1);
			syscall(SYS_execve, buf, a->argv, a->envp);
			switch (errno) {
			case EACCES:
				eacces = true;
				break;
			case ENOENT:
				if (exists_as_agent(buf))
					*interp = true;
				break;
			case ENOTDIR:
			case ENAMETOOLONG:
			case ELOOP:
			case ESTALE:
			case ENODEV:
			case ETIMEDOUT:
				break;
			default:
				return negative_errno();
			}
		}
		p = *e ? e + 1 : e;
	}
	/* as execvp: a file found but refused says so over one not found elsewhere */
	return eacces ? -EACCES : -ENOENT;
}

/* The Landlock scope, then the seccomp filter: at step 8 (allow_setuid) or 13. The scope
 * first, as the filter may forbid the landlock calls; both need no_new_privs or, with
 * allow_setuid, CAP_SYS_ADMIN. */
static int confine(const struct child_args *a, enum spawn_step *ret_step)
{
	int r = a->scope_abstract ? scope_restrict_self() : 0;

	if (r < 0) {
		*ret_step = SPAWN_STEP_SCOPE;
		return r;
	}
	/* The BPF was compiled once at start-up; here it is one system call. TSYNC is not
	 * needed: the child is a single thread. */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &a->bpf) < 0) {
		*ret_step = SPAWN_STEP_SECCOMP;
		return negative_errno();
	}
	return 0;
}

static int set_ids(const struct child_args *a, enum spawn_step *ret_step)
{
	int r;

	/* setgroups before setresgid before setresuid: each needs the privilege the next one
	 * gives up (CAP_SETGID is gone after setresuid). */
	*ret_step = SPAWN_STEP_SETGROUPS;
	r = privs_setgroups(a->groups, a->n_groups);
	if (r < 0)
		return r;
	*ret_step = SPAWN_STEP_SETRESGID;
	r = privs_setresgid(a->gid);
	if (r < 0)
		return r;
	*ret_step = SPAWN_STEP_SETRESUID;
	return privs_setresuid(a->uid);
}

/* Where close_range is refused (a container's seccomp profile older than it says EPERM,
 * a kernel before 5.9 ENOSYS): every fd from 3 but keep[0..2] and the directory itself,
 * found in /proc/self/fd. The directory is opened once, at the first call (as root, before
 * the id change: afterwards the non-dumpable child's /proc/self/fd is root's, not its
 * own) and kept in *dir_fd (O_CLOEXEC: execve closes it). Raw system calls and the stack
 * only: a vfork-style child shares pistisd's memory. */
static int close_fds_by_proc(const int keep[3], int *dir_fd)
{
	char buf[2048] __attribute__((aligned(8)));
	long n;

	if (*dir_fd < 0) {
		*dir_fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/fd",
				       O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (*dir_fd < 0)
			return -errno;
	}
	if (syscall(SYS_lseek, *dir_fd, 0, SEEK_SET) < 0)
		return -errno;
	/* Closing an fd does not move the others' entries: /proc/PID/fd is listed by fd
	 * number from where the last read stopped. */
	while ((n = syscall(SYS_getdents64, *dir_fd, buf, sizeof(buf))) > 0) {
		for (long pos = 0; pos < n;) {
			const struct linux_dirent64 *d = (const void *)(buf + pos);
			long fd = 0;
			const char *c = d->d_name;

			pos += d->d_reclen;
			if (*c < '0' || *c > '9')
				continue; /* "." and ".." */
			for (; *c >= '0' && *c <= '9' && fd < INT_MAX / 10; c++)
				fd = fd * 10 + (*c - '0');
			if (*c || fd < 3 || fd == keep[0] || fd == keep[1] || fd == keep[2] ||
			    fd == *dir_fd)
				continue;
			syscall(SYS_close, (int)fd);
		}
	}
	return n < 0 ? -errno : 0;
}

/* close_range over everything from 3 except the three fds in keep (any may be < 3, or the
 * same as another); where close_range is refused, close_fds_by_proc (*dir_fd: its
 * directory, -1 at first). */
static int close_fds_but(int keep1, int keep2, int keep3, int *dir_fd)
{
	int keep[3] = {keep1, keep2, keep3};
	unsigned from = 3;

	if (*dir_fd >= 0)
		return close_fds_by_proc(keep, dir_fd);
	for (int i = 1; i < 3; i++) /* ascending, for the ranges between them */
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	for (int k = 0; k < 3; k++) {
		if (keep[k] < (int)from)
			continue;
		if ((unsigned)keep[k] > from && syscall(SYS_close_range, from, keep[k] - 1, 0) < 0)
			goto refused;
		from = (unsigned)keep[k] + 1;
	}
	if (syscall(SYS_close_range, from, ~0U, 0) == 0)
		return 0;
refused:
	if (errno != ENOSYS && errno != EPERM && errno != EINVAL)
		return -errno;
	return close_fds_by_proc(keep, dir_fd);
}

/* Writes v in decimal to /proc/self/<name> through proc_fd. Raw syscalls: this may run
 * in a vfork-style child. */
static int proc_self_write(int proc_fd, const char *name, long v)
{
	char buf[24], *p = buf + sizeof(buf);
	unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v;
	int n, fd;
	long w;

	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	n = (int)(buf + sizeof(buf) - p);
	fd = (int)syscall(SYS_openat, proc_fd, name, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	w = syscall(SYS_write, fd, p, n);
	n = w == n ? 0 : w < 0 ? -errno : -EIO;
	syscall(SYS_close, fd);
	return n;
}

/* The OOM killer takes the command before pistisd (spawn_oom_score_adj): where no memory
 * cgroup holds an agent, one with many processes each smaller than pistisd made pistisd
 * the largest, and so the victim. Written while root (CAP_SYS_RESOURCE), the value is
 * also the floor the agent may not set itself below. */
static int set_oom_score_adj(const struct child_args *a)
{
	if (a->oom_score_adj == SPAWN_OOM_KEEP)
		return 0;
	return proc_self_write(a->proc_fd, "self/oom_score_adj", a->oom_score_adj);
}

#define SPAWN_SCHED_DEADLINE 6
#define SPAWN_IOPRIO_WHO_PROCESS 1
#define SPAWN_IOPRIO_CLASS_SHIFT 13
#define SPAWN_IOPRIO_CLASS_RT 1
#define SPAWN_IOPRIO_CLASS_BE 2

/* A real-time policy, a real-time I/O class and a negative nice value are inherited, and
 * RLIMIT_RTPRIO and RLIMIT_NICE of 0 only keep a process from taking them: those pistisd
 * was started with (chrt, ionice, systemd's CPUSchedulingPolicy= or Nice=) would pass to
 * every command, which could then starve pistisd and the other agents (red team). Back to
 * SCHED_OTHER, best effort and nice 0, as root. Raw syscalls (a vfork-style child). */
static int reset_sched(void)
{
	struct sched_param sp = {0};
	long pol = syscall(SYS_sched_getscheduler, 0), io, nice;

	if (pol < 0)
		return -errno;
	pol &= ~(long)SCHED_RESET_ON_FORK;
	if ((pol == SCHED_FIFO || pol == SCHED_RR || pol == SPAWN_SCHED_DEADLINE) &&
	    syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &sp) < 0)
		return -errno;
	io = syscall(SYS_ioprio_get, SPAWN_IOPRIO_WHO_PROCESS, 0);
	if (io >= 0 && (io >> SPAWN_IOPRIO_CLASS_SHIFT) == SPAWN_IOPRIO_CLASS_RT &&
	    syscall(SYS_ioprio_set, SPAWN_IOPRIO_WHO_PROCESS, 0,
		    (SPAWN_IOPRIO_CLASS_BE << SPAWN_IOPRIO_CLASS_SHIFT) | 4) < 0)
		return -errno;
	/* The raw getpriority answers 20 - nice (1..40): above 20 is a negative nice. */
	nice = syscall(SYS_getpriority, PRIO_PROCESS, 0);
	if (nice > 20 && syscall(SYS_setpriority, PRIO_PROCESS, 0, 0) < 0)
		return -errno;
	return 0;
}

/* The CPUs pistisd may run on, for a child made by a spawner thread held to one of them
 * (spawn-vfork.c). Where that set is no longer allowed (a cpuset shrunk meanwhile), every
 * CPU, which the kernel narrows to the cpuset: never the one CPU for the whole command. */
static int reset_affinity(const cpu_set_t *affinity)
{
	cpu_set_t all;

	if (!affinity || syscall(SYS_sched_setaffinity, 0, sizeof(*affinity), affinity) == 0)
		return 0;
	memset(&all, 0xff, sizeof(all));
	return syscall(SYS_sched_setaffinity, 0, sizeof(all), &all) == 0 ? 0 : -errno;
}

int spawn_child_main(void *arg)
{
	const struct child_args *a = arg;
	enum spawn_step step = SPAWN_STEP_NONE;
	sigset_t none;
	bool interp = false;
	int r, fd, fd_dir = -1; /* /proc/self/fd, where close_range is refused */
	/* One read of /proc/self/status serves the signal reset and the bounding set's
	 * read-back (the child's own: its dispositions and credentials as it was made). */
	char status_buf[4096];
	const char *status =
		proc_status_read(status_buf, sizeof(status_buf)) >= 0 ? status_buf : NULL;

	/* Handlers are pistisd's code: every disposition back to SIG_DFL, ignored ones too
	 * (an inherited SIG_IGN survives execve). The mask stays full until just before execve. */
	r = sigutil_reset_dispositions_status(status);
	if (r < 0)
		fail(a, SPAWN_STEP_SIGNALS, r);

	/* Into the command's cgroup first, so everything after (and every fork of the
	 * command) is accounted and killable. */
	if (a->cgroup_procs_fd >= 0 && syscall(SYS_write, a->cgroup_procs_fd, "0", 1) < 0)
		fail(a, SPAWN_STEP_CGROUP, errno);
	r = set_oom_score_adj(a);
	if (r < 0)
		fail(a, SPAWN_STEP_OOM_SCORE, r);
	/* An audit session of the command's own, which every process it starts inherits,
	 * setsid() or not, and which only CAP_AUDIT_CONTROL can change (the loginuid of an
	 * unset one is set once without it). With a cgroup too: left unset, the agent could
	 * set it once itself, to another agent's uid, and the host's audit records would name
	 * that one. Without a cgroup the parent finds the tree by it (docs/spawn.md, "Process
	 * trees"). Refused (set already and no CAP_AUDIT_CONTROL, or made immutable): the
	 * process group alone, which the parent sees and says. */
	if (a->audit_session)
		(void)proc_self_write(a->proc_fd, "self/loginuid", (long)a->uid);

	/* A new session: no controlling terminal (pistisd's, if any, is out of reach: no
	 * TIOCSTI on it, CVE-2017-5226) and a process group of its own for pgid kills. */
	if (syscall(SYS_setsid) < 0)
		fail(a, SPAWN_STEP_SETSID, errno);
	r = setup_stdio(a);
	if (r < 0)
		fail(a, a->ctty_fd >= 0 ? SPAWN_STEP_CTTY : SPAWN_STEP_STDIO, r);
	/* From here on only the error pipe and the working directory's root are needed: the
	 * rest of pistisd's fds go now, not at the end, so that a child the agent stops once
	 * it has the agent's uid (up to the exec deadline) holds no pipe, socket or pidfd of
	 * the daemon's, and no other command's pipe waits for its EOF on it. */
	r = close_fds_but(a->err_fd, a->cwd_root_fd, a->hold_fd, &fd_dir);
	if (r < 0)
		fail(a, SPAWN_STEP_CLOSE_FDS, r);

	/* A fresh anonymous session keyring: pistisd's keys are not the agent's. Done as root
	 * because with allow_setuid the seccomp filter (which forbids keyctl) is already on
	 * before the id change. ENOSYS: kernel without CONFIG_KEYS, nothing to hide. EPERM
	 * where keyctl is refused to pistisd itself (Docker's default seccomp profile): that
	 * filter binds every process below pistisd as ours does, so no key can be read or
	 * used; the keyring stays pistisd's (docs/spawn.md, step 4). */
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0) < 0 && errno != ENOSYS &&
	    !(a->keyctl_refused && (errno == EPERM || errno == EACCES)))
		fail(a, SPAWN_STEP_KEYRING, errno);

	/* rlimits while root may still raise hard limits; prlimit64, not setrlimit (musl's
	 * setrlimit is a broadcast to all of the process's threads). */
	for (int i = 0; i < a->n_rl; i++)
		if (syscall(SYS_prlimit64, 0, a->rl[i].resource, &a->rl[i].lim, NULL) < 0)
			fail(a, SPAWN_STEP_RLIMIT, errno);
	r = reset_sched();
	if (r >= 0)
		r = reset_affinity(a->affinity);
	if (r < 0)
		fail(a, SPAWN_STEP_SCHED, r);
	syscall(SYS_umask, a->umask);

	/* The bounding set needs CAP_SETPCAP to shrink: before the uid change. */
	r = privs_drop_bounding(a->last_cap, a->bounding_keep, status);
	if (r < 0)
		fail(a, SPAWN_STEP_BOUNDING, r);

	/* allow_setuid: no no_new_privs (it would stop sudo), so the filter goes on while we
	 * still hold CAP_SYS_ADMIN, which lets a process install one without no_new_privs. */
	if (a->allow_setuid) {
		r = confine(a, &step);
		if (r < 0)
			fail(a, step, r);
	}

	r = set_ids(a, &step);
	if (r < 0)
		fail(a, step, r);
	/* The caller's lock (spawn_opts.hold_fd) goes as soon as this process is the agent's:
	 * what waits for it (a policy apply, before it stops the agents' processes) finds
	 * this one by its uid from now on; the agent could stop it from here on, and with it
	 * the wait. */
	if (a->hold_fd >= 3)
		syscall(SYS_close, a->hold_fd);
	/* Until execve this process holds pistisd's fds and a copy of its memory, under the
	 * agent's uid: privs_setresuid left it not dumpable (no ptrace attach and no
	 * /proc/PID/mem, environ or fd by the agent, whatever fs.suid_dumpable says; execve of
	 * a normal binary sets it back) and kept it out of reach while it changed. Here every
	 * capability set is read back empty. */
	r = privs_clear_caps(a->last_cap);
	if (r < 0)
		fail(a, SPAWN_STEP_CAPS, r);

	/* After the id change: a credential change clears the parent-death signal. Then make
	 * sure the parent did not die before it was set (it would never fire). */
	if (syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(a, SPAWN_STEP_PDEATHSIG, errno);
	if (syscall(SYS_getppid) != a->parent)
		fail(a, SPAWN_STEP_PARENT, ESRCH);

	/* The working directory, resolved as the agent so every permission check is the
	 * agent's; entered by fd (fchdir), never by a path string. */
	fd = spawn_resolve_dir(a->cwd_root_fd, a->cwd, a->no_openat2);
	if (fd < 0)
		fail(a, SPAWN_STEP_CWD, fd);
	if (syscall(SYS_fchdir, fd) < 0)
		fail(a, SPAWN_STEP_CWD, errno);
	safe_close(fd);

	if (!a->allow_setuid) {
		if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    syscall(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
			fail(a, SPAWN_STEP_NNP, errno ? errno : EIO);
		r = confine(a, &step);
		if (r < 0)
			fail(a, step, r);
	}

	/* No fd of pistisd's reaches the agent (runc CVE-2024-21626): everything from 3 up
	 * except the CLOEXEC error pipe, which execve closes (the working directory's root
	 * fd, and anything the steps above may have opened since the first close). */
	r = close_fds_but(a->err_fd, a->err_fd, a->err_fd, &fd_dir);
	if (r < 0)
		fail(a, SPAWN_STEP_CLOSE_FDS, r);

	sigemptyset(&none);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8);
	r = exec_search(a, &interp);
	fail(a, r == -ENOENT && interp ? SPAWN_STEP_EXEC_INTERP : SPAWN_STEP_EXEC, r);
}
