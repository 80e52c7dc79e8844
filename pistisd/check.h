#pragma once

/* `pistisd check`: what the kernel and the image provide that pistis's promises rely on.
 *
 * check_run() probes (pistisd/check.c: syscalls, /proc/sys, a walk of the image); everything
 * else here is pure (pistisd/check-report.c): names, the opt-out list, the verdict and the
 * two output formats, so the daemon can run the same probes at start-up and refuse to start
 * on the same verdict. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "lib/escape.h"

enum check_id {
	CHECK_CAPABILITIES,
	CHECK_SECCOMP,
	CHECK_LANDLOCK,
	CHECK_OPENAT2,
	CHECK_CLOSE_RANGE,
	CHECK_PIDFD,
	CHECK_CGROUP2,
	CHECK_CGROUP_CONTROLLERS,
	CHECK_USERNS,
	CHECK_PROTECTED_HARDLINKS,
	CHECK_PROTECTED_SYMLINKS,
	CHECK_PROTECTED_REGULAR,
	CHECK_PROTECTED_FIFOS,
	CHECK_STICKY_SHARED,
	CHECK_YAMA_PTRACE,
	CHECK_TIOCSTI,
	CHECK_USERFAULTFD,
	CHECK_PERF_EVENT,
	CHECK_DMESG_RESTRICT,
	CHECK_SUDO,
	CHECK_SUDO_CVES,
	CHECK_VISUDO,
	CHECK_SETUID_FILES,
	CHECK_SUID_DUMPABLE,
	CHECK_CORE_PATTERN,
	CHECK_PROC_HIDEPID,
	CHECK_NOSUID_DATA,
	CHECK_NOSUID_WORKSPACES,
	CHECK_NOSUID_SHARED,
	CHECK_MOUNT_POINTS,
	CHECK_AGENT_WRITABLE,
	CHECK_ACCOUNT_FILES,
	CHECK_OOM_FLOOR,
	CHECK_DATA_STATE,
	CHECK_DATA_BIN,
	CHECK_TRUSTED_CAPS,
	CHECK_ORCHESTRATOR_SECRETS,
	CHECK_DEV_NODES,
	CHECK_HOST_NAMESPACES,
	CHECK_SHARED_PID_NS,
	CHECK_NSS_SOURCES,
	CHECK_ID_MAP,
	CHECK_PISTISD_BINARY,
	_CHECK_MAX,
};

enum check_status {
	CHECK_STATUS_OK,
	CHECK_STATUS_WARN,    /* works, with a weaker guarantee or a fallback */
	CHECK_STATUS_MISSING, /* the feature is not there */
	CHECK_STATUS_FAIL,    /* there, but set in a way that breaks a promise */
	_CHECK_STATUS_MAX,
};

/* Opt-outs: a bit per check_id, set by `--allow NAME` or PISTIS_ALLOW=name,name. */
typedef uint64_t check_mask_t;
#define CHECK_BIT(id) ((check_mask_t)1 << (id))

struct check_result {
	enum check_status status;
	char value[512]; /* what was found, e.g. "1", "ABI 4", "absent (ENOSYS)" */
	bool text;	 /* value is text with its names escaped already (check_set_text) */
};

struct check_suid {
	char *path; /* as seen inside the root, '/'-separated; display only */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	bool caps; /* file capabilities (security.capability): lifts like a setuid bit */
};

#define CHECK_SUID_MAX 1024u	 /* entries listed; more are counted, not kept */
#define CHECK_WALK_MAX_DEPTH 64u /* directory fds open at once */
#define CHECK_WALK_MAX_NODES 2000000u
#define CHECK_WALK_MAX_SECONDS 20u

