/* Pure registry parser/formatter: see registry.h. */
#include "sandbox-users/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "lib/macro.h"
#include "sandbox-users/arena.h"
#include "sandbox-users/fs.h"
#include "sandbox-users/ident.h"
#include "sandbox-users/scan.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))

const char *registry_state_name(enum registry_state s)
{
	return s == REGISTRY_ACTIVE ? "active" : "reserved";
}

void registry_done(struct registry *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < reg->n; i++)
		uarena_free(reg->recs[i].own);
	uarena_free(reg->recs);
	uarena_free(reg->buf);
	uarena_free(reg->by_id);
	uarena_free(reg->by_name);
	memset(reg, 0, sizeof(*reg));
}

/* One record line (no terminator). Checks the syntax of every field in one pass; the id
 * is the line's tail (rec->id, rec->id_len). The name's derivation from the id is left to
 * registry_verify. sc (may be NULL) is
 * scan_line's finding for a line that it found clean (no control byte, ended by '\n'):
 * then the bytes need no second look for control bytes and ':'. */
static int parse_record(const char *p, size_t len, const struct line_scan *sc,
			struct registry_record *rec, const char **ret_why)
{
	const char *c[3];
	unsigned nc = 0;
	uint64_t uid = 0;

	if (len > REGISTRY_LINE_MAX)
		return *ret_why = "line too long", -EINVAL;
	if (sc)
		for (; nc < 3 && nc < sc->colons; nc++)
			c[nc] = p + sc->colon[nc];
	else
		for (size_t i = 0; i < len; i++) {
			unsigned char ch = (unsigned char)p[i];
			if (ch < 0x20 || ch == 0x7f)
				return *ret_why = "control character", -EINVAL;
			if (ch == ':' && nc < 3)
				c[nc++] = p + i;
		}
	if (nc < 3)
		return *ret_why = "expected uid:name:state:agent-id", -EINVAL;

	if (c[0] == p || c[0] - p > 10)
		return *ret_why = "invalid uid", -EINVAL;
	/* One spelling per uid, as registry_format writes it: the lock-free fast path finds
	 * another record of a uid by its text ("\n10100:"), and "010100" is the same
	 * number to this parser (a slip that gave two agents one uid went unseen there). */
	if (p[0] == '0')
		return *ret_why = "invalid uid (a leading zero)", -EINVAL;
	for (const char *q = p; q < c[0]; q++) {
		if (*q < '0' || *q > '9')
			return *ret_why = "invalid uid", -EINVAL;
		uid = uid * 10 + (uint64_t)(*q - '0');
	}
	if (uid < USERS_AGENT_UID_MIN || uid > USERS_AGENT_UID_MAX)
		return *ret_why = "uid outside the agent range", -EINVAL;
	rec->uid = (uint32_t)uid;

	size_t nlen = (size_t)(c[1] - c[0] - 1);
	if (!ident_name_valid_n(c[0] + 1, nlen))
		return *ret_why = "invalid user name", -EINVAL;
	/* A valid name has 17 to 32 bytes: two fixed 16-byte copies (inlined, unlike a call
	 * to memcpy for a few bytes) cover it. */
	_Static_assert(sizeof(USERS_AGENT_PREFIX) - 1 + IDENT_HEX_MIN >= 16 &&
			       sizeof(rec->name) > USERS_NAME_MAX,
		       "names are 16..USERS_NAME_MAX bytes");
	memcpy(rec->name, c[0] + 1, 16);
	memcpy(rec->name + nlen - 16, c[0] + 1 + nlen - 16, 16);
	rec->name[nlen] = '\0';
	rec->name_len = (uint8_t)nlen;

	size_t slen = (size_t)(c[2] - c[1] - 1);
	if (slen == 6 && !memcmp(c[1] + 1, "active", 6))
		rec->state = REGISTRY_ACTIVE;
	else if (slen == 8 && !memcmp(c[1] + 1, "reserved", 8))
		rec->state = REGISTRY_RESERVED;
	else
		return *ret_why = "state is neither active nor reserved", -EINVAL;

