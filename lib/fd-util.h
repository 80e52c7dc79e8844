#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>

/* One record of getdents64(2) as the kernel writes it (libc's struct dirent has libc's
 * layout): for the walks that list a directory into a buffer of their own. */
struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Read until count bytes or EOF; retries EINTR and short reads.
 * Returns bytes read (< count only at EOF) or -errno. */
ssize_t loop_read(int fd, void *buf, size_t count);

/* Write all of buf; retries EINTR and short writes. Returns 0 or -errno. */
int loop_write(int fd, const void *buf, size_t count);

/* Read a whole (small) file from an open fd into a NUL-terminated malloc'd buffer;
 * -EFBIG when it holds more than max bytes. */
int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len);
/* The same, starting with a buffer for size_hint bytes (e.g. fstat's st_size), so a file
 * of the expected size is read into one allocation. */
int fd_read_all_hint(int fd, size_t max, size_t size_hint, char **ret, size_t *ret_len);
/* The same with another allocator: realloc (NULL allocates) grows the buffer, free drops it
 * on failure; the result is the caller's to free with it. */
struct fd_allocator {
	void *(*realloc)(void *p, size_t n);
	void (*free)(void *p);
};
int fd_read_all_with(int fd, size_t max, size_t size_hint, const struct fd_allocator *a, char **ret,
		     size_t *ret_len);

/* Open dir_fd's entry name for reading, never through a symlink (-ELOOP), never blocking
 * on a FIFO or taking a terminal: -EBADFD unless the opened fd is a regular file. Its
 * fstat in *ret_st. */
int fd_open_regular(int dir_fd, const char *name, struct stat *ret_st, int *ret_fd);

/* close_range(first, ~0U, 0) with a fallback over /proc/self/fd for old kernels. */
int close_all_fds_from(int first);

/* /dev/null, opened as root may open it: not through a link (-ELOOP), without blocking (a
 * FIFO there; the fd keeps O_NONBLOCK), and only the null device itself, character device
 * 1:3 (-ENODEV otherwise: a file, a FIFO, another device). runc CVE-2025-31133: a
 * container's /dev/null swapped for a link before the runtime used it. flags: O_RDONLY or
 * O_RDWR, O_CLOEXEC. Returns the fd or -errno. */
int fd_open_null(int flags);

/* Make fd 0, 1, 2 exist (opened on /dev/null) so a later open cannot land on them.
 * -ENODEV when /dev/null is not the null device (a symlink, a file, a FIFO). */
int fd_ensure_std(void);

int fd_set_cloexec(int fd, int on);
int fd_set_nonblock(int fd, int on);

/* flock(fd, LOCK_EX), polled every 50 ms for at most wait_ms (0: one try), so that a
 * caller with an event loop or a deadline never blocks unbounded on another holder.
 * Returns 0, -EWOULDBLOCK when the wait ran out, or -errno. */
int fd_flock_wait(int fd, unsigned wait_ms);

/* Whether fds a and b are open on the same file (device and inode: `2>&1`, one terminal,
 * one pipe); false where either cannot be fstat'ed. */
bool fd_same_file(int a, int b);

/* Whether a node is root's and writable by no one else: not by others, by its group only
 * when the group is root's (images made for arbitrary uids have `chmod g=u /etc/passwd`)
 * and then with no access ACL (whose mask the group bits then are: a named entry may be an
 * agent's). st: of name in dfd ("": of dfd itself, an O_PATH fd included). Where /proc
 * cannot tell, a group-writable node is not believed. The rule for what a root program
 * believes that others set up: /etc and its passwd family (sandbox-users, pistisd check),
 * a CA bundle or the relay's socket and every directory on the way (lib/trust-path.c). */
bool root_only_writable_at(int dfd, const char *name, const struct stat *st);

/* The xattr names of a node's access and default ACLs. */
#define XATTR_ACL_ACCESS "system.posix_acl_access"
#define XATTR_ACL_DEFAULT "system.posix_acl_default"
extern const char *const fd_acl_xattrs[2];

/* Removes fd's access and default ACLs through the fd (none there, or a file system
 * without them, is fine). *ret_removed (optional): bit i set when fd_acl_xattrs[i] was
 * there and is gone. 0, or -errno of the removal that failed. */
int fd_remove_acls(int fd, unsigned *ret_removed);

/* The name of the first ACL fd carries (fd_acl_xattrs: access, then default), or NULL
 * when it has none (a file system without them: NULL). */
const char *fd_has_acl(int fd);

/* Raise RLIMIT_NOFILE's soft limit to want, at most the hard limit (a long-running server
 * whose soft limit is Docker's and containerd's 1024); never lowers it. *ret_now is the soft
 * limit in force afterwards (0 when it cannot be read). 0, or -errno when the raise failed. */
int fd_limit_raise(rlim_t want, rlim_t *ret_now);
