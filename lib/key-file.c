#include "lib/key-file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"

#define KEY_FILE_MAX 256

int key_file_read(int dir_fd, const char *name, void *buf, size_t size)
{
	_cleanup_close_ int fd =
		openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return errno == ELOOP ? -EBADMSG : negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077) ||
	    st.st_size != (off_t)size)
		return -EBADMSG;
	n = pread(fd, buf, size, 0);
	if (n < 0)
		return negative_errno();
	return (size_t)n == size ? 0 : -EBADMSG;
}

int key_file_ensure(int dir_fd, const char *name, size_t size)
{
	_cleanup_close_ int fd = -1;
	uint8_t fresh[KEY_FILE_MAX], back[KEY_FILE_MAX];
	char tmp[64];
	uint32_t rnd;
	int r;

	if (size > KEY_FILE_MAX)
		return -EINVAL;
	r = key_file_read(dir_fd, name, back, size);
	if (r != -ENOENT)
		goto out;
	if (getrandom(fresh, size, 0) != (ssize_t)size ||
	    getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	snprintf(tmp, sizeof(tmp), ".%.32s.%08x.tmp", name, rnd);
	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = negative_errno();
		goto out;
	}
	r = loop_write(fd, fresh, size);
	if (r >= 0)
		r = RET_NERRNO(fchown(fd, 0, 0));
	if (r >= 0)
		r = RET_NERRNO(fchmod(fd, 0600)); /* whatever the umask */
	if (r >= 0)
		r = RET_NERRNO(fsync(fd));
	if (r >= 0 && linkat(dir_fd, tmp, dir_fd, name, 0) < 0 && errno != EEXIST)
		r = negative_errno();
	(void)unlinkat(dir_fd, tmp, 0);
	if (r >= 0)
		r = RET_NERRNO(fsync(dir_fd));
	if (r >= 0)
		r = key_file_read(dir_fd, name, back, size);
out:
	explicit_bzero(fresh, sizeof(fresh));
	explicit_bzero(back, sizeof(back));
	return r;
}
