/* lib/sha256: FIPS 180-4 / NIST CAVP example vectors, and split updates. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/sha256.h"
#include "lib/tap.h"

static const char *hex_of(const char *s, size_t len, char out[SHA256_HEX_SIZE])
{
	sha256_hex(s, len, out);
	return out;
}

TEST(sha256_empty)
{
	char h[SHA256_HEX_SIZE];
	ASSERT_STREQ(hex_of("", 0, h),
		     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(sha256_abc)
{
	char h[SHA256_HEX_SIZE];
	ASSERT_STREQ(hex_of("abc", 3, h),
		     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(sha256_448_bits)
{
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	char h[SHA256_HEX_SIZE];
	ASSERT_STREQ(hex_of(m, strlen(m), h),
		     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(sha256_896_bits)
{
	const char *m = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
			"jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
	char h[SHA256_HEX_SIZE];
	ASSERT_STREQ(hex_of(m, strlen(m), h),
		     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(sha256_million_a_in_odd_chunks)
{
	struct sha256_ctx ctx;
	uint8_t d[SHA256_DIGEST_SIZE];
	char h[SHA256_HEX_SIZE], chunk[997];
	size_t left = 1000000;

	memset(chunk, 'a', sizeof(chunk));
	sha256_init(&ctx);
	while (left > 0) {
		size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
		sha256_update(&ctx, chunk, n);
		left -= n;
	}
	sha256_final(&ctx, d);
	sha256_to_hex(d, h);
	ASSERT_STREQ(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Every split point of messages around the padding boundaries (55, 56, 63, 64, 65 bytes)
 * must give the one-shot digest. */
TEST(sha256_split_updates_match_one_shot)
{
	char msg[130];

	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (char)(i * 7 + 3);
	for (size_t len = 0; len <= sizeof(msg); len++) {
		uint8_t want[SHA256_DIGEST_SIZE];
		sha256(msg, len, want);
		for (size_t cut = 0; cut <= len; cut++) {
			struct sha256_ctx ctx;
			uint8_t got[SHA256_DIGEST_SIZE];
			sha256_init(&ctx);
			sha256_update(&ctx, msg, cut);
			sha256_update(&ctx, msg + cut, len - cut);
			sha256_final(&ctx, got);
			ASSERT_EQ(memcmp(got, want, sizeof(want)), 0);
		}
	}
}

TEST(sha256_fd_matches)
{
	int p[2];
	uint8_t d[SHA256_DIGEST_SIZE];
	char h[SHA256_HEX_SIZE];

	ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
	ASSERT_EQ(loop_write(p[1], "abc", 3), 0);
	close(p[1]);
	ASSERT_EQ(sha256_fd(p[0], d), 0);
	close(p[0]);
	sha256_to_hex(d, h);
	ASSERT_STREQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	ASSERT_EQ(sha256_fd(-1, d), -EBADF);
}

TEST_HARNESS_MAIN
