#pragma once

/* cgroup v2 for agent commands: <own cgroup>/pistis/<agent>/cmd-<pid>-<n>, one cgroup per
 * command under one per agent, so a whole command tree (setsid'd grandchildren included)
 * can be killed with cgroup.kill and limited with memory.max, pids.max and cpu.weight.
 * cgroup v1 is not used (docs/spawn.md says why). */

#include <stdbool.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

enum {
	CGROUP_HAS_MEMORY = 1 << 0,
	CGROUP_HAS_PIDS = 1 << 1,
	CGROUP_HAS_CPU = 1 << 2,
	CGROUP_HAS_KILL = 1 << 3, /* cgroup.kill (Linux 5.14) */
};

struct cgroup_ctx {
	int base_fd;	   /* O_DIRECTORY fd of <own>/pistis, -1: no usable cgroup v2 */
	unsigned features; /* CGROUP_HAS_* enabled for the agents' subtrees */
	/* CGROUP_HAS_* our own cgroup's cgroup.controllers lists: delegated to us, though
	 * maybe not enabled beneath (a cgroup with processes: v2's no-internal-processes) */
	unsigned delegated;
	char base_path[600];
	/* children are cloned straight into their command cgroups (clone3 CLONE_INTO_CGROUP),
	 * unless that is refused here or switched off; while so, a slot cgroup.kill'ed once
	 * is made afresh when next claimed (claim_slot), as a killed cgroup refuses them */
	bool clone_into;
};

struct cgroup_limits {
	uint64_t memory_max; /* bytes, 0: none */
	uint64_t pids_max;   /* 0: none */
	unsigned cpu_weight; /* 1..10000, 0: default */
};

/* Find the cgroup2 mount and our own cgroup, create pistis/ under it and enable what
 * controllers the host delegates. -ENOENT/-EROFS/-EACCES etc.: no cgroup v2 here. */
int cgroup_init(struct cgroup_ctx *ctx);
/* 0 when the cgroup directory dir_fd is a domain (or the root), -EOPNOTSUPP when it is
 * threaded, "domain threaded" or "domain invalid": no process can join a cgroup made in it. */
int cgroup_domain(int dir_fd);
void cgroup_done(struct cgroup_ctx *ctx);

/* The leaf beside pistis/ that holds the processes of the cgroup pistis manages once
 * cgroup_make_room moved them there. A pistisd born in it (restarted by pistisd-entry,
 * or a `pistisd run` a runtime's exec put beside PID 1) takes its parent for its own. */
#define CGROUP_SELF_LEAF "pistis-self"
/* Where our own cgroup was delegated controllers that cannot be enabled beneath it because
 * it holds processes (cgroup v2's no-internal-processes rule: a container's cgroup with
 * PID 1 in it, a service's with the daemon), move every process of it into
 * <own>/CGROUP_SELF_LEAF and enable them for pistis/ (ctx->features updated). Only
 * pistisd serve asks, and only when a memory or CPU limit is asked for: it moves processes
 * that are not its own. How many were moved (0: nothing to do), or -errno. */
int cgroup_make_room(struct cgroup_ctx *ctx);

/* Whether a space-separated list of cgroupfs (cgroup.controllers, cgroup.subtree_control)
 * holds word as a whole word. */
bool cgroup_list_has(const char *list, const char *word);

/* True for a name usable as the agent's cgroup directory. */
bool cgroup_name_ok(const char *name);

/* Reusable command cgroups per agent, <agent>/cmd-s0..N-1, claimed with flock on the
 * directory (docs/spawn.md): pistisd run is one process per command, and mkdir + rmdir in
 * cgroupfs would otherwise be paid by every command. */
#define CGROUP_SLOTS 4
#define CGROUP_SLOT_PREFIX "cmd-s"
bool cgroup_cmd_is_slot(const char *cmd);

