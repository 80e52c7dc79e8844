/* libFuzzer: the read-only fast path's scanners agree with the strict parsers.
 *
 * For every buffer the strict parser accepts, pwfile_scan(kind, name) finds exactly the
 * line pwfile_find_name finds (same offset, length, ids), and registry_scan(id) the record
 * registry_find_id finds (same uid, name, state), for names and ids taken from the input.
 * For any buffer, the lazy registry parse (derivation left for later) fails exactly where
 * the strict one does, unless the strict one stopped at a name not derived from its id;
 * and it accepts what the strict one accepts. The scanners must never read out of bounds,
 * whatever the input; nor must the arena's reading of /proc/buddyinfo (the same bytes).
 * scan_find, the fast path's search in whole files, finds what memmem finds; and
 * pwfile_scan_names, its one pass per file, what pwfile_scan and a count of lines find. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-users/arena.h"
#include "sandbox-users/ident.h"
#include "sandbox-users/pwfile.h"
#include "sandbox-users/registry.h"
#include "sandbox-users/scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOT_DERIVED "user name is not derived from the agent id"

/* Up to max candidate keys: the text before the first ':' of each of the first lines,
 * and after the last ':' (registry ids), NUL-free, at most 256 bytes. */
static size_t candidates(const char *p, size_t n, char out[][257], size_t max)
{
	size_t k = 0;

	for (size_t pos = 0; pos < n && k + 2 <= max;) {
		const char *nl = memchr(p + pos, '\n', n - pos);
		size_t end = nl ? (size_t)(nl - p) : n;
		const char *c = memchr(p + pos, ':', end - pos);
		const char *last = c ? memrchr(p + pos, ':', end - pos) : NULL;
		if (c && (size_t)(c - (p + pos)) <= 256 &&
		    !memchr(p + pos, 0, (size_t)(c - (p + pos)))) {
			memcpy(out[k], p + pos, (size_t)(c - (p + pos)));
			out[k][c - (p + pos)] = '\0';
			k++;
		}
		if (last && (size_t)(p + end - last - 1) <= 256 &&
		    !memchr(last + 1, 0, (size_t)(p + end - last - 1))) {
			size_t l = (size_t)(p + end - last - 1);
			memcpy(out[k], last + 1, l);
			out[k][l] = '\0';
			if (l && out[k][l - 1] == '\r')
				out[k][l - 1] = '\0';
			k++;
		}
		pos = nl ? end + 1 : n;
	}
	return k;
}

/* A name that can only ever be an entry's: not a comment, NIS or blank line's start. */
static bool entry_name(const char *s)
{
	if (!s[0] || strchr("#+- \t", s[0]))
		return false;
	for (const char *q = s; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f || *q == ':' || *q == ',' || *q == ' ')
			return false;
	return true;
}

/* How many lines of p[0..n) start with "name:", a line at a time. */
static size_t lines_named(const char *p, size_t n, const char *name)
{
	size_t nl = strlen(name), count = 0;

	for (size_t pos = 0; pos < n;) {
		const char *e = memchr(p + pos, '\n', n - pos);
		size_t end = e ? (size_t)(e - p) : n;
		count += end - pos > nl && p[pos + nl] == ':' && !memcmp(p + pos, name, nl);
		pos = e ? end + 1 : n;
	}
	return count;
}

/* pwfile_scan_names, whatever the buffer, answers for each name what pwfile_scan does,
 * and says a second line follows exactly when two or more lines start with "name:". */
static void names(enum pwfile_kind kind, const char *p, size_t n, char keys[][257], size_t nk)
{
	const char *want[PWFILE_SCAN_NAMES_MAX];
	struct pwfile_found found[PWFILE_SCAN_NAMES_MAX];
	struct pwfile_line l;
	size_t m = 0;

	for (size_t i = 0; i < nk && m < PWFILE_SCAN_NAMES_MAX; i++)
		if (keys[i][0])
			want[m++] = keys[i];
	if (m == 0)
		return;
	if (pwfile_scan_names(kind, p, n, want, m, found) != 0)
		abort();
	for (size_t k = 0; k < m; k++) {
		int r = pwfile_scan(kind, p, n, want[k], &l);
		if (found[k].r != r || found[k].second != (lines_named(p, n, want[k]) >= 2))
			abort();
		if (r == 0 && (found[k].line.off != l.off || found[k].line.len != l.len ||
			       found[k].line.id != l.id || found[k].line.gid != l.gid ||
			       found[k].line.name_len != l.name_len))
			abort();
	}
}

