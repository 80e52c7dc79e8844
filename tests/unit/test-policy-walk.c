/* policy: the walk, as root over a scratch root (never the host's /etc or /data). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/key-file.h"
#include "lib/macro.h"
#include "lib/tap.h"
#include "policy/internal.h"
#include "policy/policy.h"
#include "sandbox-users/users.h"

#define AGENT 10100

/* The closing mark's key in the root's /data/pistis, as `pistisd users ensure-base` makes
 * it (a walk only reads it). */
static int make_mark_key(int root_fd)
{
	_cleanup_close_ int dfd = -1;

	(void)mkdirat(root_fd, "data", 0755);
	(void)mkdirat(root_fd, "data/pistis", 0755);
	dfd = openat(root_fd, "data/pistis", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return dfd < 0 ? -errno : key_file_ensure(dfd, USERS_MARK_KEY_FILE, USERS_MARK_KEY_SIZE);
}

/* The mark's name under the root's key ("" without one). */
static const char *mark_name_of(int root_fd)
{
	static char name[64];
	struct policy_mark_key k;

	policy_mark_key_init(&k, root_fd);
	name[0] = '\0';
	if (policy_mark_key_loaded(&k))
		snprintf(name, sizeof(name), "%s", k.name);
	policy_mark_key_done(&k);
	return name;
}

FIXTURE(root)
{
	char dir[64];
	int fd;
	struct policy_stats st;
	unsigned events[16];
};

FIXTURE_SETUP(root)
{
	if (geteuid() != 0)
		SKIP("needs root");
	strcpy(self->dir, "/tmp/pistis-test-policy.XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(self->dir));
	self->fd = open(self->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(self->fd, 0);
	ASSERT_EQ(make_mark_key(self->fd), 0);
}

FIXTURE_TEARDOWN(root)
{
	char cmd[128];

	close(self->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", self->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "# cleanup of %s failed\n", self->dir);
}

static void on_event(void *ud, const struct policy_event *ev)
{
	unsigned *counts = ud;

	counts[ev->kind]++;
}

static int run(struct _fixture_root *self, const char *json, enum policy_mode mode)
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_walk_opts o = {.mode = mode, .on_event = on_event, .userdata = self->events};
	int k;

	memset(self->events, 0, sizeof(self->events));
	k = policy_rules_parse(json, strlen(json), &r, &err);
	if (k < 0) {
		fprintf(stderr, "# rules: line %u: %s\n", err.line, err.msg);
		return k;
	}
	k = policy_walk(self->fd, r, &o, &self->st);
	policy_rules_free(r);
	return k;
}

static void mk(struct _fixture_root *self, const char *rel, mode_t mode, uid_t uid, gid_t gid)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", self->dir, rel);
	if (S_ISDIR(mode))
		mkdir(p, 0700);
	else if (S_ISFIFO(mode))
		mkfifo(p, 0600);
	else if (S_ISCHR(mode))
		mknod(p, S_IFCHR | 0600, makedev(1, 3));
	else if ((fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) >= 0)
		close(fd);
	if (lchown(p, uid, gid) < 0 || chmod(p, mode & 07777) < 0)
		fprintf(stderr, "# mk %s: %m\n", p);
}

static struct stat st_of(struct _fixture_root *self, const char *rel)
{
	char p[512];
	struct stat st = {0};

	snprintf(p, sizeof(p), "%s/%s", self->dir, rel);
	if (lstat(p, &st) < 0)
		st.st_mode = 0;
	return st;
}

static ssize_t xattr_of(struct _fixture_root *self, const char *rel, const char *name)
{
	char p[512], buf[256];

	snprintf(p, sizeof(p), "%s/%s", self->dir, rel);
	return lgetxattr(p, name, buf, sizeof(buf));
}

/* system() of inner run in the fixture's directory. */
static int sh_status(struct _fixture_root *self, const char *inner)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "cd '%s' && %s", self->dir, inner);
	return system(cmd);
}

static void sh(struct _fixture_root *self, const char *inner)
{
	if (sh_status(self, inner) != 0)
		fprintf(stderr, "# failed in %s: %s\n", self->dir, inner);
}

/* Trees w and w2 node for node the same: owners, modes, types and ACLs. */
#define W_SAME_AS_W2                                                                               \
	"for t in w w2; do (cd $t && find . -printf '%p %m %U %G %y\\n' | sort && "                \
	"getfacl -R -p -s . 2>/dev/null | grep -v '^# file' | sort) > $t.txt; done && "            \
	"cmp -s w.txt w2.txt"

#define W "[{\"path\":\"/w\",\"access\":\"write\"}]"
#define N "[{\"path\":\"/w\",\"access\":\"none\"}]"
#define R "[{\"path\":\"/w\",\"access\":\"read\"}]"

TEST_F(root, write_level_from_scratch_and_idempotent)
{
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/d", S_IFDIR | 06777, AGENT, AGENT);
	mk(self, "w/d/suid", S_IFREG | 06755, AGENT, AGENT);
	mk(self, "w/d/plain", S_IFREG | 0604, AGENT, AGENT);
	mk(self, "w/rootfile", S_IFREG | 0644, 0, 0);
	sh(self, "setfacl -m u:12345:rw w/d/plain && setfacl -d -m u:12345:rwx w/d");
	ASSERT_GT(xattr_of(self, "w/d/plain", "system.posix_acl_access"), 0);

	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	struct stat s = st_of(self, "w/d");
	EXPECT_EQ(s.st_mode & 07777, 02770u);
	EXPECT_EQ(s.st_uid, (uid_t)AGENT); /* agents' files stay theirs */
	EXPECT_EQ(s.st_gid, USERS_SANDBOX_GID);
	s = st_of(self, "w/d/suid");
	EXPECT_EQ(s.st_mode & 07777, 0770u); /* setuid/setgid never survive */
	s = st_of(self, "w/d/plain");
	EXPECT_EQ(s.st_mode & 07777, 0660u);
	s = st_of(self, "w/rootfile");
	EXPECT_EQ(s.st_uid, 0u); /* root-owned stays root's */
	EXPECT_EQ(s.st_mode & 07777, 0660u);
	EXPECT_EQ(xattr_of(self, "w/d/plain", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "w/d", "system.posix_acl_default"), POLICY_DEFAULT_ACL_SIZE);
	EXPECT_EQ(xattr_of(self, "w", "system.posix_acl_default"), POLICY_DEFAULT_ACL_SIZE);

	/* A file an agent creates with umask 077 stays group-writable. */
	sh(self, "umask 077 && touch w/d/new && stat -c %a w/d/new > /tmp/.pol-new-mode");
	FILE *f = fopen("/tmp/.pol-new-mode", "re");
	char m[16] = "";
	ASSERT_NOT_NULL(f);
	ASSERT_NOT_NULL(fgets(m, sizeof(m), f));
	fclose(f);
	unlink("/tmp/.pol-new-mode");
	EXPECT_STREQ(m, "660\n");

	/* Re-apply only reads. */
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.changed, 0u);
	ASSERT_EQ(run(self, W, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 0u);
}

/* The xattr list is first asked for in a small buffer: a node whose list is longer (many
 * user xattrs, each a long name) is read again in full, and a planted ACL among them is
 * still seen and removed, on a file and on a directory. */
