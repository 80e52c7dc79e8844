/* Pure /etc/passwd-family parser and editor: see pwfile.h. */
#include "sandbox-users/pwfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"

static const struct {
	const char *name;
	unsigned fields;
	int id_field;  /* numeric id (uid or gid), -1: none */
	int gid_field; /* passwd's primary gid */
} kinds[_PWFILE_KIND_MAX] = {
	[PWFILE_PASSWD] = {"passwd", 7, 2, 3},
	[PWFILE_GROUP] = {"group", 4, 2, -1},
	[PWFILE_SHADOW] = {"shadow", 9, -1, -1},
	[PWFILE_GSHADOW] = {"gshadow", 4, -1, -1},
};

const char *pwfile_kind_name(enum pwfile_kind kind)
{
	return kind < _PWFILE_KIND_MAX ? kinds[kind].name : "?";
}

static void line_text(const struct pwfile *f, const struct pwfile_line *l, const char **ret,
		      size_t *ret_len)
{
	if (l->repl) {
		*ret = l->repl;
		*ret_len = strlen(l->repl);
	} else {
		*ret = f->buf + l->off;
		*ret_len = l->len;
	}
}

/* Strict decimal id: 1-10 digits, no sign or space, at most PWFILE_ID_MAX. */
static int parse_id(const char *p, size_t len, uint32_t *ret)
{
	uint64_t v = 0;

	if (len == 0 || len > 10)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	if (v > PWFILE_ID_MAX)
		return -ERANGE;
	*ret = (uint32_t)v;
	return 0;
}

/* Classify and check one line (terminator already removed). Comments, blank lines and NIS
 * compat lines ("+", "-") are kept, never interpreted. */
static int parse_line(enum pwfile_kind kind, const char *p, size_t len, struct pwfile_line *l,
		      const char **ret_why)
{
	const char *field[9];
	size_t flen[9];
	unsigned n = 0;
	size_t start = 0;

	l->entry = false;
	if (len > (kind == PWFILE_GROUP || kind == PWFILE_GSHADOW ? PWFILE_GROUP_LINE_MAX
								  : PWFILE_LINE_MAX))
		return *ret_why = "line too long", -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c < 0x20 || c == 0x7f)
			return *ret_why = "control character", -EINVAL;
	}
	if (len == 0 || p[0] == '#' || p[0] == '+' || p[0] == '-')
		return 0;
	if (strspn(p, " \t") >= len)
		return 0;

	for (size_t i = 0; i <= len; i++) {
		if (i < len && p[i] != ':')
			continue;
		if (n == kinds[kind].fields)
			return *ret_why = "too many fields", -EINVAL;
		field[n] = p + start;
		flen[n] = i - start;
		n++;
		start = i + 1;
	}
	if (n != kinds[kind].fields)
		return *ret_why = "too few fields", -EINVAL;
	if (flen[0] == 0)
		return *ret_why = "empty name", -EINVAL;
	if (memchr(field[0], ' ', flen[0]) || memchr(field[0], ',', flen[0]))
		return *ret_why = "invalid name", -EINVAL;
	l->name_len = flen[0];
	l->id = 0;
	l->gid = 0;
	if (kinds[kind].id_field >= 0 &&
	    parse_id(field[kinds[kind].id_field], flen[kinds[kind].id_field], &l->id) < 0)
		return *ret_why = kind == PWFILE_PASSWD ? "invalid uid" : "invalid gid", -EINVAL;
	if (kinds[kind].gid_field >= 0 &&
	    parse_id(field[kinds[kind].gid_field], flen[kinds[kind].gid_field], &l->gid) < 0)
		return *ret_why = "invalid gid", -EINVAL;
	if (kind == PWFILE_GROUP || kind == PWFILE_GSHADOW) {
		size_t members = flen[n - 1] ? 1 : 0;
		for (size_t i = 0; i < flen[n - 1]; i++)
			members += field[n - 1][i] == ',';
		if (members > PWFILE_MEMBERS_MAX)
			return *ret_why = "too many members", -EINVAL;
	}
	l->entry = true;
	return 0;
}

static int grow(struct pwfile *f)
{
	if (f->n_lines < f->cap_lines)
		return 0;
	if (f->n_lines >= PWFILE_LINES_MAX + 64)
		return -E2BIG;
	size_t cap = f->cap_lines ? f->cap_lines * 2 : 64;
	struct pwfile_line *n = reallocarray(f->lines, cap, sizeof(*n));
	if (!n)
		return -ENOMEM;
	f->lines = n;
	f->cap_lines = cap;
	return 0;
}

void pwfile_done(struct pwfile *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_lines; i++)
		free(f->lines[i].repl);
	free(f->lines);
	free(f->buf);
	memset(f, 0, sizeof(*f));
}

