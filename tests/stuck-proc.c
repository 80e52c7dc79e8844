#include "tests/stuck-proc.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static bool proc_read(pid_t pid, const char *file, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, size - 1);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n > 0;
}

char proc_state_of(pid_t pid)
{
	char buf[512];
	const char *e = proc_read(pid, "stat", buf, sizeof(buf)) ? strrchr(buf, ')') : NULL;

	return e && e[1] == ' ' ? e[2] : 0;
}

/* A session of its own, and stdio away from a caller's $(...), which would wait for it. */
static void detach_now(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	setsid();
	for (int i = 0; fd >= 0 && i < 3; i++)
		(void)dup2(fd, i);
}

pid_t stuck_process(int cg_fd, bool detach, pid_t *ret_holder)
{
	int p[2] = {-1, -1}, go[2] = {-1, -1}, procs, i;
	pid_t holder = -1, stuck = -1;
	char w[64];

	*ret_holder = -1;
	if (pipe2(p, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0)
		goto out;
	fflush(NULL);
	holder = fork();
	if (holder == 0) {
		long ps = sysconf(_SC_PAGESIZE);
		struct uffdio_api api = {.api = UFFD_API};
		struct uffdio_register reg = {.mode = UFFDIO_REGISTER_MODE_MISSING};
		int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
		char *page = mmap(NULL, (size_t)ps, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (detach)
			detach_now();
		if (uffd < 0 || page == MAP_FAILED || ioctl(uffd, UFFDIO_API, &api) < 0)
			_exit(1);
		reg.range.start = (uintptr_t)page;
		reg.range.len = (uint64_t)ps;
		if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
			_exit(1);
		(void)!write(p[1], page, (size_t)ps); /* the fault, with the pipe's mutex held */
		_exit(1);
	}
	if (holder < 0)
		goto out;
	for (i = 0; i < 200; i++) {
		if (proc_read(holder, "wchan", w, sizeof(w)) && !strcmp(w, "handle_userfault"))
			break;
		usleep(10000);
	}
	if (i == 200)
		goto out;
	stuck = fork();
	if (stuck == 0) {
		char c;

		if (detach)
			detach_now();
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		(void)!write(p[1], "x", 1); /* mutex_lock: D until the holder lets go */
		_exit(0);
	}
	if (stuck < 0)
		goto out;
	procs = openat(cg_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	i = procs < 0 ? -1 : dprintf(procs, "%d\n", (int)stuck);
	if (procs >= 0)
		close(procs);
	if (i <= 0 || write(go[1], "x", 1) != 1)
		goto out;
	for (i = 0; i < 200 && proc_state_of(stuck) != 'D'; i++)
		usleep(10000);
	if (i < 200) {
		*ret_holder = holder;
		holder = -1;
	}
out:
	if (*ret_holder < 0) { /* nothing left running */
		if (stuck > 0)
			(void)kill(stuck, SIGKILL);
		if (holder > 0) {
			(void)kill(holder, SIGKILL);
			(void)waitpid(holder, NULL, 0);
		}
		if (stuck > 0)
			(void)waitpid(stuck, NULL, 0);
		stuck = -1;
	}
	for (i = 0; i < 2; i++) {
		if (p[i] >= 0)
			close(p[i]);
		if (go[i] >= 0)
			close(go[i]);
	}
	return stuck;
}