TEST_F(root, acls_found_behind_a_long_xattr_list)
{
	char p[512], name[96];

	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/d", S_IFDIR | 0755, AGENT, AGENT);
	mk(self, "w/d/f", S_IFREG | 0644, AGENT, AGENT);
	for (int i = 0; i < 12; i++) {
		snprintf(name, sizeof(name),
			 "user.a-rather-long-attribute-name-to-fill-the-list-%02d", i);
		snprintf(p, sizeof(p), "%s/w/d/f", self->dir);
		ASSERT_EQ(lsetxattr(p, name, "x", 1, 0), 0);
		snprintf(p, sizeof(p), "%s/w/d", self->dir);
		ASSERT_EQ(lsetxattr(p, name, "x", 1, 0), 0);
	}
	snprintf(p, sizeof(p), "%s/w/d/f", self->dir);
	ASSERT_GT(llistxattr(p, NULL, 0), 600);
	sh(self, "setfacl -m u:12345:rw w/d/f && setfacl -m u:12345:rwx w/d && "
		 "setfacl -d -m u:12345:rwx w/d");
	ASSERT_GT(xattr_of(self, "w/d/f", "system.posix_acl_access"), 0);

	ASSERT_EQ(run(self, W, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 3u); /* w, w/d, w/d/f */
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	EXPECT_EQ(xattr_of(self, "w/d/f", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "w/d", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "w/d", "system.posix_acl_default"), POLICY_DEFAULT_ACL_SIZE);
	EXPECT_EQ(st_of(self, "w/d/f").st_mode & 07777, 0660u);
	ASSERT_EQ(run(self, W, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 0u);
}

/* An access ACL whose mask equals the group bits the rule gives leaves the mode as it is:
 * statx alone cannot tell such a node from a conforming one. A re-apply still finds every
 * one by its ACL probe and strips it: on a file whose neighbours conform (looked at by
 * name), on files reached right after a sibling that needed changes (the walk opens those
 * O_PATH first), on a conforming write directory (access ACL, foreign default ACL), and
 * under a read rule (a default ACL on a directory, which read directories never keep). */
TEST_F(root, acls_that_keep_the_mode_are_found_on_a_reapply)
{
	static const char *const busy[] = {"w/d2/p", "w/d2/q", "w/d2/r"};
	const char *rules = "[{\"path\":\"/w\",\"access\":\"write\"},"
			    "{\"path\":\"/r\",\"access\":\"read\"}]";

	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "r", S_IFDIR | 0755, AGENT, AGENT);
	mk(self, "r/sub", S_IFDIR | 0777, AGENT, AGENT);
	mk(self, "r/sub/f", S_IFREG | 0666, AGENT, AGENT);
	mk(self, "w/d3", S_IFDIR | 0755, AGENT, AGENT);
	for (int i = 0; i < 2; i++) {
		char d[16], f[32];

		snprintf(d, sizeof(d), "w/d%d", i + 1);
		mk(self, d, S_IFDIR | 0755, AGENT, AGENT);
		for (char c = 'a'; c <= 'z'; c++) {
			snprintf(f, sizeof(f), "%s/%c", d, c);
			mk(self, f, S_IFREG | 0644, AGENT, AGENT);
		}
	}
	ASSERT_EQ(run(self, rules, POLICY_APPLY), 0);
	ASSERT_EQ(self->st.errors, 0u);
	ASSERT_EQ(run(self, rules, POLICY_CHECK), 0);
	ASSERT_EQ(self->st.violations, 0u);

	/* d1: all conforming but c; d2: x and y among files that all need a change, so at
	 * least one of them comes right after a changed sibling, whatever the order. */
	for (size_t i = 0; i < sizeof(busy) / sizeof(busy[0]); i++)
		ASSERT_EQ(fchmodat(self->fd, busy[i], 0666, 0), 0);
	sh(self, "setfacl -m u:12345:rw,m::rw w/d1/c && setfacl -m u:12345:rw,m::rw w/d2/x && "
		 "setfacl -m g:12345:rw,m::rw w/d2/y && "
		 "setfacl -m u:12345:rwx,m::rwx w/d3 && setfacl -d -m u:12345:rwx w/d3 && "
		 "setfacl -m u:12345:rx,m::rx r/sub && setfacl -d -m u:12345:rwx r/sub && "
		 "setfacl -m u:12345:r,m::r r/sub/f");
	ASSERT_GT(xattr_of(self, "w/d1/c", "system.posix_acl_access"), 0);
	ASSERT_GT(xattr_of(self, "r/sub", "system.posix_acl_default"), 0);
	ASSERT_GT(xattr_of(self, "w/d3", "system.posix_acl_default"), POLICY_DEFAULT_ACL_SIZE);
	/* The modes say nothing. */
	EXPECT_EQ(st_of(self, "w/d1/c").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w/d2/x").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w/d2/y").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w/d3").st_mode & 07777, 02770u);
	EXPECT_EQ(st_of(self, "r/sub").st_mode & 07777, 0755u);
	EXPECT_EQ(st_of(self, "r/sub/f").st_mode & 07777, 0644u);

	ASSERT_EQ(run(self, rules, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 9u); /* c, x, y, p, q, r, d3, sub, sub/f */
	ASSERT_EQ(run(self, rules, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	EXPECT_EQ(self->st.changed, 9u);
	EXPECT_EQ(xattr_of(self, "w/d1/c", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "w/d2/x", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "w/d2/y", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "w/d3", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "w/d3", "system.posix_acl_default"), POLICY_DEFAULT_ACL_SIZE);
	EXPECT_EQ(xattr_of(self, "r/sub", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "r/sub", "system.posix_acl_default"), -1);
	EXPECT_EQ(xattr_of(self, "r/sub/f", "system.posix_acl_access"), -1);
	EXPECT_EQ(st_of(self, "w/d2/x").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "r/sub/f").st_mode & 07777, 0644u);
	EXPECT_EQ(st_of(self, "r/sub/f").st_uid, 0u);
	ASSERT_EQ(run(self, rules, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 0u);
}

TEST_F(root, none_and_read_levels)
{
	mk(self, "w", S_IFDIR | 02777, AGENT, USERS_SANDBOX_GID);
	mk(self, "w/exe", S_IFREG | 04775, AGENT, AGENT);
	mk(self, "w/f", S_IFREG | 0666, AGENT, AGENT);
	ASSERT_EQ(run(self, R, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "w").st_mode & 07777, 0755u);
	EXPECT_EQ(st_of(self, "w").st_uid, 0u);
	EXPECT_EQ(st_of(self, "w/exe").st_mode & 07777, 0755u);
	EXPECT_EQ(st_of(self, "w/f").st_mode & 07777, 0644u);
	EXPECT_EQ(st_of(self, "w/f").st_gid, 0u);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "w").st_mode & 07777, 0700u);
	EXPECT_EQ(st_of(self, "w/exe").st_mode & 07777, 0700u);
	EXPECT_EQ(st_of(self, "w/f").st_mode & 07777, 0600u);
	/* A plan and a check change nothing; check finds the tree conforming. */
	mk(self, "w/g", S_IFREG | 0644, AGENT, AGENT);
	ASSERT_EQ(run(self, N, POLICY_PLAN), 0);
	EXPECT_EQ(self->st.changed, 1u);
	EXPECT_EQ(st_of(self, "w/g").st_mode & 07777, 0644u);
	ASSERT_EQ(run(self, N, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 1u);
	EXPECT_EQ(st_of(self, "w/g").st_uid, (uid_t)AGENT);
}

TEST_F(root, secrets_dir_stays_pi_tools)
{
	mk(self, "data", S_IFDIR | 0755, 0, 0);
	mk(self, "data/.secrets", S_IFDIR | 0755, 0, 0);
	mk(self, "data/.secrets/token", S_IFREG | 0644, 0, 0);
	mk(self, "data/other", S_IFREG | 0644, 0, 0);
	ASSERT_EQ(run(self, "[{\"path\":\"/data\",\"access\":\"none\"}]", POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "data/.secrets").st_uid, USERS_TOOLS_UID);
	EXPECT_EQ(st_of(self, "data/.secrets").st_mode & 07777, 0700u);
	EXPECT_EQ(st_of(self, "data/.secrets/token").st_uid, USERS_TOOLS_UID);
	EXPECT_EQ(st_of(self, "data/.secrets/token").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "data/other").st_uid, 0u);
	EXPECT_EQ(st_of(self, "data").st_uid, 0u);
}

/* Under a write rule, root's and pi-tools' files and directories that no agent may read
 * and that no walk closed (an agent moved one in from a directory it can write, or a
 * trusted script made one) are left as they are: opened to pi-sandbox they would be every
 * agent's (docs/policy.md, "Root's private files"). */
TEST_F(root, roots_private_files_in_a_write_tree_stay_closed)
{
	if (!policy_marks_supported(self->fd, ""))
		SKIP("no user.* xattrs on this file system");
	mk(self, "w", S_IFDIR | 0700, 0, 0); /* the rule's own path: the operator's */
	mk(self, "w/p", S_IFDIR | 0755, AGENT, AGENT);
	mk(self, "w/p/key", S_IFREG | 0600, 0, 0);
	mk(self, "w/p/rootgrp", S_IFREG | 0640, 0, 0);
	mk(self, "w/p/tools", S_IFREG | 0600, USERS_TOOLS_UID, USERS_TOOLS_UID);
	mk(self, "w/p/keys", S_IFDIR | 0700, 0, 0);
	mk(self, "w/p/keys/id", S_IFREG | 0644, 0, 0);
	mk(self, "w/p/shared", S_IFREG | 0640, 0, USERS_SANDBOX_GID);
	mk(self, "w/p/open", S_IFREG | 0644, 0, 0);
	mk(self, "w/p/entered", S_IFDIR | 0711, 0, 0);
	/* An access ACL: only backup (34) may read it, through a named entry (mask r). */
	mk(self, "w/p/acl", S_IFREG | 0600, 0, 0);
	sh(self, "setfacl -m u:34:r w/p/acl");
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->events[POLICY_EV_PRIVATE], 5u);
	EXPECT_EQ(st_of(self, "w/p/acl").st_gid, 0u);
	EXPECT_GT(xattr_of(self, "w/p/acl", POLICY_XATTR_ACL_ACCESS), 0);
	EXPECT_EQ(self->st.violations, 0u);
	EXPECT_EQ(self->st.errors, 0u);
	EXPECT_EQ(st_of(self, "w/p/key").st_gid, 0u);
	EXPECT_EQ(st_of(self, "w/p/key").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/p/rootgrp").st_mode & 07777, 0640u);
	EXPECT_EQ(st_of(self, "w/p/tools").st_gid, USERS_TOOLS_UID);
	EXPECT_EQ(st_of(self, "w/p/tools").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/p/keys").st_mode & 07777, 0700u);
	EXPECT_EQ(st_of(self, "w/p/keys/id").st_gid, 0u); /* not entered */
	{
		/* explain says so: nothing implied below the directory apply leaves. */
		struct policy_rules *r = NULL;
		struct policy_error err;
		_cleanup_free_ struct policy_explain *ex = calloc(1, sizeof(*ex));

		ASSERT_NOT_NULL(ex);
		ASSERT_EQ(policy_rules_parse(W, strlen(W), &r, &err), 0);
		ASSERT_EQ(policy_explain(self->fd, r, "/w/p/keys/id", (uid_t)-1, NULL, 0, ex), 0);
		EXPECT_STREQ(ex->private_at, "/w/p/keys");
		EXPECT_FALSE(ex->target_private_left);
		ASSERT_EQ(policy_explain(self->fd, r, "/w/p/keys", (uid_t)-1, NULL, 0, ex), 0);
		EXPECT_STREQ(ex->private_at, "");
		EXPECT_TRUE(ex->target_private_left);
		ASSERT_EQ(policy_explain(self->fd, r, "/w/p/entered/x", (uid_t)-1, NULL, 0, ex), 0);
		EXPECT_STREQ(ex->private_at, "");
		policy_rules_free(r);
	}
	/* Agents could read these already: the rule's as ever. */
	EXPECT_EQ(st_of(self, "w").st_gid, (gid_t)USERS_SANDBOX_GID);
	EXPECT_EQ(st_of(self, "w/p/shared").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w/p/open").st_gid, (gid_t)USERS_SANDBOX_GID);
	EXPECT_EQ(st_of(self, "w/p/entered").st_mode & 07777, 02770u);
	/* Marks an agent put on its own file (the first version's name, another key's, this
	 * key's with a made-up tag) count for nothing and are taken off. */
	mk(self, "w/p/mine", S_IFREG | 0600, AGENT, AGENT);
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd),
			 "setfattr -n user.pistis.closed -v 1 w/p/mine && "
			 "setfattr -n user.pistis.closed.0badc0de -v 1 w/p/mine && "
			 "setfattr -n %s -v 0x02000102030405060708090a0b0c0d0e0f w/p/mine",
			 mark_name_of(self->fd));
		sh(self, cmd);
	}
	EXPECT_EQ(xattr_of(self, "w/p/mine", mark_name_of(self->fd)), (ssize_t)POLICY_MARK_SIZE);
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "w/p/mine").st_mode & 07777, 0660u);
	EXPECT_LT(xattr_of(self, "w/p/mine", mark_name_of(self->fd)), 0);
	EXPECT_LT(xattr_of(self, "w/p/mine", POLICY_XATTR_CLOSED_V1), 0);
	EXPECT_LT(xattr_of(self, "w/p/mine", POLICY_XATTR_CLOSED_V1 ".0badc0de"), 0);
	/* check: tighter than the rule, never looser: listed, no violation. */
	ASSERT_EQ(run(self, W, POLICY_CHECK), 0);
	EXPECT_EQ(self->events[POLICY_EV_PRIVATE], 5u);
	EXPECT_EQ(self->st.violations, 0u);
	/* A rule's own path in a directory agents may write may be root's file an agent put
	 * there (the real one renamed away): not the operator's then. */
	mk(self, "tmp", S_IFDIR | 01777, 0, 0);
	mk(self, "tmp/w", S_IFREG | 0600, 0, 0);
	ASSERT_EQ(run(self, "[{\"path\":\"/tmp/w\",\"access\":\"write\"}]", POLICY_APPLY), 0);
	EXPECT_EQ(self->events[POLICY_EV_PRIVATE], 1u);
	EXPECT_EQ(st_of(self, "tmp/w").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "tmp/w").st_gid, 0u);
}

/* The mark counts only with the tag made for its node with root's key
 * (/data/pistis/mark.key): an agent who may write root's shared 0660 file and puts a mark
 * on it (even a real one, read off a node while it was being opened) before root makes
 * the file 0600, a copy made with its xattrs, and a new file on the old one's name all
 * stay closed under a write rule. A key that cannot be used, or none, opens nothing;
 * a new key's none rule marks anew. */
