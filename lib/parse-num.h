#pragma once

/* Numbers from the command line, strictly: decimal digits only (no sign, no white space,
 * no "0x"; strtoul takes all three, and " -5" wrapped to 2^64 - 5), at most max. */

#include <errno.h>
#include <stdint.h>

/* The digits at s: 0 and *ret, *ret_end at the first byte that is not one (NULL: that
 * byte must be the end). -EINVAL without a digit first (or with bytes left over and
 * ret_end NULL), -ERANGE past max. */
static inline int parse_uint_strict(const char *s, uint64_t max, const char **ret_end,
				    uint64_t *ret)
{
	uint64_t v = 0;
	const char *p = s;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (d > max || v > (max - d) / 10) /* max - d must not wrap (max < 9) */
			return -ERANGE;
		v = v * 10 + d;
	}
	if (ret_end)
		*ret_end = p;
	else if (*p)
		return -EINVAL;
	*ret = v;
	return 0;
}

/* A size in bytes, strictly: digits, then at most one suffix K, M, G or T (powers of 1024;
 * k too), at least min and at most max. -EINVAL for anything else, -ERANGE outside. */
static inline int parse_size_strict(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	const char *end = NULL;
	uint64_t v, mul = 1;
	int r = parse_uint_strict(s, UINT64_MAX, &end, &v);

	if (r < 0)
		return r;
	switch (*end) {
	case 0:
		break;
	case 'K':
	case 'k':
		mul = 1ULL << 10;
		break;
	case 'M':
		mul = 1ULL << 20;
		break;
	case 'G':
		mul = 1ULL << 30;
		break;
	case 'T':
		mul = 1ULL << 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1])
		return -EINVAL;
	if (v > max / mul || v * mul < min)
		return -ERANGE;
	*ret = v * mul;
	return 0;
}
