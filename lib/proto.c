/* The wire protocol: limits, parsing and building (pure). See lib/proto.h, docs/protocol.md. */
#include "lib/proto.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/env-build.h"
#include "lib/macro.h"
#include "lib/sha256.h"

static const char *const op_names[_PROTO_OP_MAX] = {
	[PROTO_OP_UNKNOWN] = NULL,
	[PROTO_OP_HELLO] = "hello",
	[PROTO_OP_PING] = "ping",
	[PROTO_OP_USERS_ENSURE] = "users.ensure",
	[PROTO_OP_POLICY_APPLY] = "policy.apply",
	[PROTO_OP_POLICY_PLAN] = "policy.plan",
	[PROTO_OP_POLICY_EXPLAIN] = "policy.explain",
	[PROTO_OP_POLICY_CHECK] = "policy.check",
	[PROTO_OP_TRUSTED_ADD] = "trusted.add",
	[PROTO_OP_TRUSTED_REMOVE] = "trusted.remove",
	[PROTO_OP_TRUSTED_LIST] = "trusted.list",
	[PROTO_OP_EXEC_START] = "exec.start",
	[PROTO_OP_EXEC_STDIN] = "exec.stdin",
	[PROTO_OP_EXEC_CLOSE_STDIN] = "exec.close_stdin",
	[PROTO_OP_EXEC_SIGNAL] = "exec.signal",
	[PROTO_OP_EXEC_RESIZE] = "exec.resize",
	[PROTO_OP_EXEC_ATTACH] = "exec.attach",
	[PROTO_OP_EXEC_ACK] = "exec.ack",
	[PROTO_OP_EXEC_LIST] = "exec.list",
	[PROTO_OP_FS_READ] = "fs.read",
	[PROTO_OP_FS_WRITE] = "fs.write",
	[PROTO_OP_FS_EDIT] = "fs.edit",
	[PROTO_OP_FS_LIST] = "fs.list",
	[PROTO_OP_FS_STAT] = "fs.stat",
	[PROTO_OP_FS_MKDIR] = "fs.mkdir",
	[PROTO_OP_FS_REMOVE] = "fs.remove",
	[PROTO_OP_FS_MOVE] = "fs.move",
	[PROTO_OP_FS_READ_PROMPT] = "fs.read_prompt",
	[PROTO_OP_SANDBOX_STATUS] = "sandbox.status",
	[PROTO_OP_SANDBOXES_LIST] = "sandboxes.list",
};

const char *proto_op_name(enum proto_op op)
{
	if ((unsigned)op >= _PROTO_OP_MAX || !op_names[op])
		return "unknown";
	return op_names[op];
}

enum proto_op proto_op_from_name(const char *name)
{
	if (!name)
		return PROTO_OP_UNKNOWN;
	for (size_t i = 1; i < _PROTO_OP_MAX; i++)
		if (op_names[i] && !strcmp(op_names[i], name))
			return (enum proto_op)i;
	return PROTO_OP_UNKNOWN;
}

static const char *const err_names[_PROTO_E_MAX] = {
	[PROTO_E_OK] = "ok",
	[PROTO_E_BAD_JSON] = "bad_json",
	[PROTO_E_TOO_LARGE] = "too_large",
	[PROTO_E_TOO_DEEP] = "too_deep",
	[PROTO_E_DUPLICATE_KEY] = "duplicate_key",
	[PROTO_E_BAD_REQUEST] = "bad_request",
	[PROTO_E_UNKNOWN_OP] = "unknown_op",
	[PROTO_E_DUPLICATE_ID] = "duplicate_id",
	[PROTO_E_BAD_FRAME] = "bad_frame",
	[PROTO_E_BAD_SEQUENCE] = "bad_sequence",
	[PROTO_E_NOT_FOUND] = "not_found",
	[PROTO_E_DENIED] = "denied",
	[PROTO_E_LIMIT] = "limit",
	[PROTO_E_EXISTS] = "exists",
	[PROTO_E_NOT_UNIQUE] = "not_unique",
	[PROTO_E_UNAVAILABLE] = "unavailable",
	[PROTO_E_UNAUTHORIZED] = "unauthorized",
	[PROTO_E_INTERNAL] = "internal",
	[PROTO_E_CANNOT_EXEC] = "cannot_exec",
};

