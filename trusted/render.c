/* trusted: the pure half — names, the generated drop-in and wrapper, and the parser of
 * `sudo -l -U` output. No I/O here, so all of it is unit-tested and fuzzed. */
#include "trusted/trusted.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/escape.h"
#include "lib/macro.h"

bool trusted_name_valid(const char *name)
{
	size_t i;

	if (!name || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
		return false;
	for (i = 1; name[i]; i++) {
		char c = name[i];

		if (i >= TRUSTED_NAME_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return true;
}

const char *trusted_adopt_strerror(int r, const char *name, char *buf, size_t size)
{
	switch (r) {
	case -ENOENT:
		snprintf(buf, size, "there is no /data/bin/%s to adopt", name);
		return buf;
	case -EPERM:
		snprintf(buf, size,
			 "/data/bin/%s is not root's file, writable by root alone, with one link: "
			 "not adopted (an agent may have planted it)",
			 name);
		return buf;
	case -EEXIST:
		snprintf(buf, size,
			 "/data/trusted/%s is there already: remove one of the two first", name);
		return buf;
	case -ENOEXEC:
		snprintf(buf, size,
			 "/data/bin/%s not adopted: its #! interpreter is not root's alone, "
			 "relative "
			 "or missing",
			 name);
		return buf;
	default:
		return NULL;
	}
}

static bool hex64_valid(const char *s)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[64] == '\0';
}

/* A growing string; every append is bounded by the callers' own limits. */
struct sbuf {
	char *p;
	size_t len, cap;
	int err;
};

_printf_(2, 3) static void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->err = -EINVAL;
			return;
		}
		if (b->p && (size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t ncap = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
		char *np = realloc(b->p, ncap);
		if (!np) {
			b->err = -ENOMEM;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
}

static int sbuf_finish(struct sbuf *b, char **ret)
{
	if (b->err) {
		free(b->p);
		return b->err;
	}
	*ret = b->p;
	return 0;
}

int trusted_dropin_render(const struct trusted_entry *entries, size_t n, char **ret)
{
	struct sbuf b = {0};
	size_t i;

	if (n > TRUSTED_COMMANDS_MAX)
		return -E2BIG;
	for (i = 0; i < n; i++)
		if (!trusted_name_valid(entries[i].name) || !hex64_valid(entries[i].digest))
			return -EINVAL;

	sbuf_printf(&b,
		    "# pistis trusted commands: written by `pistisd trusted install`, do not "
		    "edit (docs/trusted.md).\n"
		    "# Members of pi-sandbox may run exactly these scripts as pi-tools, without "
		    "a password,\n"
		    "# each pinned to its SHA-256 digest: sudo refuses a script whose content "
		    "changed.\n"
		    "# Arguments are allowed and reach the script as argv, never through a "
		    "shell.\n");
	if (n == 0)
		return sbuf_finish(&b, ret);
	sbuf_printf(&b, "Cmnd_Alias PISTIS_TRUSTED = ");
	for (i = 0; i < n; i++)
		sbuf_printf(&b, "%ssha256:%s /data/trusted/%s", i ? ", \\\n\t" : "",
			    entries[i].digest, entries[i].name);
	/* For these commands only (TRUSTED_DEFAULTS: env_reset, and !env_keep empties
	 * Debian's default keep list: DISPLAY, PS1, …), no variables on the command line
	 * (NOSETENV too), and CWD=/ in the rule (sudo -D is refused). */
	sbuf_printf(&b, "%s", TRUSTED_DROPIN_TAIL);
	return sbuf_finish(&b, ret);
}

/* A path that goes into a script or a shebang line: absolute, short, and made of
 * [A-Za-z0-9/_.+-] only, so neither a shell nor the kernel's shebang parser reads it twice. */
static bool wrapper_path_valid(const char *path, size_t max)
{
	const char *p;

	if (!path || path[0] != '/' || strlen(path) > max)
		return false;
	for (p = path; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("/_.+-", *p)))
			return false;
	return true;
}

int trusted_wrapper_render(const char *sudo_path, const char *pistisd_path, const char *name,
			   char **ret)
{
	struct sbuf b = {0};

	if (!wrapper_path_valid(sudo_path, 255) || !trusted_name_valid(name))
		return -EINVAL;
	if (pistisd_path) {
		/* The whole shebang line must fit the kernel's buffer (128 bytes before 5.1). */
		if (!wrapper_path_valid(pistisd_path, TRUSTED_PISTISD_PATH_MAX))
			return -EINVAL;
		sbuf_printf(&b,
			    "#!%s " TRUSTED_EXEC_VERB "\n" TRUSTED_WRAPPER_MARK
			    "%s': written by `pistisd trusted add`, do not edit.\n"
			    "# The kernel runs `%s " TRUSTED_EXEC_VERB " /data/bin/%s ARGS`, "
			    "which execs\n"
			    "# %s -n -u pi-tools -- /data/trusted/%s ARGS (docs/trusted.md).\n",
			    pistisd_path, name, pistisd_path, name, sudo_path, name);
		return sbuf_finish(&b, ret);
	}
	sbuf_printf(&b,
		    "#!/bin/sh\n" TRUSTED_WRAPPER_MARK
		    "%s': written by `pistisd trusted add`, do not "
		    "edit.\n"
		    "# sudo resets the environment; the script sees the arguments as untrusted "
		    "argv.\n"
		    "exec %s -n -u pi-tools -- /data/trusted/%s \"$@\"\n",
		    name, sudo_path, name);
	return sbuf_finish(&b, ret);
}

bool trusted_wrapper_is_ours(const char *text, size_t len)
{
	const char *nl;

	if (len < 2 || memcmp(text, "#!", 2))
		return false;
	nl = memchr(text, '\n', len);
	if (!nl)
		return false;
	len -= (size_t)(nl + 1 - text);
	return len >= strlen(TRUSTED_WRAPPER_MARK) &&
	       !memcmp(nl + 1, TRUSTED_WRAPPER_MARK, strlen(TRUSTED_WRAPPER_MARK));
}

int trusted_exec_name(const char *path, char ret_name[TRUSTED_NAME_MAX + 1])
{
	static const char prefix[] = "/" TRUSTED_BIN_DIR "/";
	const char *name;

	if (!path || strncmp(path, prefix, sizeof(prefix) - 1))
		return -EINVAL;
	name = path + sizeof(prefix) - 1;
	/* The charset has no '/' and no '.': "..", "x/y" and "" all fail here. */
	if (!trusted_name_valid(name))
		return -EINVAL;
	strcpy(ret_name, name);
	return 0;
}

bool trusted_sudoers_has_includedir(const char *text, size_t len)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *q = p, *e = eol ? eol : end;

		while (q < e && (*q == ' ' || *q == '\t'))
			q++;
		/* "#includedir" is a directive; "# includedir" is a comment. */
		if ((size_t)(e - q) > 11 &&
		    (!memcmp(q, "@includedir", 11) || !memcmp(q, "#includedir", 11)) &&
		    (q[11] == ' ' || q[11] == '\t')) {
			q += 11;
			while (q < e && (*q == ' ' || *q == '\t'))
				q++;
			while (e > q && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
				e--;
			if ((e - q == 14 && !memcmp(q, "/etc/sudoers.d", 14)) ||
			    (e - q == 15 && !memcmp(q, "/etc/sudoers.d/", 15)))
				return true;
		}
		p = eol ? eol + 1 : end;
	}
	return false;
}

/* --- sudo -l parser ----------------------------------------------------------------- */

struct list_state {
	struct trusted_sudo_list *l;
	char runas[64];
	bool in_runas; /* collecting "(ALL : ALL)" over several tokens */
	bool nopasswd, setenv, options, cwd_root;
	bool in_cmd;		       /* arguments after a command path belong to it */
	bool has_digest, digest_other; /* a digest token waits for its command */
	char digest[SHA256_HEX_SIZE];
};

static void copy_bounded(char *dst, size_t size, const char *src, size_t len, bool *trunc)
{
	size_t have = strlen(dst);

	if (have + len + 1 > size) {
		*trunc = true;
		len = size - 1 - have;
	}
	memcpy(dst + have, src, len);
	dst[have + len] = '\0';
}

static bool is_tag(const char *t, size_t len)
{
	size_t i;

	if (len < 2 || t[len - 1] != ':')
		return false;
	for (i = 0; i < len - 1; i++)
		if (!((t[i] >= 'A' && t[i] <= 'Z') || t[i] == '_'))
			return false;
	return true;
}

static bool is_option(const char *t, size_t len)
{
	size_t i;

	for (i = 0; i < len && t[i] != '='; i++)
		if (!((t[i] >= 'A' && t[i] <= 'Z') || t[i] == '_'))
			return false;
	return i > 0 && i < len;
}

static void list_token(struct list_state *s, const char *t, size_t len)
{
	struct trusted_sudo_list *l = s->l;
	bool ends_cmd = false;

	if (s->in_runas || t[0] == '(') {
		if (!s->in_runas) {
			s->runas[0] = '\0';
			s->nopasswd = s->setenv = s->options = s->cwd_root = false;
			s->in_cmd = false;
			t++, len--;
		} else if (s->runas[0]) {
			copy_bounded(s->runas, sizeof(s->runas), " ", 1, &l->truncated);
		}
		s->in_runas = !(len > 0 && t[len - 1] == ')');
		copy_bounded(s->runas, sizeof(s->runas), t, len - (s->in_runas ? 0 : 1),
			     &l->truncated);
		return;
	}
	if (len > 0 && t[len - 1] == ',') {
		ends_cmd = true;
		len--;
		if (len == 0) {
			s->in_cmd = false;
			return;
		}
	}
	if (s->in_cmd) {
		struct trusted_sudo_cmd *c = &l->cmds[l->n - 1];

		copy_bounded(c->command, sizeof(c->command), " ", 1, &l->truncated);
		copy_bounded(c->command, sizeof(c->command), t, len, &l->truncated);
	} else if (is_tag(t, len)) {
		if (len == 9 && !memcmp(t, "NOPASSWD:", 9))
			s->nopasswd = true;
		else if (len == 7 && !memcmp(t, "PASSWD:", 7))
			s->nopasswd = false;
		else if (len == 7 && !memcmp(t, "SETENV:", 7))
			s->setenv = true;
		else if (len == 9 && !memcmp(t, "NOSETENV:", 9))
			s->setenv = false;
		/* Other tags (EXEC, LOG_*, MAIL, FOLLOW, INTERCEPT…) grant nothing more. */
	} else if (is_option(t, len)) {
		if (len == 5 && !memcmp(t, "CWD=/", 5))
			s->cwd_root = true;
		else
			s->options = true;
	} else if (len > 7 && !memcmp(t, "sha", 3) && memchr(t, ':', len)) {
		/* A digest belongs to the next command only. */
		s->digest[0] = '\0';
		s->digest_other = true;
		if (len == 7 + 64 && !memcmp(t, "sha256:", 7)) {
			memcpy(s->digest, t + 7, 64);
			s->digest[64] = '\0';
			s->digest_other = !hex64_valid(s->digest);
			if (s->digest_other)
				s->digest[0] = '\0';
		}
		s->has_digest = true;
	} else {
		struct trusted_sudo_cmd *c;

		if (l->n >= TRUSTED_LIST_MAX) {
			l->truncated = true;
			return;
		}
		c = &l->cmds[l->n++];
		memset(c, 0, sizeof(*c));
		snprintf(c->runas, sizeof(c->runas), "%s", s->runas);
		c->nopasswd = s->nopasswd;
		c->setenv = s->setenv;
		c->options = s->options || (s->has_digest && s->digest_other);
		c->cwd_root = s->cwd_root;
		if (s->has_digest)
			memcpy(c->digest, s->digest, sizeof(c->digest));
		s->has_digest = s->digest_other = false;
		s->digest[0] = '\0';
		copy_bounded(c->command, sizeof(c->command), t, len, &l->truncated);
		s->in_cmd = true;
	}
	if (ends_cmd)
		s->in_cmd = false;
}

/* A token of the "Runas and Command-specific defaults" section: "Defaults…" starts an entry
 * (sudo may print two on one line), anything else continues the last one. */
static void defaults_token(struct trusted_sudo_list *l, const char *t, size_t len)
{
	bool start = len >= 8 && !memcmp(t, "Defaults", 8);

	if (!start && !l->defaults[0]) {
		l->truncated = true; /* text before the first entry: not a listing we know */
		return;
	}
	if (l->defaults[0])
		copy_bounded(l->defaults, sizeof(l->defaults), start ? "\n" : " ", 1,
			     &l->truncated);
	copy_bounded(l->defaults, sizeof(l->defaults), t, len, &l->truncated);
}

int trusted_sudo_list_parse(const char *text, size_t len, struct trusted_sudo_list **ret)
{
	static const char may_run[] = " may run the following commands on ";
	static const char not_allowed[] = " is not allowed to run sudo on ";
	static const char specific[] = "Runas and Command-specific defaults for ";
	_cleanup_free_ struct trusted_sudo_list *l = NULL;
	struct list_state s = {0};
	const char *p = text, *end = text + len;
	bool in_section = false, in_defaults = false, seen = false;

	if (len > TRUSTED_OUTPUT_MAX)
		return -EFBIG;
	l = calloc(1, sizeof(*l) + TRUSTED_LIST_MAX * sizeof(l->cmds[0]));
	if (!l)
		return -ENOMEM;
	s.l = l;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *e = eol ? eol : end, *q;
		size_t ll = (size_t)(e - p);

		if (ll > 0 && p[0] != ' ' && p[0] != '\t') {
			/* A header line: only the command section is ours. */
			in_section = memmem(p, ll, may_run, sizeof(may_run) - 1) != NULL;
			in_defaults = ll >= sizeof(specific) - 1 &&
				      !memcmp(p, specific, sizeof(specific) - 1);
			if (in_section) {
				seen = true;
				s.in_runas = s.in_cmd = false;
			}
			if (memmem(p, ll, not_allowed, sizeof(not_allowed) - 1))
				l->not_allowed = seen = true;
		} else if (in_section || in_defaults) {
			for (q = p; q < e;) {
				const char *t;

				while (q < e && (*q == ' ' || *q == '\t' || *q == '\r'))
					q++;
				t = q;
				while (q < e && *q != ' ' && *q != '\t' && *q != '\r')
					q++;
				if (q > t && in_section)
					list_token(&s, t, (size_t)(q - t));
				else if (q > t)
					defaults_token(l, t, (size_t)(q - t));
			}
		}
		p = eol ? eol + 1 : end;
	}
	/* A digest or runas with no command after it: the listing is cut short. */
	if (s.has_digest || s.in_runas)
		l->truncated = true;
	if (!seen)
		return -EBADMSG;
	*ret = TAKE_PTR(l);
	return 0;
}

