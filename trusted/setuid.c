/* trusted: keep the image's setuid/setgid inventory minimal. Agents of an image with
 * trusted commands run without no_new_privs (sudo must be able to raise privileges), so
 * every other setuid or setgid file, and every file with capabilities (security.capability:
 * cap_setuid+ep is a setuid bit by another name), would be a way up: all lose the bits and
 * the capabilities but sudo and the files the operator keeps by name. */
#include "trusted/trusted.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/macro.h"
#include "trusted/internal.h"

#define WALK_DEPTH_MAX 256

struct file_id {
	dev_t dev;
	ino_t ino;
};

struct walk {
	dev_t dev;
	const struct file_id *keep;
	size_t n_keep;
	unsigned flags;
	trusted_setid_cb cb;
	void *userdata;
	char path[PATH_MAX];
	int err;	 /* first error; the walk goes on past it */
	size_t too_deep; /* directories not entered: deeper than WALK_DEPTH_MAX */
	char first_deep[PATH_MAX];
};

static bool kept(const struct walk *w, const struct stat *st)
{
	for (size_t i = 0; i < w->n_keep; i++)
		if (w->keep[i].dev == st->st_dev && w->keep[i].ino == st->st_ino)
			return true;
	return false;
}

static void note_err(struct walk *w, int r)
{
	if (!w->err)
		w->err = r;
}

/* A file capability (security.capability) lifts like a setuid bit: cap_setuid+ep gives an
 * agent without no_new_privs CAP_SETUID within its bounding set, which allow_setuid keeps.
 * Only the presence matters, so the value is never read. */
#define CAP_XATTR "security.capability"

static bool has_caps(int fd)
{
	return fgetxattr(fd, CAP_XATTR, NULL, 0) >= 0;
}

static void visit_file(struct walk *w, int dir_fd, const char *name, const struct stat *lst)
{
	struct trusted_setid_file f = {
		.path = w->path, .mode = lst->st_mode, .uid = lst->st_uid, .gid = lst->st_gid};
	_cleanup_close_ int fd = -1;
	struct stat st;

	/* Reopen without following and act on what the fd is: the name may have changed
	 * between readdir and now. O_PATH permits neither fchmod nor fgetxattr, so O_RDONLY;
	 * root may open a 04711 file, O_NONBLOCK|O_NOCTTY keep odd files harmless and
	 * O_NOATIME leaves the image's times alone. */
	fd = openat(dir_fd, name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_NOATIME | O_CLOEXEC);
	if (fd < 0 && errno == EPERM) /* O_NOATIME on a filesystem that refuses it */
		fd = openat(dir_fd, name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		note_err(w, -errno);
		return;
	}
	if (fstat(fd, &st) < 0) {
		note_err(w, -errno);
		return;
	}
	if (!S_ISREG(st.st_mode))
		return;
	f.caps = has_caps(fd);
	if (!(st.st_mode & (S_ISUID | S_ISGID)) && !f.caps)
		return;
	f.mode = st.st_mode;
	f.uid = st.st_uid;
	f.gid = st.st_gid;
	f.kept = kept(w, &st);
	if (!f.kept && !(w->flags & TRUSTED_DRY_RUN)) {
		/* Plain permission bits of the file as it is now; sticky has no meaning on a
		 * regular file and goes with the others. The capability goes first: a chmod
		 * does not remove it (only a write or chown does). */
		if (f.caps && fremovexattr(fd, CAP_XATTR) < 0 && errno != ENODATA)
			note_err(w, -errno);
		else if ((st.st_mode & 07000) && fchmod(fd, st.st_mode & 0777) < 0)
			note_err(w, -errno);
		else
			f.changed = true;
	}
	if (w->cb)
		w->cb(&f, w->userdata);
}

static bool skip_top(const char *name)
{
	/* Kernel and device filesystems, and the persistent volume whose modes the policy
	 * walk owns (it strips setid bits there itself). */
	return !strcmp(name, "proc") || !strcmp(name, "sys") || !strcmp(name, "dev") ||
	       !strcmp(name, "data");
}

