/* trusted: the scripts, their wrappers and the secrets directory on the image. */
#include "trusted/trusted.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The copy is made from the bytes read from the checked fd, and the digest computed over
 * those very bytes, so what sudo pins is what was checked. */
static int add_from_fd(int root_fd, const char *root, const char *name, int script_fd,
		       char ret_digest[SHA256_HEX_SIZE])
{
	char sudo[256];
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int dir_fd = -1;
	struct stat st;
	size_t len = 0;
	int r;

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
	r = trusted_open_dir(root_fd, TRUSTED_DIR, true, 0755, 0, 0, true, &dir_fd);
	if (r < 0)
		return r;
	r = trusted_write_file(dir_fd, name, buf, len, 0755, false, NULL, 0);
	if (r < 0)
		return r;
	if (ret_digest)
		sha256_hex(buf, len, ret_digest);
	return write_wrapper(root_fd, root, name);
}

int trusted_add_fd(const char *root, const char *name, int script_fd,
		   char ret_digest[SHA256_HEX_SIZE])
{
	_cleanup_close_ int root_fd = -1;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	return add_from_fd(root_fd, root, name, script_fd, ret_digest);
}

static bool is_our_wrapper(int dir_fd, const char *name)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;

	if (trusted_read_file(dir_fd, name, 4096, &text, &len) < 0)
		return false;
	return trusted_wrapper_is_ours(text, len);
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
	if (r < 0)
		return r;
	if (unlinkat(dir_fd, name, 0) < 0)
		return -errno;
	/* The wrapper goes too, but only if it is ours: an unrelated /data/bin/NAME stays. */
	if (trusted_open_dir(root_fd, TRUSTED_BIN_DIR, false, 0755, 0, 0, false, &bin_fd) >= 0 &&
	    is_our_wrapper(bin_fd, name) && unlinkat(bin_fd, name, 0) < 0)
		return -errno;
	return 0;
}

int trusted_adopt_from_bin(const char *root, const char *name)
{
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
	r = add_from_fd(root_fd, root, name, fd, NULL);
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

int trusted_secrets_ensure(const char *root)
{
	_cleanup_close_ int root_fd = -1, fd = -1;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	/* Opened as a directory, fixed through its fd, and never read: pistisd holds no
	 * secret and has no business looking. */
	return trusted_open_dir(root_fd, TRUSTED_SECRETS_DIR, true, 0700, USERS_TOOLS_UID,
				USERS_TOOLS_UID, true, &fd);
}

int trusted_secrets_check(const char *root, char *why, size_t why_size)
{
	_cleanup_close_ int root_fd = -1, data_fd = -1, fd = -1;
	struct stat st;
	int r;

	r = trusted_root_open(root, &root_fd);
	if (r < 0)
		return r;
	r = trusted_open_dir(root_fd, "data", false, 0755, 0, 0, false, &data_fd);
	if (r >= 0) {
		fd = openat(data_fd, ".secrets", O_PATH | O_NOFOLLOW | O_CLOEXEC);
		r = fd < 0 ? -errno : 0;
	}
	if (r == -ENOENT) {
		snprintf(why, why_size, "/data/.secrets does not exist");
		return 1;
	}
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != USERS_TOOLS_UID || (st.st_mode & 07777) != 0700) {
		snprintf(why, why_size,
			 "/data/.secrets is not a pi-tools 0700 directory (owner %u, mode %04o)",
			 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		return 1;
	}
	return 0;
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
		snprintf(why, why_size, "/data/bin/%s is missing (or a symlink)", name);
		return 1;
	}
	if (r == -EPERM) {
		snprintf(why, why_size, "/data/bin is not root's alone (owner or mode)");
		return 1;
	}
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 07777) != 0755) {
		snprintf(why, why_size, "/data/bin/%s is not a root-owned 0755 file", name);
		return 1;
	}
	r = fd_read_all(fd, 4096, &have, &len);
	if (r == -EFBIG || (r >= 0 && strcmp(want, have))) {
		snprintf(why, why_size, "/data/bin/%s is not the wrapper pistisd writes", name);
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
