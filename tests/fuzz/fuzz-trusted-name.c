/* libFuzzer: trusted command names, and the generated wrapper and drop-in for any name the
 * validator accepts (they must never carry a byte outside the allowed set). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trusted/trusted.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[128];
	struct trusted_entry e = {
		.digest = "d5520751b4e6cd9dd8835fa8d4e5a75974c0cbb693f427a9a0a483ee7c4f9515"};
	char *text = NULL;

	if (size >= sizeof(name))
		return 0;
	memcpy(name, data, size);
	name[size] = '\0';
	if (!trusted_name_valid(name))
		return 0;
	if (strlen(name) > TRUSTED_NAME_MAX || strpbrk(name, ".~/ \n\\\"'$`*?"))
		abort();
	memcpy(e.name, name, strlen(name) + 1);
	if (trusted_dropin_render(&e, 1, &text) != 0)
		abort();
	free(text);
	if (trusted_wrapper_render("/usr/bin/sudo", name, &text) != 0)
		abort();
	free(text);
	return 0;
}
