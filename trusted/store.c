/* trusted: the scripts, their wrappers and the secrets directory on the image. */
#include "trusted/trusted.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/macro.h"
#include "sandbox-users/users.h"
#include "trusted/internal.h"

int trusted_root_open(const char *root, int *ret_fd)
{
	struct stat st;
	int fd;

	if (!root || root[0] != '/')
		return -EINVAL;
	fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022)) {
		safe_close(fd);
		return -EPERM;
	}
	*ret_fd = fd;
	return 0;
}

int trusted_open_script(const char *path, int *ret_fd)
{
	/* O_NOFOLLOW: a symlink fails with ELOOP; O_NONBLOCK: a FIFO cannot hang us (and is
	 * refused by the fstat in trusted_add_fd). */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

int trusted_find_sudo(const char *root, char *ret_sudo, size_t sudo_size, char *ret_visudo,
		      size_t visudo_size)
{
	static const char *const sudos[] = {TRUSTED_SUDO_PATHS};
	static const char *const visudos[] = {"usr/sbin/visudo", "sbin/visudo",
					      "usr/local/sbin/visudo", "usr/bin/visudo"};
	_cleanup_close_ int root_fd = -1;
	bool found_sudo = false, found_visudo = false;
	size_t i;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	for (i = 0; i < ELEMENTSOF(sudos) && !found_sudo; i++) {
		_cleanup_close_ int fd = -1;
		struct stat st;

		if (trusted_open_in_root(root_fd, sudos[i] + 1, O_PATH, &fd) < 0 ||
		    fstat(fd, &st) < 0)
			continue;
		/* sudo only works setuid root; a copy anyone may rewrite is no sudo to trust. */
		if (S_ISREG(st.st_mode) && st.st_uid == 0 && (st.st_mode & S_ISUID) &&
		    !(st.st_mode & 022)) {
			snprintf(ret_sudo, sudo_size, "%s", sudos[i]);
			found_sudo = true;
		}
	}
	for (i = 0; i < ELEMENTSOF(visudos) && !found_visudo; i++) {
		_cleanup_close_ int fd = -1;
		struct stat st;

		if (trusted_open_in_root(root_fd, visudos[i], O_PATH, &fd) < 0 ||
		    fstat(fd, &st) < 0)
			continue;
		if (S_ISREG(st.st_mode) && st.st_uid == 0 && !(st.st_mode & 022)) {
			if (ret_visudo)
				snprintf(ret_visudo, visudo_size, "/%s", visudos[i]);
			found_visudo = true;
		}
	}
	return found_sudo && found_visudo ? 0 : -ENOENT;
}

int trusted_find_pistisd(const char *root, char *ret, size_t size)
{
	static const char *const paths[] = {TRUSTED_PISTISD_PATHS};
	_cleanup_close_ int root_fd = -1;
	size_t i;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	for (i = 0; i < ELEMENTSOF(paths); i++) {
		_cleanup_close_ int fd = -1;
		struct stat st;

		if (trusted_open_in_root(root_fd, paths[i] + 1, O_PATH, &fd) < 0 ||
		    fstat(fd, &st) < 0)
			continue;
		/* Every agent execs it as its wrappers' interpreter: root's alone, runnable by all. */
		if (S_ISREG(st.st_mode) && st.st_uid == 0 && !(st.st_mode & 022) &&
		    (st.st_mode & 0111) == 0111) {
			snprintf(ret, size, "%s", paths[i]);
			return 0;
		}
	}
	return -ENOENT;
}

/* The wrapper add writes for NAME in this root: the trusted-exec form when pistisd is in
 * the root, else the /bin/sh form. */
static int render_for_root(const char *root, const char *name, char **ret)
{
	char sudo[256], pistisd[256];

	if (trusted_find_sudo(root, sudo, sizeof(sudo), NULL, 0) < 0)
		return -ENOPKG;
	return trusted_wrapper_render(
		sudo, trusted_find_pistisd(root, pistisd, sizeof(pistisd)) >= 0 ? pistisd : NULL,
		name, ret);
}

static int write_wrapper(int root_fd, const char *root, const char *name)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int bin_fd = -1;
	int r;

	r = render_for_root(root, name, &text);
	if (r < 0)
		return r;
	/* /data/bin is on every agent's PATH: it must be root's alone, or one agent could
	 * swap the wrapper another agent runs. */
	r = trusted_open_dir(root_fd, TRUSTED_BIN_DIR, true, 0755, 0, 0, false, &bin_fd);
	if (r < 0)
		return r;
	return trusted_write_file(bin_fd, name, text, strlen(text), 0755, false, NULL, 0);
}

static int secure_path_check_fd(int root_fd, char *why, size_t why_size);

/* The copy is made from the bytes read from the checked fd, and the digest computed over
 * those very bytes, so what sudo pins is what was checked. */
