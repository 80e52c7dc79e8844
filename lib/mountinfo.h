#pragma once

/* /proc/PID/mountinfo, one line at a time (proc(5)):
 *   id parent maj:min root mount-point mount-opts [optional…] - fstype source super-opts
 * Used by pistisd-entry (which trees to harden) and `pistisd check` (how /proc and the
 * write trees are mounted). Pure except mountinfo_read(). */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A container with thousands of mounts stays far below this. */
#define MOUNTINFO_MAX_BYTES (8u << 20)

struct mountinfo_entry {
	unsigned id, parent;
	const char *root;	 /* within its filesystem, \ooo escapes undone */
	const char *mount_point; /* relative to the reader's root, escapes undone */
	const char *mount_opts;	 /* per-mount: "rw,nosuid,nodev,relatime" */
	const char *fstype;
	const char *source;	/* escapes undone */
	const char *super_opts; /* per-superblock: "rw,hidepid=invisible" */
};

/* Parses one line (without its '\n') in place: fields are NUL-terminated and unescaped inside
 * LINE, and *ret points into it. 0, or -EINVAL for a line that is not mountinfo. */
int mountinfo_parse_line(char *line, struct mountinfo_entry *ret);

/* Is option NAME in the comma-separated OPTS? If so and ret_value is not NULL, *ret_value
 * points at its value (after '=', "" when it has none) and *ret_len is the value's length. */
bool mountinfo_opt(const char *opts, const char *name, const char **ret_value, size_t *ret_len);

/* Is PATH at MOUNT_POINT or beneath it? "/" holds everything; "/a" holds "/a/b", not "/ab".
 * Both must be absolute and normalised (no "//", ".", "..", trailing '/'). */
bool mountinfo_path_under(const char *path, const char *mount_point);

/* Reads /proc/self/mountinfo (at most MOUNTINFO_MAX_BYTES) into a malloc'd, NUL-terminated
 * buffer. 0 or -errno (-EFBIG when larger). */
int mountinfo_read(char **ret);

/* The same of NAME beneath proc_fd (an open /proc): "self/mountinfo", "PID/mountinfo".
 * Unlike /proc/PID/root or ns/mnt, another process's mountinfo needs no ptrace access. */
int mountinfo_read_at(int proc_fd, const char *name, char **ret);

/* The mount ids (each line's first field) of a mountinfo TEXT, sorted, in a malloc'd array
 * (NULL when there are none). 0 or -errno. */
int mountinfo_ids(const char *text, unsigned **ret, size_t *ret_n);

/* Whether TEXT (another process's mountinfo) lists mounts and none of them is one of OURS
 * (n_ours sorted ids, from mountinfo_ids): a mount belongs to one mount namespace and its
 * id is unique on the machine, so that process lives in a mount namespace of its own
 * (another container's, in a PID namespace shared with it). An empty TEXT (a process
 * chrooted where no mount is) tells nothing: false. */
bool mountinfo_ids_disjoint(const char *text, const unsigned *ours, size_t n_ours);

/* Our own mount ids, read from proc_fd's self/mountinfo on first use by
 * mountinfo_pid_elsewhere and kept until mountinfo_ours_done. Zero-initialised. */
struct mountinfo_ours {
	bool read;
	unsigned *ids;
	size_t n;
};

/* Whether process pid provably lives in another mount namespace than ours: its mountinfo
 * (beneath proc_fd, an open /proc; readable without ptrace access, unlike its root or
 * ns/mnt) lists mounts and none of ours. False when that cannot be told (either file
 * unreadable, no mounts listed, the process gone). */
bool mountinfo_pid_elsewhere(int proc_fd, struct mountinfo_ours *ours, pid_t pid);
void mountinfo_ours_done(struct mountinfo_ours *ours);
