/* lib/proto: limits, duplicate keys, typed fields, frames, base64, secret compare. */
/* the harness compares with __typeof__: literal ints against unsigned fields are fine here */
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"
#include "lib/proto.h"
#include "lib/tap.h"

static int parse_code(const char *s)
{
	struct proto_error err = {0};
	cJSON *root = NULL;
	int r = proto_parse(s, strlen(s), &root, &err);
	cJSON_Delete(root);
	return r < 0 ? (int)err.code : 0;
}

TEST(parse_accepts_plain_object)
{
	ASSERT_EQ(parse_code("{\"id\":\"1\",\"op\":\"ping\"}"), 0);
	ASSERT_EQ(parse_code("  {\"a\":[1,2,{\"b\":null}]}\n"), 0);
}

TEST(parse_rejects_malformed)
{
	ASSERT_EQ(parse_code("{\"id\":"), PROTO_E_BAD_JSON);
	ASSERT_EQ(parse_code("[1,2]"), PROTO_E_BAD_JSON);
	ASSERT_EQ(parse_code("\"x\""), PROTO_E_BAD_JSON);
	ASSERT_EQ(parse_code("{} {}"), PROTO_E_BAD_JSON);
	ASSERT_EQ(parse_code("]{"), PROTO_E_BAD_JSON);
	ASSERT_EQ(parse_code(""), PROTO_E_BAD_JSON);
}

TEST(parse_rejects_duplicate_keys_at_any_depth)
{
	ASSERT_EQ(parse_code("{\"agent\":\"a\",\"agent\":\"b\"}"), PROTO_E_DUPLICATE_KEY);
	ASSERT_EQ(parse_code("{\"env\":{\"PI_A\":\"1\",\"PI_A\":\"2\"}}"), PROTO_E_DUPLICATE_KEY);
	ASSERT_EQ(parse_code("{\"l\":[{\"x\":1,\"x\":1}]}"), PROTO_E_DUPLICATE_KEY);
	ASSERT_EQ(parse_code("{\"a\":1,\"A\":1}"), 0);
}

/* A peer's name a message quotes is whole, or cut with a mark after its quotes: a cut one
 * must not read as a whole, shorter key. */
TEST(duplicate_key_message_marks_a_cut_name)
{
	char k[101], json[300], want[128];
	struct proto_error err = {0};
	cJSON *root = NULL;

	ASSERT_LT(proto_parse("{\"a'b\":1,\"a'b\":2}", 17, &root, &err), 0);
	EXPECT_STREQ(err.message, "duplicate key \"a'b\"");
	memset(k, 'k', 100);
	k[100] = '\0';
	snprintf(json, sizeof(json), "{\"%s\":1,\"%s\":2}", k, k);
	ASSERT_LT(proto_parse(json, strlen(json), &root, &err), 0);
	snprintf(want, sizeof(want), "duplicate key \"%.64s\"[cut: 100 bytes]", k);
	EXPECT_STREQ(err.message, want);
}

TEST(parse_rejects_deep_nesting_before_cjson)
{
	char buf[4096];
	size_t n = 0;

	buf[n++] = '{';
	memcpy(buf + n, "\"a\":", 4), n += 4;
	for (int i = 0; i < PROTO_MAX_DEPTH; i++)
		buf[n++] = '[';
	for (int i = 0; i < PROTO_MAX_DEPTH; i++)
		buf[n++] = ']';
	buf[n++] = '}';
	buf[n] = 0;
	ASSERT_EQ(parse_code(buf), PROTO_E_TOO_DEEP);
	/* brackets inside strings do not count */
	ASSERT_EQ(parse_code("{\"a\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}"), 0);
	/* and a million of them cost one flat pass */
	char *big = malloc(PROTO_MAX_MESSAGE);
	ASSERT_NOT_NULL(big);
	memset(big, '[', PROTO_MAX_MESSAGE - 1);
	big[PROTO_MAX_MESSAGE - 1] = 0;
	ASSERT_EQ(parse_code(big), PROTO_E_TOO_DEEP);
	free(big);
}

