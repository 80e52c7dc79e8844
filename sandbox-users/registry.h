#pragma once

/* The identity registry: which agent id owns which user name and uid, kept on the
 * persistent volume so a rebuilt container (fresh /etc/passwd) gets the same ids back.
 * Pure parse/format here; the file I/O is in users-io.c. Format (docs/users.md):
 *
 *   pistis-users-registry 1
 *   # comments and blank lines are allowed and not kept
 *   <uid>:<name>:<state>:<agent id>
 *
 * state is "active" (the user exists) or "reserved" (removed; uid and name stay taken). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox-users/users.h"

#define REGISTRY_HEADER "pistis-users-registry 1"
#define REGISTRY_LINE_MAX 512
#define REGISTRY_RECORDS_MAX (USERS_AGENT_UID_MAX - USERS_AGENT_UID_MIN + 1)
#define REGISTRY_SIZE_MAX ((size_t)REGISTRY_RECORDS_MAX * (REGISTRY_LINE_MAX + 1) + 4096)

enum registry_state {
	REGISTRY_ACTIVE,
	REGISTRY_RESERVED,
};

struct registry_record {
	uint32_t uid;
	enum registry_state state;
	char name[USERS_NAME_MAX + 1];
	char agent_id[USERS_AGENT_ID_MAX + 1];
	size_t line; /* where it was read (0: added since) */
};

struct registry {
	struct registry_record *recs;
	size_t n, cap;
	bool changed;
};

/* Parse the registry's bytes; an empty buffer is an empty registry (no file yet).
 * -EINVAL with *ret_line (1-based) and *ret_why on a malformed, out-of-range or duplicate
 * record; -EPROTONOSUPPORT for an unknown header/version. */
int registry_parse(const char *data, size_t len, struct registry *ret, size_t *ret_line,
		   const char **ret_why);
int registry_format(const struct registry *reg, char **ret, size_t *ret_len);
void registry_done(struct registry *reg);

struct registry_record *registry_find_id(const struct registry *reg, const char *agent_id);
struct registry_record *registry_find_uid(const struct registry *reg, uint32_t uid);
struct registry_record *registry_find_name(const struct registry *reg, const char *name);
int registry_add(struct registry *reg, uint32_t uid, const char *name, const char *agent_id,
		 enum registry_state state);
void registry_delete(struct registry *reg, struct registry_record *rec);
/* Fast path: find and strictly check the one record of agent_id in the registry's bytes
 * without parsing the rest. 0, -ENOENT, or -EINVAL (bad header or bad record). */
int registry_scan(const char *data, size_t len, const char *agent_id, struct registry_record *ret);
const char *registry_state_name(enum registry_state s);
