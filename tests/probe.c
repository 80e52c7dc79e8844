/* probe: reports from inside the sandbox what a confined process sees, as key=value lines
 * (crun's tests/init.c, bubblewrap's try-syscall.c). Filtered syscalls are called with bad
 * fds or arguments so nothing real happens: EBADF/EFAULT/EINVAL mean allowed, EPERM or
 * ENOSYS filtered (for calls a non-root caller gets EPERM from anyway, test-spawn runs the
 * same checks as root under the filter). Static (musl); only libc.
 *
 *   probe [report]        everything below
 *   probe syscalls        only the sc.* lines
 *   probe x32 | int80     the attempt in a child; prints how the child ended
 *   probe tiocsti         TIOCSTI on fd 0
 *   probe tiocexcl        TIOCEXCL on fd 0 (reopening the terminal is EBUSY for all but
 *                         CAP_SYS_ADMIN, until the last fd closes)
 *   probe forkbomb N      fork up to N sleeping children; prints how many it got
 *   probe bg-sleep S [stay] [noterm]  a setsid()'d child sleeping S s; the probe exits, or
 *                         stays; noterm: both ignore SIGTERM
 *   probe ghost S [FILE]  the main thread exits, a second one sleeps S s (FILE held open)
 *   probe sleep S | output BYTES | exit N | raise SIG | winch S | spam S
 *   probe stuck CGROUP    (root, outside the sandbox) a process in D state that no SIGKILL
 *                         ends, in the cgroup directory CGROUP, until its holder is killed;
 *                         prints holder=PID stuck=PID and exits, both left running */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/resource.h>
#include <mqueue.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <sys/mman.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "tests/stuck-proc.h"

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static const char *ename(int e)
{
	static char buf[16];
	static const struct {
		int e;
		const char *n;
	} t[] = {{0, "ok"},
		 {EPERM, "EPERM"},
		 {ENOSYS, "ENOSYS"},
		 {EBADF, "EBADF"},
		 {EFAULT, "EFAULT"},
		 {EINVAL, "EINVAL"},
		 {ESRCH, "ESRCH"},
		 {EIO, "EIO"},
		 {ENOENT, "ENOENT"},
		 {EACCES, "EACCES"},
		 {EAGAIN, "EAGAIN"},
		 {ENOTTY, "ENOTTY"},
		 {EOPNOTSUPP, "EOPNOTSUPP"},
		 {EAFNOSUPPORT, "EAFNOSUPPORT"},
		 {ENOEXEC, "ENOEXEC"},
		 {ENOTDIR, "ENOTDIR"},
		 {EBUSY, "EBUSY"},
		 {ENOMEM, "ENOMEM"},
		 {EEXIST, "EEXIST"},
		 {EPROTONOSUPPORT, "EPROTONOSUPPORT"},
		 {ENXIO, "ENXIO"},
		 {EMFILE, "EMFILE"},
		 {ESOCKTNOSUPPORT, "ESOCKTNOSUPPORT"}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].e == e)
			return t[i].n;
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

static void sc(const char *name, long r)
{
	int e = r < 0 ? errno : 0;

	if (r >= 0 && !strncmp(name, "socket", 6))
		close((int)r);
	printf("sc.%s=%s\n", name, ename(e));
}

#define S(name, ...) (errno = 0, sc(name, syscall(__VA_ARGS__)))

