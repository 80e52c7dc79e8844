/* The walk that applies rules: fd-based, never follows a symlink, never opens a FIFO,
 * socket or device for I/O, stays on one file system, bounded in depth, fds, memory and
 * time, and writes a node only when it is not already right. The reasons are in
 * SECURITY.md ("Walking trees the agent can write"); the order of changes on one node is
 * explained at policy_apply_pre().
 *
 * Parallel: a few threads, created and joined inside policy_walk(), walk disjoint
 * subtrees (see "Parallel walk" below). Every node is still handled by exactly one
 * thread with the same per-node steps; what threads share is the event callback, the
 * stats, the abort state and the post-order of the directories they split. */
#include "policy/policy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"
#include "policy/internal.h"
#include "sandbox-users/users.h"

#define DENTS_BUF (64 * 1024)
/* Per thread: the unread rest of the listings above (see keep_rest). A variable so that
 * tests can make it small and reach the lseek path. */
size_t policy_walk_rest_buf = 256 * 1024;
#define FD_RESERVE 32 /* fds kept free for the rest of the process */

struct pnode;

struct frame {
	int fd;
	size_t path_len;
	struct stat st; /* of the fd, after the pre-order changes */
	struct policy_target tgt;
	bool pending;  /* post-order: final mode / default ACL / closing mark still to do */
	unsigned post; /* POLICY_CH_ACL_SET, _MARK, _UNMARK: for the post-order step */
	bool has_below;
	bool reserved_below; /* a tree of pistis's own beneath: walked around */
	bool secrets;
	bool seek;
	bool busy;	    /* the last file here needed changes: expect the next one to */
	struct pnode *node; /* set once part of the subtree is walked by another thread */
	struct pnode *up;   /* a task's top frame: the parent directory's node */
	off_t resume;
	size_t rest_base, rest_pos, rest_end; /* its entries still to do, in w->rest */
};

struct shared;

struct walker {
	struct shared *sh;
	const struct policy_rules *rules;
	const struct policy_walk_opts *o;
	struct policy_stats st; /* not yet added to sh->st */
	const struct policy_rule *rule;
	char *path;
	size_t path_len, path_cap;
	struct frame *frames;
	unsigned depth; /* frames on this walker's stack */
	unsigned base;	/* absolute depth of frames[0] (a task starts below the rule's path) */
	char *dents;
	char *rest; /* a stack: the rest of each listing being walked */
	size_t rest_top, rest_cap;
	char *xlist;	     /* listxattr buffer (XATTR_LIST_MAX) */
	struct pnode *posts; /* under sh->lock: nodes whose final step is this thread's to do */
};

/* A directory split between threads: its final (loosening) step waits until its own
 * listing and every subtree handed out beneath it are done. Whoever drops the last
 * reference does it. */
struct pnode {
	struct pnode *parent;
	struct walker *owner; /* the thread whose fd table holds f.fd */
	struct pnode *next_post;
	unsigned refs; /* under sh->lock */
	bool complete; /* its own listing was read to the end */
	struct frame f;
	const struct policy_rule *rule;
	size_t path_len;
	char path[];
};

/* A subtree handed to another thread: the directory is open and its pre-order changes
 * are made; the thread that takes it walks it as its own stack's first frame. The
 * directory's fd travels through sh->fdq (see "Parallel walk"), not in f.fd. */
struct task {
	struct task *next;
	struct frame f;
	unsigned abs; /* its absolute depth */
	const struct policy_rule *rule;
	size_t path_len;
	char path[];
};

struct shared {
	const struct policy_rules *rules;
	const struct policy_walk_opts *o;
	bool mt; /* more than one thread: lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct policy_stats st;
	atomic_int abort_r;
	atomic_bool tighten_called;
	int tighten_r;
	unsigned max_depth, threads, qcap; /* fixed before any thread starts */
	bool hardlinks_protected;	   /* fs.protected_hardlinks is 1 (read at start) */
	dev_t dev;			   /* of the current rule's path */
	bool marks;	       /* its file system keeps user.* xattrs: the closing mark is used */
	bool rule_parent_safe; /* no agent may write the directory that holds its path */
	bool rule_movable;     /* an agent may rename a directory on the way to its path */
	struct policy_mark_key key; /* the closing mark's (mark.c) */
	struct task *qhead, *qtail;
	unsigned idle;		 /* threads waiting for work (under lock; split() peeks) */
	unsigned queued, active; /* tasks in the queue; tasks queued or running, final steps
				    waiting for their thread */
	int fdq[2];		 /* socketpair: the queued tasks' directory fds, in queue order */
	bool done;
	struct timespec deadline;
	bool has_deadline;
};

static void lock(struct shared *sh)
{
	if (sh->mt)
		pthread_mutex_lock(&sh->lock);
}

static void unlock(struct shared *sh)
{
	if (sh->mt)
		pthread_mutex_unlock(&sh->lock);
}

static int abort_r(const struct walker *w)
{
	return atomic_load_explicit(&w->sh->abort_r, memory_order_relaxed);
}

static void set_abort(struct walker *w, int r)
{
	int zero = 0;

	atomic_compare_exchange_strong(&w->sh->abort_r, &zero, r);
}

/* The node being visited is a rule's own path (not an entry beneath it). */
static bool at_rule_path(const struct walker *w)
{
	return w->base + w->depth == 0;
}

/* The rule's own path may be a mount point (a volume); nothing beneath it may. */
static bool crosses_fs(const struct walker *w, const struct stat *st, int mount)
{
	if (at_rule_path(w))
		return false;
	return mount > 0 || (mount < 0 && st->st_dev != w->sh->dev);
}

/* An agent's node in the trees trusted commands rest on, which the rule would make root's
 * (read, none) or, in /data/.secrets, pi-tools': /data/bin is on every agent's PATH,
 * `trusted install` pins every root 0755 script in /data/trusted, and trusted commands
 * take what is in /data/.secrets as the operator's secrets (an agent's `gh-token`, or a
 * config that sends them elsewhere). A node an agent left there in a volume's earlier life
 * (under a write rule pistis no longer loads) would become trusted. It is reported and
 * left as it is, and a directory is not entered: the operator removes it.
 *
 * Not only the agents' own nodes: a file of root's that agents could write (group
 * pi-sandbox or an agent's with g+w, o+w, or an access ACL, which only root sets on it)
 * holds bytes an agent may have chosen, and an agent may have moved or linked it in from
 * wherever such a file lay (a root:pi-sandbox 0770 script under an old write rule). Made
 * root's 0755 it would be as trusted as the operator's own, with nothing left to tell. x
 * is NULL for directories: their entries are each looked at, after the directory is put
 * right. */
static bool agents_in_trusted(const struct walker *w, const struct stat *st,
			      const struct policy_target *t, const struct policy_xstate *x)
{
	bool agents = users_uid_is_agent(st->st_uid);

	if (!agents && x)
		agents = policy_agents_may_write_x(st, x);
	return agents && (t->uid == 0 || t->uid == USERS_TOOLS_UID) &&
	       policy_path_trusted(w->path, w->path_len);
}

/* The changes a directory's post-order step makes, and the ones that only keep the mark
 * right (never a violation for check: nobody's access differs). */
#define POST_CHANGES (POLICY_CH_ACL_SET | POLICY_CH_MARK | POLICY_CH_UNMARK)
#define MARK_CHANGES (POLICY_CH_MARK | POLICY_CH_UNMARK)

/* Marks are made where the file system keeps them and root's key is there (made by
 * `pistisd users ensure-base`; docs/policy.md, "What the mark's value is"). Without the
 * key a walk closes as ever and leaves what marks it finds: they may be the key's that
 * comes back (a key file an operator must put right). */
static bool marks_made(const struct walker *w)
{
	return w->sh->marks && atomic_load_explicit(&w->sh->key.state, memory_order_acquire) ==
				       POLICY_MARK_KEY_LOADED;
}

/* A node the rule closes (none) is marked as closed by pistis, where its file system
 * keeps user.* xattrs: a directory, or a regular file with one name (the kernel takes
 * user.* xattrs on nothing else, and a file with a second name is left as it is). */
static void want_mark(const struct walker *w, const struct stat *st, struct policy_target *t)
{
	/* Not where an agent may rename a directory on the way to the rule's path: a mark
	 * names the node wherever it goes, and the tree moved into a write tree would open
	 * there (red team). Marks found there are taken off: such a tree stays closed. */
	if (w->sh->marks && w->rule->access == POLICY_NONE && !w->sh->rule_movable &&
	    (S_ISDIR(st->st_mode) || (S_ISREG(st->st_mode) && st->st_nlink == 1)))
		t->flags |= marks_made(w) ? POLICY_T_MARK : POLICY_T_KEEP_MARK;
}