/* A reason is text, each name in it escaped once (escape_vformat): callers log it with %-s. */
_printf_(3, 4) static int why_printf(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	if (why && size) {
		va_start(ap, fmt);
		escape_vformat(why, size, "cut", 0, fmt, ap);
		va_end(ap);
	}
	return 1;
}

/* s[0..len) without '"' and '\\' (sudo -l prints secure_path="a:b" as secure_path=a\:b)
 * equals t without them. */
static bool same_unquoted(const char *s, size_t len, const char *t)
{
	size_t i = 0;

	for (;;) {
		while (i < len && (s[i] == '"' || s[i] == '\\'))
			i++;
		while (*t == '"' || *t == '\\')
			t++;
		if (i == len || !*t)
			return i == len && !*t;
		if (s[i++] != *t++)
			return false;
	}
}

/* Whether one "Defaults!CMND[, CMND…] OPTIONS" entry of the listing (e, len bytes; tokens
 * split by single spaces) is the drop-in's own: it names trusted commands only, each with its
 * digest, and its options are exactly TRUSTED_DEFAULTS. covered[j] is set for each
 * entries[j] it names. */
static bool defaults_own_entry(const char *e, size_t len, const struct trusted_entry *entries,
			       size_t n, bool *covered)
{
	const char *p = e + 9, *end = e + len; /* past "Defaults!" */
	bool more = true;
	size_t n_named = 0;
	bool named[TRUSTED_COMMANDS_MAX] = {false};

	while (more && p < end) {
		const char *digest = NULL, *t = p, *sp;
		size_t tl, j;

		sp = memchr(t, ' ', (size_t)(end - t));
		tl = (size_t)((sp ? sp : end) - t);
		if (tl > 4 && !memcmp(t, "sha", 3) && memchr(t, ':', tl) && sp) {
			digest = t;
			t = sp + 1;
			sp = memchr(t, ' ', (size_t)(end - t));
			tl = (size_t)((sp ? sp : end) - t);
		}
		more = tl > 0 && t[tl - 1] == ',';
		if (more)
			tl--;
		for (j = 0; j < n; j++) {
			size_t nl = strlen(entries[j].name);

			if (tl == 14 + nl && !memcmp(t, "/data/trusted/", 14) &&
			    !memcmp(t + 14, entries[j].name, nl))
				break;
		}
		if (j == n || !digest || (size_t)(t - digest) != 7 + 64 + 1 ||
		    memcmp(digest, "sha256:", 7) || memcmp(digest + 7, entries[j].digest, 64))
			return false;
		if (!named[j])
			named[j] = true, n_named++;
		p = sp ? sp + 1 : end;
	}
	if (!n_named || !same_unquoted(p, (size_t)(end - p), TRUSTED_DEFAULTS))
		return false;
	for (size_t j = 0; j < n; j++)
		covered[j] = covered[j] || named[j];
	return true;
}

