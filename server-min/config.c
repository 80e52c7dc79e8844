/* server-min: pistis.json — parsed strictly (lib/proto's limits and duplicate-key check),
 * ${ENV} substituted inside string values only (never in the JSON text, so an environment
 * value cannot inject structure; a token is one ${NAME} or taken as written: get_str), every
 * error with its line. See docs/server-min.md. */
#include "server-min/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/macro.h"
#include "lib/parse-num.h"
#include "lib/proto.h"
#include "lib/trust-path.h"

static unsigned line_of_offset(const char *text, size_t off)
{
	unsigned line = 1;
	for (size_t i = 0; i < off && text[i]; i++)
		line += text[i] == '\n';
	return line;
}

/* The line where "key" (as a JSON member name) first appears after `from`. */
static unsigned line_of_key(const char *text, const char *key, size_t *from)
{
	char pat[80];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	p = strstr(text + (from ? *from : 0), pat);
	if (!p)
		return 0;
	if (from)
		*from = (size_t)(p - text) + 1;
	return line_of_offset(text, (size_t)(p - text));
}

static int fail(struct smin_config *c, unsigned line, const char *fmt, ...) _printf_(3, 4);
static int fail(struct smin_config *c, unsigned line, const char *fmt, ...)
{
	char msg[sizeof(c->error)];
	va_list ap;

	/* The values escaped once (lib/escape-format.c), the message then logged as text
	 * (%-s): a key or a name in the file is shown as it is written there, never raw. */
	va_start(ap, fmt);
	escape_vformat(msg, sizeof(msg), "message cut", 0, fmt, ap);
	va_end(ap);
	escape_format(c->error, sizeof(c->error), "%s:%u: %-s", c->path, line, msg);
	return -EINVAL;
}

/* Whether t can be a token at all: one that pistisd serve and pistis cannot read from their
 * token files (a space, a control or non-ASCII byte, over 512 bytes), or that lws cannot copy
 * out of the Authorization header, was taken by --check and then matched no connection. */
