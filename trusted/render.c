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

/* [p, end) as the kernel reads a #! line after "#!": blanks, a word (into word), blanks,
 * and the rest with trailing blanks trimmed as one argument (into rest: never split). 1, or
 * -EINVAL with no word. The caller bounds end - p below TRUSTED_SHEBANG_MAX. */
static int word_and_rest(const char *p, const char *end, char word[TRUSTED_SHEBANG_MAX],
			 char rest[TRUSTED_SHEBANG_MAX])
{
	const char *a;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	for (a = p; a < end && *a != ' ' && *a != '\t'; a++)
		;
	if (a == p)
		return -EINVAL;
	memcpy(word, p, (size_t)(a - p));
	word[a - p] = '\0';
	while (a < end && (*a == ' ' || *a == '\t'))
		a++;
	while (end > a && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	memcpy(rest, a, (size_t)(end - a));
	rest[end - a] = '\0';
	return 1;
}

int trusted_shebang_parse(const char *text, size_t len, char interp[TRUSTED_SHEBANG_MAX],
			  char arg[TRUSTED_SHEBANG_MAX])
{
	const char *nl, *end;

	interp[0] = arg[0] = '\0';
	if (len < 2 || memcmp(text, "#!", 2))
		return 0;
	/* The kernel reads at most TRUSTED_SHEBANG_MAX bytes; a longer line is not what runs. */
	nl = memchr(text, '\n', len < TRUSTED_SHEBANG_MAX ? len : TRUSTED_SHEBANG_MAX);
	end = nl ? nl : text + len;
	if (!nl && len >= TRUSTED_SHEBANG_MAX)
		return -EINVAL;
	if (memchr(text, '\0', (size_t)(end - text)))
		return -EINVAL;
	return word_and_rest(text + 2, end, interp, arg);
}

bool trusted_interp_is_pistisd(const char *interp)
{
	const char *base = path_tail(interp);

	return !strcmp(base, "pistisd") || !strcmp(base, "pistisd-musl");
}

/* How the interpreters pistis knows read their command line. The kernel runs
 * `INTERP [ARG] SCRIPT ARGS…`, ARGS being whatever the caller of sudo chose: safe only when
 * INTERP takes SCRIPT as its program and hands ARGS to it. Each family lists the option
 * words that leave it so (flags that take no value, read no code from elsewhere and print
 * nothing the script holds: interp_option_why). */
enum interp_family {
	IF_NONE,
	IF_SHELL,
	IF_PYTHON,
	IF_PERL,
	IF_RUBY,
	IF_NODE,
	IF_PHP,
	IF_LUA,
	IF_TCL,
	/* Programs that take the caller's words as their own options and input files however
	 * they are started: GNU getopt finds `-e CMD` after SCRIPT (sed, make), or SCRIPT is
	 * their program text and ARGS what they read (awk, jq). */
	IF_OWN_ARGS
};

static enum interp_family interp_family_of(const char *interp)
{
	static const struct {
		const char *name;
		enum interp_family f;
	} names[] = {
		{"sh", IF_SHELL},	 {"dash", IF_SHELL},	{"bash", IF_SHELL},
		{"ash", IF_SHELL},	 {"zsh", IF_SHELL},	{"ksh", IF_SHELL},
		{"mksh", IF_SHELL},	 {"pdksh", IF_SHELL},	{"yash", IF_SHELL},
		{"posh", IF_SHELL},	 {"lksh", IF_SHELL},	{"python", IF_PYTHON},
		{"pypy", IF_PYTHON},	 {"perl", IF_PERL},	{"ruby", IF_RUBY},
		{"node", IF_NODE},	 {"nodejs", IF_NODE},	{"php", IF_PHP},
		{"lua", IF_LUA},	 {"luajit", IF_LUA},	{"tclsh", IF_TCL},
		{"sed", IF_OWN_ARGS},	 {"gsed", IF_OWN_ARGS}, {"awk", IF_OWN_ARGS},
		{"gawk", IF_OWN_ARGS},	 {"mawk", IF_OWN_ARGS}, {"nawk", IF_OWN_ARGS},
		{"jq", IF_OWN_ARGS},	 {"make", IF_OWN_ARGS}, {"gmake", IF_OWN_ARGS},
		{"expect", IF_OWN_ARGS},
	};
	const char *base = path_tail(interp);
	size_t len;

	/* python3.11, perl5.36.0, lua5.4, ksh93, tclsh8.6: the name without its version */
	for (len = strlen(base);
	     len > 0 && (isdigit((unsigned char)base[len - 1]) || base[len - 1] == '.'); len--)
		;
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (strlen(names[i].name) == len && !strncmp(base, names[i].name, len))
			return names[i].f;
	return IF_NONE;
}

static bool word_in(const char *w, size_t n, const char *const *list)
{
	for (; *list; list++)
		if (strlen(*list) == n && !strncmp(w, *list, n))
			return true;
	return false;
}

/* Why an option word is refused, after "option 'WORD' to INTERP ". Each family below is an
 * allow-list: a word it does not take is refused, with the reason of its class when the
 * word is a known member of one (what it does), with WHY_NOT_PLAIN otherwise. The script's
 * stdout and stderr are the agent's: an option that prints what the script holds or reads,
 * loads code the #! line does not pin, or opens a debugger hands the agent the secrets the
 * script exists to keep from it. */
static const char WHY_NOT_PLAIN[] =
	"may take the script as its value, read code or input the caller chooses (its stdin, "
	"its arguments) or print what the script holds: only the plain flags docs/trusted.md "
	"lists for it are allowed on the #! line";
static const char WHY_TRACE[] = "traces every command, its values expanded, to the caller's "
				"stderr: a secret the script holds in a variable is printed to "
				"the agent";
static const char WHY_SH_VERBOSE[] =
	"prints every line the shell reads to the caller's stderr, those of a file the script "
	"sources too: a secrets file it reads with '.' is printed to the agent";
static const char WHY_NET_DEBUGGER[] =
	"starts a debugger on the network that every agent shares: any agent that reaches it "
	"runs code in the script, as pi-tools, and reads its secrets";
static const char WHY_STDIN_DEBUGGER[] =
	"runs the script under a debugger that reads its commands from the caller's stdin when "
	"that is no terminal (perl5db.pl; -d:NAME a Devel:: module): the agent prints any "
	"variable, a secret too";
static const char WHY_WARNINGS[] =
	"turns on warnings, which print the values they are about to the caller's stderr "
	"(perl: 'Argument \"<the value>\" isn't numeric'): a secret the script handles "
	"reaches the agent";
static const char WHY_DEBUG_OUTPUT[] =
	"prints the interpreter's debugging output (a trace of what it parses or runs, every "
	"exception raised with its message) to the caller's stderr: the script's values and "
	"the sources it reads reach the agent";
static const char WHY_IMPORT_TRACE[] =
	"prints every module the script imports and the file it came from to the caller's "
	"stderr: what the script reads, and from where, reaches the agent";
static const char WHY_LOADS_CODE[] =
	"loads code the #! line does not pin (a module, library or file found through a search "
	"path, the caller's working directory or the option's value) and runs it as pi-tools";
static const char WHY_DIAGNOSTICS[] =
	"prints or writes what the script holds or does (a report with its environment, a "
	"heap snapshot, profile, trace, core dump or TLS keys) to the caller's stderr or to a "
	"file (in the caller's working directory by default)";

/* w (n bytes) is a prefix of p bytes, then one digit or more and nothing else */
static bool value_digits(const char *w, size_t n, size_t p)
{
	if (n <= p)
		return false;
	for (size_t i = p; i < n; i++)
		if (!isdigit((unsigned char)w[i]))
			return false;
	return true;
}

/* Does the option name of w (after "--", up to '=' or the end) equal name, or start with it
 * when prefix? Node reads '_' as '-' in an option's name (--inspect_brk is --inspect-brk),
 * V8's flags too. */
static bool node_name(const char *w, size_t n, const char *name, bool prefix)
{
	size_t i = 2, k = 0;

	for (; i < n && w[i] != '=' && name[k]; i++, k++)
		if (w[i] != name[k] && !(w[i] == '_' && name[k] == '-'))
			return false;
	return !name[k] && (prefix || i == n || w[i] == '=');
}

static const char *shell_option_why(const char *w, size_t n)
{
	static const char *const longs[] = {"--",      "--posix",      "--norc",      "--noprofile",
					    "--login", "--restricted", "--noediting", NULL};

	if (w[0] == '-' && w[1] == '-') {
		if (n == 9 && !strncmp(w, "--verbose", 9))
			return WHY_SH_VERBOSE;
		if (n == 10 && !strncmp(w, "--debugger", 10)) /* bash: bashdb's profile first */
			return WHY_LOADS_CODE;
		return word_in(w, n, longs) ? NULL : WHY_NOT_PLAIN;
	}
	if (n == 1)
		return w[0] == '-' ? NULL : WHY_NOT_PLAIN; /* `sh - SCRIPT`: the end of options */
	if (memchr(w, 'x', n))
		return WHY_TRACE;
	/* -v prints every line the shell reads, not only the script's: those of a file it
	 * sources too, `. /data/.secrets/env` and its TOKEN=… (red team, reproduced with
	 * dash and bash). */
	if (memchr(w, 'v', n))
		return WHY_SH_VERBOSE;
	/* not -c (SCRIPT would be the command), -s (commands from the caller's stdin), -o/-O
	 * (SCRIPT taken as an option name), -i */
	for (size_t i = 1; i < n; i++)
		if (!strchr("aefhklmnpuBCEHPT", w[i]))
			return WHY_NOT_PLAIN;
	return NULL;
}

/* -X NAME[=VALUE], attached (python3 -X…, 3.11's list) */
static const char *python_x_why(const char *v, size_t n)
{
	static const char *const ok[] = {
		"utf8", "utf8=0", "utf8=1", "frozen_modules=on", "frozen_modules=off", NULL};
	static const char *const warnings[] = {"dev", "tracemalloc", "warn_default_encoding", NULL};

	if (word_in(v, n, ok) ||
	    (n > 19 && !strncmp(v, "int_max_str_digits=", 19) && value_digits(v, n, 19)))
		return NULL;
	if (n >= 10 && !strncmp(v, "importtime", 10))
		return WHY_IMPORT_TRACE;
	/* `-X tracemalloc=25` and `-X dev` as well as the plain names */
	for (const char *const *p = warnings; *p; p++)
		if (n >= strlen(*p) && !strncmp(v, *p, strlen(*p)))
			return WHY_WARNINGS;
	/* bytecode read from (and sources compiled into) a directory the line names */
	if (n >= 14 && !strncmp(v, "pycache_prefix", 14))
		return WHY_LOADS_CODE;
	return WHY_NOT_PLAIN;
}

/* -W ACTION[:MESSAGE[:CATEGORY[:MODULE[:LINENO]]]], attached. Python takes an action by any
 * prefix ("i" is ignore); only ignore and error leave warnings as quiet as they are or
 * quieter, the others (default, always, module, once) print more of them. A CATEGORY with a
 * dot is imported (warnings._getcategory: __import__ of its module, from the search path
 * python has at that point: a module in the working directory was not found, one of the
 * standard library's with a side effect at import would be). */
static const char *python_w_why(const char *v, size_t n)
{
	size_t a = 0, field = 0;

	while (a < n && v[a] != ':')
		a++;
	if (!a || !((a <= 6 && !strncmp(v, "ignore", a)) || (a <= 5 && !strncmp(v, "error", a))))
		return WHY_WARNINGS;
	for (size_t i = a; i < n; i++) {
		if (v[i] == ':')
			field++;
		else if (field == 2 && v[i] == '.')
			return WHY_LOADS_CODE;
	}
	return NULL;
}

static const char *python_option_why(const char *w, size_t n)
{
	if (n == 2 && w[1] == '-')
		return NULL;
	if (w[1] == 'X' && n > 2)
		return python_x_why(w + 2, n - 2);
	if (w[1] == 'W' && n > 2)
		return python_w_why(w + 2, n - 2);
	/* not -c, -m (SCRIPT the command or module), -i (then the caller's stdin as a
	 * prompt), `-` (stdin) */
	for (size_t i = 1; i < n; i++) {
		if (w[i] == 'v') /* -v, -vv: each import, each file tried */
			return WHY_IMPORT_TRACE;
		if (w[i] == 'd') /* the parser's debug output (a debug build's) */
			return WHY_DEBUG_OUTPUT;
		if (!strchr("bBEIOPqRsSuVx", w[i]))
			return WHY_NOT_PLAIN;
	}
	return NULL;
}

static const char *perl_option_why(const char *w, size_t n)
{
	if (n == 2 && w[1] == '-')
		return NULL;
	if (w[1] == 'C') { /* -C, -CSDA: attached or none */
		for (size_t i = 2; i < n; i++)
			if (!isalnum((unsigned char)w[i]))
				return WHY_NOT_PLAIN;
		return NULL;
	}
	/* not -n, -p, -a, -i (the caller's arguments become input files), -s (they set the
	 * script's variables), -e, -E, -x, -S, `-`. Perl reads a letter group left to right,
	 * the first letter that takes a value taking the rest of the word: the first letter
	 * that is not plain decides. */
	for (size_t i = 1; i < n; i++) {
		switch (w[i]) {
		case 'w': /* 'Argument "s3cret" isn't numeric' (reproduced) */
		case 'W':
			return WHY_WARNINGS;
		case 'd': /* -d, -dt, -d:NAME */
			return WHY_STDIN_DEBUGGER;
		case 'D': /* -Dt traces each op, -Dx dumps the syntax tree (a DEBUGGING perl) */
			return WHY_DEBUG_OUTPUT;
		case 'M':
		case 'm':
		case 'I':
			return WHY_LOADS_CODE;
		default:
			if (!strchr("XTtUl", w[i]))
				return WHY_NOT_PLAIN;
		}
	}
	return NULL;
}

static const char *ruby_option_why(const char *w, size_t n)
{
	static const char *const longs[] = {"--", "--jit", "--yjit", "--disable-gems", NULL};
	static const char *const enable[] = {"--enable=frozen-string-literal",
					     "--enable=frozen_string_literal", "--enable=jit",
					     "--enable=yjit", NULL};

	if (w[0] == '-' && w[1] == '-') {
		if (word_in(w, n, longs) || word_in(w, n, enable))
			return NULL;
		if (n > 10 && !strncmp(w, "--disable=", 10)) { /* turns features off only */
			for (size_t i = 10; i < n; i++)
				if (!islower((unsigned char)w[i]) && !strchr("-_,", w[i]))
					return WHY_NOT_PLAIN;
			return NULL;
		}
		if ((n >= 7 && !strncmp(w, "--debug", 7)) ||
		    (n >= 9 && !strncmp(w, "--yydebug", 9)) || (n >= 6 && !strncmp(w, "--dump", 6)))
			return WHY_DEBUG_OUTPUT;
		if (n == 9 && !strncmp(w, "--verbose", 9))
			return WHY_WARNINGS;
		return WHY_NOT_PLAIN;
	}
	/* -W0 (no warnings) and -W1 (the default level); -W, -W2, -w and -v (the version, then
	 * verbose mode) turn every warning on */
	if (n == 3 && w[1] == 'W' && (w[2] == '0' || w[2] == '1'))
		return NULL;
	if (n > 2 && w[1] == 'W' && w[2] == ':') { /* -W:no-deprecated off, -W:deprecated on */
		if (n <= 6 || strncmp(w + 3, "no-", 3))
			return WHY_WARNINGS;
		for (size_t i = 6; i < n; i++)
			if (!islower((unsigned char)w[i]))
				return WHY_NOT_PLAIN;
		return NULL;
	}
	for (size_t i = 1; i < n; i++) {
		switch (w[i]) {
		case 'w':
		case 'W':
		case 'v':
			return WHY_WARNINGS;
		case 'd': /* $DEBUG: every exception raised is printed, rescued ones too */
		case 'y': /* the parser's trace */
			return WHY_DEBUG_OUTPUT;
		case 'r':
		case 'I':
			return WHY_LOADS_CODE;
		default:
			if (w[i] != 'U')
				return WHY_NOT_PLAIN;
		}
	}
	return NULL;
}

/* Node takes only "--" words here: a bare --require, -r, -e, -p, -i… would take SCRIPT as
 * its value or read the caller's input. Which V8 and node options print or load what is
 * open-ended (hundreds of --trace-… flags alone): the few named here pass, nothing else. */
static const char *node_option_why(const char *w, size_t n)
{
	static const char *const plain[] = {"enable-source-maps",
					    "use-strict",
					    "pending-deprecation",
					    "throw-deprecation",
					    "preserve-symlinks",
					    "preserve-symlinks-main",
					    "expose-gc",
					    "no-warnings",
					    "no-deprecation",
					    "no-addons",
					    "no-global-search-paths",
					    NULL};
	static const char *const sizes[] = {"max-old-space-size", "max-semi-space-size",
					    "stack-size", "max-http-header-size", NULL};
	static const char *const rejections[] = {
		"strict", "warn", "none", "throw", "warn-with-error-code", NULL};
	static const char *const loads[] = {"require",
					    "import",
					    "loader",
					    "experimental-loader",
					    "env-file",
					    "snapshot-blob",
					    "openssl-config",
					    "icu-data-dir",
					    "experimental-policy",
					    NULL};
	static const char *const diagnostics[] = {"report",
						  "cpu-prof",
						  "heap-prof",
						  "heapsnapshot",
						  "prof",
						  "diagnostic-dir",
						  "redirect-warnings",
						  "trace",
						  "tls-keylog",
						  "perf-",
						  "log",
						  "abort-on-uncaught-exception",
						  NULL};
	const char *eq = memchr(w, '=', n);

	if (w[0] != '-' || w[1] != '-')
		return WHY_NOT_PLAIN;
	if (n == 2)
		return NULL;
	for (const char *const *p = plain; *p; p++)
		if (!eq && node_name(w, n, *p, false))
			return NULL;
	for (const char *const *p = sizes; *p; p++)
		if (eq && node_name(w, n, *p, false) && value_digits(w, n, (size_t)(eq + 1 - w)))
			return NULL;
	if (eq && node_name(w, n, "unhandled-rejections", false)) {
		return word_in(eq + 1, n - (size_t)(eq + 1 - w), rejections) ? NULL : WHY_NOT_PLAIN;
	}
	/* the inspector (--inspect=, --inspect-brk=, --inspect-wait=, --inspect-port=, and
	 * --debug… its old spelling) listens on TCP in the sandbox's network namespace,
	 * which every agent shares (red team: `--inspect=127.0.0.1:9229` passed as
	 * "--NAME=VALUE", and another process's `node inspect` read a file through it) */
	if (node_name(w, n, "inspect", true) || node_name(w, n, "debug", true))
		return WHY_NET_DEBUGGER;
	/* --require=./x.js ran the caller's working directory's x.js first (reproduced) */
	for (const char *const *p = loads; *p; p++)
		if (node_name(w, n, *p, true))
			return WHY_LOADS_CODE;
	/* --report-uncaught-exception wrote report.*.json, 0644, the environment in it, to the
	 * working directory (reproduced) */
	for (const char *const *p = diagnostics; *p; p++)
		if (node_name(w, n, *p, true))
			return WHY_DIAGNOSTICS;
	return WHY_NOT_PLAIN;
}

/* -dNAME=VALUE, attached; only settings that make it quieter or bound it */
static const char *php_d_why(const char *v, size_t n)
{
	static const char *const quiet[] = {"display_errors=0",
					    "display_errors=off",
					    "display_errors=Off",
					    "display_startup_errors=0",
					    "error_reporting=0",
					    "log_errors=0",
					    NULL};
	static const char *const loads[] = {"auto_prepend_file", "auto_append_file", "include_path",
					    "extension",	 "zend_extension",   "opcache.",
					    "user_ini.",	 "sendmail_path",    NULL};
	static const char *const errors[] = {"display_",    "error_",  "log_errors",
					     "html_errors", "docref_", NULL};

	if (word_in(v, n, quiet))
		return NULL;
	if ((n > 13 && !strncmp(v, "memory_limit=", 13) &&
	     (value_digits(v, n - (strchr("KMG", v[n - 1]) ? 1 : 0), 13) ||
	      (n == 15 && !strncmp(v + 13, "-1", 2)))) ||
	    (n > 19 && !strncmp(v, "max_execution_time=", 19) && value_digits(v, n, 19)))
		return NULL;
	/* Xdebug (-dxdebug.mode=debug) dials its client on the network every agent shares */
	if (n >= 6 && !strncmp(v, "xdebug", 6))
		return WHY_NET_DEBUGGER;
	for (const char *const *p = loads; *p; p++)
		if (n >= strlen(*p) && !strncmp(v, *p, strlen(*p)))
			return WHY_LOADS_CODE;
	/* display_errors=1 (or stderr), error_reporting=E_ALL, error_log=FILE: PHP 8's
	 * warnings name values ('Undefined array key "…"') */
	for (const char *const *p = errors; *p; p++)
		if (n >= strlen(*p) && !strncmp(v, *p, strlen(*p)))
			return WHY_WARNINGS;
	return WHY_NOT_PLAIN;
}

static const char *php_option_why(const char *w, size_t n)
{
	if (w[1] == 'd' && n > 2)
		return php_d_why(w + 2, n - 2);
	for (size_t i = 1; i < n; i++) {
		if (w[i] == 'z' || w[i] == 'c') /* a Zend extension, a php.ini */
			return WHY_LOADS_CODE;
		if (!strchr("nqCH", w[i]))
			return WHY_NOT_PLAIN;
	}
	return NULL;
}

static const char *lua_option_why(const char *w, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		if (w[i] == 'l') /* require()s a library first */
			return WHY_LOADS_CODE;
		/* 5.4's warnings: an error in a __gc metamethod printed with its message */
		if (w[i] == 'W')
			return WHY_WARNINGS;
		if (w[i] != 'E')
			return WHY_NOT_PLAIN;
	}
	return NULL;
}

