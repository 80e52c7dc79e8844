#include "lib/trust-path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"
#include "lib/statx.h"

/* The kernel's bound on the links one lookup follows (MAXSYMLINKS). */
#define TRUST_MAX_LINKS 40

static bool owner_trusted(uid_t uid, const struct trust_rule *rule)
{
	return uid == 0 || (rule->also_owner != (uid_t)-1 && uid == rule->also_owner);
}

static bool dir_believed(int fd, const struct stat *st, const struct trust_rule *rule,
			 unsigned flags)
{
	struct statfs fs;

	if (!S_ISDIR(st->st_mode) || !owner_trusted(st->st_uid, rule))
		return false;
	if (!(st->st_mode & 022))
		return true;
	if ((flags & TRUST_STICKY) && (st->st_mode & S_ISVTX))
		return true;
	if ((flags & TRUST_RDONLY_MOUNT) && fstatfs(fd, &fs) == 0 && (fs.f_flags & ST_RDONLY))
		return true;
	return (flags & TRUST_ROOT_GROUP) && root_only_writable_at(fd, "", st);
}

static int fault_at(struct trust_fault *f, enum trust_fault_kind kind, int r, const struct stat *st)
{
	f->kind = kind;
	if (st)
		f->st = *st;
	return r;
}

static int node_push(char *node, const char *comp)
{
	size_t n = strlen(node);

	if (snprintf(node + n, PATH_MAX - n, "%s%s", n > 1 ? "/" : "", comp) >= (int)(PATH_MAX - n))
		return -ENAMETOOLONG;
	return 0;
}

static void node_pop(char *node)
{
	char *slash = strrchr(node, '/');

	if (slash)
		slash[slash == node ? 1 : 0] = '\0';
}

static int reopen(int *dfd, int fd)
{
	if (fd < 0)
		return negative_errno();
	safe_close(*dfd);
	*dfd = fd;
	return 0;
}

int trust_path_open(const char *path, const struct trust_rule *rule, char *ret_leaf,
		    struct trust_fault *f)
{
	/* todo: what is left to walk, from dfd, the directory reached (named in f->node). */
	char todo[PATH_MAX], target[PATH_MAX];
	_cleanup_close_ int dfd = -1;
	unsigned links = 0;
	/* Beneath a last link's directory (TRUST_LEAF_LINK_BENEATH): how deep; -1 not. */
	int depth = -1;
	dev_t floor_dev = 0;
	struct stat st;
	int r;

