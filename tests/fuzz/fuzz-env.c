/* libFuzzer: the environment builder. The input is one flags byte, then NUL-separated
 * strings: "\x01NAME=VALUE" is a --set entry, "\x02NAME" a --keep name, "\x03VALUE" the next
 * opts field the flags ask for (path, user, home, tmpdir, shell, proxy, no_proxy), anything
 * else an inherited entry. Whatever the input, a successful build must hold the invariants
 * below; they are checked against an allowlist written out here independently. */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/env-build.h"
#include "lib/macro.h"

#define MAX_STRINGS 256

static const char *const allowlist[] = {
	"LANG",	       "LANGUAGE",	    "LC_ALL",
	"LC_CTYPE",    "LC_COLLATE",	    "LC_MESSAGES",
	"LC_MONETARY", "LC_NUMERIC",	    "LC_TIME",
	"LC_ADDRESS",  "LC_IDENTIFICATION", "LC_MEASUREMENT",
	"LC_NAME",     "LC_PAPER",	    "LC_TELEPHONE",
	"TERM",	       "COLORTERM",	    "COLUMNS",
	"LINES",       "NO_COLOR",	    "FORCE_COLOR",
	"CLICOLOR",
};
static const char *const owned[] = {
	"PATH",	      "HOME",	     "TMPDIR",	   "USER",	  "LOGNAME",  "SHELL",
	"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy",
};

static bool name_eq(const char *name, size_t len, const char *s)
{
	return strlen(s) == len && memcmp(name, s, len) == 0;
}

static bool in_list(const char *name, size_t len, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (list[i] && name_eq(name, len, list[i]))
			return true;
	return false;
}