int pwfile_parse(enum pwfile_kind kind, const char *data, size_t len, struct pwfile *ret,
		 size_t *ret_line, const char **ret_why)
{
	struct pwfile f = {.kind = kind};
	const char *why = NULL;
	size_t lineno = 0;
	int r;

	if (kind >= _PWFILE_KIND_MAX)
		return -EINVAL;
	if (ret_line)
		*ret_line = 0;
	if (len > PWFILE_SIZE_MAX) {
		if (ret_why)
			*ret_why = "file too large";
		return -EFBIG;
	}
	f.buf = malloc(len + 1);
	if (!f.buf)
		return -ENOMEM;
	memcpy(f.buf, data, len);
	f.buf[len] = '\0';
	f.len = len;

	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(f.buf + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - f.buf) : len;
		struct pwfile_line l = {.off = pos, .len = end - pos, .term = nl ? 1 : 0};

		lineno++;
		if (lineno > PWFILE_LINES_MAX) {
			why = "too many lines";
			r = -E2BIG;
			goto fail;
		}
		if (nl && l.len > 0 && f.buf[end - 1] == '\r') {
			l.len--;
			l.term = 2;
		}
		if (memchr(f.buf + l.off, '\0', l.len)) {
			why = "NUL byte";
			r = -EINVAL;
			goto fail;
		}
		r = parse_line(kind, f.buf + l.off, l.len, &l, &why);
		if (r < 0)
			goto fail;
		r = grow(&f);
		if (r < 0)
			goto fail;
		f.lines[f.n_lines++] = l;
		pos = nl ? end + 1 : len;
	}
	f.n_orig = f.n_lines;
	*ret = f;
	return 0;
fail:
	if (ret_line)
		*ret_line = lineno;
	if (ret_why)
		*ret_why = why;
	pwfile_done(&f);
	return r;
}

int pwfile_format(const struct pwfile *f, char **ret, size_t *ret_len)
{
	size_t total = 0, last = SIZE_MAX, o = 0;
	char *out;

	for (size_t i = 0; i < f->n_lines; i++) {
		const char *p;
		size_t n;
		if (f->lines[i].deleted)
			continue;
		line_text(f, &f->lines[i], &p, &n);
		total += n + 2;
		last = i;
	}
	out = malloc(total + 1);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < f->n_lines; i++) {
		const struct pwfile_line *l = &f->lines[i];
		const char *p;
		size_t n;
		if (l->deleted)
			continue;
		line_text(f, l, &p, &n);
		memcpy(out + o, p, n);
		o += n;
		if (l->term == 2)
			out[o++] = '\r';
		/* A last line without newline gets one only when something follows it. */
		if (l->term != 0 || i != last)
			out[o++] = '\n';
	}
	out[o] = '\0';
	*ret = out;
	*ret_len = o;
	return 0;
}

static bool name_is(const struct pwfile *f, const struct pwfile_line *l, const char *name,
		    size_t name_len)
{
	const char *p;
	size_t n;

	if (!l->entry || l->deleted || l->name_len != name_len)
		return false;
	line_text(f, l, &p, &n);
	return memcmp(p, name, name_len) == 0;
}

ssize_t pwfile_find_name(const struct pwfile *f, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < f->n_lines; i++)
		if (name_is(f, &f->lines[i], name, len))
			return (ssize_t)i;
	return -1;
}

ssize_t pwfile_find_id(const struct pwfile *f, uint32_t id)
{
	if (kinds[f->kind].id_field < 0)
		return -1;
	for (size_t i = 0; i < f->n_lines; i++)
		if (f->lines[i].entry && !f->lines[i].deleted && f->lines[i].id == id)
			return (ssize_t)i;
	return -1;
}

int pwfile_field(const struct pwfile *f, size_t idx, unsigned i, const char **ret, size_t *ret_len)
{
	const char *p, *end;
	size_t n;

	if (idx >= f->n_lines || !f->lines[idx].entry || i >= kinds[f->kind].fields)
		return -EINVAL;
	line_text(f, &f->lines[idx], &p, &n);
	end = p + n;
	for (; i > 0; i--) {
		p = memchr(p, ':', (size_t)(end - p));
		if (!p)
			return -EINVAL;
		p++;
	}
	const char *c = memchr(p, ':', (size_t)(end - p));
	*ret = p;
	*ret_len = c ? (size_t)(c - p) : (size_t)(end - p);
	return 0;
}

int pwfile_append(struct pwfile *f, const char *line)
{
	struct pwfile_line l = {.term = 1};
	const char *why = NULL;
	size_t len = strlen(line);
	int r;

	r = parse_line(f->kind, line, len, &l, &why);
	if (r < 0)
		return r;
	if (!l.entry)
		return -EINVAL;
	r = grow(f);
	if (r < 0)
		return r;
	l.repl = strdup(line);
	if (!l.repl)
		return -ENOMEM;
	f->lines[f->n_lines++] = l;
	f->changed = true;
	return 0;
}

void pwfile_delete(struct pwfile *f, size_t idx)
{
	if (idx < f->n_lines && !f->lines[idx].deleted) {
		f->lines[idx].deleted = true;
		f->changed = true;
	}
}

