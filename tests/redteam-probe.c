/* redteam-probe: the hostile agent of tests/integration/redteam-*.sh. Static (musl), libc
 * only; each mode tries one attack from inside the sandbox and prints key=value lines
 * with what happened (an errno name, "ok", or a count), so the shell test asserts on
 * facts, never on the probe's opinion.
 *
 *   redteam-probe stall SECONDS        SIGSTOP every new process of our uid that still runs
 *                                      pistisd's code (comm "pistisd": a spawn child between
 *                                      its uid change and execve); SIGCONT them at the end
 *   redteam-probe peek PID...          signal 0, /proc/PID/{environ,cmdline,mem,fd,maps,cwd,root}
 *                                      of others; ptrace, process_vm_readv, pidfd_open, then
 *                                      pidfd_send_signal(0) and pidfd_getfd(0) on that pidfd
 *   redteam-probe readfd N             read from fd N and through /proc/self/fd/N
 *   redteam-probe seccomp              extra seccomp checks (families, high bits, flags)
 *   redteam-probe setuid0              setresuid(0,0,0) and what ids result
 *   redteam-probe escape SECONDS       double fork + setsid + setpgid; the grandchild sleeps
 *   redteam-probe closeout SECONDS     close stdout/stderr, keep running
 *   redteam-probe cgroup [DIR]...      leave our command cgroup, kill or loosen it, its
 *                                      parents' and DIRs' (other agents' cgroups)
 *   redteam-probe pause                print our pid, then sleep until killed
 *   redteam-probe listen NAME SECONDS  bind abstract UNIX sockets @NAME (stream, listening)
 *                                      and @NAME.d (datagram), print listen=, then count
 *                                      what reaches them for SECONDS: accepted=N got=N
 *   redteam-probe connect NAME         connect to @NAME and send a datagram to @NAME.d:
 *                                      connect=ERRNO send=ERRNO
 *   redteam-probe hunt DIR...          read secrets (one a line, up to 8) from stdin, then look
 *                                      for each in every file we can read beneath DIRs (one
 *                                      file system each, symlinks not followed) and in every
 *                                      /proc/PID/{cmdline,environ} we can read: hit=PATH lines
 *                                      and the counts; the secrets never enter argv or env
 *   redteam-probe swap DIR A B SECONDS [MARK]
 *                                      exchange the names A and B in DIR (RENAME_EXCHANGE)
 *                                      over and over for SECONDS; A is ours at the start: it
 *                                      keeps the closing marks user.pistis.closed and MARK and mode
 *                                      0600 (so it needs changes), set again and again
 *                                      through an fd: swaps=N
 *   redteam-probe ipc-hoard N          make up to N SysV message queues, N semaphore sets and
 *                                      N/16 shared memory segments (fewer where the kernel's
 *                                      limits stop it), print hoard=COUNT, then sleep until
 *                                      killed
 *   redteam-probe tty [PATH]...        on fd 0, a terminal: TIOCSTI, TIOCLINUX, TIOCCONS,
 *                                      TIOCVHANGUP, vhangup, and in a setsid()'d child
 *                                      TIOCSCTTY with and without stealing; TIOCSIG with
 *                                      SIGKILL, SIGSTOP on a pty of its own; then open each
 *                                      PATH for writing: open.PATH=ERRNO
 *   redteam-probe ptys N SECONDS       open up to N pseudo-terminals (/dev/ptmx, unlocked),
 *                                      print ptys=COUNT and why it stopped, hold them SECONDS
 *   redteam-probe lease FILE SECONDS   take a write lease on FILE (ours), print lease=ERRNO,
 *                                      hold it SECONDS ignoring the break (SIGIO ignored)
 *   redteam-probe snoop SECONDS        stop each new process of our uid that still runs
 *                                      pistisd's code (runc CVE-2019-5736, CVE-2016-9962),
 *                                      then try its /proc/PID/exe for writing, reading and
 *                                      as O_PATH, its fd list, each fd, environ and mem;
 *                                      caught=N and, per attempt, how many succeeded
 *   redteam-probe execv0 PATH [ENV]... execve PATH with argc 0 (no argv at all, as in
 *                                      CVE-2021-4034) and exactly the ENV entries given;
 *                                      print exec=ERRNO only if execve fails */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef CLONE_NEWUSER
#define CLONE_NEWUSER 0x10000000
#endif

