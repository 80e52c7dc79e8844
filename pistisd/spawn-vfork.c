/* The vfork-style start: the spawn child shares pistisd's memory (CLONE_VM | CLONE_VFORK)
 * until its execve, as posix_spawn's child does, so no copy of pistisd's address space is
 * made and then thrown away by the exec. docs/spawn.md ("How the child is made") says why
 * each rule below holds; in short:
 *  - The clone is made by a spawner thread of ours, never by the caller: CLONE_VFORK
 *    suspends the thread that clones until the child execs or dies, and a child has the
 *    agent's uid from setresuid to execve, so an agent can SIGSTOP it there. Only the
 *    spawner waits; the caller's loop goes on and its exec deadline kills the child. A
 *    spawner still waiting (one start at a time) sends the next start the fork-style way.
 *  - The spawner thread never exits: PR_SET_PDEATHSIG fires when the *thread* that made
 *    the child ends, so it must end only with pistisd.
 *  - The child reads only memory that stays put until it has exec'd: a copy of argv, envp
 *    and cwd owned by the spawner (the caller may free its own as soon as we return), the
 *    job, its own stack with a guard page, and the compiled seccomp program (static).
 *  - A child of the agent's uid in pistisd's mm must be out of the agent's reach: not
 *    ptrace-able, no /proc/PID/mem. The kernel sets the mm's dumpable flag from
 *    fs.suid_dumpable at the id change: 0 is safe; 2 too from Linux 5.16 on (a core dump
 *    of the child then stops only the child's thread group, not every process sharing the
 *    mm); 1 makes the child ptrace-able by the agent: fork-style then, checked per start.
 *  - An OOM kill never picks a task still in vfork (in_vfork), so an OOM in the command's
 *    cgroup cannot select the child and take every process sharing its mm with it.
 *  - A process that starts commands must not call libc's set*id or setrlimit: musl and
 *    glibc broadcast those to every thread and wait for each, and the spawner answers
 *    only once its child has exec'd (the policy walk's setrlimit runs in a forked helper,
 *    which has no spawner). The child itself uses prlimit64 and raw set*id calls.
 *  - x86_64 only (the clone trampoline below), and not under AddressSanitizer,
 *    which does not know the child's stack. Elsewhere spawn_vfork_start says -EOPNOTSUPP.
 *    ThreadSanitizer is fine: without CLONE_SETTLS the child runs on the spawner's
 *    thread state while the spawner is held in clone, so TSan sees the child's steps as
 *    the spawner's, and `make check-tsan` checks the slot's hand-overs below. */
#include "pistisd/spawn-vfork.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pistisd/spawn-child.h"
#include "pistisd/spawn.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#endif

#if defined(__x86_64__) && !defined(SANITIZED)
#define VFORK_SUPPORTED 1
#else
#define VFORK_SUPPORTED 0
#endif