/* Open a command cgroup of agent (agent dir made on first use): reuse_fd >= 0 is one this
 * process already holds (taken over, cmd is its name); else a free slot, its name written
 * to cmd; else, every slot busy, mkdir cmd (the caller's unique name). agent_lim non-NULL
 * (pistisd serve): the limits of all the agent's commands together, written on <agent>/
 * whenever it is opened (not for reuse_fd: this process wrote them then), "max"/100 for
 * those not asked; NULL leaves <agent>/ as it is. Then write the command's limits a
 * controller exists for; *ret_dir_fd is the command cgroup's directory (holding
 * the slot's lock), *ret_procs_fd its cgroup.procs opened for writing (ret_procs_fd NULL:
 * not opened, for a caller that clones into the cgroup and opens it only when that fails).
 * Returns a bitmask of CGROUP_HAS_* limits actually applied, or -errno. A leftover cmd of
 * that name (an earlier pistisd's with the same pid) is removed and made afresh when it is
 * empty and nobody holds it; else -EEXIST (held, or populated): the caller takes another
 * name, as such a cgroup is never joined. */
int cgroup_cmd_create(struct cgroup_ctx *ctx, const char *agent, gid_t agent_gid, char *cmd,
		      size_t cmd_size, int reuse_fd, const struct cgroup_limits *agent_lim,
		      const struct cgroup_limits *lim, int *ret_dir_fd, int *ret_procs_fd);

/* True for a command cgroup made by cgroup_cmd_create and never killed by cgroup_kill
 * since (a user.* xattr on the directory; false where cgroupfs refuses xattrs): a child may
 * be cloned straight into it. */
bool cgroup_clone_ok(int dir_fd);
/* Signal every process listed in cgroup.procs of the cgroup directory cgroup_fd: each pid
 * pinned with a pidfd, then the list read again, and only a pinned process whose pid is
 * listed again is signalled, through its pidfd, so a member that ended between the reads
 * and whose pid went to a stranger is never signalled. Without pidfds (Linux < 5.3),
 * kill(2) on the first list. How many were signalled, or -errno when a list could not be
 * read. */
int cgroup_signal_procs(int cgroup_fd, int sig);
/* Its second half: signal through pidfds[i] (the process pinned as pids[i]; -1: none) each
 * process whose pid is in again (n_again of them, sorted). How many were signalled. */
int cgroup_signal_pinned(const pid_t *pids, const int *pidfds, size_t n, const pid_t *again,
			 size_t n_again, int sig);

/* SIGKILL every process in the cgroup (cgroup.kill; before 5.14 by reading cgroup.procs);
 * takes away the mark cgroup_clone_ok looks for. */
int cgroup_kill(int dir_fd);
/* 1 populated, 0 empty, -errno. */
int cgroup_populated(int dir_fd);
/* rmdir <agent>/<cmd>; -EBUSY while processes remain. */
int cgroup_cmd_remove(struct cgroup_ctx *ctx, const char *agent, const char *cmd);

/* At start-up of pistisd serve: every populated command cgroup under base_fd
 * (<own>/pistis/<agent>/cmd-*) whose lock no process holds (a pistisd that crashed, or a
 * keep_children command whose pistisd ended) is killed, and a non-slot one removed.
 * Cgroups a live pistisd holds (pistisd run, another serve) are left alone. found is called
 * once per agent, at the end, with the number of cgroups killed and emptied, and of those
 * killed that still had processes CGROUP_REAP_KILL_MS later (killed again and again
 * meanwhile; a process in D state: the cgroup is left as it is). Every orphan is killed
 * before any is waited for, and the wait is CGROUP_REAP_KILL_MS for all of them together
 * (for each 64), not for each. Returns 0, or the last -errno met (the walk goes on past
 * it). */
#define CGROUP_REAP_KILL_MS 200u
int cgroup_reap_orphans(int base_fd,
			void (*found)(const char *agent, unsigned killed, unsigned alive, void *u),
			void *userdata);
