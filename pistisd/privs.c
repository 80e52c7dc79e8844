/* Identity change and capability drop, raw syscalls only (see privs.h for why). The order
 * the spawn child calls these in, and why, is in docs/spawn.md. */
#include "pistisd/privs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/macro.h"
#include "lib/proc-status.h"
#include "sandbox-users/users.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_IS_SET 1
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

static int sys_ret(long r)
{
	return r < 0 ? negative_errno() : (int)r;
}

int privs_check_agent_ids(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups)
{
	/* users_uid_is_agent excludes 0 and (uid_t)-1 by construction. */
	if (!users_uid_is_agent(uid) || !users_uid_is_agent((uid_t)gid))
		return -EPERM;
	if (n_groups > PRIVS_MAX_GROUPS || (n_groups > 0 && !groups))
		return -EINVAL;
	for (size_t i = 0; i < n_groups; i++) {
		if (groups[i] != gid && groups[i] != USERS_SANDBOX_GID)
			return -EPERM;
		for (size_t j = 0; j < i; j++)
			if (groups[j] == groups[i])
				return -EINVAL;
	}
	return 0;
}

/* PR_CAPBSET_READ of capability c: 0 or 1 when the kernel knows c, -EINVAL when c is past
 * its last one (cap_valid), the same bound /proc/sys/kernel/cap_last_cap prints. */
static int capbset_read(int c)
{
	return sys_ret(syscall(SYS_prctl, PR_CAPBSET_READ, c, 0, 0, 0));
}

int privs_read_last_cap(void)
{
	/* Start from the headers' last capability and walk to the kernel's: two or three
	 * prctl calls instead of a procfs open, read and close. */
	int c = CAP_LAST_CAP, r = capbset_read(c);

	if (r >= 0) {
		while (c < 63 && (r = capbset_read(c + 1)) >= 0)
			c++;
		return r == -EINVAL || c == 63 ? c : r;
	}
	while (r == -EINVAL && --c >= 0)
		r = capbset_read(c);
	return r >= 0 ? c : r == -EINVAL ? -EIO : r;
}

int privs_drop_bounding(int last_cap, uint64_t keep, const char *status)
{
	uint64_t all = last_cap >= 63 ? UINT64_MAX : (UINT64_C(1) << (last_cap + 1)) - 1, bnd;
	uint64_t held = all;
	char buf[4096];

	if (status && proc_status_hex(status, "CapBnd", &bnd) == 0) {
		if ((bnd & ~keep & all) == 0)
			return 0;
		held = bnd;
	}
	for (int c = 0; c <= last_cap; c++) {
		if ((keep & (UINT64_C(1) << c)) || !(held & (UINT64_C(1) << c)))
			continue;
		if (syscall(SYS_prctl, PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			return negative_errno();
	}
	/* Read back: a kernel or LSM that pretends is a failure. The whole set at once from
	 * /proc/self/status (CapBnd), or a PR_CAPBSET_READ each where that cannot be read. */
	if (proc_status_read(buf, sizeof(buf)) >= 0 && proc_status_hex(buf, "CapBnd", &bnd) == 0)
		return (bnd & ~keep & all) == 0 ? 0 : -EIO;
	for (int c = 0; c <= last_cap; c++)
		if (!(keep & (UINT64_C(1) << c)) &&
		    syscall(SYS_prctl, PR_CAPBSET_READ, c, 0, 0, 0) != 0)
			return -EIO;
	return 0;
}

int privs_setgroups(const gid_t *groups, size_t n_groups)
{
	gid_t got[PRIVS_MAX_GROUPS + 1];
	long n;

	if (n_groups > PRIVS_MAX_GROUPS)
		return -EINVAL;
	if (syscall(SYS_setgroups, n_groups, groups) < 0)
		return negative_errno();
	n = syscall(SYS_getgroups, (int)ELEMENTSOF(got), got);
	if (n < 0)
		return negative_errno();
	if ((size_t)n != n_groups)
		return -EIO;
	/* The kernel keeps the list sorted: compare as sets (no duplicates on either side). */
	for (size_t i = 0; i < n_groups; i++) {
		bool found = false;
		for (size_t j = 0; j < n_groups; j++)
			found = found || got[j] == groups[i];
		if (!found)
			return -EIO;
	}
	return 0;
}

int privs_setresgid(gid_t gid)
{
	gid_t r = (gid_t)-1, e = (gid_t)-1, s = (gid_t)-1;
	int k;

	k = sys_ret(syscall(SYS_setresgid, gid, gid, gid));
	if (k < 0)
		return k;
	k = sys_ret(syscall(SYS_getresgid, &r, &e, &s));
	if (k < 0)
		return k;
	return r == gid && e == gid && s == gid ? 0 : -EIO;
}

__attribute__((weak)) void privs_test_point(enum privs_point point)
{
	(void)point;
}

/* setresuid(ruid, euid, suid), read back, and no way back: setuid(0) must now fail.
 *
 * Never within the agent's reach meanwhile. The id change makes the process dumpable if
 * fs.suid_dumpable is 1 (`--allow suid_dumpable`): from then until PR_SET_DUMPABLE 0 a
 * process of the agent's could ptrace-attach to it, a copy of pistisd's memory with its
 * fds, no seccomp filter and no no_new_privs yet, and run code of its choosing there. So
 * the permitted set is kept across the change (PR_SET_KEEPCAPS; the effective set is
 * emptied all the same, so nothing below runs with a capability): the kernel lets a tracer
 * attach, or open /proc/PID/mem, environ or fd, only when the target's permitted set is
 * within the tracer's (cap_ptrace_access_check), and no agent process has any. Not
 * dumpable first, then the capabilities go: at no moment is the process both dumpable and
 * without capabilities. */
static int setresuid_checked(uid_t ruid, uid_t euid, uid_t suid)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {{0}};
	uid_t r = (uid_t)-1, e = (uid_t)-1, s = (uid_t)-1;
	bool shield;
	long bits;
	int k;

	/* Refused (EPERM) only where the securebits lock KEEP_CAPS (systemd's SecureBits=).
	 * Locked on, the permitted set is kept all the same. Locked off, the change keeps
	 * nothing: then the process must come out of it not dumpable by the agent
	 * (fs.suid_dumpable other than 1), or nothing runs. */
	shield = syscall(SYS_prctl, PR_SET_KEEPCAPS, 1, 0, 0, 0) == 0 ||
		 ((bits = syscall(SYS_prctl, PR_GET_SECUREBITS, 0, 0, 0, 0)) >= 0 &&
		  (bits & SECBIT_KEEP_CAPS));
	k = sys_ret(syscall(SYS_setresuid, ruid, euid, suid));
	if (k < 0) {
		(void)syscall(SYS_prctl, PR_SET_KEEPCAPS, 0, 0, 0, 0);
		return k;
	}
	privs_test_point(PRIVS_POINT_ID_CHANGED);
	if (!shield && syscall(SYS_prctl, PR_GET_DUMPABLE, 0, 0, 0, 0) == 1 /* SUID_DUMP_USER */)
		return -EPERM;
	k = sys_ret(syscall(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0));
	if (k < 0)
		return k;
	privs_test_point(PRIVS_POINT_NOT_DUMPABLE);
	k = sys_ret(syscall(SYS_capset, &hdr, none));
	if (k < 0)
		return k;
	privs_test_point(PRIVS_POINT_CAPS_DROPPED);
	/* Refused only where locked on; execve clears it anyway, and there is nothing left
	 * to keep. */
	(void)syscall(SYS_prctl, PR_SET_KEEPCAPS, 0, 0, 0, 0);
	k = sys_ret(syscall(SYS_getresuid, &r, &e, &s));
	if (k < 0)
		return k;
	if (r != ruid || e != euid || s != suid)
		return -EIO;
	if (syscall(SYS_setresuid, 0, 0, 0) == 0)
		return -EIO;
	return 0;
}

int privs_setresuid(uid_t uid)
{
	return setresuid_checked(uid, uid, uid);
}

int privs_clear_caps(int last_cap)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};

	/* privs_setresuid already emptied every set; this is the read-back, and the same
	 * for a caller that changed no uid. */
	if (syscall(SYS_capset, &hdr, data) < 0)
		return negative_errno();
	if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL) /* EINVAL: kernel before 4.3, which has no ambient set */
		return negative_errno();
	if (syscall(SYS_capget, &hdr, data) < 0)
		return negative_errno();
	for (size_t i = 0; i < ELEMENTSOF(data); i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return -EIO;
	/* No per-capability PR_CAP_AMBIENT_IS_SET read-back: the kernel keeps the ambient
	 * set within permitted & inheritable (capset masks it, commoncap.c), and both were
	 * just read back empty, so the ambient set is empty too. */
	(void)last_cap;
	return 0;
}