TEST(parse_rejects_oversized)
{
	struct proto_error err = {0};
	cJSON *root = NULL;
	size_t len = PROTO_MAX_MESSAGE + 1;
	char *big = malloc(len + 1);

	ASSERT_NOT_NULL(big);
	memset(big, ' ', len);
	big[0] = '{', big[len - 1] = '}', big[len] = 0;
	ASSERT_EQ(proto_parse(big, len, &root, &err), -E2BIG);
	ASSERT_EQ(err.code, PROTO_E_TOO_LARGE);
	/* one string over the string limit inside an allowed message */
	len = PROTO_MAX_STRING + 16;
	memset(big, 'x', len);
	memcpy(big, "{\"a\":\"", 6);
	memcpy(big + len - 2, "\"}", 2);
	ASSERT_EQ(proto_parse(big, len, &root, &err), -E2BIG);
	ASSERT_EQ(err.code, PROTO_E_TOO_LARGE);
	free(big);
}

TEST(parse_rejects_nul_in_strings)
{
	struct proto_error err = {0};
	cJSON *root = NULL;

	ASSERT_EQ(parse_code("{\"path\":\"ok\\u0000/../etc/shadow\"}"), PROTO_E_BAD_JSON);
	ASSERT_EQ(proto_parse("{\"a\":\0\"b\"}", 10, &root, &err), -EINVAL);
	ASSERT_EQ(parse_code("{\"path\":\"\\\\u0000\"}"), 0); /* an escaped backslash, then text */
	/* cJSON reads \u with anything but four hex digits as U+0000, cutting the string there:
	 * "/data/x\uZZZZ/../../etc/shadow" was "/data/x", in a key as in a value */
	ASSERT_EQ(parse_code("{\"path\":\"/data/x\\uZZZZ/../../etc/shadow\"}"), PROTO_E_BAD_JSON);
	ASSERT_EQ(parse_code("{\"path\":\"a\\u00G0b\"}"), PROTO_E_BAD_JSON);
	ASSERT_EQ(parse_code("{\"path\":\"a\\u+123b\"}"), PROTO_E_BAD_JSON);
	ASSERT_EQ(parse_code("{\"ag\\uZZZZent\":\"a\"}"), PROTO_E_BAD_JSON);
	ASSERT_EQ(parse_code("{\"a\":\"\\u12\"}"), PROTO_E_BAD_JSON);
	/* every real escape still passes, upper and lower case */
	ASSERT_EQ(parse_code("{\"a\":\"\\u00e9\\u00C9\\u001b\\ud83d\\ude00\"}"), 0);
}

