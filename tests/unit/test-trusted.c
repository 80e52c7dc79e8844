/* Unit tests of trusted/: names, generated files, the sudo -l parser and verifier, and the
 * fd-based store on a temporary tree (as root where ownership matters). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/capability.h>

#include "lib/macro.h"
#include "lib/tap.h"
#include "trusted/internal.h"
#include "policy/policy.h"
#include "trusted/trusted.h"

#define D1 "d5520751b4e6cd9dd8835fa8d4e5a75974c0cbb693f427a9a0a483ee7c4f9515"
#define D2 "0000000000000000000000000000000000000000000000000000000000000001"

TEST(name_charset)
{
	char long_ok[TRUSTED_NAME_MAX + 1], too_long[TRUSTED_NAME_MAX + 2];

	ASSERT_TRUE(trusted_name_valid("hello"));
	ASSERT_TRUE(trusted_name_valid("0"));
	ASSERT_TRUE(trusted_name_valid("gh-token_2"));
	ASSERT_FALSE(trusted_name_valid(""));
	ASSERT_FALSE(trusted_name_valid(NULL));
	ASSERT_FALSE(trusted_name_valid("-x"));
	ASSERT_FALSE(trusted_name_valid("_x"));
	ASSERT_FALSE(trusted_name_valid("a.b"));
	ASSERT_FALSE(trusted_name_valid("ab~"));
	ASSERT_FALSE(trusted_name_valid("a/b"));
	ASSERT_FALSE(trusted_name_valid(".."));
	ASSERT_FALSE(trusted_name_valid("Hello"));
	ASSERT_FALSE(trusted_name_valid("a b"));
	ASSERT_FALSE(trusted_name_valid("a\n"));
	ASSERT_FALSE(trusted_name_valid("a\xc3\xa9"));
	memset(long_ok, 'a', TRUSTED_NAME_MAX);
	long_ok[TRUSTED_NAME_MAX] = '\0';
	ASSERT_TRUE(trusted_name_valid(long_ok));
	memset(too_long, 'a', TRUSTED_NAME_MAX + 1);
	too_long[TRUSTED_NAME_MAX + 1] = '\0';
	ASSERT_FALSE(trusted_name_valid(too_long));
}

TEST(dropin_pins_digests_and_env)
{
	struct trusted_entry e[2] = {{.name = "a", .digest = D1}, {.name = "b-2", .digest = D2}};
	_cleanup_free_ char *t = NULL;

	ASSERT_EQ(trusted_dropin_render(e, 2, &t), 0);
	ASSERT_NE(strstr(t, "sha256:" D1 " /data/trusted/a"), NULL);
	ASSERT_NE(strstr(t, "sha256:" D2 " /data/trusted/b-2"), NULL);
	ASSERT_NE(strstr(t, "Defaults!PISTIS_TRUSTED env_reset, !env_keep, !env_check, !setenv, "
			    "!env_file, !restricted_env_file, closefrom=3, !closefrom_override, "
			    "!preserve_groups, !stay_setuid, "),
		  NULL);
	ASSERT_NE(strstr(t, "secure_path=\"" TRUSTED_SECURE_PATH "\""), NULL);
	ASSERT_NE(
		strstr(t, "%pi-sandbox ALL = (pi-tools) CWD=/ NOPASSWD: NOSETENV: PISTIS_TRUSTED"),
		NULL);
	ASSERT_EQ(strstr(t, " SETENV:"), NULL);
	ASSERT_EQ(strstr(t, "ALL)"), NULL); /* never a runas list with ALL */
}

/* What serve believes (trusted_configured): a drop-in in this release's form, by its tail;
 * one another release wrote (another Defaults line or rule) is not, nor a file with
 * anything after the rule, nor one with no command. */
TEST(dropin_current_form)
{
	struct trusted_entry e[2] = {{.name = "a", .digest = D1}, {.name = "b-2", .digest = D2}};
	_cleanup_free_ char *t = NULL, *none = NULL;
	char *p;

	ASSERT_EQ(trusted_dropin_render(e, 2, &t), 0);
	ASSERT_TRUE(trusted_dropin_text_current(t, strlen(t)));
	ASSERT_FALSE(trusted_dropin_text_current(t, strlen(t) - 1));
	ASSERT_FALSE(trusted_dropin_text_current(NULL, 0));
	ASSERT_EQ(trusted_dropin_render(NULL, 0, &none), 0);
	ASSERT_FALSE(trusted_dropin_text_current(none, strlen(none)));
	p = strstr(t, " !env_check,");
	ASSERT_NE(p, NULL);
	memmove(p, p + strlen(" !env_check,"), strlen(p + strlen(" !env_check,")) + 1);
	ASSERT_FALSE(trusted_dropin_text_current(t, strlen(t)));
}

TEST(dropin_refuses_bad_entries)
{
	struct trusted_entry bad_name = {.name = "a.b", .digest = D1};
	struct trusted_entry bad_digest = {.name = "a", .digest = "abc"};
	char *t = NULL;

	ASSERT_EQ(trusted_dropin_render(&bad_name, 1, &t), -EINVAL);
	ASSERT_EQ(trusted_dropin_render(&bad_digest, 1, &t), -EINVAL);
	ASSERT_EQ(trusted_dropin_render(&bad_digest, TRUSTED_COMMANDS_MAX + 1, &t), -E2BIG);
	ASSERT_EQ(trusted_dropin_render(NULL, 0, &t), 0);
	ASSERT_EQ(strstr(t, "pi-sandbox ALL"), NULL);
	free(t);
}

TEST(wrapper_is_exact)
{
	_cleanup_free_ char *t = NULL;
	char *bad = NULL;

	ASSERT_EQ(trusted_wrapper_render("/usr/bin/sudo", NULL, "hello", &t), 0);
	ASSERT_NE(strstr(t, "\nexec /usr/bin/sudo -n -u pi-tools -- /data/trusted/hello \"$@\"\n"),
		  NULL);
	ASSERT_EQ(strncmp(t, "#!/bin/sh\n", 10), 0);
	ASSERT_TRUE(trusted_wrapper_is_ours(t, strlen(t)));
	ASSERT_EQ(trusted_wrapper_render("sudo", NULL, "hello", &bad), -EINVAL);
	ASSERT_EQ(trusted_wrapper_render("/usr/bin/su do", NULL, "hello", &bad), -EINVAL);
	ASSERT_EQ(trusted_wrapper_render("/usr/bin/$(x)", NULL, "hello", &bad), -EINVAL);
	ASSERT_EQ(trusted_wrapper_render("/usr/bin/sudo", NULL, "a;b", &bad), -EINVAL);
}

TEST(wrapper_trusted_exec_form)
{
	_cleanup_free_ char *t = NULL;
	char *bad = NULL, longp[TRUSTED_PISTISD_PATH_MAX + 2];

	ASSERT_EQ(trusted_wrapper_render("/usr/bin/sudo", "/usr/local/bin/pistisd", "hello", &t),
		  0);
	/* The kernel runs `/usr/local/bin/pistisd trusted-exec /data/bin/hello ARGS`. */
	ASSERT_EQ(strncmp(t,
			  "#!/usr/local/bin/pistisd trusted-exec\n# pistis trusted command "
			  "'hello'",
			  strlen("#!/usr/local/bin/pistisd trusted-exec\n# pistis trusted command "
				 "'hello'")),
		  0);
	ASSERT_NE(strstr(t, "/usr/bin/sudo -n -u pi-tools -- /data/trusted/hello"), NULL);
	ASSERT_TRUE(trusted_wrapper_is_ours(t, strlen(t)));
	/* A space or a newline would split or end the shebang line. */
	ASSERT_EQ(trusted_wrapper_render("/usr/bin/sudo", "/usr/bin/pi stisd", "hello", &bad),
		  -EINVAL);
	ASSERT_EQ(trusted_wrapper_render("/usr/bin/sudo", "/usr/bin/p\nx", "hello", &bad), -EINVAL);
	ASSERT_EQ(trusted_wrapper_render("/usr/bin/sudo", "pistisd", "hello", &bad), -EINVAL);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	ASSERT_EQ(trusted_wrapper_render("/usr/bin/sudo", longp, "hello", &bad), -EINVAL);
	ASSERT_FALSE(trusted_wrapper_is_ours("#!/bin/sh\necho hi\n", 18));
	ASSERT_FALSE(trusted_wrapper_is_ours("# pistis trusted command 'x'", 28));
	ASSERT_FALSE(trusted_wrapper_is_ours("", 0));
}

