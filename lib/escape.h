#pragma once

#include <stddef.h>

/* Escapers for bytes that end up in logs or JSON. Both take arbitrary bytes (names with
 * newlines, escape sequences, invalid UTF-8) and produce a NUL-terminated string that is
 * printable ASCII only; the result is truncated (never split mid-escape) to fit out_size.
 * They return the length the full escaped string would have needed, like snprintf. */

/* C-style: \n \t \\ \" and \xNN for every other byte outside 0x20..0x7e. */
size_t escape_c(const char *in, size_t in_len, char *out, size_t out_size);

/* JSON string body (without quotes): \" \\ \n \r \t \uXXXX; bytes >= 0x80 become \u00XX
 * so invalid UTF-8 cannot break a JSON reader (the value stays lossless and reversible). */
size_t escape_json(const char *in, size_t in_len, char *out, size_t out_size);
