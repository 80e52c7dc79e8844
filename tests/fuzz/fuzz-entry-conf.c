/* libFuzzer: serve.conf (pistisd-entry/conf.c) and the argv of the default child built from
 * it. Invariants:
 *  - a refusal names a line of the file (0 only for the whole file) and a reason;
 *  - every value taken is one argv element's worth: 1..ENTRY_CONF_MAX_VALUE bytes, no
 *    control character, no blank at either end, no comment left in it; a numeric key holds
 *    digits only, without a leading 0;
 *  - what was taken, written back as "key=value" lines, parses to the very same fields;
 *  - the argv is pistisd, serve, then one "--option=value" (or "--flag") per field set;
 *  - PISTIS_RELAY from the environment is taken whole, or refused as -EINVAL.
 * ASan's leak check at exit covers every path (the fields are freed after an error too). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pistisd-entry/entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define F(name) offsetof(struct entry_serve_conf, name)
static const struct {
	const char *key, *option;
	size_t field;
	bool number;
} keys[] = {
	{"relay", "--relay=", F(relay), false},
	{"token-file", "--token-file=", F(token_file), false},
	{"ca", "--ca=", F(ca), false},
	{"pin", "--pin=", F(pin), false},
	{"name", "--name=", F(name), false},
	{"log-format", "--log-format=", F(log_format), false},
	{"pids-max", "--pids-max=", F(pids_max), true},
	{"max-buffered", "--max-buffered=", F(max_buffered), true},
	{"memory-max", "--memory-max=", F(memory_max), false},
	{"cpu-weight", "--cpu-weight=", F(cpu_weight), true},
};
static const struct {
	const char *key, *option;
	size_t field;
} flags[] = {
	{"verbose", "--verbose", F(verbose)},
	{"share-abstract-sockets", "--share-abstract-sockets", F(share_abstract_sockets)},
};
#undef F

static char *field(const struct entry_serve_conf *c, size_t k)
{
	return *(char *const *)((const char *)c + keys[k].field);
}

static bool flag(const struct entry_serve_conf *c, size_t k)
{
	return *(const bool *)((const char *)c + flags[k].field);
}

static void value_sane(const char *v, bool number)
{
	size_t n = strlen(v);

	if (n == 0 || n > ENTRY_CONF_MAX_VALUE || v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' ||
	    v[n - 1] == '\t' || strstr(v, " #") || strstr(v, "\t#"))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			abort();
	if (number && (strspn(v, "0123456789") != n || v[0] == '0'))
		abort();
}

static const char *fake_value;
static const char *fake_getenv(const char *name)
{
	return strcmp(name, "PISTIS_RELAY") ? NULL : fake_value;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct entry_serve_conf c = {0}, again = {0};
	const char *err = NULL;
	unsigned line = 0, lines = 1;
	char *text = NULL, **argv = NULL, *env = NULL;
	size_t len = 0, n = 0, want = 2;
	FILE *f;
	int r;

	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	r = entry_conf_parse((const char *)data, size, &c, &line, &err);
	if (r < 0) {
		if (!err || line > lines)
			abort();
		goto out;
	}
	if (r != 0 || err || line)
		abort();

	f = open_memstream(&text, &len);
	if (!f)
		abort();
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (field(&c, k)) {
			value_sane(field(&c, k), keys[k].number);
			/* "key=value": with a blank after the '=', a value that starts with
			 * '#' ("name =#1" is "#1") would be a comment */
			fprintf(f, "%s=%s\n", keys[k].key, field(&c, k));
		}
	for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
		fprintf(f, "\t%s=%s # a comment\n", flags[k].key, flag(&c, k) ? "yes" : "no");
	if (fclose(f) != 0)
		abort();
	if (entry_conf_parse(text, len, &again, &line, &err) != 0)
		abort();
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (!field(&c, k) != !field(&again, k) ||
		    (field(&c, k) && strcmp(field(&c, k), field(&again, k))))
			abort();
	for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
		if (flag(&c, k) != flag(&again, k))
			abort();

	r = entry_serve_argv(&c, "/usr/local/bin/pistisd", &argv);
	if (!c.relay || !c.token_file) {
		if (r != -ENOENT)
			abort();
	} else {
		if (r != 0 || strcmp(argv[0], "/usr/local/bin/pistisd") || strcmp(argv[1], "serve"))
			abort();
		n = 2;
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			size_t ol = strlen(keys[k].option);
			if (!field(&c, k))
				continue;
			want++;
			if (!argv[n] || strncmp(argv[n], keys[k].option, ol) ||
			    strcmp(argv[n] + ol, field(&c, k)))
				abort();
			n++;
		}
		for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
			if (!flag(&c, k))
				continue;
			want++;
			if (!argv[n] || strcmp(argv[n], flags[k].option))
				abort();
			n++;
		}
		if (n != want || argv[n])
			abort();
	}

	/* the environment: the input up to its first NUL as PISTIS_RELAY */
	env = strndup((const char *)data, size);
	if (!env)
		abort();
	fake_value = env;
	r = entry_conf_from_env(&again, fake_getenv);
	if (r == 0 && env[0] && strcmp(again.relay, env))
		abort();
	if (r != 0 && (r != -EINVAL || !env[0]))
		abort();
out:
	free(env);
	free(argv);
	free(text);
	entry_conf_done(&again);
	entry_conf_done(&c);
	return 0;
}
