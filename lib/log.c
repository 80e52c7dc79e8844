#include "lib/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/escape.h"
#include "lib/fd-util.h"

static const char *program = "pistis";
static enum log_level max_level = LOG_LVL_INFO;
static enum log_format format = LOG_FORMAT_TEXT;

void log_set_program(const char *name)
{
	const char *slash = name ? strrchr(name, '/') : NULL;

	if (name)
		program = slash ? slash + 1 : name;
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

struct msgbuf {
	char *p;
	size_t size, len; /* p holds len bytes (and a NUL) of the need bytes the whole takes */
	size_t need;
};

/* Appends s[0..n) escaped by esc (escape_ctl, escape_c, escape_c_text: lib/escape.h), as
 * much as fits; need counts the whole. */
static void put(struct msgbuf *b, const char *s, size_t n,
		size_t (*esc)(const char *, size_t, char *, size_t))
{
	b->need += esc(s, n, b->p + b->len, b->size - b->len);
	b->len += strlen(b->p + b->len);
}

/* The text format's message: the format is the program's own text; a %s is a value and is
 * C-escaped, and where it is quoted ('%s' or "%s") its ' too (escape_c), so it cannot end
 * the quotes around it (unquoted, a ' stays: a message built by the program, "root's");
 * a %-s (the '-' flag, no width) is text already escaped (a message built with escaped
 * names), which passes unchanged; other conversions are printf's, and every byte outside
 * printable ASCII is escaped wherever it comes from. Each byte is so escaped exactly once. */
_printf_(3, 0) static void format_text(struct msgbuf *b, int error, const char *fmt, va_list ap)
{
	const char *f = fmt;

	b->p[0] = '\0';
	while (*f) {
		const char *pct = strchr(f, '%'), *spec;
		char conv, one[64], buf[128];
		int lmod = 0, width = -1, prec = -1;
		bool minus = false;
		size_t sl;

		if (!pct) {
			put(b, f, strlen(f), escape_ctl);
			break;
		}
		put(b, f, (size_t)(pct - f), escape_ctl);
		spec = f = pct + 1;
		while (*f && strchr("-+ #0'", *f))
			minus |= *f++ == '-';
		if (*f == '*')
			f++, width = va_arg(ap, int);
		else if (*f >= '0' && *f <= '9')
			for (width = 0; *f >= '0' && *f <= '9'; f++)
				width = width * 10 + (*f - '0');
		if (*f == '.') {
			f++;
			if (*f == '*')
				f++, prec = va_arg(ap, int);
			else
				for (prec = 0; *f >= '0' && *f <= '9'; f++)
					prec = prec * 10 + (*f - '0');
		}
		while (*f && strchr("hlLqjzt", *f))
			lmod = lmod * 256 + *f++;
		conv = *f ? *f++ : '\0';
		switch (conv) {
		case '%':
			put(b, "%", 1, escape_ctl);
			continue;
		case 'm':
			put(b, strerror(error), strlen(strerror(error)), escape_ctl);
			continue;
		case 's': {
			const char *v = va_arg(ap, const char *);
			bool quoted = pct > fmt && (pct[-1] == '\'' || pct[-1] == '"');
			size_t n, before = b->need;

			if (!v)
				v = "(null)";
			n = prec >= 0 ? strnlen(v, (size_t)prec) : strlen(v);
			if (minus && width < 0) {
				put(b, v, n, escape_ctl);
				continue;
			}
			if (!minus)
				for (size_t w = escape_c(v, n, NULL, 0); (int)w < width; w++)
					put(b, " ", 1, escape_ctl);
			put(b, v, n, quoted ? escape_c : escape_c_text);
			for (size_t w = b->need - before; minus && (int)w < width; w++)
				put(b, " ", 1, escape_ctl);
			continue;
		}
		case '\0':
			continue;
		default:
			break;
		}
		/* One conversion of a number or a pointer: printf formats it, from its flags,
		 * width, precision and length as given (the caller's format was checked by the
		 * compiler, so the type read here is the one passed; a * is read above). */
		sl = (size_t)(f - spec);
		if (conv == 'n' || !strchr("diouxXcpeEfFgGaA", conv) || sl + 40 > sizeof(one)) {
			(void)va_arg(ap, void *); /* never written nor guessed at */
			continue;
		}
		{
			size_t k = 0, nflags = strspn(spec, "-+ #0'");
			const char *mods = spec + strcspn(spec, "hlLqjzt");

			one[k++] = '%';
			memcpy(one + k, spec, nflags);
			k += nflags;
			if (width >= 0)
				k += (size_t)snprintf(one + k, sizeof(one) - k, "%d",
						      width % 10000);
			if (prec >= 0)
				k += (size_t)snprintf(one + k, sizeof(one) - k, ".%d",
						      prec % 10000);
			if (mods < f - 1) {
				memcpy(one + k, mods, (size_t)(f - 1 - mods));
				k += (size_t)(f - 1 - mods);
			}
			one[k++] = conv;
			one[k] = '\0';
		}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		if (strchr("di", conv)) {
			if (lmod == 'l' * 256 + 'l' || lmod == 'q' || lmod == 'j')
				snprintf(buf, sizeof(buf), one, va_arg(ap, long long));
			else if (lmod == 'l' || lmod == 'z' || lmod == 't')
				snprintf(buf, sizeof(buf), one, va_arg(ap, long));
			else
				snprintf(buf, sizeof(buf), one, va_arg(ap, int));
		} else if (strchr("ouxXc", conv)) {
			if (lmod == 'l' * 256 + 'l' || lmod == 'q' || lmod == 'j')
				snprintf(buf, sizeof(buf), one, va_arg(ap, unsigned long long));
			else if (lmod == 'l' || lmod == 'z' || lmod == 't')
				snprintf(buf, sizeof(buf), one, va_arg(ap, unsigned long));
			else
				snprintf(buf, sizeof(buf), one, va_arg(ap, unsigned));
		} else if (conv == 'p') {
			snprintf(buf, sizeof(buf), one, va_arg(ap, void *));
		} else if (lmod == 'L') {
			snprintf(buf, sizeof(buf), one, va_arg(ap, long double));
		} else {
			snprintf(buf, sizeof(buf), one, va_arg(ap, double));
		}
#pragma GCC diagnostic pop
		put(b, buf, strlen(buf), escape_ctl);
	}
}

/* The longest prefix of escaped text s (of len bytes) at most max bytes long that ends
 * between escapes. */
static size_t escape_boundary(const char *s, size_t len, size_t max)
{
	size_t i = 0, last = 0;

	while (i < len && i <= max) {
		last = i;
		if (s[i] != '\\')
			i++;
		else if (i + 1 < len && s[i + 1] == 'x')
			i += 4;
		else
			i += 2;
	}
	return i <= max && i >= len ? len : last;
}

int log_internal(enum log_level level, int error, const char *file, int line, const char *fmt, ...)
{
	/* esc holds the whole of msg escaped (at most 6 bytes a byte, JSON's \u00XX): a line
	 * is cut at most once, in msg, and says so there. */
	char msg[LOG_LINE_MAX], esc[6 * LOG_LINE_MAX], out[6 * LOG_LINE_MAX + 256];
	int saved = errno;
	int n;
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
		escape_json(msg, (size_t)n, esc, sizeof(esc));
		clock_gettime(CLOCK_REALTIME, &ts);
		n = snprintf(out, sizeof(out),
			     "{\"ts\":%lld.%03ld,\"level\":\"%s\",\"prog\":\"%s\",\"msg\":\"%s\"%s",
			     (long long)ts.tv_sec, ts.tv_nsec / 1000000, level_name(level), program,
			     esc, error ? "" : "}\n");
		if (error && (size_t)n < sizeof(out))
			n += snprintf(out + n, sizeof(out) - (size_t)n, ",\"errno\":%d}\n", error);
	} else {
		/* Messages quote agent-controlled names: each value is escaped as it goes in,
		 * so a name with a newline, an escape sequence or a quote cannot forge a line,
		 * drive the terminal or end its '...' early. */
		struct msgbuf b = {.p = esc, .size = sizeof(esc)};

		va_start(ap, fmt);
		format_text(&b, error, fmt, ap);
		va_end(ap);
		if (b.need >= sizeof(msg)) {
			char mark[48];
			int m = snprintf(mark, sizeof(mark), "...[line cut: %zu bytes]", b.need);
			size_t keep = escape_boundary(esc, b.len, sizeof(msg) - 1 - (size_t)m);

			memcpy(esc + keep, mark, (size_t)m + 1);
		}
		if (max_level >= LOG_LVL_DEBUG)
			n = snprintf(out, sizeof(out), "%s: %s (%s:%d)\n", program, esc, file,
				     line);
		else
			n = snprintf(out, sizeof(out), "%s: %s\n", program, esc);
	}
	if (n > 0) {
		if ((size_t)n >= sizeof(out))
			n = sizeof(out) - 1, out[n - 1] = '\n';
		(void)loop_write(STDERR_FILENO, out, (size_t)n);
	}
	errno = saved;
	return -error;
}

void log_bad_option(char *const *argv, int ind, int opt, const char *help)
{
	const char *a = ind > 0 ? argv[ind - 1] : NULL;

	if ((!a || strncmp(a, "--", 2)) && opt > 0x20 && opt < 0x7f)
		log_error("option '-%c' is unknown or needs a value; see '%s'", opt, help);
	else if (a)
		log_error("option '%s' is unknown or needs a value; see '%s'", a, help);
	else
		log_error("bad option; see '%s'", help);
}