static void syscalls(void)
{
	char *bad = (char *)1;

	S("io_uring_setup", SYS_io_uring_setup, 0, NULL);
	S("io_uring_enter", SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0);
	S("io_uring_register", SYS_io_uring_register, -1, 0, NULL, 0);
	S("clone3", SYS_clone3, NULL, 0);
	S("unshare", SYS_unshare, 0x1);
	S("setns", SYS_setns, -1, 0);
	S("mount", SYS_mount, bad, bad, bad, 0, NULL);
	S("umount2", SYS_umount2, "/", 0xffff);
	S("pivot_root", SYS_pivot_root, bad, bad);
	S("chroot", SYS_chroot, bad);
	S("fsopen", SYS_fsopen, bad, 0);
	S("fsconfig", SYS_fsconfig, -1, 0xff, NULL, NULL, 0);
	S("fsmount", SYS_fsmount, -1, 0xff, 0);
	S("fspick", SYS_fspick, -1, bad, 0xff);
	S("move_mount", SYS_move_mount, -1, bad, -1, bad, 0xff);
	S("open_tree", SYS_open_tree, -1, bad, 0xff);
	S("mount_setattr", SYS_mount_setattr, -1, bad, 0xff, NULL, 0);
	/* Newer than Debian 12's libseccomp (2.5.4), which knows them by no name: raw
	 * numbers, the same on every architecture pistisd is built for. */
	S("open_tree_attr", 467, -1, bad, 0xff, NULL, 0);
	S("statmount", 457, NULL, NULL, 0, 0);
	S("listmount", 458, NULL, NULL, 0, 0);
	/* Past the highest number the table was reviewed against (469): ENOSYS from the
	 * filter on a kernel that has a call there (listns, 6.19). */
	S("past_table", 470, NULL, NULL, 0, 0);
	/* CLONE_THREAD without CLONE_SIGHAND: EINVAL before anything is created. */
	S("clone.NEWNS", SYS_clone, 0x00020000 | 0x00010000, NULL, NULL, NULL, 0);
	S("clone.NEWUTS", SYS_clone, 0x04000000 | 0x00010000, NULL, NULL, NULL, 0);
	S("clone.NEWIPC", SYS_clone, 0x08000000 | 0x00010000, NULL, NULL, NULL, 0);
	S("clone.NEWUSER", SYS_clone, 0x10000000 | 0x00010000, NULL, NULL, NULL, 0);
	S("clone.NEWPID", SYS_clone, 0x20000000 | 0x00010000, NULL, NULL, NULL, 0);
	S("clone.NEWNET", SYS_clone, 0x40000000 | 0x00010000, NULL, NULL, NULL, 0);
	S("clone.NEWCGROUP", SYS_clone, 0x02000000 | 0x00010000, NULL, NULL, NULL, 0);
	S("clone.PARENT", SYS_clone, 0x00008000 | 0x00010000, NULL, NULL, NULL, 0);
	S("clone.plain", SYS_clone, 0x00010000, NULL, NULL, NULL, 0);
	S("ptrace", SYS_ptrace, 0x7fff, 0, NULL, NULL);
	S("process_vm_readv", SYS_process_vm_readv, 0, NULL, 0, NULL, 0, 1);
	S("process_vm_writev", SYS_process_vm_writev, 0, NULL, 0, NULL, 0, 1);
	S("pidfd_getfd", SYS_pidfd_getfd, -1, 0, 0);
	S("kcmp", SYS_kcmp, 0, 0, 99, 0, 0);
	S("process_madvise", 440, -1, NULL, 0, 0, 0);
	S("process_mrelease", 448, -1, 0);
	S("bpf", SYS_bpf, 0x7fff, NULL, 0);
	S("perf_event_open", SYS_perf_event_open, NULL, 0, -1, -1, 0);
	S("userfaultfd", SYS_userfaultfd, 0x7fff0000);
	S("keyctl", SYS_keyctl, 0x7fff, 0, 0, 0, 0);
	S("add_key", SYS_add_key, bad, bad, NULL, 0, 0);
	S("request_key", SYS_request_key, bad, bad, NULL, 0);
	S("init_module", SYS_init_module, NULL, 0, bad);
	S("finit_module", SYS_finit_module, -1, "", 0);
	S("delete_module", SYS_delete_module, bad, 0);
	S("kexec_load", SYS_kexec_load, 0, 0, NULL, 0xdead0000);
	S("kexec_file_load", SYS_kexec_file_load, -1, -1, 0, NULL, 0xdead0000);
	S("reboot", SYS_reboot, 0, 0, 0, NULL);
	S("swapon", SYS_swapon, bad, 0);
	S("swapoff", SYS_swapoff, bad);
#ifdef SYS_iopl
	S("iopl", SYS_iopl, 99);
	S("ioperm", SYS_ioperm, ~0UL, 1, 0);
#endif
	S("acct", SYS_acct, bad);
	S("fanotify_init", SYS_fanotify_init, 0xffffffffU, 0);
#ifdef SYS_uselib
	S("uselib", SYS_uselib, bad);
#endif
#ifdef SYS_modify_ldt
	S("modify_ldt", SYS_modify_ldt, 99, NULL, 0);
#endif
	S("syslog", SYS_syslog, 9999, NULL, 0);
	S("open_by_handle_at", SYS_open_by_handle_at, -1, NULL, 0);
	S("name_to_handle_at", SYS_name_to_handle_at, -1, bad, NULL, NULL, 0);
	S("ioctl.TIOCSTI", SYS_ioctl, -1, TIOCSTI, NULL);
	S("ioctl.TIOCSTI_hi", SYS_ioctl, -1, 0x100000000UL | TIOCSTI, NULL);
	S("ioctl.TIOCLINUX", SYS_ioctl, -1, TIOCLINUX, NULL);
	S("ioctl.TIOCSETD", SYS_ioctl, -1, TIOCSETD, NULL);
	S("ioctl.TIOCGETD", SYS_ioctl, -1, TIOCGETD, NULL);
	S("ioctl.TCGETS", SYS_ioctl, -1, TCGETS, NULL);
	S("fcntl.F_SETLEASE", SYS_fcntl, -1, F_SETLEASE, F_WRLCK);
	S("fcntl.F_SETLEASE_hi", SYS_fcntl, -1, 0x100000000UL | F_SETLEASE, F_WRLCK);
	S("fcntl.F_SETDELEG", SYS_fcntl, -1, 1040, NULL);
	S("fcntl.F_GETLEASE", SYS_fcntl, -1, F_GETLEASE);
	S("fcntl.F_SETLK", SYS_fcntl, -1, F_SETLK, NULL);
	S("socket.AF_UNIX", SYS_socket, AF_UNIX, -1, 0);
	S("socket.AF_INET", SYS_socket, AF_INET, -1, 0);
	S("socket.AF_INET6", SYS_socket, AF_INET6, -1, 0);
	S("socket.AF_NETLINK", SYS_socket, AF_NETLINK, -1, 0);
	S("socket.AF_PACKET", SYS_socket, AF_PACKET, -1, 0);
	S("socket.AF_KEY", SYS_socket, 15, -1, 0);
	S("socket.AF_ALG", SYS_socket, 38, -1, 0);
	S("socket.AF_VSOCK", SYS_socket, 40, -1, 0);
	S("socket.AF_BLUETOOTH", SYS_socket, 31, -1, 0);
	S("socket.AF_UNSPEC", SYS_socket, 0, -1, 0);
	S("socket.AF_INET_hi", SYS_socket, 0x100000002UL, -1, 0);
	/* Protocols: the type is invalid (EINVAL when allowed), so nothing is created. */
	S("socket.AF_INET_TCP", SYS_socket, AF_INET, -1, 6);
	S("socket.AF_INET6_UDP", SYS_socket, AF_INET6, -1, 17);
	S("socket.AF_INET_SCTP", SYS_socket, AF_INET, -1, 132);
	S("socket.AF_INET6_DCCP", SYS_socket, AF_INET6, -1, 33);
	S("socket.AF_INET_SMC", SYS_socket, AF_INET, -1, 256);
	S("socket.AF_NETLINK_AUDIT", SYS_socket, AF_NETLINK, -1, 9);
	S("socket.AF_NETLINK_ISCSI", SYS_socket, AF_NETLINK, -1, 8);
	S("socketpair.AF_PACKET", SYS_socketpair, AF_PACKET, -1, 0, NULL);
	S("dup.badfd", SYS_dup, -1);
	/* Only Docker's personas: the query and PER_LINUX32 pass (set back to PER_LINUX). */
	S("personality.query", SYS_personality, 0xffffffffUL);
	S("personality.ADDR_NO_RANDOMIZE", SYS_personality, 0x0040000UL);
	S("personality.READ_IMPLIES_EXEC", SYS_personality, 0x0400000UL);
	S("personality.MMAP_PAGE_ZERO", SYS_personality, 0x0100000UL);
	S("personality.LINUX_hi", SYS_personality, 0x100000000UL);
	S("personality.LINUX32", SYS_personality, 0x8UL);
	(void)syscall(SYS_personality, 0UL);
}

