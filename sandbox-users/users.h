#pragma once

/* sandbox-users: one stable unprivileged identity per agent (see docs/users.md).
 * Library API shared by pistisd's CLI, the spawn core and the daemon. */

#include <stdbool.h>
#include <sys/stat.h>
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

/* What every sandbox needs its user namespace to map (struct id_map_need, lib/id-map.h):
 * root, and pi-tools' uid and gid and pi-sandbox's gid, which ensure-base writes
 * (USERS_ID_MAP_BASE); USERS_ID_MAP_ALL adds the agents' range, which `pistisd check`
 * (id_map) and pistisd-entry ask for. Initializers. */
#define USERS_ID_MAP_BASE_LIST                                                                     \
	{"root", 0, 0, false}, {USERS_TOOLS_USER, USERS_TOOLS_UID, USERS_TOOLS_UID, false},        \
		{"root", 0, 0, true}, {USERS_TOOLS_USER, USERS_TOOLS_UID, USERS_TOOLS_UID, true},  \
	{                                                                                          \
		USERS_SANDBOX_GROUP, USERS_SANDBOX_GID, USERS_SANDBOX_GID, true                    \
	}
#define USERS_ID_MAP_BASE                                                                          \
	{                                                                                          \
		USERS_ID_MAP_BASE_LIST                                                             \
	}
#define USERS_ID_MAP_ALL                                                                           \
	{                                                                                          \
		USERS_ID_MAP_BASE_LIST,                                                            \
			{"agents", USERS_AGENT_UID_MIN, USERS_AGENT_UID_MAX, false},               \
			{"agents", USERS_AGENT_UID_MIN, USERS_AGENT_UID_MAX, true},                \
	}

struct users_identity {
	char agent_id[USERS_AGENT_ID_MAX + 1];
	char name[USERS_NAME_MAX + 1]; /* pi-agent-xxxxxxxx (longer only after a collision) */
	uid_t uid;		       /* == gid */
	gid_t gid;
	char home[256];	     /* /data/sandbox-home/<name> (path as seen inside the root) */
	char tmpdir[256];    /* <home>/tmp */
	char agent_dir[256]; /* /data/agents/<name> */
	bool written;	     /* this call wrote its lines or record (a new agent, or one made
			      * again after a rebuild); false when it was only confirmed */
};

/* Create or confirm the agent's identity under root ("/" or a root filesystem dir).
 * want_uid: (uid_t)-1 to allocate, else the uid the server dictates. */
int users_ensure(const char *root, const char *agent_id, uid_t want_uid,
		 struct users_identity *ret);

/* Create or confirm many agents at once (servers that pre-create agents): one lock, one
 * parse and one rewrite of each file for all of them. All or nothing: a refusal for any
 * id writes nothing. 1..USERS_BATCH_MAX ids, no --uid; ret: n identities, in order. */
#define USERS_BATCH_MAX 1024
int users_ensure_many(const char *root, const char *const *agent_ids, size_t n,
		      struct users_identity *ret);

/* Look up an existing identity without changing anything; -ENOENT when unknown. */
int users_lookup(const char *root, const char *agent_id, struct users_identity *ret);

/* Create or confirm pi-sandbox (gid 10010) and pi-tools (uid/gid 10002). */
int users_ensure_base(const char *root);

/* Remove the agent's user and group (and its pi-sandbox membership) from /etc. The
 * registry keeps its uid and name reserved, so they are never given to anyone else and
 * a later ensure gives them back; forget drops the record too. Homes are left alone. */
int users_remove(const char *root, const char *agent_id, bool forget);

/* Every registry record, in registry order: malloc'd array (free()), -errno. */
struct users_entry {
	char agent_id[USERS_AGENT_ID_MAX + 1];
	char name[USERS_NAME_MAX + 1];
	uid_t uid;
	bool active; /* false: removed, uid reserved */
};
int users_list(const char *root, struct users_entry **ret, size_t *ret_n);

