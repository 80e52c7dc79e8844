#pragma once

/* SHA-256 (FIPS 180-4), self-contained: pi-env, sandbox-users and trusted hash small inputs
 * (agent ids, scripts) and must not pull libcrypto into binaries that otherwise need none. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32
#define SHA256_BLOCK_SIZE 64
#define SHA256_HEX_SIZE (2 * SHA256_DIGEST_SIZE + 1)

struct sha256_ctx {
	uint32_t state[8];
	uint64_t length; /* bytes hashed so far */
	uint8_t buf[SHA256_BLOCK_SIZE];
	size_t buf_len;
};

void sha256_init(struct sha256_ctx *ctx);
void sha256_update(struct sha256_ctx *ctx, const void *data, size_t len);
void sha256_final(struct sha256_ctx *ctx, uint8_t out[SHA256_DIGEST_SIZE]);

/* One-shot helpers. */
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_SIZE]);
/* Lower-case hex, NUL-terminated (65 bytes). */
void sha256_hex(const void *data, size_t len, char out[SHA256_HEX_SIZE]);
/* Digest of everything readable from fd (until EOF); -errno on read error. */
int sha256_fd(int fd, uint8_t out[SHA256_DIGEST_SIZE]);
void sha256_to_hex(const uint8_t digest[SHA256_DIGEST_SIZE], char out[SHA256_HEX_SIZE]);
/* Two digests compared in constant time (no early exit): secrets are compared as digests
 * (proto_secret_equal; server-min's sandbox tokens, hashed once at start-up). */
bool sha256_equal(const uint8_t a[SHA256_DIGEST_SIZE], const uint8_t b[SHA256_DIGEST_SIZE]);