static bool valid_name(const char *s, size_t len)
{
	if (len == 0 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

static bool pi_name(const char *s, size_t len)
{
	if (len < 4 || len > 67 || memcmp(s, "PI_", 3) != 0)
		return false;
	for (size_t i = 3; i < len; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

/* A C1 control, U+2028/U+2029 or a bidirectional control, spelled out as UTF-8. */
static bool has_forbidden_char(const char *v)
{
	static const char *const seq[] = {
		"\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaa", "\xe2\x80\xab", "\xe2\x80\xac",
		"\xe2\x80\xad", "\xe2\x80\xae", "\xe2\x81\xa6", "\xe2\x81\xa7", "\xe2\x81\xa8",
		"\xe2\x81\xa9", "\xe2\x80\x8e", "\xe2\x80\x8f", "\xd8\x9c",
	};

	for (const unsigned char *c = (const unsigned char *)v; c[0]; c++)
		if (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f)
			return true;
	for (size_t i = 0; i < ELEMENTSOF(seq); i++)
		if (strstr(v, seq[i]))
			return true;
	return false;
}

/* The value getenv() would have seen in inherited (first occurrence). */
static const char *first_value(char *const *inh, const char *name, size_t len)
{
	for (; *inh; inh++)
		if (strncmp(*inh, name, len) == 0 && (*inh)[len] == '=')
			return *inh + len + 1;
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *set[MAX_STRINGS + 1], *keep[MAX_STRINGS + 1];
	char *inh[MAX_STRINGS + 1];
	const char *fields[7] = {NULL};
	size_t n_set = 0, n_keep = 0, n_inh = 0, n_fields = 0;
	struct envb_opts o = {0};
	char **env = NULL;
	const char *bad = NULL;
	char *buf;
	uint8_t flags;
	int r;

	if (size < 1)
		return 0;
	flags = data[0];
	buf = malloc(size); /* data[1..] plus a final NUL */
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';

	for (char *p = buf, *end = buf + size - 1; p < end; p += strlen(p) + 1) {
		if (p[0] == '\x01' && n_set < MAX_STRINGS)
			set[n_set++] = p + 1;
		else if (p[0] == '\x02' && n_keep < MAX_STRINGS)
			keep[n_keep++] = p + 1;
		else if (p[0] == '\x03' && n_fields < ELEMENTSOF(fields))
			fields[n_fields++] = p + 1;
		else if (n_inh < MAX_STRINGS)
			inh[n_inh++] = p;
	}
	set[n_set] = NULL;
	keep[n_keep] = NULL;
	inh[n_inh] = NULL;

	/* Each flag takes the next \x03 string, or a valid default. */
	size_t f = 0;
#define FIELD(bit, member, dflt)                                                                   \
	if (flags & (bit))                                                                         \
		o.member = f < n_fields ? fields[f++] : (dflt);
	FIELD(0x01, path, "/usr/bin:/bin")
	FIELD(0x02, user, "pi-agent-1")
	FIELD(0x04, home, "/home/a")
	FIELD(0x08, tmpdir, "/tmp/a")
	FIELD(0x10, shell, "/bin/bash")
	FIELD(0x20, proxy, "http://127.0.0.1:3128")
	FIELD(0x40, no_proxy, "localhost")
#undef FIELD
	o.set = set;
	o.keep = keep;
	if (flags & 0x80)
		o.max_bytes = 256;

	r = envb_build(&o, inh, &env, &bad);
	if (r == -EINVAL) {
		/* ret_bad names something the caller passed. */
		bool found = false;
		const char *const cand[] = {o.path,  o.user,  o.home,	 o.tmpdir,
					    o.shell, o.proxy, o.no_proxy};

		for (size_t i = 0; i < n_set; i++)
			found |= bad == set[i];
		for (size_t i = 0; i < n_keep; i++)
			found |= bad == keep[i];
		for (size_t i = 0; i < ELEMENTSOF(cand); i++)
			found |= cand[i] && bad == cand[i];
		if (!found)
			abort();
		free(buf);
		return 0;
	}
	if (r == -E2BIG) {
		free(buf);
		return 0;
	}
	if (r != 0)
		abort();

	size_t cap = o.max_bytes ? o.max_bytes : ENVB_MAX_BYTES_DEFAULT, total = 0, n = 0;
	const char *path = o.path ? o.path : ENVB_DEFAULT_PATH;

	if (!env[0] || strncmp(env[0], "PATH=", 5) != 0 || strcmp(env[0] + 5, path) != 0)
		abort();
	for (char **e = env; *e; e++, n++) {
		const char *s = *e, *eq = strchr(s, '=');
		size_t nlen;

		if (!eq)
			abort();
		nlen = (size_t)(eq - s);
		if (!valid_name(s, nlen) || strchr(s, '\n'))
			abort();
		for (const unsigned char *c = (const unsigned char *)eq + 1; *c; c++)
			if ((*c < 0x20 && *c != '\t') || *c == 0x7f)
				abort();
		if (has_forbidden_char(eq + 1))
			abort();
		for (char **prev = env; prev < e; prev++)
			if (strncmp(*prev, s, nlen + 1) == 0)
				abort();
		total += strlen(s) + 1;

		if (in_list(s, nlen, owned, ELEMENTSOF(owned))) {
			/* Only when opts asked for it, never from inherited. */
			if ((name_eq(s, nlen, "HOME") && (!o.home || strcmp(eq + 1, o.home))) ||
			    (name_eq(s, nlen, "TMPDIR") &&
			     (!o.tmpdir || strcmp(eq + 1, o.tmpdir))) ||
			    ((name_eq(s, nlen, "USER") || name_eq(s, nlen, "LOGNAME")) &&
			     (!o.user || strcmp(eq + 1, o.user))) ||
			    (name_eq(s, nlen, "SHELL") && !o.user && !o.shell) ||
			    (strstr(s, "_PROXY=") == s + nlen - 6 && !o.proxy) ||
			    (strstr(s, "_proxy=") == s + nlen - 6 && !o.proxy))
				abort();
			continue;
		}
		bool from_set = false;
		for (size_t i = 0; i < n_set; i++)
			if (strcmp(set[i], s) == 0)
				from_set = true;
		if (from_set)
			continue;
		/* From inherited: allowlisted, PI_*, or kept; never a refused name; the value
		 * is the first occurrence's. */
		if (!in_list(s, nlen, allowlist, ELEMENTSOF(allowlist)) && !pi_name(s, nlen) &&
		    !in_list(s, nlen, keep, n_keep))
			abort();
		{
			char name[ENVB_MAX_NAME + 1];

			if (nlen > ENVB_MAX_NAME)
				abort();
			memcpy(name, s, nlen);
			name[nlen] = '\0';
			if (envb_keep_refusal(name))
				abort();
		}
		const char *fv = first_value(inh, s, nlen);
		if (!fv || strcmp(fv, eq + 1) != 0)
			abort();
	}
	if (total > cap || n > ENVB_MAX_ENTRIES)
		abort();

	envb_free(env);
	free(buf);
	return 0;
}
