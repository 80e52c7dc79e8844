#pragma once

/* sandbox-users: one stable unprivileged identity per agent (see docs/users.md).
 * Library API shared by pistisd's CLI, the spawn core and the daemon. */

#include <stdbool.h>
#include <sys/types.h>

#define USERS_AGENT_PREFIX "pi-agent-"
#define USERS_AGENT_UID_MIN 10100u
#define USERS_AGENT_UID_MAX 59999u
#define USERS_SANDBOX_GROUP "pi-sandbox"
#define USERS_SANDBOX_GID 10010u
#define USERS_TOOLS_USER "pi-tools"
#define USERS_TOOLS_UID 10002u
#define USERS_AGENT_ID_MAX 256
#define USERS_NAME_MAX 32

struct users_identity {
	char agent_id[USERS_AGENT_ID_MAX + 1];
	char name[USERS_NAME_MAX + 1]; /* pi-agent-xxxxxxxx (longer only after a collision) */
	uid_t uid;                     /* == gid */
	gid_t gid;
	char home[256];       /* /data/sandbox-home/<name> (path as seen inside the root) */
	char tmpdir[256];     /* <home>/tmp */
	char agent_dir[256];  /* /data/agents/<name> */
};

/* Create or confirm the agent's identity under root ("/" or a root filesystem dir).
 * want_uid: (uid_t)-1 to allocate, else the uid the server dictates. */
int users_ensure(const char *root, const char *agent_id, uid_t want_uid,
		 struct users_identity *ret);

/* Look up an existing identity without changing anything; -ENOENT when unknown. */
int users_lookup(const char *root, const char *agent_id, struct users_identity *ret);

/* Create or confirm pi-sandbox (gid 10010) and pi-tools (uid/gid 10002). */
int users_ensure_base(const char *root);

/* True when uid is inside the agent range (the spawn core refuses anything else). */
static inline bool users_uid_is_agent(uid_t uid)
{
	return uid >= USERS_AGENT_UID_MIN && uid <= USERS_AGENT_UID_MAX;
}
