#pragma once

/* The environment builder (pure): builds an agent's environment up from nothing, the way
 * doas's env.c does, never by filtering the inherited one down. Used by pi-env and linked
 * into pistisd's spawn core, so both run the very same code. See docs/pi-env.md. */

#include <stddef.h>

#define ENVB_DEFAULT_PATH "/data/bin:/usr/local/bin:/usr/bin:/bin"
#define ENVB_MAX_BYTES_DEFAULT (64u * 1024u) /* total of all "NAME=VALUE\0" */

struct envb_opts {
	const char *path;                 /* NULL: ENVB_DEFAULT_PATH */
	const char *user;                 /* sets USER and LOGNAME when non-NULL */
	const char *home;                 /* HOME */
	const char *tmpdir;               /* TMPDIR */
	const char *shell;                /* SHELL (NULL: /bin/sh when user is set) */
	const char *proxy;                /* HTTP(S)_PROXY and lower-case forms; NULL: none */
	const char *no_proxy;             /* NO_PROXY/no_proxy with proxy; NULL: "localhost,127.0.0.1" */
	const char *const *keep;          /* extra exact names to pass through; NULL-terminated */
	const char *const *set;           /* "NAME=VALUE" to set; NULL-terminated */
	size_t max_bytes;                 /* 0: ENVB_MAX_BYTES_DEFAULT */
};

/* Build the environment from opts and the inherited envp (only allowlisted names are ever
 * copied from it). On success *ret_envp is a NULL-terminated malloc'd vector (free with
 * envb_free). Errors: -EINVAL (bad name or value in opts->set/keep; *ret_bad, when given,
 * points at the offending entry), -E2BIG (over max_bytes), -ENOMEM. */
int envb_build(const struct envb_opts *opts, char *const *inherited, char ***ret_envp,
	       const char **ret_bad);
void envb_free(char **envp);
