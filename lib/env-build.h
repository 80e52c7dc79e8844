#pragma once

/* The environment builder (pure): builds an agent's environment up from nothing, the way
 * doas's env.c does, never by filtering the inherited one down. Used by pi-env and linked
 * into pistisd's spawn core, so both run the very same code. See docs/pi-env.md. */

#include <stddef.h>

#define ENVB_DEFAULT_PATH "/data/bin:/usr/local/bin:/usr/bin:/bin"
#define ENVB_MAX_BYTES_DEFAULT (64u * 1024u) /* total of all "NAME=VALUE\0" */
/* TERM of a command on a pty when none is set or inherited (what `docker exec -t` gives) */
#define ENVB_PTY_TERM "xterm"
#define ENVB_MAX_ENTRIES 1024u /* names considered per build, output included */
#define ENVB_MAX_NAME 128u     /* --keep/--set names; PI_* names are PI_ + 1..64 */
#define ENVB_MAX_VALUE 4096u   /* PI_*, --keep, --set values and paths */

struct envb_opts {
	const char *path;	 /* NULL: ENVB_DEFAULT_PATH */
	const char *user;	 /* sets USER and LOGNAME when non-NULL */
	const char *home;	 /* HOME */
	const char *tmpdir;	 /* TMPDIR */
	const char *shell;	 /* SHELL (NULL: /bin/sh when user is set) */
	const char *proxy;	 /* HTTP(S)_PROXY and lower-case forms; NULL: none */
	const char *no_proxy;	 /* NO_PROXY/no_proxy with proxy; NULL: "localhost,127.0.0.1" */
	const char *const *keep; /* extra exact names to pass through; NULL-terminated */
	const char *const *set;	 /* "NAME=VALUE" to set; NULL-terminated */
	const char *term;	 /* TERM where no valid one is set or inherited; NULL: none */
	size_t max_bytes;	 /* 0: ENVB_MAX_BYTES_DEFAULT */
};

/* Build the environment from opts and the inherited envp (only allowlisted names are ever
 * copied from it). On success *ret_envp is a NULL-terminated malloc'd vector (free with
 * envb_free). Errors: -EINVAL (bad name or value in opts->set/keep, or a bad opts field;
 * *ret_bad, when given, points at the offending string: an element of set/keep or the
 * opts field itself), -E2BIG (the entries opts asks for exceed max_bytes or
 * ENVB_MAX_ENTRIES), -ENOMEM. Inherited entries that are invalid or do not fit are
 * dropped, never an error. */
int envb_build(const struct envb_opts *opts, char *const *inherited, char ***ret_envp,
	       const char **ret_bad);
void envb_free(char **envp);

/* Why envb_build refuses one opts->set entry ("NAME=VALUE") or opts->keep name, for
 * messages: a static string, or NULL when the entry on its own is acceptable (a --set
 * name given twice is refused by envb_build only). */
const char *envb_set_refusal(const char *entry);
/* The same for a --set name on its own (no '='), by name alone: what envb_set_refusal
 * says of "NAME=VALUE" before it looks at the value. */
const char *envb_set_name_refusal(const char *name);
const char *envb_keep_refusal(const char *name);
/* Why a value for one of the opts fields is refused, NULL when acceptable. */
enum envb_field {
	ENVB_FIELD_PATH,
	ENVB_FIELD_USER,
	ENVB_FIELD_DIR, /* home, tmpdir, shell: absolute paths */
	ENVB_FIELD_PROXY,
	ENVB_FIELD_NO_PROXY,
};
const char *envb_field_refusal(enum envb_field field, const char *value);
/* Why value cannot be a TERM (1 to 64 of A-Z a-z 0-9 _ . + -: a terminfo name, never a
 * path), or NULL. */
const char *envb_term_refusal(const char *value);
