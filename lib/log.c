#include "lib/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/macro.h"

/* A JSON line's escaped message at most: with the rest of the line (the program's name is
 * one of ours) under PIPE_BUF (4096), which a pipe writes whole. */
#define LOG_JSON_MSG_MAX 3584u

static const char *program = "pistis";
static enum log_level max_level = LOG_LVL_INFO;
static enum log_format format = LOG_FORMAT_TEXT;
static bool line_open;

void log_set_program(const char *name)
{
	if (name)
		program = path_tail(name);
}

void log_set_level(enum log_level level)
{
	max_level = level;
}

enum log_level log_get_level(void)
{
	return max_level;
}

void log_set_format(enum log_format f)
{
	format = f;
}

void log_set_line_open(bool open)
{
	line_open = open;
}

bool log_line_open(void)
{
	return line_open;
}

static const char *level_name(enum log_level level)
{
	switch (level) {
	case LOG_LVL_ERROR:
		return "error";
	case LOG_LVL_WARNING:
		return "warning";
	case LOG_LVL_NOTICE:
		return "notice";
	case LOG_LVL_INFO:
		return "info";
	case LOG_LVL_DEBUG:
		return "debug";
	default:
		return "unknown";
	}
}

int log_internal(enum log_level level, int error, const char *file, int line, const char *fmt, ...)
{
	/* esc holds the whole of msg escaped (at most 6 bytes a byte, JSON's \u00XX): a line
	 * is cut at most once, in msg, and says so there. */
	char msg[LOG_LINE_MAX], esc[6 * LOG_LINE_MAX], out[6 * LOG_LINE_MAX + 256];
	int saved = errno;
	int n, o = line_open; /* out[0] the newline a line left open is owed */
	va_list ap;

	if (error < 0)
		error = -error;
	if (level > max_level)
		return -error;

	if (format == LOG_FORMAT_JSON) {
		struct timespec ts;

		/* A JSON string carries any byte (escape_json, once): the values go in as they
		 * are, lossless. %m must print the error we were handed, not errno by now. */
		errno = error;
		va_start(ap, fmt);
		n = vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		if (n < 0)
			n = 0;
		if ((size_t)n >= sizeof(msg)) {
			/* A cut line says where and how long it was: nothing after the cut may
			 * pass for the whole (an audit line whose argv runs past the bound). */
			char mark[48];
			int m = snprintf(mark, sizeof(mark), "...[line cut: %d bytes]", n);

			memcpy(msg + sizeof(msg) - 1 - (size_t)m, mark, (size_t)m + 1);
			n = sizeof(msg) - 1;
		}
		if (escape_json(msg, (size_t)n, esc, sizeof(esc)) > LOG_JSON_MSG_MAX) {
			/* Escaped, a line of 2 KiB can be 12 (every byte from 0x80 up is six):
			 * past the PIPE_BUF a pipe takes in one piece, where another writer's
			 * line can land inside it. Cut at an escape's end, marked with the
			 * message's whole length. */
			char mark[48];
			int m = snprintf(mark, sizeof(mark), "...[line cut: %d bytes]", n);

			escape_json(msg, (size_t)n, esc, LOG_JSON_MSG_MAX + 1 - (size_t)m);
			memcpy(esc + strlen(esc), mark, (size_t)m + 1);
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		n = snprintf(out + o, sizeof(out) - (size_t)o,
			     "{\"ts\":%lld.%03ld,\"level\":\"%s\",\"prog\":\"%s\",\"msg\":\"%s\"%s",
			     (long long)ts.tv_sec, ts.tv_nsec / 1000000, level_name(level), program,
			     esc, error ? "" : "}\n");
		if (error && (size_t)(o + n) < sizeof(out))
			n += snprintf(out + o + n, sizeof(out) - (size_t)(o + n),
				      ",\"errno\":%d}\n", error);
	} else {
		/* Messages quote agent-controlled names: each value is escaped as it goes in,
		 * so a name with a newline, an escape sequence or a quote cannot forge a line,
		 * drive the terminal or end its '...' early (lib/escape-format.c). */
		va_start(ap, fmt);
		escape_vformat(esc, sizeof(msg), "line cut", error, fmt, ap);
		va_end(ap);
		if (max_level >= LOG_LVL_DEBUG)
			n = snprintf(out + o, sizeof(out) - (size_t)o, "%s: %s (%s:%d)\n", program,
				     esc, file, line);
		else
			n = snprintf(out + o, sizeof(out) - (size_t)o, "%s: %s\n", program, esc);
	}
	if (n > 0) {
		if ((size_t)(o + n) >= sizeof(out))
			n = (int)sizeof(out) - 1 - o, out[o + n - 1] = '\n';
		if (o)
			out[0] = '\n';
		(void)loop_write(STDERR_FILENO, out, (size_t)(o + n));
		line_open = false;
	}
	errno = saved;
	return -error;
}

void log_bad_option(char *const *argv, int ind, int opt, const char *help)
{
	const char *a = ind > 0 ? argv[ind - 1] : NULL;

	/* The letter as a value, escaped like any: as %c, a ' or \ read as the quote's end
	 * or an escape (option '-'' is unknown), and a control byte went out raw. */
	if ((!a || strncmp(a, "--", 2)) && opt > 0 && opt < 0x100) {
		char o[3] = {'-', (char)opt, '\0'};

		log_error("option '%s' is unknown or needs a value; see '%s'", o, help);
	} else if (a)
		log_error("option '%s' is unknown or needs a value; see '%s'", a, help);
	else
		log_error("bad option; see '%s'", help);
}