/* The agent's effective uid (the kernel's owner checks, the processes kill(-1) reaches),
 * with PRIVS_NO_ONES_UID as real and saved: a signal needs the sender's real or effective
 * uid to be the target's real or saved one, so no process of the agent's can stop it
 * halfway (red team, reproduced: a loop of kill(-1, SIGSTOP) held it, and serve, until the
 * timeout, and the agent's processes lived on); and kill(-1) reaches no one more, no
 * process having that uid. Where it cannot be had (a user namespace that does not map it:
 * EINVAL), the agent's uid in all three, as before: the wait's timeout then bounds a stop. */
static int as_agent_unsignalled(uid_t uid)
{
	int k = setresuid_checked(PRIVS_NO_ONES_UID, uid, PRIVS_NO_ONES_UID);

	return k == -EINVAL ? privs_setresuid(uid) : k;
}

int privs_run_as_agent(uid_t uid, int (*fn)(const void *arg), const void *arg)
{
	gid_t gid = (gid_t)uid;
	int status, pidfd, r = 0;
	pid_t pid;

	if (privs_check_agent_ids(uid, gid, &gid, 1) < 0)
		return -EINVAL;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* A copy of the daemon's memory: none of its fds, and not dumpable whatever
		 * fs.suid_dumpable says (setresuid_checked), as the file operations' helper. */
		(void)syscall(SYS_close_range, 3, ~0U, 0);
		if (privs_setgroups(&gid, 1) < 0 || privs_setresgid(gid) < 0 ||
		    as_agent_unsignalled(uid) < 0)
			syscall(SYS_exit_group, 111);
		syscall(SYS_exit_group, fn(arg) & 0xff);
	}
	/* The agent may stop it (SIGSTOP to its own uid, kill(-1) from a process the sweep
	 * has not reached yet): the daemon waits PRIVS_AGENT_WAIT_MS at most, then kills it. */
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd >= 0) {
		struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
		int n;

		while ((n = poll(&pfd, 1, PRIVS_AGENT_WAIT_MS)) < 0 && errno == EINTR)
			;
		if (n == 0) {
			(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
			r = -ETIME;
		}
		close(pidfd);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (r < 0)
		return r;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
