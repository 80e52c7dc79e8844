/* policy: the pure part — parser, normalisation, matching semantics, targets, ACL checks. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/macro.h"
#include "lib/tap.h"
#include "policy/policy.h"
#include "sandbox-users/users.h"

static struct policy_rules *parse(const char *json, int *ret_r, struct policy_error *err)
{
	struct policy_rules *r = NULL;

	*ret_r = policy_rules_parse(json, strlen(json), &r, err);
	return r;
}

TEST(defaults_parse)
{
	struct policy_rules *r = NULL;
	struct policy_error err;

	ASSERT_EQ(policy_rules_parse(policy_defaults_json, policy_defaults_json_len(), &r, &err),
		  0);
	ASSERT_EQ(r->n, 11u);
	/* Sorted bytewise, so a parent always comes before what lies beneath it. */
	for (size_t i = 1; i < r->n; i++)
		EXPECT_LT(strcmp(r->rules[i - 1].path, r->rules[i].path), 0);
	EXPECT_EQ(policy_rules_match(r, "/workspaces/x/y")->access == POLICY_WRITE, true);
	/* The seed image's WORKDIR, where the repository lands (/workspace/repo) */
	EXPECT_EQ(policy_rules_match(r, "/workspace/repo/x")->access == POLICY_WRITE, true);
	EXPECT_EQ(policy_rules_match(r, "/workspace")->line, 4u);
	EXPECT_EQ(policy_rules_match(r, "/data/bin/tool")->access == POLICY_READ, true);
	EXPECT_EQ(policy_rules_match(r, "/data/.secrets")->access == POLICY_NONE, true);
	EXPECT_EQ(policy_rules_match(r, "/data/trusted/gh-token")->access == POLICY_READ, true);
	EXPECT_EQ(policy_rules_match(r, "/certs/key.pem")->access == POLICY_NONE, true);
	/* The seed: an extension's own data (a browser's cookies) is closed to the agents. */
	EXPECT_EQ(policy_rules_match(r, "/data/extension-data/browser/Cookies")->access ==
			  POLICY_NONE,
		  true);
	EXPECT_NULL(policy_rules_match(r, "/data"));
	EXPECT_NULL(policy_rules_match(r, "/data/binaries"));
	EXPECT_NULL(policy_rules_match(r, "/etc/passwd"));
	EXPECT_EQ(policy_rules_match(r, "/workspaces")->line, 2u);
	policy_rules_free(r);
}