/* Under a write rule, root's or pi-tools' node that no agent may read and that no walk
 * closed: a private file moved in (an agent may rename one out of any directory it can
 * write that is not sticky) or made there closed. Opening it to the group would hand it
 * to every agent, so it stays as it is, and a directory is not entered. The rule's own
 * path is the operator's to name; a file with a second name is the hardlink rules' (never
 * opened either). Without marks (a file system without user.* xattrs) nothing tells such
 * a node from one a none rule closed, and it is opened as before. */
static bool private_left(const struct walker *w, const struct stat *st,
			 const struct policy_xstate *x)
{
	return w->rule->access == POLICY_WRITE && w->sh->marks &&
	       !(at_rule_path(w) && w->sh->rule_parent_safe) && policy_private_node(st, x);
}

/* What was read by name (the closing mark, the ACLs) may be another node's: the name can be
 * swapped between the look and the open, or between the stat and the listxattr, and an
 * agent may mark its own file (red team: RENAME_EXCHANGE with its own marked file lent
 * root's private file the mark, and apply opened it to every agent). Where they decide
 * whether a node of root's or pi-tools' is opened under a write rule, they are read again
 * through the node's own fd. */
static int xstate_of_node(struct walker *w, int fd, const struct stat *st, struct policy_xstate *x)
{
	/* Under none, a mark's name is no mark either until its tag is checked: a node about
	 * to be closed with a mark its agent planted gets its own. */
	bool none_named = w->rule->access == POLICY_NONE && x->closed_mark;

	if (!w->sh->marks || (!none_named && (w->rule->access != POLICY_WRITE ||
					      (at_rule_path(w) && w->sh->rule_parent_safe) ||
					      (st->st_uid != 0 && st->st_uid != USERS_TOOLS_UID))))
		return 0;
	return policy_xstate_fd(w->xlist, &w->sh->key, fd, true, x);
}

/* A trim (a file with a second name: policy_trim_target) that leaves root's or pi-tools'
 * file closed to the agents closes it too: marked, so that a write rule opens the file
 * again once the other name is gone. Only files agents could write are trimmed. */
static void trim_mark(const struct walker *w, const struct stat *st, struct policy_target *tt)
{
	const struct policy_xstate none = {0};
	struct stat sa = *st;

	sa.st_mode = (st->st_mode & S_IFMT) | tt->mode;
	if (marks_made(w) && policy_closed_to_agents(&sa, &none))
		tt->flags |= POLICY_T_MARK;
}

static void emit_at(struct walker *w, const struct policy_rule *rule, const char *path,
		    size_t path_len, enum policy_event_kind kind, int error, unsigned changes,
		    const struct stat *st, const struct policy_target *t, bool violation)
{
	struct policy_event ev = {
		.kind = kind,
		.path = path,
		.path_len = path_len,
		.rule = rule,
		.error = error,
		.changes = changes,
		.violation = violation,
	};

	if (st) {
		ev.old_uid = st->st_uid, ev.old_gid = st->st_gid, ev.old_mode = st->st_mode;
		ev.new_uid = st->st_uid, ev.new_gid = st->st_gid, ev.new_mode = st->st_mode;
	}
	if (st && t) {
		ev.new_uid = t->uid == (uid_t)-1 ? st->st_uid : t->uid;
		ev.new_gid = t->gid;
		ev.new_mode = (st->st_mode & S_IFMT) | t->mode;
	}
	if (kind == POLICY_EV_TOO_DEEP)
		ev.depth_max = w->sh->max_depth;
	if (kind == POLICY_EV_ERROR || kind == POLICY_EV_NOT_DONE || kind == POLICY_EV_SYMLINK ||
	    kind == POLICY_EV_TOO_DEEP || kind == POLICY_EV_AGENTS_IN_TRUSTED ||
	    kind == POLICY_EV_FOREIGN_SYMLINK)
		w->st.errors++;
	if (violation)
		w->st.violations++;
	if (w->o->on_event && !(w->o->skip_events & (1u << kind))) {
		lock(w->sh);
		w->o->on_event(w->o->userdata, &ev);
		unlock(w->sh);
	}
}

static void emit(struct walker *w, enum policy_event_kind kind, int error, unsigned changes,
		 const struct stat *st, const struct policy_target *t, bool violation)
{
	emit_at(w, w->rule, w->path, w->path_len, kind, error, changes, st, t, violation);
}

/* memcpy for the short names of directory entries. musl's x86_64 memcpy starts with
 * rep movsq, whose start-up cost made the per-entry name copy 2% of a re-apply; the
 * fixed-size copies here compile to plain loads and stores (two overlapping ones cover
 * every length between a size and its double), and no loop the compiler would turn back
 * into a memcpy call. */
static void copy_name(char *dst, const char *src, size_t n)
{
	uint64_t a8, b8;
	uint32_t a4, b4;
	uint16_t a2, b2;

	if (n > 16) {
		memcpy(dst, src, n);
	} else if (n >= 8) {
		__builtin_memcpy(&a8, src, 8);
		__builtin_memcpy(&b8, src + n - 8, 8);
		__builtin_memcpy(dst, &a8, 8);
		__builtin_memcpy(dst + n - 8, &b8, 8);
	} else if (n >= 4) {
		__builtin_memcpy(&a4, src, 4);
		__builtin_memcpy(&b4, src + n - 4, 4);
		__builtin_memcpy(dst, &a4, 4);
		__builtin_memcpy(dst + n - 4, &b4, 4);
	} else if (n >= 2) {
		__builtin_memcpy(&a2, src, 2);
		__builtin_memcpy(&b2, src + n - 2, 2);
		__builtin_memcpy(dst, &a2, 2);
		__builtin_memcpy(dst + n - 2, &b2, 2);
	} else if (n == 1) {
		dst[0] = src[0];
	}
}

static int path_push(struct walker *w, const char *name, size_t n)
{
	size_t need = w->path_len + 1 + n + 1;

	if (need > w->path_cap) {
		size_t cap = need * 2;
		char *p = realloc(w->path, cap);

		if (!p)
			return -ENOMEM;
		w->path = p;
		w->path_cap = cap;
	}
	if (!(w->path_len == 1 && w->path[0] == '/'))
		w->path[w->path_len++] = '/';
	copy_name(w->path + w->path_len, name, n);
	w->path_len += n;
	w->path[w->path_len] = '\0';
	return 0;
}

static void path_pop(struct walker *w, size_t len)
{
	w->path_len = len;
	w->path[len] = '\0';
}

/* Once per walk, whichever thread gets there first; the others wait on the lock until
 * the agents are stopped, and all of them see a refusal. */
static int notify_tighten(struct walker *w)
{
	struct shared *sh = w->sh;
	int r;

	if (!w->o->before_tighten)
		return 0;
	if (atomic_load_explicit(&sh->tighten_called, memory_order_acquire))
		return sh->tighten_r;
	lock(sh);
	if (!atomic_load_explicit(&sh->tighten_called, memory_order_relaxed)) {
		sh->tighten_r = w->o->before_tighten(w->o->userdata);
		if (sh->tighten_r > 0)
			sh->tighten_r = 0;
		if (sh->tighten_r < 0)
			set_abort(w, sh->tighten_r);
		atomic_store_explicit(&sh->tighten_called, true, memory_order_release);
	}
	r = sh->tighten_r;
	unlock(sh);
	return r;
}

static bool time_is_up(const struct shared *sh)
{
	struct timespec now;

	if (!sh->has_deadline)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > sh->deadline.tv_sec ||
	       (now.tv_sec == sh->deadline.tv_sec && now.tv_nsec >= sh->deadline.tv_nsec);
}

/* Add this walker's counts to the walk's. */
static void flush_stats(struct walker *w, bool progress)
{
	struct shared *sh = w->sh;

	lock(sh);
	sh->st.entries += w->st.entries;
	sh->st.dirs += w->st.dirs;
	sh->st.changed += w->st.changed;
	sh->st.violations += w->st.violations;
	sh->st.symlinks += w->st.symlinks;
	sh->st.skipped += w->st.skipped;
	sh->st.errors += w->st.errors;
	memset(&w->st, 0, sizeof(w->st));
	if (progress && w->o->on_progress)
		w->o->on_progress(w->o->userdata, &sh->st);
	unlock(sh);
}

