/* Pure registry parser/formatter: see registry.h. */
#include "sandbox-users/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"
#include "sandbox-users/ident.h"

const char *registry_state_name(enum registry_state s)
{
	return s == REGISTRY_ACTIVE ? "active" : "reserved";
}

void registry_done(struct registry *reg)
{
	if (!reg)
		return;
	free(reg->recs);
	memset(reg, 0, sizeof(*reg));
}

static int parse_record(const char *p, size_t len, struct registry_record *rec,
			const char **ret_why)
{
	const char *c1, *c2, *c3;
	uint64_t uid = 0;

	c1 = memchr(p, ':', len);
	c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - p)) : NULL;
	c3 = c2 ? memchr(c2 + 1, ':', len - (size_t)(c2 + 1 - p)) : NULL;
	if (!c3)
		return *ret_why = "expected uid:name:state:agent-id", -EINVAL;

	if (c1 == p || c1 - p > 10)
		return *ret_why = "invalid uid", -EINVAL;
	for (const char *q = p; q < c1; q++) {
		if (*q < '0' || *q > '9')
			return *ret_why = "invalid uid", -EINVAL;
		uid = uid * 10 + (uint64_t)(*q - '0');
	}
	if (!users_uid_is_agent((uid_t)uid) || uid > USERS_AGENT_UID_MAX)
		return *ret_why = "uid outside the agent range", -EINVAL;
	rec->uid = (uint32_t)uid;

	size_t nlen = (size_t)(c2 - c1 - 1);
	if (nlen > USERS_NAME_MAX)
		return *ret_why = "invalid user name", -EINVAL;
	memcpy(rec->name, c1 + 1, nlen);
	rec->name[nlen] = '\0';
	if (!ident_name_valid(rec->name))
		return *ret_why = "invalid user name", -EINVAL;

	size_t slen = (size_t)(c3 - c2 - 1);
	if (slen == 6 && !memcmp(c2 + 1, "active", 6))
		rec->state = REGISTRY_ACTIVE;
	else if (slen == 8 && !memcmp(c2 + 1, "reserved", 8))
		rec->state = REGISTRY_RESERVED;
	else
		return *ret_why = "state is neither active nor reserved", -EINVAL;

	size_t ilen = len - (size_t)(c3 + 1 - p);
	if (ilen > USERS_AGENT_ID_MAX)
		return *ret_why = "invalid agent id", -EINVAL;
	memcpy(rec->agent_id, c3 + 1, ilen);
	rec->agent_id[ilen] = '\0';
	if (ident_agent_id_check(rec->agent_id) < 0)
		return *ret_why = "invalid agent id", -EINVAL;
	if (!ident_name_matches(rec->name, rec->agent_id))
		return *ret_why = "user name is not derived from the agent id", -EINVAL;
	return 0;
}

/* Duplicates in O(n log n): a registry may hold ~50,000 records and is read on every
 * ensure, so no pairwise comparison. */
static int cmp_name(const void *a, const void *b)
{
	const struct registry_record *x = *(const struct registry_record *const *)a;
	const struct registry_record *y = *(const struct registry_record *const *)b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int cmp_id(const void *a, const void *b)
{
	const struct registry_record *x = *(const struct registry_record *const *)a;
	const struct registry_record *y = *(const struct registry_record *const *)b;
	int c = strcmp(x->agent_id, y->agent_id);
	return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int check_duplicates(const struct registry *reg, size_t *ret_line, const char **ret_why)
{
	static const size_t range = USERS_AGENT_UID_MAX - USERS_AGENT_UID_MIN + 1;
	_cleanup_free_ uint8_t *seen = NULL;
	_cleanup_free_ const struct registry_record **v = NULL;

	if (reg->n < 2)
		return 0;
	seen = calloc((range + 7) / 8, 1);
	v = calloc(reg->n, sizeof(*v));
	if (!seen || !v)
		return -ENOMEM;
	for (size_t i = 0; i < reg->n; i++) {
		uint32_t k = reg->recs[i].uid - USERS_AGENT_UID_MIN;
		if (seen[k / 8] & (1u << (k % 8))) {
			*ret_line = reg->recs[i].line;
			*ret_why = "duplicate uid";
			return -EINVAL;
		}
		seen[k / 8] |= (uint8_t)(1u << (k % 8));
		v[i] = &reg->recs[i];
	}
	qsort(v, reg->n, sizeof(*v), cmp_name);
	for (size_t i = 1; i < reg->n; i++)
		if (!strcmp(v[i - 1]->name, v[i]->name)) {
			*ret_line = v[i]->line;
			*ret_why = "duplicate user name";
			return -EINVAL;
		}
	qsort(v, reg->n, sizeof(*v), cmp_id);
	for (size_t i = 1; i < reg->n; i++)
		if (!strcmp(v[i - 1]->agent_id, v[i]->agent_id)) {
			*ret_line = v[i]->line;
			*ret_why = "duplicate agent id";
			return -EINVAL;
		}
	return 0;
}

int registry_parse(const char *data, size_t len, struct registry *ret, size_t *ret_line,
		   const char **ret_why)
{
	struct registry reg = {0};
	const char *why = NULL;
	size_t lineno = 0;
	bool header = false;
	int r = 0;

	*ret_line = 0;
	if (len > REGISTRY_SIZE_MAX) {
		*ret_why = "file too large";
		return -EFBIG;
	}
	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(data + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - data) : len;
		const char *p = data + pos;
		size_t n = end - pos;
		struct registry_record rec;

		lineno++;
		pos = nl ? end + 1 : len;
		if (!nl) {
			/* We always end with "\n": a torn last line is corruption, not data. */
			why = "last line has no newline";
			r = -EINVAL;
			goto fail;
		}
		if (n > REGISTRY_LINE_MAX) {
			why = "line too long";
			r = -EINVAL;
			goto fail;
		}
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
				why = "control character";
				r = -EINVAL;
				goto fail;
			}
		if (!header) {
			if (n == strlen(REGISTRY_HEADER) && !memcmp(p, REGISTRY_HEADER, n)) {
				header = true;
				continue;
			}
			why = n > 22 && !memcmp(p, "pistis-users-registry ", 22)
				      ? "unsupported registry version"
				      : "missing 'pistis-users-registry 1' header";
			r = n > 22 && !memcmp(p, "pistis-users-registry ", 22) ? -EPROTONOSUPPORT
									       : -EINVAL;
			goto fail;
		}
		if (n == 0 || p[0] == '#')
			continue;
		r = parse_record(p, n, &rec, &why);
		if (r < 0)
			goto fail;
		r = registry_add(&reg, rec.uid, rec.name, rec.agent_id, rec.state);
		if (r < 0) {
			why = "too many records";
			goto fail;
		}
		reg.recs[reg.n - 1].line = lineno;
	}
	if (!header && len > 0) {
		why = "missing 'pistis-users-registry 1' header";
		r = -EINVAL;
		goto fail;
	}
	r = check_duplicates(&reg, &lineno, &why);
	if (r < 0)
		goto fail;
	reg.changed = false;
	*ret = reg;
	return 0;
fail:
	*ret_line = lineno;
	*ret_why = why;
	registry_done(&reg);
	return r;
}