TEST_F(root, forged_and_copied_marks_open_nothing)
{
	char real[POLICY_MARK_SIZE + 1], p[512], name[64];
	ssize_t n;

	if (!policy_marks_supported(self->fd, ""))
		SKIP("no user.* xattrs on this file system");
	snprintf(name, sizeof(name), "%s", mark_name_of(self->fd));
	ASSERT_EQ(strlen(name), strlen(POLICY_XATTR_CLOSED_V1) + 9);
	mk(self, "w", S_IFDIR | 0755, AGENT, AGENT);
	mk(self, "w/closed", S_IFREG | 0644, AGENT, AGENT);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	snprintf(p, sizeof(p), "%s/w/closed", self->dir);
	n = lgetxattr(p, name, real, sizeof(real));
	ASSERT_EQ(n, (ssize_t)POLICY_MARK_SIZE);
	/* Planted while the files were agents' to write, then made root's private ones. */
	mk(self, "w/shared", S_IFREG | 0660, 0, USERS_SANDBOX_GID);
	mk(self, "w/v1", S_IFREG | 0660, 0, USERS_SANDBOX_GID);
	snprintf(p, sizeof(p), "%s/w/shared", self->dir);
	ASSERT_EQ(lsetxattr(p, name, real, (size_t)n, 0), 0);
	sh(self, "setfattr -n user.pistis.closed -v 1 w/v1 && chmod 600 w/shared w/v1");
	/* Copied with its xattrs (cp -a), and a new file put on a closed one's name with the
	 * old one's mark. */
	sh(self, "cp -a w/closed w/copy");
	sh(self, "mv w/closed w/old && touch w/closed && chmod 600 w/closed");
	snprintf(p, sizeof(p), "%s/w/closed", self->dir);
	ASSERT_EQ(lsetxattr(p, name, real, (size_t)n, 0), 0);
	EXPECT_EQ(xattr_of(self, "w/copy", name), (ssize_t)POLICY_MARK_SIZE);
	/* check judges them as apply will: left, no violation (the two violations: w and
	 * w/old, which the none rule closed, are to open). */
	ASSERT_EQ(run(self, W, POLICY_CHECK), 0);
	EXPECT_EQ(self->events[POLICY_EV_PRIVATE], 4u);
	EXPECT_EQ(self->st.violations, 2u);
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	EXPECT_EQ(self->events[POLICY_EV_PRIVATE], 4u);
	EXPECT_EQ(st_of(self, "w/shared").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/v1").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/copy").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/copy").st_gid, 0u);
	EXPECT_EQ(st_of(self, "w/closed").st_mode & 07777, 0600u);
	/* The node the mark was made for opens. */
	EXPECT_EQ(st_of(self, "w/old").st_mode & 07777, 0660u);
	EXPECT_LT(xattr_of(self, "w/old", name), 0);
	/* A key that is not root's alone is never used, and the walk says so once: no
	 * mark counts, so nothing closed opens but the rule's own path (the operator's), and
	 * nothing is marked or unmarked. */
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	sh(self, "chmod 644 data/pistis/mark.key");
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 1u);
	EXPECT_EQ(self->events[POLICY_EV_PRIVATE], 5u);
	EXPECT_EQ(st_of(self, "w/old").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w").st_mode & 07777, 02770u);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 1u);
	EXPECT_EQ(xattr_of(self, "w/old", name), (ssize_t)POLICY_MARK_SIZE);
	/* Nor a missing one: the marks are no one's; a none rule closes without marking. */
	sh(self, "rm data/pistis/mark.key");
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	EXPECT_EQ(st_of(self, "w/old").st_mode & 07777, 0600u);
	mk(self, "w/new", S_IFREG | 0644, AGENT, AGENT);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	EXPECT_EQ(st_of(self, "w/new").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/new").st_uid, 0u);
	EXPECT_EQ(st_of(self, "data/pistis/mark.key").st_mode, 0u); /* a walk makes none */
	/* A new key (ensure-base): the old key's marks are replaced under none, by name. */
	ASSERT_EQ(make_mark_key(self->fd), 0);
	ASSERT_STRNE(mark_name_of(self->fd), name);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	EXPECT_EQ(xattr_of(self, "w/old", mark_name_of(self->fd)), (ssize_t)POLICY_MARK_SIZE);
	EXPECT_LT(xattr_of(self, "w/old", name), 0);
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "w/old").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w/new").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w").st_mode & 07777, 02770u);
}

/* Which xattr names are marks, and whose: an agent chooses every name on its own nodes. */
TEST_F(root, mark_names_told_apart)
{
	struct policy_mark_key k;
	char ours[64], longer[80];

	policy_mark_key_init(&k, self->fd);
	ASSERT_TRUE(policy_mark_key_loaded(&k));
	snprintf(ours, sizeof(ours), "%s", k.name);
	snprintf(longer, sizeof(longer), "%s0", k.name);
	EXPECT_EQ(policy_mark_name_kind(&k, ours), POLICY_MARK_NAME_OURS);
	EXPECT_EQ(policy_mark_name_kind(&k, longer), POLICY_MARK_NAME_FOREIGN);
	EXPECT_EQ(policy_mark_name_kind(&k, "user.pistis.closed"), POLICY_MARK_NAME_FOREIGN);
	EXPECT_EQ(policy_mark_name_kind(&k, "user.pistis.closed."), POLICY_MARK_NAME_FOREIGN);
	EXPECT_EQ(policy_mark_name_kind(&k, "user.pistis.closed.0badc0de"),
		  POLICY_MARK_NAME_FOREIGN);
	EXPECT_EQ(policy_mark_name_kind(&k, "user.pistis.closedx"), POLICY_MARK_NAME_NONE);
	EXPECT_EQ(policy_mark_name_kind(&k, "user.pistis.close"), POLICY_MARK_NAME_NONE);
	EXPECT_EQ(policy_mark_name_kind(&k, "user.other"), POLICY_MARK_NAME_NONE);
	/* Without a key nothing is ours. */
	policy_mark_key_done(&k);
	sh(self, "rm data/pistis/mark.key");
	policy_mark_key_init(&k, self->fd);
	EXPECT_FALSE(policy_mark_key_loaded(&k));
	EXPECT_EQ(policy_mark_name_kind(&k, ours), POLICY_MARK_NAME_FOREIGN);
	policy_mark_key_done(&k);
}

/* What a none rule closes carries the mark, and a write rule opens it again. */
TEST_F(root, none_then_write_opens_what_none_closed)
{
	char M[64]; /* the mark's name under the fixture's key */

	snprintf(M, sizeof(M), "%s", mark_name_of(self->fd));
	if (!policy_marks_supported(self->fd, ""))
		SKIP("no user.* xattrs on this file system");
	mk(self, "w", S_IFDIR | 0755, AGENT, AGENT);
	mk(self, "w/f", S_IFREG | 0644, AGENT, AGENT);
	mk(self, "w/d", S_IFDIR | 0755, AGENT, AGENT);
	mk(self, "w/d/g", S_IFREG | 0600, 0, 0);
	mk(self, "w/fifo", S_IFIFO | 0644, AGENT, AGENT);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	EXPECT_EQ(st_of(self, "w/f").st_mode & 07777, 0600u);
	EXPECT_EQ(xattr_of(self, "w/f", M), (ssize_t)POLICY_MARK_SIZE);
	EXPECT_EQ(xattr_of(self, "w/d", M), (ssize_t)POLICY_MARK_SIZE);
	EXPECT_EQ(xattr_of(self, "w/d/g", M), (ssize_t)POLICY_MARK_SIZE); /* root's own too */
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.changed, 0u);
	/* root links a closed file elsewhere (a backup): still right as it is. */
	sh(self, "ln w/d/g g-backup");
	ASSERT_EQ(run(self, N, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.changed, 0u);
	EXPECT_EQ(self->st.violations, 0u);
	sh(self, "rm g-backup");
	/* A node closed before marks, or marked by the first version ("1", which an agent
	 * could forge): one more change each, no violation; then the node's own mark. */
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd),
			 "setfattr -x %s w/f && setfattr -x %s w/d && "
			 "setfattr -n user.pistis.closed -v 1 w/d",
			 M, M);
		sh(self, cmd);
	}
	ASSERT_EQ(run(self, N, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.changed, 2u);
	EXPECT_EQ(self->st.violations, 0u);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(xattr_of(self, "w/f", M), (ssize_t)POLICY_MARK_SIZE);
	EXPECT_EQ(xattr_of(self, "w/d", M), (ssize_t)POLICY_MARK_SIZE);
	EXPECT_LT(xattr_of(self, "w/d", POLICY_XATTR_CLOSED_V1), 0);
	/* none -> write: open again, unmarked; a FIFO cannot carry the mark: left closed
	 * (root's 0600 FIFO or socket moved in is a way into root's daemon). */
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->events[POLICY_EV_PRIVATE], 1u);
	EXPECT_EQ(st_of(self, "w/fifo").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/fifo").st_gid, 0u);
	EXPECT_EQ(st_of(self, "w/f").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w/d").st_mode & 07777, 02770u);
	EXPECT_EQ(st_of(self, "w/d/g").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w/d/g").st_gid, (gid_t)USERS_SANDBOX_GID);
	EXPECT_LT(xattr_of(self, "w/f", M), 0);
	EXPECT_LT(xattr_of(self, "w/d", M), 0);
	EXPECT_LT(xattr_of(self, "w/d/g", M), 0);
	ASSERT_EQ(run(self, W, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 0u);
	EXPECT_EQ(self->st.changed, 0u);
}

/* The depth bound marks what it closes, but never root's private directory: an agent that
 * may rename a directory above one (its own, or any root:pi-sandbox 02770 one of the write
 * tree) moved it to the bound and back, and the mark the bound left opened it (red team). */
TEST_F(root, depth_bound_never_marks_roots_private_directory)
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_walk_opts o = {.on_event = on_event, .max_depth = 3};
	const char *j = "[{\"path\":\"/w\",\"access\":\"write\"}]";

	if (!policy_marks_supported(self->fd, ""))
		SKIP("no user.* xattrs on this file system");
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/a", S_IFDIR | 0755, AGENT, AGENT);
	mk(self, "w/a/b", S_IFDIR | 0755, AGENT, AGENT);
	mk(self, "w/a/b/keys", S_IFDIR | 0700, 0, 0); /* depth 3: the bound */
	mk(self, "w/a/b/keys/notes", S_IFREG | 0644, 0, 0);
	mk(self, "w/a/b/mine", S_IFDIR | 0755, AGENT, AGENT);
	ASSERT_EQ(policy_rules_parse(j, strlen(j), &r, &err), 0);
	o.userdata = self->events;
	o.mode = POLICY_APPLY;
	memset(self->events, 0, sizeof(self->events));
	policy_walk(self->fd, r, &o, &self->st);
	EXPECT_EQ(self->events[POLICY_EV_TOO_DEEP], 2u);
	EXPECT_EQ(st_of(self, "w/a/b/keys").st_mode & 07777, 0700u);
	EXPECT_LT(xattr_of(self, "w/a/b/keys", mark_name_of(self->fd)), 0);
	/* the agent's: closed */
	EXPECT_EQ(xattr_of(self, "w/a/b/mine", mark_name_of(self->fd)), (ssize_t)POLICY_MARK_SIZE);
	/* The agent moves them up; the next apply opens what the bound closed, not root's. */
	sh(self, "mv w/a/b/keys w/a/b/mine w/");
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "w/mine").st_mode & 07777, 02770u);
	EXPECT_EQ(st_of(self, "w/keys").st_mode & 07777, 0700u);
	EXPECT_EQ(st_of(self, "w/keys/notes").st_mode & 07777, 0644u);
	EXPECT_EQ(st_of(self, "w/keys/notes").st_gid, 0u);
	policy_rules_free(r);
}

/* The probe for user.* xattrs: by fd, and by name in a directory, never following name. */
TEST_F(root, closing_marks_probed_per_file_system)
{
	int proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);

	ASSERT_GE(proc, 0);
	EXPECT_FALSE(policy_marks_supported(proc, ""));
	EXPECT_FALSE(policy_marks_supported(proc, "sys"));
	close(proc);
	mk(self, "d", S_IFDIR | 0755, 0, 0);
	sh(self, "ln -s /proc lnk");
	if (!policy_marks_supported(self->fd, ""))
		SKIP("no user.* xattrs on this file system");
	EXPECT_TRUE(policy_marks_supported(self->fd, "d"));
	EXPECT_TRUE(policy_marks_supported(self->fd, "lnk")); /* the link itself: not /proc */
	/* Any other failure (a name gone for a moment) keeps the marks: fail closed. */
	EXPECT_TRUE(policy_marks_supported(self->fd, "missing"));
}

