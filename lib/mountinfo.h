#pragma once

/* /proc/PID/mountinfo, one line at a time (proc(5)):
 *   id parent maj:min root mount-point mount-opts [optional…] - fstype source super-opts
 * Used by pistisd-entry (which trees to harden) and `pistisd check` (how /proc and the
 * write trees are mounted). Pure except mountinfo_read(). */

#include <stdbool.h>
#include <stddef.h>

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
