/* serve.conf and the environment → the argv of the default child, `pistisd serve`. */
#include "pistisd-entry/entry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/agent-limits.h"
#include "lib/macro.h"
#include "lib/parse-num.h"

static const struct {
	const char *key;
	size_t field; /* offset of the char * in entry_serve_conf */
	const char *option;
	unsigned long max; /* a number from 1 to max (no sign, no leading 0); 0: any text */
	const char *range; /* its error */
	bool size;	   /* instead: a size from 1M to 1024T (pistisd serve --memory-max) */
} conf_keys[] = {
	{"relay", offsetof(struct entry_serve_conf, relay), "--relay=", 0, NULL, false},
	{"token-file", offsetof(struct entry_serve_conf, token_file), "--token-file=", 0, NULL,
	 false},
	{"ca", offsetof(struct entry_serve_conf, ca), "--ca=", 0, NULL, false},
	{"pin", offsetof(struct entry_serve_conf, pin), "--pin=", 0, NULL, false},
	{"name", offsetof(struct entry_serve_conf, name), "--name=", 0, NULL, false},
	{"log-format", offsetof(struct entry_serve_conf, log_format), "--log-format=", 0, NULL,
	 false},
	{"pids-max", offsetof(struct entry_serve_conf, pids_max), "--pids-max=", 4194304,
	 "pids-max must be a number from 1 to 4194304", false},
	{"max-buffered", offsetof(struct entry_serve_conf, max_buffered), "--max-buffered=", 65536,
	 "max-buffered must be a number of MiB from 1 to 65536", false},
	{"memory-max", offsetof(struct entry_serve_conf, memory_max), "--memory-max=", 0,
	 "memory-max must be from 1M to 1024T (bytes, or with a K, M, G or T suffix)", true},
	{"cpu-weight", offsetof(struct entry_serve_conf, cpu_weight), "--cpu-weight=", 10000,
	 "cpu-weight must be a number from 1 to 10000", false},
};

/* yes/no keys: the option is passed for yes. */
static const struct {
	const char *key;
	size_t field; /* offset of the bool in entry_serve_conf */
	const char *option;
} conf_flags[] = {
	{"verbose", offsetof(struct entry_serve_conf, verbose), "--verbose"},
	{"share-abstract-sockets", offsetof(struct entry_serve_conf, share_abstract_sockets),
	 "--share-abstract-sockets"},
};

static bool *conf_flag(struct entry_serve_conf *c, size_t k)
{
	return (bool *)((char *)c + conf_flags[k].field);
}

static char **conf_field(struct entry_serve_conf *c, size_t k)
{
	return (char **)((char *)c + conf_keys[k].field);
}