TEST(parse_accepts_only_utf8)
{
	/* well-formed: 2, 3 and 4 bytes, the edges of each range */
	ASSERT_EQ(parse_code("{\"a\":\"\xc2\x80 \xdf\xbf \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80 "
			     "\xef\xbf\xbf \xf0\x90\x80\x80 \xf4\x8f\xbf\xbf\"}"),
		  0);
	ASSERT_EQ(parse_code("{\"\xc3\xa9t\xc3\xa9\":\"h\xc3\xa9\"}"), 0); /* in a key too */
	/* ill-formed: a lone continuation byte, overlong forms, a surrogate, past U+10FFFF,
	 * a truncated sequence (at the end and before the closing quote), latin-1 */
	static const char *const bad[] = {
		"{\"a\":\"\x80\"}",
		"{\"a\":\"\xc0\xaf\"}",
		"{\"a\":\"\xc1\xbf\"}",
		"{\"a\":\"\xe0\x9f\xbf\"}",
		"{\"a\":\"\xed\xa0\x80\"}",
		"{\"a\":\"\xf0\x8f\xbf\xbf\"}",
		"{\"a\":\"\xf4\x90\x80\x80\"}",
		"{\"a\":\"\xf5\x80\x80\x80\"}",
		"{\"a\":\"\xe2\x82\"}",
		"{\"a\":\"caf\xe9\"}",
		"{\"a\":\"\xff\"}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		EXPECT_EQ(parse_code(bad[i]), PROTO_E_BAD_JSON);
	{
		struct proto_error err = {0};
		cJSON *root = NULL;
		/* cut inside a sequence at the very end of the buffer */
		EXPECT_EQ(proto_parse("{\"a\":\"\xe2\x82", 8, &root, &err), -EINVAL);
	}
}

/* \u escapes decode to UTF-8 too: a lone or reversed surrogate would become the ill-formed
 * bytes the raw check refuses (CESU-8), which a peer's WebSocket must fail */
TEST(parse_rejects_lone_surrogate_escapes)
{
	static const char *const bad[] = {
		"{\"a\":\"\\ud800\"}",	      /* high, alone at the end */
		"{\"a\":\"\\ud800x\"}",	      /* high, then text */
		"{\"a\":\"\\udbff\\u0041\"}", /* high, then not a low one */
		"{\"a\":\"\\udc00\"}",	      /* low, alone */
		"{\"a\":\"\\udc00\\ud800\"}", /* reversed */
		"{\"a\":\"\\ud800\\ud800\"}", /* high, high */
		"{\"\\udfff\":1}",	      /* in a key */
	};
	cJSON *root = NULL;
	struct proto_error err = {0};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		EXPECT_EQ(parse_code(bad[i]), PROTO_E_BAD_JSON);
	/* a pair is U+10000..U+10FFFF, as 4 bytes of UTF-8 */
	ASSERT_EQ(proto_parse("{\"a\":\"\\ud83d\\ude00\"}", 20, &root, &err), 0);
	EXPECT_STREQ(cJSON_GetObjectItemCaseSensitive(root, "a")->valuestring, "\xf0\x9f\x98\x80");
	cJSON_Delete(root);
}

/* Depth is counted outside strings only, and an escaped quote does not end a string. */
TEST(parse_depth_ignores_escaped_quotes_in_strings)
{
	ASSERT_EQ(parse_code("{\"a\":\"\\\"[[[[[[[[[[[[[[[[\"}"), 0);
	ASSERT_EQ(parse_code("{\"a\":\"\\\\\",\"b\":[[[[[[[[[[]]]]]]]]]]}"), PROTO_E_TOO_DEEP);
	ASSERT_EQ(parse_code("{\"a\":\"]]]]]]]]\",\"b\":[[[[[[[[[[]]]]]]]]]]}"), PROTO_E_TOO_DEEP);
}

/* Numbers a peer sends: only exact non-negative integers within the field's bound. */
static size_t values_of(const char *s, int *ret)
{
	struct proto_error err = {0};
	cJSON *root = NULL;
	size_t n = 0;

	*ret = proto_parse_values(s, strlen(s), &root, &err, &n);
	cJSON_Delete(root);
	return n;
}

/* server-min charges a sandbox's message rate by the values a message holds (parsing costs
 * by them): commas and opening brackets outside strings, whether the message parses or not */
TEST(parse_counts_values)
{
	int r;

	ASSERT_EQ(values_of("{}", &r), 2);
	ASSERT_EQ(r, 0);
	ASSERT_EQ(values_of("{\"a\":[0,0,0],\"b\":{\"c\":1}}", &r), 7);
	ASSERT_EQ(values_of("{\"a\":\",,,[[{{\\\",,\"}", &r), 2); /* in a string: none */
	ASSERT_EQ(values_of("{\"a\":[0,0,0,0,0,0,0,0],", &r), 11);
	ASSERT_EQ(r, -EINVAL);
	ASSERT_EQ(values_of("[1,2]", &r), 3);
	ASSERT_EQ(r, -EINVAL);
}

/* A message of more values than PROTO_MAX_VALUES is refused before cJSON builds them. */
static int parse_zeros(size_t k, struct proto_error *err)
{
	char *s = malloc(16 + 2 * k), *p;
	cJSON *root = NULL;
	size_t n = 0;
	int r;

	if (!s)
		return -ENOMEM;
	p = s + sprintf(s, "{\"a\":[");
	for (size_t i = 0; i < k; i++)
		p += sprintf(p, i ? ",0" : "0");
	strcpy(p, "]}");
	r = proto_parse_values(s, strlen(s), &root, err, &n);
	cJSON_Delete(root);
	free(s);
	return r;
}

TEST(parse_refuses_too_many_values)
{
	struct proto_error err = {0};

	/* 1 + '{' + '[' + k - 1 commas = k + 2 values */
	ASSERT_EQ(parse_zeros(PROTO_MAX_VALUES - 2, &err), 0);
	ASSERT_EQ(parse_zeros(PROTO_MAX_VALUES - 1, &err), -E2BIG);
	ASSERT_EQ(err.code, PROTO_E_TOO_LARGE);
	ASSERT_TRUE(strstr(err.message, "more than 131072 JSON values") != NULL);
}

TEST(get_u64_refuses_what_a_cast_would_bend)
{
	static const struct {
		const char *json;
		int want;
		uint64_t v;
	} cases[] = {
		{"{\"n\":1e999}", -EINVAL, 0},
		{"{\"n\":-1e999}", -EINVAL, 0},
		{"{\"n\":-1}", -EINVAL, 0},
		{"{\"n\":1.5}", -EINVAL, 0},
		{"{\"n\":9007199254740993}", -EINVAL, 0}, /* 2^53 + 1: not exact */
		{"{\"n\":18446744073709551616}", -EINVAL, 0},
		{"{\"n\":4294967296}", -EINVAL, 0}, /* over the bound below */
		{"{\"n\":\"5\"}", -EINVAL, 0},
		{"{\"n\":true}", -EINVAL, 0},
		{"{\"n\":-0}", 0, 0},
		{"{\"n\":4294967295}", 0, 4294967295u},
		{"{\"n\":1e3}", 0, 1000},
		{"{\"n\":null}", -ENOENT, 0},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct proto_error err = {0};
		cJSON *root = NULL;
		uint64_t v = 77;
		ASSERT_EQ(proto_parse(cases[i].json, strlen(cases[i].json), &root, &err), 0);
		EXPECT_EQ(proto_get_u64(root, "n", UINT32_MAX, &v, &err), cases[i].want);
		if (cases[i].want == 0)
			EXPECT_EQ(v, cases[i].v);
		cJSON_Delete(root);
	}
}

static int request_code(const char *s, struct proto_request *req, cJSON **root)
{
	struct proto_error err = {0};
	int r = proto_parse(s, strlen(s), root, &err);
	if (r < 0)
		return (int)err.code;
	r = proto_request_parse(*root, PROTO_MAX_ID, req, &err);
	return r < 0 ? (int)err.code : 0;
}

TEST(request_op_and_id)
{
	struct proto_request req;
	cJSON *root = NULL;

	ASSERT_EQ(request_code("{\"id\":\"r-1\",\"op\":\"exec.start\"}", &req, &root), 0);
	ASSERT_EQ(req.op, PROTO_OP_EXEC_START);
	ASSERT_STREQ(req.id, "r-1");
	cJSON_Delete(root);

	ASSERT_EQ(request_code("{\"id\":\"r-2\",\"op\":\"exec.teleport\"}", &req, &root),
		  PROTO_E_UNKNOWN_OP);
	ASSERT_STREQ(req.id, "r-2"); /* the error can still name the request */
	cJSON_Delete(root);

	ASSERT_EQ(request_code("{\"id\":\"a b\",\"op\":\"ping\"}", &req, &root),
		  PROTO_E_BAD_REQUEST);
	ASSERT_NULL(req.id);
	cJSON_Delete(root);
	ASSERT_EQ(request_code("{\"id\":7,\"op\":\"ping\"}", &req, &root), PROTO_E_BAD_REQUEST);
	cJSON_Delete(root);
	ASSERT_EQ(request_code("{\"id\":\"x\"}", &req, &root), PROTO_E_BAD_REQUEST);
	cJSON_Delete(root);
	ASSERT_FALSE(proto_id_valid("", 10));
	ASSERT_FALSE(proto_id_valid("abcdefghijk", 10));
	ASSERT_TRUE(proto_id_valid("c12.r:x-y_z", 64));
	ASSERT_FALSE(proto_id_valid("x\n", 64));
}

static int exec_code(const char *s, struct proto_exec_start *st)
{
	struct proto_error err = {0};
	cJSON *root = NULL;
	int r = proto_parse(s, strlen(s), &root, &err);
	if (r < 0)
		return (int)err.code;
	r = proto_exec_start_parse(root, st, &err);
	if (r < 0) {
		cJSON_Delete(root);
		return (int)err.code;
	}
	cJSON_Delete(root);
	return 0;
}

TEST(exec_start_fields)
{
	struct proto_error err = {0};
	struct proto_exec_start st;
	const char *s =
		"{\"id\":\"1\",\"op\":\"exec.start\",\"agent\":\"alice\",\"argv\":[\"ls\",\"-l\"],"
		"\"cwd\":\"/data/w\",\"env\":{\"PI_TASK\":\"7\"},\"stdin\":\"pipe\",\"pty\":true,"
		"\"rows\":50,\"cols\":132,\"term\":\"screen-256color\",\"timeout_ms\":5000,"
		"\"output_cap\":1000,\"tag\":"
		"\"build\"}";
	cJSON *root = NULL;

	ASSERT_EQ(proto_parse(s, strlen(s), &root, &err), 0);
	ASSERT_EQ(proto_exec_start_parse(root, &st, &err), 0);
	ASSERT_STREQ(st.agent, "alice");
	ASSERT_EQ(st.argc, 2);
	ASSERT_STREQ(st.argv[1], "-l");
	ASSERT_NULL(st.argv[2]);
	ASSERT_NULL(st.shell);
	ASSERT_STREQ(st.cwd, "/data/w");
	ASSERT_EQ(st.n_env, 1);
	ASSERT_STREQ(st.env[0], "PI_TASK=7");
	ASSERT_EQ(st.stdin_mode, PROTO_STDIN_PIPE);
	ASSERT_TRUE(st.pty);
	ASSERT_EQ(st.rows, 50);
	ASSERT_EQ(st.cols, 132);
	ASSERT_STREQ(st.term, "screen-256color");
	ASSERT_EQ(st.timeout_ms, 5000);
	ASSERT_EQ(st.output_cap, 1000);
	ASSERT_STREQ(st.tag, "build");
	proto_exec_start_done(&st);
	cJSON_Delete(root);
}

TEST(exec_start_rejects)
{
	struct proto_exec_start st;

	ASSERT_EQ(exec_code("{\"argv\":[\"ls\"]}", &st), PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\"}", &st), PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"shell\":\"ls\"}", &st),
		  PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[]}", &st), PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"\"]}", &st), PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\",3]}", &st), PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"env\":{\"LD_PRELOAD\":\"x\"}}",
			    &st),
		  PROTO_E_BAD_REQUEST);
	ASSERT_EQ(
		exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"env\":{\"PI_X\":\"a\\nb\"}}", &st),
		PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"stdin\":\"tty\"}", &st),
		  PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"timeout_ms\":-1}", &st),
		  PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"rows\":1.5}", &st),
		  PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"tag\":\"a/b\"}", &st),
		  PROTO_E_BAD_REQUEST);
	/* term: a terminfo name, never a path, and only for a pty */
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"pty\":true,\"term\":\"../x\"}",
			    &st),
		  PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"pty\":true,\"term\":\"\"}", &st),
		  PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"pty\":true,\"term\":7}", &st),
		  PROTO_E_BAD_REQUEST);
	ASSERT_NE(
		exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"pty\":true,\"term\":"
			  "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
			  &st),
		0);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"term\":\"xterm\"}", &st),
		  PROTO_E_BAD_REQUEST);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"argv\":[\"ls\"],\"pty\":true,\"term\":\"xterm\"}",
			    &st),
		  0);
	proto_exec_start_done(&st);
	ASSERT_EQ(exec_code("{\"agent\":\"a\",\"shell\":\"echo hi | wc\"}", &st), 0);
}