TEST(exec_name_only_from_exact_path)
{
	char name[TRUSTED_NAME_MAX + 1];

	ASSERT_EQ(trusted_exec_name("/data/bin/hello", name), 0);
	ASSERT_STREQ(name, "hello");
	ASSERT_EQ(trusted_exec_name("/data/bin/a-b_9", name), 0);
	ASSERT_EQ(trusted_exec_name(NULL, name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("/data/bin/", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("/data/bin/..", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("/data/bin/../trusted/hello", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("/data/bin//hello", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("/data/bin/x/y", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("/data/bin/Hello", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("/data/bin/a.b", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("data/bin/hello", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("./hello", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("/tmp/hello", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("/data/binx/hello", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name("//data/bin/hello", name), -EINVAL);
	ASSERT_EQ(trusted_exec_name(
			  "/data/bin/"
			  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
			  name),
		  -EINVAL); /* 65 bytes */
}

TEST(includedir_detection)
{
#define HAS(s) trusted_sudoers_has_includedir(s, strlen(s))
	ASSERT_TRUE(HAS("Defaults env_reset\n@includedir /etc/sudoers.d\n"));
	ASSERT_TRUE(HAS("#includedir /etc/sudoers.d"));
	ASSERT_TRUE(HAS("  @includedir\t/etc/sudoers.d/  \n"));
	ASSERT_FALSE(HAS("# includedir /etc/sudoers.d\n"));
	ASSERT_FALSE(HAS("#@includedir /etc/sudoers.d\n"));
	ASSERT_FALSE(HAS("@includedir /etc/sudoers.dx\n"));
	ASSERT_FALSE(HAS("@include /etc/sudoers.d\n"));
	ASSERT_FALSE(HAS(""));
#undef HAS
}

static const char listing_ok[] =
	"Matching Defaults entries for pi-agent-aaaa on vm:\n"
	"    env_reset, mail_badpass,\n"
	"    secure_path=/usr/local/sbin\\:/usr/local/bin\\:/usr/sbin\\:/usr/bin\\:/sbin\\:/bin,\n"
	"    use_pty\n\n"
	"Runas and Command-specific defaults for pi-agent-aaaa:\n"
	"    Defaults!sha256:" D1 "\n"
	"    /data/trusted/hello env_reset, !env_keep, !env_check, !setenv, !env_file,\n"
	"    !restricted_env_file, closefrom=3, !closefrom_override, !preserve_groups,\n"
	"    !stay_setuid,\n"
	"    secure_path=/usr/local/sbin\\:/usr/local/bin\\:/usr/sbin\\:/usr/bin\\:/sbin\\:/bin,\n"
	"    umask=0077, umask_override, !use_pty\n\n"
	"User pi-agent-aaaa may run the following commands on vm:\n"
	"    (pi-tools) CWD=/ NOSETENV: NOPASSWD:\n"
	"        sha256:" D1 "\n"
	"        /data/trusted/hello\n";

/* The listing of an image with its own sudoers Defaults: head, then the specific section
 * (the drop-in's line and what the case adds, as sudo prints them), then the grant. */
#define OWN_OPTIONS                                                                                \
	"env_reset, !env_keep, !env_check, !setenv, !env_file, !restricted_env_file, "             \
	"closefrom=3, !closefrom_override, !preserve_groups, !stay_setuid, "                       \
	"secure_path=/usr/local/sbin\\:/usr/local/bin\\:/usr/sbin\\:/usr/bin\\:/sbin\\:/bin, "     \
	"umask=0077, umask_override, !use_pty"
#define OWN_DEFAULTS "Defaults!sha256:" D1 " /data/trusted/hello " OWN_OPTIONS
#define LISTING(specific)                                                                          \
	"Matching Defaults entries for u on h:\n    env_reset\n\n"                                 \
	"Runas and Command-specific defaults for u:\n" specific "\n"                               \
	"User u may run the following commands on h:\n"                                            \
	"    (pi-tools) CWD=/ NOSETENV: NOPASSWD: sha256:" D1 " /data/trusted/hello\n"

TEST(sudo_list_defaults)
{
	struct trusted_entry e = {.name = "hello", .digest = D1};
	static const struct {
		const char *text;
		int want;
	} cases[] = {
		{LISTING("    " OWN_DEFAULTS "\n"), 0},
		/* sudo prints a runas entry and the next on one line */
		{LISTING("    Defaults>pi-tools setenv    " OWN_DEFAULTS "\n"), 1},
		{LISTING("    Defaults>root setenv    " OWN_DEFAULTS "\n"), 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults>ALL setenv\n"), 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults>%pi-tools setenv\n"), 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults>#10002 setenv\n"), 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults!/usr/bin/apt env_keep+=FOO\n"), 1},
		/* a link to /data/trusted elsewhere: sudo matches by inode */
		{LISTING("    " OWN_DEFAULTS "\n    Defaults!/opt/tr/hello !env_reset\n"), 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults!/data/trusted/hello !env_reset\n"), 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults!/usr/bin/apt, /data/x/y setenv\n"), 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults!ALL closefrom=20\n"), 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults!/usr/*/hello setenv\n"), 1},
		/* a command with arguments before the trusted one in the same entry */
		{LISTING("    " OWN_DEFAULTS "\n    Defaults!/usr/bin/apt update, sha256:" D1
			 " /data/trusted/hello !env_reset\n"),
		 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults!/usr/bin/apt update, ALL setenv\n"),
		 1},
		{LISTING("    " OWN_DEFAULTS
			 "\n    Defaults!/usr/bin/apt update env_keep+=ALLOW\n"),
		 1},
		{LISTING("    " OWN_DEFAULTS "\n    Defaults@h setenv\n"), 1},
		/* the drop-in's own line, but with one setting fewer or one more */
		{LISTING("    Defaults!sha256:" D1 " /data/trusted/hello env_reset, !env_keep, "
			 "!setenv, secure_path=/bin, umask=0077, umask_override\n"),
		 1},
		{LISTING("    " OWN_DEFAULTS ", setenv\n"), 1},
		/* another digest for the command, or none */
		{LISTING("    Defaults!sha256:" D2 " /data/trusted/hello " OWN_OPTIONS "\n"), 1},
		{LISTING("    Defaults!/data/trusted/hello " OWN_OPTIONS "\n"), 1},
		/* no Defaults for the command at all */
		{LISTING(""), 1},
		{"Runas and Command-specific defaults for u:\n    stray text\n"
		 "User u may run the following commands on h:\n"
		 "    (pi-tools) CWD=/ NOSETENV: NOPASSWD: sha256:" D1 " /data/trusted/hello\n",
		 1},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_free_ struct trusted_sudo_list *l = NULL;
		char why[512] = "";
		int r;

		ASSERT_EQ(trusted_sudo_list_parse(cases[i].text, strlen(cases[i].text), &l), 0);
		r = trusted_sudo_list_verify(l, &e, 1, why, sizeof(why));
		if (r != cases[i].want) {
			tap_report(__FILE__, __LINE__, "case %zu: verify %d, want %d (%s)", i, r,
				   cases[i].want, why);
			_metadata->failed = true;
		}
	}
}

TEST(sudo_list_wrapped)
{
	struct trusted_entry e = {.name = "hello", .digest = D1};
	_cleanup_free_ struct trusted_sudo_list *l = NULL;
	char why[256] = "";

	ASSERT_EQ(trusted_sudo_list_parse(listing_ok, strlen(listing_ok), &l), 0);
	ASSERT_EQ(l->n, 1u);
	ASSERT_STREQ(l->cmds[0].runas, "pi-tools");
	ASSERT_STREQ(l->cmds[0].digest, D1);
	ASSERT_STREQ(l->cmds[0].command, "/data/trusted/hello");
	ASSERT_TRUE(l->cmds[0].nopasswd);
	ASSERT_TRUE(l->cmds[0].cwd_root);
	ASSERT_FALSE(l->cmds[0].setenv);
	ASSERT_EQ(trusted_sudo_list_verify(l, &e, 1, why, sizeof(why)), 0);
}

TEST(sudo_list_extra_grants_fail)
{
	static const char more[] = "User u may run the following commands on h:\n"
				   "    (pi-tools) CWD=/ NOSETENV: NOPASSWD: sha256:" D1
				   " /data/trusted/hello, /bin/sh\n"
				   "    (ALL : ALL) ALL\n";
	struct trusted_entry e = {.name = "hello", .digest = D1};
	_cleanup_free_ struct trusted_sudo_list *l = NULL;
	char why[256] = "";

	ASSERT_EQ(trusted_sudo_list_parse(more, strlen(more), &l), 0);
	ASSERT_EQ(l->n, 3u);
	ASSERT_STREQ(l->cmds[1].command, "/bin/sh");
	ASSERT_STREQ(l->cmds[1].digest, "");
	ASSERT_STREQ(l->cmds[2].runas, "ALL : ALL");
	ASSERT_STREQ(l->cmds[2].command, "ALL");
	ASSERT_EQ(trusted_sudo_list_verify(l, &e, 1, why, sizeof(why)), 1);
	ASSERT_NE(strstr(why, "/bin/sh"), NULL);
}

TEST(sudo_list_wrong_digest_setenv_runas)
{
	struct trusted_entry e = {.name = "hello", .digest = D1};
	static const char *const bad[] = {
		"User u may run the following commands on h:\n"
		"    (pi-tools) CWD=/ NOPASSWD: sha256:" D2 " /data/trusted/hello\n",
		"User u may run the following commands on h:\n"
		"    (pi-tools) CWD=/ NOPASSWD: SETENV: sha256:" D1 " /data/trusted/hello\n",
		"User u may run the following commands on h:\n"
		"    (root) CWD=/ NOPASSWD: sha256:" D1 " /data/trusted/hello\n",
		"User u may run the following commands on h:\n"
		"    (pi-tools) NOPASSWD: sha256:" D1 " /data/trusted/hello\n",
		"User u may run the following commands on h:\n"
		"    (pi-tools) CWD=/ NOPASSWD: /data/trusted/hello\n",
		"User u may run the following commands on h:\n"
		"    (pi-tools) CWD=/ NOPASSWD: sha256:" D1 " /data/trusted/hello x\n",
		"User u may run the following commands on h:\n"
		"    (pi-tools) CWD=/ CHROOT=/x NOPASSWD: sha256:" D1 " /data/trusted/hello\n",
		"User u may run the following commands on h:\n"
		"    (pi-tools) CWD=/ NOPASSWD: sha512:" D1 " /data/trusted/hello\n",
		"User u is not allowed to run sudo on h.\n",
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		_cleanup_free_ struct trusted_sudo_list *l = NULL;
		char why[256] = "";

		ASSERT_EQ(trusted_sudo_list_parse(bad[i], strlen(bad[i]), &l), 0);
		if (trusted_sudo_list_verify(l, &e, 1, why, sizeof(why)) != 1) {
			tap_report(__FILE__, __LINE__, "case %zu verified", i);
			_metadata->failed = true;
		}
	}
}

TEST(sudo_list_garbage)
{
	struct trusted_sudo_list *l = NULL;
	static const char cut[] = "User u may run the following commands on h:\n    (pi-tools) "
				  "CWD=/ NOPASSWD: sha256:" D1 "\n";
	struct trusted_entry e = {.name = "hello", .digest = D1};
	char why[128];

	ASSERT_EQ(trusted_sudo_list_parse("", 0, &l), -EBADMSG);
	ASSERT_EQ(trusted_sudo_list_parse("sudo: unknown user x\n", 21, &l), -EBADMSG);
	ASSERT_EQ(trusted_sudo_list_parse(cut, strlen(cut), &l), 0);
	ASSERT_TRUE(l->truncated);
	ASSERT_EQ(trusted_sudo_list_verify(l, &e, 1, why, sizeof(why)), 1);
	free(l);
}

TEST(sudo_list_limit)
{
	size_t n = TRUSTED_LIST_MAX + 10, i;
	_cleanup_free_ char *t = malloc(64 + n * 24);
	char *p = t;
	struct trusted_sudo_list *l = NULL;

	ASSERT_NE(t, NULL);
	p += sprintf(p, "User u may run the following commands on h:\n    (x) ");
	for (i = 0; i < n; i++)
		p += sprintf(p, "/bin/c%zu, ", i);
	ASSERT_EQ(trusted_sudo_list_parse(t, (size_t)(p - t), &l), 0);
	ASSERT_EQ(l->n, (size_t)TRUSTED_LIST_MAX);
	ASSERT_TRUE(l->truncated);
	free(l);
}

/* --- the store on a temporary root ------------------------------------------------- */

static char *make_root(void)
{
	char *d = strdup("/tmp/test-trusted.XXXXXX");

	if (!d || !mkdtemp(d))
		return NULL;
	(void)chmod(d, 0755);
	return d;
}

TEST(shebang_parse_as_the_kernel)
{
	char interp[TRUSTED_SHEBANG_MAX], arg[TRUSTED_SHEBANG_MAX], big[400];

	ASSERT_EQ(trusted_shebang_parse("echo hi\n", 8, interp, arg), 0);
	ASSERT_EQ(trusted_shebang_parse("", 0, interp, arg), 0);
	ASSERT_EQ(trusted_shebang_parse("#!/bin/sh\n", 10, interp, arg), 1);
	ASSERT_STREQ(interp, "/bin/sh");
	ASSERT_STREQ(arg, "");
	ASSERT_EQ(trusted_shebang_parse("#! \t/usr/bin/env  python3 -u \t\nx", 34, interp, arg), 1);
	ASSERT_STREQ(interp, "/usr/bin/env");
	ASSERT_STREQ(arg, "python3 -u"); /* one argument, never split */
	ASSERT_EQ(trusted_shebang_parse("#!/bin/sh\r\n", 11, interp, arg), 1);
	ASSERT_STREQ(interp, "/bin/sh\r"); /* what the kernel would exec */
	ASSERT_EQ(trusted_shebang_parse("#!/bin/sh", 9, interp, arg), 1); /* no newline: whole */
	ASSERT_STREQ(interp, "/bin/sh");
	ASSERT_EQ(trusted_shebang_parse("#!\n", 3, interp, arg), -EINVAL);
	ASSERT_EQ(trusted_shebang_parse("#!  \n", 5, interp, arg), -EINVAL);
	ASSERT_EQ(trusted_shebang_parse("#!/bin/s\0h\n", 12, interp, arg), -EINVAL);
	memset(big, 'a', sizeof(big));
	memcpy(big, "#!/", 3);
	big[sizeof(big) - 1] = '\n';
	ASSERT_EQ(trusted_shebang_parse(big, sizeof(big), interp, arg), -EINVAL);
}

TEST(interp_split_as_the_kernel_splits_a_shebang)
{
	char inner[TRUSTED_SHEBANG_MAX], arg[TRUSTED_SHEBANG_MAX], big[300];

	ASSERT_EQ(trusted_interp_split("trusted-exec", inner, arg), 0);
	ASSERT_EQ(trusted_interp_split("trusted-interpx /bin/sh", inner, arg), 0);
	ASSERT_EQ(trusted_interp_split("-u", inner, arg), 0);
	ASSERT_EQ(trusted_interp_split("", inner, arg), 0);
	ASSERT_EQ(trusted_interp_split("trusted-interp", inner, arg), -EINVAL);
	ASSERT_EQ(trusted_interp_split("trusted-interp \t ", inner, arg), -EINVAL);
	ASSERT_EQ(trusted_interp_split("trusted-interp /bin/sh", inner, arg), 1);
	ASSERT_STREQ(inner, "/bin/sh");
	ASSERT_STREQ(arg, "");
	ASSERT_EQ(trusted_interp_split("trusted-interp\t/usr/bin/python3  -u -E \t", inner, arg),
		  1);
	ASSERT_STREQ(inner, "/usr/bin/python3");
	ASSERT_STREQ(arg, "-u -E"); /* one argument, as the kernel would pass it */
	ASSERT_EQ(trusted_interp_split("trusted-interp sh", inner, arg), 1);
	ASSERT_STREQ(inner, "sh"); /* relative: the callers refuse it */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "trusted-interp /", 16);
	ASSERT_EQ(trusted_interp_split(big, inner, arg), 0); /* longer than a #! line */
}

/* The kernel runs `INTERP ARG SCRIPT ARGS...` with the caller's ARGS: only flags that leave
 * SCRIPT the program and ARGS its arguments pass (red team: `#!/bin/sed -f` let an agent
 * run `NAME -e '1e id' /data/.secrets/tok` as pi-tools). */
TEST(interp_arg_keeps_the_callers_arguments_the_scripts)
{
	static const char *const ok[][2] = {
		{"/bin/sh", ""},
		{"/bin/sh", "-e"},
		{"/bin/bash", "-eu"},
		{"/bin/sh", "-"},
		{"/bin/bash", "--norc"},
		{"/usr/bin/python3", "-u"},
		{"/usr/bin/python3.11", "-I -E"},
		{"/usr/bin/python3", "-Wignore"},
		{"/usr/bin/perl", "-T"},
		{"/usr/bin/perl5.36.0", "-X"},
		{"/usr/bin/perl", "-CSDA"},
		{"/usr/bin/python3", "-P"},
		{"/usr/bin/ruby", "-W0"},
		{"/usr/bin/ruby", "--disable-gems"},
		{"/usr/bin/node", "--max-old-space-size=4096"},
		{"/usr/bin/node", "--no-warnings"},
		{"/usr/bin/php8.2", "-n"},
		{"/usr/bin/lua5.4", ""},
		{"/usr/bin/tclsh8.6", ""},
		{"/opt/x/runner", ""},
		{"/opt/x/runner", "conf.yml"}, /* no option: its own business, as before */
	};
	static const char *const refused[][2] = {
		{"/bin/sed", "-f"},
		{"/usr/bin/awk", "-f"},
		{"/usr/bin/gawk", "--file"},
		{"/usr/bin/jq", "-f"},
		{"/usr/bin/make", "-f"},
		{"/usr/bin/expect", "-f"},
		{"/bin/sh", "-s"},
		{"/bin/bash", "-es"},
		{"/bin/sh", "-c"},
		{"/bin/bash", "-o"},
		{"/bin/bash", "--rcfile"},
		{"/bin/sh", "-i"},
		{"/bin/sh", "-v"},
		{"/bin/bash", "-ev"},
		{"/bin/bash", "--verbose"},
		{"/bin/sh", "/opt/other"},
		{"/usr/bin/python3", "-i"},
		{"/usr/bin/python3", "-"},
		{"/usr/bin/python3", "-W"},
		{"/usr/bin/python3", "-m"},
		{"/usr/bin/python3", "-u -c"},
		{"/usr/bin/perl", "-p"},
		{"/usr/bin/perl", "-n"},
		{"/usr/bin/perl", "-s"},
		{"/usr/bin/perl", "-I"},
		{"/usr/bin/perl", "-w -M"},
		{"/usr/bin/ruby", "-r"},
		{"/usr/bin/ruby", "-n"},
		{"/usr/bin/node", "-r"},
		{"/usr/bin/node", "--require"},
		{"/usr/bin/node", "-i"},
		{"/usr/bin/php", "-d"},
		{"/usr/bin/lua", "-i"},
		{"/usr/bin/lua", "-"},
		{"/usr/bin/tclsh", "-encoding"},
	};
	char why[512];

	for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
		why[0] = '\0';
		EXPECT_EQ(trusted_interp_arg_check(ok[i][0], ok[i][1], why, sizeof(why)), 0);
		if (why[0])
			printf("# %s %s: %s\n", ok[i][0], ok[i][1], why);
	}
	for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
		why[0] = '\0';
		EXPECT_EQ(trusted_interp_arg_check(refused[i][0], refused[i][1], why, sizeof(why)),
			  1);
		if (!why[0])
			printf("# %s %s: refused without a reason\n", refused[i][0], refused[i][1]);
	}
	ASSERT_EQ(trusted_interp_arg_check("/bin/sed", "-f", why, sizeof(why)), 1);
	EXPECT_NOT_NULL(
		strstr(why, "the script follows the option '-f', and sed is no interpreter"));
	ASSERT_EQ(trusted_interp_arg_check("/bin/bash", "-ex", why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "traces every command"));
	ASSERT_EQ(trusted_interp_arg_check("/bin/bash", "+x", why, sizeof(why)), 1);
	ASSERT_EQ(trusted_interp_arg_check("/bin/sh", "-s", why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "option '-s' to sh"));
	/* -v prints the lines of a sourced file: `. /data/.secrets/env` with its TOKEN=… */
	ASSERT_EQ(trusted_interp_arg_check("/bin/dash", "-eu -v", why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "option '-v' to dash prints every line the shell reads"));
	ASSERT_EQ(trusted_interp_arg_check("/bin/bash", "--verbose", why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "a secrets file it reads with '.' is printed"));
	EXPECT_EQ(trusted_interp_arg_check("/bin/bash", "--noprofile", why, sizeof(why)), 0);
	/* sed, awk, jq, make, expect: with no option too (GNU getopt takes the caller's -e
	 * after SCRIPT); an interpreter pistis does not know, with none, is its author's word */
	ASSERT_EQ(trusted_interp_arg_check("/bin/sed", "", why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "sed reads the caller's arguments as its own options"));
	EXPECT_EQ(trusted_interp_arg_check("/usr/bin/gawk", "", why, sizeof(why)), 1);
	EXPECT_EQ(trusted_interp_arg_check("/usr/bin/make", "", why, sizeof(why)), 1);
	EXPECT_EQ(trusted_interp_arg_check("/usr/bin/jq", "", why, sizeof(why)), 1);
	EXPECT_EQ(trusted_interp_arg_check("/opt/x/runner", "", why, sizeof(why)), 0);
	EXPECT_EQ(trusted_interp_arg_check("/usr/bin/sedate", "", why, sizeof(why)), 0);
}

/* A debugger on the network every agent shares: node's inspector took "--NAME=VALUE"'s
 * way in, and any agent that connected to it ran code in the script as pi-tools (red team,
 * reproduced with `node inspect` reading a file through a script's inspector). */
TEST(interp_arg_refuses_a_debugger_every_agent_reaches)
{
	static const char *const refused[][2] = {
		{"/usr/bin/node", "--inspect=127.0.0.1:9229"},
		{"/usr/bin/node", "--inspect=0"},
		{"/usr/bin/nodejs", "--inspect-brk=9229"},
		{"/usr/bin/node", "--inspect_brk=9229"}, /* node reads '_' as '-' */
		{"/usr/bin/node", "--inspect-wait=9229"},
		{"/usr/bin/node", "--inspect-port=9229"},
		{"/usr/bin/node", "--no-warnings --inspect=9229"},
		{"/usr/bin/node", "--debug-port=9229"},
		{"/usr/bin/node", "--inspect"},
		{"/usr/bin/php8.2", "-dxdebug.mode=debug"},
		{"/usr/bin/php", "-n -dxdebug.start_with_request=yes"},
	};
	char why[512];

	for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
		why[0] = '\0';
		EXPECT_EQ(trusted_interp_arg_check(refused[i][0], refused[i][1], why, sizeof(why)),
			  1);
		if (!strstr(why, "starts a debugger on the network that every agent shares"))
			printf("# %s %s: %s\n", refused[i][0], refused[i][1], why);
		EXPECT_NOT_NULL(strstr(why, "starts a debugger"));
	}
	/* what stays: other attached values, and PHP settings of other names */
	EXPECT_EQ(trusted_interp_arg_check("/usr/bin/node", "--max-old-space-size=4096", why,
					   sizeof(why)),
		  0);
	EXPECT_EQ(trusted_interp_arg_check("/usr/bin/node", "--stack-size=2000", why, sizeof(why)),
		  0);
	EXPECT_EQ(trusted_interp_arg_check("/usr/bin/php", "-dmemory_limit=64M", why, sizeof(why)),
		  0);
}

/* What prints the script's values or sources, loads code the #! line does not pin, or
 * opens a debugger, for every family pistis knows, each spelling refused with the reason of
 * its class (red team: perl -w printed 'Argument "<the secret>" isn't numeric', node
 * --require=./x.js ran the caller's working directory's x.js, --report-uncaught-exception
 * wrote the environment to a 0644 file there); every flag the families still take, beside. */
TEST(interp_arg_refuses_what_prints_loads_or_debugs)
{
	static const char WARN[] = "turns on warnings, which print the values they are about";
	static const char DEBUG[] = "prints the interpreter's debugging output";
	static const char STDIN_DEBUGGER[] = "reads its commands from the caller's stdin";
	static const char IMPORTS[] = "prints every module the script imports";
	static const char LOADS[] = "loads code the #! line does not pin";
	static const char DIAG[] = "prints or writes what the script holds or does";
	static const char NET[] = "starts a debugger on the network";
	static const char PLAIN[] = "only the plain flags docs/trusted.md lists for it are allowed";
	static const struct {
		const char *interp, *arg, *why; /* why: NULL when allowed */
	} cases[] = {
		/* perl: the -w family, the debuggers, modules */
		{"/usr/bin/perl", "-w", WARN},
		{"/usr/bin/perl", "-W", WARN},
		{"/usr/bin/perl", "-Tw", WARN},
		{"/usr/bin/perl5.36.0", "-wd", WARN}, /* the first that is not plain decides */
		{"/usr/bin/perl", "-d", STDIN_DEBUGGER},
		{"/usr/bin/perl", "-dt", STDIN_DEBUGGER},
		{"/usr/bin/perl", "-d:Trace", STDIN_DEBUGGER},
		{"/usr/bin/perl", "-Td", STDIN_DEBUGGER},
		{"/usr/bin/perl", "-Dt", DEBUG},
		{"/usr/bin/perl", "-Dx", DEBUG},
		{"/usr/bin/perl", "-MData::Dumper", LOADS},
		{"/usr/bin/perl", "-mstrict", LOADS},
		{"/usr/bin/perl", "-I/tmp", LOADS},
		{"/usr/bin/perl", "-T -Mstrict", LOADS},
		{"/usr/bin/perl", "-V", PLAIN},
		{"/usr/bin/perl", "-T", NULL},
		{"/usr/bin/perl", "-t", NULL},
		{"/usr/bin/perl", "-X", NULL},
		{"/usr/bin/perl", "-U", NULL},
		{"/usr/bin/perl", "-l", NULL},
		{"/usr/bin/perl", "-XTl", NULL},
		{"/usr/bin/perl", "-CSDA", NULL},
		{"/usr/bin/perl", "-C", NULL},
		{"/usr/bin/perl", "--", NULL},
		/* ruby */
		{"/usr/bin/ruby", "-d", DEBUG},
		{"/usr/bin/ruby", "--debug", DEBUG},
		{"/usr/bin/ruby", "--debug=frozen-string-literal", DEBUG},
		{"/usr/bin/ruby", "-y", DEBUG},
		{"/usr/bin/ruby", "--yydebug", DEBUG},
		{"/usr/bin/ruby", "--dump=insns", DEBUG},
		{"/usr/bin/ruby", "--dump=yydebug", DEBUG},
		{"/usr/bin/ruby3.1", "-Ud", DEBUG},
		{"/usr/bin/ruby", "-w", WARN},
		{"/usr/bin/ruby", "-W", WARN},
		{"/usr/bin/ruby", "-W2", WARN},
		{"/usr/bin/ruby", "-v", WARN},
		{"/usr/bin/ruby", "--verbose", WARN},
		{"/usr/bin/ruby", "-wd", WARN},
		{"/usr/bin/ruby", "-rjson", LOADS},
		{"/usr/bin/ruby", "-r", LOADS},
		{"/usr/bin/ruby", "-I/tmp", LOADS},
		{"/usr/bin/ruby", "--enable=rubyopt", PLAIN},
		{"/usr/bin/ruby", "-W:deprecated", WARN},
		{"/usr/bin/ruby", "-W:", WARN},
		{"/usr/bin/ruby", "-W:no-Deprecated", PLAIN},
		{"/usr/bin/ruby", "-W:no-deprecated", NULL},
		{"/usr/bin/ruby", "-W0", NULL},
		{"/usr/bin/ruby", "-W1", NULL},
		{"/usr/bin/ruby", "-U", NULL},
		{"/usr/bin/ruby", "--disable-gems", NULL},
		{"/usr/bin/ruby", "--disable=gems,did_you_mean", NULL},
		{"/usr/bin/ruby", "--enable=frozen-string-literal", NULL},
		{"/usr/bin/ruby", "--yjit", NULL},
		/* python */
		{"/usr/bin/python3", "-v", IMPORTS},
		{"/usr/bin/python3", "-vv", IMPORTS},
		{"/usr/bin/python3", "-uv", IMPORTS},
		{"/usr/bin/python3", "-Ximporttime", IMPORTS},
		{"/usr/bin/python3", "-d", DEBUG},
		{"/usr/bin/python3.11", "-Id", DEBUG},
		{"/usr/bin/python3", "-Xdev", WARN},
		{"/usr/bin/python3", "-Xtracemalloc", WARN},
		{"/usr/bin/python3", "-Xtracemalloc=25", WARN},
		{"/usr/bin/python3", "-Xwarn_default_encoding", WARN},
		{"/usr/bin/python3", "-Wdefault", WARN},
		{"/usr/bin/python3", "-Wd", WARN},
		{"/usr/bin/python3", "-Walways", WARN},
		{"/usr/bin/python3", "-Wonce", WARN},
		{"/usr/bin/python3", "-W::Warning", WARN},
		{"/usr/bin/python3", "-Wignore::evil.Warning", LOADS},
		{"/usr/bin/python3", "-Xpycache_prefix=/tmp/pyc", LOADS},
		{"/usr/bin/python3", "-Xfaulthandler", PLAIN},
		{"/usr/bin/python3", "-Xperf", PLAIN},
		{"/usr/bin/python3", "-X", PLAIN},
		{"/usr/bin/python3", "-uXdev", PLAIN},
		{"/usr/bin/python3", "-Wignore", NULL},
		{"/usr/bin/python3", "-Wi", NULL},
		{"/usr/bin/python3", "-Werror", NULL},
		{"/usr/bin/python3", "-Wignore::DeprecationWarning", NULL},
		{"/usr/bin/python3", "-Wignore:x.y:DeprecationWarning:a.b", NULL},
		{"/usr/bin/python3", "-Xutf8", NULL},
		{"/usr/bin/python3", "-Xutf8=1", NULL},
		{"/usr/bin/python3", "-Xint_max_str_digits=640", NULL},
		{"/usr/bin/python3", "-Xfrozen_modules=off", NULL},
		{"/usr/bin/python3", "-bBEIOPqRsSuVx", NULL},
		{"/usr/bin/pypy3", "-I", NULL},
		/* node: --NAME=VALUE and --no-… are no longer open, '_' read as '-' */
		{"/usr/bin/node", "--require=./x.js", LOADS},
		{"/usr/bin/node", "--require", LOADS},
		{"/usr/bin/node", "--import=./x.mjs", LOADS},
		{"/usr/bin/node", "--loader=./x.mjs", LOADS},
		{"/usr/bin/node", "--experimental-loader=x", LOADS},
		{"/usr/bin/node", "--experimental_loader=x", LOADS},
		{"/usr/bin/node", "--env-file=.env", LOADS},
		{"/usr/bin/node", "--env_file=.env", LOADS},
		{"/usr/bin/node", "--snapshot-blob=x.blob", LOADS},
		{"/usr/bin/node", "--openssl-config=x.cnf", LOADS},
		{"/usr/bin/node", "--report-uncaught-exception", DIAG},
		{"/usr/bin/node", "--report-on-fatalerror", DIAG},
		{"/usr/bin/node", "--report_on_signal", DIAG},
		{"/usr/bin/node", "--report-filename=stdout", DIAG},
		{"/usr/bin/node", "--report-dir=/tmp", DIAG},
		{"/usr/bin/node", "--cpu-prof", DIAG},
		{"/usr/bin/node", "--heap-prof-dir=/tmp", DIAG},
		{"/usr/bin/node", "--heapsnapshot-signal=SIGUSR2", DIAG},
		{"/usr/bin/node", "--heapsnapshot-near-heap-limit=1", DIAG},
		{"/usr/bin/node", "--prof", DIAG},
		{"/usr/bin/node", "--diagnostic-dir=/tmp", DIAG},
		{"/usr/bin/node", "--redirect-warnings=/tmp/w", DIAG},
		{"/usr/bin/node", "--trace-warnings", DIAG},
		{"/usr/bin/node", "--trace-deprecation", DIAG},
		{"/usr/bin/node", "--trace_uncaught", DIAG},
		{"/usr/bin/node", "--trace-event-categories=node", DIAG},
		{"/usr/bin/node", "--tls-keylog=/tmp/k", DIAG},
		{"/usr/bin/node", "--perf-basic-prof", DIAG},
		{"/usr/bin/node", "--logfile=/tmp/v8.log", DIAG},
		{"/usr/bin/node", "--abort-on-uncaught-exception", DIAG},
		{"/usr/bin/node", "--inspect=9229", NET},
		{"/usr/bin/node", "--debug_port=9229", NET},
		{"/usr/bin/node", "--eval=1", PLAIN},
		{"/usr/bin/node", "--title=x", PLAIN},
		{"/usr/bin/node", "--no-experimental-permission", PLAIN},
		{"/usr/bin/node", "--no-warnings=1", PLAIN},
		{"/usr/bin/node", "--max-old-space-size=64M", PLAIN},
		{"/usr/bin/node", "--max-old-space-size=", PLAIN},
		{"/usr/bin/node", "--max-old-space-size", PLAIN},
		{"/usr/bin/node", "--unhandled-rejections=strictly", PLAIN},
		{"/usr/bin/node", "--stack-size-x=1", PLAIN},
		{"/usr/bin/node", "-r", PLAIN},
		{"/usr/bin/node", "--", NULL},
		{"/usr/bin/node", "--max-old-space-size=4096", NULL},
		{"/usr/bin/node", "--max_old_space_size=4096", NULL},
		{"/usr/bin/node", "--stack-size=2000", NULL},
		{"/usr/bin/node", "--unhandled-rejections=strict", NULL},
		{"/usr/bin/node", "--no-warnings", NULL},
		{"/usr/bin/node", "--no_deprecation", NULL},
		{"/usr/bin/nodejs", "--enable-source-maps", NULL},
		{"/usr/bin/node", "--use-strict --no-addons", NULL},
		/* php: -d of settings that make it quieter or bound it, nothing else */
		{"/usr/bin/php", "-dauto_prepend_file=/tmp/x.php", LOADS},
		{"/usr/bin/php", "-dinclude_path=/tmp", LOADS},
		{"/usr/bin/php", "-dextension=/tmp/x.so", LOADS},
		{"/usr/bin/php", "-dzend_extension=x.so", LOADS},
		{"/usr/bin/php", "-dopcache.preload=/tmp/x.php", LOADS},
		{"/usr/bin/php", "-zx.so", LOADS},
		{"/usr/bin/php", "-c/tmp/php.ini", LOADS},
		{"/usr/bin/php", "-ddisplay_errors=1", WARN},
		{"/usr/bin/php", "-ddisplay_errors=stderr", WARN},
		{"/usr/bin/php", "-derror_reporting=E_ALL", WARN},
		{"/usr/bin/php", "-derror_log=/tmp/e", WARN},
		{"/usr/bin/php", "-dhtml_errors=1", WARN},
		{"/usr/bin/php8.2", "-dxdebug.mode=debug", NET},
		{"/usr/bin/php", "-dsession.save_path=/tmp", PLAIN},
		{"/usr/bin/php", "-dmemory_limit=64MB", PLAIN},
		{"/usr/bin/php", "-e", PLAIN},
		{"/usr/bin/php", "-ddisplay_errors=0", NULL},
		{"/usr/bin/php", "-ddisplay_errors=off", NULL},
		{"/usr/bin/php", "-derror_reporting=0", NULL},
		{"/usr/bin/php", "-dmemory_limit=64M", NULL},
		{"/usr/bin/php", "-dmemory_limit=-1", NULL},
		{"/usr/bin/php", "-dmax_execution_time=30", NULL},
		{"/usr/bin/php", "-nq", NULL},
		/* lua */
		{"/usr/bin/lua5.4", "-W", WARN},
		{"/usr/bin/lua", "-EW", WARN},
		{"/usr/bin/lua", "-lsocket", LOADS},
		{"/usr/bin/luajit", "-El", LOADS},
		{"/usr/bin/lua", "-v", PLAIN},
		{"/usr/bin/lua", "-E", NULL},
		/* shells: as before */
		{"/bin/bash", "--debugger", LOADS},
		{"/bin/bash", "-ex", "traces every command"},
		{"/bin/sh", "+v", "prints every line the shell reads"},
		{"/bin/sh", "+", PLAIN},
		{"/bin/sh", "-eu", NULL},
		{"/bin/sh", "+e", NULL},
		{"/bin/sh", "-", NULL},
		{"/usr/bin/tclsh", "-encoding", PLAIN},
	};
	char why[1024];

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		int r;

		why[0] = '\0';
		r = trusted_interp_arg_check(cases[i].interp, cases[i].arg, why, sizeof(why));
		if (r != !!cases[i].why || (cases[i].why && !strstr(why, cases[i].why)))
			printf("# %s %s: %d '%s', wanted %s\n", cases[i].interp, cases[i].arg, r,
			       why, cases[i].why ? cases[i].why : "allowed");
		EXPECT_EQ(r, !!cases[i].why);
		if (cases[i].why)
			EXPECT_NOT_NULL(strstr(why, cases[i].why));
	}
	/* the reason names the word and the interpreter, and says why in full */
	ASSERT_EQ(trusted_interp_arg_check("/usr/bin/perl", "-T -w", why, sizeof(why)), 1);
	EXPECT_STREQ(why, "option '-w' to perl turns on warnings, which print the values they are "
			  "about to the caller's stderr (perl: 'Argument \"<the value>\" isn't "
			  "numeric'): a secret the script handles reaches the agent");
}

/* A minimal ELF image: header, phnum program headers at 64 (class 64) or 52 (class 32),
 * then the loader path; every field written in the requested byte order. */
static void put(uint8_t *p, uint64_t v, size_t size, bool msb)
{
	for (size_t i = 0; i < size; i++)
		p[msb ? size - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

static size_t make_elf(uint8_t *b, bool c64, bool msb, unsigned type, unsigned n_interp,
		       const char *loader)
{
	size_t eh = c64 ? 64 : 52, ph = c64 ? 56 : 32, w = c64 ? 8 : 4, phnum = 2 + n_interp;
	size_t off = eh + phnum * ph, len = strlen(loader) + 1;

	memset(b, 0, off + len);
	memcpy(b, "\177ELF", 4);
	b[4] = c64 ? 2 : 1;
	b[5] = msb ? 2 : 1;
	b[6] = 1;
	put(b + 16, type, 2, msb);
	put(b + (c64 ? 32 : 28), eh, w, msb);	 /* e_phoff */
	put(b + (c64 ? 54 : 42), ph, 2, msb);	 /* e_phentsize */
	put(b + (c64 ? 56 : 44), phnum, 2, msb); /* e_phnum */
	put(b + eh, 6, 4, msb);			 /* PT_PHDR */
	put(b + eh + ph, 1, 4, msb);		 /* PT_LOAD */
	for (unsigned i = 0; i < n_interp; i++) {
		uint8_t *p = b + eh + (2 + i) * ph;

		put(p, 3, 4, msb); /* PT_INTERP */
		put(p + (c64 ? 8 : 4), off, w, msb);
		put(p + (c64 ? 32 : 16), len, w, msb);
	}
	memcpy(b + off, loader, len);
	return off + len;
}

TEST(elf_loader_as_the_kernel_reads_it)
{
	static uint8_t b[4096];
	char out[PATH_MAX];
	size_t n;

	for (int c64 = 0; c64 < 2; c64++)
		for (int msb = 0; msb < 2; msb++) {
			n = make_elf(b, c64, msb, 2, 1, "/lib64/ld-linux-x86-64.so.2");
			ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), 1);
			ASSERT_STREQ(out, "/lib64/ld-linux-x86-64.so.2");
			n = make_elf(b, c64, msb, 3, 1, "lib/ld.so"); /* ET_DYN, relative */
			ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), 1);
			ASSERT_STREQ(out, "lib/ld.so");
			n = make_elf(b, c64, msb, 2, 0, ""); /* static */
			ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), 0);
		}
	/* Not a program the kernel runs, not ELF: nothing to check. */
	n = make_elf(b, true, false, 1, 1, "/evil/ld.so"); /* ET_REL */
	ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), 0);
	ASSERT_EQ(trusted_elf_interp("#!/bin/sh\n", 10, out, sizeof(out)), 0);
	ASSERT_EQ(trusted_elf_interp("\177EL", 3, out, sizeof(out)), 0);
	/* Two loaders: which one runs is the kernel's choice, not ours to guess. */
	n = make_elf(b, true, false, 2, 2, "/lib64/ld.so");
	ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), -EINVAL);
	/* Cut anywhere before the path's NUL: never read past len. */
	n = make_elf(b, true, false, 2, 1, "/lib64/ld-linux-x86-64.so.2");
	for (size_t cut = 16; cut < n; cut++)
		ASSERT_EQ(trusted_elf_interp(b, cut, out, sizeof(out)), -EINVAL);
	/* The path not NUL-terminated where its size says. */
	b[n - 1] = 'x';
	ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), -EINVAL);
	/* A path that does not fit the caller's buffer. */
	n = make_elf(b, true, false, 2, 1, "/lib64/ld-linux-x86-64.so.2");
	ASSERT_EQ(trusted_elf_interp(b, n, out, 10), -EINVAL);
	/* Program headers of another size than the class's, or none, or a bad class. */
	put(b + 54, 57, 2, false);
	ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), -EINVAL);
	n = make_elf(b, true, false, 2, 1, "/x");
	put(b + 56, 0, 2, false);
	ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), -EINVAL);
	n = make_elf(b, true, false, 2, 1, "/x");
	b[4] = 3;
	ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), -EINVAL);
	/* A huge e_phoff does not wrap around. */
	n = make_elf(b, true, false, 2, 1, "/x");
	put(b + 32, UINT64_MAX - 8, 8, false);
	ASSERT_EQ(trusted_elf_interp(b, n, out, sizeof(out)), -EINVAL);
}