static int set_field(char **field, const char *v, size_t n)
{
	char *copy = strndup(v, n);

	if (!copy)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Values end up as one argv element of a root daemon and in its logs: printable bytes only
 * (UTF-8 ≥ 0x80 allowed), no control characters. */
static bool value_ok(const char *v, size_t n)
{
	if (n == 0 || n > ENTRY_CONF_MAX_VALUE)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return false;
	return true;
}

/* v, a piece of the text (not NUL-terminated: strspn and strtoul on it read on past the
 * value, and past the buffer at its end), copied to num with its NUL: false when it does
 * not fit or starts with 0 ("0100" is no number anyone meant). */
static bool number_text(const char *v, size_t n, char *num, size_t size)
{
	if (n >= size || v[0] == '0')
		return false;
	memcpy(num, v, n);
	num[n] = '\0';
	return true;
}

/* A size as pistisd serve takes it. */
static bool size_ok(const char *v, size_t n)
{
	char num[24];
	uint64_t size;

	return number_text(v, n, num, sizeof(num)) &&
	       parse_size_strict(num, AGENT_MEMORY_MIN, AGENT_MEMORY_MAX, &size) == 0;
}

/* A number from 1 to max. */
static bool number_ok(const char *v, size_t n, unsigned long max)
{
	char num[16];
	uint64_t x;

	return number_text(v, n, num, sizeof(num)) && parse_uint_strict(num, max, NULL, &x) == 0 &&
	       x >= 1;
}

static int parse_line(const char *p, size_t len, struct entry_serve_conf *conf,
		      const char **ret_error)
{
	const char *end = p + len, *key, *eq, *val;
	size_t klen, vlen;

	while (p < end && is_blank(*p))
		p++;
	while (end > p && (is_blank(end[-1]) || end[-1] == '\r'))
		end--;
	if (p == end || *p == '#')
		return 0;

	eq = memchr(p, '=', (size_t)(end - p));
	if (!eq) {
		*ret_error = "expected 'key = value'";
		return -EINVAL;
	}
	key = p;
	klen = (size_t)(eq - p);
	while (klen && is_blank(key[klen - 1]))
		klen--;
	val = eq + 1;
	while (val < end && is_blank(*val))
		val++;
	/* A comment may follow the value, after white space (docs/entry.md shows them so):
	 * it was part of the value, and the documented example was refused at its first yes/no
	 * key, or made the relay's path end in "     # or ws://…" and the CA file a name that
	 * does not exist. A '#' inside a value (no blank before it) stays. */
	for (const char *c = val; c < end; c++)
		if (*c == '#' && is_blank(c[-1])) { /* c[-1] is at worst the '=' */
			end = c;
			while (end > val && is_blank(end[-1]))
				end--;
			break;
		}
	vlen = (size_t)(end - val);
	if (!value_ok(val, vlen)) {
		*ret_error = "empty, overlong or control characters in the value";
		return -EINVAL;
	}

	for (size_t k = 0; k < ELEMENTSOF(conf_flags); k++) {
		if (strlen(conf_flags[k].key) != klen || memcmp(key, conf_flags[k].key, klen))
			continue;
		if (vlen == 3 && !memcmp(val, "yes", 3))
			*conf_flag(conf, k) = true;
		else if (vlen == 2 && !memcmp(val, "no", 2))
			*conf_flag(conf, k) = false;
		else {
			*ret_error = "a yes/no key (verbose, share-abstract-sockets) must be yes "
				     "or no";
			return -EINVAL;
		}
		return 0;
	}
	for (size_t k = 0; k < ELEMENTSOF(conf_keys); k++) {
		if (strlen(conf_keys[k].key) != klen || memcmp(key, conf_keys[k].key, klen))
			continue;
		if (memchr(val, '\0', vlen)) {
			*ret_error = "NUL byte in the value";
			return -EINVAL;
		}
		/* said here, with its line: serve refusing it would only show as a child
		 * that keeps exiting 100 */
		if (conf_keys[k].max && !number_ok(val, vlen, conf_keys[k].max)) {
			*ret_error = conf_keys[k].range;
			return -EINVAL;
		}
		if (conf_keys[k].size && !size_ok(val, vlen)) {
			*ret_error = conf_keys[k].range;
			return -EINVAL;
		}
		return set_field(conf_field(conf, k), val, vlen) < 0 ? -ENOMEM : 0;
	}
	*ret_error = "unknown key (relay, token-file, ca, pin, name, log-format, pids-max, "
		     "max-buffered, memory-max, cpu-weight, verbose, share-abstract-sockets)";
	return -EINVAL;
}

int entry_conf_parse(const char *text, size_t len, struct entry_serve_conf *conf,
		     unsigned *ret_line, const char **ret_error)
{
	unsigned line = 0;
	size_t off = 0;

	*ret_line = 0;
	*ret_error = NULL;
	if (len > ENTRY_CONF_MAX_BYTES) {
		*ret_error = "file too large";
		return -EINVAL;
	}
	if (memchr(text, '\0', len)) {
		*ret_line = 0;
		*ret_error = "NUL byte in the file";
		return -EINVAL;
	}
	while (off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		int r;

		line++;
		r = parse_line(text + off, n, conf, ret_error);
		if (r < 0) {
			*ret_line = line;
			if (r == -ENOMEM)
				*ret_error = "out of memory";
			return r;
		}
		off += n + 1;
	}
	return 0;
}

int entry_conf_from_env(struct entry_serve_conf *conf, const char *(*getenv_fn)(const char *))
{
	static const struct {
		const char *env;
		size_t field;
	} vars[] = {
		{"PISTIS_RELAY", offsetof(struct entry_serve_conf, relay)},
		{"PISTIS_TOKEN_FILE", offsetof(struct entry_serve_conf, token_file)},
	};

	for (size_t i = 0; i < ELEMENTSOF(vars); i++) {
		const char *v = getenv_fn(vars[i].env);
		char **field = (char **)((char *)conf + vars[i].field);

		if (!v || !*v)
			continue;
		if (!value_ok(v, strlen(v)))
			return -EINVAL;
		if (set_field(field, v, strlen(v)) < 0)
			return -ENOMEM;
	}
	return 0;
}

void entry_conf_done(struct entry_serve_conf *conf)
{
	for (size_t k = 0; k < ELEMENTSOF(conf_keys); k++) {
		free(*conf_field(conf, k));
		*conf_field(conf, k) = NULL;
	}
}

int entry_serve_argv(const struct entry_serve_conf *conf, const char *pistisd, char ***ret)
{
	/* pistisd, serve, one per key, one per flag, NULL */
	enum { MAX_ARGS = 2 + ELEMENTSOF(conf_keys) + ELEMENTSOF(conf_flags) + 1 };
	struct entry_serve_conf *c = (struct entry_serve_conf *)conf;
	size_t bytes = sizeof(char *) * MAX_ARGS, n = 0;
	char **argv, *p;

	if (!conf->relay || !conf->token_file)
		return -ENOENT;
	bytes += strlen(pistisd) + 1 + sizeof("serve");
	for (size_t k = 0; k < ELEMENTSOF(conf_keys); k++)
		if (*conf_field(c, k))
			bytes += strlen(conf_keys[k].option) + strlen(*conf_field(c, k)) + 1;
	for (size_t k = 0; k < ELEMENTSOF(conf_flags); k++)
		bytes += strlen(conf_flags[k].option) + 1;

	argv = malloc(bytes);
	if (!argv)
		return -ENOMEM;
	p = (char *)(argv + MAX_ARGS);
	/* One "--key=value" element each: a value that starts with '-' can never be read as
	 * another option of pistisd serve. */
#define PUT(...)                                                                                   \
	do {                                                                                       \
		argv[n++] = p;                                                                     \
		p += sprintf(p, __VA_ARGS__) + 1;                                                  \
	} while (0)
	PUT("%s", pistisd);
	PUT("serve");
	for (size_t k = 0; k < ELEMENTSOF(conf_keys); k++)
		if (*conf_field(c, k))
			PUT("%s%s", conf_keys[k].option, *conf_field(c, k));
	for (size_t k = 0; k < ELEMENTSOF(conf_flags); k++)
		if (*conf_flag(c, k))
			PUT("%s", conf_flags[k].option);
#undef PUT
	argv[n] = NULL;
	*ret = argv;
	return 0;
}
