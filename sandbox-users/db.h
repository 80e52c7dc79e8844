#pragma once

/* The pure core of sandbox-users: the registry and the four /etc files loaded in memory,
 * and the decisions made on them (uid allocation, collision rule, conflicts, edits).
 * users.c loads a users_db from disk under the locks, calls one of these and writes back
 * the files whose `changed` flag is set. Unit-testable without root. */

#include <stdbool.h>
#include <sys/types.h>

#include "sandbox-users/pwfile.h"
#include "sandbox-users/registry.h"
#include "sandbox-users/users.h"

struct users_db {
	struct registry reg;
	struct pwfile f[_PWFILE_KIND_MAX];
	bool present[_PWFILE_KIND_MAX]; /* shadow/gshadow exist in this root */
	const char *nologin;		/* shell for pi-tools: /usr/sbin/nologin or similar */
	char err[512];			/* why the last call failed, for the CLI: raw */
	char err_text[512];		/* the same as text, each name escaped (for a log) */
};

void users_db_done(struct users_db *db);

/* Each returns 0 or -errno and fills db->err on failure:
 * -EINVAL bad agent id, -ERANGE uid outside the agent range, -EEXIST conflict with an
 * existing user/group/uid, -ENOENT unknown agent. */
int users_db_ensure_base(struct users_db *db);
int users_db_ensure(struct users_db *db, const char *agent_id, uid_t want_uid,
		    struct users_identity *ret);
int users_db_lookup(const struct users_db *db, const char *agent_id, struct users_identity *ret);
int users_db_remove(struct users_db *db, const char *agent_id, bool forget);

/* The identity's paths from its name and uid. */
void users_identity_fill(struct users_identity *id, const char *agent_id, const char *name,
			 uid_t uid);

/* True when the registry record, passwd, group (and shadow/gshadow where present) and
 * pi-sandbox membership are all in place: ensure would change nothing. */
bool users_db_is_complete(const struct users_db *db, const char *agent_id);