/* A dynamic ELF image: header; PT_LOAD (the whole file at vaddr DYN_BASE) and PT_DYNAMIC;
 * the dynamic table at DYN_OFF; the string table at DYN_STR. Entries with a string (tag
 * with s set) get the string appended to the table and its offset as value. */
#define DYN_BASE 0x10000
#define DYN_OFF 0x100
#define DYN_STR dyn_str
static size_t dyn_str = 0x800;
struct dyn_ent {
	uint64_t tag, val;
	const char *s;
};
static size_t make_dyn_elf(uint8_t *b, size_t cap, bool c64, bool msb, const struct dyn_ent *e,
			   size_t n, size_t *ret_dyn_filesz)
{
	size_t eh = c64 ? 64 : 52, ph = c64 ? 56 : 32, w = c64 ? 8 : 4, s = 1, len;
	uint8_t *p;

	memset(b, 0, cap);
	memcpy(b, "\177ELF", 4);
	b[4] = c64 ? 2 : 1;
	b[5] = msb ? 2 : 1;
	b[6] = 1;
	put(b + 16, 3, 2, msb);
	put(b + (c64 ? 32 : 28), eh, w, msb);
	put(b + (c64 ? 54 : 42), ph, 2, msb);
	put(b + (c64 ? 56 : 44), 2, 2, msb);
	for (size_t i = 0; i < n; i++) {
		p = b + DYN_OFF + i * 2 * w;
		put(p, e[i].tag, w, msb);
		if (e[i].s) {
			put(p + w, s, w, msb);
			memcpy(b + DYN_STR + s, e[i].s, strlen(e[i].s) + 1);
			s += strlen(e[i].s) + 1;
		} else {
			put(p + w, e[i].val, w, msb);
		}
	}
	/* DT_NULL after the entries (already zero); STRTAB and STRSZ patched in by value. */
	for (size_t i = 0; i < n; i++) {
		p = b + DYN_OFF + i * 2 * w;
		if (e[i].tag == 5 && !e[i].s && e[i].val == 0)
			put(p + w, DYN_BASE + DYN_STR, w, msb);
		if (e[i].tag == 10 && !e[i].s && e[i].val == 0)
			put(p + w, s, w, msb);
	}
	len = DYN_STR + s;
	p = b + eh; /* PT_LOAD: the whole file */
	put(p, 1, 4, msb);
	put(p + (c64 ? 8 : 4), 0, w, msb);
	put(p + (c64 ? 16 : 8), DYN_BASE, w, msb);
	put(p + (c64 ? 32 : 16), len, w, msb);
	put(p + (c64 ? 40 : 20), len, w, msb);
	p = b + eh + ph; /* PT_DYNAMIC */
	put(p, 2, 4, msb);
	put(p + (c64 ? 8 : 4), DYN_OFF, w, msb);
	put(p + (c64 ? 16 : 8), DYN_BASE + DYN_OFF, w, msb);
	put(p + (c64 ? 32 : 16), (n + 1) * 2 * w, w, msb);
	put(p + (c64 ? 40 : 20), (n + 1) * 2 * w, w, msb);
	if (ret_dyn_filesz)
		*ret_dyn_filesz = (n + 1) * 2 * w;
	return len;
}