static void tick(struct walker *w)
{
	w->st.entries++;
	if ((w->st.entries & 1023) == 0 && time_is_up(w->sh) && !abort_r(w))
		set_abort(w, -ETIME);
	if ((w->st.entries & 4095) == 0 && w->o->on_progress)
		flush_stats(w, true);
}

/* --- Parallel walk ---
 * sh->threads threads take subtrees from a bounded queue. A directory at absolute depth
 * 1..SPLIT_DEPTH whose pre-order changes are made may be handed out instead of descended
 * into: at depth 1 while the queue has room, deeper only for threads that wait for work
 * (split()); the same per-node steps then run on another thread.
 * The order the sequential walk guarantees still holds:
 *  - a directory is tightened (pre-order) before it is queued, so before anything
 *    beneath it is touched;
 *  - a directory is loosened (post-order) only after its own listing and every subtree
 *    handed out beneath it are done: its frame gets a reference-counted node, each task
 *    holds a reference on its parent's node, and whoever drops the last one sees that the
 *    final step is taken (by the node's own thread, below). No thread waits for another
 *    in the middle of a walk.
 *  - rules are walked one after the other: all of a rule's tasks finish before the next.
 * Fd tables: each worker thread unshares its fd table (CLONE_FILES) as it starts. With one
 * table shared, every per-file O_PATH open and close of both threads went through one
 * files->file_lock and the same cache lines: a quarter to a third more CPU with two
 * threads than with one. So an fd means something only to the thread that opened it:
 *  - a queued task's directory fd is sent through the sh->fdq socketpair (SCM_RIGHTS)
 *    when queued and received by the thread that takes it, both under sh->lock, so the
 *    socket's order is the queue's;
 *  - a node's final step (and its close) runs on the node's owner, the thread that opened
 *    the fd: whoever drops the last reference on another thread's node puts it on the
 *    owner's posts list (counted in sh->active, so the rule is not over before it is done)
 *    and the owner takes it when it next looks for work.
 * If unshare() fails the thread keeps the shared table: the same steps are still right.
 * Each worker also takes a private copy of its credentials (keep_own_cred()), for the
 * same reason: cache lines the two threads no longer write in turn.
 * Bounds: each thread has its own stack (one fd per level, max_depth levels); the queue
 * holds SPLIT_QUEUE tasks per thread (one fd each); nodes outlive their frame only at
 * depth <= SPLIT_DEPTH above a live task. policy_walk() sizes the thread count so that
 * all of it fits in RLIMIT_NOFILE. */
#define SPLIT_DEPTH 3
#define SPLIT_QUEUE 2

static unsigned fds_needed(unsigned threads, unsigned max_depth)
{
	unsigned q = threads * SPLIT_QUEUE;

	return threads * (max_depth + 1) + (threads > 1 ? q + (q + threads) * SPLIT_DEPTH : 0);
}

/* What a directory's post-order step was making, for its error: the final mode, the
 * default ACL, the closing mark. */
static unsigned post_step(const struct frame *f)
{
	return ((f->st.st_mode & 07777) != f->tgt.mode ? POLICY_CH_MODE : 0) | f->post;
}

/* The frame of the directory just visited (fd open, path in w->path): pushed on this
 * walker's stack, or queued for another thread (split). */
static struct frame new_frame(const struct walker *w, int fd, const struct stat *st,
			      const struct policy_target *t, bool pending, unsigned post,
			      bool secrets, bool busy)
{
	return (struct frame){
		.fd = fd,
		.path_len = w->path_len,
		.st = *st,
		.tgt = *t,
		.pending = pending,
		.post = post,
		.secrets = secrets,
		.busy = busy,
		.has_below = policy_rules_has_below(w->rules, w->path, w->path_len),
		.reserved_below = policy_reserved_below(w->path, w->path_len),
	};
}

static void push_frame(struct walker *w, int fd, const struct stat *st,
		       const struct policy_target *t, bool pending, unsigned post, bool secrets,
		       bool busy)
{
	w->frames[w->depth++] = new_frame(w, fd, st, t, pending, post, secrets, busy);
}

/* The node of a frame on this walker's stack (created on first need; refs 1: the frame). */
static struct pnode *frame_node(struct walker *w, struct frame *f)
{
	struct pnode *n;

	if (f->node)
		return f->node;
	n = malloc(sizeof(*n) + f->path_len + 1);
	if (!n)
		return NULL;
	*n = (struct pnode){.refs = 1, .owner = w, .rule = w->rule, .path_len = f->path_len};
	memcpy(n->path, w->path, f->path_len);
	n->path[f->path_len] = '\0';
	f->node = n;
	return n;
}

/* The last reference is gone: the directory's final step, then its parent's reference.
 * Only the node's owner can use its fd: another thread hands the node over. */
static void node_done(struct walker *w, struct pnode *n)
{
	while (n) {
		struct pnode *parent = n->parent;
		struct frame *f = &n->f;
		bool last = false;
		int r;

		if (n->owner != w) {
			lock(w->sh);
			n->next_post = n->owner->posts;
			n->owner->posts = n;
			w->sh->active++;
			pthread_cond_broadcast(&w->sh->cond);
			unlock(w->sh);
			return;
		}
		if (n->complete && !abort_r(w)) {
			if (f->pending) {
				r = policy_apply_post(&w->sh->key, f->fd, false, &f->st, &f->tgt,
						      f->post);
				if (r < 0)
					emit_at(w, n->rule, n->path, n->path_len, POLICY_EV_ERROR,
						r, post_step(f), &f->st, &f->tgt, false);
			}
		} else {
			emit_at(w, n->rule, n->path, n->path_len, POLICY_EV_NOT_DONE, abort_r(w), 0,
				&f->st, NULL, false);
		}
		safe_close(f->fd);
		free(n);
		if (parent) {
			lock(w->sh);
			last = --parent->refs == 0;
			unlock(w->sh);
		}
		n = last ? parent : NULL;
	}
}

static void node_release(struct walker *w, struct pnode *n)
{
	bool last;

	lock(w->sh);
	last = --n->refs == 0;
	unlock(w->sh);
	if (last)
		node_done(w, n);
}

/* One fd through a socket (SCM_RIGHTS); the receiver's copy is O_CLOEXEC. */
static int send_fd(int sock, int fd)
{
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == 1 ? 0 : negative_errno();
}