static void walk_dir(struct walk *w, int dir_fd, size_t depth)
{
	size_t base = strlen(w->path);
	struct dirent *de;
	DIR *d;

	d = fdopendir(dir_fd);
	if (!d) {
		note_err(w, -errno);
		safe_close(dir_fd);
		return;
	}
	while ((errno = 0, de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (depth == 0 && skip_top(de->d_name))
			continue;
		if (snprintf(w->path + base, sizeof(w->path) - base, "%s%s", base > 1 ? "/" : "",
			     de->d_name) >= (int)(sizeof(w->path) - base)) {
			note_err(w, -ENAMETOOLONG);
			continue;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				note_err(w, -errno);
			continue;
		}
		/* One filesystem: a mount point is somebody else's. Only directories are
		 * compared: overlayfs may report a lower layer's device for plain files. */
		if (S_ISDIR(st.st_mode) && st.st_dev != w->dev)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			struct stat sst;

			if (sub < 0) {
				note_err(w, -errno);
				continue;
			}
			if (fstat(sub, &sst) < 0 || sst.st_dev != w->dev) {
				safe_close(sub);
				continue;
			}
			/* That branch only, said at the end: the rest of the image is still
			 * walked (an agent's deep tree must not spare the image's files). */
			if (depth + 1 > WALK_DEPTH_MAX) {
				if (!w->too_deep++)
					snprintf(w->first_deep, sizeof(w->first_deep), "%s",
						 w->path);
				safe_close(sub);
				w->path[base] = '\0';
				continue;
			}
			walk_dir(w, sub, depth + 1);
		} else if (S_ISREG(st.st_mode)) {
			/* Every regular file: a capability does not show in st_mode. */
			visit_file(w, dirfd(d), de->d_name, &st);
		}
		w->path[base] = '\0';
	}
	if (errno)
		note_err(w, -errno);
	w->path[base] = '\0';
	closedir(d);
}

int trusted_harden_setuid(const char *root, const char *const *keep, size_t n_keep, unsigned flags,
			  trusted_setid_cb cb, void *userdata, char *why, size_t why_size)
{
	static const char *const sudos[] = {"usr/bin/sudo", "bin/sudo", "usr/local/bin/sudo",
					    "usr/sbin/sudo"};
	struct file_id ids[TRUSTED_KEEP_MAX + ELEMENTSOF(sudos)];
	_cleanup_close_ int root_fd = -1;
	struct walk w = {.flags = flags, .cb = cb, .userdata = userdata, .path = "/"};
	struct stat st;
	size_t n = 0, i;
	int fd, r;

	if (n_keep > TRUSTED_KEEP_MAX)
		return -E2BIG;
	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	/* Kept files are identified by device and inode, resolved the way the root sees them,
	 * so /bin/mount and /usr/bin/mount name the same file on a merged-/usr image. */
	for (i = 0; i < n_keep; i++) {
		_cleanup_close_ int kfd = -1;
		const char *rel = keep[i];

		while (*rel == '/')
			rel++;
		r = trusted_open_in_root(root_fd, rel, O_PATH, &kfd);
		if (r < 0)
			return r;
		if (fstat(kfd, &st) < 0)
			return -errno;
		ids[n++] = (struct file_id){st.st_dev, st.st_ino};
	}
	for (i = 0; i < ELEMENTSOF(sudos); i++) {
		_cleanup_close_ int kfd = -1;

		if (trusted_open_in_root(root_fd, sudos[i], O_PATH, &kfd) < 0 ||
		    fstat(kfd, &st) < 0)
			continue;
		if (S_ISREG(st.st_mode) && st.st_uid == 0 && !(st.st_mode & 022))
			ids[n++] = (struct file_id){st.st_dev, st.st_ino};
	}
	w.keep = ids;
	w.n_keep = n;

	fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		safe_close(fd);
		return r;
	}
	w.dev = st.st_dev;
	w.path[0] = '/';
	w.path[1] = '\0';
	why[0] = '\0';
	walk_dir(&w, fd, 0);
	if (w.err < 0)
		return w.err;
	if (w.too_deep) {
		/* an agent's tree: its names may hold any byte, and its path any length */
		char q[256 + ESCAPE_QUOTE_EXTRA];

		escape_format(why, why_size,
			      "%zu director%s deeper than %d levels not walked (the first: %-s): "
			      "what they hold keeps its setuid/setgid bits and capabilities",
			      w.too_deep, w.too_deep == 1 ? "y" : "ies", WALK_DEPTH_MAX,
			      escape_c_quote(w.first_deep, strlen(w.first_deep),
					     sizeof(q) - ESCAPE_QUOTE_EXTRA, q, sizeof(q)));
		return 1;
	}
	return 0;
}