static void status_lines(void)
{
	static const char *keys[] = {"CapInh",	"CapPrm",	   "CapEff",
				     "CapBnd",	"CapAmb",	   "NoNewPrivs",
				     "Seccomp", "Seccomp_filters", "Cpus_allowed_list"};
	char line[512];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':'), *v;
		if (!colon)
			continue;
		*colon = 0;
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			if (strcmp(line, keys[i]))
				continue;
			for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
				;
			printf("%s=%s", keys[i], v);
		}
	}
	fclose(f);
}

/* oom_score_adj, and whether the command may lower it (it may not go below what pistisd
 * set while root): oom_lower=EACCES, or OK. */
static void oom_lines(void)
{
	char buf[32];
	int fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	long v;

	if (n <= 0) {
		printf("oom_score_adj=?\n");
		if (fd >= 0)
			close(fd);
		return;
	}
	buf[n] = 0;
	v = strtol(buf, NULL, 10);
	printf("oom_score_adj=%ld\n", v);
	n = snprintf(buf, sizeof(buf), "%ld", v - 1);
	printf("oom_lower=%s\n", v <= -1000			      ? "?"
				 : pwrite(fd, buf, (size_t)n, 0) == n ? "OK"
								      : strerror(errno));
	close(fd);
}

static void nice_lower_line(void)
{
	int cur;

	errno = 0;
	cur = getpriority(PRIO_PROCESS, 0);
	printf("nice_lower=%s\n", cur == -20				       ? "?"
				  : setpriority(PRIO_PROCESS, 0, cur - 1) == 0 ? "ok"
									       : ename(errno));
}