static const struct {
	const char *json;
	unsigned line;
	const char *msg;
} bad[] = {
	{"", 1, "not valid JSON"},
	{"{}", 1, "must be a JSON list"},
	{"[\n{\"path\":\"/a\",\"access\":\"read\"},\n{\"path\":\"a\",\"access\":\"read\"}\n]", 3,
	 "not absolute"},
	{"[\n\n  {\"path\":\"/a/../b\",\"access\":\"read\"}]", 3, "'..'"},
	{"[{\"path\":\"/a\",\"access\":\"read\"},\n {\"path\":\"/a/\",\"access\":\"none\"}]", 2,
	 "duplicate rule"},
	{"[{\"path\":\"/a\",\"access\":\"read\"},\n\n {\"path\":\"/b\",\"access\":\"all\"}]", 3,
	 "not none, read or write"},
	{"[{\"path\":\"/a\",\"access\":\"read\",\n \"owner\":\"x\"}]", 1, "unknown key 'owner'"},
	{"[{\"path\":\"/a\",\"path\":\"/b\",\"access\":\"read\"}]", 1, "duplicate key 'path'"},
	{"[{\"access\":\"read\"}]", 1, "without a string 'path'"},
	{"[{\"path\":\"/a\"}]", 1, "without a string 'access'"},
	{"[{\"path\":5,\"access\":\"read\"}]", 1, "without a string 'path'"},
	{"[\"/a\"]", 1, "must be an object"},
	{"[{\"path\":\"/a\\u0000/b\",\"access\":\"read\"}]", 1, "NUL (U+0000)"},
	/* cJSON reads a \u without four hex digits as U+0000: "/data/p" would be the rule */
	{"[{\"path\":\"/data/p\\uZZZZ/../../etc\",\"access\":\"read\"}]", 1,
	 "\\u without four hex digits"},
	{"[{\"path\":\"/a\\u00G0b\",\"access\":\"read\"}]", 1, "without four hex digits"},
	{"[{\"path\":\"/a\\u12\"}]", 1, "without four hex digits"},
	{"[{\"path\":\"/a\tb\",\"access\":\"read\"}]", 1, "control character"},
	{"[{\"path\":\"/a\",\"access\":\"read\"}]\n[]", 2, "text after"},
	{"[[[[{}]]]]", 1, "nested deeper"},
	{"[{\"path\":\"/a\",\n\"access\":\"read\"", 2, "not valid JSON"},
	{"[{\"path\":\"\",\"access\":\"read\"}]", 1, "not absolute"},
	{"[{\"path\":\"/a\",\"access\":\"read\",\"comment\":1}]", 1, "comment"},
	/* pistis's own trees: not rules */
	{"[{\"path\":\"/data\",\"access\":\"write\"},\n{\"path\":\"/data/"
	 "pistis\",\"access\":\"none\"}]",
	 2, "is pistis's own (/data/pistis)"},
	{"[{\"path\":\"/data/sandbox-home/pi-agent-1234abcd/\",\"access\":\"write\"}]", 1,
	 "is pistis's own (/data/sandbox-home)"},
	{"[{\"path\":\"//data/./agents\",\"access\":\"read\"}]", 1,
	 "is pistis's own (/data/agents)"},
	/* the trusted commands' trees: never opened further than read (none for the
	 * secrets): what an agent put there would be trusted, and a read rule later makes it
	 * root's */
	{"[{\"path\":\"/data\",\"access\":\"read\"},\n{\"path\":\"/data/bin\",\"access\":"
	 "\"write\"}]",
	 2, "'/data/bin' cannot be write: /data/bin holds"},
	{"[{\"path\":\"/data/trusted/sub/\",\"access\":\"write\"}]", 1,
	 "'/data/trusted/sub' cannot be write: /data/trusted holds"},
	{"[{\"path\":\"/data/.secrets\",\"access\":\"read\"}]", 1,
	 "cannot be read: /data/.secrets holds the trusted commands' secrets, pi-tools' alone "
	 "(none only)"},
	{"[{\"path\":\"/data/.secrets/gh\",\"access\":\"write\"}]", 1, "cannot be write"},
};

/* The trees trusted commands rest on keep their level under a covering rule that would
 * open them, unless a rule names them. */
TEST(implied_rules)
{
	static const struct {
		const char *json;
		size_t n;
		const char *path;
		enum policy_access access;
		unsigned line;
	} t[] = {
		{"[{\"path\":\"/data\",\"access\":\"write\"}]", 4, "/data/bin/x", POLICY_READ, 0},
		{"[{\"path\":\"/data\",\"access\":\"write\"}]", 4, "/data/trusted", POLICY_READ, 0},
		{"[{\"path\":\"/\",\"access\":\"write\"}]", 4, "/data/.secrets/k", POLICY_NONE, 0},
		{"[{\"path\":\"/data\",\"access\":\"write\"}]", 4, "/data/x", POLICY_WRITE, 1},
		{"[{\"path\":\"/data\",\"access\":\"read\"}]", 2, "/data/.secrets", POLICY_NONE, 0},
		{"[{\"path\":\"/data\",\"access\":\"read\"}]", 2, "/data/bin", POLICY_READ, 1},
		{"[{\"path\":\"/data\",\"access\":\"none\"}]", 1, "/data/.secrets", POLICY_NONE, 1},
		{"[{\"path\":\"/data\",\"access\":\"write\"},\n{\"path\":\"/data/bin\",\"access\":"
		 "\"none\"}]",
		 4, "/data/bin/x", POLICY_NONE, 2},
		{"[{\"path\":\"/workspaces\",\"access\":\"write\"}]", 1, "/data/bin", 0, 0},
	};

	for (size_t i = 0; i < ELEMENTSOF(t); i++) {
		struct policy_error err = {0};
		int r;
		struct policy_rules *rules = parse(t[i].json, &r, &err);
		const struct policy_rule *m;

		ASSERT_EQ(r, 0);
		m = policy_rules_match(rules, t[i].path);
		if (rules->n != t[i].n ||
		    (i == ELEMENTSOF(t) - 1
			     ? m != NULL
			     : !m || m->access != t[i].access || m->line != t[i].line)) {
			tap_report(__FILE__, __LINE__, "case %zu: %zu rules, %s: %s line %u", i,
				   rules->n, t[i].path, m ? policy_access_name(m->access) : "-",
				   m ? m->line : 0);
			_metadata->failed = true;
		}
		policy_rules_free(rules);
	}
}

