#pragma once

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _noreturn_ __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_ __attribute__((warn_unused_result))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Hand a pointer or fd over to the caller and disarm the cleanup. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _p_ = (p);                                                           \
		(p) = NULL;                                                                        \
		_p_;                                                                               \
	})
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _fd_ = (fd);                                                                   \
		(fd) = -1;                                                                         \
		_fd_;                                                                              \
	})

/* close() that keeps errno and never retries: on Linux the fd is gone even on EINTR. */
static inline int safe_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		(void)close(fd);
		errno = saved;
	}
	return -1;
}

static inline void freep(void *p)
{
	free(*(void **)p);
}
static inline void closep(int *fd)
{
	safe_close(*fd);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* -errno from the last failing libc call, never 0 (a failure that forgot errno is still a failure). */
static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EINVAL;
}

#define RET_NERRNO(expr)                                                                           \
	({                                                                                         \
		long _r_ = (long)(expr);                                                           \
		_r_ < 0 ? negative_errno() : (int)_r_;                                             \
	})

/* The last component of a path: what follows its last '/', or the whole of it. */
static inline const char *path_tail(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}
