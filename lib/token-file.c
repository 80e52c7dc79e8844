#include "lib/token-file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/trust-path.h"

static int refuse(char *buf, size_t size, struct token_file_info *info, int r, const char *why)
{
	explicit_bzero(buf, size);
	info->why = why;
	return r;
}

/* What the walk to the file (lib/trust-path.c) refused, as a phrase after the file's name;
 * the directory or link at fault in info->dir. NULL: the errno says it. */
static const char *fault_why(const struct trust_fault *f, struct token_file_info *info)
{
	switch (f->kind) {
	case TRUST_FAULT_DIR:
		snprintf(info->dir, sizeof(info->dir), "%s", f->node);
		return "is in a directory that someone besides root may change";
	case TRUST_FAULT_LINK:
		snprintf(info->dir, sizeof(info->dir), "%s", f->node);
		return "is reached through a symbolic link that is not root's";
	case TRUST_FAULT_LOOP:
		return "is reached through more than 40 symbolic links (a loop?)";
	case TRUST_FAULT_LEAF_LINK_OWNER:
		return "is a symbolic link that is not root's, or in a directory that is not";
	case TRUST_FAULT_LEAF_LINK_DIR:
		return "is a symbolic link in a directory others may write";
	case TRUST_FAULT_LEAF_LINK_OUT:
		return "is a symbolic link that leaves its directory or ends in another";
	case TRUST_FAULT_ERRNO:
	case TRUST_FAULT_NAME:
	case TRUST_FAULT_MISSING:
	default:
		return NULL;
	}
}

int token_file_read(const char *path, const struct token_file_rule *rule, char *buf, size_t size,
		    size_t *ret_len, struct token_file_info *ret_info)
{
	const struct trust_rule walk = {
		.also_owner = rule->also_owner,
		.flags = TRUST_STICKY | TRUST_RDONLY_MOUNT | TRUST_LEAF_LINK_BENEATH,
	};
	_cleanup_close_ int dfd = -1, fd = -1;
	char leaf[NAME_MAX + 1];
	struct trust_fault f;
	struct stat st;
	ssize_t n;
	size_t len;

	*ret_info = (struct token_file_info){.uid = (uid_t)-1};
	if (size < 2)
		return -EINVAL;
	dfd = trust_path_open(path, &walk, leaf, &f);
	if (dfd < 0)
		return refuse(buf, size, ret_info, dfd, fault_why(&f, ret_info));
	/* O_NONBLOCK: a FIFO in the file's place would block open(2) until a writer came;
	 * with it the open returns and fstat refuses the FIFO. A link now where the walk
	 * found none (a race) is refused by O_NOFOLLOW. */
	fd = openat(dfd, leaf, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return refuse(buf, size, ret_info, -errno,
			      errno == ELOOP ? "is a symbolic link" : NULL);
	if (fstat(fd, &st) < 0)
		return refuse(buf, size, ret_info, -errno, NULL);
	ret_info->uid = st.st_uid;
	ret_info->mode = st.st_mode & 07777;
	if (!S_ISREG(st.st_mode))
		return refuse(buf, size, ret_info, -EPERM, "is not a regular file");
	if (st.st_uid != 0 && (rule->also_owner == (uid_t)-1 || st.st_uid != rule->also_owner))
		return refuse(buf, size, ret_info, -EPERM,
			      rule->also_owner == (uid_t)-1 || rule->also_owner == 0
				      ? "is not owned by root"
				      : "is owned by someone else");
	if (st.st_mode & rule->forbidden)
		return refuse(buf, size, ret_info, -EPERM, "can be accessed by group or others");
	/* size bytes asked: reading them all means the file is too long for the token. */
	n = loop_read(fd, buf, size);
	if (n < 0)
		return refuse(buf, size, ret_info, (int)n, NULL);
	if ((size_t)n == size)
		return refuse(buf, size, ret_info, -EFBIG, "is too long");
	len = (size_t)n;
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	if (len == 0)
		return refuse(buf, size, ret_info, -EINVAL, "is empty");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c == 0)
			return refuse(buf, size, ret_info, -EINVAL, "holds a NUL byte");
		if (c == ' ')
			return refuse(buf, size, ret_info, -EINVAL, "holds a space");
		if (c < ' ' || c > '~')
			return refuse(buf, size, ret_info, -EINVAL,
				      "holds a control or non-ASCII byte");
	}
	explicit_bzero(buf + len, size - len); /* the trimmed CR/LF and anything past it */
	*ret_len = len;
	return 0;
}

int token_file_load(const char *path, const struct token_file_rule *rule, char *buf, size_t size,
		    size_t *ret_len)
{
	struct token_file_info info;
	int r = token_file_read(path, rule, buf, size, ret_len, &info);

	if (r == -ELOOP)
		return log_error_errno(r,
				       "Token file '%s' %s: name the file itself, or a link beside "
				       "it that stays in its directory (as a Kubernetes Secret's)",
				       path, info.why ? info.why : "is a symbolic link");
	if (r == -EPERM && info.dir[0])
		return log_error_errno(
			r,
			"Token file '%s' %s (%s): every directory above it must be "
			"owned by root%s and not group- or other-writable, unless "
			"sticky or on a read-only mount",
			path, info.why, info.dir,
			rule->also_owner != (uid_t)-1 && rule->also_owner != 0 ? " or you" : "");
	if (r == -EPERM)
		return log_error_errno(
			r, "Token file '%s' %s: it must be %s (found uid %d, mode %04o)", path,
			info.why, rule->file_rule, (int)info.uid, (unsigned)info.mode);
	if (r < 0 && info.why && rule->min_len)
		return log_error_errno(r,
				       "Token file '%s' %s: it must hold one line of %zu to %zu "
				       "printable characters without spaces",
				       path, info.why, rule->min_len, size - 1);
	if (r < 0 && info.why)
		return log_error_errno(r,
				       "Token file '%s' %s: it must hold one line of at most %zu "
				       "printable characters without spaces",
				       path, info.why, size - 1);
	if (r < 0)
		return log_error_errno(r, "Cannot read token file '%s': %m", path);
	if (*ret_len < rule->min_len) {
		explicit_bzero(buf, size);
		return log_error_errno(-EINVAL, "Token in '%s' is shorter than %zu characters",
				       path, rule->min_len);
	}
	return 0;
}