TEST(reserved_trees)
{
	struct policy_error err = {0};
	int r;
	struct policy_rules *rules = parse("[{\"path\":\"/data/agents-old\",\"access\":\"none\"},"
					   "{\"path\":\"/data\",\"access\":\"write\"}]",
					   &r, &err);

	EXPECT_EQ(r, 0); /* beside them and above them: rules */
	policy_rules_free(rules);
	EXPECT_STREQ(policy_path_reserved("/data/pistis", 12), "/data/pistis");
	EXPECT_STREQ(policy_path_reserved("/data/sandbox-home/x/tmp", 24), "/data/sandbox-home");
	EXPECT_NULL(policy_path_reserved("/data/pistisx", 13));
	EXPECT_NULL(policy_path_reserved("/data", 5));
	EXPECT_TRUE(policy_reserved_below("/", 1));
	EXPECT_TRUE(policy_reserved_below("/data", 5));
	EXPECT_FALSE(policy_reserved_below("/data/pistis", 12));
	EXPECT_FALSE(policy_reserved_below("/dat", 4));
	EXPECT_FALSE(policy_reserved_below("/workspaces", 11));
}

TEST(parse_errors_name_the_line)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct policy_error err = {0};
		int r;
		struct policy_rules *rules = parse(bad[i].json, &r, &err);

		EXPECT_LT(r, 0);
		EXPECT_NULL(rules);
		EXPECT_EQ(err.line, bad[i].line);
		if (!strstr(err.msg, bad[i].msg)) {
			tap_report(__FILE__, __LINE__, "case %zu: '%s' lacks '%s'", i, err.msg,
				   bad[i].msg);
			_metadata->failed = true;
		}
		policy_rules_free(rules);
	}
}

/* A name an error quotes comes out escaped once, its quote too, so it cannot end the '...'
 * and make the message say something else; a long one is cut between two escapes and whole
 * UTF-8 characters, with a mark outside the quotes (a cut name is not another, whole one). */
TEST(errors_quote_names_escaped_once_and_mark_a_cut)
{
	/* ', a newline, ESC and an invalid UTF-8 byte (raw: JSON strings may hold it) */
	static const char hostile[] = "[{\"path\":\"x' is fine; '/etc\\n\\u001b\xff\","
				      "\"access\":\"read\"}]";
	char json[2048], *p = json;
	struct policy_error err = {0};
	struct policy_rules *rules;
	int r;

	rules = parse(hostile, &r, &err);
	EXPECT_EQ(r, -EINVAL);
	EXPECT_STREQ(err.msg, "path 'x\\' is fine; \\'/etc\\n\\x1b\\xff' is not absolute");
	policy_rules_free(rules);
	rules = parse("[{\"path\":\"/a\",\"access\":\"read\",\"a'b\\n\":1}]", &r, &err);
	EXPECT_STREQ(err.msg, "unknown key 'a\\'b\\n' (known: path, access, comment)");
	policy_rules_free(rules);

	/* an access of 1000 bytes: 'a' x 212, then an e-acute whose first byte's escape
	 * (\xc3) ends at the bound of 216 escaped bytes and whose second's does not */
	p += sprintf(p, "[{\"path\":\"/a\",\"access\":\"");
	memset(p, 'a', 212);
	memcpy(p + 212, "\xc3\xa9", 2);
	memset(p + 214, 'b', 786);
	p += 1000;
	sprintf(p, "\"}]");
	rules = parse(json, &r, &err);
	EXPECT_EQ(r, -EINVAL);
	ASSERT_NOT_NULL(strstr(err.msg, "'[cut: 1000 bytes] is not none, read or write"));
	EXPECT_EQ((size_t)(strstr(err.msg, "'[cut:") - err.msg), strlen("access '") + 212);
	EXPECT_NULL(strstr(err.msg, "\\xc3"));
	policy_rules_free(rules);
}