/* What the next ensure would refuse in /etc, for show and list, which read the registry
 * only: a second line of an agent's name, a membership, a password, pi-tools' lines (the
 * checks of users_ensure, made on a copy in memory read without the locks; nothing is
 * written). agent_id: that agent, or NULL for every active one. warn is called once for
 * each agent ensure would refuse (agent_id, the reason raw for JSON, and as text with
 * names escaped for a log), or once with agent_id NULL for what refuses them all (the
 * base, an /etc file that is untrusted or corrupt). Returns 0, or -errno (users_last_error)
 * when the registry cannot be read. */
typedef void (*users_warn_fn)(const char *agent_id, const char *why, const char *why_text,
			      void *userdata);
int users_check(const char *root, const char *agent_id, users_warn_fn warn, void *userdata);

/* One line saying why the last failing users_* call failed (file and line for a corrupt
 * file, the owner of a conflicting uid, …), or "" when it has nothing to add to the
 * errno. pistisd has one thread; the buffer is static. */
const char *users_last_error(void);
/* The same line as text, each name in it escaped once, a quoted one's ' too (lib/escape.h
 * escape_format): for a log line, with %-s. users_last_error's raw line is for JSON. */
const char *users_last_error_text(void);
/* Whether the last reason is a whole sentence that strerror(-r) after it would only blur:
 * ERANGE (an id outside the agent range, or not mapped in this user namespace: "Result not
 * representable" read as a bug) and EUSERS (every agent uid held; musl has no text for it,
 * "No error information"). False when there is no reason to print. */
bool users_error_is_sentence(int r);

/* Where the registry lives beneath the root (docs/users.md). */
#define USERS_REGISTRY_DIR "data/pistis"
#define USERS_REGISTRY_FILE "users.registry"
/* The closing mark's key beside it (docs/policy.md, "What the mark's value is"): made by
 * users_ensure_base, read by policy walks. */
#define USERS_MARK_KEY_FILE "mark.key"
#define USERS_MARK_KEY_SIZE 32
#define USERS_REGISTRY_LOCK "users.registry.lock"
#define USERS_LOCK_TIMEOUT_MS 15000u /* lckpwdf()'s 15 s */

/* The directories in /data that pistis keeps for itself, trusted commands and the agents'
 * homes (docs/users.md, docs/trusted.md, docs/entry.md "Kubernetes fsGroup"): what
 * pistisd-entry gives back after an fsGroup walk and what `pistisd check`'s data_state
 * judges, one list for both. dir_max, entry_max: the most the directory's mode and its
 * entries' modes may hold; files: its regular files are state too, not only its
 * directories; homes: one agent's home per entry, whose tmp (the agent's TMPDIR) counts.
 * In the header: pistisd-entry links no more of sandbox-users than this header. */
struct users_state_dir {
	const char *name;
	mode_t dir_max, entry_max;
	bool files, homes;
};
static inline const struct users_state_dir *users_state_dirs(size_t *ret_n)
{
	static const struct users_state_dir dirs[] = {
		{"pistis", 0700, 0700, true, false},	   {"trusted", 0755, 0755, true, false},
		{"bin", 0755, 0755, true, false},	   {".secrets", 0700, 0700, true, false},
		{"sandbox-home", 0711, 0700, false, true}, {"agents", 0711, 0700, false, false},
	};

	*ret_n = sizeof(dirs) / sizeof(dirs[0]);
	return dirs;
}

/* True when uid is inside the agent range (the spawn core refuses anything else). */
static inline bool users_uid_is_agent(uid_t uid)
{
	return uid >= USERS_AGENT_UID_MIN && uid <= USERS_AGENT_UID_MAX;
}

/* A directory agents may create files in (st of it): theirs (an owner may always chmod),
 * or writable and searchable by everyone, or by pi-sandbox or an agent's group (an agent's
 * group id is its uid). ACL entries are not read (policy's write trees, the ones that use
 * them, carry pi-sandbox as their group). */
static inline bool users_agents_may_write(const struct stat *st)
{
	bool agent_gid = st->st_gid == USERS_SANDBOX_GID || users_uid_is_agent((uid_t)st->st_gid);

	return users_uid_is_agent(st->st_uid) || (st->st_mode & 0003) == 0003 ||
	       (agent_gid && (st->st_mode & 0030) == 0030);
}
