#include "lib/token-file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"

static int refuse(char *buf, size_t size, struct token_file_info *info, int r, const char *why)
{
	explicit_bzero(buf, size);
	info->why = why;
	return r;
}

static bool owner_ok(uid_t uid, const struct token_file_rule *rule)
{
	return uid == 0 || (rule->also_owner != (uid_t)-1 && uid == rule->also_owner);
}

/* A directory the token's path passes through may be changed by no one but root (or
 * also_owner): owned by one of them, and not group- or other-writable unless sticky (no one
 * else can then rename or remove what root put there) or on a read-only mount (a
 * Kubernetes Secret volume, group-writable for an fsGroup). Otherwise whoever may write it
 * could move another of root's files into the token's place (a hard link to a root-only
 * file, where fs.protected_hardlinks is off) or a whole directory of their choosing. */
static bool dir_trusted(int fd, const struct token_file_rule *rule)
{
	struct stat st;
	struct statfs fs;

	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || !owner_ok(st.st_uid, rule))
		return false;
	return !(st.st_mode & 022) || (st.st_mode & S_ISVTX) ||
	       (fstatfs(fd, &fs) == 0 && (fs.f_flags & ST_RDONLY));
}

/* Opens the directory that holds path's last component, one component at a time from /
 * (from the working directory's own absolute name for a relative path), each checked by
 * dir_trusted, and a symbolic link among them followed only when root's (or also_owner's).
 * The file is then opened beneath the returned fd: the chain checked is the chain used.
 * *ret_base points into path at the last component; *dir_buf names a directory found
 * wanting in *why. */
static int open_parent_checked(const char *path, const struct token_file_rule *rule,
			       const char **ret_base, char *dir_buf, size_t dir_size,
			       const char **why)
{
	char abs[PATH_MAX], *save = NULL, *comp, *next;
	const char *slash = strrchr(path, '/');
	_cleanup_close_ int dfd = -1;
	size_t n;

	*ret_base = slash ? slash + 1 : path;
	if (path[0] == '/') {
		n = (size_t)snprintf(abs, sizeof(abs), "%.*s", (int)(*ret_base - path), path);
	} else {
		if (!getcwd(abs, sizeof(abs)))
			return negative_errno();
		n = strlen(abs);
		n += (size_t)snprintf(abs + n, sizeof(abs) - n, "/%.*s", (int)(*ret_base - path),
				      path);
	}
	if (n >= sizeof(abs))
		return -ENAMETOOLONG;
	snprintf(dir_buf, dir_size, "/");
	dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	*why = "is in a directory that someone besides root may change";
	if (!dir_trusted(dfd, rule))
		return -EPERM;
	for (comp = strtok_r(abs, "/", &save); comp; comp = next) {
		struct stat lst;
		size_t used;
		int fd;

		next = strtok_r(NULL, "/", &save);
		if (strcmp(comp, ".") == 0)
			continue;
		if (fstatat(dfd, comp, &lst, AT_SYMLINK_NOFOLLOW) < 0)
			return negative_errno();
		used = strlen(dir_buf);
		snprintf(dir_buf + used, dir_size - used, "%s%s", used > 1 ? "/" : "", comp);
		if (S_ISLNK(lst.st_mode) && !owner_ok(lst.st_uid, rule)) {
			*why = "is reached through a symbolic link that is not root's";
			return -EPERM;
		}
		fd = openat(dfd, comp, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return negative_errno();
		safe_close(dfd);
		dfd = fd;
		if (!dir_trusted(dfd, rule))
			return -EPERM;
	}
	*why = NULL;
	dir_buf[0] = '\0';
	return TAKE_FD(dfd);
}

/* path's last component is a symbolic link. A Kubernetes Secret volume's files are such
 * links into a timestamped directory beside them (token -> ..data/token, ..data ->
 * ..2026_12_02_...): one is followed, only within its own directory (openat2
 * RESOLVE_BENEATH, no magic links, no other mount, the last component no link again), and
 * only where the link and that directory are root's (or also_owner's) and no one else may
 * change them (the directory not group- or other-writable, or on a read-only mount). The
 * file reached is then judged as any other. *why says what was wrong. */
static int open_link_beneath(int dfd, const char *base, const struct token_file_rule *rule,
			     int *ret_fd, const char **why)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	char target[PATH_MAX];
	struct stat dst, lst;
	struct statfs fs;
	ssize_t n;
	int fd;

	*why = "is a symbolic link";
	if (fstat(dfd, &dst) < 0 || fstatat(dfd, base, &lst, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (!S_ISLNK(lst.st_mode))
		return -ELOOP;
	if (!owner_ok(lst.st_uid, rule) || !owner_ok(dst.st_uid, rule)) {
		*why = "is a symbolic link that is not root's, or in a directory that is not";
		return -ELOOP;
	}
	if ((dst.st_mode & 022) && !(fstatfs(dfd, &fs) == 0 && (fs.f_flags & ST_RDONLY))) {
		*why = "is a symbolic link in a directory others may write";
		return -ELOOP;
	}
	n = readlinkat(dfd, base, target, sizeof(target) - 1);
	if (n < 0)
		return negative_errno();
	target[n] = '\0';
	fd = (int)syscall(SYS_openat2, dfd, target, &how, sizeof(how));
	if (fd < 0) {
		if (errno == EXDEV || errno == ELOOP) {
			*why = "is a symbolic link that leaves its directory or ends in another";
			return -ELOOP;
		}
		*why = NULL;
		return negative_errno();
	}
	*ret_fd = fd;
	return 0;
}

int token_file_read(const char *path, const struct token_file_rule *rule, char *buf, size_t size,
		    size_t *ret_len, struct token_file_info *ret_info)
{
	_cleanup_close_ int dfd = -1, fd = -1;
	const char *base = NULL, *why = NULL;
	struct stat st;
	ssize_t n;
	size_t len;

	*ret_info = (struct token_file_info){.uid = (uid_t)-1};
	if (size < 2)
		return -EINVAL;
	dfd = open_parent_checked(path, rule, &base, ret_info->dir, sizeof(ret_info->dir), &why);
	if (dfd < 0)
		return refuse(buf, size, ret_info, dfd, why);
	/* O_NONBLOCK: a FIFO in the file's place would block open(2) until a writer came;
	 * with it the open returns and fstat refuses the FIFO. */
	fd = openat(dfd, *base ? base : ".",
		    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ELOOP) {
		int r = open_link_beneath(dfd, base, rule, &fd, &why);

		if (r < 0)
			return refuse(buf, size, ret_info, r, why);
	} else if (fd < 0) {
		return refuse(buf, size, ret_info, -errno, NULL);
	}
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
