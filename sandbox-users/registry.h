#pragma once

/* The identity registry: which agent id owns which user name and uid, kept on the
 * persistent volume so a rebuilt container (fresh /etc/passwd) gets the same ids back.
 * Pure parse/format here; the file I/O is in users.c. Format (docs/users.md):
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

/* The id is id_len bytes at id, NOT NUL-terminated (it points into the bytes read, which
 * stay as they were so that they can be written back as they are): print it with
 * "%.*s". */
struct registry_record {
	const char *id; /* into the parsed buffer, or own */
	char *own;	/* records added since the parse own their id */
	uint32_t uid;
	uint32_t line; /* where it was read (0: added since) */
	uint16_t id_len;
	uint8_t name_len;
	uint8_t state;	      /* enum registry_state */
	uint8_t parsed_state; /* the state as read (records read from buf) */
	bool verified;	      /* the name was checked to be derived from the id */
	char name[USERS_NAME_MAX + 1];
};
_Static_assert(USERS_AGENT_ID_MAX <= UINT16_MAX && USERS_NAME_MAX <= UINT8_MAX, "lengths");

struct registry {
	struct registry_record *recs;
	size_t n, cap;
	char *buf;	 /* the bytes read, unchanged; owned */
	uint32_t *by_id; /* open-addressing hash sets: record index + 1, 0 empty */
	uint32_t *by_name;
	size_t slots; /* power of two, > 2 × n */
	bool changed;
	/* buf[0..len) is exactly what registry_format would write for its n_parsed records
	 * (no comment, no blank line), and no record was deleted
	 * since: while those records keep their parsed state, the new file is those bytes
	 * plus the added records (registry_pieces: those bytes as they are, then the added
	 * records formatted). */
	bool canonical;
	size_t len, n_parsed;
};

/* Parse the registry's bytes; an empty buffer is an empty registry (no file yet). Strict:
 * every line's syntax, no duplicate uid, name or id, and every name derived from its id.
 * -EINVAL with *ret_line (1-based) and *ret_why on a malformed, out-of-range or duplicate
 * record; -EPROTONOSUPPORT for an unknown header/version. */
int registry_parse(const char *data, size_t len, struct registry *ret, size_t *ret_line,
		   const char **ret_why);
/* The same over a buffer of len + 1 bytes from malloc or uarena_alloc that the registry
 * takes over (freed on failure too). With lazy, the SHA-256 derivation of a name is not checked here but by
 * registry_verify when a record is used; every other check stays. */
int registry_parse_owned(char *buf, size_t len, bool lazy, struct registry *ret, size_t *ret_line,
			 const char **ret_why);
/* The name derivation of rec (cached): 0, or -EINVAL with *ret_why. */
int registry_verify(struct registry_record *rec, const char **ret_why);
/* The file's bytes as one or two pieces in ret[2]: the bytes read as they are (when it is
 * canonical and only added to) and the records formatted in *ret_tail (from uarena_alloc,
 * uarena_free it; the pieces are valid until reg changes). */
struct iovec;
int registry_pieces(const struct registry *reg, struct iovec *ret, size_t *ret_n, char **ret_tail);
/* The same bytes in one malloc'd buffer. */
int registry_format(const struct registry *reg, char **ret, size_t *ret_len);
void registry_done(struct registry *reg);

struct registry_record *registry_find_id(const struct registry *reg, const char *agent_id);
struct registry_record *registry_find_uid(const struct registry *reg, uint32_t uid);
struct registry_record *registry_find_name(const struct registry *reg, const char *name);
int registry_add(struct registry *reg, uint32_t uid, const char *name, const char *agent_id,
		 enum registry_state state);
void registry_delete(struct registry *reg, struct registry_record *rec);
/* Fast path: find and strictly check the one record of agent_id in the registry's bytes
 * without parsing the rest. 0, -ENOENT, or -EINVAL (bad header or bad record). ret's
 * agent_id is the caller's agent_id. Agrees with registry_parse + registry_find_id on
 * every buffer the strict parser accepts (tests/fuzz/fuzz-users-scan.c). */
int registry_scan(const char *data, size_t len, const char *agent_id, struct registry_record *ret);
const char *registry_state_name(enum registry_state s);