/* The runas and command Defaults of the listing hold the drop-in's line and nothing else.
 * Any other entry is refused, whatever it names: sudo matches a command by the inode a
 * path resolves to, so a link or a hard link elsewhere (/opt/tr -> /data/trusted), or a
 * second name for pi-tools' uid, reaches the trusted commands though its text does not
 * say so. */
static int defaults_verify(const struct trusted_sudo_list *l, const struct trusted_entry *entries,
			   size_t n, char *why, size_t why_size)
{
	bool covered[TRUSTED_COMMANDS_MAX] = {false};
	const char *e = l->defaults, *nl;

	for (; *e; e = nl ? nl + 1 : e + strlen(e)) {
		size_t len;

		char q[160 + ESCAPE_QUOTE_EXTRA];

		nl = strchr(e, '\n');
		len = nl ? (size_t)(nl - e) : strlen(e);
		if (!(len > 9 && !memcmp(e, "Defaults!", 9) &&
		      defaults_own_entry(e, len, entries, n, covered)))
			return why_printf(
				why, why_size,
				"sudoers has %-s: with trusted commands, the drop-in's "
				"Defaults line must be the only runas or command Defaults "
				"(sudo matches commands by inode, so no other can be shown "
				"not to reach them)",
				escape_c_quote(e, len, sizeof(q) - ESCAPE_QUOTE_EXTRA, q,
					       sizeof(q)));
	}
	for (size_t j = 0; j < n; j++)
		if (!covered[j])
			return why_printf(why, why_size,
					  "'/data/trusted/%s' runs without the drop-in's Defaults "
					  "line (" TRUSTED_DEFAULTS ")",
					  entries[j].name);
	return 0;
}