TEST(answers_are_structured)
{
	struct proto_error err = {0};
	cJSON *root = NULL;
	char *s = proto_error_build("r1", PROTO_E_DUPLICATE_ID, "id \"r1\" is in use");

	ASSERT_NOT_NULL(s);
	ASSERT_EQ(proto_parse(s, strlen(s), &root, &err), 0);
	ASSERT_TRUE(cJSON_IsFalse(cJSON_GetObjectItem(root, "ok")));
	ASSERT_STREQ(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "error"), "code")->valuestring,
		     "duplicate_id");
	cJSON_Delete(root);
	free(s);

	cJSON *x = cJSON_CreateObject();
	cJSON_AddNumberToObject(x, "cmd", 3);
	s = proto_ok_build("r2", x);
	ASSERT_STREQ(s, "{\"id\":\"r2\",\"ok\":true,\"cmd\":3}");
	free(s);
	s = proto_event_build("exec.exit", "r2", NULL);
	ASSERT_STREQ(s, "{\"event\":\"exec.exit\",\"id\":\"r2\"}");
	free(s);
}

/* An error answer is valid UTF-8 whatever its message. A message quotes what a peer sent
 * cut to 64 bytes: before a whole character (an "unknown operation" of 63 ASCII bytes and
 * an "é" left a lone 0xc3), and marked, so the cut name does not read as a whole one. */
