/* The pure half of `pistisd check`: names, opt-outs, verdict, text and JSON output. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"
#include "lib/mountinfo.h"
#include "lib/tap.h"
#include "pistisd/check.h"

static struct check_report *all_ok(void)
{
	struct check_report *r = check_report_new("/");

	for (unsigned i = 0; i < _CHECK_MAX; i++)
		check_set(r, i, CHECK_STATUS_OK, "fine");
	return r;
}

/* Render into a malloc'd string through open_memstream. */
static char *render(const struct check_report *r, bool json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (json)
		check_format_json(r, f);
	else
		check_format_text(r, f);
	fclose(f);
	return buf;
}

TEST(names_round_trip_and_are_unique)
{
	for (unsigned i = 0; i < _CHECK_MAX; i++) {
		ASSERT_NOT_NULL(check_name(i));
		ASSERT_EQ(check_from_name(check_name(i)), (int)i);
		ASSERT_NOT_NULL(check_promise(i));
		ASSERT_NOT_NULL(check_advice(i));
	}
	ASSERT_EQ(check_from_name("nope"), -EINVAL);
	ASSERT_EQ(check_from_name("seccom"), -EINVAL);
	ASSERT_EQ(check_from_name("seccompx"), -EINVAL);
	ASSERT_NULL(check_name(_CHECK_MAX));
	ASSERT_LE((unsigned)_CHECK_MAX, sizeof(check_mask_t) * 8);
}

TEST(hard_set_is_the_documented_one)
{
	check_mask_t hard = 0;

	for (unsigned i = 0; i < _CHECK_MAX; i++)
		if (check_is_hard(i))
			hard |= CHECK_BIT(i);
	ASSERT_EQ(hard, CHECK_BIT(CHECK_CAPABILITIES) | CHECK_BIT(CHECK_SECCOMP) |
				CHECK_BIT(CHECK_OPENAT2) | CHECK_BIT(CHECK_CLOSE_RANGE) |
				CHECK_BIT(CHECK_PROTECTED_HARDLINKS) |
				CHECK_BIT(CHECK_PROTECTED_SYMLINKS) |
				CHECK_BIT(CHECK_PROTECTED_REGULAR) |
				CHECK_BIT(CHECK_PROTECTED_FIFOS) | CHECK_BIT(CHECK_STICKY_SHARED) |
				CHECK_BIT(CHECK_SUDO_CVES) | CHECK_BIT(CHECK_SUID_DUMPABLE) |
				CHECK_BIT(CHECK_NOSUID_DATA) | CHECK_BIT(CHECK_NOSUID_WORKSPACES) |
				CHECK_BIT(CHECK_NOSUID_SHARED) | CHECK_BIT(CHECK_AGENT_WRITABLE) |
				CHECK_BIT(CHECK_ACCOUNT_FILES) | CHECK_BIT(CHECK_DATA_STATE) |
				CHECK_BIT(CHECK_DATA_BIN) | CHECK_BIT(CHECK_ID_MAP) |
				CHECK_BIT(CHECK_PISTISD_BINARY));
}

TEST(hidepid_verdicts)
{
	char v[256];

	EXPECT_EQ((int)check_hidepid_status("rw,hidepid=invisible", v, sizeof(v)),
		  (int)CHECK_STATUS_OK);
	EXPECT_STREQ(v, "hidepid=invisible");
	EXPECT_EQ((int)check_hidepid_status("rw,hidepid=2", v, sizeof(v)), (int)CHECK_STATUS_OK);
	EXPECT_EQ((int)check_hidepid_status("rw,hidepid=ptraceable,subset=pid", v, sizeof(v)),
		  (int)CHECK_STATUS_OK);
	EXPECT_STREQ(v, "hidepid=ptraceable; subset=pid");
	EXPECT_EQ((int)check_hidepid_status("rw,hidepid=4", v, sizeof(v)), (int)CHECK_STATUS_OK);
	EXPECT_EQ((int)check_hidepid_status("rw,hidepid=noaccess", v, sizeof(v)),
		  (int)CHECK_STATUS_WARN);
	EXPECT_EQ((int)check_hidepid_status("rw,hidepid=1", v, sizeof(v)), (int)CHECK_STATUS_WARN);
	EXPECT_EQ((int)check_hidepid_status("rw,hidepid=0", v, sizeof(v)), (int)CHECK_STATUS_WARN);
	EXPECT_EQ((int)check_hidepid_status("rw", v, sizeof(v)), (int)CHECK_STATUS_WARN);
	EXPECT_EQ((int)check_hidepid_status("", v, sizeof(v)), (int)CHECK_STATUS_WARN);
	/* Prefixes and look-alikes are not the option. */
	EXPECT_EQ((int)check_hidepid_status("rw,xhidepid=2,hidepid2", v, sizeof(v)),
		  (int)CHECK_STATUS_WARN);
	EXPECT_EQ((int)check_hidepid_status("rw,hidepid=22", v, sizeof(v)), (int)CHECK_STATUS_WARN);
	EXPECT_EQ((int)check_hidepid_status("rw,hidepid=invisiblex", v, sizeof(v)),
		  (int)CHECK_STATUS_WARN);
}

