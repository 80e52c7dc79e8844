/* libFuzzer: the passwd and shadow parsers. Whatever parses must format back to the very
 * same bytes (foreign lines are kept byte for byte), and an appended entry must parse. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-users/pwfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(enum pwfile_kind kind, const uint8_t *data, size_t size)
{
	struct pwfile f;
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
	if (pwfile_find_name(&f, "root") >= 0)
		(void)pwfile_find_id(&f, 0);
	if (pwfile_append(&f, kind == PWFILE_PASSWD ? "pi-agent-00000000:x:10100:10100::/:/bin/sh"
						    : "pi-agent-00000000:!:::::::") < 0)
		abort();
	if (pwfile_format(&f, &out, &len) < 0)
		abort();
	struct pwfile g;
	if (pwfile_parse(kind, out, len, &g, &line, &why) < 0)
		abort();
	if (pwfile_find_name(&g, "pi-agent-00000000") < 0)
		abort();
	pwfile_done(&g);
	free(out);
	pwfile_done(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(PWFILE_PASSWD, data, size);
	one(PWFILE_SHADOW, data, size);
	return 0;
}