static void pw(enum pwfile_kind kind, const char *p, size_t n, char keys[][257], size_t nk)
{
	struct pwfile f;
	struct pwfile_line l;
	size_t line;
	const char *why;
	bool ok = pwfile_parse(kind, p, n, &f, &line, &why) == 0;

	for (size_t i = 0; i < nk; i++) {
		if (!entry_name(keys[i]))
			continue;
		int r = pwfile_scan(kind, p, n, keys[i], &l); /* in bounds whatever p holds */
		if (!ok)
			continue;
		ssize_t j = pwfile_find_name(&f, keys[i]);
		if (j < 0) {
			if (r != -ENOENT)
				abort();
			continue;
		}
		const struct pwfile_line *w = &f.lines[j];
		if (r != 0 || l.off != w->off || l.len != w->len || l.term != w->term ||
		    l.name_len != w->name_len || l.id != w->id || l.gid != w->gid || !l.entry)
			abort();
		if (kind == PWFILE_GROUP || kind == PWFILE_GSHADOW)
			for (size_t m = 0; m < nk; m++)
				if (entry_name(keys[m]) &&
				    pwfile_scan_member_has(kind, p, &l, keys[m]) !=
					    pwfile_member_has(&f, (size_t)j, keys[m]))
					abort();
	}
	if (ok)
		pwfile_done(&f);
	names(kind, p, n, keys, nk);
}

static void reg(const char *p, size_t n, char keys[][257], size_t nk)
{
	struct registry strict, lazy;
	struct registry_record rec;
	size_t sline = 0, lline = 0;
	const char *swhy = NULL, *lwhy = NULL;
	char *copy = malloc(n + 1);
	int rs, rl;

	if (!copy)
		return;
	memcpy(copy, p, n);
	copy[n] = '\0';
	rs = registry_parse(p, n, &strict, &sline, &swhy);
	rl = registry_parse_owned(copy, n, true, &lazy, &lline, &lwhy);
	if (rl == 0 && rs < 0 && strcmp(swhy, NOT_DERIVED) != 0)
		abort(); /* lazy accepted what strict refused for another reason */
	if (rl < 0 && rs == 0)
		abort();
	if (rl < 0 && rs < 0 && !(sline == lline && rs == rl) &&
	    !(strcmp(swhy, NOT_DERIVED) == 0 && sline <= lline))
		abort();
	for (size_t i = 0; i < nk; i++) {
		if (ident_agent_id_check(keys[i]) < 0)
			continue;
		int r = registry_scan(p, n, keys[i], &rec);
		if (rs < 0)
			continue;
		const struct registry_record *w = registry_find_id(&strict, keys[i]);
		if (!w) {
			if (r != -ENOENT)
				abort();
			continue;
		}
		if (r != 0 || rec.uid != w->uid || rec.state != w->state ||
		    strcmp(rec.name, w->name))
			abort();
		/* the lazy parse finds the same record, and it verifies */
		struct registry_record *lw = registry_find_id(&lazy, keys[i]);
		if (!lw || lw->uid != w->uid || registry_verify(lw, NULL) != 0)
			abort();
	}
	if (rs == 0)
		registry_done(&strict);
	if (rl == 0)
		registry_done(&lazy);
}

/* The fast path's whole-file search finds what memmem finds, for every key and every
 * start, never reading past the buffer (its SIMD loop stops 15 + m - 1 bytes short). */
static void find(const char *p, size_t n, char keys[][257], size_t nk)
{
	for (size_t i = 0; i < nk; i++) {
		size_t m = strlen(keys[i]);
		for (size_t from = 0; from <= n && from < 64; from += 7)
			if (scan_find(p + from, n - from, keys[i], m) !=
			    memmem(p + from, n - from, keys[i], m))
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char keys[34][257];
	const char *p = (const char *)data;
	size_t nk;

	if (size > (1u << 20))
		return 0;
	nk = candidates(p, size, keys, 32);
	memcpy(keys[nk++], "root", 5);
	memcpy(keys[nk++], "pi-sandbox", 11);
	for (int k = 0; k < _PWFILE_KIND_MAX; k++)
		pw(k, p, size, keys, nk);
	reg(p, size, keys, nk);
	find(p, size, keys, nk);
	(void)uarena_buddyinfo_has_huge(p, size);
	return 0;
}
