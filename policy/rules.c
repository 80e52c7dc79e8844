/* Rules files: parse, validate, match. Pure (no file system access); fuzzed by fuzz-rules. */
#include "policy/policy.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/escape.h"
#include "lib/macro.h"
#include "lib/proto.h"

static int fail(struct policy_error *err, int r, unsigned line, const char *fmt, ...)
	_printf_(4, 5);
static int fail(struct policy_error *err, int r, unsigned line, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->line = line;
		/* text, as the log writes it (names quoted by esc, %-s): a message longer than
		 * err->msg is cut with a mark */
		va_start(ap, fmt);
		escape_vformat(err->msg, sizeof(err->msg), "cut", 0, fmt, ap);
		va_end(ap);
	}
	return r;
}

/* s as one quoted name of an error (its quotes included): escaped once, and a name too long
 * for buf cut with a mark outside the quotes (escape_c_quote), so a cut name cannot pass for
 * another, whole one. err->msg is taken as text already escaped (policy/cli.c logs it %-s). */
static const char *esc(const char *s, char *buf, size_t size)
{
	return escape_c_quote(s, strlen(s), size - ESCAPE_QUOTE_EXTRA, buf, size);
}

const char *policy_access_name(enum policy_access a)
{
	switch (a) {
	case POLICY_NONE:
		return "none";
	case POLICY_READ:
		return "read";
	case POLICY_WRITE:
		return "write";
	default:
		return "?";
	}
}

int policy_path_normalise(const char *in, size_t in_len, char *out, size_t out_size)
{
	size_t o = 0, i = 0;

	if (in_len == 0 || in[0] != '/')
		return -EINVAL;
	if (memchr(in, '\0', in_len))
		return -EINVAL;
	if (in_len > POLICY_PATH_MAX || out_size < 2)
		return -ENAMETOOLONG;
	out[o++] = '/';
	while (i < in_len) {
		size_t start, n;

		while (i < in_len && in[i] == '/')
			i++;
		start = i;
		while (i < in_len && in[i] != '/')
			i++;
		n = i - start;
		if (n == 0 || (n == 1 && in[start] == '.'))
			continue;
		if (n == 2 && in[start] == '.' && in[start + 1] == '.')
			return -EINVAL;
		if (n > POLICY_NAME_MAX)
			return -EINVAL;
		if (o > 1)
			out[o++] = '/';
		if (o + n + 1 > out_size)
			return -ENAMETOOLONG;
		memcpy(out + o, in + start, n);
		o += n;
	}
	out[o] = '\0';
	return (int)o;
}

bool policy_path_under(const char *rule, size_t rule_len, const char *path, size_t path_len)
{
	if (rule_len == 1 && rule[0] == '/')
		return path_len >= 1 && path[0] == '/';
	if (path_len < rule_len || memcmp(rule, path, rule_len) != 0)
		return false;
	/* Component boundary: /work covers /work and /work/x, never /workspaces. */
	return path_len == rule_len || path[rule_len] == '/';
}

const char *const policy_reserved[POLICY_RESERVED_N] = {"/data/agents", "/data/pistis",
							"/data/sandbox-home"};

static const char *path_in(const char *const *trees, size_t n, const char *path, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (policy_path_under(trees[i], strlen(trees[i]), path, len))
			return trees[i];
	return NULL;
}

const char *policy_path_reserved(const char *path, size_t len)
{
	return path_in(policy_reserved, POLICY_RESERVED_N, path, len);
}

const char *const policy_trusted[POLICY_TRUSTED_N] = {POLICY_SECRETS_DIR, "/data/bin",
						      "/data/trusted"};

const char *policy_path_trusted(const char *path, size_t len)
{
	return path_in(policy_trusted, POLICY_TRUSTED_N, path, len);
}

bool policy_reserved_below(const char *dir, size_t len)
{
	for (size_t i = 0; i < POLICY_RESERVED_N; i++) {
		size_t rl = strlen(policy_reserved[i]);

		if (rl > len && policy_path_under(dir, len, policy_reserved[i], rl))
			return true;
	}
	return false;
}

const struct policy_rule *policy_rules_match(const struct policy_rules *r, const char *path)
{
	const struct policy_rule *best = NULL;
	size_t len = strlen(path);

	/* Rule counts are small (bounded by POLICY_RULES_MAX); the walk does not call this
	 * per node, so a linear scan is the clearest correct answer. */
	for (size_t i = 0; r && i < r->n; i++)
		if (policy_path_under(r->rules[i].path, r->rules[i].len, path, len) &&
		    (!best || r->rules[i].len > best->len))
			best = &r->rules[i];
	return best;
}

