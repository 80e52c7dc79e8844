#pragma once

/* Helpers shared by walk.c, walk-node.c and explain.c (not part of the library's
 * interface). */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "policy/policy.h"
#include "sandbox-users/users.h"

#define POLICY_XATTR_ACL_ACCESS "system.posix_acl_access"
#define POLICY_XATTR_CAPS "security.capability"
#define POLICY_XATTR_ACL_DEFAULT "system.posix_acl_default"
/* The mark a walk leaves on each regular file and directory it closes (none, the depth
 * bound): only who may write the node can set a user.* xattr, and the node is root's or
 * pi-tools' 0600/0700 by then. A write rule opens a node of theirs that is closed to the
 * agents only when it carries the mark (docs/policy.md, "Root's private files"). */
/* Its name is this and "." and the key's id (mark.c); this name alone is the first
 * version's mark ("1", which anyone who may write a node could set, and copies carried):
 * never taken for a mark now, replaced where a none rule finds it, taken off where a write
 * rule does. Also the name the file system is asked about (policy_marks_supported). */
#define POLICY_XATTR_CLOSED_V1 "user.pistis.closed"

/* "/proc/thread-self/fd/N": the magic link reaches exactly the inode behind fd (an O_PATH
 * fd included), never a name that could be swapped. thread-self, not self: the walk's
 * worker threads have fd tables of their own, and /proc/self is the main thread's. */
#define POLICY_PROC_FD_MAX 48
const char *policy_proc_fd(int fd, char buf[POLICY_PROC_FD_MAX]);

/* Read an xattr of the inode behind fd (opath: an O_PATH fd). Returns its length,
 * -ENODATA when absent, -errno. */
ssize_t policy_getxattr_fd(int fd, bool opath, const char *name, void *buf, size_t size);
/* The xattr names of the inode behind fd (listxattr's result: length or -1 with errno). */
ssize_t policy_listxattr_fd(int fd, bool opath, char *list, size_t size);
/* Remove an xattr of the inode behind fd: 0 also when it is not there, else -errno. */
int policy_removexattr_fd(int fd, bool opath, const char *name);

/* Bytes per thread kept for the rest of getdents buffers above a directory being walked
 * (walk.c); beyond it, a parent seeks back on return. Tests set it small. */
extern size_t policy_walk_rest_buf;

/* Tests only: called between the walk's look at a rule's own path (fstatat in the parent
 * dir_fd) and its open, so a test can plant a symlink in that window. A weak function a
 * test program defines, not a pointer: no program that does not define it (pistisd) has a
 * writable function pointer for it, and its address is 0 there. */
void policy_walk_rule_hook(int dir_fd, const char *name) __attribute__((weak));

/* --- one node (walk-node.c) --- */

#define POLICY_XLIST_MAX 65536 /* XATTR_LIST_MAX */

/* statx(dfd, name, flags) with the minimal mask the walk needs (type, mode, owner, group,
 * links, inode) into st; *ret_mount: 1/0 whether it is a mount root, -1 unknown. */
int policy_node_stat(int dfd, const char *name, int flags, struct stat *st, int *ret_mount);

/* --- the closing mark's key and value (mark.c) --- */

#define POLICY_MARK_KEY_SIZE USERS_MARK_KEY_SIZE
#define POLICY_MARK_KEY_FILE USERS_MARK_KEY_FILE
#define POLICY_MARK_SIZE 17 /* a version byte and 16 bytes of HMAC-SHA256 */
enum {
	POLICY_MARK_KEY_UNREAD,
	POLICY_MARK_KEY_ABSENT,
	POLICY_MARK_KEY_LOADED,
	POLICY_MARK_KEY_FAILED
};
/* POLICY_MARK_KEY_PATH beneath root_fd (made by `pistisd users ensure-base`: a walk only
 * reads it), read once; shared by a walk's threads. */
struct policy_mark_key {
	int root_fd;
	pthread_mutex_t lock;
	atomic_int state;
	int error; /* POLICY_MARK_KEY_FAILED: why */
	uint8_t key[POLICY_MARK_KEY_SIZE];
	char name[sizeof(POLICY_XATTR_CLOSED_V1) + 9]; /* the mark's name under this key */
};
void policy_mark_key_init(struct policy_mark_key *k, int root_fd);
void policy_mark_key_done(struct policy_mark_key *k);
/* Read the key. 0 also when there is none (state ABSENT); -errno when it cannot be used
 * (not root's and closed to others, not 32 bytes): then no mark counts and none is set. */
int policy_mark_key_load(struct policy_mark_key *k);
bool policy_mark_key_loaded(struct policy_mark_key *k);
/* An xattr name: no mark's, a mark's under this key (loaded), or another's (another key,
 * the first version). */
enum { POLICY_MARK_NAME_NONE, POLICY_MARK_NAME_OURS, POLICY_MARK_NAME_FOREIGN };
int policy_mark_name_kind(struct policy_mark_key *k, const char *name);
/* 1 when the node behind fd carries the mark made for it with this key, 0 when it carries
 * none or another (a planted or copied one), -errno. k NULL: 0. */
