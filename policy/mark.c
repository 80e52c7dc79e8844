/* The closing mark: a tag only root can make, bound to the one inode it is on.
 *
 * The mark tells a write rule that a node of root's closed to the agents was closed by a
 * walk and may be opened again (docs/policy.md, "Root's private files"). A name alone
 * could be planted: an agent may set a user.* xattr on any file it may write, root's
 * 0660 shared file included, which root may later make 0600; and cp -a, tar --xattrs and
 * rsync -X carry xattrs to a copy. So the value is a version byte and HMAC-SHA256 (key,
 * inode number, birth time) cut to 16 bytes, with a key of 32 random bytes in
 * /data/pistis/mark.key (root 0600 in root's directory, made by `pistisd users
 * ensure-base`): no agent can read the key, a tag read off one node names no other (a
 * copy, or a later file on a reused inode number, has another), and a tag that does not
 * match counts as no mark, so the node stays closed (fail-safe).
 *
 * The name carries the key's id ("user.pistis.closed." and 8 hex digits of a hash of the
 * key): a walk that looks by name (listxattrat, no fd) tells a mark of another key (a lost
 * key, a copied volume) or of the first version ("user.pistis.closed", value "1") from a
 * mark of this key without reading a value, and replaces it under a none rule. */
#include "policy/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/key-file.h"
#include "lib/macro.h"
#include "lib/sha256.h"
#include "lib/statx.h"

#define MARK_VERSION 2

void policy_mark_key_init(struct policy_mark_key *k, int root_fd)
{
	*k = (struct policy_mark_key){.root_fd = root_fd};
	pthread_mutex_init(&k->lock, NULL);
}

void policy_mark_key_done(struct policy_mark_key *k)
{
	explicit_bzero(k->key, sizeof(k->key));
	pthread_mutex_destroy(&k->lock);
}

/* The key's id in the mark's name: a hash of the key, never the key. */
static void key_name(struct policy_mark_key *k)
{
	static const char domain[] = "pistis closing mark key id";
	uint8_t msg[sizeof(domain) + POLICY_MARK_KEY_SIZE], h[SHA256_DIGEST_SIZE];

	memcpy(msg, domain, sizeof(domain));
	memcpy(msg + sizeof(domain), k->key, POLICY_MARK_KEY_SIZE);
	sha256(msg, sizeof(msg), h);
	snprintf(k->name, sizeof(k->name), "%s.%02x%02x%02x%02x", POLICY_XATTR_CLOSED_V1, h[0],
		 h[1], h[2], h[3]);
	explicit_bzero(msg, sizeof(msg));
}

int policy_mark_key_load(struct policy_mark_key *k)
{
	_cleanup_close_ int dfd = -1;
	int r;

	if (atomic_load_explicit(&k->state, memory_order_acquire) != POLICY_MARK_KEY_UNREAD)
		return k->error;
	pthread_mutex_lock(&k->lock);
	if (k->state == POLICY_MARK_KEY_UNREAD) {
		r = policy_state_dir_open(k->root_fd, &dfd);
		if (r >= 0)
			r = key_file_read(dfd, POLICY_MARK_KEY_FILE, k->key, sizeof(k->key));
		if (r >= 0)
			key_name(k);
		k->error = r == -ENOENT ? 0 : r;
		atomic_store_explicit(&k->state,
				      r == -ENOENT ? POLICY_MARK_KEY_ABSENT
				      : r < 0	   ? POLICY_MARK_KEY_FAILED
						   : POLICY_MARK_KEY_LOADED,
				      memory_order_release);
	}
	pthread_mutex_unlock(&k->lock);
	return k->error;
}

bool policy_mark_key_loaded(struct policy_mark_key *k)
{
	return k && policy_mark_key_load(k) == 0 &&
	       atomic_load_explicit(&k->state, memory_order_acquire) == POLICY_MARK_KEY_LOADED;
}

int policy_mark_name_kind(struct policy_mark_key *k, const char *name)
{
	size_t l = sizeof(POLICY_XATTR_CLOSED_V1) - 1;

	if (strncmp(name, POLICY_XATTR_CLOSED_V1, l) || (name[l] && name[l] != '.'))
		return POLICY_MARK_NAME_NONE;
	if (name[l] && policy_mark_key_loaded(k) && !strcmp(name, k->name))
		return POLICY_MARK_NAME_OURS;
	return POLICY_MARK_NAME_FOREIGN;
}

