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
