/* libFuzzer: the parser of `sudo -l -U` output (bytes from a program in the image) and the
 * verifier that reads its result. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trusted/trusted.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct trusted_entry e[] = {
		{.name = "hello",
		 .digest = "d5520751b4e6cd9dd8835fa8d4e5a75974c0cbb693f427a9a0a483ee7c4f9515"},
	};
	struct trusted_sudo_list *l = NULL;
	char why[256];

	if (trusted_sudo_list_parse((const char *)data, size, &l) == 0) {
		for (size_t i = 0; i < l->n; i++)
			if (strlen(l->cmds[i].command) >= sizeof(l->cmds[i].command) ||
			    strlen(l->cmds[i].runas) >= sizeof(l->cmds[i].runas))
				abort();
		if (strlen(l->defaults) >= sizeof(l->defaults))
			abort();
		(void)trusted_sudo_list_verify(l, e, 1, why, sizeof(why));
		free(l);
	}
	(void)trusted_sudoers_has_includedir((const char *)data, size);
	return 0;
}