/* Why family f refuses option word w (n bytes, starting with '-' or '+'): NULL when it is a
 * flag that leaves SCRIPT its program and ARGS its arguments, and shows the agent nothing
 * the script holds. */
static const char *interp_option_why(enum interp_family f, const char *w, size_t n)
{
	if (f == IF_SHELL) /* `+e` too, and a lone `-` */
		return shell_option_why(w, n);
	if (w[0] != '-' || n < 2)
		return WHY_NOT_PLAIN;
	switch (f) {
	case IF_PYTHON:
		return python_option_why(w, n);
	case IF_PERL:
		return perl_option_why(w, n);
	case IF_RUBY:
		return ruby_option_why(w, n);
	case IF_NODE:
		return node_option_why(w, n);
	case IF_PHP:
		return php_option_why(w, n);
	case IF_LUA:
		return lua_option_why(w, n);
	case IF_SHELL:
	case IF_TCL:
	case IF_NONE:
	case IF_OWN_ARGS:
	default:
		return WHY_NOT_PLAIN;
	}
}

int trusted_interp_arg_check(const char *interp, const char *arg, char *why, size_t why_size)
{
	enum interp_family f = interp_family_of(interp);
	const char *base = path_tail(interp), *p = arg;

	bool own_args = f == IF_OWN_ARGS;

	if (own_args) /* an option is refused as for any other (below) */
		f = IF_NONE;
	while (*p) {
		const char *reason;
		size_t n;

		p += strspn(p, " \t");
		n = strcspn(p, " \t");
		if (!n)
			break;
		if (p[0] != '-' && p[0] != '+') {
			if (f != IF_NONE) {
				escape_format(why, why_size,
					      "'%.*s' is not an option: %s runs it as its program, "
					      "with this script as its first argument",
					      (int)n, p, base);
				return 1;
			}
		} else if (f == IF_NONE) {
			escape_format(why, why_size,
				      "the script follows the option '%.*s', and %s is no "
				      "interpreter pistis knows to hand the caller's arguments to "
				      "the script (sh, bash, python, perl, ruby, node, php, lua, "
				      "tclsh): it would read them as its own options and input "
				      "files (sed -f, awk -f, jq -f, make -f, expect -f run code "
				      "and read files a caller names); wrap it in a /bin/sh script",
				      (int)n, p, base);
			return 1;
		} else if ((reason = interp_option_why(f, p, n))) {
			escape_format(why, why_size, "option '%.*s' to %s %-s", (int)n, p, base,
				      reason);
			return 1;
		}
		p += n;
	}
	/* With no option too: `#!/bin/sed` ran `sed /data/trusted/NAME -e '1e id'` for the
	 * caller's `NAME -e '1e id'` (GNU getopt takes options after SCRIPT): id as pi-tools
	 * (red team, redteam-trusted.sh 14). */
	if (own_args) {
		escape_format(why, why_size,
			      "%s reads the caller's arguments as its own options and input files "
			      "without any option here too (sed -e, make --eval, awk's and jq's "
			      "operands run code and read files a caller names); wrap it in a "
			      "/bin/sh script",
			      base);
		return 1;
	}
	return 0;
}