static const char *ename(int e)
{
	static char buf[16];

	switch (e) {
	case 0:
		return "ok";
	case EPERM:
		return "EPERM";
	case EACCES:
		return "EACCES";
	case ENOENT:
		return "ENOENT";
	case ESRCH:
		return "ESRCH";
	case ENOSYS:
		return "ENOSYS";
	case EINVAL:
		return "EINVAL";
	case EBADF:
		return "EBADF";
	case EFAULT:
		return "EFAULT";
	case EAFNOSUPPORT:
		return "EAFNOSUPPORT";
	case EPROTONOSUPPORT:
		return "EPROTONOSUPPORT";
	case ESOCKTNOSUPPORT:
		return "ESOCKTNOSUPPORT";
	case ENOTTY:
		return "ENOTTY";
	case EIO:
		return "EIO";
	case ENXIO:
		return "ENXIO";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case ENOSPC:
		return "ENOSPC";
	case EBUSY:
		return "EBUSY";
	case EMFILE:
		return "EMFILE";
	default:
		snprintf(buf, sizeof(buf), "E%d", e);
		return buf;
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return (int)n;
}

static long last_pid(void)
{
	char buf[32];

	if (read_small("/proc/sys/kernel/ns_last_pid", buf, sizeof(buf)) <= 0)
		return -1;
	return strtol(buf, NULL, 10);
}

/* The spawn child shares pistisd's memory until execve; once it has switched to the
 * agent's uid, the agent may signal it. Catch it in that window with SIGSTOP: comm is
 * still "pistisd" before execve replaces the program. */
static int mode_stall(int secs)
{
	pid_t caught[64];
	int n_caught = 0, hits_after_exec = 0;
	pid_t self = getpid();
	uint64_t end = now_ms() + (uint64_t)secs * 1000;

	printf("pid=%d\n", (int)self);
	fflush(stdout);
	while (now_ms() < end) {
		long last = last_pid();

		if (last < 0)
			break;
		for (long p = last - 4; p <= last + 48; p++) {
			char path[64], comm[32];

			if (p <= 1 || p == self)
				continue;
			if (kill((pid_t)p, SIGSTOP) < 0)
				continue;
			snprintf(path, sizeof(path), "/proc/%ld/comm", p);
			if (read_small(path, comm, sizeof(comm)) > 0 &&
			    !strncmp(comm, "pistisd", 7) &&
			    n_caught < (int)(sizeof(caught) / sizeof(caught[0]))) {
				bool seen = false;
				for (int i = 0; i < n_caught; i++)
					seen = seen || caught[i] == (pid_t)p;
				if (!seen) {
					char st[256];
					snprintf(path, sizeof(path), "/proc/%ld/stat", p);
					if (read_small(path, st, sizeof(st)) > 0)
						printf("caught.stat=%s", st);
					caught[n_caught++] = (pid_t)p;
				}
			} else {
				/* A command of ours after its execve: let it go on. */
				hits_after_exec++;
				kill((pid_t)p, SIGCONT);
			}
		}
	}
	printf("caught=%d\n", n_caught);
	printf("after_exec=%d\n", hits_after_exec);
	for (int i = 0; i < n_caught; i++)
		kill(caught[i], SIGCONT);
	return 0;
}

static void peek_file(const char *pid, const char *what, int flags)
{
	char path[128], buf[256];
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/%s", pid, what);
	fd = open(path, flags | O_CLOEXEC);
	if (fd < 0) {
		printf("%s.%s=%s\n", pid, what, ename(errno));
		return;
	}
	if (flags & O_DIRECTORY) {
		DIR *d = fdopendir(fd);
		int n = 0;
		struct dirent *de;

		if (!d) {
			printf("%s.%s=%s\n", pid, what, ename(errno));
			close(fd);
			return;
		}
		errno = 0;
		while ((de = readdir(d)))
			n += de->d_name[0] != '.';
		printf("%s.%s=%s\n", pid, what, errno ? ename(errno) : n ? "listed" : "empty");
		closedir(d);
		return;
	}
	/* mem: try the first mapped page the kernel lets us name (the vdso's neighbourhood
	 * is not needed: any read that succeeds is a failure of the boundary). */
	ssize_t n = read(fd, buf, sizeof(buf));
	printf("%s.%s=%s\n", pid, what, n < 0 ? ename(errno) : n == 0 ? "empty" : "read");
	close(fd);
}

static int mode_peek(int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		const char *pid = argv[i];
		char path[128], buf[4096];

		printf("%s.kill0=%s\n", pid, kill((pid_t)atoi(pid), 0) < 0 ? ename(errno) : "ok");
		peek_file(pid, "environ", O_RDONLY);
		peek_file(pid, "cmdline", O_RDONLY);
		peek_file(pid, "fd", O_RDONLY | O_DIRECTORY);
		peek_file(pid, "maps", O_RDONLY);
		peek_file(pid, "cwd", O_RDONLY | O_DIRECTORY);
		peek_file(pid, "root", O_RDONLY | O_DIRECTORY);
		/* /proc/PID/mem at an address from maps, if maps was readable; else at 0x400000. */
		snprintf(path, sizeof(path), "/proc/%s/mem", pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			printf("%s.mem=%s\n", pid, ename(errno));
		} else {
			ssize_t n = pread(fd, buf, 16, 0x400000);
			printf("%s.mem=%s\n", pid,
			       n < 0 ? (errno == EIO ? "opened" : ename(errno)) : "read");
			close(fd);
		}
		/* One real byte each side: with no iovecs the kernel returns 0 before any
		 * permission check, which reads as "ok" where no filter is on. */
		struct iovec lv = {buf, 1}, rv = {(void *)0x400000, 1};
		printf("%s.process_vm_readv=%s\n", pid,
		       syscall(SYS_process_vm_readv, atoi(pid), &lv, 1, &rv, 1, 0) < 0
			       ? ename(errno)
			       : "ok");
		printf("%s.ptrace=%s\n", pid,
		       syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, atoi(pid), 0, 0) < 0
			       ? ename(errno)
			       : "ok");
		/* pidfd_open checks nothing (a pidfd only names a process); what it is then good
		 * for must be checked: a signal (kill's rules) and taking one of its fds
		 * (ptrace's rules, and the spawn filter). Raw numbers: musl may lack wrappers. */
		long pfd = syscall(434 /* pidfd_open */, atoi(pid), 0);
		printf("%s.pidfd_open=%s\n", pid, pfd < 0 ? ename(errno) : "ok");
		if (pfd >= 0) {
			printf("%s.pidfd_send_signal=%s\n", pid,
			       syscall(424 /* pidfd_send_signal */, pfd, 0, NULL, 0) < 0
				       ? ename(errno)
				       : "ok");
			long got = syscall(438 /* pidfd_getfd */, pfd, 0, 0);
			printf("%s.pidfd_getfd=%s\n", pid, got < 0 ? ename(errno) : "ok");
			if (got >= 0)
				close((int)got);
			close((int)pfd);
		}
	}
	return 0;
}

