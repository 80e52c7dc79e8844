#pragma once

/* SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012), for hash
 * tables whose keys a peer chooses. With a key drawn at random in each run, a peer cannot
 * pick keys that all fall into one bucket and turn every lookup into a walk of what it
 * added (the hash-flooding attacks of 2011, oCERT-2011-003; CVE-2011-4885 for PHP). */

#include <stddef.h>
#include <stdint.h>

#define SIPHASH_KEY_SIZE 16

uint64_t siphash24(const uint8_t key[SIPHASH_KEY_SIZE], const void *data, size_t len);