/* What the limits beyond the numbers allow: a POSIX message queue of the smallest size
 * (removed at once if made), real-time scheduling, a nice value below the inherited one. */
static void limits_lines(void)
{
	char name[32];
	struct mq_attr at = {.mq_maxmsg = 1, .mq_msgsize = 1};
	struct sched_param sp = {.sched_priority = 1};
	long q;

	snprintf(name, sizeof(name), "pistis-probe-%d", (int)getpid());
	q = syscall(SYS_mq_open, name, O_RDWR | O_CREAT | O_EXCL, 0600, &at);
	printf("mq_create=%s\n", q >= 0 ? "ok" : ename(errno));
	if (q >= 0) {
		close((int)q);
		syscall(SYS_mq_unlink, name);
	}
	/* What it inherited, before trying to change anything: policy, I/O class (raw
	 * ioprio_get, class in the top bits), nice value. */
	printf("sched_policy=%ld\n", syscall(SYS_sched_getscheduler, 0));
	q = syscall(SYS_ioprio_get, 1, 0);
	printf("ioprio_class=%ld\n", q < 0 ? q : q >> 13);
	errno = 0;
	q = getpriority(PRIO_PROCESS, 0);
	printf("nice=%ld\n", errno ? 99 : q);
	printf("sched_fifo=%s\n",
	       syscall(SYS_sched_setscheduler, 0, SCHED_FIFO, &sp) == 0 ? "ok" : ename(errno));
	nice_lower_line();
}

static void report(char **envp)
{
	uid_t r, e, s;
	gid_t gr, ge, gs, groups[64];
	int n;
	char buf[4096];
	mode_t um;
	struct winsize ws;
	static const struct {
		const char *n;
		int r;
	} rl[] = {{"NPROC", RLIMIT_NPROC}, {"NOFILE", RLIMIT_NOFILE},	  {"CORE", RLIMIT_CORE},
		  {"FSIZE", RLIMIT_FSIZE}, {"MSGQUEUE", RLIMIT_MSGQUEUE}, {"RTPRIO", RLIMIT_RTPRIO},
		  {"NICE", RLIMIT_NICE}};

	getresuid(&r, &e, &s);
	getresgid(&gr, &ge, &gs);
	printf("uid=%u,%u,%u,%d\n", r, e, s, setfsuid((uid_t)-1));
	printf("gid=%u,%u,%u,%d\n", gr, ge, gs, setfsgid((gid_t)-1));
	n = getgroups(64, groups);
	printf("groups=");
	for (int i = 0; i < n; i++)
		printf("%s%u", i ? "," : "", groups[i]);
	printf("\n");
	status_lines();
	printf("pid=%d\nppid=%d\nsid=%d\npgid=%d\n", getpid(), getppid(), getsid(0), getpgid(0));
	um = umask(0);
	umask(um);
	printf("umask=%04o\n", um);
	oom_lines();
	printf("cwd=%s\n", getcwd(buf, sizeof(buf)) ? buf : "?");
	for (size_t i = 0; i < sizeof(rl) / sizeof(rl[0]); i++) {
		struct rlimit l;
		getrlimit(rl[i].r, &l);
		printf("rlimit.%s=%lld:%lld\n", rl[i].n,
		       l.rlim_cur == RLIM_INFINITY ? -1LL : (long long)l.rlim_cur,
		       l.rlim_max == RLIM_INFINITY ? -1LL : (long long)l.rlim_max);
	}
	{
		DIR *d = opendir("/proc/self/fd");
		struct dirent *de;
		printf("fds=");
		int first = 1;
		while (d && (de = readdir(d))) {
			if (de->d_name[0] == '.' || atoi(de->d_name) == dirfd(d))
				continue;
			printf("%s%s", first ? "" : ",", de->d_name);
			first = 0;
		}
		printf("\n");
		if (d)
			closedir(d);
	}
	{
		FILE *f = fopen("/proc/self/cgroup", "re");
		while (f && fgets(buf, sizeof(buf), f))
			if (!strncmp(buf, "0::", 3))
				printf("cgroup=%s", buf + 3);
		if (f)
			fclose(f);
	}
	{
		FILE *f = fopen("/proc/keys", "re");
		while (f && fgets(buf, sizeof(buf), f))
			if (strstr(buf, " _ses"))
				printf("keyring.session=%.8s\n", buf);
		if (f)
			fclose(f);
	}
	printf("tty=%d\n", isatty(0));
	if (ioctl(0, TIOCGWINSZ, &ws) == 0)
		printf("winsize=%ux%u\n", ws.ws_col, ws.ws_row);
	n = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
	printf("devtty=%s\n", n >= 0 ? "ok" : ename(errno));
	if (n >= 0)
		close(n);
	limits_lines();
	for (char **v = envp; *v; v++)
		printf("env.%s\n", *v);
	syscalls();
}