static int add_from_fd(int root_fd, const char *root, const char *name, int script_fd,
		       char ret_digest[SHA256_HEX_SIZE], char *why, size_t why_size)
{
	char sudo[256];
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int dir_fd = -1;
	struct stat st;
	size_t len = 0;
	int r;

	if (why_size)
		why[0] = '\0';
	if (!trusted_name_valid(name))
		return -EINVAL;
	if (trusted_find_sudo(root, sudo, sizeof(sudo), NULL, 0) < 0)
		return -ENOPKG;
	if (fstat(script_fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	/* Writable by anyone but root (another owner may chmod it; group/other bits, which
	 * include an ACL's mask): someone else decides what runs as pi-tools. */
	if (st.st_uid != 0 || (st.st_mode & 022))
		return -EPERM;
	if (st.st_size > TRUSTED_SCRIPT_MAX)
		return -EFBIG;
	r = fd_read_all(script_fd, TRUSTED_SCRIPT_MAX, &buf, &len);
	if (r < 0)
		return r;
	/* sudo's digest pins these bytes, not the interpreter they name, nor the programs
	 * the script runs by name. */
	r = trusted_interp_check(root_fd, name, buf, len, why, why_size);
	if (r == 0)
		r = secure_path_check_fd(root_fd, why, why_size);
	if (r < 0) {
		why[0] = '\0';
		return r;
	}
	if (r > 0)
		return -ENOEXEC;
	/* Past the checks, a failure names the file and what is left (name is checked: no
	 * byte of it needs escaping). */
	snprintf(why, why_size, "cannot write /data/trusted/%s; nothing changed", name);
	r = trusted_open_dir(root_fd, TRUSTED_DIR, true, 0755, 0, 0, true, &dir_fd);
	if (r < 0)
		return r;
	r = trusted_write_file(dir_fd, name, buf, len, 0755, false, NULL, 0);
	if (r < 0)
		return r;
	if (ret_digest)
		sha256_hex(buf, len, ret_digest);
	snprintf(why, why_size,
		 "cannot write the wrapper /data/bin/%s; the script is in /data/trusted, but "
		 "sudo does not grant it yet: add it again",
		 name);
	r = write_wrapper(root_fd, root, name);
	if (r >= 0)
		why[0] = '\0';
	return r;
}

static bool is_our_wrapper(int dir_fd, const char *name)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;

	if (trusted_read_file(dir_fd, name, 4096, &text, &len) < 0)
		return false;
	return trusted_wrapper_is_ours(text, len);
}

int trusted_add_fd(const char *root, const char *name, int script_fd,
		   char ret_digest[SHA256_HEX_SIZE], char *why, size_t why_size)
{
	_cleanup_close_ int root_fd = -1, bin_fd = -1;
	struct stat st;
	int r;

	if (!trusted_name_valid(name))
		return -EINVAL;
	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	/* The wrapper would replace whatever /data/bin/NAME is: an operator's own script there
	 * was lost without a word. That one is adopted (the seed's "moved into /data/trusted"),
	 * never overwritten by another. */
	r = trusted_open_dir(root_fd, TRUSTED_BIN_DIR, false, 0755, 0, 0, false, &bin_fd);
	if (r >= 0 && fstatat(bin_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !is_our_wrapper(bin_fd, name))
		return -EEXIST;
	return add_from_fd(root_fd, root, name, script_fd, ret_digest, why, why_size);
}

int trusted_remove(const char *root, const char *name)
{
	_cleanup_close_ int root_fd = -1, dir_fd = -1, bin_fd = -1;
	int r;

	if (!trusted_name_valid(name))
		return -EINVAL;
	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	r = trusted_open_dir(root_fd, TRUSTED_DIR, false, 0755, 0, 0, false, &dir_fd);
	if (r < 0 && r != -ENOENT)
		return r;
	bool script = r >= 0 && unlinkat(dir_fd, name, 0) == 0;
	if (r >= 0 && !script && errno != ENOENT)
		return -errno;
	/* The wrapper goes too, but only if it is ours: an unrelated /data/bin/NAME stays.
	 * Also when the script is gone already: a remove cut short between the two (a kill,
	 * an I/O error) left our wrapper, and its retry said "no trusted command" forever,
	 * never reaching the install that takes the script out of the drop-in. */
	bool wrapper = trusted_open_dir(root_fd, TRUSTED_BIN_DIR, false, 0755, 0, 0, false,
					&bin_fd) >= 0 &&
		       is_our_wrapper(bin_fd, name);
	if (wrapper && unlinkat(bin_fd, name, 0) < 0)
		return -errno;
	return script || wrapper ? 0 : -ENOENT;
}

int trusted_adopt_from_bin(const char *root, const char *name)
{
	char why[512];
	_cleanup_close_ int root_fd = -1, bin_fd = -1, fd = -1, dir_fd = -1, old_fd = -1;
	struct stat st;
	int r;

	if (!trusted_name_valid(name))
		return -EINVAL;
	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	r = trusted_open_dir(root_fd, TRUSTED_BIN_DIR, false, 0755, 0, 0, false, &bin_fd);
	if (r < 0)
		return r;
	if (is_our_wrapper(bin_fd, name))
		return 1;
	fd = openat(bin_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* A file an agent could have written or linked here is never promoted to pi-tools. */
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) || st.st_nlink != 1)
		return -EPERM;
	/* An existing, different /data/trusted/NAME is the operator's to resolve. */
	if (trusted_open_dir(root_fd, TRUSTED_DIR, false, 0755, 0, 0, false, &dir_fd) >= 0) {
		old_fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (old_fd >= 0)
			return -EEXIST;
	}
	r = add_from_fd(root_fd, root, name, fd, NULL, why, sizeof(why));
	return r < 0 ? r : 0;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct trusted_entry *)a)->name,
		      ((const struct trusted_entry *)b)->name);
}