TEST_F(root, symlinks_never_followed)
{
	mk(self, "outside", S_IFDIR | 0755, 0, 0);
	mk(self, "outside/secret", S_IFREG | 0600, 0, 0);
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/sub", S_IFDIR | 0755, 0, 0);
	sh(self, "ln -s ../outside/secret w/last && ln -s ../outside w/mid && ln -s / w/root");
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "outside/secret").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "outside/secret").st_gid, 0u);
	EXPECT_EQ(st_of(self, "outside").st_mode & 07777, 0755u);
	EXPECT_EQ(self->st.symlinks, 3u);
	EXPECT_EQ(self->st.errors, 0u); /* inside the tree: left alone, not an error */
	/* A rule through a symlink (middle or last component) is refused, not followed. */
	ASSERT_EQ(run(self, "[{\"path\":\"/w/mid/secret\",\"access\":\"write\"}]", POLICY_APPLY),
		  0);
	EXPECT_EQ(self->events[POLICY_EV_SYMLINK], 1u);
	EXPECT_EQ(st_of(self, "outside/secret").st_mode & 07777, 0600u);
	ASSERT_EQ(run(self, "[{\"path\":\"/w/mid\",\"access\":\"write\"}]", POLICY_APPLY), 0);
	EXPECT_EQ(self->events[POLICY_EV_SYMLINK], 1u);
	EXPECT_EQ(st_of(self, "outside").st_mode & 07777, 0755u);
	/* The same with the per-component fallback instead of openat2. */
	policy_resolve_force_fallback(true);
	ASSERT_EQ(run(self, "[{\"path\":\"/w/mid/secret\",\"access\":\"write\"}]", POLICY_APPLY),
		  0);
	EXPECT_EQ(self->events[POLICY_EV_SYMLINK], 1u);
	ASSERT_EQ(run(self, "[{\"path\":\"/w/sub\",\"access\":\"none\"}]", POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "w/sub").st_mode & 07777, 0700u);
	policy_resolve_force_fallback(false);
	EXPECT_EQ(st_of(self, "outside/secret").st_mode & 07777, 0600u);

	struct policy_rules *r = NULL;
	struct policy_error err;
	const char *j = "[\n{\"path\":\"/w\",\"access\":\"write\"},\n{\"path\":\"/w/"
			"mid\",\"access\":\"none\"}]";
	ASSERT_EQ(policy_rules_parse(j, strlen(j), &r, &err), 0);
	EXPECT_EQ(policy_rules_check_fs(self->fd, r, &err), -ELOOP);
	EXPECT_EQ(err.line, 3u);
	/* The same link made by an agent (where it may write) is the walk's to report: one
	 * planted link must not hold up the file's other rules, a tightening among them. */
	ASSERT_EQ(fchownat(self->fd, "w/mid", 10100, 10100, AT_SYMLINK_NOFOLLOW), 0);
	EXPECT_EQ(policy_rules_check_fs(self->fd, r, &err), 0);
	{
		int dfd = -1;
		struct stat lst;

		ASSERT_EQ(policy_first_symlink(self->fd, "/w/mid/deeper", &dfd, &lst), 1);
		EXPECT_TRUE(S_ISLNK(lst.st_mode));
		EXPECT_EQ(lst.st_uid, 10100u);
		ASSERT_EQ(fstat(dfd, &lst), 0);
		EXPECT_EQ(lst.st_ino, st_of(self, "w").st_ino); /* the directory that holds it */
		close(dfd);
		EXPECT_EQ(policy_first_symlink(self->fd, "/w/sub", &dfd, &lst), 0);
		EXPECT_EQ(policy_first_symlink(self->fd, "/w/none/x", &dfd, &lst), 0);
	}
	policy_rules_free(r);
	ASSERT_EQ(run(self, j, POLICY_APPLY), 0); /* applied, and the link reported */
	EXPECT_EQ(self->events[POLICY_EV_SYMLINK], 1u);
	EXPECT_EQ(self->st.errors, 1u);
	/* The file's other rule: /w pinned (a stricter rule below). w/sub was closed by a
	 * none rule while agents could write /w (and so rename it there): not marked, it
	 * stays closed (rule_path_movable). */
	EXPECT_EQ(st_of(self, "w").st_mode & 07777, 03770u);
	EXPECT_EQ(st_of(self, "w/sub").st_mode & 07777, 0700u);
}

/* A rule's own path (or a directory on the way) that is a symlink when the walk gets
 * there was planted after the rules were checked (policy_rules_check_fs refuses one): the
 * rule is not applied, and that is an error (apply and check fail), never a symlink
 * silently "left alone". The hook stages the race inside the walk, between its fstatat of
 * the rule's path and its open. */
static const char *plant_target;
static void (*rule_hook)(int, const char *);

/* The walk's weak hook (policy/internal.h), defined here: what walk_checked set runs. */
void policy_walk_rule_hook(int dir_fd, const char *name)
{
	if (rule_hook)
		rule_hook(dir_fd, name);
}

static void plant_symlink(int dir_fd, const char *name)
{
	if (renameat(dir_fd, name, dir_fd, "away") < 0 || symlinkat(plant_target, dir_fd, name) < 0)
		fprintf(stderr, "# planting the symlink failed: %m\n");
}

static int walk_checked(struct _fixture_root *self, const char *json, enum policy_mode mode,
			void (*hook)(int, const char *))
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_walk_opts o = {.mode = mode, .on_event = on_event, .userdata = self->events};
	int k;

	memset(self->events, 0, sizeof(self->events));
	k = policy_rules_parse(json, strlen(json), &r, &err);
	if (k == 0)
		k = policy_rules_check_fs(self->fd, r, &err); /* a real path when loaded */
	if (k == 0) {
		rule_hook = hook;
		k = policy_walk(self->fd, r, &o, &self->st);
		rule_hook = NULL;
	}
	policy_rules_free(r);
	return k;
}

TEST_F(root, rule_path_raced_into_a_symlink_is_an_error)
{
	static const enum policy_mode modes[] = {POLICY_APPLY, POLICY_CHECK, POLICY_PLAN};

	mk(self, "outside", S_IFDIR | 0755, 0, 0);
	mk(self, "outside/secret", S_IFREG | 0600, 0, 0);
	mk(self, "outside/b", S_IFDIR | 0755, 0, 0);
	for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
		/* A directory rule: swapped for a symlink to a directory it must not touch. */
		mk(self, "w", S_IFDIR | 0777, AGENT, AGENT);
		plant_target = "outside";
		ASSERT_EQ(walk_checked(self, W, modes[i], plant_symlink), 0);
		EXPECT_EQ(self->events[POLICY_EV_SYMLINK], 1u);
		EXPECT_EQ(self->st.errors, 1u);
		EXPECT_EQ(self->st.symlinks, 0u);
		EXPECT_EQ(self->st.changed, 0u);
		EXPECT_EQ(st_of(self, "outside").st_mode & 07777, 0755u);
		EXPECT_EQ(st_of(self, "outside").st_gid, 0u);
		EXPECT_EQ(st_of(self, "away").st_mode & 07777,
			  0777u); /* the rule's dir: as it was */
		sh(self, "rm w && mv away w");
		/* The same from the per-component resolver. */
		policy_resolve_force_fallback(true);
		ASSERT_EQ(walk_checked(self, W, modes[i], plant_symlink), 0);
		policy_resolve_force_fallback(false);
		EXPECT_EQ(self->events[POLICY_EV_SYMLINK], 1u);
		EXPECT_EQ(self->st.errors, 1u);
		EXPECT_EQ(st_of(self, "outside").st_mode & 07777, 0755u);
		sh(self, "rm w && rmdir away");

		/* A file rule: swapped for a symlink to a file. */
		mk(self, "f", S_IFREG | 0666, AGENT, AGENT);
		plant_target = "outside/secret";
		ASSERT_EQ(walk_checked(self, "[{\"path\":\"/f\",\"access\":\"write\"}]", modes[i],
				       plant_symlink),
			  0);
		EXPECT_EQ(self->events[POLICY_EV_SYMLINK], 1u);
		EXPECT_EQ(self->st.errors, 1u);
		EXPECT_EQ(self->st.symlinks, 0u);
		EXPECT_EQ(st_of(self, "outside/secret").st_mode & 07777, 0600u);
		EXPECT_EQ(st_of(self, "outside/secret").st_gid, 0u);
		sh(self, "rm f away");
	}

	/* Between the check and the walk: a directory on the way to the rule's path. */
	mk(self, "a", S_IFDIR | 0777, AGENT, AGENT);
	mk(self, "a/b", S_IFDIR | 0777, AGENT, AGENT);
	plant_target = "outside";
	ASSERT_EQ(walk_checked(self, "[{\"path\":\"/a/b\",\"access\":\"write\"}]", POLICY_APPLY,
			       NULL),
		  0);
	EXPECT_EQ(self->events[POLICY_EV_SYMLINK], 0u); /* nothing planted yet */
	EXPECT_EQ(st_of(self, "a/b").st_gid, (gid_t)USERS_SANDBOX_GID);
	struct policy_rules *r = NULL;
	struct policy_error err;
	const char *j = "[{\"path\":\"/a/b\",\"access\":\"write\"}]";
	struct policy_walk_opts o = {
		.mode = POLICY_APPLY, .on_event = on_event, .userdata = self->events};
	ASSERT_EQ(policy_rules_parse(j, strlen(j), &r, &err), 0);
	ASSERT_EQ(policy_rules_check_fs(self->fd, r, &err), 0);
	sh(self, "mv a a.away && ln -s outside a");
	memset(self->events, 0, sizeof(self->events));
	ASSERT_EQ(policy_walk(self->fd, r, &o, &self->st), 0);
	policy_rules_free(r);
	EXPECT_EQ(self->events[POLICY_EV_SYMLINK], 1u);
	EXPECT_EQ(self->st.errors, 1u);
	EXPECT_EQ(st_of(self, "outside/b").st_mode & 07777, 0755u);
	EXPECT_EQ(st_of(self, "outside/b").st_gid, 0u);
}

/* security.capability, as `setcap cap_setuid+ep` writes it (VFS_CAP_REVISION_2, effective;
 * permitted: CAP_SETUID). */
static int set_caps(struct _fixture_root *self, const char *rel)
{
	static const uint8_t caps[20] = {0x01, 0x00, 0x00, 0x02, 0x80};
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", self->dir, rel);
	return lsetxattr(p, "security.capability", caps, sizeof(caps), 0) < 0 ? -errno : 0;
}

/* File capabilities lift whoever runs the file like a setuid bit (an agent of a root with
 * trusted commands keeps CAP_SETUID in its bounding set), and a shared mmap write changes
 * the bytes without dropping them. chown drops them, but a write rule does not chown a
 * file that is pi-sandbox's already (root's file made in a write tree's setgid directory):
 * root's cap_setuid binary became root:pi-sandbox 0770, writable by every agent, with its
 * capabilities. They never survive a walk, at any level, as setuid bits do not. */
TEST_F(root, file_capabilities_never_survive)
{
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/rootcap", S_IFREG | 0755, 0, USERS_SANDBOX_GID);
	mk(self, "w/agentcap", S_IFREG | 0770, AGENT, USERS_SANDBOX_GID);
	ASSERT_EQ(set_caps(self, "w/rootcap"), 0);
	ASSERT_EQ(set_caps(self, "w/agentcap"), 0);

	ASSERT_EQ(run(self, W, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 3u); /* w, rootcap's mode and caps, agentcap's caps */
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.errors, 0u);
	EXPECT_EQ(st_of(self, "w/rootcap").st_mode & 07777, 0770u);
	EXPECT_EQ(st_of(self, "w/rootcap").st_uid, 0u);
	EXPECT_EQ(xattr_of(self, "w/rootcap", "security.capability"), -1);
	EXPECT_EQ(xattr_of(self, "w/agentcap", "security.capability"), -1);
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.changed, 0u);
	ASSERT_EQ(run(self, W, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 0u);

	/* A file agents may write with a second name: the trim takes them too. */
	if (policy_hardlinks_protected()) {
		ASSERT_EQ(set_caps(self, "w/rootcap"), 0);
		sh(self, "ln w/rootcap w/rootcap2");
		ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
		EXPECT_EQ(xattr_of(self, "w/rootcap", "security.capability"), -1);
		EXPECT_EQ(st_of(self, "w/rootcap").st_mode & 07777, 0770u);
		sh(self, "rm w/rootcap2");
	}

	/* Read and none: root's 0755 file, already right but for them. */
	ASSERT_EQ(run(self, R, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "w/rootcap").st_mode & 07777, 0755u);
	ASSERT_EQ(set_caps(self, "w/rootcap"), 0);
	ASSERT_EQ(run(self, R, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 1u);
	ASSERT_EQ(run(self, R, POLICY_APPLY), 0);
	EXPECT_EQ(xattr_of(self, "w/rootcap", "security.capability"), -1);
	EXPECT_EQ(st_of(self, "w/rootcap").st_mode & 07777, 0755u);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	ASSERT_EQ(set_caps(self, "w/rootcap"), 0);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(xattr_of(self, "w/rootcap", "security.capability"), -1);
	EXPECT_EQ(st_of(self, "w/rootcap").st_mode & 07777, 0700u);
}

TEST_F(root, hardlinks_left_alone)
{
	mk(self, "etc", S_IFDIR | 0755, 0, 0);
	mk(self, "etc/shadow", S_IFREG | 0640, 0, 42);
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	sh(self, "ln etc/shadow w/shadow-link");
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	struct stat s = st_of(self, "etc/shadow");
	EXPECT_EQ(s.st_mode & 07777, 0640u);
	EXPECT_EQ(s.st_gid, 42u);
	EXPECT_EQ(self->events[POLICY_EV_HARDLINK], 1u);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "etc/shadow").st_mode & 07777, 0640u);
	/* check: looser than "none" counts as a violation. */
	ASSERT_EQ(run(self, N, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 1u);
}