#define STD_DYN                                                                                    \
	{5, 0, NULL}, {10, 0, NULL}, {15, 0, "$ORIGIN/../lib"}, {29, 0, "/opt/x/lib:"},            \
		{1, 0, "libc.so.6"}, {1, 0, "/abs/libfoo.so"}, {0x6ffffefc, 0, "libaudit.so"},     \
	{                                                                                          \
		0x7fffffff, 0, "libfilter.so"                                                      \
	}

TEST(elf_dynamic_both_classes_and_byte_orders)
{
	static uint8_t b[8192];
	static const struct dyn_ent e[] = {STD_DYN};
	struct trusted_elf_dyn d;
	char why[256];
	size_t n;

	for (int c64 = 0; c64 < 2; c64++)
		for (int msb = 0; msb < 2; msb++) {
			n = make_dyn_elf(b, sizeof(b), c64, msb, e, ELEMENTSOF(e), NULL);
			ASSERT_EQ(trusted_elf_dynamic_buf(b, n, &d, why, sizeof(why)), 1);
			ASSERT_TRUE(d.dynamic);
			ASSERT_STREQ(d.rpath, "$ORIGIN/../lib");
			ASSERT_STREQ(d.runpath, "/opt/x/lib:");
			ASSERT_EQ(d.n, (size_t)4);
			ASSERT_STREQ(d.loads[0].tag, "NEEDED");
			ASSERT_STREQ(d.loads[0].name, "libc.so.6");
			ASSERT_STREQ(d.loads[1].name, "/abs/libfoo.so");
			ASSERT_STREQ(d.loads[2].tag, "AUDIT");
			ASSERT_STREQ(d.loads[2].name, "libaudit.so");
			ASSERT_STREQ(d.loads[3].tag, "FILTER");
			trusted_elf_dyn_done(&d);
			/* Every truncation is refused, never read past the end. */
			for (size_t cut = 16; cut < n; cut++) {
				ASSERT_EQ(trusted_elf_dynamic_buf(b, cut, &d, why, sizeof(why)),
					  -EINVAL);
				trusted_elf_dyn_done(&d);
			}
		}
}