/* The rules file's own path in a load error: quoted, escaped once, a cut marked. */
TEST(load_errors_quote_the_path_escaped_once)
{
	char dir[] = "/tmp/pistis-pol-XXXXXX", path[512], want[600];
	struct policy_error err = {0};
	struct policy_rules *rules = NULL;
	size_t l;
	int r;

	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/x' ok '\n\x1b\xff", dir);
	ASSERT_EQ(mkdir(path, 0700), 0);
	r = policy_rules_load(AT_FDCWD, path, false, false, &rules, NULL, NULL, &err);
	EXPECT_EQ(r, -EINVAL);
	snprintf(want, sizeof(want), "'%s/x\\' ok \\'\\n\\x1b\\xff': is not a regular file", dir);
	EXPECT_STREQ(err.msg, want);
	rmdir(path);
	/* 200 bytes of 0xff: 800 escaped, cut at a whole \xff with its mark */
	l = (size_t)snprintf(path, sizeof(path), "%s/", dir);
	memset(path + l, 0xff, 200);
	path[l + 200] = '\0';
	ASSERT_EQ(mkdir(path, 0700), 0);
	r = policy_rules_load(AT_FDCWD, path, false, false, &rules, NULL, NULL, &err);
	EXPECT_EQ(r, -EINVAL);
	snprintf(want, sizeof(want), "'[cut: %zu bytes]: is not a regular file", l + 200);
	ASSERT_NOT_NULL(strstr(err.msg, want));
	EXPECT_EQ((size_t)(strstr(err.msg, want) - err.msg - 1 - l) % 4, 0u);
	rmdir(path);
	rmdir(dir);
}

/* A start's shared hold and an apply's lock on /data/pistis exclude each other, not
 * waited for by the start; a root with no state directory gives the start no lock. */