/* An agent's own inode linked into a tree that becomes "none" (its second name outside):
 * the walk takes its mode bits (the agent could write it, protected_hardlinks on) but
 * leaves its owner, who can chmod it back through the other name. So check keeps calling
 * it a violation after the apply, while a root-owned linked file tightened there is not. */
TEST_F(root, agents_linked_inode_in_a_closed_tree_is_a_violation)
{
	if (!policy_hardlinks_protected())
		SKIP("fs.protected_hardlinks is off");
	mk(self, "own", S_IFDIR | 0755, 0, 0);
	mk(self, "own/hl", S_IFREG | 0666, AGENT, AGENT);
	mk(self, "etc", S_IFDIR | 0755, 0, 0);
	mk(self, "etc/conf", S_IFREG | 0600, 0, 0);
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	sh(self, "ln own/hl w/api-key && ln etc/conf w/conf-link");
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "own/hl").st_mode & 07777, 0u);
	EXPECT_EQ(st_of(self, "own/hl").st_uid, (uid_t)AGENT);
	ASSERT_EQ(run(self, N, POLICY_CHECK), 0);
	EXPECT_EQ(self->st.violations, 1u);
	EXPECT_EQ(self->events[POLICY_EV_HARDLINK], 1u); /* root's conf is right as it is */
}

/* The trusted commands' trees under the shipped defaults' rules (docs/policy.md). */
static const char trusted_rules[] = "[{\"path\":\"/data/bin\",\"access\":\"read\"},"
				    "{\"path\":\"/data/trusted\",\"access\":\"read\"},"
				    "{\"path\":\"/data/.secrets\",\"access\":\"none\"}]";

/* check, then apply, of trusted_rules: n nodes left as agents_in_trusted each time, each
 * a violation in check and an error in apply. */
#define EXPECT_LEFT_IN_TRUSTED(n)                                                                  \
	do {                                                                                       \
		ASSERT_EQ(run(self, trusted_rules, POLICY_CHECK), 0);                              \
		EXPECT_EQ(self->events[POLICY_EV_AGENTS_IN_TRUSTED], (n));                         \
		EXPECT_GE(self->st.violations, (n));                                               \
		ASSERT_EQ(run(self, trusted_rules, POLICY_APPLY), 0);                              \
		EXPECT_EQ(self->events[POLICY_EV_AGENTS_IN_TRUSTED], (n));                         \
		EXPECT_EQ(self->st.errors, (n));                                                   \
	} while (0)

/* A volume's earlier life: an agent's script in /data/trusted and a directory of its own in
 * /data/bin (left from a write rule pistis no longer loads). The read rules would make them
 * root's, and then trusted: they are reported, left as they are, and not entered, while
 * root's files beside them are put right. */
TEST_F(root, agents_nodes_in_trusted_trees_never_become_roots)
{
	mk(self, "data", S_IFDIR | 0755, 0, 0);
	mk(self, "data/bin", S_IFDIR | 0755, 0, 0);
	mk(self, "data/trusted", S_IFDIR | 0755, 0, 0);
	mk(self, "data/trusted/zz-backdoor", S_IFREG | 0775, AGENT, AGENT);
	mk(self, "data/trusted/hello", S_IFREG | 0700, 0, 0);
	mk(self, "data/bin/tools", S_IFDIR | 0777, AGENT, AGENT);
	mk(self, "data/bin/tools/git", S_IFREG | 0777, AGENT, AGENT);
	/* the secrets: pi-tools' own file put right, an agent's never made pi-tools' */
	mk(self, "data/.secrets", S_IFDIR | 0700, USERS_TOOLS_UID, USERS_TOOLS_UID);
	mk(self, "data/.secrets/api-key", S_IFREG | 0640, USERS_TOOLS_UID, USERS_TOOLS_UID);
	mk(self, "data/.secrets/gh-token", S_IFREG | 0666, AGENT, AGENT);
	mk(self, "data/.secrets/ssh", S_IFDIR | 0777, AGENT, AGENT);
	/* links: an agent's on every agent's PATH and among the secrets are reported (never
	 * followed); root's, and an agent's outside these trees, are only counted */
	sh(self, "ln -s /workspaces/a/git data/bin/git && chown -h 10100:10100 data/bin/git && "
		 "ln -s /workspaces/a/t data/.secrets/npm-token && "
		 "chown -h 10100:10100 data/.secrets/npm-token && ln -s hello data/trusted/hi");
	EXPECT_LEFT_IN_TRUSTED(6u);
	EXPECT_EQ(self->st.symlinks, 3u);
	{
		struct stat l;
		char p[512];
		snprintf(p, sizeof(p), "%s/data/bin/git", self->dir);
		ASSERT_EQ(lstat(p, &l), 0);
		EXPECT_EQ(l.st_uid, (uid_t)AGENT);
	}
	EXPECT_EQ(st_of(self, "data/trusted/zz-backdoor").st_uid, (uid_t)AGENT);
	EXPECT_EQ(st_of(self, "data/trusted/zz-backdoor").st_mode & 07777, 0775u);
	EXPECT_EQ(st_of(self, "data/bin/tools").st_uid, (uid_t)AGENT);
	EXPECT_EQ(st_of(self, "data/bin/tools/git").st_uid, (uid_t)AGENT);
	EXPECT_EQ(st_of(self, "data/trusted/hello").st_mode & 07777, 0755u);
	EXPECT_EQ(st_of(self, "data/.secrets/gh-token").st_uid, (uid_t)AGENT);
	EXPECT_EQ(st_of(self, "data/.secrets/ssh").st_uid, (uid_t)AGENT);
	EXPECT_EQ(st_of(self, "data/.secrets/api-key").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "data/.secrets").st_uid, USERS_TOOLS_UID);
	/* the same files elsewhere under a read rule are root's, as the rule says */
	mk(self, "srv", S_IFDIR | 0755, 0, 0);
	mk(self, "srv/tool", S_IFREG | 0775, AGENT, AGENT);
	sh(self, "ln -s /etc srv/etc && chown -h 10100:10100 srv/etc");
	ASSERT_EQ(run(self, "[{\"path\":\"/srv\",\"access\":\"read\"}]", POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "srv/tool").st_uid, 0u);
	EXPECT_EQ(self->events[POLICY_EV_AGENTS_IN_TRUSTED], 0u);
	EXPECT_EQ(self->st.symlinks, 1u);
}

/* A root-owned file agents could write (an old write rule's root:pi-sandbox 0770, an agent's
 * group with g+w, o+w, an access ACL) holds bytes an agent may have chosen, moved or linked
 * into a trusted tree: never made root's or pi-tools' there, reported; one agents could
 * not write is put right as the rule says. */
TEST_F(root, agent_writable_roots_files_in_trusted_trees_left)
{
	mk(self, "data", S_IFDIR | 0755, 0, 0);
	mk(self, "data/bin", S_IFDIR | 02770, 0, USERS_SANDBOX_GID);
	mk(self, "data/trusted", S_IFDIR | 0755, 0, 0);
	mk(self, "data/.secrets", S_IFDIR | 0700, USERS_TOOLS_UID, USERS_TOOLS_UID);
	mk(self, "data/bin/git", S_IFREG | 0770, 0, USERS_SANDBOX_GID);
	mk(self, "data/bin/ro", S_IFREG | 0750, 0, USERS_SANDBOX_GID);
	mk(self, "data/trusted/rotate", S_IFREG | 0775, 0, AGENT);
	mk(self, "data/trusted/open", S_IFREG | 0757, 0, 0);
	mk(self, "data/trusted/acl", S_IFREG | 0755, 0, 0);
	mk(self, "data/trusted/hello", S_IFREG | 0700, 0, 0);
	mk(self, "data/.secrets/gh.conf", S_IFREG | 0660, 0, USERS_SANDBOX_GID);
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/job.sh", S_IFREG | 0770, 0, USERS_SANDBOX_GID);
	sh(self, "setfacl -m u:10100:rwx data/trusted/acl && ln w/job.sh data/trusted/job");
	EXPECT_LEFT_IN_TRUSTED(6u);
	EXPECT_EQ(st_of(self, "data/bin/git").st_mode & 07777, 0770u);
	EXPECT_EQ(st_of(self, "data/bin/git").st_gid, (gid_t)USERS_SANDBOX_GID);
	EXPECT_EQ(st_of(self, "data/trusted/rotate").st_gid, (gid_t)AGENT);
	EXPECT_EQ(st_of(self, "data/trusted/open").st_mode & 07777, 0757u);
	EXPECT_EQ(st_of(self, "data/.secrets/gh.conf").st_uid, 0u);
	EXPECT_EQ(st_of(self, "data/trusted/job").st_mode & 07777, 0770u);
	/* what agents could not write is put right; the directory itself too */
	EXPECT_EQ(st_of(self, "data/bin/ro").st_mode & 07777, 0755u);
	EXPECT_EQ(st_of(self, "data/bin/ro").st_gid, 0u);
	EXPECT_EQ(st_of(self, "data/trusted/hello").st_mode & 07777, 0755u);
	EXPECT_EQ(st_of(self, "data/bin").st_mode & 07777, 0755u);
	/* outside the trusted trees the same files simply get the rule */
	ASSERT_EQ(run(self, "[{\"path\":\"/w\",\"access\":\"read\"}]", POLICY_APPLY), 0);
	EXPECT_EQ(self->events[POLICY_EV_AGENTS_IN_TRUSTED], 0u);
}

/* skip_events: the kinds left out are not reported but still counted; the others are. */
TEST_F(root, skipped_event_kinds_still_counted)
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_walk_opts o = {.mode = POLICY_APPLY,
				     .on_event = on_event,
				     .userdata = self->events,
				     .skip_events = 1u << POLICY_EV_CHANGE};

	mk(self, "etc", S_IFDIR | 0755, 0, 0);
	mk(self, "etc/shadow", S_IFREG | 0640, 0, 42);
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/f", S_IFREG | 0644, AGENT, AGENT);
	sh(self, "ln etc/shadow w/shadow-link");
	memset(self->events, 0, sizeof(self->events));
	ASSERT_EQ(policy_rules_parse(W, strlen(W), &r, &err), 0);
	ASSERT_EQ(policy_walk(self->fd, r, &o, &self->st), 0);
	EXPECT_EQ(self->events[POLICY_EV_CHANGE], 0u);
	EXPECT_EQ(self->st.changed, 2u); /* w, w/f */
	EXPECT_EQ(self->events[POLICY_EV_HARDLINK], 1u);
	EXPECT_EQ(st_of(self, "w/f").st_mode & 07777, 0660u);
	policy_rules_free(r);
}