static int recv_fd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c;
	ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	int fd;

	if (n < 0)
		return negative_errno();
	c = CMSG_FIRSTHDR(&m);
	if (n != 1 || (m.msg_flags & MSG_CTRUNC) || !c || c->cmsg_level != SOL_SOCKET ||
	    c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EBADMSG;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* Hand the directory just visited (fd open, pre-order done, path in w->path) to the
 * queue instead of descending into it; true: fd was sent and is closed here. False: walk
 * it here. */
static bool split(struct walker *w, int fd, const struct stat *st, const struct policy_target *t,
		  bool pending, unsigned post, bool secrets, bool busy)
{
	struct shared *sh = w->sh;
	unsigned abs = w->base + w->depth, cap = sh->qcap;
	struct pnode *pn;
	struct task *k;

	/* The rule's top-level directories fill the queue; a deeper one (likely less work)
	 * is queued only for threads that wait for work, or into an empty queue, when one is
	 * about to. Keeping the queue full with whatever came next cut the work into leaf
	 * directories: one hand-over (sendmsg, recvmsg, lock, wake-up) per few hundred
	 * entries instead of per top-level directory. */
	if (abs > 1) {
		unsigned idle = __atomic_load_n(&sh->idle, __ATOMIC_RELAXED);

		cap = idle > 1 ? (idle < cap ? idle : cap) : 1;
	}
	if (!sh->mt || w->depth == 0 || abs > SPLIT_DEPTH ||
	    __atomic_load_n(&sh->queued, __ATOMIC_RELAXED) >= cap)
		return false;
	pn = frame_node(w, &w->frames[w->depth - 1]);
	if (!pn)
		return false;
	k = malloc(sizeof(*k) + w->path_len + 1);
	if (!k)
		return false;
	*k = (struct task){
		.f = new_frame(w, fd, st, t, pending, post, secrets, busy),
		.abs = abs,
		.rule = w->rule,
		.path_len = w->path_len,
	};
	k->f.up = pn;
	memcpy(k->path, w->path, w->path_len + 1);
	lock(sh);
	if (sh->queued >= cap || send_fd(sh->fdq[0], fd) < 0) {
		unlock(sh);
		free(k);
		return false;
	}
	k->f.fd = -1; /* on its way through sh->fdq */
	pn->refs++;
	if (sh->qtail)
		sh->qtail->next = k;
	else
		sh->qhead = k;
	sh->qtail = k;
	__atomic_store_n(&sh->queued, sh->queued + 1, __ATOMIC_RELAXED);
	sh->active++;
	pthread_cond_broadcast(&sh->cond);
	unlock(sh);
	safe_close(fd); /* this thread's copy */
	return true;
}

/* A directory at the depth bound: the walk does not descend, so what lies below keeps
 * whatever it has, and under a read or write rule that may be an agent's writable files
 * inside what is now a read-only tree. Fail closed whatever the rule: the directory
 * becomes root:root 0700 with no ACLs (the same fd-based, tighten-first steps as any
 * node: nothing is followed, nobody gains), so nothing below is reachable for agents,
 * and it is reported as an error (a violation for check): the rule is not fully applied.
 * Owners and modes below stay as they are: root's 0700 on this directory is what shuts
 * them off. */
static void close_too_deep(struct walker *w, int dfd, const struct stat *st0)
{
	struct policy_target t = {.uid = 0, .gid = 0, .mode = 0700};
	struct policy_xstate x;
	struct stat st = *st0;
	unsigned changes;
	int r;

	r = policy_xstate_fd(w->xlist, &w->sh->key, dfd, false, &x);
	if (r < 0)
		return emit(w, POLICY_EV_TOO_DEEP, r, 0, &st, &t, w->o->mode == POLICY_CHECK);
	/* Closed by pistis: a write rule opens it again. Not root's private directory, which
	 * pistis did not close (red team: an agent renamed a directory above one to put it at
	 * the bound, renamed it back once marked, and the next apply opened it to every
	 * agent, its 0644 files group-writable). */
	if (w->sh->marks && !private_left(w, &st, &x) &&
	    !(w->rule->access == POLICY_NONE && w->sh->rule_movable))
		t.flags |= marks_made(w) ? POLICY_T_MARK : POLICY_T_KEEP_MARK;
	changes = policy_changes_for(&st, &x, &t);
	if (changes)
		w->st.changed++;
	if (changes && w->o->mode == POLICY_APPLY) {
		if (policy_takes_away(&st, &x, &t)) {
			r = notify_tighten(w);
			if (r < 0)
				return emit(w, POLICY_EV_TOO_DEEP, r, changes, st0, &t, false);
		}
		r = policy_apply_pre(dfd, false, &st, &x, &t);
		if (r >= 0)
			r = policy_apply_post(&w->sh->key, dfd, false, &st, &t,
					      changes & MARK_CHANGES);
		if (r < 0)
			return emit(w, POLICY_EV_TOO_DEEP, r, changes, st0, &t, false);
	}
	emit(w, POLICY_EV_TOO_DEEP, 0, changes, st0, &t, w->o->mode == POLICY_CHECK);
}

/* A mount point beneath the rule (a volume, a file or directory bind-mounted over
 * another): not crossed, so it keeps what it has. Where that is looser than the rule, or
 * its owner is neither the rule's nor root (and may loosen it again), the rule does not
 * hold there: a violation for check and apply alike, as for a second name, with what it
 * would take. x is NULL where its ACLs could not be read: the mode alone decides. */
static void mount_point_seen(struct walker *w, const struct stat *st, const struct policy_xstate *x,
			     bool secrets)
{
	const struct policy_xstate none = {0};
	struct policy_target t;
	bool off;

	w->st.skipped++;
	policy_target_for(w->rule->access, secrets, st->st_mode, st->st_uid, &t);
	if (S_ISDIR(st->st_mode))
		policy_target_pin(w->rules, w->path, w->path_len, &t);
	if (!x)
		x = &none;
	off = policy_looser_than(st, x, &t) || policy_owner_reopens(st, &t);
	emit(w, POLICY_EV_OTHER_FS, 0, off ? policy_changes_for(st, x, &t) : 0, st, &t,
	     off && w->o->mode != POLICY_PLAN);
}

/* The ACL state of a non-directory mount point seen by name (st): by name where the
 * kernel can, else (an old kernel, or more xattr names than one list holds) through an
 * O_PATH fd of the same node. Never changed, only judged: it must not be judged on its mode
 * alone because the list failed. */
static int mount_point_xstate(struct walker *w, int dfd, const char *name, const struct stat *st,
			      struct policy_xstate *x)
{
	_cleanup_close_ int fd = -1;
	struct stat now;
	int r = policy_xstate_at(w->xlist, &w->sh->key, dfd, name, x);

	if (r != -ENOSYS && r != -ENOENT)
		return r;
	fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &now) < 0)
		return negative_errno();
	if (now.st_dev != st->st_dev || now.st_ino != st->st_ino)
		return -ESTALE; /* swapped meanwhile: judged on what was seen */
	return policy_xstate_fd(w->xlist, &w->sh->key, fd, true, x);
}

static void private_seen(struct walker *w, const struct stat *st, const struct policy_xstate *x,
			 const struct policy_target *t)
{
	w->st.skipped++;
	emit(w, POLICY_EV_PRIVATE, 0, policy_changes_for(st, x, t), st, t, false);
}

/* Under a write rule, root's or pi-tools' directory that the pre-order step (st: what it
 * has now) left closed to the agents, to be opened by the post-order one after its whole
 * subtree. Walked with no mark it looked like root's private directory to every later walk
 * (private_left): a walk cut short there (a kill, an I/O error, its time bound) left it and
 * all below it closed for good, each later apply exiting 0 with a "left … private" line
 * (red team, redteam-faults.sh). So it carries the closing mark while it is closed, set
 * now (nobody but its owner can read the tag: it is closed) and taken off before the
 * opening chmod, as for any node a none rule closed and a write rule opens. */
static bool closed_for_walk(const struct walker *w, const struct stat *st,
			    const struct policy_xstate *x, const struct policy_target *t)
{
	struct policy_xstate now = *x;
	struct stat open = *st;

	if (w->rule->access != POLICY_WRITE || !marks_made(w) || x->closed_mark ||
	    (at_rule_path(w) && w->sh->rule_parent_safe))
		return false;
	now.acl_access = false; /* the pre-order step took it off */
	open.st_mode = (st->st_mode & S_IFMT) | t->mode;
	open.st_uid = t->uid == (uid_t)-1 ? st->st_uid : t->uid;
	open.st_gid = t->gid;
	return policy_closed_to_agents(st, &now) && !policy_closed_to_agents(&open, &now);
}

/* A directory: opened (O_DIRECTORY|O_NOFOLLOW: a real directory or nothing), checked,
 * its pre-order changes made, pushed for reading (or handed to another thread). */
static void visit_dir(struct walker *w, int fd, bool secrets)
{
	_cleanup_close_ int dfd = fd;
	struct policy_target t;
	struct policy_xstate x;
	struct stat st;
	unsigned changes, post;
	bool apply = w->o->mode == POLICY_APPLY, pending = false;
	int r, mount;

	w->st.dirs++;
	r = policy_node_stat(dfd, "", AT_EMPTY_PATH, &st, &mount);
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, NULL, NULL, false);
	if (crosses_fs(w, &st, mount)) {
		r = policy_xstate_fd(w->xlist, &w->sh->key, dfd, false, &x);
		return mount_point_seen(w, &st, r < 0 ? NULL : &x, secrets);
	}
	if (w->base + w->depth >= w->sh->max_depth)
		return close_too_deep(w, dfd, &st);
	policy_target_for(w->rule->access, secrets, st.st_mode, st.st_uid, &t);
	policy_target_pin(w->rules, w->path, w->path_len, &t);
	want_mark(w, &st, &t);
	if (agents_in_trusted(w, &st, &t, NULL))
		return emit(w, POLICY_EV_AGENTS_IN_TRUSTED, 0, 0, &st, &t,
			    w->o->mode == POLICY_CHECK);
	r = policy_xstate_fd(w->xlist, &w->sh->key, dfd, false, &x);
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, &st, &t, false);
	if (private_left(w, &st, &x))
		return private_seen(w, &st, &x, &t);
	changes = policy_changes_for(&st, &x, &t);
	if (changes) {
		w->st.changed++;
		emit(w, POLICY_EV_CHANGE, 0, changes, &st, &t,
		     w->o->mode == POLICY_CHECK && (changes & ~MARK_CHANGES));
	}
	post = changes & POST_CHANGES;
	if (changes && apply) {
		if (policy_takes_away(&st, &x, &t) && notify_tighten(w) < 0)
			return;
		r = policy_apply_pre(dfd, false, &st, &x, &t);
		if (r < 0)
			emit(w, POLICY_EV_ERROR, r, changes, &st, &t, false);
		else
			pending = (st.st_mode & 07777) != t.mode || post;
		if (r >= 0 && pending && closed_for_walk(w, &st, &x, &t)) {
			r = policy_mark_set(&w->sh->key, dfd, false);
			if (r < 0)
				emit(w, POLICY_EV_ERROR, r, changes, &st, &t, false);
			else
				post |= POLICY_CH_UNMARK;
		}
	}
	if (split(w, dfd, &st, &t, pending, post, secrets, changes != 0)) {
		TAKE_FD(dfd);
		return;
	}
	push_frame(w, TAKE_FD(dfd), &st, &t, pending, post, secrets, changes != 0);
}

