#pragma once

/* Pure rules for agent ids and user names (docs/users.md, "Naming").
 *
 * Agent id: 1..USERS_AGENT_ID_MAX bytes of [A-Za-z0-9._@+=/-], starting with a letter or
 * digit. Nothing else can reach passwd, the registry or a log line: no ':', ',', space,
 * newline or other control byte, no non-ASCII.
 *
 * User name: "pi-agent-" + the first N lowercase hex digits of SHA-256(agent id), N = 8
 * normally. Collision rule: when that name is already taken by another agent (registry) or
 * by any user or group in /etc, N grows one digit at a time up to IDENT_HEX_MAX; the name
 * an agent got is recorded in the registry and never re-derived, so it stays stable. */

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "sandbox-users/users.h"

#define IDENT_HEX_MIN 8
#define IDENT_HEX_MAX (USERS_NAME_MAX - (int)(sizeof(USERS_AGENT_PREFIX) - 1)) /* 23 */

/* The agent id's alphabet, one lookup a byte: IDENT_ID_CHAR for [A-Za-z0-9._@+=/-],
 * IDENT_ID_FIRST for what may start an id ([A-Za-z0-9]). */
enum {
	IDENT_ID_CHAR = 1 << 0,
	IDENT_ID_FIRST = 1 << 1,
};
extern const uint8_t ident_id_chars[256];

/* 0, or -EINVAL (bad byte or empty) / -ENAMETOOLONG. */
int ident_agent_id_check(const char *agent_id);

/* "pi-agent-" + hexlen hex digits of SHA-256(agent_id). out: USERS_NAME_MAX + 1 bytes. */
int ident_name_derive(const char *agent_id, int hexlen, char *out);

/* name has the shape "pi-agent-" + 8..23 lowercase hex digits. */
bool ident_name_valid(const char *name);
/* The same for the n bytes at name (no NUL needed). */
bool ident_name_valid_n(const char *name, size_t n);

/* name is what ident_name_derive(agent_id, its own length) gives. */
bool ident_name_matches(const char *name, const char *agent_id);

/* The collision rule: the first derived name for which taken(name, ctx) is false.
 * -EEXIST when every length up to IDENT_HEX_MAX is taken. */
int ident_name_pick(const char *agent_id, bool (*taken)(const char *name, void *ctx), void *ctx,
		    char *out);
