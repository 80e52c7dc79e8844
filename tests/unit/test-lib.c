#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/log-rate.h"
#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/proc-status.h"
#include "lib/sig-util.h"
#include "lib/siphash.h"
#include "lib/parse-num.h"
#include "lib/host-ns.h"
#include "lib/id-map.h"
#include "lib/tap.h"
#include "lib/token-file.h"
#include "lib/trust-path.h"
#include "lib/proxy-env.h"
#include "lib/sock-owner.h"
#include "lib/ws-url.h"

/* The open-files limit of serve and server-min: raised to the wanted figure, held to the
 * hard limit, never lowered. Each test runs in a child of its own. */
TEST(fd_limit_raise_up_to_the_hard_limit_never_down)
{
	struct rlimit rl = {.rlim_cur = 64, .rlim_max = 256};
	rlim_t now = 0;

	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	EXPECT_EQ(fd_limit_raise(128, &now), 0);
	EXPECT_EQ(now, (rlim_t)128);
	EXPECT_EQ(fd_limit_raise(8192, &now), 0);
	EXPECT_EQ(now, (rlim_t)256);
	EXPECT_EQ(fd_limit_raise(100, &now), 0);
	EXPECT_EQ(now, (rlim_t)256);
	ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	EXPECT_EQ(rl.rlim_cur, (rlim_t)256);
	EXPECT_EQ(rl.rlim_max, (rlim_t)256);
}

TEST(escape_c_control_bytes)
{
	char out[64];
	size_t n = escape_c("a\nb\x1b[31m\"\\\xff", 11, out, sizeof(out));

	ASSERT_STREQ(out, "a\\nb\\x1b[31m\\\"\\\\\\xff");
	ASSERT_EQ(n, strlen(out));
}

TEST(escape_c_dup_whole_string)
{
	char *s = escape_c_dup("a\nb\x1b[31m\"\\\xff"), *e = escape_c_dup("");

	ASSERT_TRUE(s != NULL && e != NULL);
	EXPECT_STREQ(s, "a\\nb\\x1b[31m\\\"\\\\\\xff");
	EXPECT_STREQ(e, "");
	free(s);
	free(e);
}

TEST(escape_json_high_bytes_and_quotes)
{
	char out[64];

	escape_json("\"\x01\xc3\xa9", 4, out, sizeof(out));
	ASSERT_STREQ(out, "\\\"\\u0001\\u00c3\\u00a9");
}

TEST(utf8_display_control_finds_c1_separators_and_bidi)
{
	static const struct {
		const char *s;
		size_t len, n;
		unsigned cp;
	} cases[] = {
		{"\xc2\x80", 2, 2, 0x80},
		{"\xc2\x9b", 2, 2, 0x9b},
		{"\xc2\x9f", 2, 2, 0x9f},
		{"\xc2\xa0", 2, 0, 0},
		{"\xc2\x9b", 1, 0, 0},
		{"\xd8\x9c", 2, 2, 0x61c},
		{"\xd8\x9b", 2, 0, 0},
		{"\xe2\x80\x8e", 3, 3, 0x200e},
		{"\xe2\x80\x8f", 3, 3, 0x200f},
		{"\xe2\x80\x8d", 3, 0, 0},
		{"\xe2\x80\xa7", 3, 0, 0},
		{"\xe2\x80\xa8", 3, 3, 0x2028},
		{"\xe2\x80\xa9", 3, 3, 0x2029},
		{"\xe2\x80\xae", 3, 3, 0x202e},
		{"\xe2\x80\xaf", 3, 0, 0},
		{"\xe2\x81\xa5", 3, 0, 0},
		{"\xe2\x81\xa6", 3, 3, 0x2066},
		{"\xe2\x81\xa9", 3, 3, 0x2069},
		{"\xe2\x81\xaa", 3, 0, 0},
		{"\xe2\x80\xae", 2, 0, 0},
		{"a", 1, 0, 0},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		unsigned cp = 0;

		EXPECT_EQ(utf8_display_control(cases[i].s, cases[i].len, &cp), cases[i].n);
		if (cases[i].n)
			EXPECT_EQ(cp, cases[i].cp);
	}
}

TEST(escape_truncates_on_escape_boundary)
{
	char out[6];
	size_t n = escape_c("ab\ncd", 5, out, sizeof(out));

	/* "ab\n" escapes to 4 bytes, "c" fits, "d" does not: whole escapes only. */
	ASSERT_EQ(n, 6u);
	ASSERT_STREQ(out, "ab\\nc");

	char tiny[3];
	escape_c("a\n", 2, tiny, sizeof(tiny));
	ASSERT_STREQ(tiny, "a");
}

/* One quoted field of an audit line: whole, or cut with a mark outside the quotes that no
 * value can forge (its own quotes come out escaped). */
TEST(escape_c_field_cut_is_marked_outside_the_quotes)
{
	char *f = escape_c_field("a\"b\n", 16);
	char big[1001];

	ASSERT_STREQ(f, "\"a\\\"b\\n\"");
	free(f);
	memset(big, 'y', 1000);
	big[1000] = 0;
	big[5] = '\n'; /* an escape across the bound is never split */
	f = escape_c_field(big, 7);
	ASSERT_STREQ(f, "\"yyyyy\\n\"[cut: 1000 bytes]");
	free(f);
	f = escape_c_field(big, 6);
	ASSERT_STREQ(f, "\"yyyyy\"[cut: 1000 bytes]");
	free(f);
	/* a value that spells the mark is still inside its quotes */
	f = escape_c_field("x\"[cut: 1 bytes]", 64);
	ASSERT_STREQ(f, "\"x\\\"[cut: 1 bytes]\"");
	free(f);
}

/* A quote in a value is escaped in text (it cannot end the '...' around it), not in JSON
 * (which has no \' and needs none there). */
TEST(escape_c_escapes_single_quotes)
{
	char out[64];

	escape_c("a'b", 3, out, sizeof(out));
	ASSERT_STREQ(out, "a\\'b");
	escape_json("a'b", 3, out, sizeof(out));
	ASSERT_STREQ(out, "a'b");
}

/* A cut never leaves the first bytes of a UTF-8 character without the rest. */
TEST(escape_cut_keeps_utf8_characters_whole)
{
	char out[12];

	/* "ab" + \xc3 fit in 6+1, \xa9 does not: the whole e-acute goes */
	escape_c("ab\xc3\xa9z", 5, out, 7);
	ASSERT_STREQ(out, "ab");
	/* a lone continuation byte or an invalid lead is a byte like any other */
	escape_c("ab\xff\xa9z", 5, out, 7);
	ASSERT_STREQ(out, "ab\\xff");
	escape_json("a\xe2\x80\xa6", 4, out, 12);
	ASSERT_STREQ(out, "a");
}

/* One JSON string, cut with a mark inside its quotes that no value can forge. */
TEST(escape_json_field_cut_is_marked)
{
	char big[5001], *f = escape_json_field("a\"'\\\n\x1b\xff", 64);

	ASSERT_STREQ(f, "\"a\\\"'\\\\\\n\\u001b\\u00ff\"");
	free(f);
	memset(big, 'y', 5000);
	big[5000] = 0;
	f = escape_json_field(big, 4096);
	ASSERT_EQ(strlen(f), (size_t)(1 + 4096 + 6 + 1));
	EXPECT_STREQ(f + 1 + 4096, "\\u2026\"");
	free(f);
	/* "\xc3\xa9" straddles the bound: cut before it, never inside */
	memset(big, 'y', 10);
	memcpy(big + 2, "\xc3\xa9", 2);
	big[10] = 0;
	f = escape_json_field(big, 8);
	EXPECT_STREQ(f, "\"yy\\u2026\"");
	free(f);
	/* the bytes of U+2026 in a value are \u00XX each, never the mark */
	f = escape_json_field("\xe2\x80\xa6", 64);
	EXPECT_STREQ(f, "\"\\u00e2\\u0080\\u00a6\"");
	free(f);
}

/* A name quoted in a message: every hostile byte escaped once, its quote too; a long one cut
 * before a whole escape or UTF-8 character, with a mark outside the quotes. */
TEST(escape_c_quote_escapes_and_marks_its_cut)
{
	char out[64 + ESCAPE_QUOTE_EXTRA], big[301], tiny[ESCAPE_QUOTE_EXTRA + 3];
	const char *name = "x' is fine; '/etc\n\x1b[31m\xff";

	EXPECT_STREQ(escape_c_quote(name, strlen(name), 64, out, sizeof(out)),
		     "'x\\' is fine; \\'/etc\\n\\x1b[31m\\xff'");
	memset(big, 'y', 300);
	big[300] = 0;
	big[6] = '\n';
	/* "yyyyyy" then \n across the bound of 7: cut before it, never inside */
	EXPECT_STREQ(escape_c_quote(big, 300, 7, out, sizeof(out)), "'yyyyyy'[cut: 300 bytes]");
	/* an e-acute across the bound of 9 (\xc3 fits, \xa9 does not): both of its bytes go */
	memcpy(big + 4, "\xc3\xa9", 2);
	EXPECT_STREQ(escape_c_quote(big, 300, 9, out, sizeof(out)), "'yyyy'[cut: 300 bytes]");
	/* out bounds max: 64 escaped bytes of a 300-byte name */
	EXPECT_EQ(strlen(escape_c_quote(big, 300, 1000, out, sizeof(out))),
		  strlen("''[cut: 300 bytes]") + 64);
	EXPECT_STREQ(escape_c_quote("ab", 2, 1000, tiny, sizeof(tiny)), "'ab'");
	EXPECT_STREQ(escape_c_quote("abcd", 4, 1000, tiny, sizeof(tiny)), "'abc'[cut: 4 bytes]");
	/* a name that spells the mark stays inside its quotes */
	EXPECT_STREQ(escape_c_quote("a'[cut: 1 bytes]", 16, 64, out, sizeof(out)),
		     "'a\\'[cut: 1 bytes]'");
}

/* A reason built as the text log builds a line: each value escaped once (a quoted one's
 * quote too), text already escaped (%-s) passed as it is, and a cut between two escapes with
 * its mark. */
