/* explain PATH: which rule decides, what it implies, and what an agent can really do,
 * worked out from the chain of directories on disk (permission bits and ACLs), not from
 * the rules alone. */
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/macro.h"
#include "policy/internal.h"

/* The largest ACL the kernel stores (an xattr value of XATTR_SIZE_MAX): an agent may plant
 * thousands of named entries on a node it owns, and an ACL read as "mode bits only" would
 * make explain deny what the kernel allows. */
struct node_perm {
	struct stat st;
	uint8_t acl[XATTR_SIZE_MAX];
	size_t acl_len;
};

static void read_node(int fd, struct node_perm *n, bool *ret_default)
{
	ssize_t k = policy_getxattr_fd(fd, true, POLICY_XATTR_ACL_ACCESS, n->acl, sizeof(n->acl));
	uint8_t tmp[8];

	n->acl_len = k > 0 ? (size_t)k : 0;
	if (ret_default)
		*ret_default = policy_getxattr_fd(fd, true, POLICY_XATTR_ACL_DEFAULT, tmp,
						  sizeof(tmp)) != -ENODATA;
}

static bool permits(const struct node_perm *n, uid_t uid, const gid_t *gids, size_t ngids,
		    unsigned want)
{
	if (uid == 0)
		return true; /* root: CAP_DAC_OVERRIDE (agents never have it) */
	/* The owner may chmod it (chmod(2) asks for ownership, not for any mode bit) and then
	 * has what it likes: an agent's own 0444 file is writable by it, its own 0555
	 * directory too (so what lies in it is replaceable), and its own 0000 directory
	 * searchable. */
	if (uid == n->st.st_uid)
		return true;
	return policy_permits(n->st.st_uid, n->st.st_gid, n->st.st_mode, n->acl_len ? n->acl : NULL,
			      n->acl_len, uid, gids, ngids, want);
}

/* As the walk judges a node under a write rule (walk.c, private_left): root's or pi-tools'
 * and closed to the agents, with no closing mark of pistis's; the rule's own path only
 * where agents may write the directory that holds it. */
static bool private_left(struct policy_mark_key *k, int fd, const struct node_perm *node,
			 const struct node_perm *parent, bool at_rule_path)
{
	struct policy_xstate x = {.acl_access = node->acl_len > 0};
	struct policy_xstate px = {.acl_access = parent->acl_len > 0};

	if (at_rule_path && !policy_agents_may_write_x(&parent->st, &px))
		return false;
	if (!policy_private_node(&node->st, &x)) /* without a mark: closed to the agents? */
		return false;
	x.closed_mark = policy_mark_valid(k, fd, true) > 0;
	return policy_private_node(&node->st, &x) && policy_marks_supported(fd, "");
}

static int explain(int root_fd, struct policy_mark_key *k, const struct policy_rules *rules,
		   const char *path, uid_t uid, const gid_t *gids, size_t ngids,
		   struct policy_explain *ret)
{
	_cleanup_close_ int cur = -1;
	_cleanup_free_ struct node_perm *perms = calloc(2, sizeof(*perms));
	struct node_perm *parent, *node;
	const char *p = path;
	size_t done = 0;

	memset(ret, 0, sizeof(*ret));
	if (!perms)
		return -ENOMEM;
	/* after the check: perms + 1 on NULL is undefined behaviour */
	parent = perms;
	node = perms + 1;
	/* No rule changes a tree of pistis's own, whatever covers it (walk.c). */
	ret->reserved = policy_path_reserved(path, strlen(path));
	ret->rule = ret->reserved ? NULL : policy_rules_match(rules, path);
	ret->agent = uid != (uid_t)-1;
	ret->can_traverse = true;

