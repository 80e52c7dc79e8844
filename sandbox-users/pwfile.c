/* Pure /etc/passwd-family parser and editor: see pwfile.h. */
#include "sandbox-users/pwfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "lib/macro.h"
#include "sandbox-users/arena.h"
#include "sandbox-users/fs.h"
#include "sandbox-users/scan.h"

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

static void ix_drop(struct pwfile *f);

static void line_text(const struct pwfile *f, const struct pwfile_line *l, const char **ret,
		      size_t *ret_len)
{
	*ret = l->repl ? l->repl : f->buf + l->off;
	*ret_len = l->len; /* of repl where there is one */
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

/* An id field of a NIS compat line: empty reads as none (PWFILE_ID_NONE), as the compat
 * syntax means "the NIS map's value"; anything else as strictly as everywhere. */
static int parse_id_compat(const char *p, size_t len, bool compat, uint32_t *ret)
{
	if (compat && len == 0)
		return (void)(*ret = PWFILE_ID_NONE), 0;
	return parse_id(p, len, ret);
}

/* Check a scanned line against its kind's grammar and fill l. Comments and blank lines
 * are kept, never interpreted. A NIS compat line ('+' or '-' first) is kept byte for
 * byte too; one with fields is read as glibc's and musl's files parsers read it, an entry
 * named with its sign ("+shadow"), held to the same grammar (an empty id is none): its
 * ids are taken and its member lists count (initgroups and musl's getgrouplist honour
 * them). Only a bare "+", "-", "+name", "-@netgroup" (no ':') is not an entry. */
/* An id written with a leading zero ("040001"), which the parsers read as the number. */
static bool id_padded(const char *p, size_t n)
{
	return n > 1 && p[0] == '0';
}

static int check_line(enum pwfile_kind kind, const char *p, const struct line_scan *s,
		      struct pwfile_line *l, const char **ret_why)
{
	const unsigned nf = kinds[kind].fields;
	size_t len = s->len;
	bool compat = len > 0 && (p[0] == '+' || p[0] == '-');

	l->entry = false;
	if (len > (kind == PWFILE_GROUP || kind == PWFILE_GSHADOW ? PWFILE_GROUP_LINE_MAX
								  : PWFILE_LINE_MAX))
		return *ret_why = "line too long", -EINVAL;
	if (len == 0 || p[0] == '#' || (compat && s->colons == 0))
		return 0;
	if (p[0] == ' ' || p[0] == '\t') {
		size_t i = 0;
		while (i < len && (p[i] == ' ' || p[i] == '\t'))
			i++;
		if (i == len)
			return 0;
	}
	if (s->colons + 1 > nf)
		return *ret_why = "too many fields", -EINVAL;
	if (s->colons + 1 < nf)
		return *ret_why = "too few fields", -EINVAL;
		/* Field f runs from FSTART(f) to FEND(f). */
#define FSTART(f) ((f) == 0 ? 0 : s->colon[(f)-1] + 1)
#define FEND(f) ((f) == nf - 1 ? len : s->colon[f])
	if (s->colon[0] == 0)
		return *ret_why = "empty name", -EINVAL;
	/* No ' ' or ',' in the name: the scan found the first in the part it covered. */
	if (s->name_bad < s->colon[0])
		return *ret_why = "invalid name", -EINVAL;
	for (size_t i = s->vec_end < s->colon[0] ? s->vec_end : s->colon[0]; i < s->colon[0]; i++)
		if (p[i] == ' ' || p[i] == ',')
			return *ret_why = "invalid name", -EINVAL;
	l->name_len = s->colon[0];
	l->id = 0;
	l->gid = 0;
	l->padded = false;
	/* A leading zero is read as the same number, as glibc's and musl's parsers read it
	 * (decimal), and marked: pistis's own lines must not have one (db.c). */
	if (kinds[kind].id_field >= 0) {
		unsigned f = (unsigned)kinds[kind].id_field;
		if (parse_id_compat(p + FSTART(f), FEND(f) - FSTART(f), compat, &l->id) < 0)
			return *ret_why = kind == PWFILE_PASSWD ? "invalid uid" : "invalid gid",
			       -EINVAL;
		l->padded = id_padded(p + FSTART(f), FEND(f) - FSTART(f));
	}
	if (kinds[kind].gid_field >= 0) {
		unsigned f = (unsigned)kinds[kind].gid_field;
		if (parse_id_compat(p + FSTART(f), FEND(f) - FSTART(f), compat, &l->gid) < 0)
			return *ret_why = "invalid gid", -EINVAL;
		l->padded |= id_padded(p + FSTART(f), FEND(f) - FSTART(f));
	}
	/* Members: a list shorter than 2 × the limit cannot hold more, so only a list that
	 * long is counted. */
	if ((kind == PWFILE_GROUP || kind == PWFILE_GSHADOW) &&
	    FEND(nf - 1) - FSTART(nf - 1) >= 2 * (size_t)PWFILE_MEMBERS_MAX) {
		const char *m = p + FSTART(nf - 1), *e = p + len;
		size_t members = 1;
		while ((m = scan_chr(m, (size_t)(e - m), ','))) {
			members++;
			m++;
		}
		if (members > PWFILE_MEMBERS_MAX)
			return *ret_why = "too many members", -EINVAL;
	}
#undef FSTART
#undef FEND
	l->entry = true;
	return 0;
}

/* Scan and check a complete line of text (no terminator), for lines we make ourselves. */
static int parse_line(enum pwfile_kind kind, const char *p, size_t len, struct pwfile_line *l,
		      const char **ret_why)
{
	struct line_scan s;
	int r;

	r = scan_line(p, len, &s);
	if (r < 0)
		return *ret_why = s.why, r;
	if (s.term != 0) /* a newline inside */
		return *ret_why = "control character", -EINVAL;
	return check_line(kind, p, &s, l, ret_why);
}

static int grow(struct pwfile *f)
{
	if (f->n_lines < f->cap_lines)
		return 0;
	if (f->n_lines >= PWFILE_LINES_MAX + 64)
		return -E2BIG;
	size_t cap = f->cap_lines ? f->cap_lines * 2 : 64;
	struct pwfile_line *n = uarena_reallocarray(f->lines, cap, sizeof(*n));
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
	ix_drop(f);
	for (size_t i = 0; i < f->n_lines; i++)
		uarena_free(f->lines[i].repl);
	uarena_free(f->lines);
	uarena_free(f->buf);
	memset(f, 0, sizeof(*f));
}

int pwfile_parse_owned(enum pwfile_kind kind, char *buf, size_t len, struct pwfile *ret,
		       size_t *ret_line, const char **ret_why)
{
	struct pwfile f = {.kind = kind, .buf = buf, .len = len};
	const char *why = NULL;
	size_t lineno = 0, n = 0;
	int r;

	if (ret_line)
		*ret_line = 0;
	if (kind >= _PWFILE_KIND_MAX) {
		uarena_free(buf);
		return -EINVAL;
	}
	if (len > PWFILE_SIZE_MAX) {
		uarena_free(buf);
		if (ret_why)
			*ret_why = "file too large";
		return -EFBIG;
	}
	/* Sized once, from the number of newlines (capped: more lines than the limit fail
	 * below anyway), so that the array is never grown and copied while parsing. */
	n = scan_count_newlines(buf, len) + 1 + 16; /* + room for appended lines */
	if (n > PWFILE_LINES_MAX + 1)
		n = PWFILE_LINES_MAX + 1;
	f.lines = uarena_alloc(n * sizeof(*f.lines));
	if (!f.lines) {
		uarena_free(buf);
		return -ENOMEM;
	}
	ufs_prefault(f.lines, n * sizeof(*f.lines)); /* every record is written below */
	f.cap_lines = n;

	for (size_t pos = 0; pos < len;) {
		struct line_scan s;
		struct pwfile_line *l;

		lineno++;
		if (lineno > PWFILE_LINES_MAX) {
			why = "too many lines";
			r = -E2BIG;
			goto fail;
		}
		r = scan_line(buf + pos, len - pos, &s);
		if (r < 0) {
			why = s.why;
			goto fail;
		}
		/* The record is filled where it stays: check_line's narrow stores followed by
		 * a copy of the whole record from the stack stalled on store forwarding (a
		 * third of this loop's time). grow is a no-op here (sized above). */
		r = grow(&f);
		if (r < 0)
			goto fail;
		l = &f.lines[f.n_lines];
		*l = (struct pwfile_line){.off = pos, .len = s.len, .term = s.term};
		r = check_line(kind, buf + pos, &s, l, &why);
		if (r < 0)
			goto fail;
		f.n_lines++;
		pos += s.len + s.term;
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

int pwfile_parse(enum pwfile_kind kind, const char *data, size_t len, struct pwfile *ret,
		 size_t *ret_line, const char **ret_why)
{
	char *buf;

	if (ret_line)
		*ret_line = 0;
	if (kind >= _PWFILE_KIND_MAX)
		return -EINVAL;
	if (len > PWFILE_SIZE_MAX) {
		if (ret_why)
			*ret_why = "file too large";
		return -EFBIG;
	}
	buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, data, len);
	buf[len] = '\0';
	return pwfile_parse_owned(kind, buf, len, ret, ret_line, ret_why);
}

/* Where appended lines go: before the first NIS compat line ('+' or '-' first) of the
 * original, as shadow-utils' useradd puts them (commonio.c, KEEP_NIS_AT_END), else at the
 * end. glibc's compat module answers a name or uid that reaches a bare "+" line from
 * passwd_compat's sources (NIS) and reads no line after it: appended after the classic
 * trailing "+::::::", pi-tools, every agent and their groups were unknown to getpwnam,
 * id, sudo -u and initgroups, and a directory's own "pi-tools" would have been the one
 * sudo ran trusted commands as (red team). */
static size_t append_at(const struct pwfile *f)
{
	for (size_t i = 0; i < f->n_orig; i++) {
		const struct pwfile_line *l = &f->lines[i];

		if (l->len > 0 && (f->buf[l->off] == '+' || f->buf[l->off] == '-'))
			return i;
	}
	return f->n_orig;
}

/* The i-th line in the order it is written: the original lines before append_at, the
 * appended ones, the rest. */
static size_t line_at(const struct pwfile *f, size_t at, size_t i)
{
	size_t added = f->n_lines - f->n_orig;

	if (i < at)
		return i;
	if (i < at + added)
		return f->n_orig + (i - at);
	return i - added;
}

/* The pieces of the file, in order: runs of unedited original lines (with their own
 * terminators, contiguous in buf) as one piece; an edited or appended line as its text
 * plus its terminator. emit(p, n, ud) per piece. */
static int pieces(const struct pwfile *f, int (*emit)(const char *p, size_t n, void *ud), void *ud)
{
	size_t last = SIZE_MAX, run = 0, run_len = 0, at = append_at(f);
	bool in_run = false;
	int r;

	for (size_t j = 0; j < f->n_lines; j++)
		if (!f->lines[line_at(f, at, j)].deleted)
			last = line_at(f, at, j);
	for (size_t j = 0; j < f->n_lines; j++) {
		size_t i = line_at(f, at, j);
		const struct pwfile_line *l = &f->lines[i];
		if (l->deleted)
			continue;
		/* A last line without newline gets one only when something follows it. */
		bool nl_missing = l->term == 0 && i != last;
		if (!l->repl && !nl_missing) {
			size_t n = l->len + l->term;
			if (in_run && run + run_len == l->off) {
				run_len += n;
			} else {
				if (in_run && (r = emit(f->buf + run, run_len, ud)) < 0)
					return r;
				in_run = true;
				run = l->off;
				run_len = n;
			}
			continue;
		}
		if (in_run && (r = emit(f->buf + run, run_len, ud)) < 0)
			return r;
		in_run = false;
		if (l->repl)
			r = emit(l->repl, l->len, ud);
		else
			r = emit(f->buf + l->off, l->len, ud);
		if (r < 0)
			return r;
		if (l->term == 2)
			r = emit("\r\n", 2, ud);
		else if (l->term == 1 || i != last)
			r = emit("\n", 1, ud);
		if (r < 0)
			return r;
	}
	if (in_run && (r = emit(f->buf + run, run_len, ud)) < 0)
		return r;
	return 0;
}

struct iov_acc {
	struct iovec *v;
	size_t n, cap;
	size_t total;
};

static int iov_emit(const char *p, size_t n, void *ud)
{
	struct iov_acc *a = ud;

	if (n == 0)
		return 0;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		struct iovec *v = uarena_reallocarray(a->v, cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = (struct iovec){.iov_base = (void *)p, .iov_len = n};
	a->total += n;
	return 0;
}

int pwfile_iov(const struct pwfile *f, struct iovec **ret, size_t *ret_n)
{
	struct iov_acc a = {0};
	int r = pieces(f, iov_emit, &a);

	if (r < 0) {
		uarena_free(a.v);
		return r;
	}
	*ret = a.v;
	*ret_n = a.n;
	return 0;
}

int pwfile_format(const struct pwfile *f, char **ret, size_t *ret_len)
{
	_cleanup_uarena_ struct iovec *v = NULL;
	size_t n = 0;
	int r;

	r = pwfile_iov(f, &v, &n);
	if (r < 0)
		return r;
	return ufs_iov_join(v, n, ret, ret_len);
}

/* Whether the name m[0..len) is name[0..nl). Agent names share their first nine bytes
 * ("pi-agent-") and differ in the last: one 8-byte compare of the tail rejects almost every
 * other agent's name before the whole compare. */
static bool name_eq(const char *m, size_t len, const char *name, size_t nl)
{
	if (len != nl)
		return false;
	if (nl >= 8) {
		uint64_t a, b;
		memcpy(&a, m + nl - 8, 8);
		memcpy(&b, name + nl - 8, 8);
		if (a != b)
			return false;
	}
	return memcmp(m, name, nl) == 0;
}

static bool name_is(const struct pwfile *f, const struct pwfile_line *l, const char *name,
		    size_t name_len)
{
	const char *p;

	if (!l->entry || l->deleted || l->name_len != name_len)
		return false;
	/* The text without line_text's strlen of an edited line: the name is its start. */
	p = l->repl ? l->repl : f->buf + l->off;
	return name_eq(p, name_len, name, name_len);
}

/* --- lookup tables ----------------------------------------------------------------------- */

/* A key's first live line (index + 1; 0: an empty slot) and how many live lines bear it. */
struct ix_slot {
	uint32_t line, count;
};

struct pwfile_index {
	size_t mask;		  /* slots - 1 */
	size_t n_keys;		  /* names in use: the tables are rebuilt past half full */
	struct ix_slot *name;	  /* by name */
	struct ix_slot *id, *gid; /* by id (passwd uid, group gid); passwd primary gid */
	uint32_t *listed;	  /* group/gshadow: lines with a list that is not empty */
	size_t n_listed, cap_listed;
	/* The members of one long list (pi-sandbox's lists every agent), as keys into a copy
	 * of its entries (mtext), each without the white space before it: mline is that
	 * line's index + 1, 0 while there is no set. */
	size_t mline, mline_was;
	struct ix_member {
		uint32_t off, len; /* into mtext; len 0: an empty slot */
	} * mset;
	size_t mmask, mn;
	char *mtext;
	size_t mtext_len, mtext_cap;
	/* That line's text where pwfile_member_add made it with room to grow in place. */
	char *grown;
	size_t grown_cap;
};

/* Keyed with the process's AT_RANDOM bytes: the lines are an image's, and names derive from
 * agent ids, so no input can be chosen to fill one chain. */
static uint64_t ix_hash(const void *p, size_t n)
{
	static uint64_t key;
	const unsigned char *s = p;
	uint64_t h;

	if (!key) {
		const unsigned char *r = (const unsigned char *)(uintptr_t)getauxval(AT_RANDOM);
		uint64_t k = 0x9e3779b97f4a7c15ull;
		if (r)
			memcpy(&k, r + 8, sizeof(k));
		key = k | 1;
	}
	h = key ^ n;
	for (size_t i = 0; i < n; i++) {
		h = (h ^ s[i]) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 33);
}

static struct ix_slot *ix_name_slot(const struct pwfile *f, const char *name, size_t n)
{
	const struct pwfile_index *ix = f->ix;
	size_t i = (size_t)ix_hash(name, n) & ix->mask;

	while (ix->name[i].line && !name_is(f, &f->lines[ix->name[i].line - 1], name, n))
		i = (i + 1) & ix->mask;
	return &ix->name[i];
}

static uint32_t line_key(const struct pwfile_line *l, bool gid)
{
	return gid ? l->gid : l->id;
}

static struct ix_slot *ix_id_slot(const struct pwfile *f, uint32_t id, bool gid)
{
	const struct pwfile_index *ix = f->ix;
	struct ix_slot *t = gid ? ix->gid : ix->id;
	size_t i = (size_t)ix_hash(&id, sizeof(id)) & ix->mask;

	while (t[i].line && line_key(&f->lines[t[i].line - 1], gid) != id)
		i = (i + 1) & ix->mask;
	return &t[i];
}

static void ix_count(struct ix_slot *s, size_t idx)
{
	if (!s->line)
		s->line = (uint32_t)idx + 1;
	s->count++;
}

/* Whether line idx of a group or gshadow file lists anyone (gshadow: administrators or
 * members). */
static bool line_lists(const struct pwfile *f, size_t idx)
{
	const char *p;
	size_t n;

	if (f->kind == PWFILE_GROUP)
		return pwfile_field(f, idx, 3, &p, &n) == 0 && n > 0;
	return f->kind == PWFILE_GSHADOW && ((pwfile_field(f, idx, 2, &p, &n) == 0 && n > 0) ||
					     (pwfile_field(f, idx, 3, &p, &n) == 0 && n > 0));
}

static int ix_push_listed(struct pwfile_index *ix, size_t idx)
{
	if (ix->n_listed == ix->cap_listed) {
		size_t cap = ix->cap_listed ? 2 * ix->cap_listed : 16;
		uint32_t *v = uarena_reallocarray(ix->listed, cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		ix->listed = v;
		ix->cap_listed = cap;
	}
	ix->listed[ix->n_listed++] = (uint32_t)idx;
	return 0;
}

static bool ix_is_listed(const struct pwfile_index *ix, size_t idx)
{
	for (size_t i = 0; i < ix->n_listed; i++)
		if (ix->listed[i] == idx)
			return true;
	return false;
}

/* Line idx (live, appended or the last of its keys so far) into the tables. */
static int ix_add(struct pwfile *f, size_t idx)
{
	const struct pwfile_line *l = &f->lines[idx];
	struct ix_slot *s;
	const char *p;
	size_t n;

	line_text(f, l, &p, &n);
	s = ix_name_slot(f, p, l->name_len);
	if (!s->line)
		f->ix->n_keys++;
	ix_count(s, idx);
	if (f->ix->id)
		ix_count(ix_id_slot(f, l->id, false), idx);
	if (f->ix->gid)
		ix_count(ix_id_slot(f, l->gid, true), idx);
	if (line_lists(f, idx))
		return ix_push_listed(f->ix, idx);
	return 0;
}

static void ix_drop(struct pwfile *f)
{
	if (!f->ix)
		return;
	uarena_free(f->ix->name);
	uarena_free(f->ix->id);
	uarena_free(f->ix->gid);
	uarena_free(f->ix->listed);
	uarena_free(f->ix->mset);
	uarena_free(f->ix->mtext);
	uarena_free(f->ix);
	f->ix = NULL;
}

int pwfile_index(struct pwfile *f)
{
	size_t slots = 64;
	int r;

	ix_drop(f);
	/* At most half full, with room for the lines a batch appends before a rebuild. */
	while (slots < 2 * f->n_lines + 64)
		slots *= 2;
	f->ix = uarena_calloc(1, sizeof(*f->ix));
	if (!f->ix)
		return -ENOMEM;
	f->ix->mask = slots - 1;
	f->ix->name = uarena_calloc(slots, sizeof(struct ix_slot));
	if (kinds[f->kind].id_field >= 0)
		f->ix->id = uarena_calloc(slots, sizeof(struct ix_slot));
	if (kinds[f->kind].gid_field >= 0)
		f->ix->gid = uarena_calloc(slots, sizeof(struct ix_slot));
	if (!f->ix->name || (kinds[f->kind].id_field >= 0 && !f->ix->id) ||
	    (kinds[f->kind].gid_field >= 0 && !f->ix->gid)) {
		ix_drop(f);
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->n_lines; i++) {
		if (!f->lines[i].entry || f->lines[i].deleted)
			continue;
		r = ix_add(f, i);
		if (r < 0) {
			ix_drop(f);
			return r;
		}
	}
	return 0;
}

/* After a line was appended or replaced in place (same name and ids): keep the tables,
 * or drop them where that is simpler (they are rebuilt by the next pwfile_index). */
static void ix_appended(struct pwfile *f, size_t idx)
{
	if (!f->ix)
		return;
	if (2 * (f->n_lines + 1) > f->ix->mask + 1 || ix_add(f, idx) < 0)
		ix_drop(f);
}

const uint32_t *pwfile_listed(const struct pwfile *f, size_t *ret_n)
{
	if (!f->ix || (f->kind != PWFILE_GROUP && f->kind != PWFILE_GSHADOW))
		return NULL;
	*ret_n = f->ix->n_listed;
	return f->ix->listed ? f->ix->listed : (const uint32_t *)"";
}

ssize_t pwfile_find_name_from(const struct pwfile *f, const char *name, size_t from)
{
	size_t len = strlen(name);
	size_t i = from;

	if (f->ix) {
		const struct ix_slot *s = ix_name_slot(f, name, len);
		if (!s->line)
			return -1;
		if (from <= s->line - 1)
			return (ssize_t)s->line - 1;
		if (s->count == 1)
			return -1;
		/* A second line of the name, which ensure refuses anyway: walk. */
	}
	for (; i < f->n_lines; i++)
		if (name_is(f, &f->lines[i], name, len))
			return (ssize_t)i;
	return -1;
}

ssize_t pwfile_find_name(const struct pwfile *f, const char *name)
{
	return pwfile_find_name_from(f, name, 0);
}

ssize_t pwfile_other_with_id(const struct pwfile *f, uint32_t id, ssize_t skip, bool passwd_gid)
{
	if (passwd_gid ? kinds[f->kind].gid_field < 0 : kinds[f->kind].id_field < 0)
		return -1;
	if (f->ix) {
		const struct ix_slot *s = ix_id_slot(f, id, passwd_gid);
		if (!s->line)
			return -1;
		if ((ssize_t)s->line - 1 != skip)
			return (ssize_t)s->line - 1;
		if (s->count == 1)
			return -1;
	}
	for (size_t i = 0; i < f->n_lines; i++)
		if ((ssize_t)i != skip && f->lines[i].entry && !f->lines[i].deleted &&
		    line_key(&f->lines[i], passwd_gid) == id)
			return (ssize_t)i;
	return -1;
}

ssize_t pwfile_find_id(const struct pwfile *f, uint32_t id)
{
	return pwfile_other_with_id(f, id, -1, false);
}

int pwfile_field(const struct pwfile *f, size_t idx, unsigned i, const char **ret, size_t *ret_len)
{
	const char *p, *end;
	size_t n;

	if (idx >= f->n_lines || !f->lines[idx].entry || i >= kinds[f->kind].fields)
		return -EINVAL;
	line_text(f, &f->lines[idx], &p, &n);
	end = p + n;
	const bool last = i == kinds[f->kind].fields - 1;
	for (; i > 0; i--) {
		p = scan_chr(p, (size_t)(end - p), ':');
		if (!p)
			return -EINVAL;
		p++;
	}
	/* The last field runs to the end of the line (an entry has exactly its fields): no
	 * walk over pi-sandbox's member list for a ':' it cannot hold. */
	const char *c = last ? NULL : scan_chr(p, (size_t)(end - p), ':');
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
	l.repl = uarena_alloc(len + 1);
	if (!l.repl)
		return -ENOMEM;
	memcpy(l.repl, line, len + 1);
	l.len = (uint32_t)len;
	f->lines[f->n_lines++] = l;
	f->changed = true;
	ix_appended(f, f->n_lines - 1);
	return 0;
}

void pwfile_delete(struct pwfile *f, size_t idx)
{
	if (idx < f->n_lines && !f->lines[idx].deleted) {
		f->lines[idx].deleted = true;
		f->changed = true;
		ix_drop(f);
	}
}

/* Whether the list entry m[0..len) is name as glibc reads it: nss_files (parse_list in
 * files-parse.c) skips isspace() bytes before each entry, so " name" in sudo's member list
 * makes name a member of sudo for initgroups. Trailing bytes are kept there, so they are
 * here too. */
static bool member_eq(const char *m, size_t len, const char *name, size_t nl)
{
	while (len > 0 && (*m == ' ' || (*m >= '\t' && *m <= '\r'))) {
		m++;
		len--;
	}
	return name_eq(m, len, name, nl);
}

/* Whether name is one of the comma-separated members in p[0..n). pi-sandbox lists every
 * agent: the commas are found sixteen bytes a step (SSE2), and each member is compared with
 * member_eq. No memmem: every member starts with the same "pi-agent-", the worst case for a
 * general substring search. */
static bool members_contain(const char *p, size_t n, const char *name)
{
	size_t nl = strlen(name), s = 0, i = 0;

#if defined(__SSE2__)
	for (; i + 16 <= n; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(',')));
		while (m) {
			size_t e = i + (size_t)__builtin_ctz(m);
			if (member_eq(p + s, e - s, name, nl))
				return true;
			s = e + 1;
			m &= m - 1;
		}
	}
#endif
	for (; i < n; i++)
		if (p[i] == ',') {
			if (member_eq(p + s, i - s, name, nl))
				return true;
			s = i + 1;
		}
	return member_eq(p + s, n - s, name, nl); /* the last member (or an empty field) */
}

bool pwfile_list_has(const char *p, size_t n, const char *name)
{
	return members_contain(p, n, name);
}

/* A list shorter than this is walked: its set would cost more than the walks it saves. */
#define MSET_MIN_LEN 4096u

static struct ix_member *ms_slot(const struct pwfile_index *ix, const char *name, size_t n)
{
	size_t i = (size_t)ix_hash(name, n) & ix->mmask;

	while (ix->mset[i].len && !name_eq(ix->mtext + ix->mset[i].off, ix->mset[i].len, name, n))
		i = (i + 1) & ix->mmask;
	return &ix->mset[i];
}

static int ms_grow(struct pwfile_index *ix, size_t slots)
{
	struct ix_member *old = ix->mset;
	size_t old_slots = old ? ix->mmask + 1 : 0;

	ix->mset = uarena_calloc(slots, sizeof(*ix->mset));
	if (!ix->mset) {
		ix->mset = old;
		return -ENOMEM;
	}
	ix->mmask = slots - 1;
	for (size_t i = 0; i < old_slots; i++)
		if (old[i].len)
			*ms_slot(ix, ix->mtext + old[i].off, old[i].len) = old[i];
	uarena_free(old);
	return 0;
}

/* Entry m[0..n) of the list, white space before it skipped as member_eq does. */
static int ms_insert(struct pwfile_index *ix, const char *m, size_t n)
{
	struct ix_member *s;
	int r;

	while (n > 0 && (*m == ' ' || (*m >= '\t' && *m <= '\r'))) {
		m++;
		n--;
	}
	if (n == 0)
		return 0; /* an empty entry is no one */
	if (2 * (ix->mn + 1) > ix->mmask + 1 && (r = ms_grow(ix, 2 * (ix->mmask + 1))) < 0)
		return r;
	s = ms_slot(ix, m, n);
	if (s->len)
		return 0;
	if (ix->mtext_len + n > ix->mtext_cap) {
		size_t cap = ix->mtext_cap ? 2 * ix->mtext_cap : 4096;
		while (cap < ix->mtext_len + n)
			cap *= 2;
		char *t = uarena_realloc(ix->mtext, cap);
		if (!t)
			return -ENOMEM;
		ix->mtext = t;
		ix->mtext_cap = cap;
	}
	memcpy(ix->mtext + ix->mtext_len, m, n);
	*s = (struct ix_member){.off = (uint32_t)ix->mtext_len, .len = (uint32_t)n};
	ix->mtext_len += n;
	ix->mn++;
	return 0;
}

/* The set over the members of line idx (p[0..n)), replacing any other line's. */
static int ms_build(struct pwfile_index *ix, size_t idx, const char *p, size_t n)
{
	size_t slots = 64;
	int r;

	while (slots < n / 4) /* an entry takes more than 2 bytes with its ',' */
		slots *= 2;
	ix->mline = 0;
	ix->mn = 0;
	ix->mtext_len = 0;
	uarena_free(ix->mset);
	ix->mset = NULL;
	r = ms_grow(ix, slots);
	for (size_t s = 0; r >= 0 && s <= n;) {
		const char *c = scan_chr(p + s, n - s, ',');
		size_t e = c ? (size_t)(c - p) : n;
		r = ms_insert(ix, p + s, e - s);
		s = e + 1;
	}
	if (r < 0)
		return r;
	ix->mline = idx + 1;
	return 0;
}

/* Whether name is in the member list p[0..n) of line idx: through the line's set where f
 * is indexed and the list is long, else by a walk. */
static bool member_lookup(const struct pwfile *f, size_t idx, const char *p, size_t n,
			  const char *name)
{
	struct pwfile_index *ix = f->ix;

	if (ix && n >= MSET_MIN_LEN && (ix->mline == idx + 1 || ms_build(ix, idx, p, n) >= 0))
		return ms_slot(ix, name, strlen(name))->len != 0;
	return members_contain(p, n, name);
}

bool pwfile_member_has(const struct pwfile *f, size_t idx, const char *name)
{
	const char *p;
	size_t n;

	if (f->kind != PWFILE_GROUP && f->kind != PWFILE_GSHADOW)
		return false;
	if (pwfile_field(f, idx, kinds[f->kind].fields - 1, &p, &n) < 0)
		return false;
	return member_lookup(f, idx, p, n, name);
}

static int replace_line(struct pwfile *f, size_t idx, char *text)
{
	struct pwfile_line l = f->lines[idx];
	const char *why = NULL;
	size_t len = strlen(text);
	int r;

	r = parse_line(f->kind, text, len, &l, &why);
	if (r < 0 || !l.entry) {
		uarena_free(text);
		return r < 0 ? r : -EINVAL;
	}
	bool same_keys = l.name_len == f->lines[idx].name_len && l.id == f->lines[idx].id &&
			 l.gid == f->lines[idx].gid;
	if (f->ix && same_keys) { /* the name too: a rename is a new key */
		const char *old;
		size_t old_len;
		line_text(f, &f->lines[idx], &old, &old_len);
		same_keys = !memcmp(old, text, l.name_len);
	}
	if (f->ix && f->lines[idx].repl == f->ix->grown)
		f->ix->grown = NULL;
	uarena_free(f->lines[idx].repl);
	l.repl = text;
	l.len = (uint32_t)len;
	f->lines[idx] = l;
	f->changed = true;
	if (f->ix) {
		/* pwfile_member_add keeps the set, with the name it added (member_added). */
		f->ix->mline_was = f->ix->mline;
		if (f->ix->mline == idx + 1)
			f->ix->mline = 0;
	}
	if (f->ix && !same_keys)
		ix_drop(f);
	else if (f->ix && line_lists(f, idx) && !ix_is_listed(f->ix, idx) &&
		 ix_push_listed(f->ix, idx) < 0)
		ix_drop(f);
	return 1;
}

/* After replace_line (r) added name to line idx's members: the line's member set, which
 * replace_line let go, is kept with name in it. */
static int member_added(struct pwfile *f, size_t idx, int r, const char *name)
{
	struct pwfile_index *ix = f->ix;

	if (r < 0 || !ix || !ix->mset || ix->mline != 0)
		return r;
	/* Only the set that was this line's: replace_line cleared mline just now. */
	if (ix->mline_was == idx + 1 && ms_insert(ix, name, strlen(name)) >= 0)
		ix->mline = idx + 1;
	return r;
}

/* pwfile_member_add for the long list of an indexed file (pi-sandbox's in a batch or a
 * list): ",name" appended in place, in a copy of the line made once with room to double,
 * not a fresh copy of the whole line per member (a batch of 1,000 among 20,000 agents
 * copied, and faulted in, 720 MB). The line is parsed again as replace_line does; a
 * refused one is cut back to what it was. */
static int member_append(struct pwfile *f, size_t idx, const char *line, size_t line_len,
			 const char *name, size_t nlen)
{
	struct pwfile_index *ix = f->ix;
	struct pwfile_line l = f->lines[idx];
	size_t len = line_len + 1 + nlen;
	const char *why = NULL;
	char *t = f->lines[idx].repl;
	int r;

	if (!t || t != ix->grown || len + 1 > ix->grown_cap) {
		size_t cap = 2 * (len + 1);
		t = uarena_alloc(cap);
		if (!t)
			return -ENOMEM;
		memcpy(t, line, line_len);
		t[line_len] = '\0';
		uarena_free(f->lines[idx].repl);
		f->lines[idx].repl = t;
		ix->grown = t;
		ix->grown_cap = cap;
	}
	t[line_len] = ',';
	memcpy(t + line_len + 1, name, nlen);
	t[len] = '\0';
	r = parse_line(f->kind, t, len, &l, &why);
	if (r < 0 || !l.entry) {
		t[line_len] = '\0';
		return r < 0 ? r : -EINVAL;
	}
	l.repl = t;
	l.len = (uint32_t)len;
	f->lines[idx] = l;
	f->changed = true;
	if (ms_insert(ix, name, nlen) < 0)
		ix->mline = 0;
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
	if (member_lookup(f, idx, members, mlen, name))
		return 0;
	line_text(f, &f->lines[idx], &line, &line_len);
	if (f->lines[idx].term != 2 && mlen > 0 && f->ix && f->ix->mline == idx + 1)
		return member_append(f, idx, line, line_len, name, nlen);
	/* members is the last field: it runs to the end of the line. */
	text = uarena_alloc(line_len + 1 + nlen + 1);
	if (!text)
		return -ENOMEM;
	if (f->lines[idx].term == 2) {
		/* A CRLF line: glibc reads the \r as part of the last member, so the name goes
		 * first, followed by a ',' even in an empty list (nss_files skips the white
		 * space before an entry, and the "\r" left is none). */
		size_t o = (size_t)(members - line);
		memcpy(text, line, o);
		memcpy(text + o, name, nlen);
		text[o + nlen] = ',';
		memcpy(text + o + nlen + 1, members, mlen);
		text[o + nlen + 1 + mlen] = '\0';
		return member_added(f, idx, replace_line(f, idx, text), name);
	}
	memcpy(text, line, line_len);
	size_t o = line_len;
	if (mlen > 0)
		text[o++] = ',';
	memcpy(text + o, name, nlen);
	text[o + nlen] = '\0';
	return member_added(f, idx, replace_line(f, idx, text), name);
}

/* Drop every entry equal to name from the comma-separated list in field `field` of entry
 * idx; every other byte of the line (other entries, empty ones, the fields after it, a
 * CR) stays as it was. */
static int list_remove(struct pwfile *f, size_t idx, unsigned field, const char *name)
{
	const char *line, *list;
	size_t line_len, llen, nlen = strlen(name), o, tail;
	char *text;
	bool first = true;

	if (pwfile_field(f, idx, field, &list, &llen) < 0)
		return -EINVAL;
	if (!members_contain(list, llen, name))
		return 0;
	line_text(f, &f->lines[idx], &line, &line_len);
	text = uarena_alloc(line_len + 1);
	if (!text)
		return -ENOMEM;
	o = (size_t)(list - line);
	tail = o + llen;
	memcpy(text, line, o);
	for (size_t s = 0; s <= llen;) {
		const char *c = scan_chr(list + s, llen - s, ',');
		size_t e = c ? (size_t)(c - list) : llen;
		if (!member_eq(list + s, e - s, name, nlen)) {
			if (!first)
				text[o++] = ',';
			memcpy(text + o, list + s, e - s);
			o += e - s;
			first = false;
		}
		s = e + 1;
	}
	memcpy(text + o, line + tail, line_len - tail);
	o += line_len - tail;
	text[o] = '\0';
	return replace_line(f, idx, text);
}

int pwfile_member_remove(struct pwfile *f, size_t idx, const char *name)
{
	if (f->kind != PWFILE_GROUP && f->kind != PWFILE_GSHADOW)
		return -EINVAL;
	return list_remove(f, idx, kinds[f->kind].fields - 1, name);
}

int pwfile_admin_remove(struct pwfile *f, size_t idx, const char *name)
{
	if (f->kind != PWFILE_GSHADOW)
		return -EINVAL;
	return list_remove(f, idx, 2, name);
}

/* One line for pwfile_scan and pwfile_scan_names: the line at data + pos is name's. */
static int scan_one(enum pwfile_kind kind, const char *data, size_t len, size_t pos,
		    struct pwfile_line *ret)
{
	const char *why = NULL;
	struct line_scan s;
	int r = scan_line(data + pos, len - pos, &s);

	if (r < 0)
		return r;
	struct pwfile_line l = {.off = pos, .len = s.len, .term = s.term};
	r = check_line(kind, data + pos, &s, &l, &why);
	if (r < 0)
		return r;
	if (!l.entry)
		return -EINVAL;
	*ret = l;
	return 0;
}

int pwfile_scan(enum pwfile_kind kind, const char *data, size_t len, const char *name,
		struct pwfile_line *ret)
{
	size_t nlen = strlen(name);

	if (kind >= _PWFILE_KIND_MAX || nlen == 0)
		return -EINVAL;
	for (size_t pos = 0; pos < len;) {
		const char *nl = scan_chr(data + pos, len - pos, '\n');
		size_t end = nl ? (size_t)(nl - data) : len;

		if (end - pos > nlen && data[pos + nlen] == ':' &&
		    name_eq(data + pos, nlen, name, nlen))
			return scan_one(kind, data, len, pos, ret);
		pos = nl ? end + 1 : len;
	}
	return -ENOENT;
}

int pwfile_scan_names(enum pwfile_kind kind, const char *data, size_t len, const char *const *names,
		      size_t n, struct pwfile_found *ret)
{
	size_t nlen[PWFILE_SCAN_NAMES_MAX];

	if (kind >= _PWFILE_KIND_MAX || n == 0 || n > PWFILE_SCAN_NAMES_MAX)
		return -EINVAL;
	for (size_t k = 0; k < n; k++) {
		nlen[k] = strlen(names[k]);
		if (nlen[k] == 0)
			return -EINVAL;
		ret[k] = (struct pwfile_found){.r = -ENOENT};
	}
	/* Every line's start is looked at once for all the names: the fast path asked one
	 * question a pass (the first line, then "\nname:" after it) for each name. */
	for (size_t pos = 0; pos < len;) {
		const char *nl = scan_chr(data + pos, len - pos, '\n');
		size_t end = nl ? (size_t)(nl - data) : len;

		for (size_t k = 0; k < n; k++) {
			if (end - pos <= nlen[k] || data[pos + nlen[k]] != ':' ||
			    !name_eq(data + pos, nlen[k], names[k], nlen[k]))
				continue;
			if (ret[k].r == -ENOENT)
				ret[k].r = scan_one(kind, data, len, pos, &ret[k].line);
			else
				ret[k].second = true;
		}
		pos = nl ? end + 1 : len;
	}
	return 0;
}

bool pwfile_scan_member_has(enum pwfile_kind kind, const char *data, const struct pwfile_line *l,
			    const char *name)
{
	const char *p = data + l->off, *c;

	if (kind != PWFILE_GROUP && kind != PWFILE_GSHADOW)
		return false;
	/* members is the last field: after the last ':' of the line. */
	c = scan_rchr(p, l->len, ':');
	if (!c)
		return false;
	return members_contain(c + 1, l->len - (size_t)(c + 1 - p), name);
}
