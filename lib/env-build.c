#include "lib/env-build.h"

#include "lib/escape.h"
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"
#include "lib/static-slot.h"

/* How a value is checked. Locale and terminal values are short ASCII tokens: no '/' (a
 * locale or terminfo name with a slash loads a file the caller picks; sudo and doas refuse
 * it too), no '%' (format strings in old locale code), no bytes outside the charset. */
enum var_class {
	VC_LOCALE, /* LANG, LANGUAGE, LC_*: [A-Za-z0-9_.@:+,-]{1,128} */
	VC_TERM,   /* TERM, COLORTERM: [A-Za-z0-9_.+-]{1,64} */
	VC_NUMBER, /* COLUMNS, LINES: 1..5 digits, no leading zero */
	VC_FLAG,   /* NO_COLOR, FORCE_COLOR, CLICOLOR: [A-Za-z0-9_.+-]{0,16} */
	VC_TZ,	   /* TZ (only with --keep/--set): no file path, see tz_ok() */
	VC_TEXT,   /* PI_*, other --keep/--set: UTF-8, no C0/C1 controls but TAB, <= 4 KiB */
};

struct pass_rule {
	const char *name;
	enum var_class cls;
};

/* The whole allowlist of names copied from the inherited environment (plus PI_*). Only
 * the real LC_ categories: an unknown LC_FOO is nothing any libc reads, so it goes. */
static const struct pass_rule pass_rules[] = {
	{"LANG", VC_LOCALE},
	{"LANGUAGE", VC_LOCALE},
	{"LC_ALL", VC_LOCALE},
	{"LC_CTYPE", VC_LOCALE},
	{"LC_COLLATE", VC_LOCALE},
	{"LC_MESSAGES", VC_LOCALE},
	{"LC_MONETARY", VC_LOCALE},
	{"LC_NUMERIC", VC_LOCALE},
	{"LC_TIME", VC_LOCALE},
	{"LC_ADDRESS", VC_LOCALE},
	{"LC_IDENTIFICATION", VC_LOCALE},
	{"LC_MEASUREMENT", VC_LOCALE},
	{"LC_NAME", VC_LOCALE},
	{"LC_PAPER", VC_LOCALE},
	{"LC_TELEPHONE", VC_LOCALE},
	{"TERM", VC_TERM},
	{"COLORTERM", VC_TERM},
	{"COLUMNS", VC_NUMBER},
	{"LINES", VC_NUMBER},
	{"NO_COLOR", VC_FLAG},
	{"FORCE_COLOR", VC_FLAG},
	{"CLICOLOR", VC_FLAG},
};

/* Names the builder sets itself from opts: never copied, never --keep, never --set. */
static const char *const owned_names[] = {
	"PATH",	       "HOME",	      "TMPDIR",	   "USER",	"LOGNAME",   "SHELL",
	"HTTP_PROXY",  "HTTPS_PROXY", "NO_PROXY",  "ALL_PROXY", "FTP_PROXY", "http_proxy",
	"https_proxy", "no_proxy",    "all_proxy", "ftp_proxy",
};

/* Names an operator may not pass with --keep or --set either: they make the dynamic
 * loader, libc, a shell or an interpreter load or run code or files the value names, or
 * they hand over a credential or a socket of the caller. */
static const char *const refused_names[] = {
	"GCONV_PATH",
	"GLIBC_TUNABLES",
	"LOCPATH",
	"NLSPATH",
	"HOSTALIASES",
	"RESOLV_HOST_CONF",
	"RES_OPTIONS",
	"LOCALDOMAIN",
	"TZDIR",
	"BASH_ENV",
	"ENV",
	"SHELLOPTS",
	"BASHOPTS",
	"PS1",
	"PS2",
	"PS4",
	"PROMPT_COMMAND",
	"IFS",
	"CDPATH",
	"GLOBIGNORE",
	"EXECIGNORE",
	"CLASSPATH",
	"JAVA_TOOL_OPTIONS",
	"_JAVA_OPTIONS",
	"JDK_JAVA_OPTIONS",
	"LESSOPEN",
	"LESSCLOSE",
	"KRB5CCNAME",
	"DBUS_SESSION_BUS_ADDRESS",
	"XDG_RUNTIME_DIR",
	"GPG_AGENT_INFO",
	/* Files or code named by the value, like LOCPATH and TERM with a '/': musl's locale
	 * path, curses' terminal databases, OpenSSL's config (which loads engines and
	 * providers: shared objects), glibc getconf's program directory, readline's init. */
	"MUSL_LOCPATH",
	"TERMINFO",
	"TERMINFO_DIRS",
	"TERMCAP",
	"OPENSSL_CONF",
	"OPENSSL_ENGINES",
	"OPENSSL_MODULES",
	"GETCONF_DIR",
	"INPUTRC",
};
static const char *const refused_prefixes[] = {
	"LD_",	 "DYLD_",	"BASH_FUNC_",  "GIT_",	"PYTHON",  "PERL",  "RUBY",
	"NODE_", "NPM_CONFIG_", "npm_config_", "LUA_",	"MALLOC_", "SUDO_", "SSH_",
	"ASAN_", "UBSAN_",	"LSAN_",       "MSAN_", "TSAN_",
};

