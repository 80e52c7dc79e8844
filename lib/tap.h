#pragma once

/* A small TAP test harness in the shape of the kernel's kselftest harness (written here).
 *
 *   TEST(name) { ASSERT_EQ(1, 1); }
 *   TEST_SIGNAL(name, SIGSYS) { ... }          passes only if the test dies by that signal
 *   TEST_TIMEOUT(name, 60) { ... }              its own timeout in seconds (default 30)
 *   FIXTURE(f) { int fd; };
 *   FIXTURE_SETUP(f) { self->fd = ...; }
 *   FIXTURE_TEARDOWN(f) { close(self->fd); }
 *   TEST_F(f, name) { ASSERT_GE(self->fd, 0); }
 *   TEST_HARNESS_MAIN
 *
 * Every test runs in its own forked child with a timeout, so a test may drop privileges,
 * load a seccomp filter or crash without poisoning the runner. ASSERT_* ends the test at
 * the first failure, EXPECT_* records it and goes on, SKIP(reason) ends it as skipped.
 * A test passes only if its function returns: a child that exits 0 before (code under
 * test calling exit()) fails.
 * Output is TAP 13; the last line is "# N passed, N failed, N skipped".
 * Run one test: ./test-foo name   (or a substring filter: ./test-foo -f sub). */

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct tap_metadata;
typedef void (*tap_fn)(struct tap_metadata *meta);

struct tap_metadata {
	const char *name;
	tap_fn fn;
	int term_signal;  /* 0: must exit cleanly */
	unsigned timeout; /* seconds */
	bool failed;	  /* set by EXPECT_* in the child */
	struct tap_metadata *next;
};