TEST(error_answers_are_valid_utf8)
{
	char op[80], json[160], out[16], want[128];
	struct proto_error err = {0};
	struct proto_request req;
	cJSON *root = NULL;
	char *a;

	memset(op, 'a', 63);
	memcpy(op + 63, "\xc3\xa9", 3); /* "é" and the NUL */
	snprintf(json, sizeof(json), "{\"id\":\"u1\",\"op\":\"%s\"}", op);
	ASSERT_EQ(proto_parse(json, strlen(json), &root, &err), 0);
	ASSERT_LT(proto_request_parse(root, PROTO_MAX_ID, &req, &err), 0);
	EXPECT_TRUE(proto_utf8_valid(err.message, strlen(err.message))); /* cut before "é" */
	snprintf(want, sizeof(want), "unknown operation \"%.63s\"[cut: 65 bytes]", op);
	EXPECT_STREQ(err.message, want);
	a = proto_error_build("u1", err.code, err.message);
	ASSERT_NOT_NULL(a);
	EXPECT_TRUE(proto_utf8_valid(a, strlen(a)));
	EXPECT_NOT_NULL(strstr(a, "unknown operation"));
	free(a);
	cJSON_Delete(root);

	EXPECT_EQ(proto_utf8_sanitize("ok \xc3\xa9 \xff\xc3", out, sizeof(out)), 8u);
	EXPECT_STREQ(out, "ok \xc3\xa9 ??");
	EXPECT_EQ(proto_utf8_sanitize("abcd\xc3\xa9", out, 6), 4u); /* no half character */
	EXPECT_STREQ(out, "abcd");
	EXPECT_EQ(proto_utf8_sanitize("\xed\xa0\x80", out, sizeof(out)), 3u); /* a surrogate */
	EXPECT_STREQ(out, "???");
}