int trusted_list(const char *root, struct trusted_entry **ret, size_t *ret_n, size_t *ret_skipped)
{
	_cleanup_close_ int root_fd = -1, dir_fd = -1;
	_cleanup_free_ struct trusted_entry *v = NULL;
	size_t n = 0, skipped = 0;
	struct dirent *de;
	DIR *d;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	v = calloc(TRUSTED_COMMANDS_MAX, sizeof(*v));
	if (!v)
		return -ENOMEM;
	r = trusted_open_dir(root_fd, TRUSTED_DIR, false, 0755, 0, 0, false, &dir_fd);
	if (r == -ENOENT)
		goto done;
	if (r < 0)
		return r;
	d = fdopendir(dir_fd);
	if (!d)
		return -errno;
	dir_fd = -1; /* owned by d now */
	while ((errno = 0, de = readdir(d))) {
		uint8_t digest[SHA256_DIGEST_SIZE];
		_cleanup_close_ int fd = -1;
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!trusted_name_valid(de->d_name)) {
			skipped++;
			continue;
		}
		if (n >= TRUSTED_COMMANDS_MAX) {
			closedir(d);
			return -E2BIG;
		}
		fd = openat(dirfd(d), de->d_name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_size > TRUSTED_SCRIPT_MAX) {
			skipped++;
			continue;
		}
		r = sha256_fd(fd, digest);
		if (r < 0) {
			closedir(d);
			return r;
		}
		{
			char head[TRUSTED_SHEBANG_MAX], interp[TRUSTED_SHEBANG_MAX],
				arg[TRUSTED_SHEBANG_MAX], inner[TRUSTED_SHEBANG_MAX],
				inner_arg[TRUSTED_SHEBANG_MAX];
			ssize_t h = pread(fd, head, sizeof(head), 0);

			v[n].clean_start =
				h > 0 && trusted_shebang_parse(head, (size_t)h, interp, arg) == 1 &&
				trusted_interp_is_pistisd(interp) &&
				trusted_interp_split(arg, inner, inner_arg) == 1;
		}
		memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1); /* valid: <= 64 */
		sha256_to_hex(digest, v[n].digest);
		v[n].uid = st.st_uid;
		v[n].mode = st.st_mode & 07777;
		n++;
	}
	r = errno ? -errno : 0;
	closedir(d);
	if (r < 0)
		return r;
	qsort(v, n, sizeof(*v), entry_cmp);
done:
	*ret = TAKE_PTR(v);
	*ret_n = n;
	if (ret_skipped)
		*ret_skipped = skipped;
	return 0;
}

/* How far secrets_tree_check looks: deeper or larger than any secrets directory a trusted
 * command keeps, and a bound on the time an install spends there. */
#define SECRETS_DEPTH_MAX 16
#define SECRETS_ENTRIES_MAX 65536

/* Whether every node under dir_fd (path: its name for messages) is pi-tools' or root's:
 * 0, or 1 with the first that is not in why. Names and owners only: nothing is opened
 * but directories (O_NOFOLLOW), nothing is read. An agent's node here (a link to a file
 * of its own, a second name of its own inode, a directory of links) is one it made when
 * it could write /data and the secrets' directory was not there yet: a trusted command
 * writing its secret there would write it where the agent reads. */
static int secrets_tree_check(int dir_fd, const char *path, unsigned depth, unsigned *budget,
			      char *why, size_t why_size)
{
	_cleanup_close_ int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
	DIR *d;
	struct dirent *e;
	int r = 0;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d)
		return -errno;
	fd = -1; /* the DIR owns it now */
	while (r == 0 && (errno = 0, e = readdir(d))) {
		struct stat st;
		char sub[PATH_MAX];

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) >= (int)sizeof(sub) ||
		    depth >= SECRETS_DEPTH_MAX || ++*budget > SECRETS_ENTRIES_MAX) {
			escape_format(why, why_size,
				      "'%s' holds more than pistis checks (%u levels, %u entries): "
				      "clean it up",
				      path, SECRETS_DEPTH_MAX, SECRETS_ENTRIES_MAX);
			r = 1;
			break;
		}
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			r = -errno;
			break;
		}
		if (st.st_uid != 0 && st.st_uid != USERS_TOOLS_UID) {
			escape_format(
				why, why_size,
				"'%s' is owned by uid %u, not pi-tools or root: someone else put "
				"it in the secrets' directory (an agent, when it could write "
				"/data?); remove it",
				sub, (unsigned)st.st_uid);
			r = 1;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			_cleanup_close_ int sfd = openat(dirfd(d), e->d_name,
							 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
								 O_CLOEXEC | O_NONBLOCK);
			struct stat st2;

			if (sfd < 0 || fstat(sfd, &st2) < 0) {
				if (errno == ENOENT)
					continue;
				r = -errno;
				break;
			}
			if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino)
				continue; /* swapped meanwhile: only pi-tools or root can */
			r = secrets_tree_check(sfd, sub, depth + 1, budget, why, why_size);
		}
	}
	if (r == 0 && errno)
		r = -errno;
	closedir(d);
	return r;
}

/* /data/.secrets itself and what it holds (see secrets_tree_check). create: made
 * pi-tools' 0700, or an existing one of pi-tools' or root's put right with its ACLs gone
 * (trusted_open_dir's fix); anyone else's is refused, never taken over with what is in
 * it. Otherwise (check) it must be so already. */