	f->kind = TRUST_FAULT_ERRNO;
	f->node[0] = '\0';
	ret_leaf[0] = '\0';
	if (!path || !*path)
		return fault_at(f, TRUST_FAULT_NAME, -EINVAL, NULL);
	if (path[0] == '/') {
		if (snprintf(todo, sizeof(todo), "%s", path) >= (int)sizeof(todo))
			return fault_at(f, TRUST_FAULT_NAME, -ENAMETOOLONG, NULL);
	} else {
		/* The working directory's ancestors are on the way too: walked from /. */
		if (!getcwd(target, sizeof(target)))
			return negative_errno();
		if (snprintf(todo, sizeof(todo), "%s/%s", target, path) >= (int)sizeof(todo))
			return fault_at(f, TRUST_FAULT_NAME, -ENAMETOOLONG, NULL);
	}
	snprintf(f->node, sizeof(f->node), "/");
	dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	for (;;) {
		char *comp = todo + strspn(todo, "/"), *rest;
		bool last;
		int mnt = -1;

		/* The directory reached, judged on its fd before anything in it is. */
		if (fstat(dfd, &st) < 0)
			return negative_errno();
		if (!dir_believed(dfd, &st, rule, rule->flags))
			return fault_at(f, TRUST_FAULT_DIR, -EPERM, &st);
		if (!*comp) {
			/* path ended in "/", "." or "..": the directory itself is the leaf. */
			snprintf(ret_leaf, NAME_MAX + 1, ".");
			return TAKE_FD(dfd);
		}
		rest = strchr(comp, '/');
		last = !rest;
		if (rest)
			*rest++ = '\0';
		else
			rest = comp + strlen(comp);
		if (strlen(comp) > NAME_MAX)
			return fault_at(f, TRUST_FAULT_NAME, -ENAMETOOLONG, NULL);
		if (strcmp(comp, ".") == 0) {
			memmove(todo, rest, strlen(rest) + 1);
			continue;
		}
		if (strcmp(comp, "..") == 0) {
			if (depth == 0)
				return fault_at(f, TRUST_FAULT_LEAF_LINK_OUT, -ELOOP, NULL);
			if (depth > 0)
				depth--;
			/* The kernel's parent (at / itself: /), judged again at the top. */
			r = reopen(&dfd, openat(dfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
			if (r < 0)
				return r;
			node_pop(f->node);
			memmove(todo, rest, strlen(rest) + 1);
			continue;
		}
		if (node_push(f->node, comp) < 0)
			return fault_at(f, TRUST_FAULT_NAME, -ENAMETOOLONG, NULL);
		r = statx_node(dfd, comp, AT_SYMLINK_NOFOLLOW, &st, &mnt);
		if (r == -ENOENT && last) {
			/* A missing leaf: the caller's open or lookup says so. */
			snprintf(ret_leaf, NAME_MAX + 1, "%s", comp);
			return TAKE_FD(dfd);
		}
		if (r == -ENOENT)
			return fault_at(f, TRUST_FAULT_MISSING, r, NULL);
		if (r < 0)
			return r;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n;

			if (++links > TRUST_MAX_LINKS)
				return fault_at(f, TRUST_FAULT_LOOP, -ELOOP, NULL);
			if (depth >= 0 && last) /* a Secret's link ends in the file itself */
				return fault_at(f, TRUST_FAULT_LEAF_LINK_OUT, -ELOOP, &st);
			if (depth < 0 && last && (rule->flags & TRUST_LEAF_LINK_BENEATH)) {
				struct stat dst;

				if (fstat(dfd, &dst) < 0)
					return negative_errno();
				if (!owner_trusted(st.st_uid, rule) ||
				    !owner_trusted(dst.st_uid, rule))
					return fault_at(f, TRUST_FAULT_LEAF_LINK_OWNER, -ELOOP,
							&st);
				/* Sticky is not enough here: in a sticky directory anyone may
				 * add a name, and the link's target is one. */
				if (!dir_believed(dfd, &dst, rule,
						  rule->flags & ~(TRUST_STICKY | TRUST_ROOT_GROUP)))
					return fault_at(f, TRUST_FAULT_LEAF_LINK_DIR, -ELOOP, &dst);
				depth = 0;
				floor_dev = dst.st_dev;
			} else if (!owner_trusted(st.st_uid, rule)) {
				return fault_at(f, TRUST_FAULT_LINK, -EPERM, &st);
			}
			n = readlinkat(dfd, comp, target, sizeof(target));
			if (n < 0)
				return negative_errno();
			if (n == 0 || (size_t)n >= sizeof(target))
				return fault_at(f, n ? TRUST_FAULT_NAME : TRUST_FAULT_ERRNO,
						n ? -ENAMETOOLONG : -ENOENT, NULL);
			target[n] = '\0';
			if (depth >= 0 && target[0] == '/')
				return fault_at(f, TRUST_FAULT_LEAF_LINK_OUT, -ELOOP, &st);
			/* The link's target, then what was left after the link. */
			if (snprintf(target + n, sizeof(target) - (size_t)n, "%s%s",
				     last ? "" : "/", rest) >= (int)(sizeof(target) - (size_t)n))
				return fault_at(f, TRUST_FAULT_NAME, -ENAMETOOLONG, NULL);
			memcpy(todo, target, strlen(target) + 1);
			node_pop(f->node); /* a relative target: from the link's own directory */
			if (target[0] == '/') {
				r = reopen(&dfd, open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
				if (r < 0)
					return r;
				snprintf(f->node, sizeof(f->node), "/");
			}
			continue;
		}
		/* Beneath a Secret's directory: on its mount only (st_dev tells for a directory;
		 * a non-directory on overlayfs shows its layer's, so only a mount root tells). */
		if (depth >= 0 && (mnt == 1 || (S_ISDIR(st.st_mode) && st.st_dev != floor_dev)))
			return fault_at(f, TRUST_FAULT_LEAF_LINK_OUT, -ELOOP, &st);
		if (last) {
			snprintf(ret_leaf, NAME_MAX + 1, "%s", comp);
			return TAKE_FD(dfd);
		}
		r = reopen(&dfd, openat(dfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
		if (r < 0)
			return r;
		if (depth >= 0)
			depth++;
		memmove(todo, rest, strlen(rest) + 1);
	}
}

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

/* Whose nodes the rule believes, for messages: "root's", "root's or uid 1000's". */
static void owners_phrase(const struct trust_rule *rule, char *buf, size_t size)
{
	if (rule->also_owner == (uid_t)-1 || rule->also_owner == 0)
		snprintf(buf, size, "root's");
	else
		snprintf(buf, size, "root's or uid %u's", (unsigned)rule->also_owner);
}

int trust_fault_why(int r, const struct trust_fault *f, const char *path,
		    const struct trust_rule *rule, const char *what, char *why, size_t size)
{
	bool sticky = rule->flags & TRUST_STICKY, ro = rule->flags & TRUST_RDONLY_MOUNT;
	char owners[48], text[256];
	const char *node = f->node[0] ? f->node : path ? path : "";

	owners_phrase(rule, owners, sizeof(owners));
	switch (f->kind) {
	case TRUST_FAULT_NAME:
		return refuse(why, size, r, path ? path : "", NULL,
			      r == -EINVAL ? "no such path" : "path too long");
	case TRUST_FAULT_DIR:
		snprintf(text, sizeof(text),
			 "a directory on the way to %s must be %s and writable by no one "
			 "else%s%s%s%s",
			 what, owners, sticky || ro ? " (unless " : "", sticky ? "sticky" : "",
			 sticky && ro ? " or " : "",
			 ro	  ? "on a read-only mount)"
			 : sticky ? ")"
				  : "");
		return refuse(why, size, r, node, &f->st, text);
	case TRUST_FAULT_LINK:
		snprintf(text, sizeof(text), "a symbolic link on the way to %s must be %s", what,
			 owners);
		return refuse(why, size, r, node, &f->st, text);
	case TRUST_FAULT_LOOP:
		return refuse(why, size, r, path ? path : node, NULL,
			      "more than 40 symbolic links on the way (a loop?)");
	case TRUST_FAULT_LEAF_LINK_OWNER:
		snprintf(text, sizeof(text),
			 "a symbolic link in the place of %s must be %s, and so must its directory",
			 what, owners);
		return refuse(why, size, r, node, NULL, text);
	case TRUST_FAULT_LEAF_LINK_DIR:
		snprintf(
			text, sizeof(text),
			"a symbolic link in the place of %s must be in a directory no one else may "
			"write",
			what);
		return refuse(why, size, r, node, NULL, text);
	case TRUST_FAULT_LEAF_LINK_OUT:
		snprintf(text, sizeof(text),
			 "a symbolic link in the place of %s must stay in its directory, on its "
			 "mount, and end in no other link",
			 what);
		return refuse(why, size, r, node, NULL, text);
	case TRUST_FAULT_MISSING:
	case TRUST_FAULT_ERRNO:
	default:
		return refuse(why, size, r, node, NULL, strerror(-r));
	}
}

/* A regular file of the owners the rule believes that no one else may write: group root
 * may, where the rule says so, on a file of root's without an access ACL. */
static bool file_believed(int fd, const struct stat *st, const struct trust_rule *rule)
{
	if (!S_ISREG(st->st_mode) || !owner_trusted(st->st_uid, rule))
		return false;
	if (!(st->st_mode & 022))
		return true;
	return (rule->flags & TRUST_ROOT_GROUP) && root_only_writable_at(fd, "", st);
}

int trust_file_open(const char *path, const struct trust_rule *rule, const char *what, char *why,
		    size_t size)
{
	char leaf[NAME_MAX + 1], owners[48], text[256];
	_cleanup_close_ int dfd = -1, pfd = -1, fd = -1;
	struct trust_fault f;
	struct stat st, st2;

	why[0] = '\0';
	dfd = trust_path_open(path, rule, leaf, &f);
	if (dfd < 0)
		return trust_fault_why(dfd, &f, path, rule, what, why, size);
	if (strcmp(leaf, ".") == 0)
		return refuse(why, size, -EINVAL, path, NULL, "is a directory");
	/* Looked at before it is opened for reading: a device's open is its driver's. */
	pfd = openat(dfd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0 || fstat(pfd, &st) < 0)
		return refuse(why, size, negative_errno(), f.node, NULL,
			      errno == ELOOP ? "is a symbolic link" : strerror(errno));
	if (!S_ISREG(st.st_mode))
		return refuse(why, size, -EINVAL, f.node, NULL, "is not a regular file");
	owners_phrase(rule, owners, sizeof(owners));
	snprintf(text, sizeof(text), "%s must be %s and writable by no one else", what, owners);
	/* The open by name again (O_NOFOLLOW, beneath the directory believed), judged on the
	 * fd read from: what a rename put there since is seen here. */
	fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st2) < 0)
		return refuse(why, size, negative_errno(), f.node, NULL, strerror(errno));
	if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino)
		return refuse(why, size, -EAGAIN, f.node, NULL, "was replaced while it was opened");
	if (!file_believed(fd, &st2, rule))
		return refuse(why, size, -EPERM, f.node, &st2, text);
	return TAKE_FD(fd);
}

int trust_path_check(const char *path, enum trust_leaf leaf, const char *what, char *why,
		     size_t size)
{
	static const struct trust_rule rule = {.also_owner = (uid_t)-1, .flags = TRUST_ROOT_GROUP};
	char name[NAME_MAX + 1];
	struct trust_fault f;
	_cleanup_close_ int dfd = -1, ffd = -1;
	struct stat st;

	why[0] = '\0';
	if (leaf == TRUST_LEAF_FILE) {
		ffd = trust_file_open(path, &rule, what, why, size);
		return ffd < 0 ? ffd : 0;
	}
	dfd = trust_path_open(path, &rule, name, &f);
	/* A socket not there yet: only root may make it (or the directories still missing
	 * on its way) in the directory reached, believed. */
	if (dfd < 0 && f.kind == TRUST_FAULT_MISSING)
		return 0;
	if (dfd < 0)
		return trust_fault_why(dfd, &f, path, &rule, what, why, size);
	if (strcmp(name, ".") == 0)
		return refuse(why, size, -EINVAL, path, NULL, "is a directory");
	/* Its owner does not count (a socket bind-mounted from the host shows the host's):
	 * in directories only root may write, only root put it. */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT
			       ? 0
			       : refuse(why, size, negative_errno(), f.node, NULL, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return refuse(why, size, -EINVAL, f.node, NULL, "is not a socket");
	return 0;
}
