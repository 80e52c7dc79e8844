/* libFuzzer: lib/id-map.c, the user namespace's uid_map and gid_map. The kernel writes
 * those files, but whoever made the namespace chose their lines, and every decision of
 * `pistisd check`, `users ensure`, `run` and pistisd-entry about which ids exist rests on
 * this parse.
 *
 * For any NUL-terminated text:
 * - id_map_parse accepts exactly the texts a plain parser accepts (lines of three
 *   unsigned decimal numbers between blanks, empty lines allowed, count >= 1, neither
 *   range past 2^32, at most ID_MAP_MAX_EXTENTS lines), with the same extents;
 * - on a parsed map, id_map_outer, id_map_first_gap and id_map_covers agree with a
 *   brute-force look at every id of small windows around each extent's edges and the
 *   ranges pistis asks about (the first gap is unmapped, the id before it is mapped or the
 *   window's start, the run of unmapped ids ends where the next mapped id or the window's
 *   end is);
 * - id_map_format never writes past the size it is given and always NUL-terminates.
 * Nothing is read or written outside the buffers (ASan). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/id-map.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

/* The plain parser: 0, -EINVAL or -E2BIG as id_map_parse is documented to return. */
static int plain_parse(const char *text, struct id_map *m)
{
	m->n = 0;
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		const char *end = nl ? nl : p + strlen(p);
		uint64_t v[3];
		size_t k = 0;
		const char *s = p;

		for (;;) {
			while (s < end && blank(*s))
				s++;
			if (s == end)
				break;
			if (k == 3 || *s < '0' || *s > '9')
				return -EINVAL;
			uint64_t x = 0;
			while (s < end && *s >= '0' && *s <= '9') {
				x = x * 10 + (uint64_t)(*s - '0');
				if (x > UINT32_MAX)
					return -EINVAL;
				s++;
			}
			if (s < end && !blank(*s))
				return -EINVAL;
			v[k++] = x;
		}
		if (k != 0) {
			if (k != 3 || v[2] == 0 || v[0] + v[2] > (uint64_t)UINT32_MAX + 1 ||
			    v[1] + v[2] > (uint64_t)UINT32_MAX + 1)
				return -EINVAL;
			if (m->n == ID_MAP_MAX_EXTENTS)
				return -E2BIG;
			m->e[m->n++] = (struct id_map_extent){(uint32_t)v[0], (uint32_t)v[1],
							      (uint32_t)v[2]};
		}
		p = nl ? nl + 1 : end;
	}
	return 0;
}

/* The first extent holding id, the plain way (the kernel refuses overlapping extents, a
 * hand-made text may not: the first one wins, as for id_map_outer). */
static const struct id_map_extent *holder(const struct id_map *m, uint32_t id)
{
	for (size_t i = 0; i < m->n; i++)
		if (id >= m->e[i].inner && (uint64_t)id < (uint64_t)m->e[i].inner + m->e[i].count)
			return &m->e[i];
	return NULL;
}

/* Check the window [first, last] (last - first < 64) against brute force. */
static void check_window(const struct id_map *m, uint32_t first, uint32_t last)
{
	uint32_t gap, gap_last;
	bool found = id_map_first_gap(m, first, last, &gap, &gap_last);
	int64_t want = -1;

	for (uint64_t id = first; id <= last; id++) {
		const struct id_map_extent *e = holder(m, (uint32_t)id);
		uint32_t out = 0;
		bool mapped = id_map_outer(m, (uint32_t)id, &out);

		if (mapped != (e != NULL) || (e && out != e->outer + ((uint32_t)id - e->inner)))
			abort();
		if (!e && want < 0)
			want = (int64_t)id;
	}
	if (found != (want >= 0) || id_map_covers(m, first, last) == found)
		abort();
	if (!found)
		return;
	if (gap != (uint32_t)want || gap_last < gap || gap_last > last)
		abort();
	/* The run [gap, gap_last] is unmapped, as far as the window shows. */
	for (uint64_t id = gap; id <= gap_last && id <= (uint64_t)gap + 64; id++)
		if (holder(m, (uint32_t)id))
			abort();
	if (gap_last < last && !holder(m, gap_last + 1))
		abort();
}

static void check_around(const struct id_map *m, uint64_t at)
{
	uint32_t first = at > 32 ? (uint32_t)(at - 32) : 0;
	uint64_t last = (uint64_t)first + 63;

	check_window(m, first, last > UINT32_MAX ? UINT32_MAX : (uint32_t)last);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct id_map m, want;
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	int r = id_map_parse(text, &m), rw = plain_parse(text, &want);
	if (r != rw)
		abort();
	if (r == 0) {
		if (m.n != want.n || memcmp(m.e, want.e, m.n * sizeof(m.e[0])))
			abort();
		for (size_t i = 0; i < m.n && i < 16; i++) {
			check_around(&m, m.e[i].inner);
			check_around(&m, (uint64_t)m.e[i].inner + m.e[i].count);
		}
		check_around(&m, 0);
		check_around(&m, 10002);
		check_around(&m, 10100);
		check_around(&m, 59999);
		check_around(&m, UINT32_MAX);
		/* The ranges pistis asks about, whole: the same verdict as the windows'. */
		uint32_t a, b;
		if (id_map_first_gap(&m, 10100, 59999, &a, &b) &&
		    (a < 10100 || b > 59999 || b < a || holder(&m, a)))
			abort();
		for (size_t sz = 0; sz < 48; sz++) {
			char buf[48];
			memset(buf, 'X', sizeof(buf));
			id_map_format(&m, buf, sz);
			if (sz && !memchr(buf, '\0', sz))
				abort();
			for (size_t k = sz; k < sizeof(buf); k++)
				if (buf[k] != 'X')
					abort();
		}
	}
	free(text);
	return 0;
}