static int mode_readfd(int n)
{
	char path[64], buf[256];
	ssize_t k;
	int fd;

	k = read(n, buf, sizeof(buf));
	printf("fd.read=%s\n", k < 0 ? ename(errno) : "read");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", n);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	printf("fd.reopen=%s\n", fd < 0 ? ename(errno) : "ok");
	if (fd >= 0) {
		k = read(fd, buf, sizeof(buf) - 1);
		if (k > 0) {
			buf[k] = 0;
			buf[strcspn(buf, "\n")] = 0;
			printf("fd.content=%s\n", buf);
		}
	}
	return 0;
}

static void try_socket(const char *name, unsigned long long family, int type)
{
	long r = syscall(SYS_socket, family, type, 0);

	printf("socket.%s=%s\n", name, r < 0 ? ename(errno) : "ok");
	if (r >= 0)
		close((int)r);
}

static int mode_seccomp(void)
{
	static const struct {
		const char *name;
		int family;
	} fams[] = {
		{"AF_PACKET", 17}, {"AF_VSOCK", 40},   {"AF_ALG", 38},	     {"AF_KEY", 15},
		{"AF_XDP", 44},	   {"AF_CAN", 29},     {"AF_BLUETOOTH", 31}, {"AF_TIPC", 30},
		{"AF_RDS", 21},	   {"AF_LLC", 26},     {"AF_PPPOX", 24},     {"AF_APPLETALK", 5},
		{"AF_X25", 9},	   {"AF_AX25", 3},     {"AF_IPX", 4},	     {"AF_NFC", 39},
		{"AF_SMC", 43},	   {"AF_QIPCRTR", 42}, {"AF_MCTP", 45},	     {"AF_KCM", 41}};
	int sv[2];

	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		char hi[48];

		try_socket(fams[i].name, (unsigned long long)fams[i].family, SOCK_RAW);
		/* The kernel reads an int: junk in the upper half must not change the verdict. */
		snprintf(hi, sizeof(hi), "%s_hi", fams[i].name);
		try_socket(hi, (1ULL << 32) | (unsigned long long)fams[i].family, SOCK_RAW);
	}
	printf("socketpair.AF_PACKET=%s\n",
	       syscall(SYS_socketpair, 17, SOCK_RAW, 0, sv) < 0 ? ename(errno) : "ok");
	printf("socketpair.AF_VSOCK_hi=%s\n",
	       syscall(SYS_socketpair, (1ULL << 32) | 40, SOCK_STREAM, 0, sv) < 0 ? ename(errno)
										  : "ok");
	/* ioctl numbers with junk in the upper half: the tty layer reads 32 bits. */
	printf("ioctl.TIOCSTI_hi=%s\n",
	       syscall(SYS_ioctl, 0, (0xdeadbeefULL << 32) | TIOCSTI, "x") < 0 ? ename(errno)
									       : "ok");
	printf("ioctl.TIOCLINUX_hi=%s\n",
	       syscall(SYS_ioctl, 0, (0x1ULL << 32) | TIOCLINUX, "\x06") < 0 ? ename(errno) : "ok");
	{
		/* Past NR_LDISCS: EINVAL where allowed, so a broken filter loads nothing here. */
		int ldisc = 999;
		printf("ioctl.TIOCSETD_hi=%s\n",
		       syscall(SYS_ioctl, 0, (0x7ULL << 32) | TIOCSETD, &ldisc) < 0 ? ename(errno)
										    : "ok");
	}
	/* clone with CLONE_NEWUSER and junk high bits: denied before the kernel sees it. */
	{
		long r = syscall(SYS_clone, (0xffULL << 40) | CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
		if (r == 0)
			_exit(0);
		if (r > 0)
			waitpid((pid_t)r, NULL, 0);
		printf("clone.NEWUSER_hi=%s\n", r < 0 ? ename(errno) : "ok");
	}
	/* userfaultfd through the device node: outside the syscall filter. */
	{
		int fd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		printf("dev.userfaultfd=%s\n", fd < 0 ? ename(errno) : "ok");
		if (fd >= 0)
			close(fd);
	}
	printf("unshare.NEWUSER=%s\n",
	       syscall(SYS_unshare, CLONE_NEWUSER) < 0 ? ename(errno) : "ok");
	printf("setns=%s\n", syscall(SYS_setns, -1, 0) < 0 ? ename(errno) : "ok");
	printf("pidfd_getfd=%s\n", syscall(438, -1, 0, 0) < 0 ? ename(errno) : "ok");
	printf("kcmp=%s\n", syscall(SYS_kcmp, 1, 1, 0, 0, 0) < 0 ? ename(errno) : "ok");
	return 0;
}