static bool token_valid(const char *t)
{
	size_t n = strlen(t);

	if (n < SMIN_TOKEN_MIN || n > SMIN_TOKEN_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (t[i] <= ' ' || t[i] > '~')
			return false;
	return true;
}

/* Every key of obj is one of keys (NULL-terminated) or "comment": a misspelt key ("tsl",
 * "limit", "handshake") was ignored and left its default without a word (plain ws:// for a
 * misspelt "tls"), which --check did not catch. */
static int known_keys(struct smin_config *c, const cJSON *obj, const char *where,
		      const char *const *keys)
{
	for (const cJSON *k = obj->child; k; k = k->next) {
		char list[256] = "";
		bool ok = !strcmp(k->string, "comment");
		size_t n = 0;

		for (size_t i = 0; keys[i] && !ok; i++)
			ok = !strcmp(k->string, keys[i]);
		if (ok)
			continue;
		for (size_t i = 0; keys[i] && n < sizeof(list); i++)
			n += (size_t)snprintf(list + n, sizeof(list) - n, "\"%s\", ", keys[i]);
		return fail(c, line_of_key(c->text, k->string, NULL) ?: 1,
			    "unknown key \"%.64s\" %-s (known: %-s\"comment\")", k->string, where,
			    list);
	}
	return 0;
}

/* root's optional member key in *ret (NULL when absent): an object holding none but the
 * keys listed. */
static int get_section(struct smin_config *c, const cJSON *root, const char *key,
		       const char *const *keys, cJSON **ret)
{
	cJSON *o = cJSON_GetObjectItemCaseSensitive(root, key);
	char where[64];
	int r;

	*ret = NULL;
	if (!o)
		return 0;
	if (!cJSON_IsObject(o))
		return fail(c, line_of_key(c->text, key, NULL), "\"%s\" must be an object", key);
	snprintf(where, sizeof(where), "in \"%s\"", key);
	r = known_keys(c, o, where, keys);
	if (r < 0)
		return r;
	*ret = o;
	return 0;
}

/* secret: in is one ${NAME} of a token's (get_str), so no error quotes it. */
static int substitute(struct smin_config *c, const char *in, unsigned line, bool secret, char **ret)
{
	size_t cap = strlen(in) + 1, n = 0;
	char *out = malloc(cap);

	if (!out)
		return -ENOMEM;
	for (const char *p = in; *p;) {
		const char *val;
		size_t vl;
		if (p[0] == '$' && p[1] == '{') {
			const char *end = strchr(p + 2, '}');
			char name[128];
			if (!end || end - p - 2 <= 0 || end - p - 2 >= (long)sizeof(name)) {
				free(out);
				if (secret)
					return fail(c, line,
						    "bad ${NAME} reference: NAME must be 1 to 127 "
						    "characters");
				return fail(c, line, "bad ${NAME} reference in \"%.40s\"", in);
			}
			memcpy(name, p + 2, (size_t)(end - p - 2));
			name[end - p - 2] = 0;
			val = getenv(name);
			if (!val) {
				free(out);
				return fail(c, line, "environment variable %s is not set", name);
			}
			p = end + 1;
		} else {
			val = p;
			vl = 1;
			p++;
			goto copy;
		}
		vl = strlen(val);
	copy:
		if (n + vl + 1 > cap) {
			char *nb;
			cap = (n + vl + 1) * 2;
			nb = realloc(out, cap);
			if (!nb) {
				free(out);
				return -ENOMEM;
			}
			out = nb;
		}
		memcpy(out + n, val, vl);
		n += vl;
	}
	out[n] = 0;
	*ret = out;
	return 0;
}

static bool from_env(cJSON *obj, const char *key);

/* A token (secret) is one ${NAME} and nothing else, taken from the environment as it is, or
 * the token itself, taken as written: never substituted inside. A token is any printable
 * ASCII, so a generated one may hold "${...": substituted, it became another token without a
 * word, or its error quoted the value ("bad ${NAME} reference in \"<the token>\"",
 * "environment variable <the rest of the token> is not set") into the journal (red team). */
static int get_str(struct smin_config *c, cJSON *obj, const char *key, bool required, size_t *from,
		   char **ret)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	unsigned line = line_of_key(c->text, key, from);
	bool secret = !strcmp(key, "token") || !strcmp(key, "client_token");

	*ret = NULL;
	if (!v) {
		if (required)
			return fail(c, line ? line : 1, "\"%s\" is required", key);
		return 0;
	}
	if (!cJSON_IsString(v))
		return fail(c, line, "\"%s\" must be a string", key);
	if (secret && !from_env(obj, key))
		return (*ret = strdup(v->valuestring)) ? 0 : -ENOMEM;
	return substitute(c, v->valuestring, line, secret, ret);
}

/* An optional whole number 1..max: *ret is left alone when the key is absent. */
static int get_count(struct smin_config *c, cJSON *obj, const char *key, unsigned max,
		     unsigned *ret)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > max ||
	    v->valuedouble != (double)(unsigned)v->valuedouble)
		return fail(c, line_of_key(c->text, key, NULL),
			    "\"%s\" must be a whole number 1..%u", key, max);
	*ret = (unsigned)v->valuedouble;
	return 0;
}

int smin_listen_split(const char *addr, size_t *ret_host_len, int *ret_port)
{
	const char *colon = strrchr(addr, ':');
	uint64_t port;

	if (!colon || colon == addr || parse_uint_strict(colon + 1, 65535, NULL, &port) < 0 ||
	    !port)
		return -EINVAL;
	*ret_host_len = (size_t)(colon - addr);
	*ret_port = (int)port;
	return 0;
}

/* Whether the string value of key in obj is one ${NAME} reference and nothing else: a
 * token that comes from the environment and is not written in the file. */
static bool from_env(cJSON *obj, const char *key)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
	size_t n = s ? strlen(s) : 0;

	return n > 3 && s[0] == '$' && s[1] == '{' && strchr(s, '}') == s + n - 1;
}

/* 1 when any user may read the file at path (fd: the file opened, whose mode is taken,
 * else -1): it is readable by others and every directory on the way to it (links
 * resolved) lets others through; 0 when not, -errno when that cannot be told. A config's
 * or key's directories are checked by trust_file_open to be changeable by no one else,
 * so what is seen here stays true. Group read stays the operator's choice (a group of
 * operators). */
