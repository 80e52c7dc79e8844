#pragma once

/* policy: path rules ({path, access: none|read|write}) and the fd-based walk that applies
 * them as owners, modes and ACLs. Users' reference: docs/policy.md.
 *
 * Pure part (rules.c, target.c): parse and validate a rules file, find the rule that
 * decides a path, compute the owner/mode a level implies, evaluate POSIX ACLs.
 * Side effects (walk.c, resolve.c, store.c, explain.c): the walk, the atomic save, explain. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define POLICY_STATE_DIR "/data/pistis"
#define POLICY_RULES_PATH POLICY_STATE_DIR "/rules.json" /* beneath --root */
#define POLICY_SECRETS_DIR "/data/.secrets"		 /* stays pi-tools-owned under "none" */
#define POLICY_WALK_THREADS_MAX 8 /* a walk's threads, at most (policy_walk_opts.threads) */

/* Limits on a rules file (it is root's input, but it is parsed by a root daemon). */
#define POLICY_FILE_MAX (1024 * 1024)
#define POLICY_RULES_MAX 4096
#define POLICY_PATH_MAX 4095
#define POLICY_NAME_MAX 255
#define POLICY_JSON_DEPTH_MAX 3 /* [ { "path": "…" } ] */

/* Walk bounds. */
#define POLICY_DEPTH_MAX 4096

enum policy_access {
	POLICY_NONE,
	POLICY_READ,
	POLICY_WRITE,
};

struct policy_rule {
	char *path; /* absolute, normalised: no "//", ".", "..", no trailing "/" (but "/") */
	size_t len;
	enum policy_access access;
	unsigned line; /* line of the rule's '{' in the file; 0 for rules not from a file */
};

struct policy_rules {
	struct policy_rule *rules; /* sorted by path (bytewise), so parents come first */
	size_t n;
};

struct policy_error {
	unsigned line; /* 0 when the error is not tied to a line */
	char msg[512];
};

/* Parse and validate a rules file. Errors (-EINVAL, -EFBIG, -E2BIG, -ENOMEM) fill err
 * (may be NULL) with the offending line and a message; names in it are escaped. */
int policy_rules_parse(const char *buf, size_t len, struct policy_rules **ret,
		       struct policy_error *err);
void policy_rules_free(struct policy_rules *r);
static inline void policy_rules_freep(struct policy_rules **r)
{
	policy_rules_free(*r);
}

/* Normalise an absolute path: collapse "//", drop "." and a trailing "/". -EINVAL for a
 * relative path, "..", an empty path, NUL bytes or a component longer than NAME_MAX;
 * -ENAMETOOLONG past POLICY_PATH_MAX or out_size. */
int policy_path_normalise(const char *in, size_t in_len, char *out, size_t out_size);

/* True when path (normalised) is rule or lies beneath it on a component boundary. */
bool policy_path_under(const char *rule, size_t rule_len, const char *path, size_t path_len);

/* The most specific rule that covers path (normalised), or NULL: the path keeps its own
 * permissions. */
const struct policy_rule *policy_rules_match(const struct policy_rules *r, const char *path);

/* pistis's own trees, which no rule changes: its state (the uid registry, the rules file,
 * the relay token) and the agents' homes, each its own agent's (docs/users.md). A rule at
 * or beneath one is refused; a rule above one (/, /data) walks around it. */
#define POLICY_RESERVED_N 3
extern const char *const policy_reserved[POLICY_RESERVED_N];
/* The reserved tree that path (normalised) is or lies beneath, or NULL. */
const char *policy_path_reserved(const char *path, size_t len);
/* Whether a reserved tree lies strictly beneath directory dir (normalised). */
bool policy_reserved_below(const char *dir, size_t len);

/* The trees trusted commands rest on: the secrets (pi-tools' alone), the wrappers on every
 * agent's PATH, the scripts run as pi-tools. A rule may not open them (rules.c), and the
 * walk never makes an agent's node there root's (walk.c). */
#define POLICY_TRUSTED_N 3
extern const char *const policy_trusted[POLICY_TRUSTED_N];
/* The trusted commands' tree that path (normalised) is or lies beneath, or NULL. */
const char *policy_path_trusted(const char *path, size_t len);

/* Index of the rule exactly at path, or -1. */
ssize_t policy_rules_find(const struct policy_rules *r, const char *path, size_t len);

/* True when some rule lies strictly beneath dir (normalised). */
bool policy_rules_has_below(const struct policy_rules *r, const char *dir, size_t len);
/* Whether a none or read rule lies strictly below directory dir. */
bool policy_rules_stricter_below(const struct policy_rules *r, const char *dir, size_t len);

const char *policy_access_name(enum policy_access a);

/* The shipped defaults (policy/defaults.json, built in). */
extern const char policy_defaults_json[];
size_t policy_defaults_json_len(void);

