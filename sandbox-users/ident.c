/* Pure agent-id and user-name rules: see ident.h. */
#include "sandbox-users/ident.h"

#include <errno.h>
#include <string.h>

#include "lib/sha256.h"

const uint8_t ident_id_chars[256] = {
	['a' ... 'z'] = IDENT_ID_FIRST | IDENT_ID_CHAR,
	['A' ... 'Z'] = IDENT_ID_FIRST | IDENT_ID_CHAR,
	['0' ... '9'] = IDENT_ID_FIRST | IDENT_ID_CHAR,
	['.'] = IDENT_ID_CHAR,
	['_'] = IDENT_ID_CHAR,
	['@'] = IDENT_ID_CHAR,
	['+'] = IDENT_ID_CHAR,
	['='] = IDENT_ID_CHAR,
	['/'] = IDENT_ID_CHAR,
	['-'] = IDENT_ID_CHAR,
};

static bool id_char_ok(char c)
{
	return ident_id_chars[(unsigned char)c] & IDENT_ID_CHAR;
}

int ident_agent_id_check(const char *agent_id)
{
	size_t n = 0;

	if (!agent_id || !agent_id[0])
		return -EINVAL;
	/* The first byte is a letter or digit so an id never reads as an option ("-x"),
	 * a hidden or relative name (".", "..") or a NIS line ("+", "-"). */
	if (!((agent_id[0] >= 'a' && agent_id[0] <= 'z') ||
	      (agent_id[0] >= 'A' && agent_id[0] <= 'Z') ||
	      (agent_id[0] >= '0' && agent_id[0] <= '9')))
		return -EINVAL;
	for (; agent_id[n]; n++) {
		if (n >= USERS_AGENT_ID_MAX)
			return -ENAMETOOLONG;
		if (agent_id[n] == '\0' || !id_char_ok(agent_id[n]))
			return -EINVAL;
	}
	return 0;
}

int ident_name_derive(const char *agent_id, int hexlen, char *out)
{
	char hex[SHA256_HEX_SIZE];
	size_t plen = sizeof(USERS_AGENT_PREFIX) - 1;

	if (hexlen < IDENT_HEX_MIN || hexlen > IDENT_HEX_MAX)
		return -EINVAL;
	sha256_hex(agent_id, strlen(agent_id), hex);
	memcpy(out, USERS_AGENT_PREFIX, plen);
	memcpy(out + plen, hex, (size_t)hexlen);
	out[plen + (size_t)hexlen] = '\0';
	return 0;
}

bool ident_name_valid_n(const char *name, size_t n)
{
	const size_t plen = sizeof(USERS_AGENT_PREFIX) - 1;
	unsigned bad = 0;

	if (n < plen + IDENT_HEX_MIN || n > plen + IDENT_HEX_MAX)
		return false;
	if (memcmp(name, USERS_AGENT_PREFIX, plen))
		return false;
	/* Without a branch per digit: hex digits are random, a branch on "digit or letter"
	 * would be mispredicted half of the time. */
	for (size_t i = plen; i < n; i++) {
		unsigned c = (unsigned char)name[i];
		bad |= (c - '0' > 9u) & (c - 'a' > 5u);
	}
	return !bad;
}

bool ident_name_valid(const char *name)
{
	return ident_name_valid_n(name, strlen(name));
}

bool ident_name_matches(const char *name, const char *agent_id)
{
	char want[USERS_NAME_MAX + 1];
	int hexlen;

	if (!ident_name_valid(name))
		return false;
	hexlen = (int)(strlen(name) - (sizeof(USERS_AGENT_PREFIX) - 1));
	if (ident_name_derive(agent_id, hexlen, want) < 0)
		return false;
	return strcmp(want, name) == 0;
}

int ident_name_pick(const char *agent_id, bool (*taken)(const char *name, void *ctx), void *ctx,
		    char *out)
{
	for (int len = IDENT_HEX_MIN; len <= IDENT_HEX_MAX; len++) {
		int r = ident_name_derive(agent_id, len, out);
		if (r < 0)
			return r;
		if (!taken(out, ctx))
			return 0;
	}
	out[0] = '\0';
	return -EEXIST;
}
