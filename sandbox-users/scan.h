#pragma once

/* The line scanner shared by the passwd-family parser (pwfile.c) and the registry parser
 * (registry.c): one pass over a line that finds its end and its ':' and refuses control
 * bytes, 0x7f and NUL; and the byte and string finders of the fast path (users.c) and the
 * parsers. Internal to sandbox-users. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "lib/macro.h"

/* The word-at-a-time scan needs the first byte in memory to be the lowest. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR 1
#else
#define SWAR 0
#endif
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* The high bit of each byte of w that is < 0x20, 0x7f or ':'. The lowest flagged byte is
 * exact (a higher one may be a false positive after a borrow, which only costs a look). */
static inline uint64_t special_bytes(uint64_t w)
{
	uint64_t x = w ^ (ONES * 0x7f), y = w ^ (ONES * ':');
	return ((w - ONES * 0x20) & ~w & HIGHS) | ((x - ONES) & ~x & HIGHS) |
	       ((y - ONES) & ~y & HIGHS);
}

/* What one scan of a line found. */
struct line_scan {
	size_t len;	 /* without terminator */
	uint8_t term;	 /* 0, 1 "\n", 2 "\r\n" */
	unsigned colons; /* ':' in the line */
	size_t colon[9]; /* the offsets of the first nine */
	/* The first ' ' or ',' in the bytes before the first ':' that the vector loop looked
	 * at (SIZE_MAX: none there), and where that loop stopped: the name's bytes from
	 * vec_end on are for the caller to look at. */
	size_t name_bad, vec_end;
	const char *why;
};

#if defined(__SSE2__)
/* Sixteen bytes a step: a bit per byte that is < 0x20 or 0x7f (ret_special) and a bit per
 * ':' (the return value). Unsigned "< 0x20" is "min(b, 0x1f) == b". */
static inline unsigned special16(const char *p, unsigned *ret_special)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
	__m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));

	*ret_special = (unsigned)_mm_movemask_epi8(_mm_or_si128(ctl, del));
	return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(':')));
}
#endif

/* One pass over the line at p (avail bytes left: the rest of the buffer, so a step may
 * look past the line's end), sixteen bytes a step with SSE2 (else eight, SWAR): finds its
 * end and its ':', and refuses control bytes, 0x7f and NUL. The only bytes looked at one
 * by one are the last few of the buffer and the special ones. Returns -EINVAL with s->why. */
static inline int scan_line(const char *p, size_t avail, struct line_scan *s)
{
	size_t i = 0;

	s->term = 0;
	s->colons = 0;
	s->name_bad = SIZE_MAX;
	s->vec_end = 0;
#if defined(__SSE2__)
	while (i + 16 <= avail) {
		unsigned sp, co = special16(p + i, &sp);
		if (sp)
			co &= (sp & -sp) - 1; /* the ':' before the first special byte */
		if (s->colons == 0 && s->name_bad == SIZE_MAX) {
			/* Still in the first field (the name): where is its first ' ' or ','? */
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
			unsigned b = (unsigned)_mm_movemask_epi8(
				_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')),
					     _mm_cmpeq_epi8(v, _mm_set1_epi8(','))));
			if (sp)
				b &= (sp & -sp) - 1;
			if (b)
				s->name_bad = i + (size_t)__builtin_ctz(b);
		}
		while (co) {
			if (s->colons < ELEMENTSOF(s->colon))
				s->colon[s->colons] = i + (size_t)__builtin_ctz(co);
			s->colons++;
			co &= co - 1;
		}
		if (sp) {
			i += (size_t)__builtin_ctz(sp);
			s->vec_end = i;
			goto special;
		}
		i += 16;
	}
	s->vec_end = i;
#endif
	for (;;) {
		while (SWAR && i + 8 <= avail) {
			uint64_t w, m;
			memcpy(&w, p + i, 8);
			m = special_bytes(w);
			if (m) {
				i += (size_t)__builtin_ctzll(m) / 8;
				break;
			}
			i += 8;
		}
		if (i >= avail)
			break;
		unsigned char c = (unsigned char)p[i];
		if (c == ':') {
			if (s->colons < ELEMENTSOF(s->colon))
				s->colon[s->colons] = i;
			s->colons++;
			i++;
			continue;
		}
		if (c >= 0x20 && c != 0x7f) {
			i++;
			continue;
		}
		goto special;
	}
	s->len = i;
	return 0;