int trusted_sudo_list_verify(const struct trusted_sudo_list *l, const struct trusted_entry *entries,
			     size_t n, char *why, size_t why_size)
{
	char path[sizeof("/data/trusted/") + TRUSTED_NAME_MAX];
	size_t i, j;

	if (l->truncated)
		return why_printf(why, why_size, "sudo -l listing too long or cut short");
	if (n == 0 && l->n == 0)
		return 0;
	if (l->n == 0)
		return why_printf(why, why_size, "sudo grants none of the %zu trusted commands", n);
	for (i = 0; i < l->n; i++) {
		const struct trusted_sudo_cmd *c = &l->cmds[i];
		bool found = false;

		for (j = 0; j < n && !found; j++) {
			snprintf(path, sizeof(path), "/data/trusted/%s", entries[j].name);
			found = !strcmp(c->command, path);
		}
		j--;
		if (!found)
			return why_printf(
				why, why_size,
				"sudo grants '%s' (as '%s'), which is not a trusted command",
				c->command, c->runas);
		if (strcmp(c->runas, "pi-tools"))
			return why_printf(why, why_size,
					  "'%s' may run as '%s', not only as pi-tools", c->command,
					  c->runas);
		if (strcmp(c->digest, entries[j].digest))
			return why_printf(why, why_size,
					  "'%s' is not pinned to its digest sha256:%s", c->command,
					  entries[j].digest);
		if (c->setenv || c->options || !c->cwd_root || !c->nopasswd)
			return why_printf(
				why, why_size,
				"'%s' has other tags or options than CWD=/ NOPASSWD: NOSETENV:",
				c->command);
	}
	for (j = 0; j < n; j++) {
		bool found = false;

		snprintf(path, sizeof(path), "/data/trusted/%s", entries[j].name);
		for (i = 0; i < l->n && !found; i++)
			found = !strcmp(l->cmds[i].command, path);
		if (!found)
			return why_printf(why, why_size, "sudo does not grant '%s'", path);
	}
	return defaults_verify(l, entries, n, why, why_size);
}