/* A seatbelt, not the boundary: names that look like they hold a secret are not copied
 * from the inherited environment even when they match PI_* or --keep (pistisd's own
 * PI_RELAY_TOKEN must never reach an agent). */
static const char *const secret_words[] = {
	"TOKEN",  "SECRET",  "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL",
	"APIKEY", "PRIVATE", "BEARER",	 "JWT",	   "HMAC",
};
static const char *const secret_components[] = {
	"KEY",	  "KEYS", "PASS",  "PW",  "PWD",       "AUTH",
	"COOKIE", "CRED", "CREDS", "SIG", "SIGNATURE", "DSN",
};

static bool mem_eq_str(const char *s, size_t len, const char *lit)
{
	return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

static bool has_prefix(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && memcmp(s, prefix, n) == 0;
}

static int upper(int c)
{
	return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
}

static bool mem_contains_ci(const char *s, size_t len, const char *word)
{
	size_t w = strlen(word);

	for (size_t i = 0; i + w <= len; i++) {
		size_t j = 0;

		while (j < w && upper((unsigned char)s[i + j]) == word[j])
			j++;
		if (j == w)
			return true;
	}
	return false;
}

static bool looks_secret(const char *name, size_t len)
{
	for (size_t i = 0; i < ELEMENTSOF(secret_words); i++)
		if (mem_contains_ci(name, len, secret_words[i]))
			return true;
	/* _-separated components, so PI_API_KEY goes and PI_KEYBOARD stays. */
	for (size_t start = 0; start < len;) {
		size_t end = start;

		while (end < len && name[end] != '_')
			end++;
		for (size_t i = 0; i < ELEMENTSOF(secret_components); i++) {
			const char *c = secret_components[i];
			size_t n = strlen(c), j = 0;

			if (n != end - start)
				continue;
			while (j < n && upper((unsigned char)name[start + j]) == c[j])
				j++;
			if (j == n)
				return true;
		}
		start = end + 1;
	}
	return false;
}

static const struct pass_rule *find_pass_rule(const char *name, size_t len)
{
	for (size_t i = 0; i < ELEMENTSOF(pass_rules); i++)
		if (mem_eq_str(name, len, pass_rules[i].name))
			return &pass_rules[i];
	return NULL;
}

/* ^PI_[A-Z0-9_]{1,64}$ */
static bool is_pi_name(const char *name, size_t len)
{
	if (len < 4 || len > 3 + 64 || memcmp(name, "PI_", 3) != 0)
		return false;
	for (size_t i = 3; i < len; i++) {
		char c = name[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

/* ^[A-Za-z_][A-Za-z0-9_]{0,127}$: what a POSIX shell accepts as a name. */
static bool is_env_name(const char *name, size_t len)
{
	if (len == 0 || len > ENVB_MAX_NAME || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. */
static bool utf8_valid(const unsigned char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, cp = c & 0x07;
		else
			return false;
		if (len - i - 1 < n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

static bool charset_ok(const char *v, size_t len, const char *extra)
{
	for (size_t i = 0; i < len; i++) {
		char c = v[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (c == '\0' || !strchr(extra, c))
			return false;
	}
	return true;
}

/* Text a person or a program may show: UTF-8, no control bytes but TAB (no newline to
 * forge lines in a log or a dotenv dump, no ESC to drive a terminal). */
static const char *text_refusal(const char *v, size_t len, size_t max)
{
	if (len > max)
		return "value too long";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c == '\n')
			return "value contains a newline";
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return "value contains a control character";
	}
	if (!utf8_valid((const unsigned char *)v, len))
		return "value is not valid UTF-8";
	/* Valid text may still hold characters that drive or rearrange a terminal: the C1
	 * controls (U+009B is a CSI, U+0085 NEL a line break), U+2028/U+2029 and the
	 * bidirectional controls (utf8_display_control): a value must not hide text or forge
	 * a line. */
	for (size_t i = 0; i < len; i++) {
		unsigned cp;

		if (!utf8_display_control(v + i, len - i, &cp))
			continue;
		if (cp < 0xa0)
			return "value contains a control character";
		if (cp == 0x2028 || cp == 0x2029)
			return "value contains a line or paragraph separator";
		return "value contains a bidirectional formatting character";
	}
	return NULL;
}

/* TZ names a rule ("UTC0", "CET-1CEST") or a zoneinfo file relative to the system's zone
 * directory ("Europe/Paris", ":Europe/Paris"). An absolute path or ".." would make libc
 * parse any file the caller picks (sudo's tz_is_safe refuses the same). */
static const char *tz_refusal(const char *v, size_t len)
{
	if (len == 0 || len > 256)
		return "TZ must be 1 to 256 bytes";
	if (v[0] == '/' || (v[0] == ':' && len > 1 && v[1] == '/'))
		return "TZ must not be an absolute path";
	for (size_t i = 0; i < len; i++)
		if (v[i] < 0x21 || v[i] > 0x7e)
			return "TZ must be printable ASCII without spaces";
	for (size_t i = 0; i + 1 < len; i++)
		if (v[i] == '.' && v[i + 1] == '.')
			return "TZ must not contain '..'";
	return NULL;
}

static const char *value_refusal(enum var_class cls, const char *v, size_t len)
{
	switch (cls) {
	case VC_LOCALE:
		if (len == 0 || len > 128 || !charset_ok(v, len, "_.@:+,-"))
			return "locale values are 1 to 128 of A-Z a-z 0-9 _ . @ : + , -";
		return NULL;
	case VC_TERM:
		if (len == 0 || len > 64 || !charset_ok(v, len, "_.+-"))
			return "terminal names are 1 to 64 of A-Z a-z 0-9 _ . + -";
		return NULL;
	case VC_NUMBER:
		if (len == 0 || len > 5 || v[0] == '0')
			return "must be a number from 1 to 99999";
		for (size_t i = 0; i < len; i++)
			if (v[i] < '0' || v[i] > '9')
				return "must be a number from 1 to 99999";
		return NULL;
	case VC_FLAG:
		if (len > 16 || !charset_ok(v, len, "_.+-"))
			return "colour flags are 0 to 16 of A-Z a-z 0-9 _ . + -";
		return NULL;
	case VC_TZ:
		return tz_refusal(v, len);
	case VC_TEXT:
		return text_refusal(v, len, ENVB_MAX_VALUE);
	default:
		return "unknown value class";
	}
}

static bool name_in(const char *name, size_t len, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (mem_eq_str(name, len, list[i]))
			return true;
	return false;
}

/* Why an operator-named variable (--keep or --set) is refused, by name alone. */
static const char *name_refusal(const char *name, size_t len)
{
	if (!is_env_name(name, len))
		return "names are 1 to 128 of A-Z a-z 0-9 _ and do not start with a digit";
	if (name_in(name, len, owned_names, ELEMENTSOF(owned_names)))
		return "set by pi-env itself (use --path, --agent-user, --home, --tmpdir, --shell, "
		       "--proxy)";
	if (name_in(name, len, refused_names, ELEMENTSOF(refused_names)))
		return "it makes libc, a shell or an interpreter load code or files, or "
		       "carries a credential";
	for (size_t i = 0; i < ELEMENTSOF(refused_prefixes); i++)
		if (has_prefix(name, len, refused_prefixes[i]))
			return "a loader, interpreter, git, ssh, sudo or sanitizer variable";
	return NULL;
}

static enum var_class class_of(const char *name, size_t len)
{
	const struct pass_rule *r = find_pass_rule(name, len);

	if (r)
		return r->cls;
	if (mem_eq_str(name, len, "TZ"))
		return VC_TZ;
	return VC_TEXT;
}

const char *envb_keep_refusal(const char *name)
{
	size_t len = strlen(name);
	const char *why = name_refusal(name, len);

	if (why)
		return why;
	if (looks_secret(name, len))
		return "the name looks like it holds a secret";
	return NULL;
}

const char *envb_set_refusal(const char *entry)
{
	const char *eq = strchr(entry, '=');
	const char *why;
	size_t nlen;

	if (!eq)
		return "expected NAME=VALUE";
	nlen = (size_t)(eq - entry);
	why = name_refusal(entry, nlen);
	if (why)
		return why;
	return value_refusal(class_of(entry, nlen), eq + 1, strlen(eq + 1));
}

const char *envb_set_name_refusal(const char *name)
{
	return name_refusal(name, strlen(name));
}

static const char *abs_path_refusal(const char *v, size_t len)
{
	if (len == 0 || v[0] != '/')
		return "must be an absolute path";
	return text_refusal(v, len, ENVB_MAX_VALUE);
}

const char *envb_term_refusal(const char *value)
{
	return value_refusal(VC_TERM, value, strlen(value));
}

const char *envb_field_refusal(enum envb_field field, const char *value)
{
	size_t len = strlen(value);

	switch (field) {
	case ENVB_FIELD_PATH: {
		const char *why = text_refusal(value, len, ENVB_MAX_VALUE);

		if (why)
			return why;
		/* An empty or relative component searches the working directory, which the
		 * agent controls. */
		for (const char *p = value;;) {
			const char *colon = strchr(p, ':');

			if (*p != '/')
				return "every PATH entry must be an absolute directory";
			if (!colon)
				return NULL;
			p = colon + 1;
		}
	}
	case ENVB_FIELD_USER:
		if (len == 0 || len > 32 || value[0] == '-' || !charset_ok(value, len, "_.-"))
			return "user names are 1 to 32 of A-Z a-z 0-9 _ . - and do not start with "
			       "-";
		return NULL;
	case ENVB_FIELD_DIR:
		return abs_path_refusal(value, len);
	case ENVB_FIELD_PROXY: {
		size_t i = 0;

		if (len > 2048)
			return "proxy URL too long";
		while (i < len && ((value[i] >= 'a' && value[i] <= 'z') ||
				   (value[i] >= 'A' && value[i] <= 'Z') ||
				   (i > 0 && ((value[i] >= '0' && value[i] <= '9') ||
					      strchr("+.-", value[i])))))
			i++;
		if (i == 0 || len - i < 4 || memcmp(value + i, "://", 3) != 0)
			return "proxy must be a URL (scheme://host[:port])";
		for (; i < len; i++)
			if (value[i] < 0x21 || value[i] > 0x7e)
				return "proxy URL must be printable ASCII without spaces";
		return NULL;
	}
	case ENVB_FIELD_NO_PROXY:
		if (len > 2048)
			return "no_proxy too long";
		for (size_t i = 0; i < len; i++)
			if (value[i] < 0x21 || value[i] > 0x7e)
				return "no_proxy must be printable ASCII without spaces";
		return NULL;
	default:
		return "unknown field";
	}
}

/* --- the builder ---------------------------------------------------------------- */

#define HASH_SLOTS 2048u /* > 2 * ENVB_MAX_ENTRIES: short probe chains */

struct entry {
	const char *name;
	const char *value;
	uint32_t name_len, value_len;
	bool dropped; /* the name was seen and refused: a later duplicate may not revive it */
};

struct builder {
	size_t n, bytes, max_bytes;
	uint16_t slot[HASH_SLOTS]; /* index + 1 into e[], 0 = empty */
	struct entry e[ENVB_MAX_ENTRIES];
};

static uint32_t name_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

/* The entry named name, or the empty slot it would go in (*ret_slot). */
static struct entry *lookup(struct builder *b, const char *name, size_t len, uint32_t *ret_slot)
{
	uint32_t i = name_hash(name, len) & (HASH_SLOTS - 1);

	for (;; i = (i + 1) & (HASH_SLOTS - 1)) {
		uint16_t s = b->slot[i];

		if (s == 0) {
			*ret_slot = i;
			return NULL;
		}
		struct entry *e = &b->e[s - 1];
		if (e->name_len == len && memcmp(e->name, name, len) == 0)
			return e;
	}
}

enum add_result { ADD_OK, ADD_DUP, ADD_FULL };

/* Record name (kept with value, or dropped when value is NULL). */
static enum add_result add(struct builder *b, const char *name, size_t nlen, const char *value,
			   size_t vlen)
{
	uint32_t slot;
	size_t need = nlen + vlen + 2;

	if (lookup(b, name, nlen, &slot))
		return ADD_DUP;
	if (b->n >= ENVB_MAX_ENTRIES)
		return ADD_FULL;
	if (value && (need > b->max_bytes || b->bytes > b->max_bytes - need)) {
		/* Remember the name anyway, so a later, shorter duplicate cannot slip in. */
		b->e[b->n] = (struct entry){name, NULL, (uint32_t)nlen, 0, true};
		b->slot[slot] = (uint16_t)++b->n;
		return ADD_FULL;
	}
	b->e[b->n] = (struct entry){name, value, (uint32_t)nlen, (uint32_t)vlen, !value};
	b->slot[slot] = (uint16_t)++b->n;
	if (value)
		b->bytes += need;
	return ADD_OK;
}

static int add_required(struct builder *b, const char *name, const char *value)
{
	size_t nlen = strlen(name), vlen = strlen(value);

	/* Required names are distinct by construction (owned names, then --set checked). */
	return add(b, name, nlen, value, vlen) == ADD_OK ? 0 : -E2BIG;
}

static bool keep_has(const char *const *keep, const char *name, size_t len)
{
	for (; keep && *keep; keep++)
		if (mem_eq_str(name, len, *keep))
			return true;
	return false;
}

static char **materialize(const struct builder *b)
{
	size_t kept = 0;
	char **v, *p;

	for (size_t i = 0; i < b->n; i++)
		kept += !b->e[i].dropped;
	/* One block: the vector, then the strings, so envb_free is a single free(). */
	v = malloc((kept + 1) * sizeof(char *) + b->bytes);
	if (!v)
		return NULL;
	p = (char *)(v + kept + 1);
	kept = 0;
	for (size_t i = 0; i < b->n; i++) {
		const struct entry *e = &b->e[i];

		if (e->dropped)
			continue;
		v[kept++] = p;
		memcpy(p, e->name, e->name_len);
		p += e->name_len;
		*p++ = '=';
		memcpy(p, e->value, e->value_len);
		p += e->value_len;
		*p++ = '\0';
	}
	v[kept] = NULL;
	return v;
}

#define BAD(field_ptr)                                                                             \
	do {                                                                                       \
		if (ret_bad)                                                                       \
			*ret_bad = (field_ptr);                                                    \
		return -EINVAL;                                                                    \
	} while (0)

static int add_owned(struct builder *b, const struct envb_opts *opts, const char **ret_bad)
{
	const char *path = opts->path ? opts->path : ENVB_DEFAULT_PATH;
	const char *shell = opts->shell ? opts->shell : (opts->user ? "/bin/sh" : NULL);
	const char *no_proxy = opts->no_proxy ? opts->no_proxy : "localhost,127.0.0.1";
	int r;

	if (envb_field_refusal(ENVB_FIELD_PATH, path))
		BAD(opts->path);
	if (opts->home && envb_field_refusal(ENVB_FIELD_DIR, opts->home))
		BAD(opts->home);
	if (opts->tmpdir && envb_field_refusal(ENVB_FIELD_DIR, opts->tmpdir))
		BAD(opts->tmpdir);
	if (opts->shell && envb_field_refusal(ENVB_FIELD_DIR, opts->shell))
		BAD(opts->shell);
	if (opts->user && envb_field_refusal(ENVB_FIELD_USER, opts->user))
		BAD(opts->user);
	if (opts->proxy && envb_field_refusal(ENVB_FIELD_PROXY, opts->proxy))
		BAD(opts->proxy);
	if (opts->no_proxy &&
	    (!opts->proxy || envb_field_refusal(ENVB_FIELD_NO_PROXY, opts->no_proxy)))
		BAD(opts->no_proxy);

	r = add_required(b, "PATH", path);
	if (r == 0 && opts->home)
		r = add_required(b, "HOME", opts->home);
	if (r == 0 && opts->tmpdir)
		r = add_required(b, "TMPDIR", opts->tmpdir);
	if (r == 0 && opts->user)
		r = add_required(b, "USER", opts->user);
	if (r == 0 && opts->user)
		r = add_required(b, "LOGNAME", opts->user);
	if (r == 0 && shell)
		r = add_required(b, "SHELL", shell);
	if (opts->proxy) {
		/* Both cases: curl reads only the lower-case http_proxy (httpoxy), most
		 * other tools the upper-case ones. */
		static const char *const proxy_names[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
							  "https_proxy"};

		for (size_t i = 0; r == 0 && i < ELEMENTSOF(proxy_names); i++)
			r = add_required(b, proxy_names[i], opts->proxy);
		if (r == 0)
			r = add_required(b, "NO_PROXY", no_proxy);
		if (r == 0)
			r = add_required(b, "no_proxy", no_proxy);
	}
	return r;
}

static int add_set(struct builder *b, const struct envb_opts *opts, const char **ret_bad)
{
	for (const char *const *s = opts->set; s && *s; s++) {
		const char *eq = strchr(*s, '=');
		enum add_result a;

		if (envb_set_refusal(*s))
			BAD(*s);
		a = add(b, *s, (size_t)(eq - *s), eq + 1, strlen(eq + 1));
		if (a == ADD_DUP)
			BAD(*s);
		if (a == ADD_FULL)
			return -E2BIG;
	}
	size_t nkeep = 0;

	for (const char *const *k = opts->keep; k && *k; k++) {
		if (envb_keep_refusal(*k))
			BAD(*k);
		if (++nkeep > ENVB_MAX_ENTRIES)
			return -E2BIG;
	}
	return 0;
}

/* Copy the allowlisted names from inherited; the first occurrence of a name decides (what
 * getenv() would have returned), an invalid first occurrence drops the name. */
static void add_inherited(struct builder *b, const struct envb_opts *opts, char *const *inherited)
{
	for (char *const *p = inherited; p && *p; p++) {
		const char *s = *p, *eq = strchr(s, '=');
		const struct pass_rule *rule;
		enum var_class cls;
		size_t nlen, vlen;

		if (!eq || eq == s)
			continue;
		nlen = (size_t)(eq - s);
		rule = find_pass_rule(s, nlen);
		if (rule)
			cls = rule->cls;
		else if (is_pi_name(s, nlen) && !looks_secret(s, nlen))
			cls = VC_TEXT;
		else if (keep_has(opts->keep, s, nlen))
			cls = class_of(s, nlen);
		else
			continue;
		vlen = strlen(eq + 1);
		if (value_refusal(cls, eq + 1, vlen))
			(void)add(b, s, nlen, NULL, 0);
		else
			(void)add(b, s, nlen, eq + 1, vlen);
	}
}

/* TERM=term where neither --set nor the inherited environment gave a valid TERM (a
 * dropped one too: the default is ours, not a later duplicate of the caller's). A command
 * on a terminal without TERM fails in clear, tput, top and every curses program. */
static void add_default_term(struct builder *b, const char *term)
{
	size_t vlen = strlen(term), need = sizeof("TERM") + vlen + 1;
	uint32_t slot;
	struct entry *e = lookup(b, "TERM", 4, &slot);

	if (e && !e->dropped)
		return;
	if (need > b->max_bytes || b->bytes > b->max_bytes - need)
		return;
	if (!e) {
		(void)add(b, "TERM", 4, term, vlen);
		return;
	}
	e->value = term;
	e->value_len = (uint32_t)vlen;
	e->dropped = false;
	b->bytes += need;
}

/* The builder's 40 KiB, static (lib/static-slot.h): malloc'd, they were a fresh mmap and,
 * at the end of every build, a munmap in pi-env and every `pistisd run`. A build that finds
 * them taken (another thread building at the same time) mallocs its own, as before. */
static struct builder static_builder;
static bool static_builder_taken;

static void builder_put(struct builder **b)
{
	static_slot_put(&static_builder_taken, &static_builder, *b);
}

int envb_build(const struct envb_opts *opts, char *const *inherited, char ***ret_envp,
	       const char **ret_bad)
{
	_cleanup_(builder_put) struct builder *b = NULL;
	int r;

	if (!opts || !ret_envp)
		return -EINVAL;
	if (opts->term && envb_term_refusal(opts->term)) {
		if (ret_bad)
			*ret_bad = opts->term;
		return -EINVAL;
	}
	b = static_slot_get(&static_builder_taken, &static_builder, sizeof(*b), false);
	if (!b)
		return -ENOMEM;
	b->n = 0;
	b->bytes = 0;
	b->max_bytes = opts->max_bytes ? opts->max_bytes : ENVB_MAX_BYTES_DEFAULT;
	memset(b->slot, 0, sizeof(b->slot));

	r = add_owned(b, opts, ret_bad);
	if (r < 0)
		return r;
	r = add_set(b, opts, ret_bad);
	if (r < 0)
		return r;
	add_inherited(b, opts, inherited);
	if (opts->term)
		add_default_term(b, opts->term);

	*ret_envp = materialize(b);
	return *ret_envp ? 0 : -ENOMEM;
}

void envb_free(char **envp)
{
	free(envp);
}
