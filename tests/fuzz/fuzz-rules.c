/* libFuzzer entry point for the rules parser (policy_rules_parse): arbitrary bytes in,
 * either rules that satisfy every invariant out, or an error with a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy_rules *r = NULL;
	struct policy_error err;

	if (policy_rules_parse((const char *)data, size, &r, &err) < 0) {
		if (!err.msg[0] && size <= POLICY_FILE_MAX)
			__builtin_trap(); /* every refusal says why */
		return 0;
	}
	for (size_t i = 0; i < r->n; i++) {
		const struct policy_rule *x = &r->rules[i];
		char norm[POLICY_PATH_MAX + 1];

		/* Paths come out normalised (normalising again is the identity) and sorted. */
		if (x->path[0] != '/' || strlen(x->path) != x->len ||
		    policy_path_normalise(x->path, x->len, norm, sizeof(norm)) != (int)x->len ||
		    strcmp(norm, x->path) || (i && strcmp(r->rules[i - 1].path, x->path) >= 0) ||
		    policy_rules_match(r, x->path) != x)
			__builtin_trap();
	}
	policy_rules_free(r);
	return 0;
}