TEST(frames_round_trip_and_reject)
{
	uint8_t buf[PROTO_FRAME_HEADER + 4];
	struct proto_frame f;
	struct proto_error err = {0};

	proto_frame_header_put(buf, PROTO_STREAM_STDERR, PROTO_FRAME_EOF, 0x01020304,
			       UINT64_C(0x1122334455667788));
	memcpy(buf + PROTO_FRAME_HEADER, "abcd", 4);
	ASSERT_EQ(proto_frame_parse(buf, sizeof(buf), &f, &err), 0);
	ASSERT_EQ(f.stream, PROTO_STREAM_STDERR);
	ASSERT_EQ(f.flags, PROTO_FRAME_EOF);
	ASSERT_EQ(f.cmd, 0x01020304);
	ASSERT_EQ(f.seq, UINT64_C(0x1122334455667788));
	ASSERT_EQ(f.len, 4);
	ASSERT_EQ(memcmp(f.payload, "abcd", 4), 0);

	ASSERT_EQ(proto_frame_parse(buf, 15, &f, &err), -EINVAL);
	buf[0] = 2;
	ASSERT_EQ(proto_frame_parse(buf, sizeof(buf), &f, &err), -EINVAL);
	buf[0] = 1, buf[1] = 9;
	ASSERT_EQ(proto_frame_parse(buf, sizeof(buf), &f, &err), -EINVAL);
	ASSERT_EQ(err.code, PROTO_E_BAD_FRAME);
	proto_frame_header_put(buf, 1, 0x80, 1, 1);
	ASSERT_EQ(proto_frame_parse(buf, sizeof(buf), &f, &err), -EINVAL);
	proto_frame_header_put(buf, 1, 0, 1, 0);
	ASSERT_EQ(proto_frame_parse(buf, sizeof(buf), &f, &err), -EINVAL);
	ASSERT_EQ(
		proto_frame_parse(buf, PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD + 1, &f, &err),
		-E2BIG);
}

/* The WebSocket header the splice path of pistis takes itself: only the whole header of
 * a final, unmasked binary frame with a minimal length; everything else is left to lws. */