TEST(mountinfo_lines)
{
	char l1[] = "36 35 98:0 /mnt1 /mnt\\0402 rw,noatime master:1 shared:7 - ext3 /dev/r\\134t "
		    "rw,errors=continue";
	char l2[] = "25 1 0:23 / /proc rw,nosuid,nodev,noexec,relatime - proc proc "
		    "rw,hidepid=invisible";
	char bad1[] = "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 ext3 /dev/root rw";
	char bad2[] = "x 35 98:0 / / rw - ext3 /dev/root rw";
	char bad3[] = "36 35 98:0 / / rw - ext3 /dev/root rw extra";
	char bad4[] = "";
	struct mountinfo_entry e;

	ASSERT_EQ(mountinfo_parse_line(l1, &e), 0);
	EXPECT_EQ(e.id, 36u);
	EXPECT_EQ(e.parent, 35u);
	EXPECT_STREQ(e.root, "/mnt1");
	EXPECT_STREQ(e.mount_point, "/mnt 2");
	EXPECT_STREQ(e.mount_opts, "rw,noatime");
	EXPECT_STREQ(e.fstype, "ext3");
	EXPECT_STREQ(e.source, "/dev/r\\t");
	EXPECT_STREQ(e.super_opts, "rw,errors=continue");
	ASSERT_EQ(mountinfo_parse_line(l2, &e), 0);
	EXPECT_STREQ(e.mount_point, "/proc");
	EXPECT_STREQ(e.super_opts, "rw,hidepid=invisible");
	EXPECT_EQ(mountinfo_parse_line(bad1, &e), -EINVAL);
	EXPECT_EQ(mountinfo_parse_line(bad2, &e), -EINVAL);
	EXPECT_EQ(mountinfo_parse_line(bad3, &e), -EINVAL);
	EXPECT_EQ(mountinfo_parse_line(bad4, &e), -EINVAL);
}

TEST(mountinfo_options_and_prefixes)
{
	const char *v = NULL;
	size_t n = 99;

	EXPECT_TRUE(mountinfo_opt("rw,nosuid,nodev", "nosuid", &v, &n));
	EXPECT_EQ(n, 0u);
	EXPECT_TRUE(mountinfo_opt("rw,hidepid=invisible", "hidepid", &v, &n));
	EXPECT_EQ(n, 9u);
	EXPECT_EQ(strncmp(v, "invisible", n), 0);
	EXPECT_FALSE(mountinfo_opt("rw,nosuidx,xnosuid", "nosuid", NULL, NULL));
	EXPECT_FALSE(mountinfo_opt("", "rw", NULL, NULL));
	EXPECT_TRUE(mountinfo_opt("rw", "rw", NULL, NULL));

	EXPECT_TRUE(mountinfo_path_under("/workspaces", "/workspaces"));
	EXPECT_TRUE(mountinfo_path_under("/workspaces/a/b", "/workspaces"));
	EXPECT_FALSE(mountinfo_path_under("/workspaces2", "/workspaces"));
	EXPECT_FALSE(mountinfo_path_under("/work", "/workspaces"));
	EXPECT_TRUE(mountinfo_path_under("/anything", "/"));
	EXPECT_TRUE(mountinfo_path_under("/", "/"));
}