static int secrets_dir(const char *root, bool create, char *why, size_t why_size)
{
	_cleanup_close_ int root_fd = -1, data_fd = -1, fd = -1;
	unsigned budget = 0;
	struct stat st;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	r = trusted_open_dir(root_fd, "data", false, 0755, 0, 0, false, &data_fd);
	if (r == -EPERM) {
		escape_format(why, why_size,
			      "/data is not root's alone: trusted commands stay off");
		return 1;
	}
	if (r < 0)
		return r;
	r = trusted_open_dir(data_fd, ".secrets", create, 0700, USERS_TOOLS_UID, USERS_TOOLS_UID,
			     create, &fd);
	if (r == -ENOENT) {
		escape_format(why, why_size, "/data/.secrets does not exist");
		return 1;
	}
	if (r == -ENOTDIR) {
		escape_format(why, why_size,
			      "/data/.secrets is not a directory (a symbolic link?): remove it");
		return 1;
	}
	if (r == -EPERM && fstatat(data_fd, ".secrets", &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (r == -EPERM && st.st_uid != USERS_TOOLS_UID) {
		escape_format(
			why, why_size,
			"/data/.secrets is owned by uid %u, not pi-tools%s: someone else made it, "
			"and what is in it; remove it",
			(unsigned)st.st_uid, create ? " or root" : "");
		return 1;
	}
	if (r >= 0 && fstat(fd, &st) < 0)
		r = -errno;
	if (r == -EPERM || (r >= 0 && (st.st_mode & 07777) != 0700)) {
		escape_format(
			why, why_size,
			"/data/.secrets is not a pi-tools 0700 directory (owner %u, mode %04o)",
			(unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		return 1;
	}
	if (r < 0)
		return r;
	const char *acl = fd_has_acl(fd);
	if (acl) {
		escape_format(why, why_size, "/data/.secrets has an ACL (%s)", acl);
		return 1;
	}
	return secrets_tree_check(fd, "/data/.secrets", 0, &budget, why, why_size);
}

int trusted_secrets_ensure(const char *root, char *why, size_t why_size)
{
	return secrets_dir(root, true, why, why_size);
}

int trusted_secrets_check(const char *root, char *why, size_t why_size)
{
	return secrets_dir(root, false, why, why_size);
}

int trusted_wrapper_check(const char *root, const char *name, char *why, size_t why_size)
{
	_cleanup_close_ int root_fd = -1, bin_fd = -1, fd = -1;
	_cleanup_free_ char *want = NULL, *have = NULL;
	struct stat st;
	size_t len = 0;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	r = render_for_root(root, name, &want);
	if (r < 0)
		return r;
	r = trusted_open_dir(root_fd, TRUSTED_BIN_DIR, false, 0755, 0, 0, false, &bin_fd);
	if (r >= 0) {
		fd = openat(bin_fd, name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		r = fd < 0 ? -errno : 0;
	}
	if (r == -ENOENT || r == -ELOOP) {
		escape_format(why, why_size, "/data/bin/%s is missing (or a symlink)", name);
		return 1;
	}
	if (r == -EPERM) {
		escape_format(why, why_size, "/data/bin is not root's alone (owner or mode)");
		return 1;
	}
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 07777) != 0755) {
		escape_format(why, why_size, "/data/bin/%s is not a root-owned 0755 file", name);
		return 1;
	}
	r = fd_read_all(fd, 4096, &have, &len);
	if (r == -EFBIG || (r >= 0 && strcmp(want, have))) {
		escape_format(why, why_size, "/data/bin/%s is not the wrapper pistisd writes",
			      name);
		return 1;
	}
	return r < 0 ? r : 0;
}

int trusted_wrappers_refresh(const char *root)
{
	_cleanup_close_ int root_fd = -1, bin_fd = -1;
	_cleanup_free_ struct trusted_entry *v = NULL;
	size_t n = 0, i;
	int r, count = 0;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	r = trusted_list(root, &v, &n, NULL);
	if (r < 0)
		return r;
	if (n == 0)
		return 0;
	r = trusted_open_dir(root_fd, TRUSTED_BIN_DIR, true, 0755, 0, 0, false, &bin_fd);
	if (r < 0)
		return r;
	for (i = 0; i < n; i++) {
		_cleanup_free_ char *want = NULL, *have = NULL;
		size_t len = 0;

		r = render_for_root(root, v[i].name, &want);
		if (r < 0)
			return r;
		r = trusted_read_file(bin_fd, v[i].name, 4096, &have, &len);
		/* Another file in its place is the operator's to resolve (check reports it). */
		if (r >= 0 && (!trusted_wrapper_is_ours(have, len) || !strcmp(have, want)))
			continue;
		if (r < 0 && r != -ENOENT)
			continue;
		r = trusted_write_file(bin_fd, v[i].name, want, strlen(want), 0755, false, NULL, 0);
		if (r < 0)
			return r;
		count++;
	}
	return count;
}

/* trusted_chain_walk (internal.h): resolve the absolute path inside the root as the kernel
 * would (symlinks followed, within the root), checking every directory passed through. */
#define CHAIN_DEPTH 64
#define CHAIN_LINKS 40
int trusted_chain_walk(int root_fd, const char *path, bool want_dir, int *ret_fd,
		       char *ret_resolved, char *why, size_t why_size)
{
	int fds[CHAIN_DEPTH + 1], depth = 0, links = 0, r = 0;
	char rest[2 * PATH_MAX], walked[PATH_MAX] = "";
	char *p = rest;

	fds[0] = root_fd;
	if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
		return -ENAMETOOLONG;
	for (;;) {
		char comp[NAME_MAX + 1], target[PATH_MAX];
		struct stat st;
		size_t l;
		int fd;

		p += strspn(p, "/");
		l = strcspn(p, "/");
		if (l == 0) {
			escape_format(why, why_size, "'%s' is not a regular file", path);
			r = 1;
			break;
		}
		if (l > NAME_MAX) {
			r = -ENAMETOOLONG;
			break;
		}
		memcpy(comp, p, l);
		comp[l] = '\0';
		p += l;
		if (!strcmp(comp, "."))
			continue;
		if (!strcmp(comp, "..")) {
			if (depth > 0) {
				safe_close(fds[depth--]);
				*(strrchr(walked, '/') ?: walked) = '\0';
			}
			continue;
		}
		fd = openat(fds[depth], comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0) {
			r = -errno;
			safe_close(fd);
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(fd, "", target, sizeof(target) - 1);

			safe_close(fd);
			if (n < 0) {
				r = -errno;
				break;
			}
			target[n] = '\0';
			if (++links > CHAIN_LINKS) {
				escape_format(why, why_size, "'%s': too many symlinks", path);
				r = 1;
				break;
			}
			if (target[0] == '/')
				for (; depth > 0; depth--)
					safe_close(fds[depth]);
			if (target[0] == '/')
				walked[0] = '\0';
			{
				char tmp[2 * PATH_MAX];

				if (snprintf(tmp, sizeof(tmp), "%s/%s", target, p) >=
				    (int)sizeof(tmp)) {
					r = -ENAMETOOLONG;
					break;
				}
				memcpy(rest, tmp, sizeof(rest));
				p = rest;
			}
			continue;
		}
		l = strlen(walked);
		if (snprintf(walked + l, sizeof(walked) - l, "/%s", comp) >=
		    (int)(sizeof(walked) - l)) {
			safe_close(fd);
			r = -ENAMETOOLONG;
			break;
		}
		if (S_ISDIR(st.st_mode) && (want_dir || p[strspn(p, "/")] != '\0')) {
			if (st.st_uid != 0 || (st.st_mode & 022)) {
				escape_format(
					why, why_size,
					"'%s': directory '%s' is not root's alone (owner %u, mode "
					"%04o): someone else can swap what it holds",
					path, walked, (unsigned)st.st_uid,
					(unsigned)(st.st_mode & 07777));
				safe_close(fd);
				r = 1;
				break;
			}
			if (p[strspn(p, "/")] == '\0') {
				safe_close(fd); /* want_dir: the directory itself, checked */
				if (ret_resolved)
					memcpy(ret_resolved, walked, strlen(walked) + 1);
				break;
			}
			if (depth >= CHAIN_DEPTH) {
				safe_close(fd);
				r = -ELOOP;
				break;
			}
			fds[++depth] = fd;
			continue;
		}
		if (want_dir) {
			safe_close(fd);
			r = -ENOTDIR;
			break;
		}
		if (!S_ISREG(st.st_mode) || p[strspn(p, "/")] != '\0') {
			escape_format(why, why_size, "'%s' is not a regular file", path);
			safe_close(fd);
			r = 1;
			break;
		}
		if (st.st_uid != 0 || (st.st_mode & 022)) {
			escape_format(why, why_size,
				      "'%s' ('%s') is not root's alone (owner %u, mode %04o)", path,
				      walked, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
			safe_close(fd);
			r = 1;
			break;
		}
		/* Opened for reading from the same checked directory; must be the same file. */
		{
			struct stat st2;
			int rfd = openat(fds[depth], comp,
					 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

			safe_close(fd);
			if (rfd < 0 || fstat(rfd, &st2) < 0) {
				r = -errno;
				safe_close(rfd);
				break;
			}
			if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
				safe_close(rfd);
				r = -EAGAIN;
				break;
			}
			*ret_fd = rfd;
			if (ret_resolved)
				memcpy(ret_resolved, walked, strlen(walked) + 1);
		}
		break;
	}
	for (; depth > 0; depth--)
		safe_close(fds[depth]);
	return r;
}

static int chain_open(int root_fd, const char *path, int *ret_fd, char *why, size_t why_size)
{
	return trusted_chain_walk(root_fd, path, false, ret_fd, NULL, why, why_size);
}

#define INTERP_DEPTH 4 /* the kernel's BINPRM_MAX_RECURSION */

static int interp_check_level(int root_fd, const char *what, const char *text, size_t len, int fd,
			      const char *origin, int level, char *why, size_t why_size);

/* Check the file at path (an interpreter, or another kind of program the kernel runs) and,
 * when it is a script, its own interpreter; when it is a program, the libraries it loads. */
static int interp_check_path(int root_fd, const char *what, const char *kind, const char *path,
			     int level, char *why, size_t why_size)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *head = NULL;
	char w[PATH_MAX + 64], resolved[PATH_MAX], inner[2 * PATH_MAX];
	ssize_t n;
	int r;

	r = trusted_chain_walk(root_fd, path, false, &fd, resolved, w, sizeof(w));
	if (r == -ENOENT) {
		escape_format(why, why_size, "%-s: %s '%s' does not exist in the image", what, kind,
			      path);
		return 1;
	}
	if (r < 0)
		return r;
	if (r > 0) {
		escape_format(why, why_size, "%-s: %s %-s", what, kind, w);
		return 1;
	}
	head = malloc(TRUSTED_HEAD_MAX);
	if (!head)
		return -ENOMEM;
	n = pread(fd, head, TRUSTED_HEAD_MAX, 0);
	if (n < 0)
		return -errno;
	/* The kernel execs it: the loader's $ORIGIN is where /proc/self/exe points, the path
	 * with every symlink resolved. */
	trusted_path_to_dir(resolved);
	escape_format(inner, sizeof(inner), "%-s: %s '%s'", what, kind, path);
	return interp_check_level(root_fd, inner, head, (size_t)n, fd, resolved, level + 1, why,
				  why_size);
}

/* What the kernel runs for a script or a program (kind: "interpreter", "ELF loader"): an
 * absolute path, within the kernel's nesting depth, root's alone (interp_check_path). */
static int program_check(int root_fd, const char *what, const char *kind, const char *path,
			 int level, char *why, size_t why_size)
{
	if (path[0] != '/') {
		escape_format(why, why_size,
			      "%-s: %s '%s' is a relative path (the kernel resolves it from the "
			      "working directory): give an absolute one",
			      what, kind, path);
		return 1;
	}
	if (level >= INTERP_DEPTH) {
		escape_format(why, why_size, "%-s: interpreters nested more than %d deep", what,
			      INTERP_DEPTH);
		return 1;
	}
	return interp_check_path(root_fd, what, "interpreter", path, level, why, why_size);
}

/* What an interpreter (already checked) runs because of its #! argument: the INTERP of
 * `pistisd trusted-interp INTERP [ARG]`, checked as an interpreter with its own argument in
 * turn (an argument of that form to anything but pistisd is refused), or env's NAME. */
static int interp_arg_check(int root_fd, const char *what, const char *interp, const char *arg,
			    int level, char *why, size_t why_size)
{
	static const char secure_path[] = TRUSTED_SECURE_PATH;
	char inner[TRUSTED_SHEBANG_MAX], inner_arg[TRUSTED_SHEBANG_MAX];
	char line[2 * TRUSTED_SHEBANG_MAX]; /* "INTERP ARG", quoted whole in a reason */
	const char *base, *d;
	int r;

	snprintf(line, sizeof(line), "%s %s", interp, arg);
	r = trusted_interp_split(arg, inner, inner_arg);
	if (r != 0 && !trusted_interp_is_pistisd(interp)) {
		escape_format(why, why_size,
			      "%-s: interpreter '%s': only pistisd reads 'trusted-interp' ('%s' "
			      "takes it as a file name, looked up from the working directory)",
			      what, line, interp);
		return 1;
	}
	if (r < 0) {
		escape_format(why, why_size, "%-s: interpreter '%s': names no interpreter to run",
			      what, line);
		return 1;
	}
	if (r > 0) {
		r = program_check(root_fd, what, "interpreter", inner, level + 1, why, why_size);
		if (r != 0)
			return r;
		return interp_arg_check(root_fd, what, inner, inner_arg, level + 1, why, why_size);
	}
	base = path_tail(interp);
	if (strcmp(base, "env")) {
		char w[512];

		/* The caller's arguments follow the script: they must reach it, not INTERP's
		 * own option parser (`#!/bin/sed -f`: `NAME -e 'e id'` ran id as pi-tools). */
		if (!trusted_interp_arg_check(interp, arg, w, sizeof(w)))
			return 0;
		escape_format(why, why_size, "%-s: interpreter '%s': %-s", what, line, w);
		return 1;
	}
	if (!arg[0])
		return 0;
	/* env NAME runs `NAME SCRIPT ARGS…`: NAME hands the caller's arguments to the script
	 * or not as it would without env (`#!/usr/bin/env sed`) */
	{
		char w[512];

		if (trusted_interp_arg_check(arg, "", w, sizeof(w))) {
			escape_format(why, why_size, "%-s: interpreter '%s': %-s", what, line, w);
			return 1;
		}
	}
	/* env runs its argument: an option (-S splits, -i, -u, -C…) decides what that is. */
	if (arg[0] == '-') {
		escape_format(why, why_size,
			      "%-s: interpreter '%s': env options are not allowed (name the "
			      "interpreter by its absolute path)",
			      what, line);
		return 1;
	}
	if (strchr(arg, '/')) {
		if (arg[0] != '/') {
			escape_format(why, why_size,
				      "%-s: interpreter '%s' (through env) is relative", what, arg);
			return 1;
		}
		return interp_check_path(root_fd, what, "interpreter", arg, level + 1, why,
					 why_size);
	}
	/* Looked up in the script's PATH, which sudo sets to secure_path: every directory
	 * before the one that holds it (or its nearest existing parent) is checked too. */
	for (d = secure_path; *d;) {
		_cleanup_close_ int pfd = -1;
		char path[PATH_MAX], w[PATH_MAX + 64];
		size_t l = strcspn(d, ":");

		snprintf(path, sizeof(path), "%.*s/%s", (int)l, d, arg);
		d += l + (d[l] == ':');
		r = chain_open(root_fd, path, &pfd, w, sizeof(w));
		if (r == -ENOENT || r == -ENOTDIR)
			continue;
		if (r < 0)
			return r;
		if (r > 0) {
			escape_format(why, why_size, "%-s: interpreter '%s' looked up by env: %-s",
				      what, arg, w);
			return 1;
		}
		return interp_check_path(root_fd, what, "interpreter", path, level + 1, why,
					 why_size);
	}
	escape_format(why, why_size, "%-s: interpreter '%s' (through env) is in no directory of %s",
		      what, arg, secure_path);
	return 1;
}

/* text: the file's first bytes (fd >= 0, read on through fd) or all of it (fd -1); origin:
 * the directory it runs from. */
static int interp_check_level(int root_fd, const char *what, const char *text, size_t len, int fd,
			      const char *origin, int level, char *why, size_t why_size)
{
	char interp[TRUSTED_SHEBANG_MAX], arg[TRUSTED_SHEBANG_MAX], loader[PATH_MAX];
	int r;

	/* A program: the kernel maps its loader (PT_INTERP) into it before any of its code
	 * runs, so the loader must be root's alone like a script's interpreter. */
	r = trusted_elf_interp(text, len, loader, sizeof(loader));
	if (r < 0) {
		escape_format(
			why, why_size,
			"%-s: an ELF file whose loader cannot be read (malformed program headers, "
			"or they or the loader's path lie past the first %d bytes)",
			what, TRUSTED_HEAD_MAX);
		return 1;
	}
	if (r > 0) {
		r = program_check(root_fd, what, "ELF loader", loader, level, why, why_size);
		if (r != 0)
			return r;
		r = 1;
	}
	/* ... and then the libraries its RPATH, RUNPATH and DT_NEEDED make the loader map. */
	{
		int l = trusted_elf_libs_check(root_fd, what, fd, text, len, origin, r > 0, why,
					       why_size);

		if (l != 0)
			return l;
		if (r > 0)
			return 0;
	}
	r = trusted_shebang_parse(text, len, interp, arg);
	if (r == 0)
		return 0; /* a binary, or no #! at all: sudo execs it itself, nothing else runs */
	if (r < 0) {
		escape_format(
			why, why_size,
			"%-s: the #! line names no interpreter, holds a NUL or is longer than %d "
			"bytes",
			what, TRUSTED_SHEBANG_MAX - 1);
		return 1;
	}
	if (strchr(interp, '\r') || strchr(arg, '\r')) {
		escape_format(why, why_size,
			      "%-s: the #! line ends in a carriage return (CRLF line endings): the "
			      "interpreter or its argument would end in <CR> ('%.*s')",
			      what, (int)strcspn(interp, "\r"), interp);
		return 1;
	}
	r = program_check(root_fd, what, "interpreter", interp, level, why, why_size);
	if (r != 0)
		return r;
	return interp_arg_check(root_fd, what, interp, arg, level, why, why_size);
}

/* The programs a script names by an absolute path ("/opt/tool/bin/x", "exec /srv/run"):
 * each word trusted_script_path_next finds that is an executable file in the image when
 * this runs is checked like an interpreter (root's alone, the directories on the way, its
 * own interpreter or loader and libraries). Files that do not exist yet, directories,
 * non-executable files and paths built at run time are not seen: a guard, not a boundary
 * (docs/trusted.md). The #! line is checked by interp_check_level. */
static int script_programs_check(int root_fd, const char *what, const char *text, size_t len,
				 char *why, size_t why_size)
{
	size_t pos = 0, line = 1, words = 0;
	char path[PATH_MAX];

	if (len < 2 || text[0] != '#' || text[1] != '!')
		return 0; /* a binary, or no #!: sudo execs it itself */
	while (trusted_script_path_next(text, len, &pos, &line, path)) {
		_cleanup_close_ int fd = -1;
		char inner[TRUSTED_NAME_MAX + PATH_MAX + 64];
		struct stat st;
		int r;

		if (++words > TRUSTED_SCRIPT_PATHS_MAX) {
			escape_format(why, why_size,
				      "%-s: names more than %d absolute paths; each would be "
				      "checked as a "
				      "program it may run",
				      what, TRUSTED_SCRIPT_PATHS_MAX);
			return 1;
		}
		/* Where it leads in the image, as the kernel would resolve it; only an
		 * executable file is a program this script may run. */
		r = trusted_open_in_root(root_fd, path + 1, O_PATH, &fd);
		if (r < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111))
			continue;
		escape_format(inner, sizeof(inner), "%-s (line %zu)", what, line);
		r = interp_check_path(root_fd, inner, "program", path, 1, why, why_size);
		if (r != 0)
			return r;
	}
	return 0;
}

/* A script's interpreter chain and the programs it names by absolute path; a program's
 * loader and libraries. text: the whole file. */
static int script_check(int root_fd, const char *what, const char *text, size_t len, int fd,
			char *why, size_t why_size)
{
	int r = interp_check_level(root_fd, what, text, len, fd, "/" TRUSTED_DIR, 0, why, why_size);

	if (r != 0)
		return r;
	return script_programs_check(root_fd, what, text, len, why, why_size);
}

int trusted_interp_check(int root_fd, const char *what, const char *text, size_t len, char *why,
			 size_t why_size)
{
	return script_check(root_fd, what, text, len, -1, why, why_size);
}

int trusted_scripts_interp_check(const char *root, const struct trusted_entry *v, size_t n,
				 char *why, size_t why_size)
{
	_cleanup_close_ int root_fd = -1, dir_fd = -1;
	size_t i;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	r = trusted_open_dir(root_fd, TRUSTED_DIR, false, 0755, 0, 0, false, &dir_fd);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	for (i = 0; i < n; i++) {
		_cleanup_close_ int fd = -1;
		_cleanup_free_ char *text = NULL;
		char what[TRUSTED_NAME_MAX + 32];
		size_t got;

		fd = openat(dir_fd, v[i].name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		/* All of it (add took at most TRUSTED_SCRIPT_MAX; a larger file is someone
		 * else's and -EFBIG): the programs it names may be anywhere in it. */
		r = fd_read_all(fd, TRUSTED_SCRIPT_MAX, &text, &got);
		if (r < 0)
			return r;
		snprintf(what, sizeof(what), "/data/trusted/%s", v[i].name);
		r = script_check(root_fd, what, text, got, fd, why, why_size);
		if (r != 0)
			return r;
	}
	return 0;
}

/* pi-tools' home, the HOME sudo gives every trusted command (its /etc/passwd line, as
 * sudo's getpwnam reads the first one): where git, curl, ssh, Python (its user site,
 * usercustomize.py), npm and pip read their dotfiles. One that someone else can create or
 * write is code of theirs running as pi-tools: an image's own pi-tools with its home in
 * /tmp ran a script with HOME=/tmp/pi-tools and read the .toolrc an agent had put there
 * (red team). pistis makes it /nonexistent. It must be absolute, and a directory root's
 * alone or missing with the nearest existing parent root's alone (trusted_chain_walk),
 * every directory on the way root's alone. 0, 1 with why, <0. */
static int tools_home_check_fd(int root_fd, char *why, size_t why_size)
{
	static const char prefix[] = USERS_TOOLS_USER ":";
	_cleanup_close_ int etc_fd = -1;
	_cleanup_free_ char *text = NULL;
	char home[PATH_MAX], w[PATH_MAX + 64];
	const char *line = NULL;
	size_t len = 0;
	int r;

	r = trusted_open_dir(root_fd, "etc", false, 0755, 0, 0, false, &etc_fd);
	if (r >= 0)
		r = trusted_read_file(etc_fd, "passwd", 4 * 1024 * 1024, &text, &len);
	if (r == -ENOENT)
		return 0; /* no pi-tools: sudo runs nothing as it */
	if (r < 0)
		return r;
	for (const char *p = text; p < text + len; p = strchrnul(p, '\n') + 1) {
		if (!strncmp(p, prefix, sizeof(prefix) - 1)) {
			line = p;
			break;
		}
		if (!*strchrnul(p, '\n'))
			break;
	}
	if (!line)
		return 0;
	/* name:password:uid:gid:gecos:home:shell */
	for (int f = 0; f < 5 && line; f++) {
		line = strpbrk(line, ":\n");
		line = line && *line == ':' ? line + 1 : NULL;
	}
	if (!line || strcspn(line, ":\n") >= sizeof(home)) {
		escape_format(why, why_size, "pi-tools' line in /etc/passwd has no home field");
		return 1;
	}
	snprintf(home, sizeof(home), "%.*s", (int)strcspn(line, ":\n"), line);
	if (home[0] != '/') {
		escape_format(why, why_size,
			      "pi-tools' home '%s' (the HOME trusted commands run with) is not an "
			      "absolute path: make it /nonexistent",
			      home);
		return 1;
	}
	r = trusted_chain_walk(root_fd, home, true, NULL, NULL, w, sizeof(w));
	if (r == 1)
		escape_format(why, why_size,
			      "pi-tools' home (the HOME trusted commands run with, whose dotfiles "
			      "git, curl, ssh and Python read): %-s; make it /nonexistent in "
			      "/etc/passwd, or root's alone",
			      w);
	if (r != 0 && r != -ENOENT && r != -ENOTDIR) /* missing: only root can make it */
		return r;
	/* Its shell, sudo's SHELL for them (ssh runs ProxyCommand with it, script(1) and
	 * editors start it): empty (/bin/sh), missing, or a file root's alone. */
	line += strcspn(line, ":\n");
	if (*line != ':' || line[1] == '\n' || !line[1])
		return 0;
	_cleanup_close_ int fd = -1;
	snprintf(home, sizeof(home), "%.*s", (int)strcspn(line + 1, ":\n"), line + 1);
	r = home[0] == '/' ? trusted_chain_walk(root_fd, home, false, &fd, NULL, w, sizeof(w)) : 1;
	if (r == 1)
		escape_format(why, why_size,
			      "pi-tools' shell (the SHELL trusted commands run with): %-s; make it "
			      "/usr/sbin/nologin in /etc/passwd",
			      home[0] == '/' ? w : "not an absolute path");
	return r == -ENOENT || r == -ENOTDIR ? 0 : r;
}

static int secure_path_check_fd(int root_fd, char *why, size_t why_size)
{
	static const char secure_path[] = TRUSTED_SECURE_PATH;

	/* A script runs programs by name from its PATH, which sudo sets to secure_path: who
	 * can put a file in one of those directories (or make a missing one) chooses what
	 * runs as pi-tools. Each directory, every directory on the way to it and the nearest
	 * existing parent of a missing one must be root's alone. */
	for (const char *d = secure_path; *d;) {
		char path[PATH_MAX], w[PATH_MAX + 64];
		size_t l = strcspn(d, ":");
		int r;

		snprintf(path, sizeof(path), "%.*s", (int)l, d);
		d += l + (d[l] == ':');
		r = trusted_chain_walk(root_fd, path, true, NULL, NULL, w, sizeof(w));
		if (r == -ENOENT || r == -ENOTDIR)
			continue;
		if (r < 0)
			return r;
		if (r > 0) {
			escape_format(why, why_size,
				      "secure_path (the PATH trusted commands run with): %-s", w);
			return 1;
		}
	}
	/* ... and the HOME they run with */
	return tools_home_check_fd(root_fd, why, why_size);
}

int trusted_secure_path_check(const char *root, char *why, size_t why_size)
{
	_cleanup_close_ int root_fd = -1;
	int r = trusted_root_open(root, &root_fd);

	return r < 0 ? r : secure_path_check_fd(root_fd, why, why_size);
}