	/* The id: its own check (first byte, charset: no ':' so it is the last field). */
	const char *id = c[2] + 1;
	size_t ilen = len - (size_t)(id - p);
	if (ilen == 0 || ilen > USERS_AGENT_ID_MAX)
		return *ret_why = "invalid agent id", -EINVAL;
	/* One table lookup a byte, no branch per byte (ident.c's alphabet): ok keeps the
	 * IDENT_ID_FIRST bit while every later byte has IDENT_ID_CHAR (shifted onto it). */
	_Static_assert(IDENT_ID_CHAR << 1 == IDENT_ID_FIRST, "bit layout");
	unsigned ok = ident_id_chars[(unsigned char)id[0]] & IDENT_ID_FIRST;
	for (size_t i = 1; i < ilen; i++)
		ok &= (unsigned)ident_id_chars[(unsigned char)id[i]] << 1;
	if (!ok)
		return *ret_why = "invalid agent id", -EINVAL;
	rec->id = id;
	rec->id_len = (uint16_t)ilen;
	rec->verified = false;
	rec->own = NULL;
	return 0;
}

int registry_verify(struct registry_record *rec, const char **ret_why)
{
	char id[USERS_AGENT_ID_MAX + 1];

	if (rec->verified)
		return 0;
	if (rec->id_len > USERS_AGENT_ID_MAX)
		return -EINVAL;
	memcpy(id, rec->id, rec->id_len);
	id[rec->id_len] = '\0';
	if (!ident_name_matches(rec->name, id)) {
		if (ret_why)
			*ret_why = "user name is not derived from the agent id";
		return -EINVAL;
	}
	rec->verified = true;
	return 0;
}

/* --- hash sets over ids and names ------------------------------------------------------- */

/* Eight bytes a step (a multiply and a shift each), instead of FNV-1a's multiply per byte:
 * every key is hashed once per parsed record. Not keyed: the registry is root's own file
 * (checked to be root-owned and not group/other-writable before it is read). */
static uint64_t hash_mem(const char *s, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;

	for (; n >= 8; s += 8, n -= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	w = 0;
	for (size_t i = 0; i < n; i++)
		w |= (uint64_t)(unsigned char)s[i] << (8 * i);
	/* The last word, then murmur3's 64-bit finaliser: every input bit reaches the low
	 * bits that pick the slot. */
	h ^= w;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 33);
}

/* Slot of the n bytes at key in set: the slot holding it, or the empty slot where it
 * would go. */
static size_t slot_of(const struct registry *reg, const uint32_t *set, const char *key, size_t n,
		      bool by_id)
{
	size_t mask = reg->slots - 1, i = (size_t)hash_mem(key, n) & mask;

	for (;; i = (i + 1) & mask) {
		uint32_t v = set[i];
		if (v == 0)
			return i;
		const struct registry_record *r = &reg->recs[v - 1];
		if (by_id ? r->id_len == n && !memcmp(r->id, key, n)
			  : r->name_len == n && !memcmp(r->name, key, n))
			return i;
	}
}

static int index_rebuild(struct registry *reg, size_t want)
{
	size_t slots = 64;
	uint32_t *a, *b;

	while (slots < 2 * want + 2)
		slots *= 2;
	a = uarena_calloc(slots, sizeof(*a));
	b = uarena_calloc(slots, sizeof(*b));
	if (!a || !b) {
		uarena_free(a);
		uarena_free(b);
		return -ENOMEM;
	}
	uarena_free(reg->by_id);
	uarena_free(reg->by_name);
	reg->by_id = a;
	reg->by_name = b;
	reg->slots = slots;
	for (size_t i = 0; i < reg->n; i++) {
		const struct registry_record *r = &reg->recs[i];
		a[slot_of(reg, a, r->id, r->id_len, true)] = (uint32_t)i + 1;
		b[slot_of(reg, b, r->name, r->name_len, false)] = (uint32_t)i + 1;
	}
	return 0;
}