TEST(ws_binary_header)
{
	static const struct {
		uint8_t b[12];
		size_t n;
		size_t hl;
		uint64_t plen;
	} cases[] = {
		{{0x82, 0x05}, 2, 2, 5},
		{{0x82, 0x00}, 2, 2, 0},
		{{0x82, 0x7d}, 2, 2, 125},
		{{0x82, 0x7e, 0x00, 0x7e}, 4, 4, 126},
		{{0x82, 0x7e, 0xff, 0xff}, 4, 4, 65535},
		{{0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0}, 10, 10, 65536},
		{{0x82, 0x7f, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		 10,
		 10,
		 0x7fffffffffffffffull},
		{{0x82, 0x05, 1, 2, 3}, 5, 2, 5},	      /* more than the header peeked */
		{{0x82}, 1, 0, 0},			      /* header not all here */
		{{0x82, 0x7e, 0x01}, 3, 0, 0},		      /* ... */
		{{0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0}, 9, 0, 0}, /* ... */
		{{0x02, 0x05}, 2, 0, 0},		      /* not final */
		{{0x81, 0x05}, 2, 0, 0},		      /* text */
		{{0x80, 0x05}, 2, 0, 0},		      /* continuation */
		{{0x88, 0x02}, 2, 0, 0},		      /* close */
		{{0x89, 0x00}, 2, 0, 0},		      /* ping */
		{{0xc2, 0x05}, 2, 0, 0},		      /* RSV1 */
		{{0x92, 0x05}, 2, 0, 0},		      /* RSV3 */
		{{0x82, 0x85, 1, 2, 3, 4}, 6, 0, 0},	      /* masked */
		{{0x82, 0x7e, 0x00, 0x7d}, 4, 0, 0},	      /* 125 in two bytes */
		{{0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 10, 0, 0}, /* 65535 in eight */
		{{0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0}, 10, 0, 0},	/* bit 63 */
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		uint64_t plen = 0xdead;
		size_t hl = proto_ws_binary_header(cases[i].b, cases[i].n, &plen);
		EXPECT_EQ(hl, cases[i].hl);
		if (hl)
			EXPECT_EQ(plen, cases[i].plen);
		else
			EXPECT_EQ(plen, 0xdeadu); /* untouched */
		if (hl != cases[i].hl)
			fprintf(stderr, "# case %zu\n", i);
	}
}

TEST(base64)
{
	const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};

	for (size_t i = 0; i < ELEMENTSOF(in); i++) {
		_cleanup_free_ char *e = proto_base64_encode((const uint8_t *)in[i], strlen(in[i]));
		_cleanup_free_ uint8_t *d = NULL;
		size_t n = 0;
		ASSERT_STREQ(e, out[i]);
		ASSERT_EQ(proto_base64_decode(e, strlen(e), &d, &n), 0);
		ASSERT_EQ(n, strlen(in[i]));
		ASSERT_EQ(memcmp(d, in[i], n), 0);
	}
	uint8_t *d = NULL;
	size_t n;
	ASSERT_EQ(proto_base64_decode("Zm9", 3, &d, &n), -EINVAL);
	ASSERT_EQ(proto_base64_decode("Zm=v", 4, &d, &n), -EINVAL);
	ASSERT_EQ(proto_base64_decode("Z===", 4, &d, &n), -EINVAL);
	ASSERT_EQ(proto_base64_decode("Zg==Zg==", 8, &d, &n), -EINVAL);
	ASSERT_EQ(proto_base64_decode("Zm9!", 4, &d, &n), -EINVAL);
}

TEST(secret_equal)
{
	ASSERT_TRUE(proto_secret_equal("abc", 3, "abc", 3));
	ASSERT_FALSE(proto_secret_equal("abc", 3, "abd", 3));
	ASSERT_FALSE(proto_secret_equal("abc", 3, "abcd", 4));
	ASSERT_FALSE(proto_secret_equal("", 0, "a", 1));
	ASSERT_TRUE(proto_secret_equal("", 0, "", 0));
	ASSERT_FALSE(proto_secret_equal("abcd", 4, "abc", 3)); /* a longer guess, same prefix */
	ASSERT_FALSE(proto_secret_equal("abc\0", 4, "abc", 3));
}

TEST(errno_mapping)
{
	ASSERT_EQ(proto_err_from_errno(-EACCES), PROTO_E_DENIED);
	ASSERT_EQ(proto_err_from_errno(-ELOOP), PROTO_E_DENIED);
	ASSERT_EQ(proto_err_from_errno(-ENOENT), PROTO_E_NOT_FOUND);
	ASSERT_EQ(proto_err_from_errno(-ENOBUFS), PROTO_E_LIMIT); /* JSON exec.stdin's window */
	ASSERT_STREQ(proto_err_name(PROTO_E_NOT_UNIQUE), "not_unique");
	ASSERT_STREQ(proto_op_name(PROTO_OP_FS_READ_PROMPT), "fs.read_prompt");
	ASSERT_EQ(proto_op_from_name("sandbox.status"), PROTO_OP_SANDBOX_STATUS);
}

TEST_HARNESS_MAIN