int trusted_interp_split(const char *arg, char inner[TRUSTED_SHEBANG_MAX],
			 char inner_arg[TRUSTED_SHEBANG_MAX])
{
	const size_t cmd_len = sizeof(TRUSTED_INTERP_CMD) - 1;
	size_t len = strlen(arg);

	inner[0] = inner_arg[0] = '\0';
	if (len >= TRUSTED_SHEBANG_MAX || strncmp(arg, TRUSTED_INTERP_CMD, cmd_len) ||
	    (arg[cmd_len] && arg[cmd_len] != ' ' && arg[cmd_len] != '\t'))
		return 0;
	/* the rest of the #! argument, split as the kernel splits the line itself */
	return word_and_rest(arg + cmd_len, arg + len, inner, inner_arg);
}

/* Little- or big-endian fields of an ELF header, bounds checked by the caller. */
static uint64_t elf_field(const uint8_t *p, size_t size, bool msb)
{
	uint64_t v = 0;

	for (size_t i = 0; i < size; i++)
		v |= (uint64_t)p[msb ? size - 1 - i : i] << (8 * i);
	return v;
}

/* --- the dynamic section ------------------------------------------------------------- */

#define DT_NULL_ 0
#define DT_NEEDED_ 1
#define DT_STRTAB_ 5
#define DT_STRSZ_ 10
#define DT_RPATH_ 15
#define DT_RUNPATH_ 29
#define DT_DEPAUDIT_ 0x6ffffefbULL
#define DT_AUDIT_ 0x6ffffefcULL
#define DT_AUXILIARY_ 0x7ffffffdULL
#define DT_FILTER_ 0x7fffffffULL