bool spawn_vfork_allowed(int suid_dumpable, const char *release)
{
	unsigned major = 0, minor = 0;

	if (!VFORK_SUPPORTED)
		return false;
	if (suid_dumpable == 0)
		return true;
	if (suid_dumpable != 2 || !release || sscanf(release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 5 || (major == 5 && minor >= 16);
}

#if VFORK_SUPPORTED

/* long spawn_clone_run(long nr, long a1, long a2, long a3, int (*fn)(void *), void *arg)
 * System call nr (clone3 or clone) with a1..a3 and r10 = r8 = 0; the child, on the stack
 * the call gave it, calls fn(arg) and exit_groups with its result; the parent gets the
 * child's pid or -errno. fn and arg ride in rbx and r12 (saved for the parent), which the
 * syscall instruction leaves alone, so the child touches no memory of the parent's stack.
 * clone3: a1 its struct clone_args, a2 that size. clone: a1 flags, a2 the stack's top,
 * a3 parent_tid (where CLONE_PIDFD puts the pidfd), no child_tid, no tls. */
long spawn_clone_run(long nr, long a1, long a2, long a3, int (*fn)(void *), void *arg);
__asm__(".text\n"
	".globl spawn_clone_run\n"
	".hidden spawn_clone_run\n"
	".type spawn_clone_run,@function\n"
	"spawn_clone_run:\n"
	"	push %rbx\n"
	"	push %r12\n"
	"	mov %r8, %rbx\n"
	"	mov %r9, %r12\n"
	"	mov %rdi, %rax\n"
	"	mov %rsi, %rdi\n"
	"	mov %rdx, %rsi\n"
	"	mov %rcx, %rdx\n"
	"	xor %r10d, %r10d\n"
	"	xor %r8d, %r8d\n"
	"	syscall\n"
	"	test %rax, %rax\n"
	"	jnz 1f\n"
	"	xor %ebp, %ebp\n"
	"	mov %r12, %rdi\n"
	"	call *%rbx\n"
	"	mov %eax, %edi\n"
	"	mov $231, %eax\n" /* SYS_exit_group: the child's own group */
	"	syscall\n"
	"	hlt\n"
	"1:	pop %r12\n"
	"	pop %rbx\n"
	"	ret\n"
	".size spawn_clone_run, .-spawn_clone_run\n");

/* The one job slot. state is the futex word; who may write what in each state:
 *   IDLE     the caller may claim it (CAS to FILLING) and fill it in
 *   GO       the spawner clones; the child writes its pid and sets CREATED as its first
 *            act (the kernel wrote the pidfd before the child ran), or the spawner FAILED;
 *            or (clone3) the caller takes pid and pidfd as the kernel wrote them and says
 *            TAKEN itself, the child not having run yet (below, "born frozen")
 *   CREATED / FAILED   the caller reads pid, pidfd or error and says TAKEN
 *   TAKEN    the spawner, once clone has returned (the child exec'd or died), says IDLE
 * GO is left only by compare-and-swap: the child, the spawner and the caller may each try.
 *
 * Born frozen: a child cloned into a cgroup that another manager froze (cgroup.freeze of
 * the agent's cgroup or above it, short of serve's own) runs its first act only at the
 * thaw. The caller waited for it without a bound, so one frozen agent cgroup held serve's
 * event loop, every agent's commands, output and the relay's pings, until the relay
 * dropped the sandbox (red team: 29 s for another agent's echo, then "disconnected").
 * The kernel writes the pid (CLONE_PARENT_SETTID) and the pidfd before the child runs, so
 * the caller looks at them each VF_FIRST_ACT_WAIT_MS and goes on with them; the exec
 * deadline then kills the child, as one stopped later in its steps. */
enum { VF_IDLE, VF_FILLING, VF_GO, VF_CREATED, VF_FAILED, VF_TAKEN };

#define CHILD_STACK (64u << 10)
#define VF_FIRST_ACT_WAIT_MS 1

static struct {
	int state;
	pid_t owner;  /* the process whose thread this is (a fork of pistisd has none) */
	bool broken;  /* the thread or its stack could not be made: fork-style for good */
	int last_cap; /* the kernel's, for the spawner's own bounding set */
	char *stack;  /* CHILD_STACK bytes above a guard page */
	struct child_args a;
	bool legacy; /* clone, not clone3 (and so no CLONE_INTO_CGROUP) */
	int cgroup_fd;
	int pidfd, error;
	pid_t pid;
	pid_t settid; /* the kernel's CLONE_PARENT_SETTID (clone3), before the child runs */
	char *copy;   /* argv, envp and cwd for the child */
	size_t copy_size;
	int cpu;	    /* the thread's only CPU (same_cpu), or -1 */
	cpu_set_t affinity; /* the caller's, for each child to take back (cpu >= 0) */
} sp;

static void futex_wait(int *w, int val)
{
	(void)syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wait_ms(int *w, int val, long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	(void)syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

static void futex_wake(int *w)
{
	(void)syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void set_state(int s)
{
	__atomic_store_n(&sp.state, s, __ATOMIC_RELEASE);
	futex_wake(&sp.state);
}

static int get_state(void)
{
	return __atomic_load_n(&sp.state, __ATOMIC_ACQUIRE);
}

/* GO to s, if no one left GO before. */
static bool leave_go(int s)
{
	int go = VF_GO;

	if (!__atomic_compare_exchange_n(&sp.state, &go, s, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return false;
	futex_wake(&sp.state);
	return true;
}

/* The child's first act, on its own stack in our memory: say who it is. */
static int child_entry(void *arg)
{
	(void)arg;
	sp.pid = (pid_t)syscall(SYS_getpid);
	/* (fails where the caller took our pid from the kernel already: born frozen) */
	(void)leave_go(VF_CREATED);
	return spawn_child_main(&sp.a); /* execs or exits */
}

static void *spawner_main(void *unused)
{
	(void)unused;
	if (sp.cpu >= 0) {
		cpu_set_t one;

		/* Refused: the thread keeps the caller's CPUs, and a child putting them back
		 * changes nothing. sp is not written here: the caller reads it unsynchronised. */
		CPU_ZERO(&one);
		CPU_SET(sp.cpu, &one);
		(void)syscall(SYS_sched_setaffinity, 0, sizeof(one), &one);
	}
	/* The bounding set is per thread and a child starts with its maker's: dropped here
	 * once, every child starts without it and has nothing to drop (41 credential changes
	 * fewer a command; the child still reads the set back). What sudo needs is kept for
	 * the starts that ask for it (SPAWN_SETUID_BOUNDING); a start that asks for more goes
	 * the fork-style way. This thread never execs, so its own bounding set binds nothing
	 * else; where a drop is refused the child drops and checks as before. */
	for (int c = 0; c <= sp.last_cap && c < 64; c++)
		if (!(SPAWN_SETUID_BOUNDING & (UINT64_C(1) << c)))
			(void)syscall(SYS_prctl, PR_CAPBSET_DROP, c, 0, 0, 0);
	for (;;) {
		int s;
		while ((s = get_state()) != VF_GO)
			futex_wait(&sp.state, s);
		uint64_t flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD;
		long r;

		if (sp.legacy) {
			r = spawn_clone_run(SYS_clone, (long)(flags | SIGCHLD),
					    (long)(sp.stack + CHILD_STACK), (long)&sp.pidfd,
					    child_entry, NULL);
		} else {
			struct clone3_args ca = {
				.flags = flags | CLONE_PARENT_SETTID |
					 (sp.cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0),
				.pidfd = (uint64_t)(uintptr_t)&sp.pidfd,
				.parent_tid = (uint64_t)(uintptr_t)&sp.settid,
				.exit_signal = SIGCHLD,
				.stack = (uint64_t)(uintptr_t)sp.stack,
				.stack_size = CHILD_STACK,
				.cgroup = sp.cgroup_fd >= 0 ? (uint64_t)sp.cgroup_fd : 0,
			};
			r = spawn_clone_run(SYS_clone3, (long)&ca, (long)sizeof(ca), 0, child_entry,
					    NULL);
		}

		if (r < 0) {
			sp.error = (int)-r;
			set_state(VF_FAILED);
		} else {
			/* Gone before its first instruction (only root can SIGKILL it there), so
			 * its pid was never written: reaped here and the start reported failed,
			 * never a pid of 0 handed on (kill(0, …) is our own process group) —
			 * unless the caller took it from the kernel meanwhile, and owns it. */
			sp.error = ECHILD;
			if (leave_go(VF_FAILED)) {
				(void)syscall(SYS_waitid, P_PIDFD, sp.pidfd, NULL, WEXITED, NULL);
				(void)close(sp.pidfd);
			}
		}
		/* Back here: the child exec'd or died, so nothing reads the slot any more. */
		while ((s = get_state()) != VF_TAKEN)
			futex_wait(&sp.state, s);
		set_state(VF_IDLE);
	}
	return NULL;
}

/* The spawner for this process, started on first use with every signal blocked (the
 * thread and each child inherit that mask; the child clears it just before execve). */
static bool spawner_ready(int last_cap, bool same_cpu)
{
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;
	char *m;
	int r;

	if (sp.owner == getpid())
		return !sp.broken;
	/* First use, or a fork of the process that had it: the thread did not come along. */
	free(sp.copy);
	if (sp.stack)
		(void)munmap(sp.stack - 4096, CHILD_STACK + 4096);
	memset(&sp, 0, sizeof(sp));
	sp.owner = getpid();
	sp.broken = true;
	sp.last_cap = last_cap;
	/* The hand-overs of a start (caller → spawner → child → caller) are futex wake-ups;
	 * one that crosses to an idle CPU waits for that CPU to wake (in a VM, a trip through
	 * the hypervisor: a round trip took 70-140 µs median, 0.7-2.5 ms p90, against 5-19
	 * µs on one CPU; docs/spawn.md). A process that only starts one command keeps them
	 * on one CPU; the command gets the caller's affinity back. */
	sp.cpu = -1;
	if (same_cpu && syscall(SYS_sched_getaffinity, 0, sizeof(sp.affinity), &sp.affinity) > 0) {
		int cpu = sched_getcpu();
		if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &sp.affinity))
			sp.cpu = cpu;
	}
	m = mmap(NULL, CHILD_STACK + 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (m == MAP_FAILED)
		return false;
	if (mprotect(m, 4096, PROT_NONE) < 0) {
		(void)munmap(m, CHILD_STACK + 4096);
		return false;
	}
	sp.stack = m + 4096;
	if (pthread_attr_init(&attr) != 0)
		return false;
	(void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	(void)pthread_attr_setstacksize(&attr, 64u << 10);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&t, &attr, spawner_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	sp.broken = r != 0;
	return !sp.broken;
}

/* argv, envp and cwd into one buffer of the slot, and a's pointers to it. PATH points
 * into envp's copy when it came from envp (else it is a static default). */
static int copy_args(struct child_args *a)
{
	size_t n_argv = 0, n_envp = 0, strs = 0, size, pos;
	char **argv, **envp, *s;

	for (; a->argv[n_argv]; n_argv++)
		strs += strlen(a->argv[n_argv]) + 1;
	for (; a->envp[n_envp]; n_envp++)
		strs += strlen(a->envp[n_envp]) + 1;
	if (a->cwd)
		strs += strlen(a->cwd) + 1;
	size = (n_argv + n_envp + 2) * sizeof(char *) + strs;
	if (size > sp.copy_size) {
		char *c = realloc(sp.copy, size);
		if (!c)
			return -ENOMEM;
		sp.copy = c;
		sp.copy_size = size;
	}
	argv = (char **)(void *)sp.copy;
	envp = argv + n_argv + 1;
	s = (char *)(envp + n_envp + 1);
	pos = 0;
	for (size_t i = 0; i < n_argv; i++) {
		size_t l = strlen(a->argv[i]) + 1;
		argv[i] = memcpy(s + pos, a->argv[i], l);
		pos += l;
	}
	argv[n_argv] = NULL;
	for (size_t i = 0; i < n_envp; i++) {
		size_t l = strlen(a->envp[i]) + 1;
		envp[i] = memcpy(s + pos, a->envp[i], l);
		if (a->path >= a->envp[i] && a->path < a->envp[i] + l)
			a->path = envp[i] + (a->path - a->envp[i]);
		pos += l;
	}
	envp[n_envp] = NULL;
	if (a->cwd) {
		size_t l = strlen(a->cwd) + 1;
		a->cwd = memcpy(s + pos, a->cwd, l);
	}
	a->argv = argv;
	a->envp = envp;
	return 0;
}

void spawn_vfork_prepare(int last_cap, bool same_cpu)
{
	(void)spawner_ready(last_cap, same_cpu);
}

int spawn_vfork_start(const struct child_args *a, bool legacy, int cgroup_fd, pid_t *ret_pid,
		      int *ret_pidfd)
{
	int expect = VF_IDLE, s, r;

	/* The spawner's bounding set holds SPAWN_SETUID_BOUNDING at most. */
	if (a->bounding_keep & ~SPAWN_SETUID_BOUNDING)
		return -EOPNOTSUPP;
	if (!spawner_ready(a->last_cap, false))
		return -EOPNOTSUPP;
	/* Busy: the last child has not exec'd yet (stopped by its agent, or just slow). */
	if (!__atomic_compare_exchange_n(&sp.state, &expect, VF_FILLING, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return -EBUSY;
	sp.a = *a;
	sp.a.affinity = sp.cpu >= 0 ? &sp.affinity : NULL;
	r = copy_args(&sp.a);
	if (r < 0) {
		set_state(VF_IDLE);
		return r;
	}
	sp.legacy = legacy;
	sp.cgroup_fd = legacy ? -1 : cgroup_fd;
	sp.pid = 0;
	sp.pidfd = -1;
	sp.error = 0;
	__atomic_store_n(&sp.settid, 0, __ATOMIC_RELAXED);
	set_state(VF_GO);
	while ((s = get_state()) == VF_GO) {
		pid_t tid;
		if (legacy) { /* (no CLONE_PARENT_SETTID with clone's CLONE_PIDFD; such a
			       * child joins its cgroup itself, after its first act) */
			futex_wait(&sp.state, s);
			continue;
		}
		futex_wait_ms(&sp.state, s, VF_FIRST_ACT_WAIT_MS);
		/* Born frozen, or not scheduled yet: the kernel wrote the pidfd before
		 * the pid, and both before the child could run. */
		tid = __atomic_load_n(&sp.settid, __ATOMIC_ACQUIRE);
		if (tid > 0 && leave_go(VF_TAKEN)) {
			*ret_pid = tid;
			*ret_pidfd = sp.pidfd;
			return 0;
		}
	}
	if (s == VF_FAILED) {
		r = -sp.error;
	} else {
		*ret_pid = sp.pid;
		*ret_pidfd = sp.pidfd;
		r = 0;
	}
	set_state(VF_TAKEN);
	return r;
}

#else

void spawn_vfork_prepare(int last_cap, bool same_cpu)
{
	(void)last_cap;
	(void)same_cpu;
}

int spawn_vfork_start(const struct child_args *a, bool legacy, int cgroup_fd, pid_t *ret_pid,
		      int *ret_pidfd)
{
	(void)a;
	(void)legacy;
	(void)cgroup_fd;
	(void)ret_pid;
	(void)ret_pidfd;
	return -EOPNOTSUPP;
}

#endif