/* Walk the comma-separated members field; calls back with each member's span. */
static bool members_contain(const char *p, size_t n, const char *name)
{
	size_t nl = strlen(name);

	for (size_t s = 0; s <= n;) {
		const char *c = memchr(p + s, ',', n - s);
		size_t e = c ? (size_t)(c - p) : n;
		if (e - s == nl && memcmp(p + s, name, nl) == 0)
			return true;
		s = e + 1;
	}
	return false;
}

bool pwfile_member_has(const struct pwfile *f, size_t idx, const char *name)
{
	const char *p;
	size_t n;

	if (f->kind != PWFILE_GROUP && f->kind != PWFILE_GSHADOW)
		return false;
	if (pwfile_field(f, idx, kinds[f->kind].fields - 1, &p, &n) < 0)
		return false;
	return members_contain(p, n, name);
}

static int replace_line(struct pwfile *f, size_t idx, char *text)
{
	struct pwfile_line l = f->lines[idx];
	const char *why = NULL;
	int r;

	r = parse_line(f->kind, text, strlen(text), &l, &why);
	if (r < 0 || !l.entry) {
		free(text);
		return r < 0 ? r : -EINVAL;
	}
	free(f->lines[idx].repl);
	l.repl = text;
	f->lines[idx] = l;
	f->changed = true;
	return 1;
}

int pwfile_member_add(struct pwfile *f, size_t idx, const char *name)
{
	const char *line, *members;
	size_t line_len, mlen, nlen = strlen(name);
	char *text;

	if (f->kind != PWFILE_GROUP && f->kind != PWFILE_GSHADOW)
		return -EINVAL;
	if (nlen == 0 || strpbrk(name, ":,\n\r "))
		return -EINVAL;
	if (pwfile_field(f, idx, kinds[f->kind].fields - 1, &members, &mlen) < 0)
		return -EINVAL;
	if (members_contain(members, mlen, name))
		return 0;
	line_text(f, &f->lines[idx], &line, &line_len);
	/* members is the last field: it runs to the end of the line. */
	text = malloc(line_len + 1 + nlen + 1);
	if (!text)
		return -ENOMEM;
	memcpy(text, line, line_len);
	size_t o = line_len;
	if (mlen > 0)
		text[o++] = ',';
	memcpy(text + o, name, nlen);
	text[o + nlen] = '\0';
	return replace_line(f, idx, text);
}

int pwfile_member_remove(struct pwfile *f, size_t idx, const char *name)
{
	const char *line, *members;
	size_t line_len, mlen, nlen = strlen(name), o;
	char *text;
	bool first = true;

	if (f->kind != PWFILE_GROUP && f->kind != PWFILE_GSHADOW)
		return -EINVAL;
	if (pwfile_field(f, idx, kinds[f->kind].fields - 1, &members, &mlen) < 0)
		return -EINVAL;
	if (!members_contain(members, mlen, name))
		return 0;
	line_text(f, &f->lines[idx], &line, &line_len);
	text = malloc(line_len + 1);
	if (!text)
		return -ENOMEM;
	o = (size_t)(members - line);
	memcpy(text, line, o);
	for (size_t s = 0; s <= mlen;) {
		const char *c = memchr(members + s, ',', mlen - s);
		size_t e = c ? (size_t)(c - members) : mlen;
		if (!(e - s == nlen && memcmp(members + s, name, nlen) == 0)) {
			if (!first)
				text[o++] = ',';
			memcpy(text + o, members + s, e - s);
			o += e - s;
			first = false;
		}
		s = e + 1;
	}
	text[o] = '\0';
	return replace_line(f, idx, text);
}

int pwfile_scan(enum pwfile_kind kind, const char *data, size_t len, const char *name,
		struct pwfile_line *ret)
{
	size_t nlen = strlen(name);
	const char *why = NULL;

	if (kind >= _PWFILE_KIND_MAX || nlen == 0)
		return -EINVAL;
	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(data + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - data) : len;

		if (end - pos > nlen && data[pos + nlen] == ':' &&
		    memcmp(data + pos, name, nlen) == 0) {
			struct pwfile_line l = {.off = pos, .len = end - pos, .term = nl ? 1 : 0};
			if (nl && l.len > 0 && data[end - 1] == '\r') {
				l.len--;
				l.term = 2;
			}
			if (memchr(data + l.off, '\0', l.len))
				return -EINVAL;
			int r = parse_line(kind, data + l.off, l.len, &l, &why);
			if (r < 0)
				return r;
			if (!l.entry)
				return -EINVAL;
			*ret = l;
			return 0;
		}
		pos = nl ? end + 1 : len;
	}
	return -ENOENT;
}

bool pwfile_scan_member_has(enum pwfile_kind kind, const char *data, const struct pwfile_line *l,
			    const char *name)
{
	const char *p = data + l->off, *c;

	if (kind != PWFILE_GROUP && kind != PWFILE_GSHADOW)
		return false;
	/* members is the last field: after the last ':' of the line. */
	c = memrchr(p, ':', l->len);
	if (!c)
		return false;
	return members_contain(c + 1, l->len - (size_t)(c + 1 - p), name);
}