const char *proto_err_name(enum proto_err e)
{
	if ((unsigned)e >= _PROTO_E_MAX)
		return "internal";
	return err_names[e];
}

enum proto_err proto_err_from_errno(int r)
{
	switch (-r) {
	case 0:
		return PROTO_E_OK;
	case ENOENT:
	case ESRCH:
		return PROTO_E_NOT_FOUND;
	case EACCES:
	case EPERM:
	case ELOOP:
	case EXDEV:
	case EROFS:
		return PROTO_E_DENIED;
	case EEXIST:
	case ENOTEMPTY:
		return PROTO_E_EXISTS;
	case E2BIG:
	case EFBIG:
	case ENAMETOOLONG:
	case EMSGSIZE:
		return PROTO_E_TOO_LARGE;
	case EINVAL:
	case ENOTDIR:
	case EISDIR:
		return PROTO_E_BAD_REQUEST;
	case EBUSY:
	case EAGAIN:
	case EMFILE:
	case ENFILE:
	case ENOSPC:
	case EDQUOT:
	case ENOBUFS: /* a queue's bound (exec.stdin past its window) */
		return PROTO_E_LIMIT;
	case ENOTUNIQ:
		return PROTO_E_NOT_UNIQUE;
	case EOPNOTSUPP:
	case ENOSYS:
		return PROTO_E_UNAVAILABLE;
	default:
		return PROTO_E_INTERNAL;
	}
}

const char *proto_peer_name(const char *s, char *out, size_t size)
{
	size_t len = strlen(s), k = PROTO_PEER_NAME_SHOWN;

	if (len <= PROTO_PEER_NAME_SHOWN) {
		snprintf(out, size, "\"%s\"", s);
		return out;
	}
	while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80)
		k--;
	snprintf(out, size, "\"%.*s\"[cut: %zu bytes]", (int)k, s, len);
	return out;
}

static int fail(struct proto_error *err, enum proto_err code, int r, const char *fmt, ...)
	_printf_(4, 5);
static int fail(struct proto_error *err, enum proto_err code, int r, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return r;
}

/* Scan the raw text before cJSON sees it: nesting depth, string lengths and NUL escapes.
 * cJSON's own CJSON_NESTING_LIMIT is 1000, far over ours, and it recurses; this scan is a
 * flat loop, so a 1 MiB "[[[[..." costs one pass and no allocation. */
/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), 0 if there is none. p[0] >= 0x80. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xBF;
	size_t k;

	if (c >= 0xC2 && c <= 0xDF)
		k = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		k = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		k = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else
		return 0;
	if (n < k || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t j = 2; j < k; j++)
		if (p[j] < 0x80 || p[j] > 0xBF)
			return 0;
	return k;
}

long proto_json_u_escape(const char *p, size_t left)
{
	long v = 0;

	if (left < 6 || p[0] != '\\' || p[1] != 'u')
		return -1;
	for (size_t i = 2; i < 6; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;

		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	return v;
}

bool proto_utf8_valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] >= 0x80) {
			size_t k = utf8_seq((const unsigned char *)s + i, n - i);

			if (!k)
				return false;
			i += k - 1;
		}
	return true;
}

