/* SHA-256 written from FIPS 180-4, sections 4.1.2, 4.2.2, 5.1.1, 5.3.3 and 6.2. */
#include "lib/sha256.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "lib/fd-util.h"

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

static inline uint32_t load_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static void compress(uint32_t state[8], const uint8_t block[SHA256_BLOCK_SIZE])
{
	uint32_t w[64];
	uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
	uint32_t e = state[4], f = state[5], g = state[6], h = state[7];

	for (unsigned t = 0; t < 16; t++)
		w[t] = load_be32(block + 4 * t);
	for (unsigned t = 16; t < 64; t++) {
		uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
		uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	for (unsigned t = 0; t < 64; t++) {
		uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
		uint32_t ch = (e & f) ^ (~e & g);
		uint32_t t1 = h + S1 + ch + K[t] + w[t];
		uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
		uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
		uint32_t t2 = S0 + maj;
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	state[0] += a;
	state[1] += b;
	state[2] += c;
	state[3] += d;
	state[4] += e;
	state[5] += f;
	state[6] += g;
	state[7] += h;
}

void sha256_init(struct sha256_ctx *ctx)
{
	static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
				       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

	memcpy(ctx->state, H0, sizeof(H0));
	ctx->length = 0;
	ctx->buf_len = 0;
}

void sha256_update(struct sha256_ctx *ctx, const void *data, size_t len)
{
	const uint8_t *p = data;

	ctx->length += len;
	if (ctx->buf_len > 0) {
		size_t n = SHA256_BLOCK_SIZE - ctx->buf_len;
		if (n > len)
			n = len;
		memcpy(ctx->buf + ctx->buf_len, p, n);
		ctx->buf_len += n;
		p += n;
		len -= n;
		if (ctx->buf_len < SHA256_BLOCK_SIZE)
			return;
		compress(ctx->state, ctx->buf);
		ctx->buf_len = 0;
	}
	for (; len >= SHA256_BLOCK_SIZE; p += SHA256_BLOCK_SIZE, len -= SHA256_BLOCK_SIZE)
		compress(ctx->state, p);
	if (len > 0) {
		memcpy(ctx->buf, p, len);
		ctx->buf_len = len;
	}
}

void sha256_final(struct sha256_ctx *ctx, uint8_t out[SHA256_DIGEST_SIZE])
{
	/* 5.1.1: append 0x80, zeros up to 56 mod 64, then the length in bits, big-endian. */
	uint64_t bits = ctx->length * 8;

	ctx->buf[ctx->buf_len++] = 0x80;
	if (ctx->buf_len > 56) {
		memset(ctx->buf + ctx->buf_len, 0, SHA256_BLOCK_SIZE - ctx->buf_len);
		compress(ctx->state, ctx->buf);
		ctx->buf_len = 0;
	}
	memset(ctx->buf + ctx->buf_len, 0, 56 - ctx->buf_len);
	store_be32(ctx->buf + 56, (uint32_t)(bits >> 32));
	store_be32(ctx->buf + 60, (uint32_t)bits);
	compress(ctx->state, ctx->buf);
	for (unsigned i = 0; i < 8; i++)
		store_be32(out + 4 * i, ctx->state[i]);
	memset(ctx, 0, sizeof(*ctx));
}

void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_SIZE])
{
	struct sha256_ctx ctx;

	sha256_init(&ctx);
	sha256_update(&ctx, data, len);
	sha256_final(&ctx, out);
}

void sha256_to_hex(const uint8_t digest[SHA256_DIGEST_SIZE], char out[SHA256_HEX_SIZE])
{
	static const char hex[] = "0123456789abcdef";

	for (unsigned i = 0; i < SHA256_DIGEST_SIZE; i++) {
		out[2 * i] = hex[digest[i] >> 4];
		out[2 * i + 1] = hex[digest[i] & 0xf];
	}
	out[2 * SHA256_DIGEST_SIZE] = '\0';
}

void sha256_hex(const void *data, size_t len, char out[SHA256_HEX_SIZE])
{
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256(data, len, d);
	sha256_to_hex(d, out);
}

int sha256_fd(int fd, uint8_t out[SHA256_DIGEST_SIZE])
{
	struct sha256_ctx ctx;
	uint8_t buf[16384];

	sha256_init(&ctx);
	for (;;) {
		ssize_t n = loop_read(fd, buf, sizeof(buf));
		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
		sha256_update(&ctx, buf, (size_t)n);
	}
	sha256_final(&ctx, out);
	return 0;
}

bool sha256_equal(const uint8_t a[SHA256_DIGEST_SIZE], const uint8_t b[SHA256_DIGEST_SIZE])
{
	volatile unsigned char acc = 0;

	for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
		acc |= (unsigned char)(a[i] ^ b[i]);
	return acc == 0;
}