int registry_format(const struct registry *reg, char **ret, size_t *ret_len)
{
	size_t cap = strlen(REGISTRY_HEADER) + 1 + reg->n * (REGISTRY_LINE_MAX + 1) + 1, o;
	char *out = malloc(cap);

	if (!out)
		return -ENOMEM;
	o = (size_t)snprintf(out, cap, "%s\n", REGISTRY_HEADER);
	for (size_t i = 0; i < reg->n; i++) {
		const struct registry_record *r = &reg->recs[i];
		o += (size_t)snprintf(out + o, cap - o, "%u:%s:%s:%s\n", r->uid, r->name,
				      registry_state_name(r->state), r->agent_id);
	}
	*ret = out;
	*ret_len = o;
	return 0;
}

struct registry_record *registry_find_id(const struct registry *reg, const char *agent_id)
{
	for (size_t i = 0; i < reg->n; i++)
		if (!strcmp(reg->recs[i].agent_id, agent_id))
			return &reg->recs[i];
	return NULL;
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
	for (size_t i = 0; i < reg->n; i++)
		if (!strcmp(reg->recs[i].name, name))
			return &reg->recs[i];
	return NULL;
}

int registry_add(struct registry *reg, uint32_t uid, const char *name, const char *agent_id,
		 enum registry_state state)
{
	struct registry_record *rec;

	if (strlen(name) > USERS_NAME_MAX || strlen(agent_id) > USERS_AGENT_ID_MAX)
		return -EINVAL;
	if (reg->n >= REGISTRY_RECORDS_MAX)
		return -E2BIG;
	if (reg->n == reg->cap) {
		size_t cap = reg->cap ? reg->cap * 2 : 64;
		rec = reallocarray(reg->recs, cap, sizeof(*rec));
		if (!rec)
			return -ENOMEM;
		reg->recs = rec;
		reg->cap = cap;
	}
	rec = &reg->recs[reg->n++];
	rec->uid = uid;
	rec->state = state;
	rec->line = 0;
	strcpy(rec->name, name);
	strcpy(rec->agent_id, agent_id);
	reg->changed = true;
	return 0;
}

void registry_delete(struct registry *reg, struct registry_record *rec)
{
	size_t i = (size_t)(rec - reg->recs);

	if (i >= reg->n)
		return;
	memmove(&reg->recs[i], &reg->recs[i + 1], (reg->n - i - 1) * sizeof(*rec));
	reg->n--;
	reg->changed = true;
}

int registry_scan(const char *data, size_t len, const char *agent_id, struct registry_record *ret)
{
	size_t hlen = strlen(REGISTRY_HEADER), ilen = strlen(agent_id);
	const char *why = NULL;

	if (len < hlen + 1 || memcmp(data, REGISTRY_HEADER "\n", hlen + 1))
		return -EINVAL;
	/* The id is the last field and holds no ':', so ":<id>\n" ends its record only. */
	for (size_t pos = hlen + 1; pos < len;) {
		const char *nl = memchr(data + pos, '\n', len - pos);
		size_t end;
		if (!nl)
			return -EINVAL;
		end = (size_t)(nl - data);
		if (end - pos > ilen && data[end - ilen - 1] == ':' &&
		    memcmp(data + end - ilen, agent_id, ilen) == 0 && data[pos] != '#') {
			if (end - pos > REGISTRY_LINE_MAX)
				return -EINVAL;
			for (size_t i = pos; i < end; i++)
				if ((unsigned char)data[i] < 0x20 || data[i] == 0x7f)
					return -EINVAL;
			int r = parse_record(data + pos, end - pos, ret, &why);
			if (r < 0)
				return r;
			if (strcmp(ret->agent_id, agent_id))
				return -EINVAL;
			ret->line = 0;
			return 0;
		}
		pos = end + 1;
	}
	return -ENOENT;
}