struct check_report {
	char *root; /* the image root the image-side checks looked at */
	struct check_result results[_CHECK_MAX];
	struct check_suid *suid;
	size_t n_suid;		/* kept in suid[] */
	size_t n_suid_all;	/* found, including those over CHECK_SUID_MAX */
	bool walk_truncated;	/* stopped at the entry or time limit: incomplete */
	size_t walk_too_deep;	/* branches not entered: deeper than CHECK_WALK_MAX_DEPTH */
	size_t walk_agent_dirs; /* agents' own directories: noted, not entered */
	/* Directories of the image agents may write on a mount that honours setuid (found
	 * by the setuid walk): the first CHECK_WRITABLE_SHOWN as text, each path quoted and
	 * escaped (agents chose some of their names), comma-separated; and how many in all. */
#define CHECK_WRITABLE_SHOWN 4
#define CHECK_WRITABLE_PATH_SHOWN 64 /* escaped bytes of each; a longer one is cut, marked */
	char writable[CHECK_WRITABLE_SHOWN * (CHECK_WRITABLE_PATH_SHOWN + ESCAPE_QUOTE_EXTRA + 2)];
	size_t n_writable;
	check_mask_t allowed;
};

enum {
	CHECK_SKIP_SETUID_WALK = 1 << 0,
};

/* Where trusted commands are configured (agents then run without no_new_privs); the nosuid
 * checks are hard failures there and warnings elsewhere. */
#define CHECK_TRUSTED_SUDOERS "/etc/sudoers.d/pistis-trusted"

/* The verdict of the hidepid check from /proc's superblock options ("rw,hidepid=invisible"):
 * ok for invisible/2 and ptraceable/4, warn otherwise. Writes what was found to value. */
enum check_status check_hidepid_status(const char *super_opts, char *value, size_t size);

/* Whether a sudo whose `sudo -V` first line is version may have CVE-2025-32463 (the chroot
 * before the policy: upstream 1.9.14 to 1.9.17, fixed in 1.9.17p1); true for a line with
 * no version that can be read (the probe then asks it). */
bool check_sudo_may_chroot_first(const char *version);

/* Probe everything. root: "/" or an image root (only the image-side checks, sudo, visudo
 * and the setuid inventory, look there; kernel checks always describe the running kernel).
 * Returns 0 or -errno (only for failures to probe at all: out of memory, root unopenable). */
int check_run(const char *root, unsigned flags, struct check_report **ret);
void check_report_free(struct check_report *r);
/* Only the walk of the image at root: the setuid inventory (suid[], n_suid_all) and the
 * directories agents may write without nosuid (writable, n_writable). */
int check_walk(const char *root, struct check_report **ret);

/* Pure helpers (check-report.c). */
const char *check_name(enum check_id id);
int check_from_name(const char *name); /* enum check_id or -EINVAL */
bool check_is_hard(enum check_id id);
const char *check_promise(enum check_id id);
const char *check_advice(enum check_id id);
const char *check_status_to_string(enum check_status s);

/* Parse "name,name" (commas or whitespace) into *mask (OR-ed in). On an unknown name
 * returns -EINVAL and points *ret_bad at it (inside list) with its length in *ret_bad_len. */
int check_allow_parse(const char *list, check_mask_t *mask, const char **ret_bad,
		      size_t *ret_bad_len);

/* The first hard requirement that does not hold and is not allowed, or -1 when all hold. */
int check_first_failure(const struct check_report *r);

/* Set a result (value printf-formatted, truncated to fit). The value is raw: the report
 * escapes it where it prints it. */
void check_set(struct check_report *r, enum check_id id, enum check_status status, const char *fmt,
	       ...) __attribute__((format(printf, 4, 5)));
/* Set a result to a reason that is text already, its names escaped once (a trusted/ why):
 * printed as it is, never escaped a second time; cut with a mark where it does not fit. */
void check_set_text(struct check_report *r, enum check_id id, enum check_status status,
		    const char *text);
/* A result's value as text for a log line's %-s: a text value as it is, a raw one escaped
 * once (as %s would) into buf. */
const char *check_value_text(const struct check_result *res, char *buf, size_t size);

int check_report_add_suid(struct check_report *r, const char *path, mode_t mode, bool caps,
			  uid_t uid, gid_t gid);
struct check_report *check_report_new(const char *root);

void check_format_text(const struct check_report *r, FILE *f);
void check_format_json(const struct check_report *r, FILE *f);