static int in_child(void (*fn)(void))
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		fn();
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return st;
}

static void print_end(const char *what, int st)
{
	if (st < 0)
		printf("%s=error\n", what);
	else if (WIFSIGNALED(st))
		printf("%s=killed:%d\n", what, WTERMSIG(st));
	else
		printf("%s=exited:%d\n", what, WEXITSTATUS(st));
}

static void try_x32(void)
{
	/* getpid with __X32_SYSCALL_BIT; the filter must kill before the kernel says ENOSYS. */
	long r = syscall(39 | 0x40000000);
	_exit(r < 0 ? 10 : 11);
}

static void try_int80(void)
{
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "rcx", "r11");
	_exit(ret < 0 ? 10 : 11);
#else
	_exit(12);
#endif
}

static volatile sig_atomic_t winched;
static void on_winch(int sig)
{
	(void)sig;
	winched = 1;
}

static void *ghost_thread(void *arg)
{
	sleep((unsigned)(intptr_t)arg);
	return NULL;
}

/* probe stuck CGROUP: a stuck process in CGROUP (tests/stuck-proc.h), both it and its
 * holder left running. */
static int stuck(const char *cgroup)
{
	int cg = open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	pid_t holder, st = cg < 0 ? -1 : stuck_process(cg, true, &holder);

	if (cg >= 0)
		close(cg);
	if (st < 0)
		return 1;
	printf("holder=%d stuck=%d state=%c\n", (int)holder, (int)st, proc_state_of(st));
	return 0;
}

