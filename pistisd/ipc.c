#include "pistisd/ipc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <unistd.h>

#include "lib/host-ns.h"
#include "lib/macro.h"
#include "pistisd/privs.h"
#include "sandbox-users/users.h"

/* /proc/sysvipc/<name>: which whitespace-separated columns hold the id, the owner's uid and
 * the creator's (the kernel's seq_show of each kind). */
/* The columns of each table that are read (as the kernel's proc_sysvipc_*_show print
 * them): the id, the owner's and the creator's uids, and the pids that tell who used the
 * object (used_from_outside): a segment's creator (cpid), a queue's last sender and
 * receiver (lspid, lrpid) with the time of each (stime, rtime; 0: never). Column 0 is the
 * key, so 0 there is "no such column". ncols: how many are read, up to the last used. */
static const struct {
	const char *file;
	unsigned id, uid, cuid;
	unsigned cpid, spid, stime, rpid, rtime;
	unsigned ncols;
} tables[_IPC_KIND_MAX] = {
	[IPC_KIND_SHM] = {"sysvipc/shm", 1, 7, 9, .cpid = 4, .ncols = 10},
	[IPC_KIND_MSG] = {"sysvipc/msg", 1, 7, 9, .spid = 5, .rpid = 6, .stime = 11, .rtime = 12,
			  .ncols = 13},
	[IPC_KIND_SEM] = {"sysvipc/sem", 1, 4, 6, .ncols = 7},
};

#define IPC_LINE_MAX 512
#define IPC_COLUMNS_MAX 13 /* the most any table's ncols is */

/* Whether the object is used by a process outside our PID namespace: /proc/sysvipc gives
 * its pids as this namespace numbers them, 0 for a process it does not hold (and a pid of
 * ours keeps its number after the process ends). Our agents cannot leave our PID
 * namespace (unshare, setns and clone with CLONE_NEW* are refused), so such an object is
 * not theirs: in a pod whose containers share the IPC namespace but not the PID namespace
 * (Kubernetes' default) it is another container's of the same uid, which was removed
 * while it used it. A segment says who made it (cpid); a queue only who last sent (lspid)
 * and received (lrpid), and when (stime, rtime: 0 never): one whose last sender or
 * receiver is such a process is kept. A queue never used is removed as before (it holds
 * nothing). A semaphore set names no process in /proc/sysvipc/sem: not told apart. */
static bool used_from_outside(enum ipc_kind kind, const unsigned long *col)
{
	unsigned cpid = tables[kind].cpid, spid = tables[kind].spid, rpid = tables[kind].rpid;

	if (cpid)
		return col[cpid] == 0;
	if (spid)
		return (col[tables[kind].stime] != 0 && col[spid] == 0) ||
		       (col[tables[kind].rtime] != 0 && col[rpid] == 0);
	return false;
}

/* One line of a table: the object when its owner or creator is uid (or any agent) and no
 * process outside our PID namespace uses it. The creator counts first: an owner may hand
 * the object to any uid with IPC_SET, never change who made it. */
static bool parse_line(const char *line, enum ipc_kind kind, uid_t uid, struct ipc_obj *o)
{
	unsigned long col[IPC_COLUMNS_MAX];
	unsigned n = 0, need = tables[kind].ncols;
	const char *p = line;

	while (n < need) {
		char *end;
		while (*p == ' ' || *p == '\t')
			p++;
		/* Column 0 is the key, which the kernel prints signed (%10d): a key from
		 * 0x80000000 up reads -2147483648..-1. Only its sign is skipped (the value is
		 * not used); a line refused for it would leave the object to the next holder
		 * of the uid (red team). Every other column is unsigned. */
		if (n == 0 && *p == '-')
			p++;
		if (*p < '0' || *p > '9') /* the header, or a line cut short */
			return false;
		errno = 0;
		col[n++] = strtoul(p, &end, 10);
		if (errno || (*end != ' ' && *end != '\t' && *end != '\0'))
			return false;
		p = end;
	}
	uid_t owner = (uid_t)col[tables[kind].uid], creator = (uid_t)col[tables[kind].cuid];
	uid_t who = users_uid_is_agent(creator) ? creator : owner;

	if (!users_uid_is_agent(who) || col[tables[kind].id] > INT32_MAX ||
	    (uid != (uid_t)-1 && owner != uid && creator != uid) || used_from_outside(kind, col))
		return false;
	*o = (struct ipc_obj){
		.kind = kind, .id = (int)col[tables[kind].id], .uid = uid == (uid_t)-1 ? who : uid};
	return true;
}