/* Make room for one more record in recs and in the index. */
static int reserve(struct registry *reg)
{
	if (reg->n >= REGISTRY_RECORDS_MAX)
		return -E2BIG;
	if (reg->n == reg->cap) {
		size_t cap = reg->cap ? reg->cap * 2 : 64;
		struct registry_record *v = uarena_reallocarray(reg->recs, cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		reg->recs = v;
		reg->cap = cap;
	}
	if (2 * (reg->n + 1) + 2 > reg->slots)
		return index_rebuild(reg, reg->n + 1 > 256 ? 2 * (reg->n + 1) : 256);
	return 0;
}

int registry_parse_owned(char *buf, size_t len, bool lazy, struct registry *ret, size_t *ret_line,
			 const char **ret_why)
{
	static const size_t range = USERS_AGENT_UID_MAX - USERS_AGENT_UID_MIN + 1;
	static const size_t hlen = sizeof(REGISTRY_HEADER) - 1;
	_cleanup_uarena_ uint8_t *seen = NULL;
	struct registry reg = {.buf = buf, .canonical = true};
	const char *why = NULL;
	size_t lineno = 0, lines = 0;
	int r = 0;

	*ret_line = 0;
	if (len > REGISTRY_SIZE_MAX) {
		uarena_free(buf);
		*ret_why = "file too large";
		return -EFBIG;
	}
	/* Sized once, from the number of newlines (each record ends with one), with room for
	 * the records a call adds; populated as a whole, so no estimate's slack. */
	lines = scan_count_newlines(buf, len) + 16;
	seen = uarena_calloc((range + 7) / 8, 1);
	if (!seen || (lines > 1 && (reg.recs = uarena_reallocarray(
					    NULL, MIN(lines, (size_t)REGISTRY_RECORDS_MAX),
					    sizeof(*reg.recs))) == NULL)) {
		r = -ENOMEM;
		goto fail;
	}
	reg.cap = reg.recs ? MIN(lines, (size_t)REGISTRY_RECORDS_MAX) : 0;
	if (reg.recs) /* all but the room for additions is written below */
		ufs_prefault(reg.recs, reg.cap * sizeof(*reg.recs));
	r = index_rebuild(&reg, lines);
	if (r < 0)
		goto fail;

	for (size_t pos = 0; pos < len;) {
		char *p = buf + pos, *nl;
		size_t n;
		struct registry_record *rec;
		struct line_scan sc;
		/* The usual line: one vector pass finds its '\n', its ':' and that it holds
		 * no control byte. Anything else (a control byte, "\r\n", no newline) goes
		 * the byte-by-byte way below, which tells which error it is. */
		bool clean = scan_line(p, len - pos, &sc) == 0 && sc.term == 1;

		lineno++;
		nl = clean ? p + sc.len : memchr(p, '\n', len - pos);
		if (!nl) {
			/* We always end with "\n": a torn last line is corruption, not data. */
			why = "last line has no newline";
			r = -EINVAL;
			goto fail;
		}
		n = (size_t)(nl - p);
		pos += n + 1;
		if (lineno == 1) {
			if (n == hlen && !memcmp(p, REGISTRY_HEADER, n))
				continue;
			bool other = n > 22 && !memcmp(p, "pistis-users-registry ", 22);
			why = other ? "unsupported registry version"
				    : "missing 'pistis-users-registry 1' header";
			r = other ? -EPROTONOSUPPORT : -EINVAL;
			goto fail;
		}
		if (n == 0) {
			reg.canonical = false; /* not kept: the file changes on the next write */
			continue;
		}
		if (p[0] == '#') {
			reg.canonical = false;
			if (n > REGISTRY_LINE_MAX) {
				why = "line too long";
				r = -EINVAL;
				goto fail;
			}
			for (size_t i = 0; !clean && i < n; i++)
				if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
					why = "control character";
					r = -EINVAL;
					goto fail;
				}
			continue;
		}
		r = reserve(&reg);
		if (r < 0) {
			why = "too many records";
			goto fail;
		}
		rec = &reg.recs[reg.n];
		r = parse_record(p, n, clean ? &sc : NULL, rec, &why);
		if (r < 0)
			goto fail;
		rec->line = (uint32_t)lineno;
		rec->parsed_state = rec->state;
		if (!lazy && registry_verify(rec, &why) < 0) {
			r = -EINVAL;
			goto fail;
		}
		uint32_t k = rec->uid - USERS_AGENT_UID_MIN;
		if (seen[k / 8] & (1u << (k % 8))) {
			why = "duplicate uid";
			r = -EINVAL;
			goto fail;
		}
		seen[k / 8] |= (uint8_t)(1u << (k % 8));
		size_t si = slot_of(&reg, reg.by_name, rec->name, rec->name_len, false);
		if (reg.by_name[si]) {
			why = "duplicate user name";
			r = -EINVAL;
			goto fail;
		}
		size_t ii = slot_of(&reg, reg.by_id, rec->id, rec->id_len, true);
		if (reg.by_id[ii]) {
			why = "duplicate agent id";
			r = -EINVAL;
			goto fail;
		}
		reg.n++;
		reg.by_name[si] = (uint32_t)reg.n;
		reg.by_id[ii] = (uint32_t)reg.n;
	}
	reg.changed = false;
	reg.len = len;
	reg.n_parsed = reg.n;
	*ret = reg;
	return 0;
fail:
	*ret_line = lineno;
	*ret_why = why;
	registry_done(&reg);
	return r;
}