static int precheck(const char *buf, size_t len, struct proto_error *err, size_t *values)
{
	unsigned depth = 0;
	bool in_string = false;
	size_t slen = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c == 0)
			return fail(err, PROTO_E_BAD_JSON, -EINVAL, "NUL byte at offset %zu", i);
		if (in_string) {
			if (++slen > PROTO_MAX_STRING)
				return fail(err, PROTO_E_TOO_LARGE, -E2BIG,
					    "string at offset %zu is over %u bytes", i,
					    PROTO_MAX_STRING);
			/* JSON text is UTF-8 (RFC 8259 8.1); a WebSocket peer must fail a text
			 * message that is not (RFC 6455 8.1), so none is ever passed on. */
			if (c >= 0x80) {
				size_t k = utf8_seq((const unsigned char *)buf + i, len - i);

				if (!k)
					return fail(err, PROTO_E_BAD_JSON, -EINVAL,
						    "invalid UTF-8 at offset %zu", i);
				i += k - 1;
				slen += k - 1;
				continue;
			}
			if (c == '\\') {
				if (i + 1 >= len)
					break;
				/* \u0000 would silently cut the C string cJSON hands out:
				 * "allowed\u0000/../x" must not become "allowed". So would
				 * any \u not followed by four hex digits ("\uZZZZ"): cJSON
				 * reads it as U+0000 where JSON has no such escape. */
				if (buf[i + 1] == 'u') {
					long u = proto_json_u_escape(buf + i, len - i);

					if (u < 0)
						return fail(err, PROTO_E_BAD_JSON, -EINVAL,
							    "\\u without four hex digits in a "
							    "string at offset %zu",
							    i);
					if (u == 0)
						return fail(err, PROTO_E_BAD_JSON, -EINVAL,
							    "\\u0000 in a string at offset %zu", i);
				}
				i++;
				slen++;
			} else if (c == '"')
				in_string = false;
			continue;
		}
		switch (c) {
		case '"':
			in_string = true;
			slen = 0;
			break;
		case ',':
		case '{':
		case '[':
			if (++*values > PROTO_MAX_VALUES)
				return fail(err, PROTO_E_TOO_LARGE, -E2BIG,
					    "more than %u JSON values at offset %zu",
					    PROTO_MAX_VALUES, i);
			if (c == ',')
				break;
			if (++depth > PROTO_MAX_DEPTH)
				return fail(err, PROTO_E_TOO_DEEP, -EINVAL,
					    "nesting deeper than %u at offset %zu", PROTO_MAX_DEPTH,
					    i);
			break;
		case '}':
		case ']':
			if (depth == 0)
				return fail(err, PROTO_E_BAD_JSON, -EINVAL,
					    "unbalanced '%c' at offset %zu", c, i);
			depth--;
			break;
		default:
			break;
		}
	}
	return 0;
}

/* cJSON keeps every member of {"a":1,"a":2} and cJSON_GetObjectItem returns the first: two
 * readers of one message could then disagree (a relay checks one "agent", pistisd uses
 * another). Reject duplicates everywhere. Objects are capped at PROTO_MAX_KEYS members, so
 * the quadratic compare is bounded. */