TEST(escape_format_escapes_each_value_once_and_marks_its_cut)
{
	char out[128], inner[64], small[24];
	size_t n;

	escape_format(inner, sizeof(inner), "'%s' is not root's alone", "/a'b\n");
	EXPECT_STREQ(inner, "'/a\\'b\\n' is not root's alone");
	n = escape_format(out, sizeof(out), "%s: library '%s': %-s (%d)", "it's\x1b", "\xff\xc3",
			  inner, 7);
	EXPECT_STREQ(out, "it's\\x1b: library '\\xff\\xc3': '/a\\'b\\n' is not root's alone (7)");
	EXPECT_EQ(n, strlen(out));
	/* 24 bytes: whole "\n" pairs, then the mark */
	n = escape_format(small, sizeof(small), "ab%s", "\n\n\n\n\n\n\n\n\n\n\n\n");
	EXPECT_EQ(n, 26u);
	EXPECT_STREQ(small, "ab\\n...[cut: 26 bytes]");
	escape_format(small, sizeof(small), "a%s", "\n\n\n\n\n\n\n\n\n\n\n\n");
	EXPECT_STREQ(small, "a\\n\\n...[cut: 25 bytes]");
}

/* What log_* wrote to stderr, as one string (its last newline dropped). */
static char *log_capture_begin(int *ret_fd, int *ret_saved)
{
	static char path[] = "/tmp/pistis-log-XXXXXX";

	strcpy(path, "/tmp/pistis-log-XXXXXX");
	*ret_fd = mkstemp(path);
	*ret_saved = dup(STDERR_FILENO);
	unlink(path);
	dup2(*ret_fd, STDERR_FILENO);
	return path;
}

static char *log_capture_end(int fd, int saved)
{
	static char buf[16384];
	ssize_t n;

	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = 0;
	return buf;
}

/* The text log escapes each value once, its quotes too, and leaves the program's own text
 * and text already escaped (%-s) as they are: no doubled backslash, no value that ends its
 * '...' early, no raw control byte. */
TEST(log_text_escapes_each_value_once)
{
	int fd, saved;
	char *out;

	log_set_level(LOG_LVL_INFO);
	log_set_format(LOG_FORMAT_TEXT);
	log_capture_begin(&fd, &saved);
	log_info("name '%s' is \"bad\": %-s; %d %zu %5.1f%% %.3s %-4s| \"%s\" %s",
		 "a\\b' ok '\n\x1b", "why 'x\\'y' \x1b", -3, (size_t)7, 2.5, "abcdef", "q", "'\"",
		 "root's \"x\"");
	out = log_capture_end(fd, saved);
	EXPECT_STREQ(out, "pistis: name 'a\\\\b\\' ok \\'\\n\\x1b' is \"bad\": why 'x\\'y' \\x1b; "
			  "-3 7   2.5% abc q   | \"\\'\\\"\" root's \\\"x\\\"");
	/* JSON carries the values as they are, escaped once by JSON */
	log_capture_begin(&fd, &saved);
	log_set_format(LOG_FORMAT_JSON);
	log_info("name '%s': %-s", "a\\b'", "t");
	log_set_format(LOG_FORMAT_TEXT);
	out = log_capture_end(fd, saved);
	EXPECT_NOT_NULL(strstr(out, "\"msg\":\"name 'a\\\\b'': t\"}"));
}

/* After forwarded bytes left a line open (log_set_line_open), the next log line starts
 * with a newline, text or JSON, once: it is never glued to the end of an agent's output. */
TEST(log_line_open_owes_a_newline)
{
	int fd, saved;
	char *out;

	log_set_level(LOG_LVL_INFO);
	log_set_format(LOG_FORMAT_TEXT);
	log_capture_begin(&fd, &saved);
	log_set_line_open(true);
	EXPECT_TRUE(log_line_open());
	log_info("one");
	EXPECT_FALSE(log_line_open());
	log_info("two");
	log_set_line_open(true);
	log_set_format(LOG_FORMAT_JSON);
	log_error_errno(-EIO, "three");
	log_set_format(LOG_FORMAT_TEXT);
	log_set_line_open(false);
	log_info("four");
	out = log_capture_end(fd, saved);
	const char *head = "\npistis: one\npistis: two\n\n{\"ts\":";

	EXPECT_EQ(strncmp(out, head, strlen(head)), 0);
	EXPECT_NOT_NULL(strstr(out, "\"msg\":\"three\",\"errno\":5}\npistis: four"));
}

/* A text line cut past LOG_LINE_MAX is cut between escapes, never inside one. */
TEST(log_text_cut_is_between_escapes)
{
	char *big = malloc(LOG_LINE_MAX), *out, *mark;
	int fd, saved;

	ASSERT_NOT_NULL(big);
	memset(big, '\n', LOG_LINE_MAX - 1);
	big[LOG_LINE_MAX - 1] = 0;
	log_set_level(LOG_LVL_INFO);
	log_capture_begin(&fd, &saved);
	log_info("x%s", big);
	out = log_capture_end(fd, saved);
	mark = strstr(out, "...[line cut: 4095 bytes]");
	ASSERT_NOT_NULL(mark);
	/* "x" then whole "\n" pairs */
	EXPECT_EQ((size_t)(mark - strstr(out, ": x") - 3) % 2, 0u);
	EXPECT_EQ(strlen(out), strlen("pistis: ") + LOG_LINE_MAX - 2);
	free(big);
}

/* A log line longer than LOG_LINE_MAX is cut once, and says so with its length; escaping
 * never cuts a text line a second time (2047 control bytes are 4 bytes each); a JSON one
 * (6 each) is cut to fit PIPE_BUF, marked with the same length. */
