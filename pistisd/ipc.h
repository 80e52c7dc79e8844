#pragma once

/* SysV IPC objects an agent leaves behind (docs/spawn.md, "What a command leaves behind").
 *
 * A shared memory segment, message queue or semaphore set outlives the process that made
 * it: attached to no process, no kill reaches it and the OOM killer cannot choose it, and
 * where no memory cgroup charges it (or once the agent's cgroup is gone) its memory is
 * the machine's until someone removes it. pistisd removes an agent's objects once the
 * agent has no command left, and at serve's start-up those of agents with no process. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum ipc_kind { IPC_KIND_SHM, IPC_KIND_MSG, IPC_KIND_SEM, _IPC_KIND_MAX };

struct ipc_obj {
	enum ipc_kind kind;
	int id;
	uid_t uid; /* the owner's, or the creator's where that one is an agent */
};

/* The objects of /proc/sysvipc (beneath proc_fd) whose owner or creator is uid, or any
 * agent uid when uid is (uid_t)-1; at most max of them in v, the number found in
 * *ret_n (which may exceed max); none without /proc (proc_fd -1). 0, or -errno. */
int ipc_agent_objects(int proc_fd, uid_t uid, struct ipc_obj *v, size_t max, size_t *ret_n);

/* Removes uid's objects (IPC_RMID), as uid: a child that has become the agent (its own
 * group, no other) removes what its owner or creator may, with no capability of root's
 * needed (Docker's default set has no CAP_IPC_OWNER). A segment still attached goes when
 * its last user detaches. Returns how many were removed (0: none there, no child forked),
 * or -errno. */
int ipc_remove_agent_objects(int proc_fd, uid_t uid);

/* Whether the processes of this IPC namespace are ours to see: not where it is the host's
 * and the PID namespace is not (docker run --ipc host). There no process that holds an
 * object is visible, and every object of an agent's uid looked left by it: the host's (a
 * user of the machine with a uid from 10100 up, the same agent uid of another such
 * sandbox) were removed at each command's end and each start (red team). Then
 * ipc_remove_agent_objects removes nothing (0), and pistisd check warns
 * (host_namespaces). */
bool ipc_namespace_seen(void);

/* How many objects this IPC namespace holds, of every kind and every owner: the kernel's
 * in-use counts (MSG_INFO, SEM_INFO, SHM_INFO), three system calls and no listing, whose
 * cost grows with every object of every agent (~50 ms for the 68,000 the kernel's defaults
 * allow). -errno when one is refused. */
long ipc_namespace_objects(void);