TEST(apply_share_and_apply_lock_exclude_each_other)
{
	char dir[] = "/tmp/pistis-pol-XXXXXX", path[600];
	int root, share = -1, share2 = -1, lock = -1;

	ASSERT_NOT_NULL(mkdtemp(dir));
	root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(root, 0);
	EXPECT_EQ(policy_apply_share(root, &share), 0);
	EXPECT_EQ(share, -1); /* no /data/pistis: nothing an apply could hold */
	snprintf(path, sizeof(path), "%s/data", dir);
	ASSERT_EQ(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/data/pistis", dir);
	ASSERT_EQ(mkdir(path, 0700), 0);

	ASSERT_EQ(policy_apply_share(root, &share), 0);
	ASSERT_GE(share, 0);
	ASSERT_EQ(policy_apply_share(root, &share2), 0); /* starts do not exclude each other */
	ASSERT_GE(share2, 0);
	EXPECT_EQ(policy_apply_lock(root, 0, &lock), -EWOULDBLOCK);
	close(share);
	EXPECT_EQ(policy_apply_lock(root, 0, &lock), -EWOULDBLOCK);
	close(share2);
	ASSERT_EQ(policy_apply_lock(root, 0, &lock), 0);
	ASSERT_GE(lock, 0);
	EXPECT_EQ(policy_apply_share(root, &share), -EWOULDBLOCK);
	EXPECT_EQ(share, -1);
	close(lock);
	ASSERT_EQ(policy_apply_share(root, &share), 0);
	EXPECT_GE(share, 0);
	close(share);

	rmdir(path);
	snprintf(path, sizeof(path), "%s/data", dir);
	rmdir(path);
	close(root);
	rmdir(dir);
}

TEST(parse_limits)
{
	struct policy_error err;
	struct policy_rules *r = NULL;
	char *big;
	size_t n = 0, cap = (POLICY_RULES_MAX + 2) * 48;

	big = malloc(cap);
	ASSERT_NOT_NULL(big);
	n += (size_t)sprintf(big + n, "[");
	for (int i = 0; i <= POLICY_RULES_MAX; i++)
		n += (size_t)sprintf(big + n, "%s{\"path\":\"/r%d\",\"access\":\"read\"}",
				     i ? "," : "", i);
	n += (size_t)sprintf(big + n, "]");
	EXPECT_EQ(policy_rules_parse(big, n, &r, &err), -E2BIG);
	EXPECT_EQ(policy_rules_parse(big, POLICY_FILE_MAX + 1, &r, &err), -EFBIG);
	free(big);

	/* A path longer than PATH_MAX, and a component longer than NAME_MAX. */
	char *longp = malloc(8192);
	ASSERT_NOT_NULL(longp);
	strcpy(longp, "[{\"access\":\"read\",\"path\":\"");
	size_t l = strlen(longp);
	for (int i = 0; i < 30; i++) {
		longp[l++] = '/';
		memset(longp + l, 'x', 150);
		l += 150;
	}
	strcpy(longp + l, "\"}]");
	EXPECT_EQ(policy_rules_parse(longp, strlen(longp), &r, &err), -EINVAL);
	EXPECT_NOT_NULL(strstr(err.msg, "too long"));
	free(longp);

	char comp[400] = "[{\"access\":\"read\",\"path\":\"/";
	memset(comp + strlen(comp), 'y', 256);
	strcat(comp, "\"}]");
	EXPECT_EQ(policy_rules_parse(comp, strlen(comp), &r, &err), -EINVAL);
}

TEST(normalise)
{
	static const struct {
		const char *in, *out;
		int r;
	} t[] = {
		{"/", "/", 1},
		{"//", "/", 1},
		{"/a/", "/a", 2},
		{"/a//b///", "/a/b", 4},
		{"/./a/./b/.", "/a/b", 4},
		{"/workspaces/", "/workspaces", 11},
		{"a", NULL, -EINVAL},
		{"", NULL, -EINVAL},
		{"/a/..", NULL, -EINVAL},
		{"/../a", NULL, -EINVAL},
		{"/a/..b", "/a/..b", 6},
		{"/-x/\n", "/-x/\n", 5},
	};
	char out[64];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int r = policy_path_normalise(t[i].in, strlen(t[i].in), out, sizeof(out));

		EXPECT_EQ(r, t[i].r);
		if (t[i].out && r >= 0)
			EXPECT_STREQ(out, t[i].out);
	}
}