/* What a level puts on a node. */
enum policy_target_flags {
	POLICY_T_DEFAULT_ACL = 1 << 0, /* directory gets the group-writable default ACL */
	POLICY_T_LEAVE = 1 << 1,       /* never made more permissive: device nodes in read/write */
	POLICY_T_PINNED = 1 << 2,      /* write dir above a stricter rule: root's, sticky */
	POLICY_T_MARK = 1 << 3,	       /* closed by the walk: carries the closing mark */
	POLICY_T_KEEP_MARK = 1 << 4,   /* closed by the walk, no key to mark it: marks stay */
};
struct policy_target {
	uid_t uid; /* (uid_t)-1: keep the current owner */
	gid_t gid;
	mode_t mode; /* permission and special bits only */
	unsigned flags;
};

/* Owner/group/mode from scratch for a node of st_mode (type + current bits, used only to
 * see "executable") and st_uid, under access; secrets: the node is the secrets dir or
 * beneath it and access is none (pi-tools keeps it). */
void policy_target_for(enum policy_access access, bool secrets, mode_t st_mode, uid_t st_uid,
		       struct policy_target *ret);
/* A write-level directory on the way to a none or read rule below it (rules r, the
 * directory's path): root's and sticky (03770), so no agent can rename or remove what the
 * stricter rule protects, or the directories that lead to it, and have a later walk take
 * it for write-level content. Does nothing otherwise. */
void policy_target_pin(const struct policy_rules *r, const char *path, size_t len,
		       struct policy_target *t);

/* The default ACL of write-level directories, u::rwx,g::rwx,o::---, as the kernel stores
 * it in system.posix_acl_default (little-endian v2 header + 3 entries). */
#define POLICY_DEFAULT_ACL_SIZE 28
extern const uint8_t policy_default_acl_xattr[POLICY_DEFAULT_ACL_SIZE];

/* Permission check the kernel would make for a process of uid/gids on a node with this
 * owner, mode and access ACL (xattr bytes, or NULL/0 for none). want: bitwise 4|2|1.
 * uid 0 is not special-cased here (callers that care know root passes). */
bool policy_permits(uid_t file_uid, gid_t file_gid, mode_t mode, const void *acl, size_t acl_len,
		    uid_t uid, const gid_t *gids, size_t ngids, unsigned want);

/* --- resolving (resolve.c) --- */

/* Open the node at abs (normalised, inside the root) beneath root_fd without following a
 * symlink anywhere: openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS),
 * or component by component with O_NOFOLLOW where openat2 is missing.
 * flags: open flags (O_PATH, O_DIRECTORY…; O_CLOEXEC|O_NOFOLLOW are added). -ELOOP when
 * a component is a symlink. */
int policy_resolve(int root_fd, const char *abs, int flags, int *ret_fd);
/* Tests force the fallback (crun's check-no-openat2). */
void policy_resolve_force_fallback(bool on);
/* The first symlink on the way to abs (where policy_resolve says -ELOOP): 1 with the
 * directory that holds it (an O_PATH fd) and the link's own lstat, 0 when there is none (the
 * path resolves, is missing, or changed under the look), <0 on error. Whose the link is
 * tells who put it there; the directory is where they could write. */
int policy_first_symlink(int root_fd, const char *abs, int *ret_dir_fd, struct stat *ret_st);
/* The deepest directory on the way to abs that is there and reached without a symlink (abs
 * itself when it is one), as an O_PATH fd; with ret_link, the lstat of the name that stopped
 * the way when it is a symlink (st_mode 0 otherwise). 0 or -errno. */
int policy_deepest_dir(int root_fd, const char *abs, int *ret_fd, struct stat *ret_link);

/* --- the walk (walk.c) --- */

enum policy_mode {
	POLICY_APPLY,
	POLICY_PLAN,  /* report what apply would change; change nothing */
	POLICY_CHECK, /* report violations; change nothing */
};

enum policy_change {
	POLICY_CH_OWNER = 1 << 0,
	POLICY_CH_MODE = 1 << 1,
	POLICY_CH_ACL_ACCESS = 1 << 2,	/* strip a planted access ACL */
	POLICY_CH_ACL_DEFAULT = 1 << 3, /* strip a foreign default ACL */
	POLICY_CH_ACL_SET = 1 << 4,	/* set the write-level default ACL */
	POLICY_CH_MARK = 1 << 5,	/* leave the closing mark (user.pistis.closed) */
	POLICY_CH_UNMARK = 1 << 6,	/* take the closing mark off a node opened again */
	POLICY_CH_CAPS = 1 << 7,	/* strip file capabilities (security.capability) */
};