TEST_F(root, fifos_sockets_devices_never_opened)
{
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/fifo", S_IFIFO | 0666, AGENT, AGENT);
	mk(self, "w/null", S_IFCHR | 0666, 0, 0);
	char p[256];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(p, sizeof(p), "%s/w/sock", self->dir);
	ASSERT_LT(strlen(p), sizeof(sa.sun_path));
	memcpy(sa.sun_path, p, strlen(p) + 1);
	ASSERT_EQ(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	/* Opening the FIFO for reading would block forever without a writer: the test
	 * timeout catches that. */
	ASSERT_EQ(run(self, W, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "w/fifo").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w/sock").st_gid, USERS_SANDBOX_GID);
	EXPECT_EQ(st_of(self, "w/null").st_mode & 07777, 0666u); /* device: never loosened */
	EXPECT_EQ(st_of(self, "w/null").st_gid, 0u);
	EXPECT_EQ(self->events[POLICY_EV_DEVICE], 1u);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(st_of(self, "w/null").st_mode & 07777, 0600u); /* but tightened */
	EXPECT_EQ(st_of(self, "w/fifo").st_uid, 0u);
}

TEST_F(root, hostile_names)
{
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/a\nb", S_IFREG | 0666, AGENT, AGENT);
	mk(self, "w/\033[31mred", S_IFREG | 0666, AGENT, AGENT);
	mk(self, "w/\xff\xfe", S_IFREG | 0666, AGENT, AGENT);
	mk(self, "w/-rf", S_IFREG | 0666, AGENT, AGENT);
	ASSERT_EQ(run(self, N, POLICY_APPLY), 0);
	EXPECT_EQ(self->st.changed, 5u);
	EXPECT_EQ(st_of(self, "w/a\nb").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/\xff\xfe").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/-rf").st_uid, 0u);
}

/* The walk builds each node's path from the names getdents gives (short names are
 * copied with fixed-size moves): every length comes out exact, in files and in
 * directories on the way. */
static char seen_paths[64][600];
static unsigned nseen;

static void collect_path(void *ud, const struct policy_event *ev)
{
	(void)ud;
	if (ev->kind == POLICY_EV_CHANGE && nseen < 64 && ev->path_len < sizeof(seen_paths[0]))
		memcpy(seen_paths[nseen++], ev->path, ev->path_len + 1);
}

static void name_of_length(char *buf, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)('a' + (i * 7 + salt) % 26);
	buf[n] = '\0';
}

TEST_F(root, event_paths_for_names_of_every_length)
{
	static const size_t lens[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 255};
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_stats st;
	struct policy_walk_opts o = {.mode = POLICY_CHECK, .on_event = collect_path};
	char name[256], dname[256], rel[600], want[600];

	mk(self, "w", S_IFDIR | 0755, AGENT, AGENT);
	for (size_t i = 0; i < (sizeof(lens) / sizeof(lens[0])); i++) {
		name_of_length(name, lens[i], (unsigned)i);
		name_of_length(dname, lens[(sizeof(lens) / sizeof(lens[0])) - 1 - i],
			       (unsigned)i + 3);
		snprintf(rel, sizeof(rel), "w/%s", name);
		mk(self, rel, S_IFREG | 0644, AGENT, AGENT);
		dname[0] = 'D';
		snprintf(rel, sizeof(rel), "w/%s", dname);
		mk(self, rel, S_IFDIR | 0755, AGENT, AGENT);
		snprintf(rel, sizeof(rel), "w/%s/%s", dname, name);
		mk(self, rel, S_IFREG | 0644, AGENT, AGENT);
	}
	nseen = 0;
	ASSERT_EQ(policy_rules_parse(W, strlen(W), &r, &err), 0);
	ASSERT_EQ(policy_walk(self->fd, r, &o, &st), 0);
	EXPECT_EQ(nseen, 1u + 3 * (sizeof(lens) / sizeof(lens[0])));
	for (size_t i = 0; i < (sizeof(lens) / sizeof(lens[0])); i++) {
		name_of_length(name, lens[i], (unsigned)i);
		name_of_length(dname, lens[(sizeof(lens) / sizeof(lens[0])) - 1 - i],
			       (unsigned)i + 3);
		dname[0] = 'D';
		for (int k = 0; k < 3; k++) {
			unsigned found = 0;

			if (k == 0)
				snprintf(want, sizeof(want), "/w/%s", name);
			else if (k == 1)
				snprintf(want, sizeof(want), "/w/%s", dname);
			else
				snprintf(want, sizeof(want), "/w/%s/%s", dname, name);
			for (unsigned j = 0; j < nseen; j++)
				found += strcmp(seen_paths[j], want) == 0;
			EXPECT_EQ(found, 1u);
		}
	}
	policy_rules_free(r);
}

TEST_F(root, nested_rules_own_their_subtrees)
{
	mk(self, "w", S_IFDIR | 0755, 0, 0);
	mk(self, "w/keys", S_IFDIR | 0755, 0, 0);
	mk(self, "w/keys/k", S_IFREG | 0644, 0, 0);
	mk(self, "w/keysx", S_IFDIR | 0755, 0, 0);
	ASSERT_EQ(run(self,
		      "[{\"path\":\"/w\",\"access\":\"write\"},{\"path\":\"/w/"
		      "keys\",\"access\":\"none\"}]",
		      POLICY_APPLY),
		  0);
	EXPECT_EQ(st_of(self, "w/keys").st_mode & 07777, 0700u);
	EXPECT_EQ(st_of(self, "w/keys/k").st_mode & 07777, 0600u);
	EXPECT_EQ(st_of(self, "w/keysx").st_mode & 07777, 02770u);
	EXPECT_EQ(self->events[POLICY_EV_MISSING], 0u);
	ASSERT_EQ(run(self, "[{\"path\":\"/nope\",\"access\":\"write\"}]", POLICY_APPLY), 0);
	EXPECT_EQ(self->events[POLICY_EV_MISSING], 1u);
}

/* The depth bound fails closed: the directory at the bound is made root:root 0700 without
 * ACLs whatever the rule, so what lies below (not walked, left as it was) is unreachable
 * for agents, and it is an error (a violation for check), never a silent skip. */
struct deep_seen {
	unsigned events[16];
	unsigned depth_max;
	size_t bound_len; /* of the TOO_DEEP event's path */
	bool bound_violation;
	int bound_error;
};

static void on_deep_event(void *ud, const struct policy_event *ev)
{
	struct deep_seen *d = ud;

	d->events[ev->kind]++;
	if (ev->kind == POLICY_EV_TOO_DEEP) {
		d->depth_max = ev->depth_max;
		d->bound_len = ev->path_len;
		d->bound_violation = ev->violation;
		d->bound_error = ev->error;
	}
}

/* fstat of the directory `levels` below dir/d (d, then x, x, …), by fds: the path is
 * longer than PATH_MAX. */