TEST(elf_dynamic_nothing_to_load)
{
	static uint8_t b[8192];
	static const struct dyn_ent none[] = {{7, 0, NULL}}; /* DT_HASH only */
	struct trusted_elf_dyn d;
	char why[256];
	size_t n;

	/* Not ELF, not a program or library: nothing. Static (no PT_DYNAMIC): not dynamic. */
	ASSERT_EQ(trusted_elf_dynamic_buf("#!/bin/sh\n\n\n\n\n\n\n\n", 17, &d, why, sizeof(why)),
		  0);
	n = make_elf(b, true, false, 1, 1, "/x");
	ASSERT_EQ(trusted_elf_dynamic_buf(b, n, &d, why, sizeof(why)), 0);
	n = make_elf(b, true, false, 2, 0, "");
	ASSERT_EQ(trusted_elf_dynamic_buf(b, n, &d, why, sizeof(why)), 1);
	ASSERT_FALSE(d.dynamic);
	/* Dynamic, but no names and no paths: no string table needed. */
	n = make_dyn_elf(b, sizeof(b), true, false, none, 1, NULL);
	ASSERT_EQ(trusted_elf_dynamic_buf(b, n, &d, why, sizeof(why)), 1);
	ASSERT_TRUE(d.dynamic);
	ASSERT_NULL(d.rpath);
	ASSERT_NULL(d.runpath);
	ASSERT_EQ(d.n, (size_t)0);
}

/* One malformed variant of the standard image: fails with -EINVAL and says why. */
#define REFUSED(b, n, pattern)                                                                     \
	do {                                                                                       \
		struct trusted_elf_dyn d_;                                                         \
		char why_[256];                                                                    \
		ASSERT_EQ(trusted_elf_dynamic_buf(b, n, &d_, why_, sizeof(why_)), -EINVAL);        \
		trusted_elf_dyn_done(&d_);                                                         \
		if (!strstr(why_, pattern)) {                                                      \
			fprintf(stderr, "# why: '%s', wanted '%s'\n", why_, pattern);              \
			ASSERT_TRUE(false);                                                        \
		}                                                                                  \
	} while (0)

TEST(elf_dynamic_malformed_is_refused)
{
	static uint8_t b[16384];
	static const struct dyn_ent e[] = {STD_DYN};
	struct dyn_ent many[TRUSTED_ELF_LOADS_MAX + 3];
	char longname[TRUSTED_ELF_STR_MAX + 2];
	size_t n, fs;

	/* DT_STRTAB at an address no PT_LOAD maps. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	put(b + DYN_OFF + 8, 0x900000, 8, false);
	REFUSED(b, n, "DT_STRTAB is in no PT_LOAD");
	/* DT_STRSZ shorter than the last string: it runs past the table. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	put(b + DYN_OFF + 16 + 8, n - DYN_STR - 3, 8, false);
	REFUSED(b, n, "runs past DT_STRSZ");
	/* ... or than a string's offset. */
	put(b + DYN_OFF + 16 + 8, 3, 8, false);
	REFUSED(b, n, "past DT_STRSZ");
	/* DT_STRSZ past the PT_LOAD's file part. */
	put(b + DYN_OFF + 16 + 8, n - DYN_STR + 1, 8, false);
	REFUSED(b, n, "not within the file part");
	put(b + DYN_OFF + 16 + 8, UINT64_MAX, 8, false);
	REFUSED(b, n, "DT_STRSZ");
	/* A string offset near 2^64 does not wrap around. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	put(b + DYN_OFF + 4 * 16 + 8, UINT64_MAX - 2, 8, false);
	REFUSED(b, n, "past DT_STRSZ");
	/* No DT_STRTAB at all. */
	n = make_dyn_elf(b, sizeof(b), true, false, e + 1, ELEMENTSOF(e) - 1, NULL);
	REFUSED(b, n, "without DT_STRTAB");
	/* Two DT_RUNPATHs: each loader keeps the last; we refuse to guess. */
	{
		struct dyn_ent two[] = {STD_DYN, {29, 0, "/evil"}};

		n = make_dyn_elf(b, sizeof(b), false, true, two, ELEMENTSOF(two), NULL);
		REFUSED(b, n, "two DT_RUNPATH");
	}
	/* No DT_NULL within PT_DYNAMIC's p_filesz. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), &fs);
	put(b + 64 + 56 + 32, fs - 16, 8, false);
	REFUSED(b, n, "no DT_NULL");
	/* A huge p_filesz: at most TRUSTED_ELF_DYN_MAX entries are read. */
	put(b + 64 + 56 + 32, UINT64_MAX, 8, false);
	REFUSED(b, n, "is not within the file part"); /* table past the file, limited first */
	/* PT_DYNAMIC's p_offset and p_vaddr say different places. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	put(b + 64 + 56 + 8, DYN_OFF + 16, 8, false);
	REFUSED(b, n, "disagree");
	/* PT_DYNAMIC's address in no PT_LOAD. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	put(b + 64 + 56 + 16, 0x4000000, 8, false);
	REFUSED(b, n, "PT_DYNAMIC is in no PT_LOAD");
	/* Two PT_DYNAMICs. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	put(b + 64, 2, 4, false);
	REFUSED(b, n, "two PT_DYNAMIC");
	/* Overlapping PT_LOADs: what is read there depends on mapping order. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	memcpy(b + 64 + 2 * 56, b + 64, 56); /* a third header (room before DYN_OFF) */
	put(b + 56, 3, 2, false);
	REFUSED(b, n, "two PT_LOAD");
	/* A PT_LOAD past the end of the file. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	put(b + 64 + 32, n + 1, 8, false);
	put(b + 64 + 40, n + 1, 8, false);
	REFUSED(b, n, "past the end of the file");
	/* Huge or zero e_phnum. */
	n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	put(b + 56, 0xffff, 2, false);
	REFUSED(b, n, "program headers");
	put(b + 56, 0, 2, false);
	REFUSED(b, n, "program headers");
	/* More than TRUSTED_ELF_LOADS_MAX library names. */
	many[0] = (struct dyn_ent){5, 0, NULL};
	many[1] = (struct dyn_ent){10, 0, NULL};
	for (size_t i = 2; i < ELEMENTSOF(many); i++)
		many[i] = (struct dyn_ent){1, 0, "l.so"};
	n = make_dyn_elf(b, sizeof(b), true, false, many, ELEMENTSOF(many), NULL);
	REFUSED(b, n, "more than 64 libraries");
	{
		struct trusted_elf_dyn d;
		char why[256];

		n = make_dyn_elf(b, sizeof(b), true, false, many, ELEMENTSOF(many) - 1, NULL);
		ASSERT_EQ(trusted_elf_dynamic_buf(b, n, &d, why, sizeof(why)), 1);
		ASSERT_EQ(d.n, (size_t)TRUSTED_ELF_LOADS_MAX);
		trusted_elf_dyn_done(&d);
		/* A string of exactly TRUSTED_ELF_STR_MAX bytes is read, one more is refused. */
		memset(longname, 'a', sizeof(longname));
		longname[0] = '/';
		longname[TRUSTED_ELF_STR_MAX] = '\0';
		many[2] = (struct dyn_ent){29, 0, longname};
		n = make_dyn_elf(b, sizeof(b), true, false, many, 3, NULL);
		ASSERT_EQ(trusted_elf_dynamic_buf(b, n, &d, why, sizeof(why)), 1);
		ASSERT_EQ(strlen(d.runpath), (size_t)TRUSTED_ELF_STR_MAX);
		trusted_elf_dyn_done(&d);
		longname[TRUSTED_ELF_STR_MAX] = 'a';
		longname[TRUSTED_ELF_STR_MAX + 1] = '\0';
		n = make_dyn_elf(b, sizeof(b), true, false, many, 3, NULL);
		REFUSED(b, n, "longer than 4096");
	}
	/* Too many dynamic entries before DT_NULL; exactly the limit is read. */
	{
		static struct dyn_ent lots[TRUSTED_ELF_DYN_MAX + 8];
		static uint8_t big[(TRUSTED_ELF_DYN_MAX + 40) * 16 + 0x200];
		struct trusted_elf_dyn d;
		char why[256];

		for (size_t i = 0; i < ELEMENTSOF(lots); i++)
			lots[i] = (struct dyn_ent){7, 0, NULL};
		dyn_str = (TRUSTED_ELF_DYN_MAX + 32) * 16;
		n = make_dyn_elf(big, sizeof(big), true, false, lots, ELEMENTSOF(lots), NULL);
		REFUSED(big, n, "more than 1024 dynamic entries");
		n = make_dyn_elf(big, sizeof(big), true, false, lots, TRUSTED_ELF_DYN_MAX - 1,
				 NULL);
		ASSERT_EQ(trusted_elf_dynamic_buf(big, n, &d, why, sizeof(why)), 1);
		trusted_elf_dyn_done(&d);
		n = make_dyn_elf(big, sizeof(big), true, false, lots, TRUSTED_ELF_DYN_MAX, NULL);
		REFUSED(big, n, "more than 1024 dynamic entries");
		dyn_str = 0x800;
	}
}

struct sparse {
	const uint8_t *p;
	size_t len;
};
static int sparse_read(void *userdata, uint64_t off, void *buf, size_t len)
{
	const struct sparse *s = userdata;

	memset(buf, 0, len);
	if (off < s->len)
		memcpy(buf, s->p + off, len < s->len - off ? len : s->len - off);
	return 0;
}

TEST(elf_dynamic_size_cap)
{
	static uint8_t b[8192];
	static const struct dyn_ent e[] = {STD_DYN};
	struct sparse s = {b, 0};
	struct trusted_elf_dyn d;
	char why[256];

	s.len = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
	ASSERT_EQ(trusted_elf_dynamic(sparse_read, &s, TRUSTED_ELF_FILE_MAX, &d, why, sizeof(why)),
		  1);
	trusted_elf_dyn_done(&d);
	ASSERT_EQ(trusted_elf_dynamic(sparse_read, &s, TRUSTED_ELF_FILE_MAX + 1, &d, why,
				      sizeof(why)),
		  -EINVAL);
	ASSERT_NOT_NULL(strstr(why, "larger than 256 MiB"));
}

TEST(preload_names_as_glibc_reads_them)
{
	static const char t[] = "/lib/a.so:/lib/b.so # comment /evil.so\n\t/lib/c.so#x\n::rel.so";
	const char *want[] = {"/lib/a.so", "/lib/b.so", "/lib/c.so", "rel.so"}, *name;
	size_t pos = 0, l, i = 0;

	while ((l = trusted_preload_next(t, strlen(t), &pos, &name)) > 0) {
		ASSERT_LT(i, ELEMENTSOF(want));
		ASSERT_EQ(l, strlen(want[i]));
		ASSERT_EQ(memcmp(name, want[i], l), 0);
		i++;
	}
	ASSERT_EQ(i, ELEMENTSOF(want));
	pos = 0;
	ASSERT_EQ(trusted_preload_next("# only\n  \n", 10, &pos, &name), (size_t)0);
}

TEST(script_path_words)
{
	const char *t = "#!/bin/sh /x/ignored\n"
			"exec /opt/a/bin/tool --x=/etc/y \"$(/usr/bin/id)\"\n"
			"# /in/comment and http://host/url and $HOME/bin/x and a/b:/c/d\n"
			"PATH=/p/q;cd /w&&/v1/v.sh|/v2@x~y+z%w-1.0 'https://z' /\n";
	const char *want[] = {
		"/opt/a/bin/tool", "/etc/y", "/usr/bin/id", "/in/comment", "/p/q", "/w", "/v1/v.sh",
		"/v2@x~y+z%w-1.0", "/"};
	size_t lines[] = {2, 2, 2, 3, 4, 4, 4, 4, 4};
	size_t pos = 0, line = 1, i = 0;
	char path[PATH_MAX];

	while (trusted_script_path_next(t, strlen(t), &pos, &line, path)) {
		ASSERT_LT(i, ELEMENTSOF(want));
		EXPECT_STREQ(path, want[i]);
		EXPECT_EQ(line, lines[i]);
		i++;
	}
	ASSERT_EQ(i, ELEMENTSOF(want));
	EXPECT_EQ(pos, strlen(t));
	/* A word of PATH_MAX bytes is no path the kernel resolves: skipped, the next found. */
	{
		char *big = malloc(PATH_MAX + 32);

		ASSERT_NE(big, NULL);
		memcpy(big, "#!\n", 3);
		memset(big + 3, 'a', PATH_MAX);
		big[3] = '/';
		memcpy(big + 3 + PATH_MAX, " /ok", 5);
		pos = 0;
		line = 1;
		ASSERT_TRUE(trusted_script_path_next(big, strlen(big), &pos, &line, path));
		EXPECT_STREQ(path, "/ok");
		EXPECT_FALSE(trusted_script_path_next(big, strlen(big), &pos, &line, path));
		free(big);
	}
}