size_t trusted_preload_next(const char *text, size_t len, size_t *pos, const char **ret_name)
{
	size_t p = *pos, start;

	for (;;) {
		while (p < len && strchr(" \t\n:", text[p]) && text[p])
			p++;
		if (p < len && text[p] == '#') {
			while (p < len && text[p] != '\n')
				p++;
			continue;
		}
		break;
	}
	start = p;
	while (p < len && text[p] != '#' && !(text[p] && strchr(" \t\n:", text[p])))
		p++;
	*pos = p;
	*ret_name = text + start;
	return p - start;
}

static bool script_path_byte(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       (c && strchr("._+@%~-/", c));
}

bool trusted_script_path_next(const char *text, size_t len, size_t *pos, size_t *line,
			      char *ret_path)
{
	size_t i = *pos;

	if (i == 0) /* the #! line is the interpreter's */
		while (i < len && text[i] != '\n')
			i++;
	for (; i < len; i++) {
		unsigned char prev = i ? (unsigned char)text[i - 1] : '\n';
		size_t n = 0;

		if (text[i] == '\n')
			(*line)++;
		if (text[i] != '/' || script_path_byte(prev) || prev == ':')
			continue;
		while (i + n < len && script_path_byte((unsigned char)text[i + n]))
			n++;
		if (n >= PATH_MAX) {
			i += n - 1;
			continue; /* longer than any path the kernel resolves */
		}
		memcpy(ret_path, text + i, n);
		ret_path[n] = '\0';
		*pos = i + n;
		return true;
	}
	*pos = len;
	return false;
}