static int cmp_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

ssize_t policy_rules_find(const struct policy_rules *r, const char *path, size_t len)
{
	size_t lo = 0, hi = r ? r->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_bytes(r->rules[mid].path, r->rules[mid].len, path, len);

		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* The first rule (sorted bytewise) >= dir: every rule that starts with "dir" follows it,
 * contiguously ("dir", "dir-x", "dir.y", "dir/z"…). */
static size_t first_at_or_after(const struct policy_rules *r, const char *dir, size_t len)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp_bytes(r->rules[mid].path, r->rules[mid].len, dir, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether a rule lies strictly below directory dir (with stricter: a none or read one).
 * Rules are sorted bytewise, so those that start with "dir" are one run from
 * first_at_or_after; "/" is above every other rule. */
static bool rule_below(const struct policy_rules *r, const char *dir, size_t len, bool stricter)
{
	bool root = len == 1 && dir[0] == '/';

	if (!r)
		return false;
	for (size_t i = root ? 0 : first_at_or_after(r, dir, len); i < r->n; i++) {
		const struct policy_rule *m = &r->rules[i];

		if (!root && (m->len < len || memcmp(m->path, dir, len) != 0))
			return false;
		if ((root ? m->len > 1 : m->len > len && m->path[len] == '/') &&
		    (!stricter || m->access != POLICY_WRITE))
			return true;
	}
	return false;
}

bool policy_rules_stricter_below(const struct policy_rules *r, const char *dir, size_t len)
{
	return rule_below(r, dir, len, true);
}

bool policy_rules_has_below(const struct policy_rules *r, const char *dir, size_t len)
{
	return rule_below(r, dir, len, false);
}

void policy_rules_free(struct policy_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->rules[i].path);
	free(r->rules);
	free(r);
}

/* cJSON keeps no positions: one pass over the text records the line where each element
 * of the top-level array starts, and enforces what cJSON would let through: depth, NUL
 * bytes, "\u0000" and "\u" without four hex digits (cJSON would cut the string there) and
 * raw control characters. */
struct prescan {
	unsigned *lines;
	size_t n;
};

static int prescan(const char *buf, size_t len, struct prescan *ps, struct policy_error *err)
{
	unsigned line = 1, depth = 0;
	bool in_str = false, want_elem = false;
	size_t cap = 0;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (c == '\0')
			return fail(err, -EINVAL, line, "NUL byte in the rules file");
		if (in_str) {
			if (c == '\\') {
				long u = i + 1 < len && buf[i + 1] == 'u'
						 ? proto_json_u_escape(buf + i, len - i)
						 : 1;

				/* cJSON reads "\uZZZZ" as U+0000 too */
				if (u < 0)
					return fail(err, -EINVAL, line,
						    "\\u without four hex digits in a string");
				if (u == 0)
					return fail(err, -EINVAL, line,
						    "an escaped NUL (U+0000) in a string");
				i++;
				if (i < len && buf[i] == '\n')
					line++;
			} else if (c == '"') {
				in_str = false;
			} else if ((unsigned char)c < 0x20) {
				return fail(err, -EINVAL, line, "control character in a string");
			}
			continue;
		}
		if (c == '\n') {
			line++;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\r')
			continue;
		if (depth == 1 && want_elem && c != ']' && c != ',') {
			if (ps->n == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				unsigned *p;

				if (ps->n >= POLICY_RULES_MAX)
					return fail(err, -E2BIG, line, "more than %d rules",
						    POLICY_RULES_MAX);
				p = realloc(ps->lines, ncap * sizeof(*p));
				if (!p)
					return -ENOMEM;
				ps->lines = p;
				cap = ncap;
			}
			ps->lines[ps->n++] = line;
			want_elem = false;
		}
		switch (c) {
		case '"':
			in_str = true;
			break;
		case '[':
		case '{':
			if (++depth > POLICY_JSON_DEPTH_MAX)
				return fail(err, -EINVAL, line, "JSON nested deeper than %d",
					    POLICY_JSON_DEPTH_MAX);
			if (depth == 1)
				want_elem = true;
			break;
		case ']':
		case '}':
			if (depth > 0)
				depth--;
			break;
		case ',':
			if (depth == 1)
				want_elem = true;
			break;
		default:
			break;
		}
	}
	return 0;
}

static unsigned line_at(const char *buf, size_t len, const char *at)
{
	unsigned line = 1;

	if (!at || at < buf)
		return 0;
	for (const char *p = buf; p < at && p < buf + len; p++)
		line += *p == '\n';
	return line;
}

static int cmp_rule(const void *a, const void *b)
{
	const struct policy_rule *x = a, *y = b;

	return cmp_bytes(x->path, x->len, y->path, y->len);
}

/* What a rule may do to each of policy_trusted[] (docs/policy.md, "Implied rules"): no
 * rule may open it further than max (a file an agent could put there would be trusted, and
 * stays once the rule is gone: a read rule makes it root's), and where no rule names it
 * but a rule above covers it with at least `under`, a rule of access max is implied.
 * Line 0: not from the file. */
static const struct {
	enum policy_access max;
	enum policy_access under;
	const char *what;
} trusted_trees[POLICY_TRUSTED_N] = {
	{POLICY_NONE, POLICY_READ, "the trusted commands' secrets, pi-tools' alone"},
	{POLICY_READ, POLICY_WRITE, "the trusted commands' wrappers, on every agent's PATH"},
	{POLICY_READ, POLICY_WRITE, "the scripts trusted commands run as pi-tools"},
};

static int parse_rule(const cJSON *o, unsigned line, struct policy_rule *rule,
		      struct policy_error *err)
{
	const cJSON *path = NULL, *access = NULL;
	char ebuf[256], norm[POLICY_PATH_MAX + 1];
	int n;

	if (!cJSON_IsObject(o))
		return fail(err, -EINVAL, line,
			    "a rule must be an object with a path and an access");
	for (const cJSON *k = o->child; k; k = k->next) {
		const cJSON **slot;

		if (!strcmp(k->string, "path"))
			slot = &path;
		else if (!strcmp(k->string, "access"))
			slot = &access;
		else if (!strcmp(k->string, "comment")) {
			if (!cJSON_IsString(k))
				return fail(err, -EINVAL, line, "'comment' must be a string");
			continue;
		} else
			return fail(err, -EINVAL, line,
				    "unknown key %-s (known: path, access, comment)",
				    esc(k->string, ebuf, sizeof(ebuf)));
		if (*slot)
			return fail(err, -EINVAL, line, "duplicate key %-s",
				    esc(k->string, ebuf, sizeof(ebuf)));
		*slot = k;
	}
	if (!path || !cJSON_IsString(path))
		return fail(err, -EINVAL, line, "rule without a string 'path'");
	if (!access || !cJSON_IsString(access))
		return fail(err, -EINVAL, line, "rule without a string 'access'");

	if (!strcmp(access->valuestring, "none"))
		rule->access = POLICY_NONE;
	else if (!strcmp(access->valuestring, "read"))
		rule->access = POLICY_READ;
	else if (!strcmp(access->valuestring, "write"))
		rule->access = POLICY_WRITE;
	else
		return fail(err, -EINVAL, line, "access %-s is not none, read or write",
			    esc(access->valuestring, ebuf, sizeof(ebuf)));

	n = policy_path_normalise(path->valuestring, strlen(path->valuestring), norm, sizeof(norm));
	if (n < 0) {
		const char *why = path->valuestring[0] != '/' ? "is not absolute"
				  : n == -ENAMETOOLONG
					  ? "is too long"
					  : "contains '..' or a component longer than 255 bytes";
		return fail(err, -EINVAL, line, "path %-s %s",
			    esc(path->valuestring, ebuf, sizeof(ebuf)), why);
	}
	if (policy_path_reserved(norm, (size_t)n))
		return fail(err, -EINVAL, line,
			    "path %-s is pistis's own (%s): the agents' homes and pistis's "
			    "state are not rules",
			    esc(norm, ebuf, sizeof(ebuf)), policy_path_reserved(norm, (size_t)n));
	for (size_t i = 0; i < POLICY_TRUSTED_N; i++)
		if (rule->access > trusted_trees[i].max &&
		    policy_path_under(policy_trusted[i], strlen(policy_trusted[i]), norm,
				      (size_t)n))
			return fail(err, -EINVAL, line,
				    "path %-s cannot be %s: %s holds %s (%s only)",
				    esc(norm, ebuf, sizeof(ebuf)), policy_access_name(rule->access),
				    policy_trusted[i], trusted_trees[i].what,
				    trusted_trees[i].max == POLICY_NONE ? "none" : "read or none");
	rule->path = strdup(norm);
	if (!rule->path)
		return -ENOMEM;
	rule->len = (size_t)n;
	rule->line = line;
	return 0;
}

static int add_implied(struct policy_rules *r)
{
	size_t n = r->n;

	for (size_t i = 0; i < POLICY_TRUSTED_N; i++) {
		const struct policy_rule *m;
		size_t len = strlen(policy_trusted[i]);
		struct policy_rule *nr;

		if (policy_rules_find(r, policy_trusted[i], len) >= 0)
			continue;
		m = policy_rules_match(r, policy_trusted[i]);
		if (!m || m->access < trusted_trees[i].under)
			continue;
		nr = realloc(r->rules, (r->n + 1) * sizeof(*r->rules));
		if (!nr)
			return -ENOMEM;
		r->rules = nr;
		r->rules[r->n] = (struct policy_rule){.path = strdup(policy_trusted[i]),
						      .len = len,
						      .access = trusted_trees[i].max};
		if (!r->rules[r->n].path)
			return -ENOMEM;
		r->n++;
	}
	if (r->n != n)
		qsort(r->rules, r->n, sizeof(*r->rules), cmp_rule);
	return 0;
}

int policy_rules_parse(const char *buf, size_t len, struct policy_rules **ret,
		       struct policy_error *err)
{
	struct prescan ps = {0};
	struct policy_rules *r = NULL;
	cJSON *root = NULL;
	const char *end = NULL;
	size_t i = 0;
	int ret_r;

	if (err)
		err->line = 0, err->msg[0] = '\0';
	if (len > POLICY_FILE_MAX)
		return fail(err, -EFBIG, 0, "rules file larger than %d bytes", POLICY_FILE_MAX);
	ret_r = prescan(buf, len, &ps, err);
	if (ret_r < 0)
		goto out;

	root = cJSON_ParseWithLengthOpts(buf, len, &end, false);
	if (!root) {
		ret_r = fail(err, -EINVAL, line_at(buf, len, end), "not valid JSON");
		goto out;
	}
	for (const char *p = end; p && p < buf + len; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
			ret_r = fail(err, -EINVAL, line_at(buf, len, p),
				     "text after the rules list");
			goto out;
		}
	if (!cJSON_IsArray(root)) {
		ret_r = fail(err, -EINVAL, 1, "the rules file must be a JSON list of rules");
		goto out;
	}

	r = calloc(1, sizeof(*r));
	if (!r) {
		ret_r = -ENOMEM;
		goto out;
	}
	r->n = (size_t)cJSON_GetArraySize(root);
	if (r->n > POLICY_RULES_MAX || r->n != ps.n) {
		ret_r = fail(err, -E2BIG, 0, "too many rules (max %d)", POLICY_RULES_MAX);
		r->n = 0;
		goto out;
	}
	r->rules = calloc(r->n ? r->n : 1, sizeof(*r->rules));
	if (!r->rules) {
		r->n = 0;
		ret_r = -ENOMEM;
		goto out;
	}
	for (const cJSON *o = root->child; o; o = o->next, i++) {
		ret_r = parse_rule(o, ps.lines[i], &r->rules[i], err);
		if (ret_r < 0) {
			r->n = i;
			goto out;
		}
	}
	qsort(r->rules, r->n, sizeof(*r->rules), cmp_rule);
	for (i = 1; i < r->n; i++)
		if (r->rules[i].len == r->rules[i - 1].len &&
		    !memcmp(r->rules[i].path, r->rules[i - 1].path, r->rules[i].len)) {
			char ebuf[256];
			unsigned a = r->rules[i - 1].line, b = r->rules[i].line;

			ret_r = fail(err, -EINVAL, a > b ? a : b,
				     "duplicate rule for %-s (also line %u)",
				     esc(r->rules[i].path, ebuf, sizeof(ebuf)), a > b ? b : a);
			goto out;
		}
	ret_r = add_implied(r);
	if (ret_r < 0)
		goto out;
	*ret = TAKE_PTR(r);
	ret_r = 0;
out:
	cJSON_Delete(root);
	free(ps.lines);
	policy_rules_free(r);
	return ret_r;
}
