#pragma once

/* Helpers shared by the files of trusted/ (not part of its interface). */

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Open a directory beneath dir_fd component by component, never following a symlink
 * (O_NOFOLLOW on every step). With create, missing components are made with mode/uid/gid.
 * Each existing component must be root-owned and not writable by group or others; the last
 * one must be owned by uid and not group/other writable, or, with fix, when it is root's or
 * uid's, is set to exactly uid:gid mode without ACLs (anyone else's: -EPERM). */
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

/* Resolve the absolute path inside the root as the kernel would (symlinks followed, within
 * the root), checking every directory passed through: root-owned and writable by no one
 * else (group/other bits, which hold an ACL's mask), so nobody else can swap what it holds.
 * The last component must be a regular file, root's and writable by root alone; it is
 * opened for reading into *ret_fd. want_dir: it must be a directory, root's alone, and
 * nothing is opened (-ENOTDIR for anything else). ret_resolved (PATH_MAX bytes, may be
 * NULL): the path with every symlink and ".." resolved, as /proc/self/exe would show it.
 * 0, 1 with why (refused), -ENOENT when it does not exist (the directories before it
 * checked, so the nearest existing parent of a missing one is root's alone), -errno. */
int trusted_chain_walk(int root_fd, const char *path, bool want_dir, int *ret_fd,
		       char *ret_resolved, char *why, size_t why_size);

/* Cut an absolute path to its directory, in place: "/a/b" -> "/a", "/a" -> "/". */
static inline void trusted_path_to_dir(char *path)
{
	char *slash = strrchr(path, '/');

	slash[slash == path] = '\0';
}

/* The libraries the dynamic loader maps into an ELF program (or nothing, for anything
 * else): fd the opened file, or fd -1 and buf/len the whole file; origin the directory
 * $ORIGIN stands for; has_interp: the program has a PT_INTERP, so the loader runs and reads
 * /etc/ld.so.preload. 0 when all of it is root's alone, 1 with "WHAT: reason" in why. */
int trusted_elf_libs_check(int root_fd, const char *what, int fd, const void *buf, size_t len,
			   const char *origin, bool has_interp, char *why, size_t why_size);