int main(int argc, char **argv, char **envp)
{
	const char *mode = argc > 1 ? argv[1] : "report";
	long arg = argc > 2 ? atol(argv[2]) : 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "report")) {
		report(envp);
	} else if (!strcmp(mode, "syscalls")) {
		syscalls();
	} else if (!strcmp(mode, "x32")) {
		print_end("x32", in_child(try_x32));
	} else if (!strcmp(mode, "int80")) {
		print_end("int80", in_child(try_int80));
	} else if (!strcmp(mode, "tiocsti")) {
		char c = 'x';
		errno = 0;
		sc("tiocsti", ioctl(0, TIOCSTI, &c));
		printf("tty=%d\n", isatty(0));
	} else if (!strcmp(mode, "tiocexcl")) {
		errno = 0;
		sc("tiocexcl", ioctl(0, TIOCEXCL));
	} else if (!strcmp(mode, "forkbomb")) {
		long got = 0;
		int err = 0;
		for (; got < arg; got++) {
			pid_t p = fork();
			if (p == 0) {
				pause();
				_exit(0);
			}
			if (p < 0) {
				err = errno;
				break;
			}
		}
		printf("forked=%ld\nfork_error=%s\n", got, ename(err));
		signal(SIGTERM, SIG_IGN);
		kill(0, SIGTERM);
		while (wait(NULL) > 0)
			;
	} else if (!strcmp(mode, "stuck") && argc > 2) {
		return stuck(argv[2]);
	} else if (!strcmp(mode, "ghost")) {
		/* A process whose main thread is gone: it exits alone (SYS_exit, not
		 * exit_group) while a second thread sleeps arg s on, holding argv[3] open
		 * read-write if named. Its leader shows as a zombie in /proc. */
		pthread_t t;

		if (argc > 3 && open(argv[3], O_RDWR | O_CLOEXEC) < 0)
			return 1;
		if (pthread_create(&t, NULL, ghost_thread, (void *)(intptr_t)arg))
			return 1;
		printf("ghost=%d\n", (int)getpid());
		fflush(stdout);
		syscall(SYS_exit, 0);
	} else if (!strcmp(mode, "bg-sleep")) {
		bool stay = false;
		pid_t p;

		/* noterm: both ignore SIGTERM, so only a stop's SIGKILL ends them */
		for (int i = 3; i < argc; i++) {
			stay |= !strcmp(argv[i], "stay");
			if (!strcmp(argv[i], "noterm"))
				signal(SIGTERM, SIG_IGN);
		}
		p = fork();
		if (p == 0) {
			setsid();
			sleep((unsigned)arg);
			_exit(0);
		}
		printf("bgpid=%d\n", p);
		if (stay)
			sleep((unsigned)arg);
	} else if (!strcmp(mode, "hop")) {
		/* a process that keeps moving: a new session, then a child takes over at once
		 * and the parent exits, again and again (a /proc listing sees pids that are gone a moment later) */
		if (fork() != 0)
			return 0;
		setsid();
		for (;;) {
			pid_t p = fork();
			if (p > 0)
				_exit(0);
			if (p < 0)
				usleep(1000);
		}
	} else if (!strcmp(mode, "ipc-leave") || !strcmp(mode, "ipc-leave-key")) {
		/* SysV objects left behind: a segment of arg bytes, every page written, a queue
		 * with a message, a semaphore set; nothing removed. ipc-leave-key: under keys
		 * from 0x8badf000 up, which /proc/sysvipc prints negative */
		bool keyed = !strcmp(mode, "ipc-leave-key");
		key_t k = keyed ? (key_t)(0x8badf000u + ((unsigned)getpid() & 0xff) * 4)
				: IPC_PRIVATE;
		int shm = shmget(k, (size_t)arg, IPC_CREAT | IPC_EXCL | 0600);
		int msg = msgget(keyed ? k + 1 : k, IPC_CREAT | IPC_EXCL | 0600);
		int sem = semget(keyed ? k + 2 : k, 1, IPC_CREAT | IPC_EXCL | 0600);
		struct {
			long type;
			char text[64];
		} m = {1, "left behind"};
		void *p = shm >= 0 ? shmat(shm, NULL, 0) : (void *)-1;

		if (p != (void *)-1) {
			memset(p, 'x', (size_t)arg);
			shmdt(p);
		}
		if (msg >= 0)
			msgsnd(msg, &m, sizeof(m.text), 0);
		printf("ipc=shm:%d,msg:%d,sem:%d\n", shm, msg, sem);
	} else if (!strcmp(mode, "hold-mem")) {
		/* arg MiB, every page written, then sleep: a process that takes a while to die
		 * (its memory torn down after SIGKILL) */
		size_t len = (size_t)arg << 20;
		char *m = len ? malloc(len) : NULL;

		if (m)
			memset(m, 1, len);
		printf("held=%ld\n", m ? arg : 0L);
		fflush(stdout);
		sleep(300);
	} else if (!strcmp(mode, "acl-default-self") && argc > 2) {
		/* a default ACL on directory argv[2] giving the caller's uid rwx and a mask of
		 * rwx (what `setfacl -d -m u:UID:rwx,m::rwx` sets; the roots have no setfacl) */
		struct __attribute__((packed)) {
			uint32_t version;
			struct __attribute__((packed)) {
				uint16_t tag, perm;
				uint32_t id;
			} e[5];
		} a = {2,
		       {{0x01, 7, ~0u},
			{0x02, 7, (uint32_t)getuid()},
			{0x04, 7, ~0u},
			{0x10, 7, ~0u},
			{0x20, 0, ~0u}}};

		if (setxattr(argv[2], "system.posix_acl_default", &a, sizeof(a), 0) < 0) {
			perror("setxattr");
			return 1;
		}
		printf("acl-default-self=%u\n", (unsigned)getuid());
	} else if (!strcmp(mode, "itimer-exec") && argc > 3) {
		/* arm ITIMER_REAL for arg ms, then exec argv[3]...: the timer outlives execve */
		struct itimerval t = {.it_value = {arg / 1000, (arg % 1000) * 1000}};

		if (setitimer(ITIMER_REAL, &t, NULL) < 0)
			return 1;
		execv(argv[3], argv + 3);
		return 127;
	} else if (!strcmp(mode, "ipc-fill")) {
		/* of each kind, as many SysV objects as the kernel gives, up to arg: empty
		 * queues, one-semaphore sets, one-byte segments */
		long msg = 0, sem = 0, shm = 0;

		while (msg < arg && msgget(IPC_PRIVATE, IPC_CREAT | 0600) >= 0)
			msg++;
		while (sem < arg && semget(IPC_PRIVATE, 1, IPC_CREAT | 0600) >= 0)
			sem++;
		while (shm < arg && shmget(IPC_PRIVATE, 1, IPC_CREAT | 0600) >= 0)
			shm++;
		printf("filled=%ld\n", msg + sem + shm);
	} else if (!strcmp(mode, "sleep")) {
		sleep((unsigned)arg);
	} else if (!strcmp(mode, "output")) {
		char buf[4096];
		memset(buf, 'x', sizeof(buf));
		while (arg > 0) {
			size_t k = arg > (long)sizeof(buf) ? sizeof(buf) : (size_t)arg;
			if (write(1, buf, k) < 0)
				return 1;
			arg -= (long)k;
		}
	} else if (!strcmp(mode, "spam")) {
		/* a line every 100 ms for arg seconds (keeps the idle clock fresh) */
		for (long i = 0; i < arg * 10; i++) {
			printf("tick %ld\n", i);
			usleep(100000);
		}
	} else if (!strcmp(mode, "exit")) {
		return (int)arg;
	} else if (!strcmp(mode, "raise")) {
		signal((int)arg, SIG_DFL);
		raise((int)arg);
		return 99;
	} else if (!strcmp(mode, "winch")) {
		struct winsize ws;
		struct sigaction sa = {.sa_handler = on_winch};
		sigaction(SIGWINCH, &sa, NULL);
		if (ioctl(0, TIOCGWINSZ, &ws) == 0)
			printf("winsize=%ux%u\n", ws.ws_col, ws.ws_row);
		for (long i = 0; i < arg * 100 && !winched; i++)
			usleep(10000);
		if (winched && ioctl(0, TIOCGWINSZ, &ws) == 0)
			printf("winch=%ux%u\n", ws.ws_col, ws.ws_row);
		else
			printf("winch=none\n");
	} else if (!strcmp(mode, "listen")) {
		/* A listener on 127.0.0.1:arg (bound as soon as the port is free, within argv[3]
		 * seconds; argv[4] "defer": with TCP_DEFER_ACCEPT): what the first client sends
		 * in 3 s, and whether it held a bearer token. An agent posing as a relay that is
		 * away. */
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((uint16_t)arg),
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		long secs = argc > 3 ? atol(argv[3]) : 10;
		char buf[4096];
		ssize_t n, got = 0;
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c, one = 1;

		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		/* "defer": the final ACK is dropped until data comes (a request socket) */
		if (argc > 4 && !strcmp(argv[4], "defer") &&
		    setsockopt(s, IPPROTO_TCP, TCP_DEFER_ACCEPT, &(int){30}, sizeof(int)) < 0)
			return 5;
		for (long i = 0; bind(s, (struct sockaddr *)&a, sizeof(a)) < 0; i++)
			if (i >= secs * 20)
				return 2;
			else
				usleep(50000);
		if (listen(s, 4) < 0)
			return 3;
		printf("listening\n");
		c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			return 4;
		for (int i = 0; i < 30 && got < (ssize_t)sizeof(buf) - 1; i++) {
			struct pollfd p = {.fd = c, .events = POLLIN};
			if (poll(&p, 1, 100) <= 0)
				continue;
			n = read(c, buf + got, sizeof(buf) - 1 - (size_t)got);
			if (n <= 0)
				break;
			got += n;
		}
		buf[got] = 0;
		printf("got=%zd\nbearer=%s\n", got, strstr(buf, "Bearer ") ? "yes" : "no");
	} else {
		fprintf(stderr, "probe: unknown mode '%s'\n", mode);
		return 100;
	}
	return 0;
}