static int check_tree(const cJSON *node, struct proto_error *err)
{
	size_t n = 0;

	if (!cJSON_IsObject(node) && !cJSON_IsArray(node))
		return 0;
	for (const cJSON *c = node->child; c; c = c->next) {
		if (cJSON_IsObject(node)) {
			if (!c->string)
				return fail(err, PROTO_E_BAD_JSON, -EINVAL,
					    "member without a name");
			if (++n > PROTO_MAX_KEYS)
				return fail(err, PROTO_E_TOO_LARGE, -E2BIG,
					    "object with more than %u members", PROTO_MAX_KEYS);
			for (const cJSON *d = node->child; d != c; d = d->next)
				if (!strcmp(d->string, c->string)) {
					char q[PROTO_PEER_NAME_SIZE];

					return fail(err, PROTO_E_DUPLICATE_KEY, -EINVAL,
						    "duplicate key %s",
						    proto_peer_name(c->string, q, sizeof(q)));
				}
		}
		int r = check_tree(c, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int proto_parse(const char *buf, size_t len, cJSON **ret, struct proto_error *err)
{
	size_t values;

	return proto_parse_values(buf, len, ret, err, &values);
}

int proto_parse_values(const char *buf, size_t len, cJSON **ret, struct proto_error *err,
		       size_t *ret_values)
{
	const char *end = NULL;
	cJSON *root;
	int r;

	*ret = NULL;
	*ret_values = 1;
	if (len > PROTO_MAX_MESSAGE)
		return fail(err, PROTO_E_TOO_LARGE, -E2BIG, "message of %zu bytes is over %u", len,
			    PROTO_MAX_MESSAGE);
	r = precheck(buf, len, err, ret_values);
	if (r < 0)
		return r;
	root = cJSON_ParseWithLengthOpts(buf, len, &end, false);
	if (!root)
		return fail(err, PROTO_E_BAD_JSON, -EINVAL, "not valid JSON near offset %td",
			    cJSON_GetErrorPtr() && cJSON_GetErrorPtr() >= buf &&
					    cJSON_GetErrorPtr() <= buf + len
				    ? cJSON_GetErrorPtr() - buf
				    : (ptrdiff_t)-1);
	for (const char *p = end; p && p < buf + len; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
			cJSON_Delete(root);
			return fail(err, PROTO_E_BAD_JSON, -EINVAL,
				    "trailing bytes after the JSON value");
		}
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return fail(err, PROTO_E_BAD_JSON, -EINVAL, "message is not a JSON object");
	}
	r = check_tree(root, err);
	if (r < 0) {
		cJSON_Delete(root);
		return r;
	}
	*ret = root;
	return 0;
}

bool proto_id_valid(const char *id, size_t max)
{
	size_t n = 0;

	if (!id || !*id)
		return false;
	for (const char *p = id; *p; p++, n++) {
		char c = *p;
		if (n >= max)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == ':' || c == '-'))
			return false;
	}
	return true;
}

int proto_request_parse(cJSON *root, size_t max_id, struct proto_request *ret,
			struct proto_error *err)
{
	cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
	cJSON *op = cJSON_GetObjectItemCaseSensitive(root, "op");

	*ret = (struct proto_request){.root = root};
	if (cJSON_IsString(id) && proto_id_valid(id->valuestring, max_id))
		ret->id = id->valuestring;
	if (!cJSON_IsString(op))
		return fail(err, PROTO_E_BAD_REQUEST, -EINVAL, "\"op\" must be a string");
	ret->op_name = op->valuestring;
	if (!ret->id)
		return fail(err, PROTO_E_BAD_REQUEST, -EINVAL,
			    "\"id\" must be 1..%zu characters of [A-Za-z0-9._:-]", max_id);
	ret->op = proto_op_from_name(op->valuestring);
	if (ret->op == PROTO_OP_UNKNOWN) {
		char q[PROTO_PEER_NAME_SIZE];

		return fail(err, PROTO_E_UNKNOWN_OP, -EINVAL, "unknown operation %s",
			    proto_peer_name(op->valuestring, q, sizeof(q)));
	}
	return 0;
}

int proto_get_string(cJSON *obj, const char *key, size_t max, const char **ret,
		     struct proto_error *err)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	if (!cJSON_IsString(v))
		return fail(err, PROTO_E_BAD_REQUEST, -EINVAL, "\"%s\" must be a string", key);
	if (strlen(v->valuestring) > max)
		return fail(err, PROTO_E_TOO_LARGE, -EINVAL, "\"%s\" is longer than %zu bytes", key,
			    max);
	*ret = v->valuestring;
	return 0;
}

int proto_get_u64(cJSON *obj, const char *key, uint64_t max, uint64_t *ret, struct proto_error *err)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	double d;

	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	if (!cJSON_IsNumber(v))
		return fail(err, PROTO_E_BAD_REQUEST, -EINVAL, "\"%s\" must be a number", key);
	d = v->valuedouble;
	/* doubles hold integers exactly up to 2^53; beyond that "exact" is a lie. */
	if (!(d >= 0) || d != floor(d) || d > 9007199254740992.0 || d > (double)max)
		return fail(err, PROTO_E_BAD_REQUEST, -EINVAL,
			    "\"%s\" must be an integer in 0..%llu", key, (unsigned long long)max);
	*ret = (uint64_t)d;
	return 0;
}