static struct stat deep_stat(int rfd, unsigned levels)
{
	struct stat s = {0};
	int fd = openat(rfd, "d", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	for (unsigned i = 0; fd >= 0 && i < levels; i++) {
		int n = openat(fd, "x", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = n;
	}
	if (fd >= 0 && fstat(fd, &s) < 0)
		s.st_mode = 0;
	if (fd >= 0)
		close(fd);
	return s;
}

static bool deep_has_xattr(int rfd, unsigned levels, const char *name)
{
	char p[64];
	int fd = openat(rfd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	bool has;

	for (unsigned i = 0; fd >= 0 && i < levels; i++) {
		int n = openat(fd, "x", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = n;
	}
	if (fd < 0)
		return true;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	has = getxattr(p, name, NULL, 0) >= 0;
	close(fd);
	return has;
}

/* A 20,000-level tree an agent made (its own, 0777, each directory with a planted access
 * ACL), walked under a rule of the given access: plan, apply, check. */
static void deep_tree(struct tap_metadata *_metadata, const char *access, mode_t above_mode,
		      uid_t above_uid, gid_t above_gid)
{
	char dir[] = "/tmp/pistis-test-deep.XXXXXX", j[128], cmd[128];
	static const uint8_t acl[] = {
		0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x07, 0x00, 0xff, 0xff, 0xff, 0xff,
		0x02, 0x00, 0x07, 0x00, 0x39, 0x30, 0x00, 0x00, /* user 12345 rwx */
		0x04, 0x00, 0x07, 0x00, 0xff, 0xff, 0xff, 0xff, 0x10, 0x00, 0x07, 0x00,
		0xff, 0xff, 0xff, 0xff, 0x20, 0x00, 0x07, 0x00, 0xff, 0xff, 0xff, 0xff,
	};
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_stats st;
	struct deep_seen seen;
	struct policy_walk_opts o = {.on_event = on_deep_event, .userdata = &seen};
	struct stat s;
	unsigned bound;
	int fd, rfd;

	if (geteuid() != 0)
		SKIP("needs root");
	ASSERT_NOT_NULL(mkdtemp(dir));
	rfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(rfd, 0);
	ASSERT_EQ(make_mark_key(rfd), 0);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_EQ(mkdirat(fd, "d", 0777), 0);
	for (int i = 0; i < 20000; i++) {
		int n = openat(fd, i ? "x" : "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ASSERT_GE(n, 0);
		close(fd);
		fd = n;
		ASSERT_EQ(fchown(fd, AGENT, AGENT), 0);
		ASSERT_EQ(fchmod(fd, 0777), 0);
		ASSERT_EQ(fsetxattr(fd, POLICY_XATTR_ACL_ACCESS, acl, sizeof(acl), 0), 0);
		ASSERT_EQ(mkdirat(fd, "x", 0777), 0);
	}
	close(fd);
	snprintf(j, sizeof(j), "[{\"path\":\"/d\",\"access\":\"%s\"}]", access);
	ASSERT_EQ(policy_rules_parse(j, strlen(j), &r, &err), 0);

	/* plan: reports that it would close the bound, changes nothing, counts an error. */
	memset(&seen, 0, sizeof(seen));
	o.mode = POLICY_PLAN;
	ASSERT_EQ(policy_walk(rfd, r, &o, &st), 0);
	EXPECT_EQ(seen.events[POLICY_EV_TOO_DEEP], 1u);
	EXPECT_EQ(seen.events[POLICY_EV_ERROR], 0u);
	EXPECT_EQ(st.errors, 1u);
	bound = (unsigned)(seen.bound_len - 2) / 2; /* "/d" + bound × "/x" */
	EXPECT_EQ(seen.depth_max, bound);
	EXPECT_LE(bound, (unsigned)POLICY_DEPTH_MAX);
	EXPECT_GE(bound, 900u);
	s = deep_stat(rfd, bound);
	EXPECT_EQ(s.st_uid, (uid_t)AGENT);
	EXPECT_EQ(s.st_mode & 07777, 0777u);

	/* apply */
	memset(&seen, 0, sizeof(seen));
	o.mode = POLICY_APPLY;
	ASSERT_EQ(policy_walk(rfd, r, &o, &st), 0);
	EXPECT_EQ(seen.events[POLICY_EV_TOO_DEEP], 1u);
	EXPECT_EQ(seen.events[POLICY_EV_ERROR], 0u);
	EXPECT_EQ(seen.bound_error, 0);
	EXPECT_EQ(seen.depth_max, bound);
	EXPECT_EQ(st.errors, 1u);
	EXPECT_EQ(st.skipped, 0u);
	EXPECT_EQ(st.dirs, (uint64_t)bound + 1);
	/* The bound: closed, whatever the rule. */
	s = deep_stat(rfd, bound);
	EXPECT_EQ(s.st_uid, 0u);
	EXPECT_EQ(s.st_gid, 0u);
	EXPECT_EQ(s.st_mode & 07777, 0700u);
	EXPECT_FALSE(deep_has_xattr(rfd, bound, POLICY_XATTR_ACL_ACCESS));
	EXPECT_FALSE(deep_has_xattr(rfd, bound, POLICY_XATTR_ACL_DEFAULT));
	EXPECT_TRUE(deep_has_xattr(rfd, bound, mark_name_of(rfd))); /* pistis closed it */
	/* Above it: the rule's own result, loosening steps included. */
	unsigned above[] = {0, 1, 2, bound / 2, bound - 1};
	for (size_t i = 0; i < ELEMENTSOF(above); i++) {
		s = deep_stat(rfd, above[i]);
		EXPECT_EQ(s.st_mode & 07777, above_mode);
		EXPECT_EQ(s.st_uid, above_uid);
		EXPECT_EQ(s.st_gid, above_gid);
		EXPECT_FALSE(deep_has_xattr(rfd, above[i], POLICY_XATTR_ACL_ACCESS));
	}
	/* Below it: not walked, left as it was (and unreachable through the bound). */
	s = deep_stat(rfd, bound + 1);
	EXPECT_EQ(s.st_uid, (uid_t)AGENT);
	EXPECT_EQ(s.st_mode & 07777, 0777u);

	/* check: the bound is a violation (what lies below was not checked), the rest
	 * conforms. */
	memset(&seen, 0, sizeof(seen));
	o.mode = POLICY_CHECK;
	ASSERT_EQ(policy_walk(rfd, r, &o, &st), 0);
	EXPECT_EQ(seen.events[POLICY_EV_TOO_DEEP], 1u);
	EXPECT_EQ(seen.events[POLICY_EV_CHANGE], 0u);
	EXPECT_TRUE(seen.bound_violation);
	EXPECT_EQ(st.violations, 1u);
	EXPECT_EQ(st.errors, 1u);

	policy_rules_free(r);
	close(rfd);
	/* rm -rf copes with the depth. */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	EXPECT_EQ(system(cmd), 0);
}

TEST_TIMEOUT(deep_tree_20000_levels, 120)
{
	deep_tree(_metadata, "none", 0700, 0, 0);
}

TEST_TIMEOUT(deep_tree_20000_levels_read_closes_the_bound, 120)
{
	deep_tree(_metadata, "read", 0755, 0, 0);
}

TEST_TIMEOUT(deep_tree_20000_levels_write_closes_the_bound, 120)
{
	deep_tree(_metadata, "write", 02770, AGENT, USERS_SANDBOX_GID);
}

/* Parallel walk: the result is the sequential walk's, node for node; no directory is
 * loosened before everything beneath it is done, even when other threads walk parts of
 * its subtree; before_tighten runs once. */
struct order_check {
	const char *dir;
	unsigned events, early;
	pid_t tids[8];
	unsigned per_tid[8]; /* CHANGE events each thread reported */
	unsigned ntids;
	unsigned pause_us; /* after each event: a walk that outlasts the other threads' start */
};

static void check_ancestors_closed(void *ud, const struct policy_event *ev)
{
	struct order_check *oc = ud;
	char p[1024];
	struct stat s;

	if (ev->kind != POLICY_EV_CHANGE)
		return;
	oc->events++;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	unsigned i = 0;
	while (i < oc->ntids && oc->tids[i] != tid)
		i++;
	if (i == oc->ntids && i < 8)
		oc->tids[oc->ntids++] = tid;
	if (i < 8)
		oc->per_tid[i]++;
	/* Every directory above the node (up to the rule's path) is still without group
	 * bits: its final 02770 comes only after its whole subtree. */
	snprintf(p, sizeof(p), "%s%.*s", oc->dir, (int)ev->path_len, ev->path);
	for (char *slash = strrchr(p, '/'); slash && strcmp(p, oc->dir) != 0;
	     slash = strrchr(p, '/')) {
		*slash = '\0';
		if (strlen(p) <= strlen(oc->dir) + 2) /* reached "/w" */
			break;
		if (lstat(p, &s) == 0 && (s.st_mode & 070))
			oc->early++;
	}
	if (oc->pause_us)
		usleep(oc->pause_us);
}

static int before_tighten_refuse(void *ud)
{
	return ud ? -ECANCELED : 0;
}

static int count_tighten(void *ud)
{
	(*(unsigned *)ud)++;
	return 0;
}

static unsigned tighten_count;
static int tighten_once(void *ud)
{
	(void)ud;
	tighten_count++;
	return 0;
}

TEST_F(root, parallel_walk_equals_sequential)
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_stats st1, st4;
	/* 50 µs after each event, as below: ~1,800 nodes are a few ms of work, which on a
	 * loaded machine one thread can finish before another is scheduled (ntids 1). */
	struct order_check oc = {.dir = self->dir, .pause_us = 50};
	struct policy_walk_opts o = {.mode = POLICY_APPLY,
				     .threads = 4,
				     .on_event = check_ancestors_closed,
				     .userdata = &oc,
				     .before_tighten = tighten_once};
	const char *j = "[{\"path\":\"/w\",\"access\":\"write\"},"
			"{\"path\":\"/w2\",\"access\":\"write\"}]";

	(void)count_tighten;
	mk(self, "etc", S_IFDIR | 0755, 0, 0);
	mk(self, "etc/shadow", S_IFREG | 0640, 0, 42);
	sh(self, "mkdir w && for a in 0 1 2 3 4 5; do for b in 0 1 2; do for c in 0 1 2 3 4; do "
		 "mkdir -p w/$a/$b/$c/x/y; for f in 0 1 2 3; do : > w/$a/$b/$c/f$f; "
		 ": > w/$a/$b/$c/x/y/g$f; done; done; : > w/$a/$b/h; done; done && "
		 "chown -R 10100:10100 w && chmod -R 0700 w && "
		 "find w -type f -exec chmod 0604 {} + && chmod 04755 w/1/1/1/f1 && "
		 "setfacl -m u:12345:rw w/2/2/2/f2 && setfacl -d -m u:12345:rwx w/3/0/4 && "
		 "mkfifo -m 0666 w/4/1/0/fifo && ln -s ../../../../etc/shadow w/5/2/3/sym && "
		 "cp -a w w2 && ln etc/shadow w/0/0/0/x/link && ln etc/shadow w2/0/0/0/x/link");
	ASSERT_EQ(policy_rules_parse(j, strlen(j), &r, &err), 0);
	/* /w with four threads, /w2 alone: same rules, same tree. */
	struct policy_rules one = {.rules = &r->rules[0], .n = 1},
			    two = {.rules = &r->rules[1], .n = 1};
	ASSERT_EQ(policy_walk(self->fd, &one, &o, &st4), 0);
	o.threads = 1;
	o.on_event = NULL;
	ASSERT_EQ(policy_walk(self->fd, &two, &o, &st1), 0);
	EXPECT_EQ(tighten_count, 2u);
	EXPECT_EQ(oc.early, 0u);
	EXPECT_GT(oc.ntids, 1u); /* the work was split */
	EXPECT_GT(oc.events, 900u);
	EXPECT_EQ(st4.entries, st1.entries);
	EXPECT_EQ(st4.dirs, st1.dirs);
	EXPECT_EQ(st4.changed, st1.changed);
	EXPECT_EQ(st4.symlinks, 1u);
	EXPECT_EQ(st4.skipped, 1u); /* the hardlink */
	EXPECT_EQ(st4.errors, 0u);
	EXPECT_EQ(st_of(self, "etc/shadow").st_mode & 07777, 0640u);
	EXPECT_EQ(st_of(self, "etc/shadow").st_gid, 42u);
	EXPECT_EQ(st_of(self, "w/1/1/1/f1").st_mode & 07777, 0770u);
	EXPECT_EQ(st_of(self, "w/4/1/0/fifo").st_mode & 07777, 0660u);
	EXPECT_EQ(xattr_of(self, "w/2/2/2/f2", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "w/3/0/4", "system.posix_acl_default"), POLICY_DEFAULT_ACL_SIZE);
	EXPECT_EQ(sh_status(self, W_SAME_AS_W2), 0);
	/* Re-apply with threads: nothing to change. */
	o.threads = 4;
	ASSERT_EQ(policy_walk(self->fd, &one, &o, &st4), 0);
	EXPECT_EQ(st4.changed, 0u);
	EXPECT_EQ(st4.entries, st1.entries);
	policy_rules_free(r);
}

/* One top-level directory: the queue gets only that one at the top, so the threads share
 * the rest through the deeper splits made for threads that wait (split()). The work still
 * spreads, with the same result and order guarantees. */
TEST_F(root, parallel_walk_spreads_below_a_single_top_directory)
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_stats st1, stn;
	const char *j = "[{\"path\":\"/w\",\"access\":\"write\"},"
			"{\"path\":\"/w2\",\"access\":\"write\"}]";

	sh(self, "mkdir w && for a in 0 1 2 3 4 5 6 7 8 9 10 11; do for b in 0 1 2 3 4 5; do "
		 "mkdir -p w/top/$a/$b/sub; for f in 0 1 2 3 4 5 6 7; do : > w/top/$a/$b/f$f; "
		 ": > w/top/$a/$b/sub/g$f; done; done; done && chown -R 10100:10100 w && "
		 "chmod -R 0700 w && setfacl -m u:12345:rw w/top/6/3/f4 && cp -a w w2");
	ASSERT_EQ(policy_rules_parse(j, strlen(j), &r, &err), 0);
	struct policy_rules one = {.rules = &r->rules[0], .n = 1},
			    two = {.rules = &r->rules[1], .n = 1};
	for (unsigned threads = 2; threads <= 4; threads += 2) {
		/* 1,310 nodes are a few ms of work: on a loaded machine (CI beside other jobs)
		 * the thread that took "top" could finish before another was even scheduled
		 * (1308 of 1310 events on one thread). 50 µs after each event makes the walk
		 * last long enough for the others to ask for work. */
		struct order_check oc = {.dir = self->dir, .pause_us = 50};
		struct policy_walk_opts o = {.mode = POLICY_APPLY,
					     .threads = threads,
					     .on_event = check_ancestors_closed,
					     .userdata = &oc};

		ASSERT_EQ(policy_walk(self->fd, &one, &o, &stn), 0);
		EXPECT_EQ(oc.early, 0u);
		/* Not all of it on the thread that took "top": more than a few subtrees went
		 * elsewhere. */
		unsigned most = 0;
		for (unsigned i = 0; i < oc.ntids; i++)
			most = oc.per_tid[i] > most ? oc.per_tid[i] : most;
		EXPECT_LT(most, oc.events - 40);
		EXPECT_EQ(stn.errors, 0u);
		EXPECT_EQ(stn.entries, 1u + 1 + 12 + 72 + 72 + 576 + 576);
		EXPECT_EQ(stn.changed, stn.entries);
		o = (struct policy_walk_opts){.mode = POLICY_APPLY, .threads = 1};
		ASSERT_EQ(policy_walk(self->fd, &two, &o, &st1), 0);
		EXPECT_EQ(st1.changed, stn.changed);
		EXPECT_EQ(xattr_of(self, "w/top/6/3/f4", "system.posix_acl_access"), -1);
		/* the same end state, then both trees back to their first state */
		EXPECT_EQ(sh_status(self,
				    W_SAME_AS_W2 " && chown -R 10100:10100 w w2 && "
						 "chmod -R 0700 w w2 && setfacl -R -b w w2 && "
						 "setfacl -m u:12345:rw w/top/6/3/f4 "
						 "w2/top/6/3/f4"),
			  0);
	}
	policy_rules_free(r);
}

/* A parent's listing resumes after a child directory either from the rest stack or by
 * lseek + getdents when the stack is full: every node is walked exactly once either way,
 * with one thread and with four, whatever the budget (0: always seek; 200: a mix). */
TEST_F(root, listing_resumes_after_a_child_whatever_the_budget)
{
	static const size_t budgets[] = {0, 200, 256 * 1024};
	size_t saved = policy_walk_rest_buf;
	char cmd[512];

	sh(self, "mkdir w && for a in 0 1 2 3 4 5 6 7; do for b in 0 1 2 3 4 5; do "
		 "mkdir -p w/$a/$b/sub; for f in 0 1 2 3 4 5 6 7 8 9; do : > w/$a/f$f; "
		 ": > w/$a/$b/f-with-a-longer-name-$f; : > w/$a/$b/sub/g$f; done; done; done && "
		 "chown -R 10100:10100 w && chmod -R u=rwX,go=rX w");
	for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++) {
		for (unsigned threads = 1; threads <= 4; threads += 3) {
			struct policy_rules *r = NULL;
			struct policy_error err;
			struct policy_stats st;
			struct policy_walk_opts o = {.mode = POLICY_CHECK, .threads = threads};

			policy_walk_rest_buf = budgets[i];
			ASSERT_EQ(policy_rules_parse(W, strlen(W), &r, &err), 0);
			ASSERT_EQ(policy_walk(self->fd, r, &o, &st), 0);
			/* w, 8 + 48 + 48 dirs, 80 + 480 + 480 files: all of them wrong */
			EXPECT_EQ(st.entries, 1145u);
			EXPECT_EQ(st.dirs, 105u);
			EXPECT_EQ(st.violations, 1145u);
			o.mode = POLICY_APPLY;
			ASSERT_EQ(policy_walk(self->fd, r, &o, &st), 0);
			EXPECT_EQ(st.entries, 1145u);
			EXPECT_EQ(st.changed, 1145u);
			EXPECT_EQ(st.errors, 0u);
			o.mode = POLICY_CHECK;
			ASSERT_EQ(policy_walk(self->fd, r, &o, &st), 0);
			EXPECT_EQ(st.entries, 1145u);
			EXPECT_EQ(st.violations, 0u);
			snprintf(cmd, sizeof(cmd),
				 "cd '%s' && test -z \"$(find w ! -group %u)\" && "
				 "chown -R 10100:10100 w && chmod -R u=rwX,go=rX w && setfacl -R "
				 "-b w",
				 self->dir, (unsigned)USERS_SANDBOX_GID);
			EXPECT_EQ(system(cmd), 0);
			policy_rules_free(r);
		}
	}
	policy_walk_rest_buf = saved;
}

/* The workers unshare their fd tables and take their own credentials; where they cannot
 * (here a seccomp filter refuses unshare and prctl with EPERM), the walk is the same. */
TEST_F(root, parallel_walk_without_private_fd_tables)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_stats st;
	struct policy_walk_opts o = {.mode = POLICY_APPLY, .threads = 4};

	sh(self,
	   "mkdir w && for a in 0 1 2 3 4 5 6 7; do for b in 0 1 2 3; do mkdir -p w/$a/$b/c; "
	   ": > w/$a/$b/c/f; : > w/$a/$b/g; done; done && chown -R 10100:10100 w && "
	   "chmod -R 0755 w && setfacl -m u:12345:rw w/5/2/g && setfacl -d -m u:12345:rwx w/6/1");
	ASSERT_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	ASSERT_EQ(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog), 0);
	ASSERT_EQ(unshare(CLONE_FILES), -1); /* the filter works */
	ASSERT_EQ(policy_rules_parse(W, strlen(W), &r, &err), 0);
	ASSERT_EQ(policy_walk(self->fd, r, &o, &st), 0);
	EXPECT_EQ(st.errors, 0u);
	EXPECT_EQ(st.entries, 1u + 8 + 32 + 32 + 32 + 32);
	EXPECT_EQ(st.changed, st.entries);
	EXPECT_EQ(st_of(self, "w/3/2").st_mode & 07777, 02770u);
	EXPECT_EQ(st_of(self, "w/7/3/c/f").st_mode & 07777, 0770u); /* was executable */
	EXPECT_EQ(xattr_of(self, "w/5/2/g", "system.posix_acl_access"), -1);
	EXPECT_EQ(xattr_of(self, "w/6/1", "system.posix_acl_default"), POLICY_DEFAULT_ACL_SIZE);
	o.mode = POLICY_CHECK;
	ASSERT_EQ(policy_walk(self->fd, r, &o, &st), 0);
	EXPECT_EQ(st.violations, 0u);
	policy_rules_free(r);
}