/* The semantics table: most specific wins, on component boundaries. */
TEST(most_specific_rule_decides)
{
	static const char *rules_json =
		"[{\"path\":\"/\",\"access\":\"read\"},"
		" {\"path\":\"/work\",\"access\":\"none\"},"
		" {\"path\":\"/workspaces/\",\"access\":\"write\"},"
		" {\"path\":\"/workspaces/a/secret\",\"access\":\"none\"},"
		" {\"path\":\"/workspaces/a/secret/pub\",\"access\":\"read\"},"
		" {\"path\":\"/work-old\",\"access\":\"write\"}]";
	static const struct {
		const char *path, *rule;
	} t[] = {
		{"/", "/"},
		{"/etc", "/"},
		{"/work", "/work"},
		{"/work/x", "/work"},
		{"/workspaces", "/workspaces"},
		{"/workspaces/a", "/workspaces"},
		{"/workspacesx", "/"},
		{"/workx", "/"},
		{"/work-old/f", "/work-old"},
		{"/workspaces/a/secret", "/workspaces/a/secret"},
		{"/workspaces/a/secretive", "/workspaces"},
		{"/workspaces/a/secret/x", "/workspaces/a/secret"},
		{"/workspaces/a/secret/pub", "/workspaces/a/secret/pub"},
		{"/workspaces/a/secret/pub/deeper", "/workspaces/a/secret/pub"},
		{"/workspaces/a/secret/public", "/workspaces/a/secret"},
	};
	struct policy_error err;
	int r;
	struct policy_rules *rules = parse(rules_json, &r, &err);

	ASSERT_EQ(r, 0);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const struct policy_rule *m = policy_rules_match(rules, t[i].path);

		ASSERT_NOT_NULL(m);
		EXPECT_STREQ(m->path, t[i].rule);
	}
	/* Without a root rule, unnamed paths keep their permissions. */
	EXPECT_TRUE(policy_rules_has_below(rules, "/", 1));
	EXPECT_TRUE(policy_rules_has_below(rules, "/workspaces", 11));
	EXPECT_TRUE(policy_rules_has_below(rules, "/workspaces/a", 13));
	EXPECT_FALSE(policy_rules_has_below(rules, "/work", 5));
	EXPECT_FALSE(policy_rules_has_below(rules, "/workspaces/a/secret/pub", 24));
	EXPECT_FALSE(policy_rules_has_below(rules, "/etc", 4));
	/* A none or read rule below (what pins a write directory's way down to it). */
	EXPECT_TRUE(policy_rules_stricter_below(rules, "/", 1));
	EXPECT_TRUE(policy_rules_stricter_below(rules, "/workspaces", 11));
	EXPECT_TRUE(policy_rules_stricter_below(rules, "/workspaces/a", 13));
	EXPECT_TRUE(policy_rules_stricter_below(rules, "/workspaces/a/secret", 20));
	EXPECT_FALSE(policy_rules_stricter_below(rules, "/workspaces/a/secret/pub", 24));
	EXPECT_FALSE(policy_rules_stricter_below(rules, "/work", 5));
	EXPECT_FALSE(policy_rules_stricter_below(rules, "/work-old", 9));
	EXPECT_FALSE(policy_rules_stricter_below(rules, "/workspaces/a/secre", 19));
	EXPECT_EQ(policy_rules_find(rules, "/work", 5) >= 0, true);
	EXPECT_EQ(policy_rules_find(rules, "/wor", 4), -1);
	policy_rules_free(rules);

	rules = parse("[{\"path\":\"/data/bin\",\"access\":\"read\"}]", &r, &err);
	ASSERT_EQ(r, 0);
	EXPECT_NULL(policy_rules_match(rules, "/data"));
	EXPECT_NULL(policy_rules_match(rules, "/"));
	EXPECT_NULL(policy_rules_match(rules, "/data/bi"));
	EXPECT_FALSE(policy_rules_has_below(rules, "/data/bi", 8));
	EXPECT_TRUE(policy_rules_has_below(rules, "/data", 5));
	policy_rules_free(rules);

	/* Only write rules below: something below, nothing stricter. */
	rules = parse("[{\"path\":\"/a\",\"access\":\"write\"},{\"path\":\"/a/b\",\"access\":"
		      "\"write\"}]",
		      &r, &err);
	ASSERT_EQ(r, 0);
	EXPECT_TRUE(policy_rules_has_below(rules, "/a", 2));
	EXPECT_FALSE(policy_rules_stricter_below(rules, "/a", 2));
	EXPECT_FALSE(policy_rules_stricter_below(rules, "/", 1));
	policy_rules_free(rules);
}