static int mode_setuid0(void)
{
	uid_t r, e, s;
	long k = syscall(SYS_setresuid, 0, 0, 0);

	printf("setresuid0=%s\n", k < 0 ? ename(errno) : "ok");
	getresuid(&r, &e, &s);
	printf("uid=%u,%u,%u\n", (unsigned)r, (unsigned)e, (unsigned)s);
	return 0;
}

static int mode_escape(int secs)
{
	pid_t p = fork();

	if (p < 0)
		return 111;
	if (p == 0) {
		pid_t q = fork();
		if (q != 0)
			_exit(0);
		setsid();
		setpgid(0, 0);
		for (int fd = 0; fd < 3; fd++)
			close(fd);
		/* A name the test can look for. */
		char *const av[] = {"sleep", NULL};
		(void)av;
		sleep((unsigned)secs);
		_exit(0);
	}
	waitpid(p, NULL, 0);
	printf("escaped=1\n");
	return 0;
}

static int mode_closeout(int secs)
{
	printf("closing\n");
	fflush(stdout);
	close(1);
	close(2);
	sleep((unsigned)secs);
	return 0;
}

/* Write text to dir/file as the agent would: the errno of the open or the write. */
static const char *cg_write(const char *dir, const char *file, const char *text)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return ename(errno);
	if (write(fd, text, strlen(text)) < 0) {
		int e = errno;
		close(fd);
		return ename(e);
	}
	close(fd);
	return "ok";
}