int proto_get_bool(cJSON *obj, const char *key, bool *ret, struct proto_error *err)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	if (!cJSON_IsBool(v))
		return fail(err, PROTO_E_BAD_REQUEST, -EINVAL, "\"%s\" must be true or false", key);
	*ret = cJSON_IsTrue(v);
	return 0;
}

static bool env_name_valid(const char *n)
{
	if (strncmp(n, "PI_", 3) || !n[3])
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	return strlen(n) <= 128;
}

void proto_exec_start_done(struct proto_exec_start *s)
{
	free(s->argv);
	if (s->env)
		for (size_t i = 0; i < s->n_env; i++)
			free(s->env[i]);
	free(s->env);
	*s = (struct proto_exec_start){0};
}

int proto_exec_start_parse(cJSON *root, struct proto_exec_start *s, struct proto_error *err)
{
	cJSON *argv, *env;
	const char *mode = NULL;
	uint64_t v;
	int r;

	*s = (struct proto_exec_start){.rows = 24, .cols = 80};
	r = proto_get_string(root, "agent", PROTO_MAX_AGENT, &s->agent, err);
	if (r == -ENOENT || (r == 0 && !*s->agent))
		return fail(err, PROTO_E_BAD_REQUEST, -EINVAL, "\"agent\" is required");
	if (r < 0)
		return r;

	argv = cJSON_GetObjectItemCaseSensitive(root, "argv");
	r = proto_get_string(root, "shell", PROTO_MAX_ARGV_BYTES, &s->shell, err);
	if (r < 0 && r != -ENOENT)
		return r;
	if (!!argv == !!s->shell)
		return fail(err, PROTO_E_BAD_REQUEST, -EINVAL,
			    "exactly one of \"argv\" and \"shell\" is required");
	if (argv) {
		size_t n = 0, bytes = 0;
		if (!cJSON_IsArray(argv))
			return fail(err, PROTO_E_BAD_REQUEST, -EINVAL, "\"argv\" must be an array");
		n = (size_t)cJSON_GetArraySize(argv);
		if (n == 0 || n > PROTO_MAX_ARGV)
			return fail(err, PROTO_E_BAD_REQUEST, -EINVAL,
				    "\"argv\" must have 1..%u entries", PROTO_MAX_ARGV);
		s->argv = calloc(n + 1, sizeof(char *));
		if (!s->argv)
			return fail(err, PROTO_E_INTERNAL, -ENOMEM, "out of memory");
		for (cJSON *a = argv->child; a; a = a->next) {
			if (!cJSON_IsString(a)) {
				proto_exec_start_done(s);
				return fail(err, PROTO_E_BAD_REQUEST, -EINVAL,
					    "\"argv\" entries must be strings");
			}
			bytes += strlen(a->valuestring) + 1;
			if (bytes > PROTO_MAX_ARGV_BYTES) {
				proto_exec_start_done(s);
				return fail(err, PROTO_E_TOO_LARGE, -EINVAL,
					    "\"argv\" is over %u bytes", PROTO_MAX_ARGV_BYTES);
			}
			s->argv[s->argc++] = a->valuestring;
		}
		if (!*s->argv[0]) {
			proto_exec_start_done(s);
			return fail(err, PROTO_E_BAD_REQUEST, -EINVAL, "argv[0] is empty");
		}
	}

	r = proto_get_string(root, "cwd", PROTO_MAX_PATH, &s->cwd, err);
	if (r < 0 && r != -ENOENT)
		goto fail;
	r = proto_get_string(root, "tag", PROTO_MAX_TAG, &s->tag, err);
	if (r < 0 && r != -ENOENT)
		goto fail;
	if (s->tag && !proto_id_valid(s->tag, PROTO_MAX_TAG)) {
		r = fail(err, PROTO_E_BAD_REQUEST, -EINVAL,
			 "\"tag\" must be 1..%u characters of [A-Za-z0-9._:-]", PROTO_MAX_TAG);
		goto fail;
	}

	env = cJSON_GetObjectItemCaseSensitive(root, "env");
	if (env && !cJSON_IsNull(env)) {
		size_t n;
		if (!cJSON_IsObject(env)) {
			r = fail(err, PROTO_E_BAD_REQUEST, -EINVAL, "\"env\" must be an object");
			goto fail;
		}
		n = (size_t)cJSON_GetArraySize(env);
		if (n > PROTO_MAX_ENV) {
			r = fail(err, PROTO_E_TOO_LARGE, -EINVAL, "\"env\" has more than %u names",
				 PROTO_MAX_ENV);
			goto fail;
		}
		s->env = calloc(n + 1, sizeof(char *));
		if (!s->env) {
			r = fail(err, PROTO_E_INTERNAL, -ENOMEM, "out of memory");
			goto fail;
		}
		for (cJSON *e = env->child; e; e = e->next) {
			char q[PROTO_PEER_NAME_SIZE];

			if (!env_name_valid(e->string)) {
				r = fail(err, PROTO_E_BAD_REQUEST, -EINVAL,
					 "\"env\" may only set PI_[A-Z0-9_]+ names, not %s",
					 proto_peer_name(e->string, q, sizeof(q)));
				goto fail;
			}
			if (!cJSON_IsString(e) || strchr(e->valuestring, '\n') ||
			    strlen(e->valuestring) > 4096) {
				r = fail(err, PROTO_E_BAD_REQUEST, -EINVAL,
					 "\"env\" %s must be a string of at most 4096 bytes "
					 "without newline",
					 proto_peer_name(e->string, q, sizeof(q)));
				goto fail;
			}
			if (asprintf(&s->env[s->n_env], "%s=%s", e->string, e->valuestring) < 0) {
				s->env[s->n_env] = NULL;
				r = fail(err, PROTO_E_INTERNAL, -ENOMEM, "out of memory");
				goto fail;
			}
			s->n_env++;
		}
	}

	r = proto_get_string(root, "stdin", 16, &mode, err);
	if (r < 0 && r != -ENOENT)
		goto fail;
	if (!mode || !strcmp(mode, "null"))
		s->stdin_mode = PROTO_STDIN_NULL;
	else if (!strcmp(mode, "pipe"))
		s->stdin_mode = PROTO_STDIN_PIPE;
	else {
		r = fail(err, PROTO_E_BAD_REQUEST, -EINVAL,
			 "\"stdin\" must be \"null\" or \"pipe\"");
		goto fail;
	}
	r = proto_get_bool(root, "pty", &s->pty, err);
	if (r < 0 && r != -ENOENT)
		goto fail;
	r = proto_get_u64(root, "rows", PROTO_MAX_WINSIZE, &v, err);
	if (r == 0)
		s->rows = (unsigned)v;
	else if (r != -ENOENT)
		goto fail;
	r = proto_get_u64(root, "cols", PROTO_MAX_WINSIZE, &v, err);
	if (r == 0)
		s->cols = (unsigned)v;
	else if (r != -ENOENT)
		goto fail;
	/* the environment builder's rule for TERM: a name for terminfo, never a path */
	r = proto_get_string(root, "term", 64, &s->term, err);
	if (r < 0 && r != -ENOENT)
		goto fail;
	if (s->term && (!s->pty || envb_term_refusal(s->term))) {
		r = fail(err, PROTO_E_BAD_REQUEST, -EINVAL, "\"term\": %s",
			 s->pty ? envb_term_refusal(s->term)
				: "only for a command on a pty (\"pty\": true)");
		goto fail;
	}
	r = proto_get_u64(root, "timeout_ms", UINT64_C(30) * 24 * 3600 * 1000, &s->timeout_ms, err);
	if (r < 0 && r != -ENOENT)
		goto fail;
	r = proto_get_u64(root, "output_cap", UINT64_C(1) << 50, &s->output_cap, err);
	if (r < 0 && r != -ENOENT)
		goto fail;
	return 0;
fail:
	proto_exec_start_done(s);
	return r;
}