/* Mount ids say whether another process's mount namespace is ours: each mount is in one. */
TEST(mountinfo_ids_and_other_namespaces)
{
	const char *ours = "26 1 0:5 / / rw - overlay o rw\n21 26 0:20 / /proc rw - proc proc rw\n"
			   "300 26 0:9 / /tmp rw - tmpfs t rw";
	_cleanup_free_ unsigned *ids = NULL;
	size_t n = 99;

	ASSERT_EQ(mountinfo_ids(ours, &ids, &n), 0);
	ASSERT_EQ(n, 3u);
	EXPECT_EQ(ids[0], 21u);
	EXPECT_EQ(ids[1], 26u);
	EXPECT_EQ(ids[2], 300u);
	/* Another container's: no id in common. */
	EXPECT_TRUE(mountinfo_ids_disjoint("900 800 0:77 / / rw - overlay o rw\n901 900 0:78 / "
					   "/proc rw - proc proc rw\n",
					   ids, n));
	/* A chroot in our namespace shares some; an empty listing tells nothing. */
	EXPECT_FALSE(mountinfo_ids_disjoint("300 26 0:9 / / rw - tmpfs t rw\n", ids, n));
	EXPECT_FALSE(mountinfo_ids_disjoint("", ids, n));
	/* Lines that do not start with an id are skipped, not taken for one. */
	EXPECT_FALSE(mountinfo_ids_disjoint("x21 1 0:1 / / rw\n 26 1\n", ids, n));
	EXPECT_TRUE(mountinfo_ids_disjoint("99999999999 1\n7 1 0:1 / / rw\n", ids, n));
	free(ids);
	ASSERT_EQ(mountinfo_ids("", &ids, &n), 0);
	EXPECT_EQ(n, 0u);
}

TEST(allow_parse_lists)
{
	check_mask_t m = 0;
	const char *bad = NULL;
	size_t bad_len = 0;

	ASSERT_EQ(check_allow_parse("openat2, protected_hardlinks,,", &m, &bad, &bad_len), 0);
	ASSERT_EQ(m, CHECK_BIT(CHECK_OPENAT2) | CHECK_BIT(CHECK_PROTECTED_HARDLINKS));
	ASSERT_EQ(check_allow_parse("seccomp protected_symlink", &m, &bad, &bad_len), -EINVAL);
	ASSERT_EQ(bad_len, strlen("protected_symlink"));
	ASSERT_EQ(strncmp(bad, "protected_symlink", bad_len), 0);
	/* A list with an unknown name changes nothing. */
	ASSERT_EQ(m, CHECK_BIT(CHECK_OPENAT2) | CHECK_BIT(CHECK_PROTECTED_HARDLINKS));
	ASSERT_EQ(check_allow_parse("", &m, NULL, NULL), 0);
	ASSERT_EQ(check_allow_parse(NULL, &m, NULL, NULL), 0);
}

TEST(verdict_first_hard_failure_and_opt_out)
{
	struct check_report *r = all_ok();

	ASSERT_EQ(check_first_failure(r), -1);
	/* Soft checks never fail the verdict. */
	check_set(r, CHECK_LANDLOCK, CHECK_STATUS_MISSING, "absent");
	check_set(r, CHECK_SUDO, CHECK_STATUS_MISSING, "absent");
	ASSERT_EQ(check_first_failure(r), -1);
	/* Warn on a hard one (a working fallback) holds. */
	check_set(r, CHECK_CLOSE_RANGE, CHECK_STATUS_WARN, "fallback");
	ASSERT_EQ(check_first_failure(r), -1);
	check_set(r, CHECK_PROTECTED_SYMLINKS, CHECK_STATUS_FAIL, "0");
	check_set(r, CHECK_PROTECTED_HARDLINKS, CHECK_STATUS_FAIL, "0");
	ASSERT_EQ(check_first_failure(r), CHECK_PROTECTED_HARDLINKS);
	r->allowed = CHECK_BIT(CHECK_PROTECTED_HARDLINKS);
	ASSERT_EQ(check_first_failure(r), CHECK_PROTECTED_SYMLINKS);
	r->allowed |= CHECK_BIT(CHECK_PROTECTED_SYMLINKS);
	ASSERT_EQ(check_first_failure(r), -1);
	check_set(r, CHECK_OPENAT2, CHECK_STATUS_MISSING, "ENOSYS");
	ASSERT_EQ(check_first_failure(r), CHECK_OPENAT2);
	check_report_free(r);
}

