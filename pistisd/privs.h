#pragma once

/* Identity change and capability drop for the spawn child. Everything here is raw
 * syscalls, no malloc and no libc state, because it runs in a fork-style child that
 * shares memory with pistisd (and musl's set*id/setrlimit would broadcast to threads). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PRIVS_MAX_GROUPS 2

/* Pure check (no syscalls): uid and gid inside the agent range (never 0, never -1: the
 * CVE-2019-14287 class), groups exactly drawn from {gid, pi-sandbox}, no duplicates. */
int privs_check_agent_ids(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups);

/* The kernel's last capability, as /proc/sys/kernel/cap_last_cap says (asked once by the
 * parent, with PR_CAPBSET_READ: no /proc needed); -errno on failure. */
int privs_read_last_cap(void);

/* Drop every capability from the bounding set except those in keep (bit n = cap n), then
 * read the set back. Needs CAP_SETPCAP: call before the uid change. status, when not
 * NULL, is the calling thread's /proc/self/status read since its last credential change:
 * only the capabilities its CapBnd still holds are dropped, and where none is, that read
 * is the read-back (a thread that made the caller dropped them already: spawn-vfork.c). */
int privs_drop_bounding(int last_cap, uint64_t keep, const char *status);

/* setgroups / setresgid / setresuid to exactly these ids, each read back and compared
 * (getgroups, getresgid, getresuid); -EPERM-like mismatches are reported as -EIO.
 * privs_setresuid also leaves the process not dumpable and with every capability set
 * empty, and keeps it out of the agent's ptrace reach throughout (privs.c says how). */
int privs_setgroups(const gid_t *groups, size_t n_groups);
int privs_setresgid(gid_t gid);
int privs_setresuid(uid_t uid);

/* Inheritable, permitted, effective (capset) and ambient (PR_CAP_AMBIENT_CLEAR_ALL) all
 * empty, verified with capget (ambient is kept within permitted & inheritable). */
int privs_clear_caps(int last_cap);

/* Forks a child that becomes uid (its group, gid = uid, alone: setgroups, setresgid,
 * setresuid, each verified) and returns fn(arg)'s exit code (0-255) once it has exited;
 * -errno when the fork or the wait fails, -ETIME when the child did not end within
 * PRIVS_AGENT_WAIT_MS (the agent stopped it: it is killed), 111 when the child could not
 * become uid. The child has no fd of ours beyond 0-2, is not dumpable, and has uid as its
 * effective uid only (real and saved: PRIVS_NO_ONES_UID), so the agent cannot signal it.
 * fn runs in a child of a possibly multi-threaded process: raw system calls only. For the
 * little that pistisd does as an agent on the agent's own things (its SysV IPC objects,
 * its processes), so that the kernel's owner checks are the agent's and no capability of
 * root's is needed. */
#define PRIVS_AGENT_WAIT_MS 2000
/* The real and saved uid of that child: one no account and no process should have (2^31 - 2:
 * far above the account ranges distributions hand out, below the values that tools reading
 * uids as signed would show as negative). */
#define PRIVS_NO_ONES_UID ((uid_t)0x7ffffffe)
int privs_run_as_agent(uid_t uid, int (*fn)(const void *arg), const void *arg);

/* Where a test looks at a process changing to an agent's uid (tests/unit/test-spawn.c
 * defines it): a weak no-op in the daemon, so no function pointer of its is writable. */
enum privs_point {
	PRIVS_POINT_ID_CHANGED,	  /* setresuid done, nothing else yet */
	PRIVS_POINT_NOT_DUMPABLE, /* then PR_SET_DUMPABLE 0 */
	PRIVS_POINT_CAPS_DROPPED, /* then every capability set emptied */
	_PRIVS_POINT_MAX,
};
void privs_test_point(enum privs_point point);