void tap_register(struct tap_metadata *m);
int tap_main(int argc, char **argv);
_Noreturn void tap_skip(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
_Noreturn void tap_fail_now(void);
void tap_report(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define TAP_DEFINE(test_name, sig, secs)                                                           \
	static void test_name(struct tap_metadata *_metadata);                                     \
	static struct tap_metadata _##test_name##_meta = {                                         \
		.name = #test_name, .fn = test_name, .term_signal = (sig), .timeout = (secs)};     \
	__attribute__((constructor)) static void _##test_name##_reg(void)                          \
	{                                                                                          \
		tap_register(&_##test_name##_meta);                                                \
	}                                                                                          \
	static void test_name(struct tap_metadata *_metadata __attribute__((unused)))

#define TEST(name) TAP_DEFINE(name, 0, 30)
#define TEST_SIGNAL(name, sig) TAP_DEFINE(name, sig, 30)
#define TEST_TIMEOUT(name, secs) TAP_DEFINE(name, 0, secs)

#define FIXTURE(f) struct _fixture_##f
#define FIXTURE_SETUP(f)                                                                           \
	static void _fixture_##f##_setup(struct _fixture_##f *self,                                \
					 struct tap_metadata *_metadata __attribute__((unused)))
#define FIXTURE_TEARDOWN(f)                                                                        \
	static void _fixture_##f##_teardown(                                                       \
		struct _fixture_##f *self, struct tap_metadata *_metadata __attribute__((unused)))
#define TEST_F(f, test_name)                                                                       \
	static void _##f##_##test_name##_body(struct _fixture_##f *self,                           \
					      struct tap_metadata *_metadata);                     \
	TAP_DEFINE(f##_##test_name, 0, 30)                                                         \
	{                                                                                          \
		struct _fixture_##f fx;                                                            \
		memset(&fx, 0, sizeof(fx));                                                        \
		_fixture_##f##_setup(&fx, _metadata);                                              \
		_##f##_##test_name##_body(&fx, _metadata);                                         \
		_fixture_##f##_teardown(&fx, _metadata);                                           \
	}                                                                                          \
	static void _##f##_##test_name##_body(                                                     \
		struct _fixture_##f *self, struct tap_metadata *_metadata __attribute__((unused)))

#define SKIP(...) tap_skip(__FILE__, __LINE__, __VA_ARGS__)

#define TAP_CMP(fatal, a, op, b)                                                                   \
	do {                                                                                       \
		__typeof__(a) _a = (a);                                                            \
		__typeof__(b) _b = (b);                                                            \
		if (!(_a op _b)) {                                                                 \
			tap_report(__FILE__, __LINE__, "%s %s %s: %" PRIdMAX " vs %" PRIdMAX, #a,  \
				   #op, #b, (intmax_t)_a, (intmax_t)_b);                           \
			_metadata->failed = true;                                                  \
			if (fatal)                                                                 \
				tap_fail_now();                                                    \
		}                                                                                  \
	} while (0)

#define TAP_BOOL(fatal, cond, want)                                                                \
	do {                                                                                       \
		if ((!!(cond)) != (want)) {                                                        \
			tap_report(__FILE__, __LINE__, "expected %s to be %s", #cond,              \
				   (want) ? "true" : "false");                                     \
			_metadata->failed = true;                                                  \
			if (fatal)                                                                 \
				tap_fail_now();                                                    \
		}                                                                                  \
	} while (0)

#define TAP_STR(fatal, a, b, want_eq)                                                              \
	do {                                                                                       \
		const char *_a = (a), *_b = (b);                                                   \
		bool _eq = _a && _b && strcmp(_a, _b) == 0;                                        \
		if (_eq != (want_eq)) {                                                            \
			tap_report(__FILE__, __LINE__, "%s %s %s: \"%s\" vs \"%s\"", #a,           \
				   (want_eq) ? "==" : "!=", #b, _a ? _a : "(null)",                \
				   _b ? _b : "(null)");                                            \
			_metadata->failed = true;                                                  \
			if (fatal)                                                                 \
				tap_fail_now();                                                    \
		}                                                                                  \
	} while (0)

#define ASSERT_EQ(a, b) TAP_CMP(1, a, ==, b)
#define ASSERT_NE(a, b) TAP_CMP(1, a, !=, b)
#define ASSERT_LT(a, b) TAP_CMP(1, a, <, b)
#define ASSERT_LE(a, b) TAP_CMP(1, a, <=, b)
#define ASSERT_GT(a, b) TAP_CMP(1, a, >, b)
#define ASSERT_GE(a, b) TAP_CMP(1, a, >=, b)
#define ASSERT_TRUE(c) TAP_BOOL(1, c, true)
#define ASSERT_FALSE(c) TAP_BOOL(1, c, false)
#define ASSERT_NULL(p) TAP_BOOL(1, (p) == NULL, true)
#define ASSERT_NOT_NULL(p) TAP_BOOL(1, (p) != NULL, true)
#define ASSERT_STREQ(a, b) TAP_STR(1, a, b, true)
#define ASSERT_STRNE(a, b) TAP_STR(1, a, b, false)
#define EXPECT_EQ(a, b) TAP_CMP(0, a, ==, b)
#define EXPECT_NE(a, b) TAP_CMP(0, a, !=, b)
#define EXPECT_LT(a, b) TAP_CMP(0, a, <, b)
#define EXPECT_LE(a, b) TAP_CMP(0, a, <=, b)
#define EXPECT_GT(a, b) TAP_CMP(0, a, >, b)
#define EXPECT_GE(a, b) TAP_CMP(0, a, >=, b)
#define EXPECT_TRUE(c) TAP_BOOL(0, c, true)
#define EXPECT_FALSE(c) TAP_BOOL(0, c, false)
#define EXPECT_NULL(p) TAP_BOOL(0, (p) == NULL, true)
#define EXPECT_NOT_NULL(p) TAP_BOOL(0, (p) != NULL, true)
#define EXPECT_STREQ(a, b) TAP_STR(0, a, b, true)
#define EXPECT_STRNE(a, b) TAP_STR(0, a, b, false)

#define TEST_HARNESS_MAIN                                                                          \
	int main(int argc, char **argv)                                                            \
	{                                                                                          \
		return tap_main(argc, argv);                                                       \
	}
