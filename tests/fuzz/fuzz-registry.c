/* libFuzzer: the registry parser. What parses formats to a canonical text that parses
 * again to the same records (no duplicate uid, name or id ever survives a parse). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-users/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct registry a, b;
	size_t line, len, len2;
	const char *why;
	char *out = NULL, *out2 = NULL;

	if (registry_parse((const char *)data, size, &a, &line, &why) < 0)
		return 0;
	if (registry_format(&a, &out, &len) < 0)
		abort();
	if (registry_parse(out, len, &b, &line, &why) < 0)
		abort();
	if (b.n != a.n)
		abort();
	if (registry_format(&b, &out2, &len2) < 0 || len2 != len || memcmp(out, out2, len))
		abort();
	for (size_t i = 0; i < a.n; i++)
		if (registry_find_uid(&b, a.recs[i].uid) != &b.recs[i])
			abort();
	free(out);
	free(out2);
	registry_done(&a);
	registry_done(&b);
	return 0;
}
