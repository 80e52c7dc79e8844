#pragma once

/* Helpers shared by walk.c and explain.c (not part of the library's interface). */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define POLICY_XATTR_ACL_ACCESS "system.posix_acl_access"
#define POLICY_XATTR_ACL_DEFAULT "system.posix_acl_default"

/* "/proc/self/fd/N": the magic link reaches exactly the inode behind fd (an O_PATH fd
 * included), never a name that could be swapped. */
#define POLICY_PROC_FD_MAX 32
const char *policy_proc_fd(int fd, char buf[POLICY_PROC_FD_MAX]);

/* Read an xattr of the inode behind fd (opath: an O_PATH fd). Returns its length,
 * -ENODATA when absent, -errno. */
ssize_t policy_getxattr_fd(int fd, bool opath, const char *name, void *buf, size_t size);
