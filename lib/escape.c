#include "lib/escape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ESC_C, ESC_C_TEXT, ESC_JSON, ESC_CTL };

/* One byte's escape in mode into tmp (at least 8 bytes); returns its length. ESC_CTL escapes
 * only what is not printable ASCII: text already escaped passes through it unchanged. */
static size_t escape_byte(unsigned char c, int mode, char *tmp)
{
	switch (c) {
	case '\n':
		return memcpy(tmp, "\\n", 2), 2;
	case '\t':
		return memcpy(tmp, "\\t", 2), 2;
	case '\r':
		return memcpy(tmp, "\\r", 2), 2;
	case '\\':
	case '"':
		if (mode == ESC_CTL)
			break;
		return tmp[0] = '\\', tmp[1] = (char)c, 2;
	case '\'':
		/* JSON has no \' (and needs none); in text a value's own quote must not end the
		 * '...' around it. */
		if (mode != ESC_C)
			break;
		return tmp[0] = '\\', tmp[1] = '\'', 2;
	default:
		break;
	}
	if (c >= 0x20 && c < 0x7f)
		return tmp[0] = (char)c, 1;
	return (size_t)snprintf(tmp, 8, mode == ESC_JSON ? "\\u%04x" : "\\x%02x", c);
}

/* Where a cut before in[i] would split a UTF-8 character (a lead byte before i whose
 * continuation bytes run to i and past it), the index of that lead byte; else i. */
static size_t utf8_cut_point(const char *in, size_t in_len, size_t i)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t k = i;

	if (i >= in_len || (p[i] & 0xc0) != 0x80)
		return i;
	while (k > 0 && i - k < 3 && (p[k - 1] & 0xc0) == 0x80)
		k--;
	if (k == 0)
		return i;
	k--;
	if (p[k] >= 0xc2 && p[k] <= 0xf4) {
		size_t len = p[k] >= 0xf0 ? 4 : p[k] >= 0xe0 ? 3 : 2;

		if (k + len > i)
			return k;
	}
	return i;
}

/* Escapes in[0..in_len) into out, whole escapes and whole UTF-8 characters only: where the
 * next does not fit, the output ends there for good. Returns the length the whole would
 * need; *ret_used (optional) is how many input bytes out holds. */
static size_t escape(const char *in, size_t in_len, char *out, size_t out_size, int mode,
		     size_t *ret_used)
{
	size_t pos = 0, used = in_len, shown = 0;
	int full = out == NULL || out_size == 0;

	for (size_t i = 0; i < in_len; i++) {
		char tmp[8];
		size_t n = escape_byte((unsigned char)in[i], mode, tmp);

		if (!full && pos + n < out_size) {
			memcpy(out + pos, tmp, n);
			shown = pos + n;
		} else if (!full) {
			char t2[8];

			full = 1;
			used = utf8_cut_point(in, in_len, i);
			for (size_t k = used; k < i; k++)
				shown -= escape_byte((unsigned char)in[k], mode, t2);
		}
		pos += n;
	}
	if (out && out_size > 0)
		out[shown] = '\0';
	if (ret_used)
		*ret_used = used;
	return pos;
}

size_t escape_c(const char *in, size_t in_len, char *out, size_t out_size)
{
	return escape(in, in_len, out, out_size, ESC_C, NULL);
}

char *escape_dup(const char *in, size_t in_len, bool json)
{
	int mode = json ? ESC_JSON : ESC_C;
	size_t need = escape(in, in_len, NULL, 0, mode, NULL) + 1;
	char *out = malloc(need);

	if (out)
		escape(in, in_len, out, need, mode, NULL);
	return out;
}

char *escape_c_dup(const char *s)
{
	return escape_dup(s, strlen(s), false);
}

size_t escape_json(const char *in, size_t in_len, char *out, size_t out_size)
{
	return escape(in, in_len, out, out_size, ESC_JSON, NULL);
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

/* s[0..len) escaped between quotes q into out (out_size > max + 40), at most max escaped
 * bytes between them, never cut inside an escape or a UTF-8 character. A cut is marked where
 * no byte of s can forge it: in text after the closing quote (s's own quotes come out
 * escaped), in JSON as \u2026 ("...") before it (every byte of s from 0x80 up comes out as
 * \u00XX, never as \u2026). */
static void quote_into(const char *s, size_t len, size_t max, int mode, char q, char *out,
		       size_t out_size)
{
	size_t need = escape(s, len, NULL, 0, mode, NULL);
	size_t body = need < max ? need : max;

	out[0] = q;
	escape(s, len, out + 1, body + 1, mode, NULL);
	body = 1 + strlen(out + 1);
	if (need <= max)
		snprintf(out + body, out_size - body, "%c", q);
	else if (mode == ESC_JSON)
		snprintf(out + body, out_size - body, "\\u2026%c", q);
	else
		snprintf(out + body, out_size - body, "%c[cut: %zu bytes]", q, len);
}

static char *escape_field(const char *s, size_t max, int mode)
{
	size_t len = strlen(s), need = escape(s, len, NULL, 0, mode, NULL);
	size_t size = (need < max ? need : max) + 48;
	char *out = malloc(size);

	if (out)
		quote_into(s, len, max, mode, '"', out, size);
	return out;
}

const char *escape_c_quote(const char *s, size_t len, size_t max, char *out, size_t out_size)
{
	if (out_size < ESCAPE_QUOTE_EXTRA) {
		if (out_size)
			out[0] = '\0';
		return out;
	}
	if (max > out_size - ESCAPE_QUOTE_EXTRA)
		max = out_size - ESCAPE_QUOTE_EXTRA;
	quote_into(s, len, max, ESC_C, '\'', out, out_size);
	return out;
}

char *escape_c_field(const char *s, size_t max)
{
	return escape_field(s, max, ESC_C);
}

char *escape_json_field(const char *s, size_t max)
{
	return escape_field(s, max, ESC_JSON);
}

size_t escape_c_text(const char *in, size_t in_len, char *out, size_t out_size)
{
	return escape(in, in_len, out, out_size, ESC_C_TEXT, NULL);
}

size_t escape_ctl(const char *in, size_t in_len, char *out, size_t out_size)
{
	return escape(in, in_len, out, out_size, ESC_CTL, NULL);
}