static int others_may_read(const char *path, int fd, mode_t *ret_mode)
{
	_cleanup_free_ char *real = realpath(path, NULL);
	struct stat st;
	char *slash;

	*ret_mode = 0;
	if (!real)
		return errno == ENOENT ? 0 : -errno;
	if ((fd >= 0 ? fstat(fd, &st) : stat(real, &st)) < 0)
		return -errno;
	*ret_mode = st.st_mode & 07777;
	if (!(st.st_mode & S_IROTH))
		return 0;
	while ((slash = strrchr(real, '/'))) {
		slash[slash == real] = 0; /* "/a" -> "/" */
		if (stat(real, &st) < 0)
			return -errno;
		if (!(st.st_mode & S_IXOTH))
			return 0;
		if (slash == real)
			break;
	}
	return 1;
}

/* A secret the relay holds in a file every local user may read: with a sandbox token
 * anyone connects as that sandbox (and gets its clients' requests, stdin and files), with
 * the client token as a client of every sandbox and agent, with the TLS key as the relay.
 * On a machine where agents (or anyone else) have accounts, that is every agent: refused,
 * as pistis and pistisd serve refuse their token files (red team, redteam-sweep.sh). */
static int refuse_readable(struct smin_config *c, const char *path, int fd, const char *what,
			   const char *consequence)
{
	mode_t mode = 0;
	int r = others_may_read(path, fd, &mode);

	if (r == 0)
		return 0;
	if (r < 0) {
		escape_format(c->error, sizeof(c->error),
			      "%s (%s): cannot tell who may read it: %s", path, what, strerror(-r));
		return r;
	}
	escape_format(c->error, sizeof(c->error),
		      "%s (%s) may be read by every user (mode %04o, and every directory on its "
		      "way lets others through): %s (chmod o-r%s)",
		      path, what, (unsigned)mode, consequence,
		      c->tls_key && !strcmp(path, c->tls_key)
			      ? ""
			      : ", or take the tokens from the environment: ${NAME}");
	return -EPERM;
}

static void sandbox_cfg_clear(struct smin_sandbox_cfg *s)
{
	free(s->name);
	if (s->token)
		explicit_bzero(s->token, strlen(s->token));
	free(s->token);
	s->name = s->token = NULL;
}

