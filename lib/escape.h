#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/macro.h"

/* Escapers for bytes that end up in logs or JSON. Both take arbitrary bytes (names with
 * newlines, escape sequences, invalid UTF-8) and produce a NUL-terminated string that is
 * printable ASCII only; the result is truncated to fit out_size, never inside an escape nor
 * inside a UTF-8 character (a cut there would leave half a character's escapes).
 * They return the length the full escaped string would have needed, like snprintf. */

/* C-style: \n \t \r \\ \" \' and \xNN for every other byte outside 0x20..0x7e. The text
 * log writes every value this way, so a value's quote cannot end the '...' around it. */
size_t escape_c(const char *in, size_t in_len, char *out, size_t out_size);

/* escape_c (json false) or escape_json (true) of in[0..in_len) into a new string of just
 * the size it needs (free it); NULL when out of memory. */
char *escape_dup(const char *in, size_t in_len, bool json);
/* escape_dup of the whole string s, C-style. */
char *escape_c_dup(const char *s);
/* s C-escaped between double quotes, for one field of a log or audit line: at most max
 * escaped bytes between the quotes. Where s needs more, the field ends "…"[cut: N bytes]
 * with s's length in bytes: outside the quotes, where no byte of s can appear (its own
 * quotes are escaped), so a value cannot forge the mark nor hide a cut. NULL when out of
 * memory (free it). */
char *escape_c_field(const char *s, size_t max);
/* The same for JSON: s as one JSON string, quotes included, at most max escaped bytes
 * between them; a cut one ends \u2026 ("...") inside its quotes (still one valid JSON
 * string), which no byte of s can produce (bytes from 0x80 up are \u00XX). NULL when out of
 * memory (free it). */
char *escape_json_field(const char *s, size_t max);

/* s[0..len) as one name quoted in a message: C-escaped between single quotes (its own '
 * comes out \', so it cannot end them), at most max escaped bytes between them, into out
 * (out_size bytes: ESCAPE_QUOTE_EXTRA more than max holds any; a smaller out lowers max).
 * Where s needs more, it is cut before a whole escape and a whole UTF-8 character and ends
 * '...'[cut: N bytes] with len: outside the quotes, where no byte of s can appear, so a value
 * can neither forge the mark nor hide a cut (escape_c_field's rule, for '...'). Returns out,
 * to be passed as a %-s value (escape_format, log_*). */
#define ESCAPE_QUOTE_EXTRA 40 /* two quotes, "[cut: N bytes]" and the NUL */
const char *escape_c_quote(const char *s, size_t len, size_t max, char *out, size_t out_size);

/* A message formatted as the text log formats its lines (lib/log.h): the format is the
 * program's own text; each %s value is C-escaped once, and where it is quoted ('%s' or "%s")
 * its ' too, so it cannot end the quotes (unquoted, a ' stays); %-s (the '-' flag, no width)
 * is text already escaped (another such message), passed unchanged but for bytes outside
 * printable ASCII, which it never holds; %m is strerror(error); numbers as printf. Into out
 * (out_size bytes, the NUL included): a longer message is cut between two escapes and ends
 * "...[CUT_WHAT: N bytes]", N the escaped length of the whole, which is returned. For the
 * reasons a library hands back (a why, a policy_error's msg): text with every name escaped
 * exactly once, which its caller logs with %-s. */
size_t escape_vformat(char *out, size_t out_size, const char *cut_what, int error, const char *fmt,
		      va_list ap) _printf_(5, 0);
/* escape_vformat with "...[cut: N bytes]" and errno for %m. */
size_t escape_format(char *out, size_t out_size, const char *fmt, ...) _printf_(3, 4);

/* escape_c but for ', which stays as it is: for a value that is not between quotes (a
 * message's own text, "root's"), where no quote of its own can end a field. */
size_t escape_c_text(const char *in, size_t in_len, char *out, size_t out_size);

/* Escapes only the bytes outside printable ASCII (as escape_c): text that is already
 * escaped passes unchanged, so the log can take it without escaping it a second time. */
size_t escape_ctl(const char *in, size_t in_len, char *out, size_t out_size);

/* JSON string body (without quotes): \" \\ \n \r \t \uXXXX; bytes >= 0x80 become \u00XX
 * so invalid UTF-8 cannot break a JSON reader (the value stays lossless and reversible). */
size_t escape_json(const char *in, size_t in_len, char *out, size_t out_size);

/* The UTF-8 form of a character that drives or rearranges a terminal though it is valid
 * text: a C1 control U+0080-U+009F (U+009B is a CSI to xterm and the Linux console, U+0085
 * a line break to some readers), U+2028/U+2029 (a line end to JavaScript before ES2019 and
 * to Unicode-aware viewers), or a bidirectional control that reorders what is shown around
 * it (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C; CVE-2021-42574). Returns its
 * length in bytes at s (left bytes readable) with the code point in *ret_cp, or 0. */
size_t utf8_display_control(const char *s, size_t left, unsigned *ret_cp);