TEST_F(root, parallel_walk_refused_tighten_changes_nothing)
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_stats st;
	unsigned calls = 0;
	struct policy_walk_opts o = {.mode = POLICY_APPLY, .threads = 4};

	sh(self, "mkdir w && for a in 0 1 2 3 4 5 6 7; do mkdir -p w/$a/b/c; : > w/$a/b/c/f; done "
		 "&& chmod -R 0777 w");
	ASSERT_EQ(policy_rules_parse(N, strlen(N), &r, &err), 0);
	o.before_tighten = count_tighten;
	o.userdata = &calls;
	/* Refused: nothing tightened anywhere. */
	struct policy_walk_opts refuse = o;
	refuse.before_tighten = before_tighten_refuse;
	refuse.userdata = (void *)1;
	EXPECT_EQ(policy_walk(self->fd, r, &refuse, &st), -ECANCELED);
	EXPECT_EQ(st_of(self, "w").st_mode & 07777, 0777u);
	EXPECT_EQ(st_of(self, "w/3/b/c/f").st_mode & 07777, 0777u);
	ASSERT_EQ(policy_walk(self->fd, r, &o, &st), 0);
	EXPECT_EQ(calls, 1u);
	EXPECT_EQ(st.errors, 0u);
	EXPECT_EQ(st_of(self, "w/7/b/c/f").st_mode & 07777, 0700u); /* was executable */
	EXPECT_EQ(st_of(self, "w/7/b").st_mode & 07777, 0700u);
	policy_rules_free(r);
}

TEST_F(root, parallel_walk_fits_a_small_fd_limit)
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_stats st;
	struct policy_walk_opts o = {.mode = POLICY_APPLY, .threads = 8};
	struct rlimit rl = {.rlim_cur = 200, .rlim_max = 200};

	sh(self, "mkdir w && for a in 0 1 2 3 4 5 6 7; do mkdir -p w/$a/b/c; : > w/$a/b/c/f; done");
	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	ASSERT_EQ(policy_rules_parse(W, strlen(W), &r, &err), 0);
	ASSERT_EQ(policy_walk(self->fd, r, &o, &st), 0);
	EXPECT_EQ(st.errors, 0u);
	EXPECT_EQ(st.entries, 33u);
	EXPECT_EQ(st_of(self, "w/5/b/c").st_mode & 07777, 02770u);
	policy_rules_free(r);
}

static int tighten_calls;
static int before_tighten(void *ud)
{
	(void)ud;
	tighten_calls++;
	return ud ? -ECANCELED : 0;
}

TEST_F(root, before_tighten_runs_first_and_can_abort)
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_stats st;
	struct policy_walk_opts o = {.mode = POLICY_APPLY, .before_tighten = before_tighten};

	mk(self, "w", S_IFDIR | 0777, AGENT, AGENT);
	mk(self, "w/f", S_IFREG | 0666, AGENT, AGENT);
	ASSERT_EQ(policy_rules_parse(N, strlen(N), &r, &err), 0);
	o.userdata = (void *)1; /* refuse */
	EXPECT_EQ(policy_walk(self->fd, r, &o, &st), -ECANCELED);
	EXPECT_EQ(tighten_calls, 1);
	EXPECT_EQ(st_of(self, "w").st_mode & 07777, 0777u); /* nothing done */
	o.userdata = NULL;
	EXPECT_EQ(policy_walk(self->fd, r, &o, &st), 0);
	EXPECT_EQ(tighten_calls, 2);
	EXPECT_EQ(st_of(self, "w/f").st_mode & 07777, 0600u);
	policy_rules_free(r);
	/* From none to write only gives: the agents are not stopped for it. */
	ASSERT_EQ(policy_rules_parse(W, strlen(W), &r, &err), 0);
	EXPECT_EQ(policy_walk(self->fd, r, &o, &st), 0);
	EXPECT_EQ(st_of(self, "w/f").st_mode & 07777, 0660u);
	EXPECT_EQ(st_of(self, "w").st_gid, (gid_t)USERS_SANDBOX_GID);
	EXPECT_EQ(tighten_calls, 2);
	/* A new group for a node whose old group (or others) had bits takes from them (a
	 * file of root's no agent may read would be left: docs/policy.md). */
	ASSERT_EQ(fchownat(self->fd, "w/f", 0, 0, AT_SYMLINK_NOFOLLOW), 0);
	ASSERT_EQ(fchmodat(self->fd, "w/f", 0644, 0), 0);
	EXPECT_EQ(policy_walk(self->fd, r, &o, &st), 0);
	EXPECT_EQ(tighten_calls, 3);
	ASSERT_EQ(fchownat(self->fd, "w/f", 0, 0, AT_SYMLINK_NOFOLLOW), 0);
	ASSERT_EQ(fchmodat(self->fd, "w/f", 0604, 0), 0);
	EXPECT_EQ(policy_walk(self->fd, r, &o, &st), 0);
	EXPECT_EQ(tighten_calls, 4);
	policy_rules_free(r);
}

TEST_F(root, explain_from_the_real_chain)
{
	struct policy_rules *r = NULL;
	struct policy_error err;
	struct policy_explain ex;
	gid_t g[] = {AGENT, USERS_SANDBOX_GID};
	const char *j = "[{\"path\":\"/w\",\"access\":\"write\"},{\"path\":\"/w/ro\",\"access\":"
			"\"read\"},{\"path\":\"/open/ro\",\"access\":\"read\"},{\"path\":"
			"\"/open/sub/ro\",\"access\":\"read\"}]";

	ASSERT_EQ(chmod(self->dir, 0755), 0);
	mk(self, "w", S_IFDIR | 0755, AGENT, AGENT);
	mk(self, "w/ro", S_IFREG | 0644, 0, 0);
	mk(self, "open", S_IFDIR | 0777, 0, 0); /* writable by all, no rule of its own */
	mk(self, "open/ro", S_IFREG | 0644, 0, 0);
	mk(self, "open/sub", S_IFDIR | 0755, 0, 0); /* root's, in the open directory */
	mk(self, "open/sub/ro", S_IFREG | 0644, 0, 0);
	ASSERT_EQ(policy_rules_parse(j, strlen(j), &r, &err), 0);
	ASSERT_EQ(run(self, j, POLICY_APPLY), 0);
	/* The write directory above a read rule is pinned: root's, sticky, so the agent
	 * cannot rename the read-only file away (nor the directory, by then root's). */
	EXPECT_EQ(st_of(self, "w").st_uid, 0u);
	EXPECT_EQ(st_of(self, "w").st_mode & 07777, 03770u);
	ASSERT_EQ(policy_explain(self->fd, r, "/w/ro", AGENT, g, 2, &ex), 0);
	ASSERT_NOT_NULL(ex.rule);
	EXPECT_STREQ(ex.rule->path, "/w/ro");
	EXPECT_TRUE(ex.exists);
	EXPECT_TRUE(ex.can_read);
	EXPECT_FALSE(ex.can_write);
	EXPECT_FALSE(ex.can_replace);
	ASSERT_EQ(policy_explain(self->fd, r, "/w", AGENT, g, 2, &ex), 0);
	EXPECT_TRUE(ex.target.flags & POLICY_T_PINNED);
	/* In a directory anyone may write and no rule covers, read-only does not hold. */
	ASSERT_EQ(policy_explain(self->fd, r, "/open/ro", AGENT, g, 2, &ex), 0);
	EXPECT_FALSE(ex.can_write);
	EXPECT_TRUE(ex.can_replace);
	EXPECT_STREQ(ex.replace_via, "/open/ro");
	/* Its own directory is root's 0755, but that directory can be renamed away in the
	 * open one above it and a new one put in its place: not read-only either. */
	ASSERT_EQ(policy_explain(self->fd, r, "/open/sub/ro", AGENT, g, 2, &ex), 0);
	EXPECT_FALSE(ex.can_write);
	EXPECT_TRUE(ex.can_replace);
	EXPECT_STREQ(ex.replace_via, "/open/sub");
	ASSERT_EQ(policy_explain(self->fd, r, "/w/missing", AGENT, g, 2, &ex), 0);
	EXPECT_FALSE(ex.exists);
	EXPECT_STREQ(ex.rule->path, "/w");
	gid_t other[] = {AGENT + 1, AGENT + 1}; /* not in pi-sandbox */
	ASSERT_EQ(policy_explain(self->fd, r, "/w/ro", AGENT + 1, other, 2, &ex), 0);
	EXPECT_FALSE(ex.can_traverse);
	EXPECT_STREQ(ex.blocked_by, "/w");
	policy_rules_free(r);
}

TEST_HARNESS_MAIN