static void vanished(struct walker *w)
{
	w->st.skipped++;
	emit(w, POLICY_EV_VANISHED, 0, 0, NULL, NULL, false);
}

/* A symlink where the walk looked: name in dfd, st its stat or NULL when d_type said so.
 * Inside a write tree it is left alone and counted. At a rule's own path it is an error:
 * rules name real paths (policy_rules_check_fs refuses a symlink, and walk_rule looks
 * again), so one there now was planted since, even between the walk's own looks at the
 * path, and the rule was not applied: say so, and make apply, plan and check fail.
 *
 * Under a read or none rule a link whose owner is not the rule's (root; pi-tools in the
 * secrets) was made by someone who could write there once, an agent under an earlier
 * write rule: .git/hooks/pre-commit -> ../../../x.sh, a file the agent still writes, has
 * root's git run the agent's code, whatever the rule does to the hooks' directory. Nothing
 * the walk may do makes it safe (it is never followed, and making the link root's changes
 * nothing where it points): reported, left, until the operator removes or replaces it.
 * In the trees trusted commands rest on, an agent's link says more (agents_in_trusted):
 * /data/bin/git -> a file of agent A's is on every agent's PATH (B runs A's code as B), a
 * link in /data/.secrets hands a trusted command the agent's file as a secret. Only read
 * and none trees pay for the lstat a d_type of DT_LNK spares. */
static void symlink_seen(struct walker *w, int dfd, const char *name, const struct stat *st,
			 bool secrets)
{
	struct policy_target t;
	struct stat lst;

	if (at_rule_path(w))
		return emit(w, POLICY_EV_SYMLINK, -ELOOP, 0, st, NULL, false);
	w->st.symlinks++;
	if (w->rule->access == POLICY_WRITE && !policy_path_trusted(w->path, w->path_len))
		return;
	if (!st) {
		if (fstatat(dfd, name, &lst, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(lst.st_mode))
			return; /* gone, or no longer a link: the next walk looks again */
		st = &lst;
	}
	if (users_uid_is_agent(st->st_uid) && policy_path_trusted(w->path, w->path_len))
		return emit(w, POLICY_EV_AGENTS_IN_TRUSTED, 0, 0, st, NULL,
			    w->o->mode == POLICY_CHECK);
	if (w->rule->access == POLICY_WRITE)
		return;
	policy_target_for(w->rule->access, secrets, st->st_mode, st->st_uid, &t);
	if (st->st_uid != t.uid)
		emit(w, POLICY_EV_FOREIGN_SYMLINK, 0, 0, st, &t, w->o->mode == POLICY_CHECK);
}

/* A name that getdents (or the rule) gave as a non-directory is a directory now: take it
 * as one, through an fd of its own. */
static void look_again_as_dir(struct walker *w, int dfd, const char *name, bool secrets)
{
	int fd = openat(dfd, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;

	if (fd < 0 && (errno == ENOTDIR || errno == ELOOP) && at_rule_path(w) &&
	    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
		return symlink_seen(w, dfd, name, &st, secrets);
	if (fd < 0)
		return vanished(w);
	visit_dir(w, fd, secrets);
}

/* An entry of a directory (or a rule's own path) named name in dfd.
 *
 * A non-directory is looked at by name (statx and listxattrat with AT_SYMLINK_NOFOLLOW:
 * nothing is opened) and, only when it must change, opened O_PATH|O_NOFOLLOW and checked
 * to be the node looked at. Where the last file of the same directory needed changes
 * (a first apply), the O_PATH fd is opened first and its own statx decides: one syscall
 * less per changed file, the same checks. Either way changes go through the fd only. */
static void visit(struct walker *w, int dfd, const char *name, unsigned char d_type, bool secrets)
{
	_cleanup_close_ int fd = -1;
	struct frame *parent = w->depth ? &w->frames[w->depth - 1] : NULL;
	struct policy_target t;
	struct policy_xstate x;
	struct stat st, st2;
	unsigned changes;
	int r, mount = -1;

	tick(w);
	if (d_type == DT_LNK)
		return symlink_seen(w, dfd, name, NULL, secrets);
	if (d_type == DT_DIR || d_type == DT_UNKNOWN) {
		/* Try the directory first: O_NOFOLLOW|O_DIRECTORY fails on anything else. */
		fd = openat(dfd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
				    O_NOCTTY);
		if (fd >= 0)
			return visit_dir(w, TAKE_FD(fd), secrets);
		if (errno == ENOENT)
			return vanished(w);
		if (errno != ENOTDIR && errno != ELOOP)
			return emit(w, POLICY_EV_ERROR, negative_errno(), 0, NULL, NULL, false);
	}
	if (parent && parent->busy && w->o->mode == POLICY_APPLY) {
		/* O_PATH never opens the node for I/O (FIFOs, devices stay closed) and with
		 * O_NOFOLLOW a symlink is the link itself, seen as such by the statx. */
		fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			return vanished(w);
		if (fd < 0)
			return emit(w, POLICY_EV_ERROR, negative_errno(), 0, NULL, NULL, false);
		r = policy_node_stat(fd, "", AT_EMPTY_PATH, &st, &mount);
	} else {
		r = policy_node_stat(dfd, name, AT_SYMLINK_NOFOLLOW, &st, &mount);
	}
	if (r == -ENOENT)
		return vanished(w);
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, NULL, NULL, false);
	if (S_ISLNK(st.st_mode))
		return symlink_seen(w, dfd, name, &st, secrets);
	if (S_ISDIR(st.st_mode))
		return look_again_as_dir(w, dfd, name, secrets);
	if (crosses_fs(w, &st, mount)) {
		r = fd >= 0 ? policy_xstate_fd(w->xlist, &w->sh->key, fd, true, &x)
			    : mount_point_xstate(w, dfd, name, &st, &x);
		return mount_point_seen(w, &st, r < 0 ? NULL : &x, secrets);
	}

	/* The ACL state is read by name even when fd is open: listxattr() refuses O_PATH
	 * fds, and /proc/thread-self/fd/N costs a path walk. A name swapped in the meantime can
	 * only make us miss an ACL planted a moment ago — no different from one planted
	 * after the walk passed; the next apply strips it. Not so the closing mark, which
	 * opens root's node under a write rule: xstate_of_node() reads it through the fd. */
	r = policy_xstate_at(w->xlist, &w->sh->key, dfd, name, &x);
	if (r == -ENOSYS || r == -ENOENT) {
		/* Old kernel: look through an O_PATH fd (never opened for I/O). */
		if (fd < 0) {
			fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				return vanished(w);
			if (fstat(fd, &st) < 0)
				return emit(w, POLICY_EV_ERROR, negative_errno(), 0, NULL, NULL,
					    false);
			if (S_ISLNK(st.st_mode) && at_rule_path(w))
				return symlink_seen(w, dfd, name, &st, secrets);
			if (S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode))
				return vanished(w);
		}
		r = policy_xstate_fd(w->xlist, &w->sh->key, fd, true, &x);
	} else if (r >= 0 && fd >= 0) {
		r = xstate_of_node(w, fd, &st, &x);
	} else if (r >= 0 && x.closed_mark && w->rule->access == POLICY_WRITE &&
		   (st.st_uid == 0 || st.st_uid == USERS_TOOLS_UID)) {
		/* A mark's name on root's node: its tag is checked through the node's fd now,
		 * so that plan and check judge it as apply does. */
		fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st2) < 0 || st2.st_dev != st.st_dev ||
		    st2.st_ino != st.st_ino || (st2.st_mode & S_IFMT) != (st.st_mode & S_IFMT))
			return vanished(w);
		st = st2;
		r = xstate_of_node(w, fd, &st, &x);
	}
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, &st, NULL, false);

	policy_target_for(w->rule->access, secrets, st.st_mode, st.st_uid, &t);
	want_mark(w, &st, &t);
	if (agents_in_trusted(w, &st, &t, &x))
		return emit(w, POLICY_EV_AGENTS_IN_TRUSTED, 0, 0, &st, &t,
			    w->o->mode == POLICY_CHECK);
	if (private_left(w, &st, &x))
		return private_seen(w, &st, &x, &t);
	changes = policy_changes_for(&st, &x, &t);
	if (parent)
		parent->busy = changes != 0;
	if (!changes)
		return;
	bool trim = false;
	if (st.st_nlink > 1 || (t.flags & POLICY_T_LEAVE)) {
		/* Another name may be outside the tree (/etc/shadow linked into a workspace):
		 * never chowned, never made more permissive, and reported. A file agents can
		 * write already (one of theirs, a shared pi-sandbox one, a world-writable
		 * one), where the kernel lets no one link a file it could not write
		 * (protected_hardlinks), is no one else's to keep as it is: what the rule
		 * takes away (mode bits, set-id bits, ACLs) is taken away through the fd, so
		 * a second name never keeps a tightened file open (policy_trim_target). A
		 * file agents cannot write (/etc/passwd linked by root, cp -al) is left. */
		struct policy_target tt;
		bool off;
		trim = st.st_nlink > 1 && !(t.flags & POLICY_T_LEAVE) &&
		       w->sh->hardlinks_protected && policy_agents_may_write(&st);
		if (trim) {
			policy_trim_target(&st, &t, &tt);
			trim_mark(w, &st, &tt);
			trim = policy_changes_for(&st, &x, &tt) != 0;
		}
		/* A second name left as it is, not what the rule says (tighter or looser), is a
		 * violation to check, and to apply's summary where the trim does not make it
		 * so: the operator must hear of it. An agent that links a shared
		 * root:pi-sandbox 0660 file at a none rule's path not there yet has the trim
		 * lock every other agent out of it (0600); one that links its own file into a
		 * read tree keeps an owner who can give the mode back. An agent's own file
		 * that is only tighter than a rule says (git's and pnpm's hardlinks, trimmed) is
		 * its owner's to open again: not a violation. A device node: only when it is
		 * looser or its owner can loosen it. */
		if (st.st_nlink > 1) {
			bool agents = users_uid_is_agent(st.st_uid);
			off = !agents || policy_looser_than(&st, &x, &t) ||
			      policy_owner_reopens(&st, &t);
			if (off && trim && w->o->mode == POLICY_APPLY) {
				struct stat sa = st;
				struct policy_xstate xa = {0};

				sa.st_mode = (st.st_mode & S_IFMT) | tt.mode;
				off = policy_changes_for(&sa, &xa, &t) != 0 &&
				      (!agents || policy_looser_than(&sa, &xa, &t) ||
				       policy_owner_reopens(&sa, &t));
			}
		} else {
			off = policy_looser_than(&st, &x, &t) || policy_owner_reopens(&st, &t);
		}
		w->st.skipped++;
		emit(w, st.st_nlink > 1 ? POLICY_EV_HARDLINK : POLICY_EV_DEVICE, 0, changes, &st,
		     &t,
		     off && (w->o->mode == POLICY_CHECK ||
			     (w->o->mode == POLICY_APPLY && st.st_nlink > 1)));
		if (!trim || w->o->mode != POLICY_APPLY)
			return;
		t = tt;
	} else {
		w->st.changed++;
		emit(w, POLICY_EV_CHANGE, 0, changes, &st, &t,
		     w->o->mode == POLICY_CHECK && (changes & ~MARK_CHANGES));
		if (w->o->mode != POLICY_APPLY)
			return;
	}

	/* From here on only the fd counts: it must be the very node we looked at. */
	if (fd < 0) {
		fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return vanished(w);
		if (fstat(fd, &st2) < 0)
			return emit(w, POLICY_EV_ERROR, negative_errno(), 0, NULL, NULL, false);
		if (S_ISLNK(st2.st_mode) && at_rule_path(w))
			return symlink_seen(w, dfd, name, &st2, secrets);
		if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino ||
		    (st2.st_mode & S_IFMT) != (st.st_mode & S_IFMT))
			return vanished(w);
		/* Same inode as looked at by name (dev/ino/type checked above): its mode and
		 * owner are re-read from the fd; the ACL state read by name a moment ago
		 * stands (see above), except where it decides whether root's node is opened. */
		st = st2;
		r = xstate_of_node(w, fd, &st, &x);
		if (r < 0)
			return emit(w, POLICY_EV_ERROR, r, 0, &st, NULL, false);
		policy_target_for(w->rule->access, secrets, st.st_mode, st.st_uid, &t);
		want_mark(w, &st, &t);
		if (private_left(w, &st, &x))
			return private_seen(w, &st, &x, &t);
		if (trim) {
			struct policy_target tt;
			policy_trim_target(&st, &t, &tt);
			trim_mark(w, &st, &tt);
			t = tt;
		} else if (st.st_nlink > 1) {
			return;
		}
		if (!policy_changes_for(&st, &x, &t))
			return;
	}
	if (policy_takes_away(&st, &x, &t) && notify_tighten(w) < 0)
		return;
	r = policy_apply_pre(fd, true, &st, &x, &t);
	if (r >= 0)
		r = policy_apply_post(&w->sh->key, fd, true, &st, &t,
				      policy_changes_for(&st, &x, &t) & MARK_CHANGES);
	if (r < 0)
		emit(w, POLICY_EV_ERROR, r, changes, &st, &t, false);
}