static int mode_cgroup(int argc, char **argv)
{
	static const char *const mounts[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
	char line[4096], self[4096] = "", dir[4096], pid[32];
	FILE *f = fopen("/proc/self/cgroup", "re");
	struct stat st;
	char *slash;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(self, sizeof(self), "%s", line + 3);
		}
	if (f)
		fclose(f);
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]) && *self; i++) {
		snprintf(dir, sizeof(dir), "%s%s", mounts[i], self);
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
			break;
		dir[0] = 0;
	}
	if (!*self || !dir[0]) {
		printf("cg.found=no\n");
		return 1;
	}
	printf("cg.found=yes\ncg.self=%s\n", self);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	printf("cg.mkdir=%s\n",
	       mkdir(strcat(strcpy(line, dir), "/escape"), 0755) < 0 ? ename(errno) : "ok");
	printf("cg.self.pids_max=%s\n", cg_write(dir, "pids.max", "max"));
	printf("cg.self.memory_max=%s\n", cg_write(dir, "memory.max", "max"));
	printf("cg.self.subtree_control=%s\n", cg_write(dir, "cgroup.subtree_control", "+pids"));
	/* Every ancestor up to the hierarchy's root: moving there is leaving the command's
	 * cgroup (and its kill); cgroup.kill there kills other commands, other agents. */
	int levels = 0;

	for (int up = 1; (slash = strrchr(dir, '/')) && slash > dir; up++) {
		*slash = 0;
		if (stat(strcat(strcpy(line, dir), "/cgroup.procs"), &st) < 0)
			break;
		printf("cg.up%d.procs=%s\n", up, cg_write(dir, "cgroup.procs", pid));
		printf("cg.up%d.threads=%s\n", up, cg_write(dir, "cgroup.threads", pid));
		printf("cg.up%d.kill=%s\n", up, cg_write(dir, "cgroup.kill", "1"));
		printf("cg.up%d.freeze=%s\n", up, cg_write(dir, "cgroup.freeze", "1"));
		levels = up;
	}
	printf("cg.levels=%d\n", levels);
	for (int i = 2; i < argc; i++) {
		printf("cg.other%d.procs=%s\n", i - 1, cg_write(argv[i], "cgroup.procs", pid));
		printf("cg.other%d.kill=%s\n", i - 1, cg_write(argv[i], "cgroup.kill", "1"));
		printf("cg.other%d.freeze=%s\n", i - 1, cg_write(argv[i], "cgroup.freeze", "1"));
	}
	/* Still where pistisd put us? */
	f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = 0;
			printf("cg.after=%s\n", line + 3);
		}
	if (f)
		fclose(f);
	return 0;
}

static char hunt_needles[8][1024];
static int hunt_n_needles;
static long hunt_files, hunt_hits;

/* Open without following, never a FIFO or device (O_NONBLOCK, then S_ISREG on the fd), read
 * up to 8 MiB and look for every needle. */
static void hunt_file(const char *path)
{
	static char buf[8 << 20];
	struct stat st;
	size_t len = 0;
	ssize_t k;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return;
	}
	while (len < sizeof(buf) && (k = read(fd, buf + len, sizeof(buf) - len)) > 0)
		len += (size_t)k;
	close(fd);
	hunt_files++;
	for (int i = 0; i < hunt_n_needles; i++)
		if (memmem(buf, len, hunt_needles[i], strlen(hunt_needles[i]))) {
			printf("hit=%s secret=%d\n", path, i + 1);
			hunt_hits++;
		}
}

/* Depth-first by name, symlinks not followed, staying on the directory's file system (by
 * the directories' st_dev: overlayfs gives lower-layer files their layer's st_dev, so files
 * are not judged by it), so procfs, sysfs and other mounts are not walked. */
static void hunt_dir(const char *path, dev_t dev, int depth)
{
	DIR *d = depth < 64 ? opendir(path) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char child[4096];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(child, sizeof(child), "%s/%s", strcmp(path, "/") ? path : "",
			     de->d_name) >= (int)sizeof(child) ||
		    lstat(child, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && st.st_dev == dev)
			hunt_dir(child, dev, depth + 1);
		else if (S_ISREG(st.st_mode))
			hunt_file(child);
	}
	if (d)
		closedir(d);
}

static int mode_hunt(int argc, char **argv)
{
	char line[1024];
	DIR *d;
	struct dirent *de;

	while (hunt_n_needles < 8 && fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strlen(line) >= 8)
			snprintf(hunt_needles[hunt_n_needles++], sizeof(hunt_needles[0]), "%s",
				 line);
	}
	printf("needles=%d\n", hunt_n_needles);
	if (!hunt_n_needles)
		return 1;
	for (int i = 2; i < argc; i++) {
		struct stat st;

		/* /proc is looked at below, PID by PID. */
		if (lstat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
			hunt_dir(argv[i], st.st_dev, 0);
	}
	d = opendir("/proc");
	while (d && (de = readdir(d))) {
		char path[300];

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		hunt_file(path);
		snprintf(path, sizeof(path), "/proc/%s/environ", de->d_name);
		hunt_file(path);
	}
	if (d)
		closedir(d);
	printf("files=%ld\nhits=%ld\n", hunt_files, hunt_hits);
	return 0;
}