	cur = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0 || fstat(cur, &node->st) < 0)
		return negative_errno();
	read_node(cur, node, &ret->has_default_acl);

	while (*p == '/')
		p++;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		char name[POLICY_NAME_MAX + 1];
		struct node_perm *t = parent;
		int fd;

		parent = node;
		node = t; /* refilled below before it is read */
		if (ret->agent && ret->can_traverse && !permits(parent, uid, gids, ngids, 1)) {
			ret->can_traverse = false;
			memcpy(ret->blocked_by, path, done ? done : 1);
			ret->blocked_by[done ? done : 1] = '\0';
		}
		memcpy(name, p, n);
		name[n] = '\0';
		done = (size_t)(p - path) + n;
		p += n;
		while (*p == '/')
			p++;
		fd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		memcpy(ret->stop_at, path, done);
		ret->stop_at[done] = '\0';
		if (fd < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				return 0; /* not there (yet) */
			return negative_errno();
		}
		safe_close(cur);
		cur = fd;
		if (fstat(cur, &node->st) < 0)
			return negative_errno();
		if (S_ISLNK(node->st.st_mode)) {
			/* The walk leaves it alone and never follows it; stop here. */
			ret->symlink_on_way = true;
			ret->exists = !*p;
			ret->st = node->st;
			return 0;
		}
		if (*p && !S_ISDIR(node->st.st_mode))
			return 0;
		/* The walk stays on its rule's file system: a mount point below the rule's own
		 * path (the rule's path may be one) is where apply stops (walk.c crosses_fs),
		 * a file bind-mounted over another as well as a directory
		 * (STATX_ATTR_MOUNT_ROOT, as the walk sees it). */
		if (ret->rule && !ret->mount_at[0] && done > ret->rule->len) {
			struct stat mst;
			int mount = 0;
			if (policy_node_stat(cur, "", AT_EMPTY_PATH, &mst, &mount) == 0 &&
			    (mount > 0 || (mount < 0 && mst.st_dev != parent->st.st_dev))) {
				memcpy(ret->mount_at, path, done);
				ret->mount_at[done] = '\0';
			}
		}
		read_node(cur, node, &ret->has_default_acl);
		/* A directory on the way that a write rule's walk leaves as it is does not
		 * enter: what lies below keeps what it has. */
		if (*p && ret->rule && ret->rule->access == POLICY_WRITE && !ret->private_at[0] &&
		    !ret->mount_at[0] && done >= ret->rule->len &&
		    private_left(k, cur, node, parent, done == ret->rule->len)) {
			memcpy(ret->private_at, path, done);
			ret->private_at[done] = '\0';
		}
		/* Replacing the node or any directory on its way: rename or unlink it in its
		 * own parent (write+search there; the sticky bit limits that to the owner of
		 * the entry or of the directory), then put one's own in its place. Within the
		 * same parent no write permission on a renamed directory itself is needed. */
		if (ret->agent && ret->can_traverse && !ret->replace_via[0] &&
		    permits(parent, uid, gids, ngids, 3) &&
		    (!(parent->st.st_mode & S_ISVTX) || uid == parent->st.st_uid ||
		     uid == node->st.st_uid)) {
			ret->can_replace = true;
			memcpy(ret->replace_via, path, done);
			ret->replace_via[done] = '\0';
		}
	}

	ret->exists = true;
	ret->st = node->st;
	ret->has_acl = node->acl_len > 0;
	ret->stop_at[0] = '\0';
	if (ret->rule) {
		bool secrets = ret->rule->access == POLICY_NONE &&
			       policy_path_under(POLICY_SECRETS_DIR, strlen(POLICY_SECRETS_DIR),
						 path, strlen(path));

		policy_target_for(ret->rule->access, secrets, node->st.st_mode, node->st.st_uid,
				  &ret->target);
		if (S_ISDIR(node->st.st_mode))
			policy_target_pin(rules, path, strlen(path), &ret->target);
		ret->target_hardlink_left = !S_ISDIR(node->st.st_mode) && node->st.st_nlink > 1;
		if (ret->rule->access == POLICY_WRITE && !ret->private_at[0])
			ret->target_private_left =
				private_left(k, cur, node, parent, strlen(path) == ret->rule->len);
	}
	if (ret->agent && ret->can_traverse) {
		bool dir = S_ISDIR(node->st.st_mode);

		ret->can_read = permits(node, uid, gids, ngids, dir ? 5 : 4);
		ret->can_write = permits(node, uid, gids, ngids, dir ? 3 : 2);
		/* can_replace and replace_via were set on the way (this node included). */
	}
	return 0;
}

int policy_explain(int root_fd, const struct policy_rules *rules, const char *path, uid_t uid,
		   const gid_t *gids, size_t ngids, struct policy_explain *ret)
{
	struct policy_mark_key k;
	int r;

	policy_mark_key_init(&k, root_fd);
	r = explain(root_fd, &k, rules, path, uid, gids, ngids, ret);
	policy_mark_key_done(&k);
	return r;
}