/* The entries of f's listing not walked yet when a child directory is pushed: kept in
 * the thread's rest stack (frames end in LIFO order, so the regions do too) when it has
 * room, else found again with lseek to d_off and a new getdents on return. */
static void keep_rest(struct walker *w, struct frame *f, const char *buf, long pos, long n,
		      bool from_rest, int64_t off)
{
	size_t len = (size_t)(n - pos);

	if (from_rest) {
		f->rest_pos += (size_t)pos;
	} else if (len <= w->rest_cap - w->rest_top) {
		memcpy(w->rest + w->rest_top, buf + pos, len);
		f->rest_base = f->rest_pos = w->rest_top;
		f->rest_end = w->rest_top += len;
	} else {
		f->seek = true;
		f->resume = off;
	}
}

static void drop_rest(struct walker *w, struct frame *f)
{
	if (f->rest_pos < f->rest_end)
		w->rest_top = f->rest_base;
	f->rest_base = f->rest_pos = f->rest_end = 0;
}

static void finish_frame(struct walker *w, bool complete)
{
	struct frame *f = &w->frames[w->depth - 1];
	struct pnode *up = f->up;
	int r;

	drop_rest(w, f);
	path_pop(w, f->path_len);
	if (f->node) {
		/* Part of the subtree may still be walked elsewhere: the node takes the fd
		 * and the final step; the parent directory now waits for this node. */
		struct pnode *n = f->node, *pn = up;
		bool last;

		n->f = *f;
		n->f.node = NULL;
		n->complete = complete;
		if (w->depth >= 2) {
			pn = frame_node(w, &w->frames[w->depth - 2]);
			if (!pn)
				set_abort(w, -ENOMEM); /* no final steps from now on */
		}
		lock(w->sh);
		if (pn && w->depth >= 2)
			pn->refs++;
		n->parent = pn;
		last = --n->refs == 0;
		unlock(w->sh);
		if (last)
			node_done(w, n);
	} else {
		if (f->pending && complete) {
			r = policy_apply_post(&w->sh->key, f->fd, false, &f->st, &f->tgt, f->post);
			if (r < 0)
				emit(w, POLICY_EV_ERROR, r, post_step(f), &f->st, &f->tgt, false);
		} else if (!complete) {
			emit(w, POLICY_EV_NOT_DONE, abort_r(w), 0, &f->st, NULL, false);
		}
		safe_close(f->fd);
		if (up)
			node_release(w, up);
	}
	w->depth--;
	if (w->depth > 0)
		path_pop(w, w->frames[w->depth - 1].path_len);
}

/* Stream the directory on top of the stack. One getdents buffer per thread; when a child
 * directory is pushed mid-buffer, the rest of the buffer waits in the rest stack (or the
 * parent remembers d_off and seeks back on return), so memory does not grow with depth
 * and no listing is held whole. */