TEST(log_cut_line_says_so)
{
	char path[] = "/tmp/pistis-log-XXXXXX", buf[16384];
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	char *big = malloc(3001);
	ssize_t n;

	ASSERT_GE(fd, 0);
	ASSERT_NOT_NULL(big);
	memset(big, 'z', 3000);
	big[3000] = 0;
	log_set_level(LOG_LVL_INFO);
	ASSERT_EQ(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	log_info("%s", big);
	memset(big, '\x01', LOG_LINE_MAX - 1);
	big[LOG_LINE_MAX - 1] = 0;
	log_set_format(LOG_FORMAT_JSON);
	log_info("%s", big);
	log_set_format(LOG_FORMAT_TEXT);
	ASSERT_EQ(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	ASSERT_GT(n, 0);
	buf[n] = 0;
	char *nl = strchr(buf, '\n');
	ASSERT_NOT_NULL(nl);
	*nl = 0;
	EXPECT_NOT_NULL(strstr(buf, "zzz...[line cut: 3000 bytes]"));
	EXPECT_EQ(strlen(strstr(buf, ": ") + 2), (size_t)LOG_LINE_MAX - 1);
	/* The JSON line: 2047 bytes are 12 KiB escaped, past the PIPE_BUF a pipe writes in
	 * one piece; cut at an escape's end and marked, the whole line under PIPE_BUF. */
	char *mark = strstr(nl + 1, "\\u0001...[line cut: 2047 bytes]\"}\n");

	ASSERT_NOT_NULL(mark);
	EXPECT_EQ((size_t)(mark + 6 - strstr(nl + 1, "\\u0001")) % 6, 0u);
	EXPECT_LE(strlen(nl + 1), (size_t)PIPE_BUF);
	EXPECT_GT(strlen(nl + 1), (size_t)PIPE_BUF / 2);
	close(fd);
	unlink(path);
	free(big);
}

TEST(escape_empty)
{
	char out[4] = "xyz";

	ASSERT_EQ(escape_json("", 0, out, sizeof(out)), 0u);
	ASSERT_STREQ(out, "");
}

TEST(loop_write_read_roundtrip)
{
	int p[2];
	char buf[16] = {0};

	ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
	ASSERT_EQ(loop_write(p[1], "hello", 5), 0);
	close(p[1]);
	ASSERT_EQ(loop_read(p[0], buf, sizeof(buf)), 5);
	ASSERT_STREQ(buf, "hello");
	close(p[0]);
}

TEST(fd_read_all_limit)
{
	int p[2];
	char *s = NULL;
	size_t len = 0;
	char big[5000];

	memset(big, 'x', sizeof(big));
	ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
	ASSERT_EQ(loop_write(p[1], big, sizeof(big)), 0);
	close(p[1]);
	ASSERT_EQ(fd_read_all(p[0], 4096, &s, &len), -EFBIG);
	ASSERT_NULL(s);
	close(p[0]);

	ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
	ASSERT_EQ(loop_write(p[1], big, sizeof(big)), 0);
	close(p[1]);
	ASSERT_EQ(fd_read_all(p[0], sizeof(big), &s, &len), 0);
	ASSERT_EQ(len, sizeof(big));
	ASSERT_EQ(s[len], '\0');
	free(s);
	close(p[0]);
}

/* The hint sizes the first buffer only: a file that grew past it, or shrank, reads whole,
 * and the limit still holds. */
TEST(fd_read_all_hint_sizes)
{
	char big[10000];
	size_t hints[] = {1, 9999, 10000, 20000};

	memset(big, 'y', sizeof(big));
	for (size_t i = 0; i < ELEMENTSOF(hints); i++) {
		int p[2];
		char *s = NULL;
		size_t len = 0;

		ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
		ASSERT_EQ(fcntl(p[1], F_SETPIPE_SZ, 65536) >= 0, 1);
		ASSERT_EQ(loop_write(p[1], big, sizeof(big)), 0);
		close(p[1]);
		ASSERT_EQ(fd_read_all_hint(p[0], 1 << 20, hints[i], &s, &len), 0);
		ASSERT_EQ(len, sizeof(big));
		ASSERT_EQ(s[len], '\0');
		ASSERT_EQ(memcmp(s, big, len), 0);
		free(s);
		close(p[0]);
	}
	{
		int p[2];
		char *s = NULL;
		size_t len = 0;

		ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
		ASSERT_EQ(fcntl(p[1], F_SETPIPE_SZ, 65536) >= 0, 1);
		ASSERT_EQ(loop_write(p[1], big, sizeof(big)), 0);
		close(p[1]);
		ASSERT_EQ(fd_read_all_hint(p[0], 9999, 20000, &s, &len), -EFBIG);
		ASSERT_NULL(s);
		close(p[0]);
	}
}

TEST(close_all_fds_from_closes)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	ASSERT_GE(fd, 3);
	ASSERT_EQ(close_all_fds_from(3), 0);
	ASSERT_EQ(fcntl(fd, F_GETFD), -1);
	ASSERT_EQ(errno, EBADF);
}

TEST(fd_open_regular_refuses_links_fifos_and_directories)
{
	char tmpl[] = "/tmp/test-regular.XXXXXX", *d = mkdtemp(tmpl), p[512];
	_cleanup_close_ int dfd = -1;
	struct stat st;
	int fd = -1;

	ASSERT_NE(d, NULL);
	dfd = open(d, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(dfd, 0);
	snprintf(p, sizeof(p), "%s/f", d);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(loop_write(fd, "abc", 3), 0);
	close(fd);
	ASSERT_EQ(symlinkat("f", dfd, "link"), 0);
	ASSERT_EQ(mkfifoat(dfd, "fifo", 0600), 0);
	ASSERT_EQ(mkdirat(dfd, "dir", 0700), 0);

	fd = -1;
	ASSERT_EQ(fd_open_regular(dfd, "f", &st, &fd), 0);
	EXPECT_GE(fd, 3);
	EXPECT_EQ(st.st_size, 3);
	EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	fd = -1;
	EXPECT_EQ(fd_open_regular(dfd, "link", &st, &fd), -ELOOP);
	EXPECT_EQ(fd_open_regular(dfd, "fifo", &st, &fd), -EBADFD); /* opened without blocking */
	EXPECT_EQ(fd_open_regular(dfd, "dir", &st, &fd), -EBADFD);
	EXPECT_EQ(fd_open_regular(dfd, "none", &st, &fd), -ENOENT);
	EXPECT_EQ(fd, -1);
	snprintf(p, sizeof(p), "rm -rf '%s'", d);
	(void)!system(p);
}

TEST(ws_url_for_log_hides_user_part_and_query)
{
	char b[128], small[12];

	EXPECT_STREQ(ws_url_for_log("wss://relay:8443/v1/sandbox", b, sizeof(b)),
		     "wss://relay:8443/v1/sandbox");
	EXPECT_STREQ(ws_url_for_log("ws://tok-secret@h:1/x", b, sizeof(b)), "ws://***@h:1/x");
	EXPECT_STREQ(ws_url_for_log("wss://u:p@ss@h/s", b, sizeof(b)), "wss://***@h/s");
	EXPECT_STREQ(ws_url_for_log("wss://h/s?token=secret&a=1", b, sizeof(b)), "wss://h/s?***");
	EXPECT_STREQ(ws_url_for_log("ws://h#secret", b, sizeof(b)), "ws://h#***");
	EXPECT_STREQ(ws_url_for_log("ws://h?@x/y", b, sizeof(b)), "ws://h?***");
	EXPECT_STREQ(ws_url_for_log("http://u:secret@h/p?q", b, sizeof(b)), "http://***@h/p?***");
	EXPECT_STREQ(ws_url_for_log("ws://h/p@q", b, sizeof(b)), "ws://h/p@q");
	EXPECT_STREQ(ws_url_for_log("/run/relay.sock", b, sizeof(b)), "/run/relay.sock");
	EXPECT_STREQ(ws_url_for_log("ws://secret@h", small, sizeof(small)), "ws://***@h");
	EXPECT_STREQ(ws_url_for_log("ws://abcdefghijk", small, sizeof(small)), "ws://abcdef");
}

TEST(ws_url_parse_scheme_host_port_path)
{
	struct ws_url u;
	char long_host[300];

	ASSERT_EQ(ws_url_parse("ws://relay", "/v1/x", &u), 0);
	EXPECT_STREQ(u.host, "relay");
	EXPECT_EQ(u.port, 80);
	EXPECT_FALSE(u.tls);
	EXPECT_STREQ(u.path, "/v1/x");
	ASSERT_EQ(ws_url_parse("wss://10.0.0.1:8443/v1/sandbox?a=1", "/d", &u), 0);
	EXPECT_STREQ(u.host, "10.0.0.1");
	EXPECT_EQ(u.port, 8443);
	EXPECT_TRUE(u.tls);
	EXPECT_STREQ(u.path, "/v1/sandbox?a=1");
	ASSERT_EQ(ws_url_parse("wss://h/", "/d", &u), 0);
	EXPECT_EQ(u.port, 443);
	EXPECT_STREQ(u.path, "/");
	ASSERT_EQ(ws_url_parse("ws://h:65535", "/d", &u), 0);
	EXPECT_EQ(u.port, 65535);

	EXPECT_EQ(ws_url_parse("http://h", "/d", &u), -EPROTONOSUPPORT);
	EXPECT_EQ(ws_url_parse("WS://h", "/d", &u), -EPROTONOSUPPORT);
	EXPECT_EQ(ws_url_parse("/run/relay.sock", "/d", &u), -EPROTONOSUPPORT);
	EXPECT_EQ(ws_url_parse("ws://", "/d", &u), -EINVAL);
	EXPECT_EQ(ws_url_parse("ws://:80/x", "/d", &u), -EINVAL);
	memset(long_host, 'a', sizeof(long_host) - 1);
	long_host[sizeof(long_host) - 1] = 0;
	memcpy(long_host, "ws://", 5);
	EXPECT_EQ(ws_url_parse(long_host, "/d", &u), -EINVAL);
	EXPECT_EQ(ws_url_parse("ws://h:0", "/d", &u), -ERANGE);
	EXPECT_EQ(ws_url_parse("ws://h:65536", "/d", &u), -ERANGE);
	EXPECT_EQ(ws_url_parse("ws://h:", "/d", &u), -ERANGE);
	EXPECT_EQ(ws_url_parse("ws://h:+80", "/d", &u), -ERANGE);
	EXPECT_EQ(ws_url_parse("ws://h:80x", "/d", &u), -ERANGE);
	EXPECT_EQ(ws_url_parse("ws://h:80:81", "/d", &u), -ERANGE);
}

TEST(log_returns_negative_errno)
{
	int saved;

	log_set_level(LOG_LVL_ERROR);
	errno = 42;
	saved = errno;
	ASSERT_EQ(log_debug_errno(EPERM, "not shown"), -EPERM);
	ASSERT_EQ(log_debug_errno(-ENOENT, "not shown"), -ENOENT);
	ASSERT_EQ(errno, saved);
}

TEST(cleanup_take_fd)
{
	int kept;
	{
		_cleanup_close_ int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		kept = TAKE_FD(fd);
		ASSERT_EQ(fd, -1);
	}
	ASSERT_EQ(fcntl(kept, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(kept);
}

/* The harness itself: a test that must die by a signal. */
TEST_SIGNAL(harness_expects_signal, SIGABRT)
{
	abort();
}

FIXTURE(tmpfile)
{
	int fd;
};
FIXTURE_SETUP(tmpfile)
{
	self->fd = open("/dev/null", O_RDWR | O_CLOEXEC);
}
FIXTURE_TEARDOWN(tmpfile)
{
	close(self->fd);
}
TEST_F(tmpfile, fixture_sets_up)
{
	ASSERT_GE(self->fd, 0);
	ASSERT_EQ(write(self->fd, "x", 1), 1);
}

/* The token-file reader of pistis and pistisd serve: what is refused, and why. */
static void put(const char *dir, const char *name, const char *data, size_t len, mode_t mode)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || loop_write(fd, data, len) < 0 || fchmod(fd, mode) < 0)
		abort();
	close(fd);
}

static int tf_read(const char *dir, const char *name, uid_t also, mode_t forbidden, char *buf,
		   size_t size, size_t *len, struct token_file_info *info)
{
	const struct token_file_rule rule = {.also_owner = also, .forbidden = forbidden};
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	memset(buf, 'Z', size);
	return token_file_read(p, &rule, buf, size, len, info);
}

static bool all_zero(const char *buf, size_t size)
{
	for (size_t i = 0; i < size; i++)
		if (buf[i])
			return false;
	return true;
}

TEST(token_file_reader)
{
	char tmpl[] = "/tmp/test-token.XXXXXX", *d = mkdtemp(tmpl), buf[32], p[512];
	struct token_file_info info;
	size_t len = 0;
	uid_t me = geteuid();

	ASSERT_NE(d, NULL);
	/* One line, CR/LF trimmed; the rest of buf wiped. */
	put(d, "ok", "0123456789abcdefghijklmnopqrst\r\n", 32, 0600);
	EXPECT_EQ(tf_read(d, "ok", me, 077, buf, sizeof(buf), &len, &info), -EFBIG);
	EXPECT_STREQ(info.why, "is too long");
	EXPECT_TRUE(all_zero(buf, sizeof(buf)));
	put(d, "ok", "0123456789abcdefghijklmnopqrs\r\n", 31, 0600);
	ASSERT_EQ(tf_read(d, "ok", me, 077, buf, sizeof(buf), &len, &info), 0);
	EXPECT_EQ(len, 29u);
	EXPECT_STREQ(buf, "0123456789abcdefghijklmnopqrs");
	EXPECT_TRUE(all_zero(buf + len, sizeof(buf) - len));
	/* "ok/" names a directory only: the file is not read (ENOTDIR, as the kernel says) */
	EXPECT_EQ(tf_read(d, "ok/", me, 077, buf, sizeof(buf), &len, &info), -ENOTDIR);

	/* Symbolic links: one that stays in its own directory, as a Kubernetes Secret
	 * volume's (token -> ..data/token, ..data -> ..2026_12_02_10_00_00.1), is followed
	 * while the link and the directory are ours and no one else may write there. */
	snprintf(p, sizeof(p), "%s/..2026_12_02_10_00_00.1", d);
	ASSERT_EQ(mkdir(p, 0755), 0);
	put(d, "..2026_12_02_10_00_00.1/token", "k8s-token\n", 10, 0400);
	snprintf(p, sizeof(p), "%s/..data", d);
	ASSERT_EQ(symlink("..2026_12_02_10_00_00.1", p), 0);
	snprintf(p, sizeof(p), "%s/token", d);
	ASSERT_EQ(symlink("..data/token", p), 0);
	ASSERT_EQ(tf_read(d, "token", me, 077, buf, sizeof(buf), &len, &info), 0);
	EXPECT_STREQ(buf, "k8s-token");
	snprintf(p, sizeof(p), "%s/link", d);
	ASSERT_EQ(symlink("ok", p), 0);
	EXPECT_EQ(tf_read(d, "link", me, 077, buf, sizeof(buf), &len, &info), 0);
	/* ... but not out of it (absolute, or by ..), nor onto another link, nor where others
	 * may write the directory, nor a link another uid owns. */
	snprintf(p, sizeof(p), "%s/abs", d);
	snprintf(buf, sizeof(buf), "%s/ok", d);
	ASSERT_EQ(symlink(buf, p), 0);
	EXPECT_EQ(tf_read(d, "abs", me, 077, buf, sizeof(buf), &len, &info), -ELOOP);
	EXPECT_STREQ(info.why, "is a symbolic link that leaves its directory or ends in another");
	EXPECT_TRUE(all_zero(buf, sizeof(buf)));
	snprintf(p, sizeof(p), "%s/up", d);
	ASSERT_EQ(symlink("../x/ok", p), 0);
	EXPECT_EQ(tf_read(d, "up", me, 077, buf, sizeof(buf), &len, &info), -ELOOP);
	snprintf(p, sizeof(p), "%s/twice", d);
	ASSERT_EQ(symlink("link", p), 0);
	EXPECT_EQ(tf_read(d, "twice", me, 077, buf, sizeof(buf), &len, &info), -ELOOP);
	ASSERT_EQ(chmod(d, 01777), 0);
	EXPECT_EQ(tf_read(d, "link", me, 077, buf, sizeof(buf), &len, &info), -ELOOP);
	EXPECT_STREQ(info.why, "is a symbolic link in a directory others may write");
	ASSERT_EQ(chmod(d, 0700), 0);

	/* Every directory on the way: root's (or also_owner's), and not writable by others
	 * unless sticky. Whoever may write one could move another root-only file (a hard
	 * link) or a directory of their choosing into the token's place. */
	ASSERT_EQ(chmod(d, 0777), 0);
	EXPECT_EQ(tf_read(d, "ok", me, 077, buf, sizeof(buf), &len, &info), -EPERM);
	EXPECT_STREQ(info.why, "is in a directory that someone besides root may change");
	EXPECT_STREQ(info.dir, d);
	EXPECT_TRUE(all_zero(buf, sizeof(buf)));
	ASSERT_EQ(chmod(d, 0770), 0);
	EXPECT_EQ(tf_read(d, "ok", me, 077, buf, sizeof(buf), &len, &info), -EPERM);
	ASSERT_EQ(chmod(d, 01777), 0);
	EXPECT_EQ(tf_read(d, "ok", me, 077, buf, sizeof(buf), &len, &info), 0);
	snprintf(p, sizeof(p), "%s/open", d);
	ASSERT_EQ(mkdir(p, 0700), 0);
	ASSERT_EQ(chmod(p, 0757), 0);
	snprintf(p, sizeof(p), "%s/open/sub", d);
	ASSERT_EQ(mkdir(p, 0700), 0);
	put(d, "open/sub/tok", "deep-token\n", 11, 0600);
	EXPECT_EQ(tf_read(d, "open/sub/tok", me, 077, buf, sizeof(buf), &len, &info), -EPERM);
	snprintf(p, sizeof(p), "%s/open", d);
	EXPECT_STREQ(info.dir, p);
	ASSERT_EQ(chmod(p, 0755), 0);
	EXPECT_EQ(tf_read(d, "open/sub/tok", me, 077, buf, sizeof(buf), &len, &info), 0);
	EXPECT_STREQ(buf, "deep-token");
	if (me == 0) {
		/* ... another uid's directory, or a link on the way that is not root's. */
		snprintf(p, sizeof(p), "%s/open/sub", d);
		ASSERT_EQ(chown(p, 4242, 0), 0);
		EXPECT_EQ(tf_read(d, "open/sub/tok", (uid_t)-1, 077, buf, sizeof(buf), &len, &info),
			  -EPERM);
		EXPECT_STREQ(info.dir, p);
		EXPECT_EQ(tf_read(d, "open/sub/tok", 4242, 077, buf, sizeof(buf), &len, &info), 0);
		ASSERT_EQ(chown(p, 0, 0), 0);
		snprintf(p, sizeof(p), "%s/via", d);
		ASSERT_EQ(symlink("open/sub", p), 0);
		EXPECT_EQ(tf_read(d, "via/tok", (uid_t)-1, 077, buf, sizeof(buf), &len, &info), 0);
		ASSERT_EQ(lchown(p, 4242, 4242), 0);
		EXPECT_EQ(tf_read(d, "via/tok", (uid_t)-1, 077, buf, sizeof(buf), &len, &info),
			  -EPERM);
		EXPECT_STREQ(info.why, "is reached through a symbolic link that is not root's");
		EXPECT_STREQ(info.dir, p);
	}
	ASSERT_EQ(chmod(d, 0700), 0);
	/* A relative name is judged from the working directory's own name. */
	{
		char cwd[512];
		const struct token_file_rule rel = {.also_owner = me, .forbidden = 077};

		ASSERT_NE(getcwd(cwd, sizeof(cwd)), NULL);
		ASSERT_EQ(chdir(d), 0);
		EXPECT_EQ(token_file_read("open/sub/tok", &rel, buf, sizeof(buf), &len, &info), 0);
		EXPECT_EQ(token_file_read("./ok", &rel, buf, sizeof(buf), &len, &info), 0);
		ASSERT_EQ(chmod(".", 0777), 0);
		EXPECT_EQ(token_file_read("ok", &rel, buf, sizeof(buf), &len, &info), -EPERM);
		ASSERT_EQ(chmod(".", 0700), 0);
		ASSERT_EQ(chdir(cwd), 0);
	}
	snprintf(p, sizeof(p), "%s/link", d);
	if (me == 0 && lchown(p, 4242, 4242) == 0) {
		EXPECT_EQ(tf_read(d, "link", (uid_t)-1, 077, buf, sizeof(buf), &len, &info),
			  -ELOOP);
		EXPECT_STREQ(
			info.why,
			"is a symbolic link that is not root's, or in a directory that is not");
	}

	/* A FIFO with no writer: refused at once, never waited on (the test's timeout). */
	snprintf(p, sizeof(p), "%s/fifo", d);
	ASSERT_EQ(mkfifo(p, 0600), 0);
	EXPECT_EQ(tf_read(d, "fifo", me, 077, buf, sizeof(buf), &len, &info), -EPERM);
	EXPECT_STREQ(info.why, "is not a regular file");
	EXPECT_EQ(tf_read(d, ".", me, 077, buf, sizeof(buf), &len, &info), -EPERM);

	/* Contents: a NUL, a control byte, a space, nothing at all. */
	put(d, "nul", "abc\0def\n", 8, 0600);
	EXPECT_EQ(tf_read(d, "nul", me, 077, buf, sizeof(buf), &len, &info), -EINVAL);
	EXPECT_STREQ(info.why, "holds a NUL byte");
	EXPECT_TRUE(all_zero(buf, sizeof(buf)));
	put(d, "ctl", "abc\tdef", 7, 0600);
	EXPECT_EQ(tf_read(d, "ctl", me, 077, buf, sizeof(buf), &len, &info), -EINVAL);
	EXPECT_STREQ(info.why, "holds a control or non-ASCII byte");
	put(d, "lf", "abc\ndef\n", 8, 0600);
	EXPECT_EQ(tf_read(d, "lf", me, 077, buf, sizeof(buf), &len, &info), -EINVAL);
	put(d, "high", "abc\xc3\xa9", 5, 0600);
	EXPECT_EQ(tf_read(d, "high", me, 077, buf, sizeof(buf), &len, &info), -EINVAL);
	put(d, "sp", "abc def", 7, 0600);
	EXPECT_EQ(tf_read(d, "sp", me, 077, buf, sizeof(buf), &len, &info), -EINVAL);
	EXPECT_STREQ(info.why, "holds a space");
	put(d, "empty", "\r\n", 2, 0600);
	EXPECT_EQ(tf_read(d, "empty", me, 077, buf, sizeof(buf), &len, &info), -EINVAL);
	EXPECT_STREQ(info.why, "is empty");

	/* Mode: group-readable refused where the caller forbids it, read where it does not. */
	put(d, "grp", "token\n", 6, 0640);
	EXPECT_EQ(tf_read(d, "grp", me, 077, buf, sizeof(buf), &len, &info), -EPERM);
	EXPECT_STREQ(info.why, "can be accessed by group or others");
	EXPECT_EQ(info.mode, 0640u);
	EXPECT_EQ(tf_read(d, "grp", me, 0, buf, sizeof(buf), &len, &info), 0);
	EXPECT_STREQ(buf, "token");

	/* Owner: root's always; another uid's only where the caller names it. */
	if (me == 0) {
		snprintf(p, sizeof(p), "%s/ok", d);
		EXPECT_EQ(tf_read(d, "ok", (uid_t)-1, 077, buf, sizeof(buf), &len, &info), 0);
		ASSERT_EQ(chown(p, 12345, 0), 0);
		EXPECT_EQ(tf_read(d, "ok", (uid_t)-1, 077, buf, sizeof(buf), &len, &info), -EPERM);
		EXPECT_STREQ(info.why, "is not owned by root");
		EXPECT_EQ(info.uid, 12345u);
		EXPECT_EQ(tf_read(d, "ok", 4242, 077, buf, sizeof(buf), &len, &info), -EPERM);
		EXPECT_STREQ(info.why, "is owned by someone else");
		EXPECT_EQ(tf_read(d, "ok", 12345, 077, buf, sizeof(buf), &len, &info), 0);
	}
	snprintf(p, sizeof(p), "rm -rf '%s'", d);
	EXPECT_EQ(system(p), 0);
}

/* The one walker (lib/trust-path.c) of the token files and of pistisd serve's CA bundle and
 * relay socket, in a mount namespace of this test's own with a root-only tmpfs on /tmp (so
 * the daemon's rule, which believes no sticky directory, can hold from /). */
static void tw_mkdir(const char *p, mode_t mode, uid_t uid)
{
	if (mkdir(p, 0700) < 0 || chown(p, uid, uid) < 0 || chmod(p, mode) < 0)
		abort();
}

static void tw_link(const char *target, const char *p, uid_t uid)
{
	if (symlink(target, p) < 0 || lchown(p, uid, uid) < 0)
		abort();
}

static void tw_put(const char *p, const char *data, mode_t mode, uid_t uid)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0 || loop_write(fd, data, strlen(data)) < 0 || fchown(fd, uid, uid) < 0 ||
	    fchmod(fd, mode) < 0)
		abort();
	close(fd);
}