int registry_parse(const char *data, size_t len, struct registry *ret, size_t *ret_line,
		   const char **ret_why)
{
	char *buf;

	*ret_line = 0;
	if (len > REGISTRY_SIZE_MAX) {
		*ret_why = "file too large";
		return -EFBIG;
	}
	buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, data, len);
	buf[len] = '\0';
	return registry_parse_owned(buf, len, false, ret, ret_line, ret_why);
}

static char *put_u32(char *o, uint32_t v)
{
	char t[10];
	size_t n = 0;

	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		*o++ = t[--n];
	return o;
}

/* Whether the records read from buf are all still there, in order, in their parsed state:
 * then buf's bytes are the start of the new file. */
static bool append_only(const struct registry *reg)
{
	if (!reg->canonical || !reg->buf || reg->n < reg->n_parsed ||
	    reg->len < sizeof(REGISTRY_HEADER))
		return false;
	for (size_t i = 0; i < reg->n_parsed; i++)
		if (reg->recs[i].line == 0 || reg->recs[i].state != reg->recs[i].parsed_state)
			return false;
	return true;
}

int registry_pieces(const struct registry *reg, struct iovec *ret, size_t *ret_n, char **ret_tail)
{
	size_t cap = sizeof(REGISTRY_HEADER) + 1, first = 0, n = 0;
	bool append = append_only(reg);
	char *out, *o;

	if (append) {
		/* The bytes read, as they are: nothing copied. */
		ret[n++] = (struct iovec){.iov_base = reg->buf, .iov_len = reg->len};
		cap = 1;
		first = reg->n_parsed;
	}
	for (size_t i = first; i < reg->n; i++)
		cap += 10 + 1 + (size_t)reg->recs[i].name_len + 1 + 8 + 1 +
		       (size_t)reg->recs[i].id_len + 1;
	out = uarena_alloc(cap);
	if (!out)
		return -ENOMEM;
	o = append ? out : mempcpy(out, REGISTRY_HEADER "\n", sizeof(REGISTRY_HEADER));
	for (size_t i = first; i < reg->n; i++) {
		const struct registry_record *r = &reg->recs[i];
		const char *st = registry_state_name(r->state);
		o = put_u32(o, r->uid);
		*o++ = ':';
		o = mempcpy(o, r->name, r->name_len);
		*o++ = ':';
		o = stpcpy(o, st);
		*o++ = ':';
		o = mempcpy(o, r->id, r->id_len);
		*o++ = '\n';
	}
	*o = '\0';
	if (o > out)
		ret[n++] = (struct iovec){.iov_base = out, .iov_len = (size_t)(o - out)};
	*ret_n = n;
	*ret_tail = out;
	return 0;
}

int registry_format(const struct registry *reg, char **ret, size_t *ret_len)
{
	_cleanup_uarena_ char *tail = NULL;
	struct iovec v[2];
	size_t n = 0;
	int r;

	r = registry_pieces(reg, v, &n, &tail);
	if (r < 0)
		return r;
	return ufs_iov_join(v, n, ret, ret_len);
}

struct registry_record *registry_find_id(const struct registry *reg, const char *agent_id)
{
	uint32_t v;

	size_t n = strlen(agent_id);

	if (!reg->slots) { /* no index (out of memory after a delete) */
		for (size_t i = 0; i < reg->n; i++)
			if (reg->recs[i].id_len == n && !memcmp(reg->recs[i].id, agent_id, n))
				return &reg->recs[i];
		return NULL;
	}
	v = reg->by_id[slot_of(reg, reg->by_id, agent_id, n, true)];
	return v ? &reg->recs[v - 1] : NULL;
}

struct registry_record *registry_find_uid(const struct registry *reg, uint32_t uid)
{
	for (size_t i = 0; i < reg->n; i++)
		if (reg->recs[i].uid == uid)
			return &reg->recs[i];
	return NULL;
}

struct registry_record *registry_find_name(const struct registry *reg, const char *name)
{
	size_t n = strlen(name);
	uint32_t v;

