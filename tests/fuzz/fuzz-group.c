/* libFuzzer: the group and gshadow parsers and the member-list editor. A parsed file
 * formats back to its own bytes; adding then removing a member leaves the member list
 * without it, and the result still parses. With the lookup tables (pwfile_index), every
 * find and member test answers as the walk does, and added members give the same bytes. */
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

static void indexed(enum pwfile_kind kind, const uint8_t *data, size_t size)
{
	static const char *const add[] = {"pi-agent-0", "pi-agent-1", "root"};
	struct pwfile a, b;
	size_t line, la, lb;
	const char *why;
	char *oa = NULL, *ob = NULL, name[64];

	if (pwfile_parse(kind, (const char *)data, size, &a, &line, &why) < 0)
		return;
	if (pwfile_parse(kind, (const char *)data, size, &b, &line, &why) < 0 ||
	    pwfile_index(&b) < 0)
		abort();
	for (size_t i = 0; i < a.n_lines && i < 64; i++) {
		const struct pwfile_line *l = &a.lines[i];
		if (!l->entry || l->name_len >= sizeof(name))
			continue;
		memcpy(name, l->repl ? l->repl : a.buf + l->off, l->name_len);
		name[l->name_len] = '\0';
		if (pwfile_find_name(&a, name) != pwfile_find_name(&b, name) ||
		    pwfile_find_name_from(&a, name, i + 1) !=
			    pwfile_find_name_from(&b, name, i + 1) ||
		    pwfile_find_id(&a, l->id) != pwfile_find_id(&b, l->id) ||
		    pwfile_other_with_id(&a, l->id, (ssize_t)i, false) !=
			    pwfile_other_with_id(&b, l->id, (ssize_t)i, false) ||
		    pwfile_member_has(&a, i, name) != pwfile_member_has(&b, i, name))
			abort();
		for (size_t k = 0; k < sizeof(add) / sizeof(add[0]); k++)
			if (pwfile_member_add(&a, i, add[k]) != pwfile_member_add(&b, i, add[k]) ||
			    pwfile_member_has(&a, i, add[k]) != pwfile_member_has(&b, i, add[k]))
				abort();
	}
	if (pwfile_format(&a, &oa, &la) < 0 || pwfile_format(&b, &ob, &lb) < 0)
		abort();
	if (la != lb || memcmp(oa, ob, la))
		abort();
	free(oa);
	free(ob);
	pwfile_done(&a);
	pwfile_done(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(PWFILE_GROUP, data, size);
	one(PWFILE_GSHADOW, data, size);
	indexed(PWFILE_GROUP, data, size);
	indexed(PWFILE_GSHADOW, data, size);
	return 0;
}