enum policy_event_kind {
	POLICY_EV_CHANGE,   /* apply: changed; plan: would change; check: violation */
	POLICY_EV_MISSING,  /* a rule path that is not there yet: skipped */
	POLICY_EV_SYMLINK,  /* a rule path (or a directory on the way) is a symlink: the rule
			       is not applied (error) */
	POLICY_EV_HARDLINK, /* non-directory with st_nlink > 1: left as is */
	POLICY_EV_DEVICE,   /* device node under read/write: never loosened, left as is */
	POLICY_EV_OTHER_FS, /* mount point beneath a rule: not crossed */
	/* The directory at the depth bound (error; check: a violation): made root:root 0700
	 * without ACLs (apply; plan: would be; error set when that failed), so what lies
	 * below, not walked, is unreachable for agents. */
	POLICY_EV_TOO_DEEP,
	POLICY_EV_VANISHED, /* changed or removed while walked: skipped */
	POLICY_EV_ERROR, /* a change failed (error): the node is left at most as open as before */
	POLICY_EV_NOT_DONE, /* walk stopped (timeout/error): this directory was not finished */
	/* An agent's node in /data/bin or /data/trusted (a volume's earlier life): a read or
	 * none rule would make it root's, and then trusted (on every agent's PATH, pinned by
	 * `trusted install`). Left as it is, not entered (error; check: a violation). */
	POLICY_EV_AGENTS_IN_TRUSTED,
	/* A symlink under a read or none rule whose owner is not the rule's (root; pi-tools in
	 * the secrets): made where someone could write once (a git hook -> an agent's file).
	 * Left as it is, never followed (error; check: a violation). */
	POLICY_EV_FOREIGN_SYMLINK,
	/* Under a write rule, root's or pi-tools' regular file or directory that no agent may
	 * read and that no walk of pistis's closed (no closing mark): a private file moved or
	 * made there. Left as it is, a directory not entered; tighter than the rule, so no
	 * violation, but listed by apply and check. */
	POLICY_EV_PRIVATE,
};

struct policy_event {
	enum policy_event_kind kind;
	const char *path; /* inside the root, raw bytes: escape before printing */
	size_t path_len;
	const struct policy_rule *rule;
	int error;	    /* -errno for ERROR/NOT_DONE/SYMLINK/TOO_DEEP */
	unsigned changes;   /* enum policy_change, for CHANGE, HARDLINK and TOO_DEEP */
	unsigned depth_max; /* TOO_DEEP: the walk's depth bound, in levels below the rule */
	bool violation;	    /* check: this counts as not conforming */
	uid_t old_uid, new_uid;
	gid_t old_gid, new_gid;
	mode_t old_mode, new_mode; /* type + bits */
};

struct policy_stats {
	uint64_t entries;    /* nodes looked at */
	uint64_t dirs;	     /* directories read */
	uint64_t changed;    /* nodes changed (apply) or to change (plan/check) */
	uint64_t violations; /* check: non-conforming nodes (incl. hardlinks not as the rule
				says); apply: hardlinks left so */
	uint64_t symlinks;   /* inside the walked trees: left alone */
	uint64_t skipped;    /* hardlinks, devices, mount points, vanished, missing */
	uint64_t errors;     /* changes that failed, rules not walked, unfinished directories,
				directories closed at the depth bound */
};

struct policy_walk_opts {
	enum policy_mode mode;
	unsigned max_depth;   /* 0: POLICY_DEPTH_MAX (also capped by RLIMIT_NOFILE) */
	unsigned timeout_sec; /* 0: none */
	/* Threads that walk disjoint subtrees, created and joined inside policy_walk():
	 * 0: one per CPU; 1: none; at most POLICY_WALK_THREADS_MAX either way (more only
	 * contend). Fewer when RLIMIT_NOFILE cannot hold one stack of directory fds per
	 * thread. */
	unsigned threads;
	/* Callbacks may come from any of the walk's threads, one at a time (serialised). */
	void (*on_event)(void *userdata, const struct policy_event *ev);
	/* Kinds on_event is not called for: bit (1u << kind). The stats count them anyway.
	 * An apply that lists only what needs attention skips POLICY_EV_CHANGE: a first
	 * apply changes every node, and each event is a trip through the shared lock. */
	unsigned skip_events;
	void (*on_progress)(void *userdata, const struct policy_stats *st); /* every 4096 nodes */
	/* Called once, before the first change that takes access away from anyone: stop the
	 * agents' processes (open fds survive a chmod). A negative return aborts the apply. */
	int (*before_tighten)(void *userdata);
	void *userdata;
};

/* Walk every rule's tree beneath root_fd (an O_DIRECTORY fd of the root). Returns 0 when
 * the walk ran to the end (see stats for errors and violations), -errno when it stopped
 * early (timeout: -ETIME; before_tighten failed: its error). Reports through on_event. */