static void hmac_sha256(const uint8_t key[POLICY_MARK_KEY_SIZE], const void *msg, size_t len,
			uint8_t out[SHA256_DIGEST_SIZE])
{
	uint8_t pad[SHA256_BLOCK_SIZE], inner[SHA256_DIGEST_SIZE];
	struct sha256_ctx c;

	memset(pad, 0x36, sizeof(pad));
	for (size_t i = 0; i < POLICY_MARK_KEY_SIZE; i++)
		pad[i] ^= key[i];
	sha256_init(&c);
	sha256_update(&c, pad, sizeof(pad));
	sha256_update(&c, msg, len);
	sha256_final(&c, inner);
	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] ^= 0x36 ^ 0x5c;
	sha256_init(&c);
	sha256_update(&c, pad, sizeof(pad));
	sha256_update(&c, inner, sizeof(inner));
	sha256_final(&c, out);
	explicit_bzero(pad, sizeof(pad));
	explicit_bzero(&c, sizeof(c));
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The value the node behind fd must carry: a version byte and the tag. */
static int mark_value(const struct policy_mark_key *k, int fd, uint8_t out[POLICY_MARK_SIZE])
{
	static const char domain[] = "pistis closing mark v2";
	uint8_t msg[sizeof(domain) + 8 + 8 + 4 + 1], mac[SHA256_DIGEST_SIZE];
	uint64_t ino;
	int64_t sec;
	uint32_t nsec;
	int have, r = statx_birth(fd, &ino, &sec, &nsec, &have);

	if (r < 0)
		return r;
	memcpy(msg, domain, sizeof(domain));
	put_le(msg + sizeof(domain), ino, 8);
	put_le(msg + sizeof(domain) + 8, (uint64_t)sec, 8);
	put_le(msg + sizeof(domain) + 16, nsec, 4);
	msg[sizeof(domain) + 20] = (uint8_t)have;
	hmac_sha256(k->key, msg, sizeof(msg), mac);
	out[0] = MARK_VERSION;
	memcpy(out + 1, mac, POLICY_MARK_SIZE - 1);
	explicit_bzero(mac, sizeof(mac));
	return 0;
}

int policy_mark_valid(struct policy_mark_key *k, int fd, bool opath)
{
	uint8_t have[POLICY_MARK_SIZE + 1], want[POLICY_MARK_SIZE];
	uint8_t diff = 0;
	ssize_t n;
	int r;

	if (!k)
		return 0;
	r = policy_mark_key_load(k);
	if (r < 0)
		return r;
	if (atomic_load_explicit(&k->state, memory_order_acquire) != POLICY_MARK_KEY_LOADED)
		return 0; /* no key: no mark anywhere can be ours */
	n = policy_getxattr_fd(fd, opath, k->name, have, sizeof(have));
	if (n == -ENODATA || n == -ERANGE || (n >= 0 && n != POLICY_MARK_SIZE))
		return 0;
	if (n < 0)
		return (int)n;
	r = mark_value(k, fd, want);
	if (r < 0)
		return r;
	for (size_t i = 0; i < POLICY_MARK_SIZE; i++)
		diff |= have[i] ^ want[i];
	return diff == 0;
}

int policy_mark_drop(struct policy_mark_key *k, int fd, bool opath, bool keep_ours)
{
	char small[1024];
	_cleanup_free_ char *big = NULL;
	char *list = small;
	/* A node being marked or opened has a few names; anyone who could write it may have
	 * added many (up to XATTR_LIST_MAX). */
	ssize_t n = policy_listxattr_fd(fd, opath, list, sizeof(small));

	if (n < 0 && errno == ERANGE) {
		list = big = malloc(POLICY_XLIST_MAX);
		if (!big)
			return -ENOMEM;
		n = policy_listxattr_fd(fd, opath, list, POLICY_XLIST_MAX);
	}
	if (n < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP))
		return 0;
	if (n < 0 && errno == E2BIG) {
		/* More names than one list holds: the ones known by name (another key's stay,
		 * counting for nothing). */
		int r = policy_removexattr_fd(fd, opath, POLICY_XATTR_CLOSED_V1);

		if (r >= 0 && !keep_ours && policy_mark_key_loaded(k))
			r = policy_removexattr_fd(fd, opath, k->name);
		return r;
	}
	if (n < 0)
		return negative_errno();
	for (ssize_t i = 0; i < n;) {
		const char *name = list + i;
		size_t l = strnlen(name, (size_t)(n - i));
		int kind = policy_mark_name_kind(k, name);

		i += (ssize_t)l + 1;
		if (kind == POLICY_MARK_NAME_NONE || (keep_ours && kind == POLICY_MARK_NAME_OURS))
			continue;
		int r = policy_removexattr_fd(fd, opath, name);
		if (r < 0)
			return r;
	}
	return 0;
}

int policy_mark_set(struct policy_mark_key *k, int fd, bool opath)
{
	char p[POLICY_PROC_FD_MAX];
	uint8_t v[POLICY_MARK_SIZE];
	int r;

	if (!policy_mark_key_loaded(k))
		return -ENOKEY;
	r = mark_value(k, fd, v);
	if (r < 0)
		return r;
	r = opath ? setxattr(policy_proc_fd(fd, p), k->name, v, sizeof(v), 0)
		  : fsetxattr(fd, k->name, v, sizeof(v), 0);
	if (r < 0)
		return negative_errno();
	/* Another key's or the first version's: gone once the node's own is on. */
	return policy_mark_drop(k, fd, opath, true);
}
