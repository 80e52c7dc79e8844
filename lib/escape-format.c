/* Messages with escaped values: the text log's format (lib/log.h), shared with the reasons a
 * library hands back for its caller to log or answer with (why, policy_error.msg). */
#include "lib/escape.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct msgbuf {
	char *p;
	size_t size, len; /* p holds len bytes (and a NUL) of the need bytes the whole takes */
	size_t need;
};

/* Appends s[0..n) escaped by esc (escape_ctl, escape_c, escape_c_text), as much as fits;
 * need counts the whole. */
static void put(struct msgbuf *b, const char *s, size_t n,
		size_t (*esc)(const char *, size_t, char *, size_t))
{
	b->need += esc(s, n, b->p + b->len, b->size - b->len);
	b->len += strlen(b->p + b->len);
}

/* The format is the program's own text; a %s is a value and is C-escaped, and where it is
 * quoted ('%s' or "%s") its ' too (escape_c), so it cannot end the quotes around it (unquoted,
 * a ' stays: a message built by the program, "root's"); a %-s (the '-' flag, no width) is text
 * already escaped (a message built with escaped names), which passes unchanged; other
 * conversions are printf's, and every byte outside printable ASCII is escaped wherever it
 * comes from. Each byte is so escaped exactly once. */
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

size_t escape_vformat(char *out, size_t out_size, const char *cut_what, int error, const char *fmt,
		      va_list ap)
{
	struct msgbuf b = {.p = out, .size = out_size};
	char mark[64];
	size_t m, keep;

	if (!out || out_size == 0)
		return 0;
	format_text(&b, error, fmt, ap);
	if (b.need < out_size)
		return b.need;
	/* Cut between two escapes, and say so with the whole's length: what is left may not
	 * pass for the whole (a list of names whose last ones are gone). */
	m = (size_t)snprintf(mark, sizeof(mark), "...[%s: %zu bytes]", cut_what, b.need);
	if (m >= out_size) {
		snprintf(out, out_size, "%s", mark);
		return b.need;
	}
	keep = escape_boundary(out, b.len, out_size - 1 - m);
	memcpy(out + keep, mark, m + 1);
	return b.need;
}

size_t escape_format(char *out, size_t out_size, const char *fmt, ...)
{
	int error = errno;
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = escape_vformat(out, out_size, "cut", error, fmt, ap);
	va_end(ap);
	return n;
}