int policy_walk(int root_fd, const struct policy_rules *rules, const struct policy_walk_opts *opts,
		struct policy_stats *ret_stats);

/* --- store.c --- */

/* Read and parse the rules file at path (beneath root_fd when path is absolute inside the
 * root and from_root is true: no symlink on the way, the file opened beneath its opened
 * directory; else an operator-given host path). trusted: require a root-owned regular file
 * not writable by group or others (checked on the opened fd), and with from_root its
 * directory likewise. ret_bytes (may be NULL): the very bytes parsed, for the caller to
 * free, with their length in *ret_len. */
int policy_rules_load(int root_fd, const char *path, bool from_root, bool trusted,
		      struct policy_rules **ret, char **ret_bytes, size_t *ret_len,
		      struct policy_error *err);

/* Rules must name no symlink: each rule path that exists is resolved beneath root_fd
 * without following symlinks; a symlink is an error naming the rule's line. Nor may a
 * rule's path be, or lie beneath, the root, /data, a reserved or a trusted tree reached
 * under another name (a bind mount): every directory on the way is compared by device
 * and inode (-EINVAL). */
int policy_rules_check_fs(int root_fd, const struct policy_rules *r, struct policy_error *err);

/* One apply or save at a time in a root (the CLI beside serve's policy.apply, two
 * operators): an exclusive flock on POLICY_STATE_DIR itself, tried every 50 ms for up to
 * wait_ms; a missing POLICY_STATE_DIR is made (root 0700) first, and in a root without
 * /data the root directory is locked instead. 0 with *ret_fd the lock (close it when
 * done), or -1 when the state directory is one the rules' load refuses; -EWOULDBLOCK when
 * another holds it past wait_ms; -errno. */
int policy_apply_lock(int root_fd, unsigned wait_ms, int *ret_fd);

/* What every start of an agent's command holds until the new process has the agent's uid
 * (pistisd serve's exec.start, pistisd run: spawn_opts.hold_fd), so that an apply's stop of
 * the agents' processes, made once it holds policy_apply_lock, finds every command started
 * before it, and none starts after it until the apply is done: a shared flock on
 * POLICY_STATE_DIR, not waited for. 0 with *ret_fd the lock (-1: no state directory, or
 * one the rules' load refuses, so no apply can hold it); -EWOULDBLOCK while an apply or
 * save holds it; -errno. */
int policy_apply_share(int root_fd, int *ret_fd);

/* Replace POLICY_RULES_PATH beneath root_fd with buf atomically: temp file in the same
 * directory, fsync, rename, fsync of the directory. buf must already be validated. 0; or
 * an errno > 0: replaced (every reader gets the new file), but the directory's fsync failed
 * with it, so a crash may yet bring back the old one; or -errno: nothing replaced. */
int policy_rules_save(int root_fd, const char *buf, size_t len);

/* --- explain.c --- */

struct policy_explain {
	const struct policy_rule *rule; /* NULL: no rule names it, or it is reserved */
	const char *reserved;		/* the tree of pistis's own it lies in, or NULL */
	bool exists;
	bool symlink_on_way; /* a component (or the node) is a symlink: stopped there */
	char stop_at[POLICY_PATH_MAX + 1]; /* the component where resolution stopped */
	struct stat st;			   /* when exists */
	bool has_acl, has_default_acl;
	struct policy_target target; /* when exists and a rule decides */
	bool target_hardlink_left;
	/* Root's or pi-tools' private node under a write rule that no walk closed: apply
	 * leaves it as is (POLICY_EV_PRIVATE). */
	bool target_private_left;
	/* For an agent (when asked): */
	bool agent;
	bool can_traverse; /* every directory on the way allows search */
	bool can_read, can_write;
	bool can_replace; /* the agent can rename/unlink the node, or a directory on its way,
			   * and so put its own in its place */
	char blocked_by[POLICY_PATH_MAX + 1];  /* first directory that stops traversal */
	char replace_via[POLICY_PATH_MAX + 1]; /* the highest such node ("" if none) */
	/* A mount point below the rule's own path on the way to (or at) the node: apply does
	 * not cross it, so the node keeps what it has. */
	char mount_at[POLICY_PATH_MAX + 1];
	/* A directory on the way (below or at a write rule's path) that apply leaves as it is
	 * and does not enter, root's or pi-tools' private one (POLICY_EV_PRIVATE): the node
	 * keeps what it has. */
	char private_at[POLICY_PATH_MAX + 1];
};

/* path: normalised absolute path inside the root. uid/gids: the agent's credentials
 * (uid (uid_t)-1: no agent). */
int policy_explain(int root_fd, const struct policy_rules *rules, const char *path, uid_t uid,
		   const gid_t *gids, size_t ngids, struct policy_explain *ret);