static char *print_and_free(cJSON *o)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	return s;
}

/* Move every member of extra into o (extra is consumed). */
static void merge(cJSON *o, cJSON *extra)
{
	if (!extra)
		return;
	while (extra->child) {
		cJSON *c = cJSON_DetachItemViaPointer(extra, extra->child);
		cJSON_AddItemToObject(o, c->string, c);
		/* cJSON_AddItemToObject strdup'd the name; c->string was the old copy. */
	}
	cJSON_Delete(extra);
}

size_t proto_utf8_sanitize(const char *in, char *out, size_t size)
{
	size_t n = strlen(in), o = 0;

	if (!size)
		return 0;
	for (size_t i = 0; i < n && o + 1 < size;) {
		unsigned char c = (unsigned char)in[i];
		size_t k = c < 0x80 ? 1 : utf8_seq((const unsigned char *)in + i, n - i);

		if (!k) {
			out[o++] = '?';
			i++;
			continue;
		}
		if (o + k >= size)
			break; /* never half a character */
		memcpy(out + o, in + i, k);
		o += k;
		i += k;
	}
	out[o] = '\0';
	return o;
}

char *proto_error_build(const char *id, enum proto_err code, const char *message)
{
	cJSON *o = cJSON_CreateObject(), *e;
	/* Messages quote what a peer sent (proto_peer_name: cut before a whole character): a cut
	 * through a multi-byte character, or any other invalid UTF-8, would make the answer
	 * a text message a WebSocket peer must fail (RFC 6455 8.1). */
	char safe[PROTO_MAX_ERROR_MESSAGE];

	proto_utf8_sanitize(message ? message : "", safe, sizeof(safe));
	message = safe;

	if (!o)
		return NULL;
	if (id)
		cJSON_AddStringToObject(o, "id", id);
	else
		cJSON_AddNullToObject(o, "id");
	cJSON_AddFalseToObject(o, "ok");
	e = cJSON_AddObjectToObject(o, "error");
	if (e) {
		cJSON_AddStringToObject(e, "code", proto_err_name(code));
		cJSON_AddStringToObject(e, "message", message ? message : "");
	}
	return print_and_free(o);
}

