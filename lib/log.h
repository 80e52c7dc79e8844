#pragma once

#include <stdbool.h>

#include "lib/macro.h"

/* The longest message a log line carries (before escaping); a longer one is cut and its
 * end says so ("...[line cut: N bytes]"). */
#define LOG_LINE_MAX 2048

enum log_level {
	LOG_LVL_ERROR = 3,
	LOG_LVL_WARNING = 4,
	LOG_LVL_NOTICE = 5,
	LOG_LVL_INFO = 6,
	LOG_LVL_DEBUG = 7,
};

enum log_format {
	LOG_FORMAT_TEXT,
	LOG_FORMAT_JSON,
};

void log_set_program(const char *name);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
void log_set_format(enum log_format format);

/* Writes one line to stderr ("prog: message"); returns -abs(error) so callers can
 * `return log_error_errno(r, "Failed to …: %m")`. %m expands to strerror(abs(error)).
 * In the text format each %s value is C-escaped as it goes in (every byte outside
 * printable ASCII; inside '%s' or "%s" its ' too, so it cannot end the quotes), the format
 * itself is the program's text; %-s (the '-' flag, no width) passes a value that is already
 * escaped text (a reason built with escaped names), so no byte is escaped twice. The JSON
 * format escapes the whole message once. lib/escape-format.c, format_text. */
int log_internal(enum log_level level, int error, const char *file, int line, const char *fmt, ...)
	_printf_(5, 6);

#define log_full_errno(level, error, ...)                                                          \
	log_internal((level), (error), __FILE__, __LINE__, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_LVL_ERROR, (error), __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_LVL_WARNING, (error), __VA_ARGS__)
#define log_debug_errno(error, ...) log_full_errno(LOG_LVL_DEBUG, (error), __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_LVL_ERROR, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_LVL_WARNING, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_LVL_NOTICE, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_LVL_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_LVL_DEBUG, 0, __VA_ARGS__)

/* For a program that forwards another's bytes to its own stderr (pistisd run a command's,
 * pistis a remote command's): whether what it forwarded last left a line open (ended
 * without a newline). The next log line then starts with one, so it is a line of its own,
 * not the end of a line the forwarded bytes began ("pistisd: ok " glued before a real
 * warning hid it from a reader of whole lines); log_line_open says whether one is owed,
 * for a line the program writes itself (pistisd run --json's result). Written at once
 * with the log line: cleared by it. */
void log_set_line_open(bool open);
bool log_line_open(void);

/* For getopt_long's '?' (with opterr = 0 set before the loop: getopt would print the
 * option raw, and argv may carry an agent's bytes): logs the bad option escaped, like every
 * line, and names the help to see. ind and opt are optind and optopt. */
void log_bad_option(char *const *argv, int ind, int opt, const char *help);