int ipc_agent_objects(int proc_fd, uid_t uid, struct ipc_obj *v, size_t max, size_t *ret_n)
{
	size_t n = 0;

	*ret_n = 0;
	if (proc_fd < 0) /* no /proc: nothing can be looked for */
		return 0;
	for (unsigned k = 0; k < _IPC_KIND_MAX; k++) {
		_cleanup_close_ int fd = openat(proc_fd, tables[k].file, O_RDONLY | O_CLOEXEC);
		char buf[16384 + IPC_LINE_MAX];
		size_t have = 0;
		ssize_t r;

		if (fd < 0) {
			if (errno == ENOENT) /* a kernel without SysV IPC */
				continue;
			return negative_errno();
		}
		while ((r = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
			char *line = buf, *nl;
			have += (size_t)r;
			buf[have] = '\0';
			while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
				struct ipc_obj o;
				*nl = '\0';
				if (parse_line(line, (enum ipc_kind)k, uid, &o)) {
					if (n < max)
						v[n] = o;
					n++;
				}
				line = nl + 1;
			}
			have -= (size_t)(line - buf);
			memmove(buf, line, have);
			if (have >= IPC_LINE_MAX) /* no such line from the kernel: skip it */
				have = 0;
		}
		if (r < 0)
			return negative_errno();
	}
	*ret_n = n;
	return 0;
}

struct batch {
	const struct ipc_obj *v;
	size_t n;
};

/* As the agent (privs_run_as_agent): IPC_RMID each object. Raw system calls only. */
static int remove_batch(const void *arg)
{
	static const long ctl[_IPC_KIND_MAX] = {SYS_shmctl, SYS_msgctl, SYS_semctl};
	const struct batch *b = arg;

	for (size_t i = 0; i < b->n; i++)
		if (b->v[i].kind == IPC_KIND_SEM)
			(void)syscall(ctl[b->v[i].kind], b->v[i].id, 0, IPC_RMID, 0);
		else
			(void)syscall(ctl[b->v[i].kind], b->v[i].id, IPC_RMID, NULL);
	return 0;
}

long ipc_namespace_objects(void)
{
	/* Raw calls into buffers of our own: musl and glibc name shm_info's field apart.
	 * The counts are ints at these places of struct msginfo (msgpool), struct seminfo
	 * (semusz) and struct shm_info (used_ids), which the kernel fills for *_INFO. */
	enum { MSG_INFO_CMD = 12, SEM_INFO_CMD = 19, SHM_INFO_CMD = 14 };
	int buf[32];
	long total = 0;

	memset(buf, 0, sizeof(buf));
	if (syscall(SYS_msgctl, 0, MSG_INFO_CMD, buf) < 0)
		return errno == ENOSYS ? 0 : negative_errno();
	total += buf[0];
	memset(buf, 0, sizeof(buf));
	if (syscall(SYS_semctl, 0, 0, SEM_INFO_CMD, buf) < 0)
		return negative_errno();
	total += buf[7];
	memset(buf, 0, sizeof(buf));
	if (syscall(SYS_shmctl, 0, SHM_INFO_CMD, buf) < 0)
		return negative_errno();
	total += buf[0];
	return total;
}

#define IPC_STACK 64	   /* objects listed without an allocation: the common case */
#define IPC_MAX (1u << 18) /* more than the kernel's defaults allow of all three kinds */

bool ipc_namespace_seen(void)
{
	/* A process never changes namespaces here: read once, not at every command's end. */
	static int seen = -1;

	if (seen < 0)
		seen = !(host_ns_is_initial(HOST_NS_IPC) == 1 &&
			 host_ns_is_initial(HOST_NS_PID) == 0);
	return seen;
}

int ipc_remove_agent_objects(int proc_fd, uid_t uid)
{
	struct ipc_obj small[IPC_STACK];
	_cleanup_free_ struct ipc_obj *big = NULL;
	struct ipc_obj *v = small;
	size_t n = 0, left = 0;
	int r;

	if (!users_uid_is_agent(uid))
		return -EINVAL;
	if (!ipc_namespace_seen())
		return 0;
	/* One listing, one child that removes them all, one count of what is left: an agent
	 * that made 68,000 objects costs two reads of the tables and one fork, not a round
	 * of each per 256 objects (red team: seconds of serve's loop, for every agent). */
	r = ipc_agent_objects(proc_fd, uid, small, IPC_STACK, &n);
	if (r < 0 || n == 0)
		return r;
	if (n > IPC_STACK) {
		size_t max = n * 2 < IPC_MAX ? n * 2 : IPC_MAX; /* room for more made meanwhile */

		big = malloc(max * sizeof(*big));
		if (!big)
			return -ENOMEM;
		r = ipc_agent_objects(proc_fd, uid, big, max, &n);
		if (r < 0)
			return r;
		v = big;
		if (n > max)
			n = max; /* the rest: the next cleanup */
	}
	struct batch b = {v, n};
	r = privs_run_as_agent(uid, remove_batch, &b);
	if (r != 0)
		return r < 0 ? r : -EPERM;
	r = ipc_agent_objects(proc_fd, uid, NULL, 0, &left);
	if (r < 0)
		return r;
	return n > left ? (int)(n - left) : 0;
}