TEST(open_dir_refuses_symlinks_and_loose_parents)
{
	_cleanup_free_ char *root = make_root();
	_cleanup_close_ int rfd = -1, fd = -1;
	char p[256];

	if (geteuid() != 0)
		SKIP("needs root (ownership checks)");
	ASSERT_NE(root, NULL);
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(p, sizeof(p), "%s/elsewhere", root);
	ASSERT_EQ(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/data", root);
	ASSERT_EQ(symlink("elsewhere", p), 0);
	ASSERT_EQ(trusted_open_dir(rfd, "data/trusted", true, 0755, 0, 0, true, &fd), -ENOTDIR);
	ASSERT_EQ(unlink(p), 0);
	ASSERT_EQ(mkdir(p, 0777), 0);
	ASSERT_EQ(chmod(p, 0777), 0);
	ASSERT_EQ(trusted_open_dir(rfd, "data/trusted", true, 0755, 0, 0, true, &fd), -EPERM);
	ASSERT_EQ(chmod(p, 0755), 0);
	ASSERT_EQ(trusted_open_dir(rfd, "data/trusted", true, 0755, 0, 0, true, &fd), 0);
	ASSERT_EQ(trusted_open_dir(rfd, "data/../x", true, 0755, 0, 0, true, &fd), -EINVAL);
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	(void)system(p);
}

/* A bind mount of path onto itself that honours setuid (the tmp root is nosuid). */
static int bind_suid(const char *path)
{
	if (mount(path, path, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, path, NULL, MS_REMOUNT | MS_BIND, NULL) < 0)
		return -errno;
	return 0;
}

TEST(configured_predicate)
{
	_cleanup_free_ char *root = make_root();
	_cleanup_close_ int rfd = -1;
	char d[200], f[256], p[256];
	int fd;

	if (geteuid() != 0)
		SKIP("needs root (ownership checks)");
	ASSERT_NE(root, NULL);
	/* The shared trees nosuid, as entry leaves a sandbox: the root a nosuid tmpfs, in a
	 * mount namespace of this test's own (each test is a forked child). */
	ASSERT_EQ(unshare(CLONE_NEWNS), 0);
	ASSERT_EQ(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ASSERT_EQ(mount("tt", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"), 0);
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(rfd, 0);
	EXPECT_FALSE(trusted_configured(-1));
	EXPECT_FALSE(trusted_configured(rfd)); /* no etc at all */
	snprintf(d, sizeof(d), "%s/etc", root);
	ASSERT_EQ(mkdir(d, 0755), 0);
	snprintf(d, sizeof(d), "%s/etc/sudoers.d", root);
	ASSERT_EQ(mkdir(d, 0755), 0);
	EXPECT_FALSE(trusted_configured(rfd));
	snprintf(f, sizeof(f), "%s/pistis-trusted", d);
	fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0440);
	ASSERT_GE(fd, 0);
	EXPECT_FALSE(trusted_configured(rfd)); /* empty */
	ASSERT_EQ(write(fd, "# rules\n", 8), 8);
	snprintf(p, sizeof(p), "%s/data", root);
	ASSERT_EQ(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/data/trusted", root);
	ASSERT_EQ(mkdir(p, 0755), 0);
	/* not the form this release writes (another release's drop-in) */
	EXPECT_EQ(trusted_dropin_state(rfd), TRUSTED_DROPIN_OTHER);
	EXPECT_FALSE(trusted_configured(rfd));
	ASSERT_EQ(write(fd, TRUSTED_DROPIN_TAIL, strlen(TRUSTED_DROPIN_TAIL)),
		  (ssize_t)strlen(TRUSTED_DROPIN_TAIL));
	close(fd);
	EXPECT_EQ(trusted_dropin_state(rfd), TRUSTED_DROPIN_CURRENT);
	EXPECT_TRUE(trusted_configured(rfd));
	snprintf(p, sizeof(p), "%s/data/trusted", root);
	ASSERT_EQ(rmdir(p), 0);
	EXPECT_FALSE(trusted_configured(rfd)); /* no /data/trusted */
	ASSERT_EQ(mkdir(p, 0755), 0);
	EXPECT_TRUE(trusted_configured(rfd));
	/* Without CAP_SYS_ADMIN (Docker's default capabilities) no agent can run without
	 * no_new_privs under the filter: off, so commands keep running (found in Docker: every
	 * command failed at "landlock scope" once trusted commands were added). */
	{
		struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
		struct __user_cap_data_struct c[2] = {{0}};

		ASSERT_EQ(syscall(SYS_capget, &h, c), 0);
		c[0].effective &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
		ASSERT_EQ(syscall(SYS_capset, &h, c), 0);
		EXPECT_FALSE(trusted_setuid_possible());
		EXPECT_FALSE(trusted_configured(rfd));
		c[0].effective |= CAP_TO_MASK(CAP_SYS_ADMIN);
		ASSERT_EQ(syscall(SYS_capset, &h, c), 0);
		EXPECT_TRUE(trusted_setuid_possible());
	}
	EXPECT_TRUE(trusted_configured(rfd));
	/* a rule that let agents write /data/trusted or /data turns setuid off */
	ASSERT_EQ(chmod(p, 02775), 0);
	EXPECT_FALSE(trusted_configured(rfd));
	ASSERT_EQ(chmod(p, 0755), 0);
	ASSERT_EQ(chown(p, 10100, 0), 0);
	EXPECT_FALSE(trusted_configured(rfd));
	ASSERT_EQ(chown(p, 0, 0), 0);
	snprintf(p, sizeof(p), "%s/data", root);
	ASSERT_EQ(chmod(p, 0757), 0);
	EXPECT_FALSE(trusted_configured(rfd));
	ASSERT_EQ(chmod(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/data/trusted", root);
	snprintf(d, sizeof(d), "%s/data/trusted2", root);
	ASSERT_EQ(rename(p, d), 0);
	ASSERT_EQ(symlink("trusted2", p), 0);
	EXPECT_FALSE(trusted_configured(rfd)); /* a symlink at /data/trusted */
	ASSERT_EQ(unlink(p), 0);
	ASSERT_EQ(rename(d, p), 0);
	snprintf(d, sizeof(d), "%s/etc/sudoers.d", root);
	EXPECT_TRUE(trusted_configured(rfd));
	/* A shared tree without nosuid: agents keep no_new_privs (setuid stays off). */
	{
		char t[256];
		snprintf(t, sizeof(t), "%s/var/tmp", root);
		snprintf(p, sizeof(p), "%s/var", root);
		ASSERT_EQ(mkdir(p, 0755), 0);
		ASSERT_EQ(mkdir(t, 01777), 0);
		EXPECT_TRUE(trusted_configured(rfd)); /* on the nosuid root */
		ASSERT_EQ(bind_suid(t), 0);
		EXPECT_FALSE(trusted_configured(rfd));
		char which[32];
		EXPECT_EQ(trusted_shared_tree_suid(rfd, which, sizeof(which)), 1);
		EXPECT_STREQ(which, "/var/tmp");
		ASSERT_EQ(umount(t), 0);
		EXPECT_TRUE(trusted_configured(rfd));
	}
	/* A tree a write rule gives agents, on a mount that honours setuid: a file agent A
	 * makes setuid there runs as A for agent B, so setuid stays off. The rules are the
	 * saved file, or the shipped defaults (write: /workspaces) without one. */
	{
		char t[256], rules[256], which[POLICY_PATH_MAX + 1];
		int rf;

		snprintf(t, sizeof(t), "%s/workspaces", root);
		ASSERT_EQ(mkdir(t, 0755), 0);
		ASSERT_EQ(bind_suid(t), 0);
		/* /workspaces is a shared tree too: the first check names it */
		EXPECT_FALSE(trusted_configured(rfd));
		EXPECT_EQ(trusted_write_tree_suid(rfd, which, sizeof(which)), 1);
		EXPECT_STREQ(which, "/workspaces");
		ASSERT_EQ(umount(t), 0);
		EXPECT_EQ(trusted_write_tree_suid(rfd, which, sizeof(which)), 0);
		/* a saved rule on a tree outside the shared ones */
		snprintf(t, sizeof(t), "%s/srv", root);
		ASSERT_EQ(mkdir(t, 0755), 0);
		snprintf(t, sizeof(t), "%s/srv/proj", root);
		ASSERT_EQ(mkdir(t, 0755), 0);
		snprintf(p, sizeof(p), "%s/data/pistis", root);
		ASSERT_EQ(mkdir(p, 0700), 0);
		snprintf(rules, sizeof(rules), "%s/data/pistis/rules.json", root);
		rf = open(rules, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		ASSERT_GE(rf, 0);
		static const char json[] = "[{\"path\": \"/srv/proj\", \"access\": \"write\"},\n"
					   " {\"path\": \"/srv/ro\", \"access\": \"read\"}]\n";
		ASSERT_EQ(write(rf, json, sizeof(json) - 1), (ssize_t)sizeof(json) - 1);
		close(rf);
		EXPECT_TRUE(trusted_configured(rfd)); /* on the nosuid root */
		ASSERT_EQ(bind_suid(t), 0);
		EXPECT_FALSE(trusted_configured(rfd));
		EXPECT_EQ(trusted_write_tree_suid(rfd, which, sizeof(which)), 1);
		EXPECT_STREQ(which, "/srv/proj");
		/* a read rule on a suid mount is no concern: agents create nothing there */
		snprintf(p, sizeof(p), "%s/srv/ro", root);
		ASSERT_EQ(mkdir(p, 0755), 0);
		ASSERT_EQ(bind_suid(p), 0);
		ASSERT_EQ(mount(NULL, t, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID, NULL), 0);
		EXPECT_TRUE(trusted_configured(rfd));
		ASSERT_EQ(umount(p), 0);
		/* rules that cannot be read (not root's alone, or not JSON): fail closed */
		ASSERT_EQ(chmod(rules, 0622), 0);
		EXPECT_FALSE(trusted_configured(rfd));
		EXPECT_LT(trusted_write_tree_suid(rfd, which, sizeof(which)), 0);
		EXPECT_STREQ(which, "/data/pistis/rules.json");
		ASSERT_EQ(chmod(rules, 0600), 0);
		rf = open(rules, O_WRONLY | O_TRUNC | O_CLOEXEC);
		ASSERT_GE(rf, 0);
		ASSERT_EQ(write(rf, "[{", 2), 2);
		close(rf);
		EXPECT_FALSE(trusted_configured(rfd));
		/* a write rule's path that is missing or a symlink now: nothing is writable
		 * through it, but an agent that may write the directory that held it may have
		 * moved the tree away, the mounts beneath it with it (a rename carries them) */
		rf = open(rules, O_WRONLY | O_TRUNC | O_CLOEXEC);
		ASSERT_GE(rf, 0);
		ASSERT_EQ(write(rf, json, sizeof(json) - 1), (ssize_t)sizeof(json) - 1);
		close(rf);
		EXPECT_TRUE(trusted_configured(rfd));
		ASSERT_EQ(umount(t), 0);
		snprintf(p, sizeof(p), "%s/srv/proj2", root);
		ASSERT_EQ(rename(t, p), 0);
		EXPECT_TRUE(trusted_configured(rfd)); /* /srv root's alone: only root moved it */
		ASSERT_EQ(symlink("proj2", t), 0);
		EXPECT_TRUE(trusted_configured(rfd));
		{
			char srv[256], sub[300];

			snprintf(srv, sizeof(srv), "%s/srv", root);
			snprintf(sub, sizeof(sub), "%s/srv/proj2/ws", root);
			ASSERT_EQ(chmod(srv, 01777), 0); /* agents may write /srv */
			EXPECT_TRUE(
				trusted_configured(rfd)); /* nosuid root, nothing suid beneath */
			ASSERT_EQ(mkdir(sub, 0755), 0);
			ASSERT_EQ(mount("pistis-test", sub, "tmpfs", 0, NULL), 0); /* suid */
			EXPECT_FALSE(trusted_configured(rfd)); /* moved aside with the tree */
			EXPECT_EQ(trusted_write_tree_suid(rfd, which, sizeof(which)), 1);
			EXPECT_NE(strstr(which, "/srv/proj2/ws (moved beneath"), NULL);
			ASSERT_EQ(unlink(t), 0); /* missing instead of a link: the same */
			EXPECT_FALSE(trusted_configured(rfd));
			ASSERT_EQ(symlink("proj2", t), 0);
			ASSERT_EQ(umount(sub), 0);
			ASSERT_EQ(rmdir(sub), 0);
			EXPECT_TRUE(trusted_configured(rfd));
			ASSERT_EQ(bind_suid(srv), 0); /* the directory itself on a suid mount */
			EXPECT_FALSE(trusted_configured(rfd));
			EXPECT_EQ(trusted_write_tree_suid(rfd, which, sizeof(which)), 1);
			EXPECT_STREQ(which, "/srv/proj");
			ASSERT_EQ(umount(srv), 0);
			ASSERT_EQ(chmod(srv, 0755), 0);
		}
		ASSERT_EQ(unlink(t), 0);
		ASSERT_EQ(rename(p, t), 0);
		ASSERT_EQ(unlink(rules), 0);
		EXPECT_TRUE(trusted_configured(rfd));
	}
	ASSERT_EQ(chmod(f, 0460), 0); /* group-writable */
	EXPECT_FALSE(trusted_configured(rfd));
	ASSERT_EQ(chmod(f, 0442), 0); /* other-writable */
	EXPECT_FALSE(trusted_configured(rfd));
	ASSERT_EQ(chmod(f, 0440), 0);
	ASSERT_EQ(chown(f, 1000, 0), 0); /* not root's */
	EXPECT_FALSE(trusted_configured(rfd));
	ASSERT_EQ(chown(f, 0, 0), 0);
	EXPECT_TRUE(trusted_configured(rfd));
	/* a symlink, as the last component or on the way, is never followed */
	snprintf(p, sizeof(p), "%s/real", d);
	ASSERT_EQ(rename(f, p), 0);
	ASSERT_EQ(symlink("real", f), 0);
	EXPECT_FALSE(trusted_configured(rfd));
	ASSERT_EQ(unlink(f), 0);
	ASSERT_EQ(rename(p, f), 0);
	snprintf(p, sizeof(p), "%s/etc2", root);
	snprintf(d, sizeof(d), "%s/etc", root);
	ASSERT_EQ(rename(d, p), 0);
	ASSERT_EQ(symlink("etc2", d), 0);
	EXPECT_FALSE(trusted_configured(rfd));
	ASSERT_EQ(unlink(d), 0);
	ASSERT_EQ(rename(p, d), 0);
	EXPECT_TRUE(trusted_configured(rfd));
	/* a directory of that name */
	ASSERT_EQ(unlink(f), 0);
	ASSERT_EQ(mkdir(f, 0755), 0);
	EXPECT_FALSE(trusted_configured(rfd));
	safe_close(rfd);
	rfd = -1;
	(void)umount2(root, MNT_DETACH); /* the tmpfs goes, with what was made in it */
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	(void)system(p);
}

TEST(write_file_temp_names_are_ignored_by_sudo)
{
	_cleanup_free_ char *root = make_root();
	_cleanup_close_ int dfd = -1;
	char tmp[256], p[512];
	struct stat st;

	ASSERT_NE(root, NULL);
	dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (geteuid() != 0)
		SKIP("needs root (fchown to root)");
	ASSERT_EQ(trusted_write_file(dfd, "pistis-trusted", "x\n", 2, 0440, true, tmp, sizeof(tmp)),
		  0);
	/* sudo's includedir skips names containing '.' or ending in '~'. */
	ASSERT_EQ(tmp[0], '.');
	ASSERT_NE(strchr(tmp + 1, '.'), NULL);
	ASSERT_EQ(fstatat(dfd, tmp, &st, AT_SYMLINK_NOFOLLOW), 0);
	ASSERT_EQ(st.st_mode & 07777, 0440u);
	ASSERT_EQ(fstatat(dfd, "pistis-trusted", &st, 0), -1);
	ASSERT_EQ(trusted_write_file(dfd, "pistis-trusted", "y\n", 2, 0440, false, NULL, 0), 0);
	ASSERT_EQ(fstatat(dfd, "pistis-trusted", &st, 0), 0);
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	(void)system(p);
}

TEST(add_refuses_loose_scripts)
{
	_cleanup_free_ char *root = make_root();
	char p[512], digest[SHA256_HEX_SIZE], why[512];
	int fd = -1;

	if (geteuid() != 0)
		SKIP("needs root");
	ASSERT_NE(root, NULL);
	/* A fake sudo is enough for add: it only needs to exist setuid root. */
	snprintf(p, sizeof(p),
		 "mkdir -p %s/usr/bin %s/usr/sbin && install -m 4755 /bin/true %s/usr/bin/sudo"
		 " && install -m 0755 /bin/true %s/usr/sbin/visudo && printf 'echo hi\\n' > %s/s"
		 " && chmod 0644 %s/s && ln -s s %s/link",
		 root, root, root, root, root, root, root);
	ASSERT_EQ(system(p), 0);

	snprintf(p, sizeof(p), "%s/link", root);
	ASSERT_EQ(trusted_open_script(p, &fd), -ELOOP);

	snprintf(p, sizeof(p), "%s/s", root);
	ASSERT_EQ(chmod(p, 0664), 0);
	ASSERT_EQ(trusted_open_script(p, &fd), 0);
	ASSERT_EQ(trusted_add_fd(root, "hi", fd, digest, why, sizeof(why)), -EPERM);
	close(fd);
	ASSERT_EQ(chmod(p, 0644), 0);
	ASSERT_EQ(chown(p, 1000, 0), 0);
	ASSERT_EQ(trusted_open_script(p, &fd), 0);
	ASSERT_EQ(trusted_add_fd(root, "hi", fd, digest, why, sizeof(why)), -EPERM);
	close(fd);
	ASSERT_EQ(chown(p, 0, 0), 0);
	ASSERT_EQ(trusted_open_script(p, &fd), 0);
	ASSERT_EQ(trusted_add_fd(root, "a.b", fd, digest, why, sizeof(why)), -EINVAL);
	ASSERT_EQ(trusted_add_fd(root, "hi", fd, digest, why, sizeof(why)), 0);
	close(fd);
	char want[SHA256_HEX_SIZE];
	sha256_hex("echo hi\n", 8, want);
	ASSERT_STREQ(digest, want);

	struct trusted_entry *v = NULL;
	size_t n = 0, skipped = 0;
	ASSERT_EQ(trusted_list(root, &v, &n, &skipped), 0);
	ASSERT_EQ(n, 1u);
	ASSERT_STREQ(v[0].name, "hi");
	ASSERT_STREQ(v[0].digest, digest);
	ASSERT_EQ(v[0].mode, 0755u);
	free(v);

	ASSERT_EQ(trusted_wrapper_check(root, "hi", why, sizeof(why)), 0);
	/* No pistisd in this root: the /bin/sh form. Once there is one, refresh rewrites the
	 * wrapper into the trusted-exec form, and check wants that form. */
	snprintf(p, sizeof(p), "%s/data/bin/hi", root);
	{
		char buf[512] = "";
		FILE *f = fopen(p, "re");
		ASSERT_NE(f, NULL);
		(void)!fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		ASSERT_EQ(strncmp(buf, "#!/bin/sh\n", 10), 0);
		snprintf(p, sizeof(p),
			 "mkdir -p %s/usr/local/bin && install -m 0755 /bin/true "
			 "%s/usr/local/bin/pistisd",
			 root, root);
		ASSERT_EQ(system(p), 0);
		ASSERT_EQ(trusted_wrapper_check(root, "hi", why, sizeof(why)), 1);
		ASSERT_EQ(trusted_wrappers_refresh(root), 1);
		ASSERT_EQ(trusted_wrappers_refresh(root), 0);
		ASSERT_EQ(trusted_wrapper_check(root, "hi", why, sizeof(why)), 0);
		snprintf(p, sizeof(p), "%s/data/bin/hi", root);
		f = fopen(p, "re");
		ASSERT_NE(f, NULL);
		memset(buf, 0, sizeof(buf));
		(void)!fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		ASSERT_EQ(strncmp(buf, "#!/usr/local/bin/pistisd trusted-exec\n", 38), 0);
		/* A pistisd others may write is no interpreter for every agent. */
		snprintf(p, sizeof(p), "%s/usr/local/bin/pistisd", root);
		ASSERT_EQ(chmod(p, 0775), 0);
		char pp[256];
		ASSERT_EQ(trusted_find_pistisd(root, pp, sizeof(pp)), -ENOENT);
		ASSERT_EQ(chmod(p, 0755), 0);
		ASSERT_EQ(trusted_find_pistisd(root, pp, sizeof(pp)), 0);
		ASSERT_STREQ(pp, "/usr/local/bin/pistisd");
	}
	ASSERT_EQ(trusted_adopt_from_bin(root, "hi"), 1);
	ASSERT_EQ(trusted_remove(root, "hi"), 0);
	ASSERT_EQ(trusted_remove(root, "hi"), -ENOENT);
	snprintf(p, sizeof(p), "%s/data/bin/hi", root);
	ASSERT_EQ(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	(void)system(p);
}

TEST(adopt_strerror_says_each_refusal)
{
	char why[256];

	ASSERT_STREQ(trusted_adopt_strerror(-ENOENT, "tool", why, sizeof(why)),
		     "there is no /data/bin/tool to adopt");
	ASSERT_STREQ(trusted_adopt_strerror(-EPERM, "tool", why, sizeof(why)),
		     "/data/bin/tool is not root's file, writable by root alone, with one link: "
		     "not adopted (an agent may have planted it)");
	ASSERT_STREQ(trusted_adopt_strerror(-EEXIST, "tool", why, sizeof(why)),
		     "/data/trusted/tool is there already: remove one of the two first");
	ASSERT_STREQ(trusted_adopt_strerror(-ENOEXEC, "tool", why, sizeof(why)),
		     "/data/bin/tool not adopted: its #! interpreter is not root's alone, relative "
		     "or missing");
	ASSERT_EQ(trusted_adopt_strerror(-EIO, "tool", why, sizeof(why)), NULL);
	ASSERT_EQ(trusted_adopt_strerror(0, "tool", why, sizeof(why)), NULL);
	ASSERT_EQ(trusted_adopt_strerror(1, "tool", why, sizeof(why)), NULL);
}

TEST(adopt_refuses_planted_files)
{
	_cleanup_free_ char *root = make_root();
	char p[512];

	if (geteuid() != 0)
		SKIP("needs root");
	ASSERT_NE(root, NULL);
	snprintf(p, sizeof(p),
		 "mkdir -p %s/usr/bin %s/usr/sbin %s/data/bin && install -m 4755 /bin/true "
		 "%s/usr/bin/sudo && install -m 0755 /bin/true %s/usr/sbin/visudo && "
		 "printf 'echo x\\n' > %s/data/bin/agentmade && chown 10100 %s/data/bin/agentmade"
		 " && printf 'echo y\\n' > %s/data/bin/ops && chmod 0755 %s/data/bin/ops",
		 root, root, root, root, root, root, root, root, root);
	ASSERT_EQ(system(p), 0);
	ASSERT_EQ(trusted_adopt_from_bin(root, "agentmade"), -EPERM);
	ASSERT_EQ(trusted_adopt_from_bin(root, "missing"), -ENOENT);
	snprintf(p, sizeof(p), "ln %s/data/bin/ops %s/data/bin/ops2", root, root);
	ASSERT_EQ(system(p), 0);
	ASSERT_EQ(trusted_adopt_from_bin(root, "ops"), -EPERM); /* two links */
	snprintf(p, sizeof(p), "%s/data/bin/ops2", root);
	ASSERT_EQ(unlink(p), 0);
	ASSERT_EQ(trusted_adopt_from_bin(root, "ops"), 0);
	ASSERT_EQ(trusted_adopt_from_bin(root, "ops"), 1);

	char why[256];
	ASSERT_EQ(trusted_wrapper_check(root, "ops", why, sizeof(why)), 0);
	snprintf(p, sizeof(p), "%s/data/trusted/ops", root);
	struct stat st;
	ASSERT_EQ(stat(p, &st), 0);
	ASSERT_EQ(st.st_mode & 07777, 0755u);
	ASSERT_EQ(st.st_uid, 0u);
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	(void)system(p);
}

/* A default ACL naming uid 10100 (r), in the kernel's xattr form. */
static const uint8_t acl_u10100_r[] = {
	0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x07, 0x00, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x04,
	0x00, 0x74, 0x27, 0x00, 0x00, 0x04, 0x00, 0x07, 0x00, 0xff, 0xff, 0xff, 0xff, 0x10, 0x00,
	0x04, 0x00, 0xff, 0xff, 0xff, 0xff, 0x20, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
};

TEST(secrets_dir_fixed_through_fd)
{
	_cleanup_free_ char *root = make_root();
	char p[512], q[600], why[512];
	struct stat st;

	if (geteuid() != 0)
		SKIP("needs root");
	ASSERT_NE(root, NULL);
	snprintf(p, sizeof(p), "%s/data", root);
	ASSERT_EQ(mkdir(p, 0755), 0);
	ASSERT_EQ(trusted_secrets_check(root, why, sizeof(why)), 1);
	snprintf(p, sizeof(p), "%s/data/.secrets", root);
	/* root's (an operator's, an image's): taken over, its ACL gone */
	ASSERT_EQ(mkdir(p, 0755), 0);
	ASSERT_EQ(setxattr(p, "system.posix_acl_default", acl_u10100_r, sizeof(acl_u10100_r), 0),
		  0);
	ASSERT_EQ(trusted_secrets_check(root, why, sizeof(why)), 1);
	ASSERT_EQ(trusted_secrets_ensure(root, why, sizeof(why)), 0);
	ASSERT_EQ(stat(p, &st), 0);
	ASSERT_EQ(st.st_uid, 10002u);
	ASSERT_EQ(st.st_mode & 07777, 0700u);
	ASSERT_LT(getxattr(p, "system.posix_acl_default", NULL, 0), 0);
	ASSERT_EQ(trusted_secrets_check(root, why, sizeof(why)), 0);
	/* pi-tools' 0700 with an ACL (a default one keeps the mode): refused, named, taken off */
	ASSERT_EQ(setxattr(p, "system.posix_acl_default", acl_u10100_r, sizeof(acl_u10100_r), 0),
		  0);
	ASSERT_EQ(trusted_secrets_check(root, why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "/data/.secrets has an ACL (system.posix_acl_default)"));
	ASSERT_EQ(trusted_secrets_ensure(root, why, sizeof(why)), 0);
	ASSERT_LT(getxattr(p, "system.posix_acl_default", NULL, 0), 0);
	ASSERT_EQ(trusted_secrets_check(root, why, sizeof(why)), 0);
	/* pi-tools' and root's nodes inside are the trusted commands' own */
	snprintf(q, sizeof(q), "%s/sub", p);
	ASSERT_EQ(mkdir(q, 0700), 0);
	ASSERT_EQ(chown(q, 10002, 10002), 0);
	snprintf(q, sizeof(q), "%s/sub/key", p);
	ASSERT_EQ(close(open(q, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)), 0);
	ASSERT_EQ(trusted_secrets_ensure(root, why, sizeof(why)), 0);
	ASSERT_EQ(trusted_secrets_check(root, why, sizeof(why)), 0);
	/* an agent's node anywhere inside (a link of its own, deep down): refused, named */
	snprintf(q, sizeof(q), "%s/sub/gh-token", p);
	ASSERT_EQ(symlink("/workspaces/loot", q), 0);
	ASSERT_EQ(lchown(q, 10100, 10010), 0);
	ASSERT_EQ(trusted_secrets_ensure(root, why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "'/data/.secrets/sub/gh-token' is owned by uid 10100"));
	ASSERT_EQ(trusted_secrets_check(root, why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "gh-token' is owned by uid 10100"));
	ASSERT_EQ(unlink(q), 0);
	/* an agent's directory in its place: refused whole, never handed to pi-tools */
	snprintf(q, sizeof(q), "rm -rf '%s'", p);
	ASSERT_EQ(system(q), 0);
	ASSERT_EQ(mkdir(p, 0700), 0);
	ASSERT_EQ(chown(p, 10100, 10010), 0);
	ASSERT_EQ(chmod(p, 0777), 0);
	ASSERT_EQ(trusted_secrets_ensure(root, why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "/data/.secrets is owned by uid 10100, not pi-tools or root"));
	ASSERT_EQ(stat(p, &st), 0);
	ASSERT_EQ(st.st_uid, 10100u);
	ASSERT_EQ(st.st_mode & 07777, 0777u);
	ASSERT_EQ(trusted_secrets_check(root, why, sizeof(why)), 1);
	/* A symlink in its place is refused, never followed. */
	ASSERT_EQ(rmdir(p), 0);
	ASSERT_EQ(symlink("/etc", p), 0);
	ASSERT_EQ(trusted_secrets_ensure(root, why, sizeof(why)), 1);
	EXPECT_NOT_NULL(strstr(why, "not a directory"));
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	(void)system(p);
}

/* --- reasons: every name escaped once ---------------------------------------------- */

/* A reason is text (it is logged %-s): no raw byte, and in '...' a name's quote escaped, so a
 * name like "x' is fine; '/etc" cannot end its quotes and make the reason say another thing. */
static bool is_text(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

/* A reason cut at its buffer ends with the mark, the cut between two \xNN escapes. */
static bool cut_between_hex_escapes(const char *why, const char *first)
{
	const char *a = strstr(why, first), *m = strstr(why, "...[cut: ");

	return a && m && m > a && (size_t)(m - a) % 4 == 0 && m[-4] == '\\' && m[-3] == 'x';
}

#define HOSTILE "x' is fine; 'etc\n\x1b\xff"
#define HOSTILE_ESCAPED "x\\' is fine; \\'etc\\n\\x1b\\xff"

TEST(sudo_list_reasons_escape_names)
{
	static const char grant[] = "User u may run the following commands on h:\n"
				    "    (pi-tools) CWD=/ NOSETENV: NOPASSWD: sha256:" D1
				    " /data/trusted/hello, /x' is fine; '/etc\x1b\xff\n";
	struct trusted_entry e = {.name = "hello", .digest = D1};
	_cleanup_free_ struct trusted_sudo_list *l = NULL, *l2 = NULL;
	char why[512], line[600];

	ASSERT_EQ(trusted_sudo_list_parse(grant, strlen(grant), &l), 0);
	ASSERT_EQ(trusted_sudo_list_verify(l, &e, 1, why, sizeof(why)), 1);
	EXPECT_STREQ(why, "sudo grants '/x\\' is fine; \\'/etc\\x1b\\xff' (as 'pi-tools'), which "
			  "is not a trusted command");
	/* another runas or command Defaults entry, quoted and cut at 160 with its mark */
	snprintf(line, sizeof(line),
		 "Runas and Command-specific defaults for u:\n    Defaults!/x' y, '\x1b ");
	memset(line + strlen(line), 'a', 300);
	line[strlen("Runas and Command-specific defaults for u:\n    Defaults!/x' y, '\x1b ") +
	     300] = '\0';
	strcat(line,
	       "\nUser u may run the following commands on h:\n"
	       "    (pi-tools) CWD=/ NOSETENV: NOPASSWD: sha256:" D1 " /data/trusted/hello\n");
	ASSERT_EQ(trusted_sudo_list_parse(line, strlen(line), &l2), 0);
	ASSERT_EQ(trusted_sudo_list_verify(l2, &e, 1, why, sizeof(why)), 1);
	EXPECT_TRUE(is_text(why));
	EXPECT_NOT_NULL(strstr(why, "sudoers has 'Defaults!/x\\' y, \\'\\x1b aaa"));
	EXPECT_NOT_NULL(strstr(why, "aaa'[cut: 319 bytes]: with trusted commands"));
}

TEST(interp_reasons_escape_names_once)
{
	_cleanup_free_ char *root = make_root();
	char p[1024], why[512], big[300], *t;
	_cleanup_close_ int rfd = -1;
	static uint8_t b[8192];
	size_t n;

	if (geteuid() != 0)
		SKIP("needs root");
	ASSERT_NOT_NULL(root);
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(rfd, 0);
	snprintf(p, sizeof(p), "%s/opt", root);
	ASSERT_EQ(mkdir(p, 0755), 0);
	ASSERT_EQ(chmod(p, 0755), 0);

	/* the #! interpreter's own name (no blank nor newline there) */
	ASSERT_EQ(trusted_interp_check(rfd, "/data/trusted/x", "#!/opt/q'\x1b\xff\n", 11, why,
				       sizeof(why)),
		  1);
	EXPECT_STREQ(
		why,
		"/data/trusted/x: interpreter '/opt/q\\'\\x1b\\xff' does not exist in the image");

	/* a directory others may write, reached through a link: its name as the walk saw it */
	snprintf(p, sizeof(p), "%s/opt/" HOSTILE, root);
	ASSERT_EQ(mkdir(p, 0777), 0);
	ASSERT_EQ(chmod(p, 0777), 0);
	snprintf(p, sizeof(p), "%s/opt/link", root);
	ASSERT_EQ(symlink("/opt/" HOSTILE "/sh", p), 0);
	ASSERT_EQ(
		trusted_interp_check(rfd, "/data/trusted/x", "#!/opt/link\n", 12, why, sizeof(why)),
		1);
	EXPECT_STREQ(why,
		     "/data/trusted/x: interpreter '/opt/link': directory '/opt/" HOSTILE_ESCAPED
		     "' is not root's alone (owner 0, mode 0777): someone else can swap what "
		     "it holds");

	/* a name too long for the reason: cut between two escapes, with the mark */
	memset(big, 0xff, 250);
	big[250] = '\0';
	snprintf(p, sizeof(p), "%s/opt/%s", root, big);
	ASSERT_EQ(mkdir(p, 0777), 0);
	ASSERT_EQ(chmod(p, 0777), 0);
	snprintf(p, sizeof(p), "%s/opt/link2", root);
	t = p + strlen(p) + 1;
	snprintf(t, 400, "/opt/%s/sh", big);
	ASSERT_EQ(symlink(t, p), 0);
	ASSERT_EQ(trusted_interp_check(rfd, "/data/trusted/x", "#!/opt/link2\n", 13, why,
				       sizeof(why)),
		  1);
	EXPECT_TRUE(is_text(why));
	EXPECT_TRUE(cut_between_hex_escapes(why, "\\xff"));
	EXPECT_LT(strlen(why), sizeof(why));

	/* a library name from a program's dynamic section (any byte but NUL) */
	{
		static const struct dyn_ent e[] = {
			{5, 0, NULL}, {10, 0, NULL}, {1, 0, "a$" HOSTILE}};

		n = make_dyn_elf(b, sizeof(b), true, false, e, ELEMENTSOF(e), NULL);
		ASSERT_EQ(trusted_interp_check(rfd, "/data/trusted/x", (const char *)b, n, why,
					       sizeof(why)),
			  1);
		EXPECT_STREQ(why, "/data/trusted/x: NEEDED 'a$" HOSTILE_ESCAPED
				  "' holds a '$', which glibc and musl read differently");
	}
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	(void)system(p);
}

TEST(data_bin_reason_quotes_names)
{
	_cleanup_free_ char *root = make_root();
	char p[1024], why[512], big[201];
	_cleanup_close_ int rfd = -1;
	unsigned n = 0;
	int fd;

	if (geteuid() != 0)
		SKIP("needs root");
	ASSERT_NOT_NULL(root);
	snprintf(p, sizeof(p), "mkdir -p -m 0755 '%s/data/bin'", root);
	ASSERT_EQ(system(p), 0);
	snprintf(p, sizeof(p), "%s/data/bin/" HOSTILE, root);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(fchown(fd, 1000, 1000), 0);
	ASSERT_EQ(fchmod(fd, 0755), 0);
	close(fd);
	memset(big, 'y', 200);
	big[200] = '\0';
	snprintf(p, sizeof(p), "%s/data/bin/%s", root, big);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(fchown(fd, 1000, 1000), 0);
	ASSERT_EQ(fchmod(fd, 0755), 0);
	close(fd);
	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(rfd, 0);
	ASSERT_EQ(trusted_data_bin_check(rfd, &n, why, sizeof(why)), 1);
	EXPECT_TRUE(is_text(why));
	EXPECT_NOT_NULL(strstr(why, "2 file(s) in /data/bin, on every agent's PATH, not root's "
				    "alone: '"));
	EXPECT_NOT_NULL(strstr(why, "'" HOSTILE_ESCAPED "' (owner 1000, mode 0755)"));
	/* 48 bytes of the long one, then the mark outside its quotes */
	snprintf(p, sizeof(p), "'%.48s'[cut: 200 bytes] (owner 1000, mode 0755)", big);
	EXPECT_NOT_NULL(strstr(why, p));
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	(void)system(p);
}

TEST_TIMEOUT(harden_setuid_reason_quotes_the_deep_branch, 120)
{
	_cleanup_free_ char *root = make_root();
	char p[1024], why[768];
	int fd;

	if (geteuid() != 0)
		SKIP("needs root");
	ASSERT_NOT_NULL(root);
	snprintf(p, sizeof(p), "%s/" HOSTILE, root);
	ASSERT_EQ(mkdir(p, 0755), 0);
	fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	for (int i = 0; i < 300; i++) {
		int sub;

		ASSERT_EQ(mkdirat(fd, "d", 0755), 0);
		sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ASSERT_GE(sub, 0);
		close(fd);
		fd = sub;
	}
	close(fd);
	ASSERT_EQ(
		trusted_harden_setuid(root, NULL, 0, TRUSTED_DRY_RUN, NULL, NULL, why, sizeof(why)),
		1);
	EXPECT_TRUE(is_text(why));
	EXPECT_NOT_NULL(strstr(why, "(the first: '/" HOSTILE_ESCAPED "/d/d/"));
	/* the path is longer than its 256 escaped bytes: cut with a mark outside the quotes */
	EXPECT_NOT_NULL(strstr(why, "/d/'[cut: 532 bytes]): what they hold keeps"));
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	(void)system(p);
}

/* visudo and sudo run in a root through trusted_run_in_root: what the forked child says
 * when it cannot get there (written without stdio or strerror: async-signal-safe). */
TEST(run_in_root_says_why_it_could_not_run)
{
	char dir[] = "/tmp/pistis-test-run.XXXXXX", file[64], *out = NULL;

	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/not-exec", dir);
	int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(write(fd, "#!/bin/sh\n", 10), 10);
	close(fd);
	EXPECT_EQ(trusted_run_in_root("/", (char *[]){"/nonexistent/visudo", NULL}, &out), 127);
	EXPECT_STREQ(out, "cannot run '/nonexistent/visudo' in '/': No such file or directory "
			  "(ENOENT)\n");
	free(out);
	out = NULL;
	EXPECT_EQ(trusted_run_in_root("/", (char *[]){file, NULL}, &out), 127);
	char want[400];
	snprintf(want, sizeof(want), "cannot run '%s' in '/': Permission denied (EACCES)\n", file);
	EXPECT_STREQ(out, want);
	free(out);
	out = NULL;
	EXPECT_EQ(trusted_run_in_root("/", (char *[]){(char *)"/etc/passwd/x", NULL}, &out), 127);
	EXPECT_STREQ(out, "cannot run '/etc/passwd/x' in '/': Not a directory (ENOTDIR)\n");
	free(out);
	out = NULL;
	/* an errno without a name here: its number */
	char longname[300] = "/";
	memset(longname + 1, 'a', 280);
	EXPECT_EQ(trusted_run_in_root("/", (char *[]){longname, NULL}, &out), 127);
	snprintf(want, sizeof(want), "cannot run '%s' in '/': errno %d\n", longname, ENAMETOOLONG);
	EXPECT_STREQ(out, want);
	free(out);
	out = NULL;
	if (getuid() == 0) {
		EXPECT_EQ(trusted_run_in_root("/nonexistent-root",
					      (char *[]){(char *)"/bin/true", NULL}, &out),
			  111);
		EXPECT_STREQ(out, "chroot into '/nonexistent-root' failed: No such file or "
				  "directory (ENOENT)\n");
		free(out);
		out = NULL;
		EXPECT_EQ(trusted_run_in_root(file, (char *[]){(char *)"/bin/true", NULL}, &out),
			  111);
		snprintf(want, sizeof(want), "chroot into '%s' failed: Not a directory (ENOTDIR)\n",
			 file);
		EXPECT_STREQ(out, want);
		free(out);
	}
	unlink(file);
	rmdir(dir);
}

TEST_HARNESS_MAIN
