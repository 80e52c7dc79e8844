#include "lib/escape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t escape(const char *in, size_t in_len, char *out, size_t out_size, int json)
{
	size_t pos = 0;
	int full = out == NULL || out_size == 0;

	for (size_t i = 0; i < in_len; i++) {
		unsigned char c = (unsigned char)in[i];
		char tmp[8];
		size_t n = 2;

		switch (c) {
		case '\n':
			memcpy(tmp, "\\n", 2);
			break;
		case '\t':
			memcpy(tmp, "\\t", 2);
			break;
		case '\r':
			memcpy(tmp, "\\r", 2);
			break;
		case '\\':
			memcpy(tmp, "\\\\", 2);
			break;
		case '"':
			memcpy(tmp, "\\\"", 2);
			break;
		default:
			if (c >= 0x20 && c < 0x7f)
				n = 1, tmp[0] = (char)c;
			else
				n = (size_t)snprintf(tmp, sizeof(tmp), json ? "\\u%04x" : "\\x%02x",
						     c);
			break;
		}
		/* Whole escapes only: once one does not fit, the output is closed for good. */
		if (!full && pos + n < out_size) {
			memcpy(out + pos, tmp, n);
			out[pos + n] = '\0';
		} else if (!full) {
			out[pos] = '\0';
			full = 1;
		}
		pos += n;
	}
	if (out && out_size > 0 && in_len == 0)
		out[0] = '\0';
	return pos;
}

size_t escape_c(const char *in, size_t in_len, char *out, size_t out_size)
{
	return escape(in, in_len, out, out_size, 0);
}

char *escape_dup(const char *in, size_t in_len, bool json)
{
	size_t need = escape(in, in_len, NULL, 0, json) + 1;
	char *out = malloc(need);

	if (out)
		escape(in, in_len, out, need, json);
	return out;
}

char *escape_c_dup(const char *s)
{
	return escape_dup(s, strlen(s), false);
}

size_t escape_json(const char *in, size_t in_len, char *out, size_t out_size)
{
	return escape(in, in_len, out, out_size, 1);
}

size_t utf8_display_control(const char *s, size_t left, unsigned *ret_cp)
{
	const unsigned char *p = (const unsigned char *)s;

	if (left >= 2 && p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
		return *ret_cp = p[1], 2;
	if (left >= 2 && p[0] == 0xd8 && p[1] == 0x9c)
		return *ret_cp = 0x61c, 2;
	if (left < 3 || p[0] != 0xe2)
		return 0;
	if ((p[1] == 0x80 && ((p[2] >= 0xa8 && p[2] <= 0xae) || p[2] == 0x8e || p[2] == 0x8f)) ||
	    (p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9))
		return *ret_cp = 0x2000 | (p[1] & 0x3f) << 6 | (p[2] & 0x3f), 3;
	return 0;
}

char *escape_c_field(const char *s, size_t max)
{
	size_t len = strlen(s), need = escape(s, len, NULL, 0, 0);
	size_t body = need < max ? need : max;
	char *out = malloc(body + 48);

	if (!out)
		return NULL;
	out[0] = '"';
	escape(s, len, out + 1, body + 1, 0);
	body = strlen(out + 1);
	if (need > max)
		snprintf(out + 1 + body, 47, "\"[cut: %zu bytes]", len);
	else
		snprintf(out + 1 + body, 47, "\"");
	return out;
}