static void run_stack(struct walker *w, unsigned base)
{
	while (w->depth > base) {
		struct frame *f = &w->frames[w->depth - 1];
		bool from_rest = f->rest_pos < f->rest_end;
		const char *buf = w->dents;
		long n, pos = 0;

		if (abort_r(w)) {
			finish_frame(w, false);
			continue;
		}
		if (from_rest) {
			buf = w->rest + f->rest_pos;
			n = (long)(f->rest_end - f->rest_pos);
		} else {
			if (f->seek) {
				f->seek = false;
				if (lseek(f->fd, f->resume, SEEK_SET) < 0) {
					emit(w, POLICY_EV_ERROR, negative_errno(), 0, &f->st, NULL,
					     false);
					finish_frame(w, false);
					continue;
				}
			}
			n = syscall(SYS_getdents64, f->fd, w->dents, DENTS_BUF);
			if (n < 0) {
				emit(w, POLICY_EV_ERROR, negative_errno(), 0, &f->st, NULL, false);
				finish_frame(w, false);
				continue;
			}
			if (n == 0) {
				finish_frame(w, true);
				continue;
			}
		}
		while (pos < n && !abort_r(w)) {
			const struct linux_dirent64 *d = (const struct linux_dirent64 *)(buf + pos);
			const char *name = d->d_name;
			size_t len = strlen(name);
			unsigned before = w->depth;
			int64_t off = d->d_off;
			unsigned char type = d->d_type;

			pos += d->d_reclen;
			if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')))
				continue;
			if (path_push(w, name, len) < 0) {
				set_abort(w, -ENOMEM);
				break;
			}
			/* A more specific rule owns that subtree; it gets its own walk. One of
			 * pistis's own trees gets none: no rule changes it. */
			if ((f->has_below &&
			     policy_rules_find(w->rules, w->path, w->path_len) >= 0) ||
			    (f->reserved_below && policy_path_reserved(w->path, w->path_len))) {
				path_pop(w, f->path_len);
				continue;
			}
			visit(w, f->fd, name, type,
			      f->secrets || (w->rule->access == POLICY_NONE &&
					     policy_path_under(POLICY_SECRETS_DIR,
							       strlen(POLICY_SECRETS_DIR), w->path,
							       w->path_len)));
			if (w->depth > before) {
				/* Descend now; come back to the next entry. */
				if (pos < n)
					keep_rest(w, f, buf, pos, n, from_rest, off);
				break;
			}
			path_pop(w, f->path_len);
		}
		if (from_rest && pos >= n)
			drop_rest(w, f); /* all of it walked: the next entries come from getdents */
	}
}

/* Walk a queued subtree as the first frame of this walker's stack. */
static void run_task(struct walker *w, struct task *k)
{
	if (k->f.fd < 0) {
		/* Its fd did not arrive: the subtree stays as tightened, the walk stops. */
		set_abort(w, k->f.fd);
		emit_at(w, k->rule, k->path, k->path_len, POLICY_EV_NOT_DONE, k->f.fd, 0, &k->f.st,
			NULL, false);
		node_release(w, k->f.up);
		free(k);
		return;
	}
	if (w->path_cap < k->path_len + 1) {
		char *p = realloc(w->path, k->path_len + 1);

		if (!p) {
			set_abort(w, -ENOMEM);
			safe_close(k->f.fd);
			node_release(w, k->f.up);
			free(k);
			return;
		}
		w->path = p;
		w->path_cap = k->path_len + 1;
	}
	memcpy(w->path, k->path, k->path_len + 1);
	w->path_len = k->path_len;
	w->rule = k->rule;
	w->base = k->abs;
	w->frames[0] = k->f;
	w->depth = 1;
	free(k);
	run_stack(w, 0);
}

/* Under sh->lock: take a task and run it unlocked. */
static void run_one_locked(struct walker *w)
{
	struct shared *sh = w->sh;
	struct task *k = sh->qhead;

	sh->qhead = k->next;
	if (!sh->qhead)
		sh->qtail = NULL;
	__atomic_store_n(&sh->queued, sh->queued - 1, __ATOMIC_RELAXED);
	k->f.fd = recv_fd(sh->fdq[1]); /* the fd sent when k was queued: the socket is FIFO */
	unlock(sh);
	run_task(w, k);
	lock(sh);
	if (--sh->active == 0)
		pthread_cond_broadcast(&sh->cond);
}

/* Under sh->lock: the final steps other threads handed to this one. */
static void run_posts_locked(struct walker *w)
{
	struct shared *sh = w->sh;

	while (w->posts) {
		struct pnode *n = w->posts;

		w->posts = n->next_post;
		unlock(sh);
		node_done(w, n);
		lock(sh);
		if (--sh->active == 0)
			pthread_cond_broadcast(&sh->cond);
	}
}

/* Give this thread a struct cred of its own, equal to the one it shares: setting
 * PR_SET_KEEPCAPS to the value it has commits a copy of the calling thread's credentials
 * and changes nothing else. Every file opened or closed takes and drops a reference on the
 * opener's cred, and the uid and gid that every permission check reads share its cache
 * line: with one cred shared, two threads opening an O_PATH fd per file kept pulling that
 * line back and forth. */
static void keep_own_cred(void)
{
	int keep = prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0);

	if (keep == 0 || keep == 1)
		(void)prctl(PR_SET_KEEPCAPS, (unsigned long)keep, 0, 0, 0);
}

/* Under sh->lock. */
static void wait_for_work(struct shared *sh)
{
	__atomic_store_n(&sh->idle, sh->idle + 1, __ATOMIC_RELAXED);
	pthread_cond_wait(&sh->cond, &sh->lock);
	__atomic_store_n(&sh->idle, sh->idle - 1, __ATOMIC_RELAXED);
}

static void *worker_main(void *arg)
{
	struct walker *w = arg;
	struct shared *sh = w->sh;

	/* See "Parallel walk"; failing either is slower, not wrong. */
	(void)unshare(CLONE_FILES);
	keep_own_cred();
	lock(sh);
	for (;;) {
		while (!sh->qhead && !w->posts && !sh->done)
			wait_for_work(sh);
		if (w->posts)
			run_posts_locked(w);
		else if (sh->qhead)
			run_one_locked(w);
		else
			break;
	}
	unlock(sh);
	return NULL;
}

/* The calling thread, its own stack done: help until every task of the rule is done. */
static void drain(struct walker *w)
{
	struct shared *sh = w->sh;

	if (!sh->mt)
		return;
	lock(sh);
	while (sh->active) {
		if (w->posts)
			run_posts_locked(w);
		else if (sh->qhead)
			run_one_locked(w);
		else
			wait_for_work(sh);
	}
	unlock(sh);
}

/* The rule's own path is the operator's to name, and a write rule opens what is there,
 * unless an agent may write the directory that holds it: then the agent may have renamed
 * the real one away and put root's private file in its place (red team). pfd: O_PATH. */
static bool parent_closed_to_agents(struct walker *w, int pfd)
{
	struct policy_xstate x;
	struct stat st;

	if (fstat(pfd, &st) < 0 || policy_xstate_fd(w->xlist, &w->sh->key, pfd, true, &x) < 0)
		return false;
	return !policy_agents_may_write_x(&st, &x);
}

/* Whether an agent may rename a directory on the way to path (the rule's own path
 * included): one that agents may write holds it, with no sticky bit, or with one where the
 * agent owns the directory or the entry. A none rule's tree there could be moved (renamed
 * within that directory to a write rule's path, or carried along with an agent's directory
 * into a write tree) with its closing marks, which name the nodes wherever they go: the
 * next apply would open them (red team: a write rule's pinned directory in a shared
 * directory with no rule, renamed away and moved under a new directory of the agent's at
 * the rule's path, had its none subtree opened). Not knowing (an error) counts as yes. */
