#pragma once

/* A small secret kept in a file of root's: random bytes made once, read back exactly.
 * Used for the closing mark's key (/data/pistis/mark.key: docs/policy.md). */

#include <stddef.h>

/* Read name in dir_fd into buf: a regular file (not followed if a link), root's, with no
 * bit for group or others, of exactly size bytes. 0, -ENOENT when there is none,
 * -EBADMSG when it is not such a file, -errno. */
int key_file_read(int dir_fd, const char *name, void *buf, size_t size);

/* The same, after making it when there is none: size random bytes written under a
 * temporary name, flushed, then linked to name (link never replaces: of two makers one
 * file wins and both read it), and the directory flushed. 0 or -errno; a file that is
 * there but not such a file is never replaced (-EBADMSG). */
int key_file_ensure(int dir_fd, const char *name, size_t size);