static int tw_token(const char *p, uid_t also, struct token_file_info *info)
{
	const struct token_file_rule rule = {.also_owner = also, .forbidden = 077};
	char buf[64];
	size_t len = 0;

	return token_file_read(p, &rule, buf, sizeof(buf), &len, info);
}

static int tw_check(const char *p, enum trust_leaf leaf, char *why, size_t size)
{
	return trust_path_check(p, leaf, "the CA bundle", why, size);
}

static void tw_setup(struct tap_metadata *_metadata)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int s;

	if (geteuid() != 0)
		SKIP("needs root (a mount namespace; owners)");
	ASSERT_EQ(stat("/", &st), 0);
	if (st.st_uid != 0 || (st.st_mode & 022))
		SKIP("/ itself is not root's alone here");
	ASSERT_EQ(unshare(CLONE_NEWNS), 0);
	ASSERT_EQ(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ASSERT_EQ(mount("tw", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"), 0);
	/* open: a directory anyone may write (not sticky); safe: root's alone, holding
	 * root's links into open (absolute, relative, and in the leaf's place). */
	tw_mkdir("/tmp/open", 0777, 0);
	tw_mkdir("/tmp/open/dir", 0755, 0);
	tw_put("/tmp/open/dir/tok", "token-0123456789\n", 0600, 0);
	tw_put("/tmp/open/dir/ca.pem", "ca\n", 0644, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/open/dir/relay.sock");
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_GE(s, 0);
	ASSERT_EQ(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	tw_mkdir("/tmp/safe", 0755, 0);
	tw_link("/tmp/open/dir", "/tmp/safe/abs", 0);
	tw_link("../open/dir", "/tmp/safe/rel", 0);
	tw_link("/tmp/open/dir/ca.pem", "/tmp/safe/ca.pem", 0);
	tw_link("/tmp/open/dir/relay.sock", "/tmp/safe/relay.sock", 0);
	/* A Kubernetes Secret's shape whose link reaches the file through a directory
	 * anyone may write, beneath its own. */
	tw_mkdir("/tmp/k8s", 0755, 0);
	tw_mkdir("/tmp/k8s/w", 0777, 0);
	tw_put("/tmp/k8s/w/tok", "token-0123456789\n", 0600, 0);
	tw_link("w/tok", "/tmp/k8s/token", 0);
}

TEST(trust_walk_judges_every_directory_of_a_links_target)
{
	struct token_file_info info;
	char why[PATH_MAX + 200];

	tw_setup(_metadata);
	/* A root's link in a root's directory is no reason to believe where it leads. */
	EXPECT_EQ(tw_token("/tmp/safe/abs/tok", (uid_t)-1, &info), -EPERM);
	EXPECT_STREQ(info.why, "is in a directory that someone besides root may change");
	EXPECT_STREQ(info.dir, "/tmp/open");
	EXPECT_EQ(tw_token("/tmp/safe/rel/tok", (uid_t)-1, &info), -EPERM);
	EXPECT_STREQ(info.dir, "/tmp/open");
	EXPECT_EQ(tw_token("/tmp/safe/../open/dir/tok", (uid_t)-1, &info), -EPERM);
	EXPECT_STREQ(info.dir, "/tmp/open");
	EXPECT_EQ(tw_token("/tmp/k8s/token", (uid_t)-1, &info), -EPERM);
	EXPECT_STREQ(info.dir, "/tmp/k8s/w");
	EXPECT_EQ(tw_check("/tmp/safe/abs/ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), -EPERM);
	EXPECT_STREQ(why, "/tmp/open is owned by 0:0 with mode 0777: a directory on the way to "
			  "the CA bundle must be root's and writable by no one else");
	EXPECT_EQ(tw_check("/tmp/safe/rel/ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), -EPERM);
	EXPECT_EQ(tw_check("/tmp/safe/ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), -EPERM);
	EXPECT_EQ(tw_check("/tmp/safe/relay.sock", TRUST_LEAF_SOCKET, why, sizeof(why)), -EPERM);
	EXPECT_EQ(tw_check("/tmp/safe/abs/later.sock", TRUST_LEAF_SOCKET, why, sizeof(why)),
		  -EPERM);
	EXPECT_EQ(tw_check("/tmp/safe/abs/no/such/later.sock", TRUST_LEAF_SOCKET, why, sizeof(why)),
		  -EPERM);
	/* A relative name: the working directory's ancestors are on the way too. */
	ASSERT_EQ(chdir("/tmp/open/dir"), 0);
	EXPECT_EQ(tw_token("tok", (uid_t)-1, &info), -EPERM);
	EXPECT_STREQ(info.dir, "/tmp/open");
	EXPECT_EQ(tw_check("ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), -EPERM);
	EXPECT_EQ(tw_check("./relay.sock", TRUST_LEAF_SOCKET, why, sizeof(why)), -EPERM);
	ASSERT_EQ(chdir("/"), 0);

	/* The same chains once every directory on them is root's alone. */
	ASSERT_EQ(chmod("/tmp/open", 0755), 0);
	ASSERT_EQ(chmod("/tmp/k8s/w", 0755), 0);
	EXPECT_EQ(tw_token("/tmp/safe/abs/tok", (uid_t)-1, &info), 0);
	EXPECT_EQ(tw_token("/tmp/safe/rel/tok", (uid_t)-1, &info), 0);
	EXPECT_EQ(tw_token("/tmp/safe/../open/dir/tok", (uid_t)-1, &info), 0);
	EXPECT_EQ(tw_token("/tmp/k8s/token", (uid_t)-1, &info), 0);
	/* A directory missing on the way is just that (it said "is in a directory that
	 * someone besides root may change"). */
	EXPECT_EQ(tw_token("/tmp/safe/abs/nodir/tok", (uid_t)-1, &info), -ENOENT);
	EXPECT_NULL(info.why);
	EXPECT_EQ(tw_check("/tmp/safe/abs/ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), 0);
	EXPECT_STREQ(why, "");
	EXPECT_EQ(tw_check("/tmp/safe/rel/ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), 0);
	EXPECT_EQ(tw_check("/tmp/safe/ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), 0);
	EXPECT_EQ(tw_check("/tmp/safe/relay.sock", TRUST_LEAF_SOCKET, why, sizeof(why)), 0);
	EXPECT_EQ(tw_check("/tmp/safe/abs/no/such/later.sock", TRUST_LEAF_SOCKET, why, sizeof(why)),
		  0);
	ASSERT_EQ(chdir("/tmp/open/dir"), 0);
	EXPECT_EQ(tw_token("tok", (uid_t)-1, &info), 0);
	EXPECT_EQ(tw_check("ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), 0);
	ASSERT_EQ(chdir("/"), 0);

	/* Sticky (/tmp's way): enough for a token file, whose owner is checked; not for
	 * the daemon's paths (a socket's owner is not). */
	ASSERT_EQ(chmod("/tmp/open", 01777), 0);
	EXPECT_EQ(tw_token("/tmp/safe/abs/tok", (uid_t)-1, &info), 0);
	EXPECT_EQ(tw_check("/tmp/safe/abs/ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), -EPERM);
	EXPECT_EQ(tw_check("/tmp/safe/relay.sock", TRUST_LEAF_SOCKET, why, sizeof(why)), -EPERM);
}

TEST(trust_walk_read_only_mount_and_callers_own)
{
	struct token_file_info info;

	tw_setup(_metadata);
	/* A read-only mount (a Secret volume, group-writable for an fsGroup), reached
	 * through a root's link: believed for a token file; writable, not. */
	tw_mkdir("/tmp/ro", 0755, 0);
	ASSERT_EQ(mount("ro", "/tmp/ro", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0775"), 0);
	tw_put("/tmp/ro/tok", "token-0123456789\n", 0400, 0);
	tw_link("/tmp/ro", "/tmp/safe/ro", 0);
	EXPECT_EQ(tw_token("/tmp/safe/ro/tok", (uid_t)-1, &info), -EPERM);
	EXPECT_STREQ(info.dir, "/tmp/ro");
	ASSERT_EQ(mount(NULL, "/tmp/ro", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
			"mode=0775"),
		  0);
	EXPECT_EQ(tw_token("/tmp/safe/ro/tok", (uid_t)-1, &info), 0);
	EXPECT_EQ(tw_token("/tmp/ro/tok", (uid_t)-1, &info), 0);

	/* pistis: the caller's own directories and links count as root's, no one else's. */
	tw_mkdir("/tmp/u", 0700, 4242);
	tw_put("/tmp/u/tok", "token-0123456789\n", 0600, 4242);
	tw_link("/tmp/u", "/tmp/safe/u", 4242);
	EXPECT_EQ(tw_token("/tmp/safe/u/tok", 4242, &info), 0);
	EXPECT_EQ(tw_token("/tmp/safe/u/tok", (uid_t)-1, &info), -EPERM);
	EXPECT_STREQ(info.why, "is reached through a symbolic link that is not root's");
	EXPECT_STREQ(info.dir, "/tmp/safe/u");
	tw_mkdir("/tmp/other", 0755, 5555);
	tw_mkdir("/tmp/other/d", 0755, 4242);
	tw_put("/tmp/other/d/tok", "token-0123456789\n", 0600, 4242);
	tw_link("/tmp/other/d", "/tmp/u/via", 4242);
	EXPECT_EQ(tw_token("/tmp/u/via/tok", 4242, &info), -EPERM);
	EXPECT_STREQ(info.dir, "/tmp/other");
}

/* trust_file_open: the file itself. A device or FIFO is refused without being opened
 * (a FIFO's open would wait for a writer), a file of the caller's is believed only under
 * also_owner, and group root's write only under TRUST_ROOT_GROUP without an ACL. */
TEST(trust_file_open_judges_the_file)
{
	const struct trust_rule strict = {.also_owner = (uid_t)-1, .flags = 0};
	const struct trust_rule mine = {.also_owner = 4242, .flags = TRUST_STICKY};
	const struct trust_rule group = {.also_owner = (uid_t)-1, .flags = TRUST_ROOT_GROUP};
	char why[PATH_MAX + 300];
	int fd;

	tw_setup(_metadata);
	ASSERT_EQ(mkfifo("/tmp/safe/fifo", 0644), 0);
	EXPECT_EQ(trust_file_open("/tmp/safe/fifo", &strict, "the config", why, sizeof(why)),
		  -EINVAL);
	EXPECT_STREQ(why, "/tmp/safe/fifo: is not a regular file");
	ASSERT_EQ(mknod("/tmp/safe/null", S_IFCHR | 0644, makedev(1, 3)), 0);
	EXPECT_EQ(trust_file_open("/tmp/safe/null", &strict, "the config", why, sizeof(why)),
		  -EINVAL);
	EXPECT_EQ(trust_file_open("/tmp/safe", &strict, "the config", why, sizeof(why)), -EINVAL);
	tw_put("/tmp/safe/mine", "x\n", 0644, 4242);
	EXPECT_EQ(trust_file_open("/tmp/safe/mine", &strict, "the config", why, sizeof(why)),
		  -EPERM);
	EXPECT_STREQ(why, "/tmp/safe/mine is owned by 4242:4242 with mode 0644: the config must be "
			  "root's and writable by no one else");
	fd = trust_file_open("/tmp/safe/mine", &mine, "the config", why, sizeof(why));
	EXPECT_GE(fd, 0);
	if (fd >= 0)
		close(fd);
	tw_put("/tmp/safe/grp", "x\n", 0664, 0);
	EXPECT_EQ(trust_file_open("/tmp/safe/grp", &strict, "the config", why, sizeof(why)),
		  -EPERM);
	fd = trust_file_open("/tmp/safe/grp", &group, "the config", why, sizeof(why));
	EXPECT_GE(fd, 0);
	if (fd >= 0)
		close(fd);
	/* "f/" names a directory only: a file or a FIFO named so is not opened (ENOTDIR, as
	 * the kernel says; `pistis --ca f/` and the token files take this walk) */
	EXPECT_EQ(trust_file_open("/tmp/safe/grp/", &group, "the config", why, sizeof(why)),
		  -ENOTDIR);
	EXPECT_EQ(trust_file_open("/tmp/safe/fifo/", &strict, "the config", why, sizeof(why)),
		  -ENOTDIR);
	/* The caller's own directory, sticky or not, is no one else's to change. */
	tw_mkdir("/tmp/u", 01777, 4242);
	tw_put("/tmp/u/f", "x\n", 0600, 4242);
	fd = trust_file_open("/tmp/u/f", &mine, "the config", why, sizeof(why));
	EXPECT_GE(fd, 0);
	if (fd >= 0)
		close(fd);
	EXPECT_EQ(trust_file_open("/tmp/u/f", &strict, "the config", why, sizeof(why)), -EPERM);
	EXPECT_STREQ(why,
		     "/tmp/u is owned by 4242:4242 with mode 1777: a directory on the way to the "
		     "config must be root's and writable by no one else");
}

TEST(trust_walk_link_loops_end)
{
	struct token_file_info info;
	char why[PATH_MAX + 200];

	tw_setup(_metadata);
	tw_link("lb", "/tmp/safe/la", 0);
	tw_link("la", "/tmp/safe/lb", 0);
	tw_link("self.pem", "/tmp/safe/self.pem", 0);
	EXPECT_EQ(tw_token("/tmp/safe/la/tok", (uid_t)-1, &info), -ELOOP);
	EXPECT_STREQ(info.why, "is reached through more than 40 symbolic links (a loop?)");
	EXPECT_EQ(tw_check("/tmp/safe/la/ca.pem", TRUST_LEAF_FILE, why, sizeof(why)), -ELOOP);
	EXPECT_STREQ(why, "/tmp/safe/la/ca.pem: more than 40 symbolic links on the way (a loop?)");
	EXPECT_EQ(tw_check("/tmp/safe/self.pem", TRUST_LEAF_FILE, why, sizeof(why)), -ELOOP);
	EXPECT_EQ(tw_check("/tmp/safe/la/x.sock", TRUST_LEAF_SOCKET, why, sizeof(why)), -ELOOP);
	/* A Secret's link whose way loops; one ending in itself is a link ending in one. */
	tw_link("x/tok", "/tmp/k8s/loop", 0);
	tw_link("y", "/tmp/k8s/x", 0);
	tw_link("x", "/tmp/k8s/y", 0);
	EXPECT_EQ(tw_token("/tmp/k8s/loop", (uid_t)-1, &info), -ELOOP);
	EXPECT_STREQ(info.why, "is reached through more than 40 symbolic links (a loop?)");
	tw_link("self", "/tmp/k8s/self", 0);
	EXPECT_EQ(tw_token("/tmp/k8s/self", (uid_t)-1, &info), -ELOOP);
	EXPECT_STREQ(info.why, "is a symbolic link that leaves its directory or ends in another");
}

/* The reference implementation's vectors (key 00..0f, message 00 01 02 ... of each length):
 * empty, inside the first word, at and around the word boundaries, the longest. */
TEST(siphash24_reference_vectors)
{
	static const struct {
		size_t len;
		uint64_t want;
	} v[] = {
		{0, UINT64_C(0x726fdb47dd0e0e31)},  {1, UINT64_C(0x74f839c593dc67fd)},
		{7, UINT64_C(0xab0200f58b01d137)},  {8, UINT64_C(0x93f5f5799a932462)},
		{9, UINT64_C(0x9e0082df0ba9e4b0)},  {15, UINT64_C(0xa129ca6149be45e5)},
		{16, UINT64_C(0x3f2acc7f57c29bdb)}, {63, UINT64_C(0x958a324ceb064572)},
	};
	uint8_t key[SIPHASH_KEY_SIZE], msg[64];

	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)i;
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)i;
	for (size_t i = 0; i < ELEMENTSOF(v); i++)
		ASSERT_EQ(siphash24(key, msg, v[i].len), v[i].want);
	key[15] ^= 1; /* another key, another hash */
	ASSERT_NE(siphash24(key, msg, 15), UINT64_C(0xa129ca6149be45e5));
}

TEST(proc_status_hex_lines)
{
	static const char buf[] = "Name:\tx\nxSigIgn:\tffff\nSigIgn:\t0000000000001000\n"
				  "SigCgt:\t00000000000000000\nCapBnd:\t\nCapEff:\t00g0\n"
				  "CapPrm:\t000001ffffffffff";
	uint64_t v = 1;

	ASSERT_EQ(proc_status_hex(buf, "SigIgn", &v), 0); /* not the "xSigIgn" line */
	EXPECT_EQ(v, (uint64_t)0x1000);
	EXPECT_EQ(proc_status_hex(buf, "SigCgt", &v), -EINVAL); /* 17 digits */
	EXPECT_EQ(proc_status_hex(buf, "CapBnd", &v), -EINVAL); /* empty */
	EXPECT_EQ(proc_status_hex(buf, "CapEff", &v), -EINVAL); /* not hex */
	ASSERT_EQ(proc_status_hex(buf, "CapPrm", &v), 0);	/* the last line, no newline */
	EXPECT_EQ(v, (uint64_t)0x1ffffffffffULL);
	EXPECT_EQ(proc_status_hex(buf, "Sig", &v), -ENOENT); /* a prefix is no key */
	EXPECT_EQ(proc_status_hex(buf, "CapAmb", &v), -ENOENT);
}

TEST(proc_status_read_whole_file)
{
	char buf[4096], small[16];
	uint64_t v;

	ASSERT_GT(proc_status_read(buf, sizeof(buf)), 0);
	EXPECT_TRUE(strncmp(buf, "Name:\t", 6) == 0);
	EXPECT_EQ(proc_status_hex(buf, "SigBlk", &v), 0);
	EXPECT_EQ(proc_status_read(small, sizeof(small)), -EFBIG); /* never a cut file */
}

static void on_usr2(int sig)
{
	(void)sig;
}

/* Ignored and caught signals, the libc-reserved real-time ones included (raw numbers),
 * go back to SIG_DFL; the fallback (no /proc) does the same. */
static void check_reset(struct tap_metadata *_metadata, bool hide_proc)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned long mask;
	} ks = {.handler = (void *)SIG_IGN}, got;

	ASSERT_NE(signal(SIGUSR1, SIG_IGN), SIG_ERR);
	ASSERT_NE(signal(SIGUSR2, on_usr2), SIG_ERR);
	ASSERT_NE(signal(SIGPIPE, SIG_IGN), SIG_ERR);
	ASSERT_EQ(syscall(SYS_rt_sigaction, 33, &ks, NULL, 8), 0);
	if (hide_proc) {
		ASSERT_EQ(unshare(CLONE_NEWNS), 0);
		ASSERT_EQ(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
		ASSERT_EQ(mount("none", "/proc", "tmpfs", 0, "size=4k"), 0);
		char buf[64];
		EXPECT_LT(proc_status_read(buf, sizeof(buf)), 0);
	}
	ASSERT_EQ(sigutil_reset_dispositions(), 0);
	for (int sig = 1; sig < 65; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (syscall(SYS_rt_sigaction, sig, NULL, &got, 8) < 0)
			continue;
		EXPECT_EQ((long)(intptr_t)got.handler, (long)(intptr_t)SIG_DFL);
	}
}

TEST(sigutil_resets_ignored_and_caught)
{
	check_reset(_metadata, false);
}

TEST(sigutil_resets_without_proc)
{
	if (geteuid() != 0)
		SKIP("needs root (a mount namespace hiding /proc)");
	check_reset(_metadata, true);
}

/* Only ACLs that were there count as removed: Linux 6.2 and later answer the removal of an
 * absent one with success, and pistisd-entry logged "had an ACL; removed" on every start. */
TEST(fd_remove_acls_counts_only_what_was_there)
{
	char dir[] = "/tmp/pistis-acl-XXXXXX";
	/* user::rwx, group::r-x, group:12345:rwx, mask::rwx, other::--- (ACL xattr v2) */
	static const unsigned char acl[] = {
		2, 0,	 0,    0,    1,	   0,	 7,    0, 0xff, 0xff, 0xff, 0xff, 4,	0,    5,
		0, 0xff, 0xff, 0xff, 0xff, 8,	 0,    7, 0,	0x39, 0x30, 0,	  0,	0x10, 0,
		7, 0,	 0xff, 0xff, 0xff, 0xff, 0x20, 0, 0,	0,    0xff, 0xff, 0xff, 0xff};
	unsigned removed = 99;
	int fd;

	ASSERT_NOT_NULL(mkdtemp(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(fd_remove_acls(fd, &removed), 0);
	EXPECT_EQ(removed, 0u);
	if (fsetxattr(fd, "system.posix_acl_default", acl, sizeof(acl), 0) == 0) {
		EXPECT_EQ(fd_remove_acls(fd, &removed), 0);
		EXPECT_EQ(removed, 1u << 1);
		EXPECT_TRUE(fd_has_acl(fd) == NULL);
	}
	close(fd);
	rmdir(dir);
}

/* A TCP listener on address (AF_INET or AF_INET6 loopback), made by a child that has
 * become uid (or stays root for 0) and waits on hold until the parent is done; the
 * parent's connected socket is returned (-1 when the family is not there). */
static int connect_to_listener_of(uid_t uid, int family, bool defer, pid_t *ret_child, int hold[2])
{
	int port_pipe[2], fd;
	in_port_t port = 0;
	pid_t pid;

	if (pipe2(port_pipe, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		struct sockaddr_storage ss = {.ss_family = (sa_family_t)family};
		socklen_t l = family == AF_INET ? sizeof(struct sockaddr_in)
						: sizeof(struct sockaddr_in6);
		char c;
		int s;

		if (family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else
			((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
		if (uid && (syscall(SYS_setresgid, uid, uid, uid) < 0 ||
			    syscall(SYS_setresuid, uid, uid, uid) < 0))
			_exit(1);
		s = socket(family, SOCK_STREAM, 0);
		/* TCP_DEFER_ACCEPT: the final ACK is dropped until data comes, so the
		 * connection stays a request socket, which the kernel reports as uid 0 */
		if (s < 0 || bind(s, (struct sockaddr *)&ss, l) < 0 ||
		    (defer &&
		     setsockopt(s, IPPROTO_TCP, TCP_DEFER_ACCEPT, &(int){30}, sizeof(int)) < 0) ||
		    listen(s, 4) < 0 || getsockname(s, (struct sockaddr *)&ss, &l) < 0)
			_exit(2);
		port = family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					 : ((struct sockaddr_in6 *)&ss)->sin6_port;
		if (write(port_pipe[1], &port, sizeof(port)) != sizeof(port))
			_exit(3);
		close(hold[1]);
		(void)!read(hold[0], &c, 1);
		_exit(0);
	}
	close(port_pipe[1]);
	close(hold[0]);
	*ret_child = pid;
	if (pid < 0 || read(port_pipe[0], &port, sizeof(port)) != sizeof(port)) {
		close(port_pipe[0]);
		return -1;
	}
	close(port_pipe[0]);
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_storage ss = {.ss_family = (sa_family_t)family};
		socklen_t l = family == AF_INET ? sizeof(struct sockaddr_in)
						: sizeof(struct sockaddr_in6);
		if (family == AF_INET) {
			((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			((struct sockaddr_in *)&ss)->sin_port = port;
		} else {
			((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
			((struct sockaddr_in6 *)&ss)->sin6_port = port;
		}
		if (fd >= 0 && connect(fd, (struct sockaddr *)&ss, l) < 0) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

static void end_listener(pid_t pid, int hold[2])
{
	close(hold[1]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* The bound holds for every max, a one-digit one too (max - digit wrapped below zero, so
 * "9" passed a bound of 8 and "--threads 9" was taken). */
TEST(parse_uint_strict_bounds)
{
	uint64_t v = 77;

	EXPECT_EQ(parse_uint_strict("8", 8, NULL, &v), 0);
	EXPECT_EQ(v, 8u);
	EXPECT_EQ(parse_uint_strict("9", 8, NULL, &v), -ERANGE);
	EXPECT_EQ(parse_uint_strict("1", 0, NULL, &v), -ERANGE);
	EXPECT_EQ(parse_uint_strict("0", 0, NULL, &v), 0);
	EXPECT_EQ(parse_uint_strict("65", 64, NULL, &v), -ERANGE);
	EXPECT_EQ(parse_uint_strict("64", 64, NULL, &v), 0);
	EXPECT_EQ(parse_uint_strict("18446744073709551615", UINT64_MAX, NULL, &v), 0);
	EXPECT_EQ(v, UINT64_MAX);
	EXPECT_EQ(parse_uint_strict("18446744073709551616", UINT64_MAX, NULL, &v), -ERANGE);
	for (uint64_t max = 0; max < 200; max++)
		for (unsigned n = 0; n < 300; n++) {
			char b[8];
			snprintf(b, sizeof(b), "%u", n);
			EXPECT_EQ(parse_uint_strict(b, max, NULL, &v), n <= max ? 0 : -ERANGE);
		}
	EXPECT_EQ(parse_uint_strict(" 5", 8, NULL, &v), -EINVAL);
	EXPECT_EQ(parse_uint_strict("5x", 8, NULL, &v), -EINVAL);
}

/* Sizes as pistisd serve --memory-max and pistisd run take them: one suffix, powers of
 * 1024, nothing around, min and max both ends included, no wrap in the multiplication. */
TEST(parse_size_strict_suffixes_and_bounds)
{
	uint64_t v = 77;

	EXPECT_EQ(parse_size_strict("1M", 1ull << 20, 1ull << 50, &v), 0);
	EXPECT_EQ(v, 1ull << 20);
	EXPECT_EQ(parse_size_strict("1048576", 1ull << 20, 1ull << 50, &v), 0);
	EXPECT_EQ(parse_size_strict("1048575", 1ull << 20, 1ull << 50, &v), -ERANGE);
	EXPECT_EQ(parse_size_strict("1023K", 1ull << 20, 1ull << 50, &v), -ERANGE);
	EXPECT_EQ(parse_size_strict("2k", 0, UINT64_MAX, &v), 0);
	EXPECT_EQ(v, 2048u);
	EXPECT_EQ(parse_size_strict("3G", 0, UINT64_MAX, &v), 0);
	EXPECT_EQ(v, 3ull << 30);
	EXPECT_EQ(parse_size_strict("1024T", 0, 1ull << 50, &v), 0);
	EXPECT_EQ(v, 1ull << 50);
	EXPECT_EQ(parse_size_strict("1025T", 0, 1ull << 50, &v), -ERANGE);
	/* 2^64 / 2^40 + 1: the product would wrap to a small number */
	EXPECT_EQ(parse_size_strict("16777217T", 0, UINT64_MAX, &v), -ERANGE);
	EXPECT_EQ(parse_size_strict("18446744073709551615", 0, UINT64_MAX, &v), 0);
	EXPECT_EQ(v, UINT64_MAX);
	EXPECT_EQ(parse_size_strict("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	static const char *const bad[] = {"",	"M",  "1MB",  "1m",   "1 M", " 1",
					  "-1", "+1", "1.5G", "0x10", "1KK", "1P"};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		EXPECT_EQ(parse_size_strict(bad[i], 0, UINT64_MAX, &v), -EINVAL);
	EXPECT_EQ(parse_size_strict(NULL, 0, UINT64_MAX, &v), -EINVAL);
}

static bool bar_10400(uid_t uid)
{
	return uid == 10400;
}

static bool bar_none(uid_t uid)
{
	(void)uid;
	return false;
}

/* The owner of the listener behind a loopback connection, found by its four-tuple: root's
 * and an agent uid's, over IPv4 and IPv6 (the accepted socket keeps its listener's uid,
 * accepted or not). */
TEST(sock_tcp_peer_names_the_listeners_owner)
{
	static const uid_t uids[] = {0, 10400};
	static const int families[] = {AF_INET, AF_INET6};

	if (geteuid() != 0)
		SKIP("needs root (a listener of another uid)");
	for (int defer = 0; defer < 2; defer++)
		for (size_t f = 0; f < ELEMENTSOF(families); f++)
			for (size_t u = 0; u < ELEMENTSOF(uids); u++) {
				enum sock_peer kind = SOCK_PEER_UNKNOWN;
				uid_t owner = (uid_t)-1;
				int hold[2], err = 0, fd;
				pid_t pid = -1;

				fd = connect_to_listener_of(uids[u], families[f], defer, &pid,
							    hold);
				if (fd < 0 && families[f] == AF_INET6) {
					end_listener(pid, hold);
					continue; /* no ::1 here */
				}
				ASSERT_GE(fd, 0);
				EXPECT_EQ(sock_tcp_peer(fd, &kind, &owner, &err), 0);
				EXPECT_EQ((int)kind, (int)SOCK_PEER_LOCAL);
				EXPECT_EQ(owner, uids[u]);
				EXPECT_EQ(err, 0);
				EXPECT_TRUE(sock_peer_is_local(fd));
				EXPECT_EQ((int)sock_tcp_peer_verdict(fd, bar_10400, &owner, &err),
					  (int)(uids[u] == 10400 ? SOCK_REFUSED_OWNER
								 : SOCK_BELIEVED_LOCAL));
				EXPECT_EQ(owner, uids[u]);
				EXPECT_EQ((int)sock_tcp_peer_verdict(fd, bar_none, &owner, &err),
					  (int)SOCK_BELIEVED_LOCAL);
				close(fd);
				end_listener(pid, hold);
			}
}

/* A socket of another network namespace (handed over): our own lookup does not find it,
 * so the answer is "cannot tell", never "remote". Not a TCP socket: an error. */
TEST(sock_tcp_peer_unknown_and_bad_fds)
{
	enum sock_peer kind = SOCK_PEER_LOCAL;
	int sv[2], err = 0, hold[2];
	uid_t owner;
	pid_t pid = -1;

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	EXPECT_EQ(sock_tcp_peer(sv[0], &kind, &owner, &err), -EAFNOSUPPORT);
	EXPECT_EQ((int)sock_tcp_peer_verdict(sv[0], bar_none, &owner, &err),
		  (int)SOCK_REFUSED_NOT_TCP);
	EXPECT_EQ(err, -EAFNOSUPPORT);
	EXPECT_EQ((int)sock_tcp_peer_verdict(-1, bar_none, &owner, &err),
		  (int)SOCK_REFUSED_NOT_TCP);
	EXPECT_EQ(err, -EBADF);
	EXPECT_TRUE(sock_peer_is_local(sv[0])); /* cannot tell: local, refused */
	if (geteuid() != 0) {
		close(sv[0]);
		close(sv[1]);
		SKIP("needs root (a network namespace)");
	}
	pid = fork();
	if (pid == 0) {
		/* A new network namespace with lo up; a connection there, its fd sent back. */
		struct {
			struct cmsghdr h;
			int fd;
		} c = {.h = {.cmsg_len = CMSG_LEN(sizeof(int)),
			     .cmsg_level = SOL_SOCKET,
			     .cmsg_type = SCM_RIGHTS}};
		char b = 0;
		struct iovec iov = {&b, 1};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = &c,
				   .msg_controllen = CMSG_SPACE(sizeof(int))};
		pid_t lp;
		int fd;

		if (unshare(CLONE_NEWNET) < 0 || system("ip link set lo up") != 0)
			_exit(1);
		fd = connect_to_listener_of(0, AF_INET, false, &lp, hold);
		if (fd < 0)
			_exit(2);
		c.fd = fd;
		if (sendmsg(sv[1], &m, 0) < 0)
			_exit(3);
		(void)!read(sv[1], &b, 1);
		end_listener(lp, hold);
		_exit(0);
	}
	ASSERT_GT(pid, 0);
	{
		struct {
			struct cmsghdr h;
			int fd;
		} c;
		char b;
		struct iovec iov = {&b, 1};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = &c,
				   .msg_controllen = sizeof(c)};
		int fd;

		ASSERT_EQ(recvmsg(sv[0], &m, 0), 1);
		fd = c.fd;
		EXPECT_EQ(sock_tcp_peer(fd, &kind, &owner, &err), 0);
		EXPECT_EQ((int)kind, (int)SOCK_PEER_UNKNOWN);
		EXPECT_EQ(err, -ENOENT);
		/* a loopback address where the lookups cannot tell: refused, never "elsewhere" */
		EXPECT_EQ((int)sock_tcp_peer_verdict(fd, bar_none, &owner, &err),
			  (int)SOCK_REFUSED_BLIND);
		EXPECT_EQ(err, -ENOENT);
		close(fd);
		EXPECT_EQ(write(sv[0], "x", 1), 1); /* the child may end */
	}
	close(sv[0]);
	close(sv[1]);
	waitpid(pid, NULL, 0);
}

/* no_proxy as curl reads it: libwebsockets reads none, so the clients decide themselves
 * (a relay the operator exempted went through the proxy, which saw its token). */
TEST(proxy_host_exempt_curl_syntax)
{
	EXPECT_TRUE(proxy_host_exempt("127.0.0.1", "localhost,127.0.0.1"));
	EXPECT_TRUE(proxy_host_exempt("127.0.0.1", " localhost , 127.0.0.1 "));
	EXPECT_TRUE(proxy_host_exempt("relay.example.com", "example.com"));
	EXPECT_TRUE(proxy_host_exempt("relay.example.com", ".example.com"));
	EXPECT_TRUE(proxy_host_exempt("relay.example.com", "*.example.com"));
	EXPECT_TRUE(proxy_host_exempt("Relay.Example.COM.", "example.com"));
	EXPECT_TRUE(proxy_host_exempt("relay.example.com", "relay.example.com:443"));
	EXPECT_TRUE(proxy_host_exempt("::1", "[::1]"));
	EXPECT_TRUE(proxy_host_exempt("::1", "::1"));
	EXPECT_TRUE(proxy_host_exempt("anything", "a,*"));
	EXPECT_FALSE(proxy_host_exempt("badexample.com", "example.com"));
	EXPECT_FALSE(proxy_host_exempt("example.com", "relay.example.com"));
	EXPECT_FALSE(proxy_host_exempt("127.0.0.1", "localhost"));
	EXPECT_FALSE(proxy_host_exempt("10.1.2.3", "10.0.0.0/8"));
	EXPECT_FALSE(proxy_host_exempt("relay", "*relay"));
	EXPECT_FALSE(proxy_host_exempt("relay", ""));
	EXPECT_FALSE(proxy_host_exempt("relay", NULL));
	EXPECT_FALSE(proxy_host_exempt("relay", ",, ,"));
}

TEST(proxy_host_loopback_names_and_addresses)
{
	EXPECT_TRUE(proxy_host_loopback("localhost"));
	EXPECT_TRUE(proxy_host_loopback("LocalHost."));
	EXPECT_TRUE(proxy_host_loopback("relay.localhost"));
	EXPECT_TRUE(proxy_host_loopback("127.0.0.1"));
	EXPECT_TRUE(proxy_host_loopback("127.255.1.2"));
	EXPECT_TRUE(proxy_host_loopback("::1"));
	EXPECT_FALSE(proxy_host_loopback("128.0.0.1"));
	EXPECT_FALSE(proxy_host_loopback("10.0.0.1"));
	EXPECT_FALSE(proxy_host_loopback("notlocalhost"));
	EXPECT_FALSE(proxy_host_loopback("localhost.example.com"));
	EXPECT_FALSE(proxy_host_loopback("127.0.0.1.example.com"));
}

TEST(proxy_env_settle_drops_http_proxy_only_for_exempt_hosts)
{
	unsetenv("http_proxy");
	setenv("no_proxy", "10.0.0.1", 1);
	EXPECT_EQ(proxy_env_settle("10.0.0.1"), 0);
	setenv("http_proxy", "http://proxy:3128", 1);
	EXPECT_EQ(proxy_env_settle("relay.example.com"), 2);
	EXPECT_STREQ(getenv("http_proxy"), "http://proxy:3128");
	EXPECT_EQ(proxy_env_settle("10.0.0.1"), 1);
	EXPECT_TRUE(getenv("http_proxy") == NULL);
	setenv("http_proxy", "http://proxy:3128", 1);
	unsetenv("no_proxy");
	EXPECT_EQ(proxy_env_settle("127.0.0.1"), 1); /* loopback: never through a proxy */
	EXPECT_TRUE(getenv("http_proxy") == NULL);
	setenv("http_proxy", "http://proxy:3128", 1);
	unsetenv("no_proxy");
	setenv("NO_PROXY", "example.com", 1);
	EXPECT_EQ(proxy_env_settle("relay.example.com"), 1);
	setenv("http_proxy", "http://proxy:3128", 1);
	EXPECT_EQ(proxy_env_settle(NULL), 1); /* a unix socket */
	EXPECT_TRUE(getenv("http_proxy") == NULL);
}

/* id_map_self and id_map_setgroups_denied answer the initial user namespace without a read
 * (its fixed inode): there its map and "allow"; in a namespace of our own the files are
 * read, so a map not written yet and a "deny" are seen, not taken for the host's (and in a
 * container's own, where the tests may run, the map its file holds). */
TEST(id_map_self_initial_or_read)
{
	const struct id_map *m = NULL;
	pid_t pid;
	int st;

	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int fd;

		if (unshare(CLONE_NEWUSER) < 0)
			_exit(2);
		fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "deny", 4) != 4)
			_exit(3);
		close(fd);
		if (host_ns_user_is_initial() != 0)
			_exit(4);
		if (id_map_self(false, &m) != 0 || m->n != 0 || id_map_self(true, &m) != 0 ||
		    m->n != 0)
			_exit(5);
		_exit(id_map_setgroups_denied() == 1 ? 0 : 6);
	}
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(WEXITSTATUS(st), 0);

	if (host_ns_user_is_initial() != 1) { /* a container's own namespace: read */
		static struct id_map want;
		char text[16384] = "";
		int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);

		ASSERT_GE(fd, 0);
		ASSERT_GE(read(fd, text, sizeof(text) - 1), 0);
		close(fd);
		ASSERT_EQ(id_map_parse(text, &want), 0);
		ASSERT_EQ(id_map_self(false, &m), 0);
		EXPECT_EQ(m->n, want.n);
		EXPECT_EQ(memcmp(m->e, want.e, want.n * sizeof(want.e[0])), 0);
		return;
	}
	ASSERT_EQ(id_map_self(false, &m), 0);
	EXPECT_TRUE(id_map_is_initial(m));
	ASSERT_EQ(id_map_self(true, &m), 0);
	EXPECT_TRUE(id_map_is_initial(m));
	EXPECT_EQ(id_map_setgroups_denied(), 0);
}

/* The kernel's padded layout, more than one extent, and what is refused. */
TEST(id_map_parse_and_cover)
{
	static struct id_map m;
	uint32_t a = 0, b = 0, o = 0;
	char buf[64];

	ASSERT_EQ(id_map_parse("         0     200000      65536\n", &m), 0);
	EXPECT_EQ(m.n, 1u);
	EXPECT_FALSE(id_map_is_initial(&m));
	EXPECT_TRUE(id_map_covers(&m, 10100, 59999));
	EXPECT_TRUE(id_map_outer(&m, 10100, &o));
	EXPECT_EQ(o, 210100u);
	EXPECT_FALSE(id_map_outer(&m, 65536, &o));
	EXPECT_FALSE(id_map_covers(&m, 65535, 65536));

	/* rootless Docker: root to the user, the rest from its subordinate range */
	ASSERT_EQ(id_map_parse("0 1000 1\n1 100000 10000\n", &m), 0);
	EXPECT_EQ(m.n, 2u);
	EXPECT_TRUE(id_map_covers(&m, 0, 10000));
	EXPECT_FALSE(id_map_covers(&m, 10002, 10002) && id_map_covers(&m, 10100, 59999));
	EXPECT_TRUE(id_map_first_gap(&m, 10100, 59999, &a, &b));
	EXPECT_EQ(a, 10100u);
	EXPECT_EQ(b, 59999u);
	EXPECT_TRUE(id_map_first_gap(&m, 9000, 20000, &a, &b));
	EXPECT_EQ(a, 10001u);
	EXPECT_EQ(b, 20000u);

	/* a hole between two extents is found, and ends where the next one starts */
	ASSERT_EQ(id_map_parse("0 0 10050\n20000 20000 50000\n", &m), 0);
	EXPECT_TRUE(id_map_first_gap(&m, 10100, 59999, &a, &b));
	EXPECT_EQ(a, 10100u);
	EXPECT_EQ(b, 19999u);
	EXPECT_FALSE(id_map_first_gap(&m, 20000, 59999, &a, &b));
	id_map_format(&m, buf, sizeof(buf));
	EXPECT_STREQ(buf, "0 0 10050; 20000 20000 50000");

	ASSERT_EQ(id_map_parse("0 0 4294967295\n", &m), 0);
	EXPECT_TRUE(id_map_is_initial(&m));
	EXPECT_TRUE(id_map_covers(&m, 0, 4294967294u));

	ASSERT_EQ(id_map_parse("", &m), 0); /* a namespace with no map written yet */
	EXPECT_FALSE(id_map_covers(&m, 0, 0));
	EXPECT_EQ(id_map_parse("0 0 0\n", &m), -EINVAL);
	EXPECT_EQ(id_map_parse("0 0\n", &m), -EINVAL);
	EXPECT_EQ(id_map_parse("0 0 1 2\n", &m), -EINVAL);
	EXPECT_EQ(id_map_parse("-1 0 1\n", &m), -EINVAL);
	EXPECT_EQ(id_map_parse("0 4294967295 2\n", &m), -EINVAL);
	EXPECT_EQ(id_map_parse("4294967296 0 1\n", &m), -EINVAL);
}

TEST(id_map_format_cuts_with_a_mark)
{
	static struct id_map m;
	char buf[12];

	ASSERT_EQ(id_map_parse("0 200000 65536\n65536 300000 1\n", &m), 0);
	id_map_format(&m, buf, sizeof(buf));
	EXPECT_EQ(strlen(buf), sizeof(buf) - 1);
	EXPECT_TRUE(!strcmp(buf + sizeof(buf) - 4, "\xe2\x80\xa6"));
}

TEST(log_rate_holds_past_the_burst_and_counts_what_it_held)
{
	struct log_rate lr = {0};
	uint64_t t = 5000000;

	EXPECT_TRUE(log_rate_ok(&lr, t, 2));
	EXPECT_TRUE(log_rate_ok(&lr, t + 10, 2));
	EXPECT_FALSE(log_rate_ok(&lr, t + 20, 2));
	EXPECT_FALSE(log_rate_ok(&lr, t + 999999, 2));
	EXPECT_FALSE(log_rate_window_over(&lr, t + 999999));
	EXPECT_TRUE(log_rate_window_over(&lr, t + 1000000));
	/* a new second lets lines through again; what was held stays counted until asked */
	EXPECT_TRUE(log_rate_ok(&lr, t + 1000000, 2));
	EXPECT_EQ(log_rate_held(&lr), 2u);
	EXPECT_EQ(log_rate_held(&lr), 0u);
	EXPECT_FALSE(log_rate_window_over(&lr, t + 5000000)); /* nothing held: nothing to say */
	EXPECT_TRUE(log_rate_ok(&lr, t + 1000001, 2));
	EXPECT_FALSE(log_rate_ok(&lr, t + 1000002, 2));
	EXPECT_EQ(log_rate_held(&lr), 1u);
}

TEST_HARNESS_MAIN
