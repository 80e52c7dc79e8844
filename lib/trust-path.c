#include "lib/trust-path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"

static int refuse(char *why, size_t size, int r, const char *node, const struct stat *st,
		  const char *what)
{
	if (st)
		snprintf(why, size, "%s is owned by %u:%u with mode %04o: %s", node,
			 (unsigned)st->st_uid, (unsigned)st->st_gid,
			 (unsigned)(st->st_mode & 07777), what);
	else
		snprintf(why, size, "%s: %s", node, what);
	return r;
}

int trust_path_check(const char *path, enum trust_leaf leaf, const char *what, char *why,
		     size_t size)
{
	/* todo: what is left to resolve; dfd: the directory reached so far, named in node */
	char todo[PATH_MAX], node[PATH_MAX], link[PATH_MAX];
	char dir_rule[160], file_rule[160];
	_cleanup_close_ int dfd = -1;
	unsigned links = 0;
	struct stat st;

	why[0] = '\0';
	snprintf(dir_rule, sizeof(dir_rule),
		 "a directory on the way to %s must be root's and writable by no one else", what);
	snprintf(file_rule, sizeof(file_rule), "%s must be root's and writable by no one else",
		 what);
	if (!path || !*path || strlen(path) >= sizeof(todo))
		return refuse(why, size, -EINVAL, path ? path : "", NULL, "no such path");
	snprintf(todo, sizeof(todo), "%s", path);
	if (todo[0] == '/') {
		dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		snprintf(node, sizeof(node), "/");
	} else {
		dfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		snprintf(node, sizeof(node), ".");
	}
	for (;;) {
		char *comp = todo, *rest;
		size_t nl;
		int fd;

		if (dfd < 0 || fstat(dfd, &st) < 0)
			return refuse(why, size, negative_errno(), node, NULL, strerror(errno));
		if (!root_only_writable_at(dfd, "", &st))
			return refuse(why, size, -EPERM, node, &st, dir_rule);
		while (*comp == '/')
			comp++;
		if (!*comp)
			return refuse(why, size, -EINVAL, path, NULL, "is a directory");
		rest = strchr(comp, '/');
		if (rest)
			*rest++ = '\0';
		nl = strlen(node);
		if (snprintf(node + nl, sizeof(node) - nl, "%s%s",
			     nl && node[nl - 1] == '/' ? "" : "/",
			     comp) >= (int)(sizeof(node) - nl))
			return refuse(why, size, -ENAMETOOLONG, path, NULL, "path too long");
		if (fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			/* A socket not there yet: only root may make it (or the directories
			 * still missing on its way) in the directory reached, checked above. */
			if (errno == ENOENT && leaf == TRUST_LEAF_SOCKET)
				return 0;
			return refuse(why, size, negative_errno(), node, NULL, strerror(errno));
		}
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(dfd, comp, link, sizeof(link) - 1);

			if (++links > 40)
				return refuse(why, size, -ELOOP, path, NULL,
					      "too many symbolic links");
			if (n < 0)
				return refuse(why, size, negative_errno(), node, NULL,
					      strerror(errno));
			link[n] = '\0';
			/* The link's target, then what was left after the link. */
			if (snprintf(todo, sizeof(todo), "%s%s%s", link, rest ? "/" : "",
				     rest ? rest : "") >= (int)sizeof(todo))
				return refuse(why, size, -ENAMETOOLONG, node, NULL,
					      "path too long");
			if (link[0] == '/') {
				safe_close(dfd);
				dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				snprintf(node, sizeof(node), "/");
			} else {
				node[nl] = '\0'; /* relative: from the link's own directory */
			}
			continue;
		}
		if ((!rest || !*rest) && leaf == TRUST_LEAF_SOCKET) {
			/* Its owner does not count (a socket bind-mounted from the host shows
			 * the host's): in directories only root may write, only root put it. */
			if (!S_ISSOCK(st.st_mode))
				return refuse(why, size, -EINVAL, node, NULL, "is not a socket");
			return 0;
		}
		if (!rest || !*rest) {
			/* The file itself, opened: its fstat is the file that will be read. */
			_cleanup_close_ int ffd =
				openat(dfd, comp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

			if (ffd < 0 || fstat(ffd, &st) < 0)
				return refuse(why, size, negative_errno(), node, NULL,
					      strerror(errno));
			if (!S_ISREG(st.st_mode))
				return refuse(why, size, -EINVAL, node, NULL,
					      "is not a regular file");
			if (!root_only_writable_at(ffd, "", &st))
				return refuse(why, size, -EPERM, node, &st, file_rule);
			return 0;
		}
		fd = openat(dfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		safe_close(dfd);
		dfd = fd;
		memmove(todo, rest, strlen(rest) + 1);
	}
}