int policy_mark_valid(struct policy_mark_key *k, int fd, bool opath);
/* Put the node's own mark on it (-ENOKEY without a key), and take other marks off. */
int policy_mark_set(struct policy_mark_key *k, int fd, bool opath);
/* Take every mark's name off the node (keep_ours: all but this key's). */
int policy_mark_drop(struct policy_mark_key *k, int fd, bool opath, bool keep_ours);

/* POLICY_STATE_DIR beneath root_fd, no symlink on the way; -EPERM unless root's and not
 * writable by group or others. */
int policy_state_dir_open(int root_fd, int *ret_fd);

/* What we know about a node's ACLs. */
enum { POLICY_ACL_DEF_NONE, POLICY_ACL_DEF_OURS, POLICY_ACL_DEF_FOREIGN };
struct policy_xstate {
	bool acl_access;
	int acl_default;
	/* The closing mark: read through the node's fd, it is there and its tag is the
	 * node's own; read by name (policy_xstate_at), only that the name is there (the walk
	 * reads it through the fd again where it decides). */
	bool closed_mark;
	bool mark_foreign; /* another mark's name is there (another key's, the first
			      version's, or, read through the fd, ours with a wrong tag) */
	bool caps;	   /* file capabilities (security.capability) */
};

/* The ACL state through fd (opath: an O_PATH fd, read through /proc/thread-self/fd/N), or by name
 * without opening anything: listxattrat(AT_SYMLINK_NOFOLLOW) (Linux 6.13; -ENOSYS when the
 * kernel lacks it). list: a buffer of POLICY_XLIST_MAX bytes. */
int policy_xstate_fd(char list[POLICY_XLIST_MAX], struct policy_mark_key *k, int fd, bool opath,
		     struct policy_xstate *x);
int policy_xstate_at(char list[POLICY_XLIST_MAX], struct policy_mark_key *k, int dfd,
		     const char *name, struct policy_xstate *x);

/* enum policy_change bits for a node with this stat and ACL state under target t. */
unsigned policy_changes_for(const struct stat *st, const struct policy_xstate *x,
			    const struct policy_target *t);
/* Someone would have more access now than t gives. */
bool policy_looser_than(const struct stat *st, const struct policy_xstate *x,
			const struct policy_target *t);
/* Left as it is, but its owner (neither the rule's nor root) can give access back. */
bool policy_owner_reopens(const struct stat *st, const struct policy_target *t);
/* The change takes access away from someone (before_tighten must have run). */
/* The part of target t that only takes away, for a node with more than one link: its
 * owner and group kept, mode bits only where both st and t have them, no set-id bit. */
void policy_trim_target(const struct stat *st, const struct policy_target *t,
			struct policy_target *ret);
/* An agent may write the file now: an agent's own, a shared pi-sandbox group-writable
 * one, or a world-writable one. */
bool policy_agents_may_write(const struct stat *st);
/* The same, or through an agent's own group with write, or an access ACL (which may name
 * an agent): what the walk treats as agents' to write in trusted trees and above a rule. */
bool policy_agents_may_write_x(const struct stat *st, const struct policy_xstate *x);
/* fs.protected_hardlinks is 1: no one links a file they could not read and write. */
bool policy_hardlinks_protected(void);
bool policy_takes_away(const struct stat *st, const struct policy_xstate *x,
		       const struct policy_target *t);
/* The changes that take access away, in a fail-safe order (st is updated), and then the
 * ones that give it (final mode, our default ACL). fd: the node's own fd (opath: O_PATH). */
int policy_apply_pre(int fd, bool opath, struct stat *st, const struct policy_xstate *x,
		     const struct policy_target *t);
/* post: the node's changes among POLICY_CH_ACL_SET, POLICY_CH_MARK, POLICY_CH_UNMARK. */
int policy_apply_post(struct policy_mark_key *k, int fd, bool opath, const struct stat *st,
		      const struct policy_target *t, unsigned post);
/* Root's or pi-tools' regular file or directory that no agent may read (or, a directory,
 * enter): no read bit for others, and none for a group agents are in (pi-sandbox, an
 * agent's own) or any group at all when an access ACL may name one. */
bool policy_closed_to_agents(const struct stat *st, const struct policy_xstate *x);
/* A node a write rule leaves as it is (unless it is the rule's own path, named by the
 * operator): closed to the agents, no walk's closing mark (a FIFO or a socket cannot
 * carry one), and not a file with a second name (the hardlink rules' to judge). */
bool policy_private_node(const struct stat *st, const struct policy_xstate *x);
/* Whether the file system of the node name in dfd (an O_PATH fd is fine) keeps user.*
 * xattrs: the closing mark is only set, and only asked for, where it does. */
bool policy_marks_supported(int dfd, const char *name);