static bool rule_path_movable(struct walker *w, int root_fd, const char *path)
{
	_cleanup_close_ int cur = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	const char *p = path;

	if (cur < 0)
		return true;
	for (;;) {
		char name[POLICY_NAME_MAX + 1];
		struct policy_xstate x;
		struct stat dst, cst;
		size_t n;
		int fd;

		while (*p == '/')
			p++;
		if (!*p)
			return false;
		n = strcspn(p, "/");
		if (n > POLICY_NAME_MAX)
			return true;
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		if (fstat(cur, &dst) < 0 || policy_xstate_fd(w->xlist, NULL, cur, true, &x) < 0)
			return true;
		if (fstatat(cur, name, &cst, AT_SYMLINK_NOFOLLOW) < 0)
			return errno != ENOENT;
		if (policy_agents_may_write_x(&dst, &x) &&
		    (!(dst.st_mode & S_ISVTX) || users_uid_is_agent(dst.st_uid) ||
		     users_uid_is_agent(cst.st_uid)))
			return true;
		fd = openat(cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return errno != ENOENT && errno != ENOTDIR;
		safe_close(cur);
		cur = fd;
	}
}

static void walk_rule(struct walker *w, const struct policy_rule *rule, int root_fd)
{
	_cleanup_close_ int pfd = -1;
	const char *name = ".";
	char parent[POLICY_PATH_MAX + 1];
	bool secrets = rule->access == POLICY_NONE &&
		       policy_path_under(POLICY_SECRETS_DIR, strlen(POLICY_SECRETS_DIR), rule->path,
					 rule->len);
	struct stat st;
	int r;

	w->rule = rule;
	w->base = 0;
	if (w->path_cap < rule->len + 2) {
		char *p = realloc(w->path, rule->len + 2);

		if (!p) {
			set_abort(w, -ENOMEM);
			return;
		}
		w->path = p;
		w->path_cap = rule->len + 2;
	}
	memcpy(w->path, rule->path, rule->len + 1);
	w->path_len = rule->len;

	if (rule->len > 1) {
		const char *slash = strrchr(rule->path, '/');
		size_t plen = (size_t)(slash - rule->path);

		memcpy(parent, rule->path, plen);
		parent[plen ? plen : 1] = '\0';
		if (!plen)
			parent[0] = '/';
		name = slash + 1;
	} else {
		strcpy(parent, "/");
	}
	r = policy_resolve(root_fd, parent, O_PATH | O_DIRECTORY, &pfd);
	if (r == -ENOENT || r == -ENOTDIR) {
		w->st.skipped++;
		return emit(w, POLICY_EV_MISSING, r, 0, NULL, NULL, false);
	}
	if (r == -ELOOP)
		return emit(w, POLICY_EV_SYMLINK, r, 0, NULL, NULL, false);
	if (r < 0)
		return emit(w, POLICY_EV_ERROR, r, 0, NULL, NULL, false);
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT) {
			w->st.skipped++;
			return emit(w, POLICY_EV_MISSING, -ENOENT, 0, NULL, NULL, false);
		}
		return emit(w, POLICY_EV_ERROR, negative_errno(), 0, NULL, NULL, false);
	}
	if (S_ISLNK(st.st_mode))
		return emit(w, POLICY_EV_SYMLINK, -ELOOP, 0, &st, NULL, false);
	/* The walk stays on the file system of the rule's own path (a volume is fine). */
	w->sh->dev = st.st_dev;
	w->sh->marks = policy_marks_supported(pfd, name);
	w->sh->rule_parent_safe = parent_closed_to_agents(w, pfd);
	w->sh->rule_movable = rule->access == POLICY_NONE && w->sh->marks &&
			      rule_path_movable(w, root_fd, rule->path);
	if (policy_walk_rule_hook)
		policy_walk_rule_hook(pfd, name);
	/* The path may have changed since the fstatat (a symlink planted): visit() looks
	 * again and reports it (symlink_seen). */
	visit(w, pfd, name, S_ISDIR(st.st_mode) ? DT_DIR : DT_UNKNOWN, secrets);
	run_stack(w, 0);
	drain(w);
}

static int walker_init(struct walker *w, struct shared *sh)
{
	*w = (struct walker){.sh = sh, .rules = sh->rules, .o = sh->o};
	w->frames = calloc(sh->max_depth + 1, sizeof(*w->frames));
	w->dents = malloc(DENTS_BUF);
	w->rest_cap = policy_walk_rest_buf;
	w->rest = malloc(w->rest_cap ? w->rest_cap : 1);
	w->xlist = malloc(POLICY_XLIST_MAX);
	w->path_cap = 4096;
	w->path = malloc(w->path_cap);
	return w->frames && w->dents && w->rest && w->xlist && w->path ? 0 : -ENOMEM;
}

static void walker_done(struct walker *w)
{
	flush_stats(w, false);
	free(w->frames);
	free(w->dents);
	free(w->rest);
	free(w->xlist);
	free(w->path);
}

static unsigned cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && (n = CPU_COUNT(&set)) > 0)
		return (unsigned)n;
	n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

int policy_walk(int root_fd, const struct policy_rules *rules, const struct policy_walk_opts *opts,
		struct policy_stats *ret_stats)
{
	struct shared sh = {
		.rules = rules,
		.o = opts,
		.fdq = {-1, -1},
	};
	struct walker w, *workers = NULL;
	pthread_t *tids = NULL;
	unsigned started = 0;
	struct rlimit rl;
	int r;

	policy_mark_key_init(&sh.key, root_fd);
	sh.hardlinks_protected = policy_hardlinks_protected();
	sh.max_depth = opts->max_depth ? opts->max_depth : POLICY_DEPTH_MAX;
	sh.threads = opts->threads ? opts->threads : cpus();
	if (sh.threads > POLICY_WALK_THREADS_MAX)
		sh.threads = POLICY_WALK_THREADS_MAX;
	/* One fd per level and thread, plus the queue: never more than RLIMIT_NOFILE
	 * allows. Fewer threads first; then (one thread) a lower depth bound. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		rlim_t avail = rl.rlim_cur > FD_RESERVE * 2 ? rl.rlim_cur - FD_RESERVE : FD_RESERVE;

		while (sh.threads > 1 && fds_needed(sh.threads, sh.max_depth) > avail)
			sh.threads--;
		if (sh.threads == 1 && avail < (rlim_t)sh.max_depth + 1)
			sh.max_depth = (unsigned)avail - 1;
	}
	/* Threads pass directory fds through a socketpair; without one, no threads. */
	if (sh.threads > 1 && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sh.fdq) < 0)
		sh.threads = 1;
	sh.mt = sh.threads > 1;
	sh.qcap = sh.threads * SPLIT_QUEUE;
	if (opts->timeout_sec) {
		clock_gettime(CLOCK_MONOTONIC, &sh.deadline);
		sh.deadline.tv_sec += opts->timeout_sec;
		sh.has_deadline = true;
	}
	pthread_mutex_init(&sh.lock, NULL);
	pthread_cond_init(&sh.cond, NULL);
	r = walker_init(&w, &sh);
	if (r < 0)
		goto out;
	/* The closing mark's key (made by `pistisd users ensure-base`). One that cannot be
	 * used (not root's 0600, not 32 bytes) is said once: no mark counts then and none is
	 * made or taken off, so nothing closed opens. */
	r = policy_mark_key_load(&sh.key);
	if (r < 0)
		emit_at(&w, NULL, POLICY_STATE_DIR "/mark.key",
			strlen(POLICY_STATE_DIR "/mark.key"), POLICY_EV_ERROR, r, 0, NULL, NULL,
			opts->mode == POLICY_CHECK);
	r = 0;
	if (sh.mt) {
		pthread_attr_t attr;

		workers = calloc(sh.threads - 1, sizeof(*workers));
		tids = calloc(sh.threads - 1, sizeof(*tids));
		if (workers && tids && pthread_attr_init(&attr) == 0) {
			(void)pthread_attr_setstacksize(&attr, 256 * 1024);
			for (; started < sh.threads - 1; started++) {
				if (walker_init(&workers[started], &sh) < 0 ||
				    pthread_create(&tids[started], &attr, worker_main,
						   &workers[started]) != 0) {
					walker_done(&workers[started]);
					break;
				}
			}
			pthread_attr_destroy(&attr);
		}
		/* Fewer threads than planned (or none): the queue still works, drain() runs
		 * what no worker takes. sh.mt and sh.qcap stay as the workers saw them. */
	}
	for (size_t i = 0; i < rules->n && !abort_r(&w); i++)
		walk_rule(&w, &rules->rules[i], root_fd);
	r = abort_r(&w);
out:
	if (started) {
		lock(&sh);
		sh.done = true;
		pthread_cond_broadcast(&sh.cond);
		unlock(&sh);
		for (unsigned i = 0; i < started; i++) {
			pthread_join(tids[i], NULL);
			walker_done(&workers[i]);
		}
	}
	walker_done(&w);
	if (ret_stats)
		*ret_stats = sh.st;
	free(workers);
	free(tids);
	safe_close(sh.fdq[0]);
	safe_close(sh.fdq[1]);
	pthread_cond_destroy(&sh.cond);
	pthread_mutex_destroy(&sh.lock);
	policy_mark_key_done(&sh.key);
	return r;
}