	if (!reg->slots) {
		for (size_t i = 0; i < reg->n; i++)
			if (reg->recs[i].name_len == n && !memcmp(reg->recs[i].name, name, n))
				return &reg->recs[i];
		return NULL;
	}
	v = reg->by_name[slot_of(reg, reg->by_name, name, n, false)];
	return v ? &reg->recs[v - 1] : NULL;
}

int registry_add(struct registry *reg, uint32_t uid, const char *name, const char *agent_id,
		 enum registry_state state)
{
	struct registry_record *rec;
	size_t si, ii, nlen = strlen(name), ilen = strlen(agent_id);
	int r;

	if (nlen > USERS_NAME_MAX || ilen > USERS_AGENT_ID_MAX)
		return -EINVAL;
	r = reserve(reg);
	if (r < 0)
		return r;
	si = slot_of(reg, reg->by_name, name, nlen, false);
	ii = slot_of(reg, reg->by_id, agent_id, ilen, true);
	if (reg->by_name[si] || reg->by_id[ii])
		return -EEXIST; /* the caller checks first: never two records of one name/id */
	rec = &reg->recs[reg->n];
	memset(rec, 0, sizeof(*rec));
	/* From the call's arena, as the records themselves: the one malloc of a creation
	 * otherwise (a fresh process's first: heap set up, pages faulted). */
	rec->own = uarena_alloc(ilen + 1);
	if (!rec->own)
		return -ENOMEM;
	memcpy(rec->own, agent_id, ilen + 1);
	rec->id = rec->own;
	rec->id_len = (uint16_t)ilen;
	rec->uid = uid;
	rec->state = (uint8_t)state;
	memcpy(rec->name, name, nlen + 1);
	rec->name_len = (uint8_t)nlen;
	reg->n++;
	reg->by_name[si] = (uint32_t)reg->n;
	reg->by_id[ii] = (uint32_t)reg->n;
	reg->changed = true;
	return 0;
}

void registry_delete(struct registry *reg, struct registry_record *rec)
{
	size_t i = (size_t)(rec - reg->recs);

	if (i >= reg->n)
		return;
	uarena_free(rec->own);
	memmove(&reg->recs[i], &reg->recs[i + 1], (reg->n - i - 1) * sizeof(*rec));
	reg->n--;
	reg->changed = true;
	reg->canonical = false;
	if (index_rebuild(reg, reg->n) < 0) {
		/* Out of memory: drop the index; lookups fall back to a linear search and the
		 * next registry_add rebuilds it. */
		uarena_free(reg->by_id);
		uarena_free(reg->by_name);
		reg->by_id = reg->by_name = NULL;
		reg->slots = 0;
	}
}

int registry_scan(const char *data, size_t len, const char *agent_id, struct registry_record *ret)
{
	size_t hlen = strlen(REGISTRY_HEADER), ilen = strlen(agent_id);
	const char *why = NULL;

	if (len == 0)
		return -ENOENT; /* as registry_parse: an empty file is an empty registry */
	if (len < hlen + 1 || memcmp(data, REGISTRY_HEADER "\n", hlen + 1))
		return -EINVAL;
	/* The id is the last field and holds no ':', so ":<id>\n" ends its record only. Every
	 * '\n' is looked at (sixteen bytes a step with SSE2), and the bytes before it
	 * compared with ":<id>" only when the last byte matches. */
	const char *body = data + hlen + 1;
	size_t blen = len - hlen - 1, ls = 0;
	for (size_t i = 0; i < blen;) {
		size_t e; /* the next '\n' */
#if defined(__SSE2__)
		if (i + 16 <= blen) {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(body + i));
			unsigned m =
				(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n')));
			if (!m) {
				i += 16;
				continue;
			}
			e = i + (size_t)__builtin_ctz(m);
		} else
#endif
		{
			const char *nl = memchr(body + i, '\n', blen - i);
			if (!nl)
				break;
			e = (size_t)(nl - body);
		}
		if (e - ls > ilen && body[e - 1] == agent_id[ilen - 1] &&
		    body[e - ilen - 1] == ':' && memcmp(body + e - ilen, agent_id, ilen) == 0 &&
		    body[ls] != '#') {
			int r = parse_record(body + ls, e - ls, NULL, ret, &why);
			if (r < 0)
				return r;
			ret->id = agent_id;
			ret->id_len = (uint16_t)ilen;
			if (registry_verify(ret, &why) < 0)
				return -EINVAL;
			ret->line = 0;
			return 0;
		}
		ls = i = e + 1;
	}
	return -ENOENT;
}