char *proto_ok_build(const char *id, cJSON *extra)
{
	cJSON *o = cJSON_CreateObject();

	if (!o) {
		cJSON_Delete(extra);
		return NULL;
	}
	cJSON_AddStringToObject(o, "id", id ? id : "");
	cJSON_AddTrueToObject(o, "ok");
	merge(o, extra);
	return print_and_free(o);
}

char *proto_event_build(const char *name, const char *id, cJSON *extra)
{
	cJSON *o = cJSON_CreateObject();

	if (!o) {
		cJSON_Delete(extra);
		return NULL;
	}
	cJSON_AddStringToObject(o, "event", name);
	if (id)
		cJSON_AddStringToObject(o, "id", id);
	merge(o, extra);
	return print_and_free(o);
}

static void put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
}

static uint64_t get_be(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

void proto_frame_header_put(uint8_t out[PROTO_FRAME_HEADER], uint8_t stream, uint16_t flags,
			    uint32_t cmd, uint64_t seq)
{
	out[0] = PROTO_VERSION;
	out[1] = stream;
	put_be(out + 2, flags, 2);
	put_be(out + 4, cmd, 4);
	put_be(out + 8, seq, 8);
}

int proto_frame_parse(const uint8_t *buf, size_t len, struct proto_frame *f,
		      struct proto_error *err)
{
	if (len < PROTO_FRAME_HEADER)
		return fail(err, PROTO_E_BAD_FRAME, -EINVAL,
			    "frame of %zu bytes is shorter than its header", len);
	if (len - PROTO_FRAME_HEADER > PROTO_MAX_FRAME_PAYLOAD)
		return fail(err, PROTO_E_TOO_LARGE, -E2BIG, "frame payload of %zu bytes is over %u",
			    len - PROTO_FRAME_HEADER, PROTO_MAX_FRAME_PAYLOAD);
	if (buf[0] != PROTO_VERSION)
		return fail(err, PROTO_E_BAD_FRAME, -EINVAL, "frame version %u, expected %u",
			    buf[0], PROTO_VERSION);
	*f = (struct proto_frame){
		.stream = buf[1],
		.flags = (uint16_t)get_be(buf + 2, 2),
		.cmd = (uint32_t)get_be(buf + 4, 4),
		.seq = get_be(buf + 8, 8),
		.payload = buf + PROTO_FRAME_HEADER,
		.len = len - PROTO_FRAME_HEADER,
	};
	if (f->stream >= _PROTO_STREAM_MAX)
		return fail(err, PROTO_E_BAD_FRAME, -EINVAL, "unknown stream %u", f->stream);
	if (f->flags & ~(uint16_t)PROTO_FRAME_EOF)
		return fail(err, PROTO_E_BAD_FRAME, -EINVAL, "unknown frame flags 0x%x", f->flags);
	if (f->seq == 0 || f->cmd == 0)
		return fail(err, PROTO_E_BAD_FRAME, -EINVAL, "frame with command or sequence 0");
	return 0;
}

size_t proto_ws_binary_header(const uint8_t *buf, size_t n, uint64_t *plen)
{
	uint64_t len;
	size_t hl;

	/* 0x82: FIN, no RSV bit, opcode 2 (binary); the mask bit must be clear. */
	if (n < 2 || buf[0] != 0x82 || (buf[1] & 0x80))
		return 0;
	len = buf[1] & 0x7f;
	hl = len == 126 ? 4 : len == 127 ? 10 : 2;
	if (n < hl)
		return 0;
	if (hl > 2) {
		len = get_be(buf + 2, hl - 2);
		if (len < (hl == 4 ? 126u : 0x10000u) || len >> 63)
			return 0;
	}
	*plen = len;
	return hl;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *proto_base64_encode(const uint8_t *in, size_t len)
{
	size_t out_len = (len + 2) / 3 * 4;
	char *out, *o;

	if (len > PROTO_MAX_FILE * 2)
		return NULL;
	out = o = malloc(out_len + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		*o++ = b64[v >> 18 & 63];
		*o++ = b64[v >> 12 & 63];
		*o++ = i + 1 < len ? b64[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? b64[v & 63] : '=';
	}
	*o = 0;
	return out;
}

static int b64_value(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;
	return p ? (int)(p - b64) : -1;
}

int proto_base64_decode(const char *in, size_t in_len, uint8_t **ret, size_t *ret_len)
{
	_cleanup_free_ uint8_t *out = NULL;
	size_t n = 0;

	if (in_len % 4)
		return -EINVAL;
	out = malloc(in_len / 4 * 3 + 1);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < in_len; i += 4) {
		int v[4];
		bool last = i + 4 == in_len;
		for (int k = 0; k < 4; k++) {
			char c = in[i + k];
			if (c == '=' && last && k >= 2 && (k == 3 || in[i + 3] == '='))
				v[k] = -2;
			else if ((v[k] = b64_value(c)) < 0)
				return -EINVAL;
		}
		out[n++] = (uint8_t)(v[0] << 2 | v[1] >> 4);
		if (v[2] >= 0)
			out[n++] = (uint8_t)((v[1] & 15) << 4 | v[2] >> 2);
		if (v[3] >= 0) {
			if (v[2] < 0)
				return -EINVAL;
			out[n++] = (uint8_t)((v[2] & 3) << 6 | v[3]);
		}
	}
	*ret = TAKE_PTR(out);
	*ret_len = n;
	return 0;
}

/* Compared as SHA-256 digests, byte by byte without an early exit: the time taken depends
 * on each input's own length only. A byte loop over min(a_len, b_len) would stop growing
 * once a guess is longer than the secret, telling a peer who varies its guess's length
 * how long the token is. */
bool proto_secret_equal(const char *a, size_t a_len, const char *b, size_t b_len)
{
	uint8_t da[SHA256_DIGEST_SIZE], db[SHA256_DIGEST_SIZE];

	sha256(a, a_len, da);
	sha256(b, b_len, db);
	return sha256_equal(da, db) && a_len == b_len;
}