TEST(set_truncates_long_values)
{
	struct check_report *r = all_ok();
	char big[1000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	check_set(r, CHECK_SUDO, CHECK_STATUS_OK, "%s", big);
	ASSERT_EQ(strlen(r->results[CHECK_SUDO].value), sizeof(r->results[0].value) - 1);
	check_report_free(r);
}

TEST(suid_list_is_bounded)
{
	struct check_report *r = all_ok();

	for (unsigned i = 0; i < CHECK_SUID_MAX + 10; i++)
		ASSERT_EQ(check_report_add_suid(r, "/bin/x", 04755, false, 0, 0), 0);
	ASSERT_EQ(r->n_suid, (size_t)CHECK_SUID_MAX);
	ASSERT_EQ(r->n_suid_all, (size_t)CHECK_SUID_MAX + 10);
	_cleanup_free_ char *text = render(r, false);
	ASSERT_NOT_NULL(strstr(text, "and 10 more"));
	check_report_free(r);
}

TEST(json_escapes_hostile_names)
{
	struct check_report *r = all_ok();

	ASSERT_EQ(check_report_add_suid(r, "/tmp/a\"b\n\x1b[31m\xff", 06755, true, 1000, 50), 0);
	_cleanup_free_ char *json = render(r, true);
	ASSERT_NOT_NULL(json);
	ASSERT_NOT_NULL(strstr(json, "\"path\": \"/tmp/a\\\"b\\n\\u001b[31m\\u00ff\""));
	ASSERT_NOT_NULL(
		strstr(json, "\"mode\": \"06755\", \"uid\": 1000, \"gid\": 50, \"caps\": true"));
	ASSERT_NOT_NULL(strstr(json, "\"ok\": true"));
	ASSERT_NOT_NULL(strstr(json, "\"failed\": null"));
	for (const char *p = json; *p; p++)
		ASSERT_TRUE(*p == '\n' || (*p >= 0x20 && *p < 0x7f));
	check_report_free(r);
}

TEST(json_names_the_failure)
{
	struct check_report *r = all_ok();

	check_set(r, CHECK_SECCOMP, CHECK_STATUS_MISSING, "no");
	_cleanup_free_ char *json = render(r, true);
	ASSERT_NOT_NULL(strstr(json, "\"ok\": false"));
	ASSERT_NOT_NULL(strstr(json, "\"failed\": \"seccomp\""));
	ASSERT_NOT_NULL(strstr(json, "{\"name\": \"seccomp\", \"status\": \"missing\", "
				     "\"hard\": true, \"allowed\": false, \"value\": \"no\""));
	check_report_free(r);
}

TEST(text_table_shows_advice_only_for_problems)
{
	struct check_report *r = all_ok();

	check_set(r, CHECK_PROTECTED_FIFOS, CHECK_STATUS_WARN, "1 (want >= 2)");
	r->allowed = CHECK_BIT(CHECK_OPENAT2);
	_cleanup_free_ char *text = render(r, false);
	ASSERT_NOT_NULL(strstr(text, "protected_fifos"));
	ASSERT_NOT_NULL(strstr(text, "warn     yes   1 (want >= 2)"));
	ASSERT_NOT_NULL(strstr(text, "do:      sysctl fs.protected_fifos=2"));
	ASSERT_NULL(strstr(text, "do:      sysctl fs.protected_regular"));
	ASSERT_NOT_NULL(strstr(text, "ok       off   fine")); /* openat2, allowed */
	ASSERT_NOT_NULL(strstr(text, "verdict: ok"));
	check_report_free(r);
}

TEST(text_escapes_values)
{
	struct check_report *r = all_ok();

	ASSERT_EQ(check_report_add_suid(r, "/x\n\x1b]0;pwned\a", 04755, false, 0, 0), 0);
	_cleanup_free_ char *text = render(r, false);
	ASSERT_NOT_NULL(strstr(text, "/x\\n\\x1b]0;pwned\\x07"));
	ASSERT_NULL(strchr(text, '\x1b'));
	check_report_free(r);
}

/* The table's values are not quoted: an apostrophe in one is printed as it is (it was
 * "agents\' cores"), while control bytes and backslashes still are escaped. */
TEST(text_keeps_apostrophes)
{
	struct check_report *r = all_ok();

	check_set(r, CHECK_CORE_PATTERN, CHECK_STATUS_OK, "agents' cores stay off");
	ASSERT_EQ(check_report_add_suid(r, "/o'brien\\\n", 04755, false, 0, 0), 0);
	_cleanup_free_ char *text = render(r, false);
	ASSERT_NOT_NULL(strstr(text, "agents' cores stay off\n"));
	ASSERT_NOT_NULL(strstr(text, "/o'brien\\\\\\n"));
	check_report_free(r);
}

/* A value that is text already (a trusted/ reason, its names escaped once) is printed as it
 * is: never escaped a second time (its \' would read \\\'), in the table nor in a log line;
 * a raw value still is, once. */
TEST(text_values_are_not_escaped_twice)
{
	struct check_report *r = all_ok();
	char v[4 * sizeof(r->results[0].value) + 1];

	check_set_text(r, CHECK_DATA_BIN, CHECK_STATUS_FAIL,
		       "1 file(s) in /data/bin: 'x\\' is fine; \\'etc\\n\\x1b' (owner 1000)");
	_cleanup_free_ char *text = render(r, false);
	ASSERT_NOT_NULL(strstr(text, "fail     yes   1 file(s) in /data/bin: 'x\\' is fine; "
				     "\\'etc\\n\\x1b' (owner 1000)\n"));
	EXPECT_STREQ(check_value_text(&r->results[CHECK_DATA_BIN], v, sizeof(v)),
		     "1 file(s) in /data/bin: 'x\\' is fine; \\'etc\\n\\x1b' (owner 1000)");
	check_set(r, CHECK_DATA_BIN, CHECK_STATUS_FAIL, "raw %s", "a\\b\n");
	EXPECT_STREQ(check_value_text(&r->results[CHECK_DATA_BIN], v, sizeof(v)), "raw a\\\\b\\n");
	check_report_free(r);
}

/* Which sudo versions are asked about CVE-2025-32463 (1.9.14 to 1.9.17, fixed in
 * 1.9.17p1): those in the range, and any whose version cannot be read; digits only. */
TEST(sudo_versions_that_may_chroot_first)
{
	static const struct {
		const char *line;
		bool ask;
	} t[] = {
		{"Sudo version 1.9.13p3", false},
		{"Sudo version 1.9.14", true},
		{"Sudo version 1.9.16p2", true},
		{"Sudo version 1.9.17", true},
		{"Sudo version 1.9.17p1", false},
		{"Sudo version 1.9.17p2", false},
		{"Sudo version 1.9.18", false},
		{"Sudo version 1.8.31", false},
		{"Sudo version 2.0.0", false},
		{"sudo-rs version 0.2.5", false},
		/* not a version read strictly: asked */
		{"Sudo version 1.9.-3", true},
		{"Sudo version 1.9. 15", true},
		{"Sudo version +1.9.15", true},
		{"Sudo version 1.9", true},
		{"Sudo version 1.9.17p", true},
		{"Sudo version 1.9.4294967311", true},
		{"Sudo version 4294967297.9.15", true},
		{"Sudo 1.9.15", true},
		{"", true},
	};

	for (size_t i = 0; i < ELEMENTSOF(t); i++) {
		char got[64], want[64];
		snprintf(got, sizeof(got), "%s: %s", t[i].line,
			 check_sudo_may_chroot_first(t[i].line) ? "asked" : "not asked");
		snprintf(want, sizeof(want), "%s: %s", t[i].line, t[i].ask ? "asked" : "not asked");
		EXPECT_STREQ(got, want);
	}
}

TEST_HARNESS_MAIN