TEST(targets_from_scratch)
{
	static const struct {
		enum policy_access a;
		bool secrets;
		mode_t in;
		uid_t uid;
		uid_t want_uid;
		gid_t want_gid;
		mode_t want_mode;
		unsigned flags;
	} t[] = {
		{POLICY_NONE, false, S_IFDIR | 02777, 10100, 0, 0, 0700, 0},
		{POLICY_NONE, false, S_IFREG | 04755, 10100, 0, 0, 0700, 0},
		{POLICY_NONE, false, S_IFREG | 0666, 10100, 0, 0, 0600, 0},
		{POLICY_NONE, true, S_IFDIR | 0755, 0, 10002, 10002, 0700, 0},
		{POLICY_NONE, true, S_IFREG | 0644, 0, 10002, 10002, 0600, 0},
		{POLICY_NONE, false, S_IFCHR | 0666, 0, 0, 0, 0600, 0},
		{POLICY_READ, false, S_IFDIR | 01777, 10100, 0, 0, 0755, 0},
		{POLICY_READ, false, S_IFREG | 06711, 10100, 0, 0, 0755, 0},
		{POLICY_READ, false, S_IFREG | 0600, 10100, 0, 0, 0644, 0},
		{POLICY_READ, false, S_IFIFO | 0600, 10100, 0, 0, 0644, 0},
		{POLICY_READ, false, S_IFBLK | 0600, 0, 0, 0, 0644, POLICY_T_LEAVE},
		{POLICY_WRITE, false, S_IFDIR | 0700, 10100, (uid_t)-1, USERS_SANDBOX_GID, 02770,
		 POLICY_T_DEFAULT_ACL},
		{POLICY_WRITE, false, S_IFREG | 02755, 10100, (uid_t)-1, USERS_SANDBOX_GID, 0770,
		 0},
		{POLICY_WRITE, false, S_IFREG | 0444, 0, (uid_t)-1, USERS_SANDBOX_GID, 0660, 0},
		{POLICY_WRITE, false, S_IFSOCK | 0777, 10100, (uid_t)-1, USERS_SANDBOX_GID, 0660,
		 0},
		{POLICY_WRITE, false, S_IFCHR | 0600, 0, (uid_t)-1, USERS_SANDBOX_GID, 0660,
		 POLICY_T_LEAVE},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct policy_target tg;

		policy_target_for(t[i].a, t[i].secrets, t[i].in, t[i].uid, &tg);
		EXPECT_EQ(tg.uid, t[i].want_uid);
		EXPECT_EQ(tg.gid, t[i].want_gid);
		EXPECT_EQ(tg.mode, t[i].want_mode);
		EXPECT_EQ(tg.flags, t[i].flags);
	}
}

static size_t mkacl(uint8_t *buf, const unsigned (*e)[3], size_t n)
{
	buf[0] = 2, buf[1] = buf[2] = buf[3] = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = buf + 4 + i * 8;
		p[0] = (uint8_t)e[i][0], p[1] = 0;
		p[2] = (uint8_t)e[i][1], p[3] = 0;
		p[4] = (uint8_t)e[i][2], p[5] = (uint8_t)(e[i][2] >> 8);
		p[6] = (uint8_t)(e[i][2] >> 16), p[7] = (uint8_t)(e[i][2] >> 24);
	}
	return 4 + n * 8;
}

TEST(permission_check_with_and_without_acls)
{
	gid_t agent[] = {10100, 10010};
	uint8_t acl[64];
	/* u::rw-, u:10100:rwx, g::r--, mask::r--, o::--- */
	static const unsigned e[][3] = {
		{0x01, 6, ~0u}, {0x02, 7, 10100}, {0x04, 4, ~0u}, {0x10, 4, ~0u}, {0x20, 0, ~0u}};
	size_t n = mkacl(acl, e, 5);

	/* Plain bits. */
	EXPECT_TRUE(policy_permits(0, 10010, 0660, NULL, 0, 10100, agent, 2, 6));
	EXPECT_FALSE(policy_permits(0, 0, 0640, NULL, 0, 10100, agent, 2, 4));
	EXPECT_TRUE(policy_permits(0, 0, 0644, NULL, 0, 10100, agent, 2, 4));
	EXPECT_TRUE(policy_permits(10100, 0, 0700, NULL, 0, 10100, agent, 2, 7));
	/* Owner bits win even when "other" would grant more. */
	EXPECT_FALSE(policy_permits(10100, 0, 0077, NULL, 0, 10100, agent, 2, 4));
	/* Named user entry limited by the mask: read only. */
	EXPECT_TRUE(policy_permits(0, 0, 0640, acl, n, 10100, agent, 2, 4));
	EXPECT_FALSE(policy_permits(0, 0, 0640, acl, n, 10100, agent, 2, 2));
	/* Another user falls to the group class (not in group 0) then other. */
	gid_t other[] = {10101, 10010};
	EXPECT_FALSE(policy_permits(0, 0, 0640, acl, n, 10101, other, 2, 4));
	/* The default-ACL bytes are a valid minimal ACL. */
	EXPECT_TRUE(policy_permits(0, 10010, 02770, policy_default_acl_xattr,
				   POLICY_DEFAULT_ACL_SIZE, 10100, agent, 2, 7));
}
TEST_HARNESS_MAIN