struct elf_ctx {
	trusted_elf_read_fn read;
	void *userdata;
	uint64_t size;
	bool msb;
	int c; /* 0: ELFCLASS32, 1: ELFCLASS64 */
	const uint8_t *ph;
	uint64_t phnum;
	char *why;
	size_t why_size;
};

_printf_(2, 3) static int elf_refuse(struct elf_ctx *x, const char *fmt, ...)
{
	va_list ap;

	if (x->why && x->why_size) {
		va_start(ap, fmt);
		escape_vformat(x->why, x->why_size, "cut", 0, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Offsets in a program header: p_offset, p_vaddr, p_filesz, p_memsz (class 32, class 64). */
static const size_t ph_off[2] = {4, 8}, ph_vaddr[2] = {8, 16}, ph_filesz[2] = {16, 32},
		    ph_memsz[2] = {20, 40}, ph_size[2] = {32, 56}, word[2] = {4, 8};

/* The file offset of [addr, addr + len) in the loaded image: it must lie in the file-backed
 * part of exactly one PT_LOAD, and no other PT_LOAD may cover any of it (the kernel and the
 * loader map them in order; an overlap makes what is read there a matter of order). */
static int elf_addr_to_off(struct elf_ctx *x, uint64_t addr, uint64_t len, const char *what,
			   uint64_t *ret)
{
	size_t hits = 0;
	uint64_t off = 0;

	for (uint64_t i = 0; i < x->phnum; i++) {
		const uint8_t *ph = x->ph + i * ph_size[x->c];
		uint64_t o, v, fs, ms;

		if (elf_field(ph, 4, x->msb) != 1) /* PT_LOAD */
			continue;
		o = elf_field(ph + ph_off[x->c], word[x->c], x->msb);
		v = elf_field(ph + ph_vaddr[x->c], word[x->c], x->msb);
		fs = elf_field(ph + ph_filesz[x->c], word[x->c], x->msb);
		ms = elf_field(ph + ph_memsz[x->c], word[x->c], x->msb);
		/* Memory ranges [v, v + ms) and [addr, addr + len) intersect? (no wrap-around) */
		if (!(addr < v ? v - addr < len : addr - v < ms))
			continue;
		if (hits++)
			return elf_refuse(x, "%s lies in two PT_LOAD segments", what);
		if (addr < v || addr - v > fs || len > fs - (addr - v))
			return elf_refuse(
				x, "%s is not within the file part of its PT_LOAD segment", what);
		if (o > x->size || fs > x->size - o)
			return elf_refuse(x, "a PT_LOAD segment lies past the end of the file");
		off = o + (addr - v);
	}
	if (!hits)
		return elf_refuse(x, "%s is in no PT_LOAD segment", what);
	*ret = off;
	return 0;
}

/* The string at off in the string table [tab, tab + tabsz): it must end within the table
 * and be at most TRUSTED_ELF_STR_MAX bytes. */
static int elf_string(struct elf_ctx *x, uint64_t tab, uint64_t tabsz, uint64_t off,
		      const char *tag, char **ret)
{
	char buf[TRUSTED_ELF_STR_MAX + 1];
	uint64_t n;
	char *nul, *s;
	int r;

	if (off >= tabsz)
		return elf_refuse(x, "DT_%s string offset %llu is past DT_STRSZ (%llu)", tag,
				  (unsigned long long)off, (unsigned long long)tabsz);
	n = tabsz - off < sizeof(buf) ? tabsz - off : sizeof(buf);
	r = x->read(x->userdata, tab + off, buf, (size_t)n);
	if (r < 0)
		return r;
	nul = memchr(buf, '\0', (size_t)n);
	if (!nul)
		return n < sizeof(buf) ? elf_refuse(x, "a DT_%s string runs past DT_STRSZ", tag)
				       : elf_refuse(x, "a DT_%s string is longer than %d bytes",
						    tag, TRUSTED_ELF_STR_MAX);
	s = strdup(buf);
	if (!s)
		return -ENOMEM;
	*ret = s;
	return 0;
}

/* The ELF header and program headers as the kernel's loader takes them (either class and
 * byte order, headers of exactly the class's size, at most 64 KiB of them, within the
 * file): 1 with x->c, x->msb, x->phnum and *ret_ph (malloc'd, also x->ph) set; 0 when the
 * file is no ELF program or library (not ELF, not ET_EXEC or ET_DYN); -EINVAL (x->why
 * says why) when it is one the loader would not take. */
static int elf_headers(struct elf_ctx *x, uint8_t **ret_ph)
{
	static const size_t ehdr[2] = {52, 64}, phoff_at[2] = {28, 32}, phentsize_at[2] = {42, 54};
	uint8_t eh[64] = {0};
	uint64_t phoff, type;
	uint8_t *ph;
	int r;

	if (x->size < 16)
		return 0;
	r = x->read(x->userdata, 0, eh, x->size < sizeof(eh) ? (size_t)x->size : sizeof(eh));
	if (r < 0)
		return r;
	if (memcmp(eh, "\177ELF", 4))
		return 0;
	if ((eh[4] != 1 && eh[4] != 2) || (eh[5] != 1 && eh[5] != 2))
		return elf_refuse(x, "an ELF file of unknown class or byte order");
	x->c = eh[4] - 1;
	x->msb = eh[5] == 2;
	if (x->size < ehdr[x->c])
		return elf_refuse(x, "an ELF file cut short in its header");
	type = elf_field(eh + 16, 2, x->msb);
	if (type != 2 && type != 3)
		return 0; /* not ET_EXEC or ET_DYN: neither run nor mapped as a library */
	if (x->size > TRUSTED_ELF_FILE_MAX)
		return elf_refuse(x, "an ELF file larger than %llu MiB (not read)",
				  TRUSTED_ELF_FILE_MAX >> 20);
	if (elf_field(eh + phentsize_at[x->c], 2, x->msb) != ph_size[x->c])
		return elf_refuse(x, "program headers of another size than the class's");
	phoff = elf_field(eh + phoff_at[x->c], word[x->c], x->msb);
	x->phnum = elf_field(eh + phentsize_at[x->c] + 2, 2, x->msb);
	if (x->phnum == 0 || x->phnum * ph_size[x->c] > 65536 || phoff > x->size ||
	    x->phnum * ph_size[x->c] > x->size - phoff)
		return elf_refuse(x, "program headers missing or past the end of the file");
	ph = malloc(x->phnum * ph_size[x->c]);
	if (!ph)
		return -ENOMEM;
	r = x->read(x->userdata, phoff, ph, x->phnum * ph_size[x->c]);
	if (r < 0) {
		free(ph);
		return r;
	}
	x->ph = *ret_ph = ph;
	return 1;
}

void trusted_elf_dyn_done(struct trusted_elf_dyn *d)
{
	free(d->rpath);
	free(d->runpath);
	for (size_t i = 0; i < d->n; i++)
		free(d->loads[i].name);
	memset(d, 0, sizeof(*d));
}

int trusted_elf_dynamic(trusted_elf_read_fn read, void *userdata, uint64_t size,
			struct trusted_elf_dyn *ret, char *why, size_t why_size)
{
	struct elf_ctx x = {
		.read = read, .userdata = userdata, .size = size, .why = why, .why_size = why_size};
	struct {
		uint64_t tag;
		const char *name;
		uint64_t off;
	} want[TRUSTED_ELF_LOADS_MAX];
	_cleanup_free_ uint8_t *ph = NULL, *dyn = NULL;
	uint64_t dyn_vaddr = 0, dyn_off = 0, dyn_filesz = 0, ent, n_ent, dyn_at, i;
	uint64_t strtab = 0, strsz = 0, rpath = 0, runpath = 0, tab;
	bool has_strtab = false, has_strsz = false, has_rpath = false, has_runpath = false;
	size_t n_dyn = 0, n_want = 0;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (why && why_size)
		why[0] = '\0';
	r = elf_headers(&x, &ph);
	if (r <= 0)
		return r;
	for (i = 0; i < x.phnum; i++) {
		const uint8_t *p = ph + i * ph_size[x.c];

		if (elf_field(p, 4, x.msb) != 2) /* PT_DYNAMIC */
			continue;
		if (n_dyn++)
			return elf_refuse(&x, "two PT_DYNAMIC segments");
		dyn_off = elf_field(p + ph_off[x.c], word[x.c], x.msb);
		dyn_vaddr = elf_field(p + ph_vaddr[x.c], word[x.c], x.msb);
		dyn_filesz = elf_field(p + ph_filesz[x.c], word[x.c], x.msb);
	}
	if (!n_dyn)
		return 1; /* static: the loader maps nothing into it */
	ret->dynamic = true;
	/* The loader reads the table at its address until DT_NULL, whatever p_filesz says:
	 * read it where it is mapped, insist that p_offset says the same, and that DT_NULL
	 * comes within p_filesz and the entry limit. */
	ent = 2 * word[x.c];
	n_ent = dyn_filesz / ent;
	if (n_ent == 0)
		return elf_refuse(&x, "an empty PT_DYNAMIC");
	if (n_ent > TRUSTED_ELF_DYN_MAX)
		n_ent = TRUSTED_ELF_DYN_MAX;
	r = elf_addr_to_off(&x, dyn_vaddr, n_ent * ent, "PT_DYNAMIC", &dyn_at);
	if (r < 0)
		return r;
	if (dyn_at != dyn_off)
		return elf_refuse(&x, "PT_DYNAMIC's address and file offset disagree");
	dyn = malloc(n_ent * ent);
	if (!dyn)
		return -ENOMEM;
	r = read(userdata, dyn_at, dyn, n_ent * ent);
	if (r < 0)
		return r;
	for (i = 0;; i++) {
		const uint8_t *d = dyn + i * ent;
		uint64_t tag, val;
		const char *name = NULL;

		if (i == n_ent)
			return dyn_filesz / ent > TRUSTED_ELF_DYN_MAX
				       ? elf_refuse(&x, "more than %d dynamic entries",
						    TRUSTED_ELF_DYN_MAX)
				       : elf_refuse(&x, "no DT_NULL within PT_DYNAMIC");
		tag = elf_field(d, word[x.c], x.msb);
		val = elf_field(d + word[x.c], word[x.c], x.msb);
		if (tag == DT_NULL_)
			break;
		/* Each loader keeps the last of a repeated entry; refuse rather than guess. */
		switch (tag) {
		case DT_STRTAB_:
			if (has_strtab)
				return elf_refuse(&x, "two DT_STRTAB entries");
			has_strtab = true, strtab = val;
			continue;
		case DT_STRSZ_:
			if (has_strsz)
				return elf_refuse(&x, "two DT_STRSZ entries");
			has_strsz = true, strsz = val;
			continue;
		case DT_RPATH_:
			if (has_rpath)
				return elf_refuse(&x, "two DT_RPATH entries");
			has_rpath = true, rpath = val;
			continue;
		case DT_RUNPATH_:
			if (has_runpath)
				return elf_refuse(&x, "two DT_RUNPATH entries");
			has_runpath = true, runpath = val;
			continue;
		case DT_NEEDED_:
			name = "NEEDED";
			break;
		case DT_FILTER_:
			name = "FILTER";
			break;
		case DT_AUXILIARY_:
			name = "AUXILIARY";
			break;
		case DT_AUDIT_:
			name = "AUDIT";
			break;
		case DT_DEPAUDIT_:
			name = "DEPAUDIT";
			break;
		default:
			continue;
		}
		if (n_want >= TRUSTED_ELF_LOADS_MAX)
			return elf_refuse(&x, "more than %d libraries named (DT_NEEDED...)",
					  TRUSTED_ELF_LOADS_MAX);
		want[n_want].tag = tag;
		want[n_want].name = name;
		want[n_want++].off = val;
	}
	if (!has_rpath && !has_runpath && n_want == 0)
		return 1;
	if (!has_strtab || !has_strsz)
		return elf_refuse(&x, "library names or search paths without DT_STRTAB and "
				      "DT_STRSZ");
	if (strsz == 0 || strsz > size)
		return elf_refuse(&x, "a DT_STRSZ of %llu bytes", (unsigned long long)strsz);
	r = elf_addr_to_off(&x, strtab, strsz, "DT_STRTAB", &tab);
	if (r < 0)
		return r;
	if (has_rpath && (r = elf_string(&x, tab, strsz, rpath, "RPATH", &ret->rpath)) < 0)
		return r;
	if (has_runpath && (r = elf_string(&x, tab, strsz, runpath, "RUNPATH", &ret->runpath)) < 0)
		return r;
	for (i = 0; i < n_want; i++) {
		r = elf_string(&x, tab, strsz, want[i].off, want[i].name, &ret->loads[i].name);
		if (r < 0)
			return r;
		ret->loads[i].tag = want[i].name;
		ret->n = i + 1;
	}
	return 1;
}

struct elf_buf {
	const uint8_t *p;
	size_t len;
};

static int elf_buf_read(void *userdata, uint64_t off, void *buf, size_t len)
{
	const struct elf_buf *b = userdata;

	if (off > b->len || len > b->len - off)
		return -EIO;
	memcpy(buf, b->p + off, len);
	return 0;
}

int trusted_elf_dynamic_buf(const void *buf, size_t len, struct trusted_elf_dyn *ret, char *why,
			    size_t why_size)
{
	struct elf_buf b = {buf, len};

	return trusted_elf_dynamic(elf_buf_read, &b, len, ret, why, why_size);
}

int trusted_elf_interp(const void *buf, size_t len, char *interp, size_t size)
{
	struct elf_buf eb = {buf, len};
	struct elf_ctx x = {.read = elf_buf_read, .userdata = &eb, .size = len};
	_cleanup_free_ uint8_t *ph = NULL;
	const uint8_t *b = buf;
	uint64_t found = 0;
	int r;

	if (size)
		interp[0] = '\0';
	r = elf_headers(&x, &ph);
	if (r <= 0)
		return r;
	for (uint64_t i = 0; i < x.phnum; i++) {
		const uint8_t *p = ph + i * ph_size[x.c];
		uint64_t off, n;

		if (elf_field(p, 4, x.msb) != 3) /* PT_INTERP */
			continue;
		if (found++)
			return -EINVAL; /* two loaders: refuse rather than guess which one runs */
		off = elf_field(p + ph_off[x.c], word[x.c], x.msb);
		n = elf_field(p + ph_filesz[x.c], word[x.c], x.msb);
		/* The kernel: 2..PATH_MAX bytes, the last one NUL; it opens the C string. */
		if (n < 2 || n > 4096 || off > len || n > len - off || b[off + n - 1] != '\0' ||
		    strlen((const char *)b + off) >= size)
			return -EINVAL;
		memcpy(interp, b + off, strlen((const char *)b + off) + 1);
	}
	return found ? 1 : 0;
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
