/* libFuzzer: lib/mountinfo.c on text another process controls the shape of. The sweeps of
 * pistisd read /proc/PID/mountinfo of processes that may live in another container (a
 * shared PID namespace): its mount points are names that container's programs chose, with
 * the kernel's escapes. pistisd-entry and `pistisd check` parse their own.
 *
 * The input is split at its first NUL byte into OURS and THEIRS (the first half alone
 * when there is none). Checked against plain re-implementations:
 * - mountinfo_ids(OURS) returns, sorted, exactly the ids of the lines that start with 1-n
 *   decimal digits worth at most 2^32 - 1 followed by a space;
 * - mountinfo_ids_disjoint(THEIRS, ids) is true exactly when THEIRS has such a line and
 *   none of its ids is one of OURS;
 * - mountinfo_parse_line on every line of THEIRS: on success each field points into the
 *   line and is NUL-terminated there, and mountinfo_opt finds only options
 *   that are whole comma-separated items of the field, with a value inside it.
 * Nothing is read or written outside the buffers (ASan). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/mountinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The id of the line at p, the plain way: false when it has none. */
static bool line_id(const char *p, const char *end, unsigned *ret)
{
	uint64_t v = 0;
	const char *s = p;

	while (s < end && *s >= '0' && *s <= '9') {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > 0xffffffffu)
			return false;
		s++;
	}
	if (s == p || s == end || *s != ' ')
		return false;
	*ret = (unsigned)v;
	return true;
}

/* Every line's id of the NUL-terminated text, in order of the lines. */
static size_t plain_ids(const char *text, unsigned *out, size_t max)
{
	size_t n = 0;

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		const char *end = nl ? nl : p + strlen(p);
		unsigned id;

		if (line_id(p, end, &id) && n < max)
			out[n++] = id;
		p = nl ? nl + 1 : end;
	}
	return n;
}

static int cmp_u(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

static bool field_in(const char *f, const char *line, size_t len)
{
	return f && f >= line && f < line + len && strlen(f) < (size_t)(line + len - f);
}

/* Whether NAME is one of the comma-separated items of OPTS (alone, or before '='), and
 * where its value starts. */
static bool plain_opt(const char *opts, const char *name, const char **value)
{
	size_t nl = strlen(name);

	for (const char *p = opts;;) {
		const char *c = strchr(p, ',');
		size_t il = c ? (size_t)(c - p) : strlen(p);

		if (il >= nl && !strncmp(p, name, nl) && (il == nl || p[nl] == '=')) {
			*value = il == nl ? NULL : p + nl + 1;
			return true;
		}
		if (!c)
			return false;
		p = c + 1;
	}
}

static void check_opts(const char *opts)
{
	static const char *const names[] = {"rw",     "ro",  "nosuid", "hidepid",
					    "subset", "gid", "mode"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = NULL, *want = NULL;
		size_t vl = 0;
		bool found = mountinfo_opt(opts, names[i], &v, &vl);

		if (found != plain_opt(opts, names[i], &want))
			abort();
		if (!found)
			continue;
		if (!v || v < opts || v + vl > opts + strlen(opts))
			abort();
		if (want && (v != want || memchr(v, ',', vl)))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *cut = memchr(data, 0, size);
	size_t n_ours = cut ? (size_t)(cut - data) : size / 2;
	char *ours = malloc(n_ours + 1), *theirs = malloc(size - n_ours + 1);
	unsigned *ids = NULL, *want = NULL, *want_theirs = NULL;
	size_t n_ids = 0;

	if (!ours || !theirs)
		goto out;
	memcpy(ours, data, n_ours);
	ours[n_ours] = '\0';
	size_t tl = cut ? size - n_ours - 1 : size - n_ours;
	memcpy(theirs, data + size - tl, tl);
	theirs[tl] = '\0';

	if (mountinfo_ids(ours, &ids, &n_ids) < 0)
		goto out;
	want = calloc(strlen(ours) / 2 + 1, sizeof(*want));
	want_theirs = calloc(strlen(theirs) / 2 + 1, sizeof(*want_theirs));
	if (!want || !want_theirs)
		goto out;
	size_t n_want = plain_ids(ours, want, strlen(ours) / 2 + 1);
	qsort(want, n_want, sizeof(*want), cmp_u);
	if (n_want != n_ids || (n_ids && memcmp(ids, want, n_ids * sizeof(*ids))))
		abort();
	for (size_t i = 1; i < n_ids; i++)
		if (ids[i - 1] > ids[i])
			abort();

	size_t n_theirs = plain_ids(theirs, want_theirs, strlen(theirs) / 2 + 1);
	bool disjoint = n_theirs > 0;
	for (size_t i = 0; i < n_theirs && disjoint; i++)
		for (size_t j = 0; j < n_ids; j++)
			if (want_theirs[i] == ids[j])
				disjoint = false;
	if (mountinfo_ids_disjoint(theirs, ids, n_ids) != disjoint)
		abort();

	for (char *p = theirs; *p;) {
		char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *line = malloc(len + 1);
		struct mountinfo_entry e;

		if (!line)
			break;
		memcpy(line, p, len);
		line[len] = '\0';
		if (mountinfo_parse_line(line, &e) == 0) {
			if (!field_in(e.root, line, len + 1) ||
			    !field_in(e.mount_point, line, len + 1) ||
			    !field_in(e.mount_opts, line, len + 1) ||
			    !field_in(e.fstype, line, len + 1) ||
			    !field_in(e.source, line, len + 1) ||
			    !field_in(e.super_opts, line, len + 1))
				abort();
			check_opts(e.mount_opts);
			check_opts(e.super_opts);
			(void)mountinfo_path_under("/data/x", e.mount_point);
		}
		free(line);
		p = nl ? nl + 1 : p + len;
	}
out:
	free(ids);
	free(want);
	free(want_theirs);
	free(ours);
	free(theirs);
	return 0;
}