/* An abstract address: sun_path[0] is NUL, the name follows, the length says where it ends. */
static socklen_t abstract_addr(struct sockaddr_un *a, const char *name, const char *suffix)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "%s%s", name, suffix);
	if (n < 0 || (size_t)n >= sizeof(a->sun_path) - 1)
		n = (int)sizeof(a->sun_path) - 2;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int mode_listen(const char *name, int seconds)
{
	struct sockaddr_un a;
	socklen_t l;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int d = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int accepted = 0, got = 0, e = 0;
	time_t end = time(NULL) + seconds;

	l = abstract_addr(&a, name, "");
	if (s < 0 || bind(s, (struct sockaddr *)&a, l) < 0 || listen(s, 16) < 0)
		e = errno;
	l = abstract_addr(&a, name, ".d");
	if (!e && (d < 0 || bind(d, (struct sockaddr *)&a, l) < 0))
		e = errno;
	printf("listen=%s\n", ename(e));
	if (e)
		return 1;
	while (time(NULL) < end) {
		struct pollfd p[2] = {{.fd = s, .events = POLLIN}, {.fd = d, .events = POLLIN}};
		char b[64];
		int c;

		if (poll(p, 2, 100) <= 0)
			continue;
		while ((c = accept4(s, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
			accepted++;
			close(c);
		}
		while (recv(d, b, sizeof(b), MSG_DONTWAIT) >= 0)
			got++;
	}
	printf("accepted=%d got=%d\n", accepted, got);
	return 0;
}

static int mode_connect(const char *name)
{
	struct sockaddr_un a;
	socklen_t l = abstract_addr(&a, name, "");
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int d = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int e;

	e = s < 0 || connect(s, (struct sockaddr *)&a, l) < 0 ? errno : 0;
	printf("connect=%s\n", ename(e));
	l = abstract_addr(&a, name, ".d");
	e = d < 0 || sendto(d, "x", 1, 0, (struct sockaddr *)&a, l) < 0 ? errno : 0;
	printf("send=%s\n", ename(e));
	return 0;
}

static int mode_swap(const char *dir, const char *a, const char *b, int secs, const char *mark)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int own = dfd < 0 ? -1 : openat(dfd, a, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	time_t end = time(NULL) + secs;
	unsigned long n = 0;

	if (own < 0) {
		printf("open=%s\n", ename(errno));
		return 1;
	}
	while (time(NULL) < end) {
		if (syscall(SYS_renameat2, dfd, a, dfd, b, 2 /* RENAME_EXCHANGE */) == 0)
			n++;
		if ((n & 63) == 0) {
			/* The first version's mark ("1"), and the mark's name under the
			 * root's key (no secret) with a tag the agent made up. */
			(void)fsetxattr(own, "user.pistis.closed", "1", 1, 0);
			if (mark)
				(void)fsetxattr(own, mark, "\002agent-made-tag!", 17, 0);
			(void)fchmod(own, 0600);
		}
	}
	printf("swaps=%lu\n", n);
	return 0;
}

/* Fill the IPC namespace's tables, and keep them filled: our own command keeps running, so
 * pistisd's sweep at our last command's end never removes them. */
static int mode_ipc_hoard(long n)
{
	long made = 0;
	bool msg = true, sem = true, shm = true;

	for (long i = 0; i < n && (msg || sem || shm); i++) {
		msg = msg && msgget(IPC_PRIVATE, IPC_CREAT | 0600) >= 0;
		sem = sem && semget(IPC_PRIVATE, 1, IPC_CREAT | 0600) >= 0;
		shm = shm && i < n / 16 && shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600) >= 0;
		made += msg + sem + shm;
	}
	printf("hoard=%ld\n", made);
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}

static void tty_try(const char *what, int r)
{
	printf("%s=%s\n", what, ename(r < 0 ? errno : 0));
}

static int mode_tty(int argc, char **argv)
{
	char c = 'x';
	int st = 0;
	pid_t pid;

	tty_try("TIOCSTI", ioctl(0, TIOCSTI, &c));
	tty_try("TIOCLINUX", ioctl(0, TIOCLINUX, &(char){6}));
	tty_try("TIOCCONS", ioctl(0, TIOCCONS));
	tty_try("TIOCVHANGUP", ioctl(0, TIOCVHANGUP));
	tty_try("vhangup", (int)syscall(SYS_vhangup));
	fflush(stdout);
	/* A new session may take a terminal that is no one's controlling terminal; ours is
	 * our session's, and taking it anyway (arg 1) needs CAP_SYS_ADMIN. */
	pid = fork();
	if (pid == 0) {
		if (setsid() < 0)
			_exit(1);
		tty_try("TIOCSCTTY", ioctl(0, TIOCSCTTY, 0));
		tty_try("TIOCSCTTY_steal", ioctl(0, TIOCSCTTY, 1));
		fflush(stdout);
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, &st, 0);
	/* TIOCSIG on a master of our own sends its slave's foreground group a signal with no
	 * permission check: the kernel takes only SIGINT, SIGQUIT and SIGTSTP (docs/trusted.md) */
	{
		int unlock = 0, m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (m >= 0 && ioctl(m, TIOCSPTLCK, &unlock) == 0) {
			tty_try("TIOCSIG_KILL", ioctl(m, TIOCSIG, SIGKILL));
			tty_try("TIOCSIG_STOP", ioctl(m, TIOCSIG, SIGSTOP));
		} else {
			printf("TIOCSIG_KILL=%s\n", ename(errno));
		}
		if (m >= 0)
			close(m);
	}
	for (int i = 2; i < argc; i++) {
		int fd = open(argv[i], O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		printf("open.%s=%s\n", argv[i], ename(fd < 0 ? errno : 0));
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

static int mode_ptys(long n, int seconds)
{
	long got = 0;
	int e = 0;

	for (; got < n; got++) {
		int unlock = 0, m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (m < 0) {
			e = errno;
			break;
		}
		(void)ioctl(m, TIOCSPTLCK, &unlock);
	}
	printf("ptys=%ld\nstop=%s\n", got, got < n ? ename(e) : "none");
	fflush(stdout);
	sleep((unsigned)seconds);
	return 0;
}

/* A write lease makes every other open of the file wait for its holder (up to
 * fs.lease-break-time) or fail with EWOULDBLOCK (O_NONBLOCK). */
static int mode_lease(const char *path, int seconds)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	signal(SIGIO, SIG_IGN);
	if (fd < 0) {
		printf("lease=open:%s\n", ename(errno));
		return 1;
	}
	printf("lease=%s\n", fcntl(fd, F_SETLEASE, F_WRLCK) < 0 ? ename(errno) : "ok");
	fflush(stdout);
	sleep((unsigned)seconds);
	return 0;
}

/* Whether process p, just sent SIGSTOP, is stopped (state T within ~20 ms) and its comm is
 * still "pistisd". */
static bool stopped_as_pistisd(long p)
{
	char path[64], buf[512], comm[32];

	for (int i = 0; i < 200; i++) {
		snprintf(path, sizeof(path), "/proc/%ld/stat", p);
		if (read_small(path, buf, sizeof(buf)) <= 0)
			return false;
		const char *rp = strrchr(buf, ')');
		if (rp && rp[1] == ' ' && (rp[2] == 'T' || rp[2] == 't'))
			break;
		if (i == 199)
			return false;
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	snprintf(path, sizeof(path), "/proc/%ld/comm", p);
	return read_small(path, comm, sizeof(comm)) > 0 && !strncmp(comm, "pistisd", 7);
}

/* Like stall, but what matters is what the agent can take from the caught child: its
 * executable (runc CVE-2019-5736 overwrote the runtime's binary through /proc/PID/exe of a
 * process that still ran it) and the daemon's fds it held while it already had the
 * agent's uid (runc CVE-2016-9962). Each count is of attempts that succeeded. */
static int mode_snoop(int secs)
{
	static const struct {
		const char *what;
		int flags;
	} tries[] = {{"exe", O_WRONLY},	    {"exe", O_RDONLY}, {"exe", O_PATH},
		     {"environ", O_RDONLY}, {"mem", O_RDONLY}, {"fd", O_RDONLY | O_DIRECTORY}};
	static const char *const names[] = {"exe_write", "exe_read", "exe_path",
					    "environ",	 "mem",	     "fd_list"};
	int got[6] = {0}, fd_open = 0, caught = 0;
	pid_t seen[256];
	pid_t self = getpid();
	uint64_t end = now_ms() + (uint64_t)secs * 1000;

	printf("pid=%d\n", (int)self);
	fflush(stdout);
	while (now_ms() < end) {
		long last = last_pid();

		if (last < 0)
			break;
		/* Behind the last pid too: other processes of the machine take pids between the
		 * clone and the id change. */
		for (long p = last - 160; p <= last + 16; p++) {
			char path[64];
			bool dup = false;

			if (p <= 1 || p == self || kill((pid_t)p, SIGSTOP) < 0)
				continue;
			for (int i = 0; i < caught && i < 256; i++)
				dup = dup || seen[i] == (pid_t)p;
			/* SIGSTOP takes hold on the way back to user space: a process in the middle
			 * of its execve still says "pistisd" but stops as the new program (fds 0-2,
			 * its own exe and memory, and a new comm). Only one that stopped while
			 * still "pistisd" was caught between the id change and execve. */
			if (dup || !stopped_as_pistisd(p)) {
				kill((pid_t)p, SIGCONT);
				continue;
			}
			if (caught < 256)
				seen[caught] = (pid_t)p;
			caught++;
			for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
				snprintf(path, sizeof(path), "/proc/%ld/%s", p, tries[i].what);
				int fd = open(path, tries[i].flags | O_CLOEXEC);
				if (fd >= 0) {
					got[i]++;
					close(fd);
				}
			}
			for (int n = 0; n < 64; n++) {
				snprintf(path, sizeof(path), "/proc/%ld/fd/%d", p, n);
				int fd = open(path, O_PATH | O_CLOEXEC);
				if (fd >= 0) {
					fd_open++;
					close(fd);
				}
			}
			kill((pid_t)p, SIGCONT);
		}
	}
	printf("caught=%d\n", caught);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		printf("%s=%d\n", names[i], got[i]);
	printf("fd_open=%d\n", fd_open);
	return 0;
}

/* argc 0: argv is {NULL}, so argv[0] is NULL and argv[1] is the first entry of envp in a
 * program that does not check (pkexec, CVE-2021-4034). */
static int mode_execv0(int argc, char **argv)
{
	char *const none[] = {NULL};

	execve(argv[2], none, argc > 3 ? argv + 3 : none);
	printf("exec=%s\n", ename(errno));
	return 127;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "stall") && argc > 2)
		return mode_stall(atoi(argv[2]));
	if (!strcmp(mode, "peek"))
		return mode_peek(argc, argv);
	if (!strcmp(mode, "readfd") && argc > 2)
		return mode_readfd(atoi(argv[2]));
	if (!strcmp(mode, "seccomp"))
		return mode_seccomp();
	if (!strcmp(mode, "setuid0"))
		return mode_setuid0();
	if (!strcmp(mode, "escape") && argc > 2)
		return mode_escape(atoi(argv[2]));
	if (!strcmp(mode, "closeout") && argc > 2)
		return mode_closeout(atoi(argv[2]));
	if (!strcmp(mode, "cgroup"))
		return mode_cgroup(argc, argv);
	if (!strcmp(mode, "hunt"))
		return mode_hunt(argc, argv);
	if (!strcmp(mode, "listen") && argc > 3)
		return mode_listen(argv[2], atoi(argv[3]));
	if (!strcmp(mode, "connect") && argc > 2)
		return mode_connect(argv[2]);
	if (!strcmp(mode, "swap") && argc > 5)
		return mode_swap(argv[2], argv[3], argv[4], atoi(argv[5]),
				 argc > 6 ? argv[6] : NULL);
	if (!strcmp(mode, "ipc-hoard") && argc > 2)
		return mode_ipc_hoard(atol(argv[2]));
	if (!strcmp(mode, "tty"))
		return mode_tty(argc, argv);
	if (!strcmp(mode, "ptys") && argc > 3)
		return mode_ptys(atol(argv[2]), atoi(argv[3]));
	if (!strcmp(mode, "lease") && argc > 3)
		return mode_lease(argv[2], atoi(argv[3]));
	if (!strcmp(mode, "snoop") && argc > 2)
		return mode_snoop(atoi(argv[2]));
	if (!strcmp(mode, "execv0") && argc > 2)
		return mode_execv0(argc, argv);
	if (!strcmp(mode, "pause")) {
		printf("pid=%d\n", (int)getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	fprintf(stderr, "usage: redteam-probe stall S|peek PID...|readfd N|seccomp|setuid0|"
			"escape S|closeout S|cgroup [DIR]...|pause|hunt DIR...|listen NAME S|"
			"connect NAME|swap DIR A B S [MARK]|tty [PATH]...|ptys N S|lease FILE S|"
			"snoop S|execv0 PATH [ENV]...\n");
	return 100;
}