special:;
	unsigned char c = (unsigned char)p[i];
	if (c == '\n')
		s->term = 1;
	else if (c == '\r' && i + 1 < avail && p[i + 1] == '\n')
		s->term = 2;
	else {
		s->len = i;
		return s->why = c == 0 ? "NUL byte" : "control character", -EINVAL;
	}
	s->len = i;
	return 0;
}

/* memchr and memrchr for the fast path and the parsers, sixteen bytes a step with SSE2:
 * musl's memchr is a word at a time after a byte-wise start, its memrchr a byte at a time,
 * and they were 28 % and 6 % of an existing agent's ensure at 1,000 agents (one call per
 * line in pwfile_scan, one walk back over pi-sandbox's member list per look). Every load
 * lies inside p[0..n): the last one overlaps the one before instead of running past the
 * end, so a buffer that ends where its page ends is never read beyond. */
static inline const char *scan_chr(const char *p, size_t n, char c)
{
	size_t i = 0;

#if defined(__SSE2__)
	if (n >= 16) {
		const __m128i vc = _mm_set1_epi8(c);
		unsigned m;
		for (; i + 16 <= n; i += 16) {
			m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
				_mm_loadu_si128((const __m128i *)(const void *)(p + i)), vc));
			if (m)
				return p + i + __builtin_ctz(m);
		}
		if (i == n)
			return NULL;
		/* The last n - i bytes: the top of the block that ends at p + n. */
		m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
			    _mm_loadu_si128((const __m128i *)(const void *)(p + n - 16)), vc)) >>
		    (16 - (n - i));
		return m ? p + i + __builtin_ctz(m) : NULL;
	}
#endif
	for (; i < n; i++)
		if (p[i] == c)
			return p + i;
	return NULL;
}

static inline const char *scan_rchr(const char *p, size_t n, char c)
{
	size_t i = n; /* p[i..n) is known not to hold c */

#if defined(__SSE2__)
	if (n >= 16) {
		const __m128i vc = _mm_set1_epi8(c);
		unsigned m;
		for (; i >= 16; i -= 16) {
			m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
				_mm_loadu_si128((const __m128i *)(const void *)(p + i - 16)), vc));
			if (m)
				return p + i - 16 + (31 - __builtin_clz(m));
		}
		if (i == 0)
			return NULL;
		/* The first i bytes: the bottom of the block that starts at p. */
		m = (unsigned)_mm_movemask_epi8(
			    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), vc)) &
		    ((1u << i) - 1);
		return m ? p + (31 - __builtin_clz(m)) : NULL;
	}
#endif
	while (i > 0)
		if (p[--i] == c)
			return p + i;
	return NULL;
}

/* Whether data may hold a number the C libraries read as another spelling of an id: ':'
 * then a leading zero and a digit ("040001"), a sign or white space (glibc's files
 * parser reads ids with strtoul, which takes "+40001" and " 40001" as 40001). The start of
 * any field counts (a gecos field that merely looks like one too): the fast path's
 * searches for ":UID:" (users.c) would miss such a spelling, so any such place sends it
 * to the locked path, whose full parse compares ids as numbers (and refuses a sign or a
 * space). Sixteen places a step with SSE2, every byte classed at once: a memchr per ':'
 * (a passwd line has six) cost as much as the rest of the look. */
