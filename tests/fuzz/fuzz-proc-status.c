/* libFuzzer: the /proc/PID/status line finder and hex reader (lib/proc-status.c). The
 * agent sweep reads other processes' status files, whose Name line an agent chooses (the
 * kernel escapes its newlines; this does not rely on that), and the spawn child its own.
 *
 * For any NUL-terminated text and the keys the sweep and the child use: a field found
 * starts right after "KEY:\t" at the start of a line and within the buffer, and is the
 * first such line; proc_status_hex accepts exactly 1-16 lower-case hex digits ending the
 * line, with the value they spell. Nothing is read past the terminator (ASan). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proc-status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const keys[] = {"State", "Uid", "SigIgn", "SigCgt", "CapBnd", "Name", "U"};

/* The first line of buf starting with "KEY:\t", found the plain way. */
static const char *first_line(const char *buf, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = buf;;) {
		if (!strncmp(p, key, kl) && p[kl] == ':' && p[kl + 1] == '\t')
			return p + kl + 2;
		const char *nl = strchr(p, '\n');
		if (!nl)
			return NULL;
		p = nl + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const char *f = proc_status_field(buf, keys[k]);
		if (f != first_line(buf, keys[k]))
			abort();
		if (f && (f < buf || f > buf + strlen(buf)))
			abort();

		uint64_t v = 0, want = 0;
		int r = proc_status_hex(buf, keys[k], &v), digits = 0;
		bool ok = f != NULL;
		for (const char *p = f; ok && *p && *p != '\n'; p++, digits++) {
			int d = *p >= '0' && *p <= '9'	 ? *p - '0'
				: *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
							 : -1;
			if (d < 0 || digits == 16)
				ok = false;
			else
				want = want << 4 | (uint64_t)d;
		}
		ok = ok && digits > 0;
		if ((r == 0) != ok || (r == 0 && v != want))
			abort();
		if (!f && r != -ENOENT)
			abort();
	}
	free(buf);
	return 0;
}