int smin_config_load(const char *path, struct smin_config *c)
{
	const struct trust_rule rule = {
		.also_owner = geteuid() ? geteuid() : (uid_t)-1,
		.flags = TRUST_STICKY | TRUST_RDONLY_MOUNT,
	};
	_cleanup_close_ int fd = -1;
	struct proto_error err = {0};
	char why[PATH_MAX + 300];
	cJSON *root = NULL, *sbs, *listen, *tls, *limits;
	/* the sandbox being read: not yet counted in n_sandboxes, so freed here on an error */
	struct smin_sandbox_cfg *partial = NULL;
	size_t len = 0, from = 0;
	bool literal;
	int r;

	memset(c, 0, sizeof(*c));
	snprintf(c->path, sizeof(c->path), "%s", path);
	/* Whoever may write the file, or a directory on its way, chooses the tokens and the
	 * listen addresses: trust_file_open (lib/trust-path.c) believes only a regular file
	 * of root's or of this user's that no one else may write, reached through
	 * directories and links of theirs that no one else may change (sticky and read-only
	 * mounts excepted), as sshd's StrictModes asks of keys. Who may read it is the
	 * operator's choice (docs/server-min.md). */
	fd = trust_file_open(path, &rule, "the config", why, sizeof(why));
	if (fd < 0) {
		escape_format(
			c->error, sizeof(c->error), "%s%s", why,
			fd == -EPERM || fd == -ELOOP
				? " (whoever may write it chooses the tokens: chown, chmod go-w)"
				: "");
		return fd;
	}
	r = fd_read_all(fd, PROTO_MAX_MESSAGE, &c->text, &len);
	if (r < 0) {
		escape_format(c->error, sizeof(c->error), "%s: %s", path, strerror(-r));
		return r;
	}
	root = cJSON_ParseWithLengthOpts(c->text, len, NULL, false);
	if (!root) {
		const char *e = cJSON_GetErrorPtr();
		return fail(c,
			    e && e >= c->text && e <= c->text + len
				    ? line_of_offset(c->text, (size_t)(e - c->text))
				    : 1,
			    "not valid JSON");
	}
	cJSON_Delete(root);
	if (proto_parse(c->text, len, &root, &err) < 0)
		return fail(c, 1, "%s", err.message);
	if ((r = known_keys(c, root, "at the top level",
			    (const char *const[]){"listen", "tls", "limits", "client_token",
						  "sandboxes", NULL})) < 0)
		goto out;

	if ((r = get_section(c, root, "listen", (const char *const[]){"sandbox", "client", NULL},
			     &listen)) < 0)
		goto out;
	if (listen && ((r = get_str(c, listen, "sandbox", false, NULL, &c->listen_sandbox)) < 0 ||
		       (r = get_str(c, listen, "client", false, NULL, &c->listen_client)) < 0))
		goto out;
	if (!c->listen_sandbox && !(c->listen_sandbox = strdup("127.0.0.1:7700")))
		goto oom;
	if (!c->listen_client && !(c->listen_client = strdup("127.0.0.1:7701")))
		goto oom;
	/* HOST:PORT (digits only, 1-65535) or an absolute unix socket path, as the relay
	 * binds them: found by --check, not at the first start. */
	for (int i = 0; i < 2; i++) {
		const char *a = i ? c->listen_client : c->listen_sandbox;
		size_t host_len;
		int port;

		if (a[0] != '/' && smin_listen_split(a, &host_len, &port) < 0) {
			r = fail(c, line_of_key(c->text, i ? "client" : "sandbox", NULL),
				 "listen address '%s' must be HOST:PORT (port 1-65535) or an "
				 "absolute unix socket path",
				 a);
			goto out;
		}
	}
	if ((r = get_section(c, root, "tls", (const char *const[]){"cert", "key", NULL}, &tls)) < 0)
		goto out;
	if (tls) {
		if ((r = get_str(c, tls, "cert", true, NULL, &c->tls_cert)) < 0 ||
		    (r = get_str(c, tls, "key", true, NULL, &c->tls_key)) < 0)
			goto out;
		if (c->tls_cert[0] != '/' || c->tls_key[0] != '/') {
			r = fail(c, line_of_key(c->text, "tls", NULL),
				 "\"tls\": \"cert\" and \"key\" must be absolute paths");
			goto out;
		}
	}
	c->handshakes = 0;
	c->handshakes_per_address = SMIN_HANDSHAKES_PER_ADDRESS;
	c->client_queue_grace_s = SMIN_CLIENT_QUEUE_GRACE_S;
	c->client_queue_max_mib = SMIN_CLIENT_QUEUE_MAX_MIB;
	if ((r = get_section(c, root, "limits",
			     (const char *const[]){"handshakes", "handshakes_per_address",
						   "client_queue_grace_s", "client_queue_max_mib",
						   NULL},
			     &limits)) < 0)
		goto out;
	if (limits &&
	    ((r = get_count(c, limits, "handshakes", SMIN_MAX_HANDSHAKES, &c->handshakes)) < 0 ||
	     (r = get_count(c, limits, "handshakes_per_address", SMIN_MAX_HANDSHAKES,
			    &c->handshakes_per_address)) < 0 ||
	     (r = get_count(c, limits, "client_queue_grace_s", SMIN_MAX_CLIENT_QUEUE_GRACE_S,
			    &c->client_queue_grace_s)) < 0 ||
	     (r = get_count(c, limits, "client_queue_max_mib", SMIN_MAX_CLIENT_QUEUE_MAX_MIB,
			    &c->client_queue_max_mib)) < 0))
		goto out;
	if ((r = get_str(c, root, "client_token", true, NULL, &c->client_token)) < 0)
		goto out;
	literal = !from_env(root, "client_token");
	if (!token_valid(c->client_token)) {
		r = fail(c, line_of_key(c->text, "client_token", NULL),
			 "\"client_token\" must be %u to %u printable ASCII characters without "
			 "spaces (found %zu bytes)",
			 SMIN_TOKEN_MIN, SMIN_TOKEN_MAX, strlen(c->client_token));
		goto out;
	}
	sbs = cJSON_GetObjectItemCaseSensitive(root, "sandboxes");
	if (!cJSON_IsArray(sbs) || cJSON_GetArraySize(sbs) < 1 ||
	    cJSON_GetArraySize(sbs) > SMIN_MAX_SANDBOXES) {
		r = fail(c, line_of_key(c->text, "sandboxes", NULL) ?: 1,
			 "\"sandboxes\" must be an array of 1..%u objects", SMIN_MAX_SANDBOXES);
		goto out;
	}
	c->sandboxes = calloc((size_t)cJSON_GetArraySize(sbs), sizeof(*c->sandboxes));
	if (!c->sandboxes)
		goto oom;
	from = 0;
	for (cJSON *s = sbs->child; s; s = s->next) {
		struct smin_sandbox_cfg *sc = partial = &c->sandboxes[c->n_sandboxes];
		size_t here = from;
		if (!cJSON_IsObject(s)) {
			r = fail(c, line_of_key(c->text, "sandboxes", NULL),
				 "each sandbox must be an object");
			goto out;
		}
		if ((r = known_keys(c, s, "in a sandbox",
				    (const char *const[]){"name", "token", NULL})) < 0 ||
		    (r = get_str(c, s, "name", true, &from, &sc->name)) < 0)
			goto out;
		if (!proto_id_valid(sc->name, 63)) {
			r = fail(c, line_of_key(c->text, "name", &here),
				 "sandbox name \"%.40s\" must be 1..63 characters of "
				 "[A-Za-z0-9._:-]",
				 sc->name);
			goto out;
		}
		here = from;
		if ((r = get_str(c, s, "token", true, &here, &sc->token)) < 0)
			goto out;
		literal = literal || !from_env(s, "token");
		if (!token_valid(sc->token)) {
			r = fail(c, line_of_key(c->text, "token", &from),
				 "token of sandbox \"%s\" must be %u to %u printable ASCII "
				 "characters without spaces (found %zu bytes)",
				 sc->name, SMIN_TOKEN_MIN, SMIN_TOKEN_MAX, strlen(sc->token));
			goto out;
		}
		for (size_t i = 0; i < c->n_sandboxes; i++)
			if (!strcmp(c->sandboxes[i].name, sc->name)) {
				r = fail(c, line_of_key(c->text, "name", &here),
					 "sandbox \"%s\" is named twice", sc->name);
				goto out;
			}
		/* A token is one sandbox's identity: shared by two, the one that connects is
		 * taken for the other (it gets that one's requests, stdin and files); equal to
		 * the client token, a sandbox could connect as a client to every sandbox. */
		here = from;
		if (!strcmp(sc->token, c->client_token)) {
			r = fail(c, line_of_key(c->text, "token", &here),
				 "token of sandbox \"%s\" is the \"client_token\": each sandbox "
				 "needs a token of its own",
				 sc->name);
			goto out;
		}
		for (size_t i = 0; i < c->n_sandboxes; i++)
			if (!strcmp(c->sandboxes[i].token, sc->token)) {
				r = fail(c, line_of_key(c->text, "token", &here),
					 "sandbox \"%s\" has the same token as sandbox \"%s\": "
					 "each sandbox needs a token of its own",
					 sc->name, c->sandboxes[i].name);
				goto out;
			}
		c->n_sandboxes++;
		partial = NULL;
	}
	if (literal &&
	    (r = refuse_readable(c, path, fd, "the config, with tokens written in it",
				 "whoever reads it connects as a client or a sandbox")) < 0)
		goto out;
	if (c->tls_key && (r = refuse_readable(c, c->tls_key, -1, "the TLS key",
					       "whoever reads it can pose as the relay")) < 0)
		goto out;
	r = 0;
	goto out;
oom:
	r = -ENOMEM;
	snprintf(c->error, sizeof(c->error), "out of memory");
out:
	if (partial)
		sandbox_cfg_clear(partial);
	cJSON_Delete(root);
	return r;
}

void smin_config_free(struct smin_config *c)
{
	for (size_t i = 0; i < c->n_sandboxes; i++)
		sandbox_cfg_clear(&c->sandboxes[i]);
	free(c->sandboxes);
	if (c->client_token)
		explicit_bzero(c->client_token, strlen(c->client_token));
	free(c->client_token);
	free(c->listen_sandbox);
	free(c->listen_client);
	free(c->tls_cert);
	free(c->tls_key);
	free(c->text);
	memset(c, 0, sizeof(*c));
}