static inline bool scan_odd_number(const char *data, size_t len)
{
	size_t i = 0;

#if defined(__SSE2__)
	/* p[i..i+16) are the ':' places, p[i+1..i+17) the bytes after them, p[i+2..i+18)
	 * those after a '0': all three blocks inside the buffer. */
	const __m128i colon = _mm_set1_epi8(':'), zero = _mm_set1_epi8('0'),
		      nine = _mm_set1_epi8(9), tab = _mm_set1_epi8('\t'), four = _mm_set1_epi8(4),
		      lf = _mm_set1_epi8('\n');
	for (; i + 18 <= len; i += 16) {
		__m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)(data + i));
		__m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(data + i + 1));
		__m128i v2 = _mm_loadu_si128((const __m128i *)(const void *)(data + i + 2));
		__m128i d2 = _mm_sub_epi8(v2, zero); /* a digit: 0..9 unsigned */
		__m128i digit2 = _mm_cmpeq_epi8(_mm_min_epu8(d2, nine), d2);
		__m128i t1 = _mm_sub_epi8(v1, tab); /* '\t'..'\r': 0..4 unsigned */
		__m128i ws = _mm_andnot_si128(_mm_cmpeq_epi8(v1, lf),
					      _mm_cmpeq_epi8(_mm_min_epu8(t1, four), t1));
		__m128i odd = _mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(v1, _mm_set1_epi8('+')),
				     _mm_cmpeq_epi8(v1, _mm_set1_epi8('-'))),
			_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v1, _mm_set1_epi8(' ')), ws),
				     _mm_and_si128(_mm_cmpeq_epi8(v1, zero), digit2)));
		if (_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(v0, colon), odd)))
			return true;
	}
#endif
	for (; i + 1 < len; i++) {
		if (data[i] != ':')
			continue;
		char c = data[i + 1];
		if ((c == '0' && i + 2 < len && data[i + 2] >= '0' && data[i + 2] <= '9') ||
		    c == '+' || c == '-' || c == ' ' || c == '\t' || c == '\v' || c == '\f' ||
		    c == '\r')
			return true;
	}
	return false;
}

/* How many '\n' are in p[0..len): sixteen bytes a step with SSE2, counted in byte lanes
 * (a match is -1, subtracted) and summed every 255 steps, before a lane can overflow
 * (no popcount instruction in the baseline x86-64 set: it would be a libgcc call). */
static inline size_t scan_count_newlines(const char *p, size_t len)
{
	size_t n = 0, i = 0;

#if defined(__SSE2__)
	const __m128i nl = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
	while (i + 16 <= len) {
		__m128i acc = zero;
		for (unsigned k = 0; k < 255 && i + 16 <= len; k++, i += 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
			acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, nl));
		}
		__m128i sum = _mm_sad_epu8(acc, zero);
		n += (size_t)_mm_cvtsi128_si64(sum) +
		     (size_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(sum, sum));
	}
#endif
	for (; i < len; i++)
		n += p[i] == '\n';
	return n;
}

/* memmem for the lock-free confirmation's whole-file looks (users.c), sixteen places a
 * step: a place is looked at only where the needle's second and next-to-last bytes both
 * match (for ":10100:" a '1' and a '0' four bytes apart; for a user name two of its hex
 * digits), which in passwd-family text is rare, then compared whole. musl's memmem took a
 * creation's fast path from 0.21 to 0.34 ms at 2,000 agents. A needle of two or three
 * bytes ("\n0" over the registry) is looked for by its first and last: musl's memmem
 * walks those a byte at a time, a tenth of an existing agent's ensure at 1,000 agents. */
static inline const char *scan_find(const char *hay, size_t n, const char *needle, size_t m)
{
	size_t i = 0;

	if (m < 2 || n < m)
		return m <= n ? memmem(hay, n, needle, m) : NULL;
#if defined(__SSE2__)
	const size_t a = m >= 4 ? 1 : 0, b = m >= 4 ? m - 2 : m - 1;
	const __m128i na = _mm_set1_epi8(needle[a]), nb = _mm_set1_epi8(needle[b]);

	for (; i + 16 + m - 1 <= n; i += 16) {
		__m128i va = _mm_loadu_si128((const __m128i *)(const void *)(hay + i + a));
		__m128i vb = _mm_loadu_si128((const __m128i *)(const void *)(hay + i + b));
		unsigned mask = (unsigned)_mm_movemask_epi8(
			_mm_and_si128(_mm_cmpeq_epi8(va, na), _mm_cmpeq_epi8(vb, nb)));

		while (mask) {
			size_t j = i + (size_t)__builtin_ctz(mask);
			if (!memcmp(hay + j, needle, m))
				return hay + j;
			mask &= mask - 1;
		}
	}
#endif
	return memmem(hay + i, n - i, needle, m);
}
