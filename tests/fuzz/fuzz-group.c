/* libFuzzer: the group and gshadow parsers and the member-list editor. A parsed file
 * formats back to its own bytes; adding then removing a member leaves the member list
 * without it, and the result still parses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-users/pwfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(enum pwfile_kind kind, const uint8_t *data, size_t size)
{
	struct pwfile f, g;
	size_t line, len;
	const char *why;
	char *out = NULL;

	if (pwfile_parse(kind, (const char *)data, size, &f, &line, &why) < 0)
		return;
	if (pwfile_format(&f, &out, &len) < 0)
		abort();
	if (len != size || memcmp(out, data, size))
		abort();
	free(out);
	for (size_t i = 0; i < f.n_lines && i < 64; i++) {
		if (!f.lines[i].entry)
			continue;
		if (pwfile_member_add(&f, i, "pi-agent-0") < 0)
			continue; /* a line at the length limit */
		if (!pwfile_member_has(&f, i, "pi-agent-0"))
			abort();
		if (pwfile_member_remove(&f, i, "pi-agent-0") < 0)
			abort();
		if (pwfile_member_has(&f, i, "pi-agent-0"))
			abort();
	}
	if (pwfile_format(&f, &out, &len) < 0)
		abort();
	if (pwfile_parse(kind, out, len, &g, &line, &why) < 0)
		abort();
	pwfile_done(&g);
	free(out);
	pwfile_done(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(PWFILE_GROUP, data, size);
	one(PWFILE_GSHADOW, data, size);
	return 0;
}
