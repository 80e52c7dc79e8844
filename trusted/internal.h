#pragma once

/* Helpers shared by the files of trusted/ (not part of its interface). */

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Open a directory beneath dir_fd component by component, never following a symlink
 * (O_NOFOLLOW on every step). With create, missing components are made with mode/uid/gid.
 * Each existing component must be root-owned and not writable by group or others; the last
 * one must be owned by uid and not group/other writable, or, with fix, is set to exactly
 * uid:gid mode. */
int trusted_open_dir(int dir_fd, const char *rel, bool create, mode_t mode, uid_t uid, gid_t gid,
		     bool fix, int *ret_fd);

/* Write data to dir_fd/name atomically: a temporary ".name.XXXXXX" (ignored by sudo's
 * includedir), fchown/fchmod, fsync, renameat. With keep_tmp the file stays under its
 * temporary name and that name is returned in ret_tmp (size >= NAME_MAX). */
int trusted_write_file(int dir_fd, const char *name, const void *data, size_t len, mode_t mode,
		       bool keep_tmp, char *ret_tmp, size_t tmp_size);

/* Read a small regular file beneath dir_fd (no symlinks); -EFBIG above max. */
int trusted_read_file(int dir_fd, const char *name, size_t max, char **ret, size_t *ret_len);

/* Resolve rel inside the root the way the root itself sees it (symlinks resolved within
 * the root: openat2 RESOLVE_IN_ROOT, or a no-symlink walk where openat2 is missing). */
int trusted_open_in_root(int root_fd, const char *rel, int flags, int *ret_fd);
