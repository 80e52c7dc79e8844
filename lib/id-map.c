/* The user namespace's id maps (lib/id-map.h). */
#include "lib/id-map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/host-ns.h"
#include "lib/macro.h"
#include "lib/parse-num.h"

/* The kernel pads each field with spaces ("         0     200000      65536"). */
static const char *skip_blanks(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

int id_map_parse(const char *text, struct id_map *ret)
{
	const char *p = text;

	ret->n = 0;
	for (;;) {
		uint64_t v[3];

		p = skip_blanks(p);
		if (!*p)
			break;
		if (*p == '\n') {
			p++;
			continue;
		}
		for (size_t i = 0; i < 3; i++) {
			int r = parse_uint_strict(skip_blanks(p), UINT32_MAX, &p, &v[i]);
			if (r < 0)
				return -EINVAL;
		}
		p = skip_blanks(p);
		if (*p && *p != '\n')
			return -EINVAL;
		/* count >= 1, and neither range runs past 2^32 - 1 ids (the last, -1, is never
		 * mapped: the kernel's own map stops before it). */
		if (v[2] == 0 || v[0] + v[2] > (uint64_t)UINT32_MAX + 1 ||
		    v[1] + v[2] > (uint64_t)UINT32_MAX + 1)
			return -EINVAL;
		if (ret->n == ID_MAP_MAX_EXTENTS)
			return -E2BIG;
		ret->e[ret->n++] =
			(struct id_map_extent){(uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2]};
	}
	return 0;
}

bool id_map_is_initial(const struct id_map *m)
{
	return m->n == 1 && m->e[0].inner == 0 && m->e[0].outer == 0 && m->e[0].count == UINT32_MAX;
}

static const struct id_map_extent *extent_of(const struct id_map *m, uint32_t id)
{
	for (size_t i = 0; i < m->n; i++)
		if (id >= m->e[i].inner && (uint64_t)id - m->e[i].inner < m->e[i].count)
			return &m->e[i];
	return NULL;
}

bool id_map_outer(const struct id_map *m, uint32_t inner, uint32_t *ret)
{
	const struct id_map_extent *e = extent_of(m, inner);

	if (!e)
		return false;
	*ret = e->outer + (inner - e->inner);
	return true;
}

bool id_map_first_gap(const struct id_map *m, uint32_t first, uint32_t last, uint32_t *ret,
		      uint32_t *ret_last)
{
	uint64_t id = first;

	/* Hop from extent to extent: at most one step per extent, never one per id. */
	while (id <= last) {
		const struct id_map_extent *e = extent_of(m, (uint32_t)id);
		uint64_t gap_end = last;

		if (e) {
			id = (uint64_t)e->inner + e->count;
			continue;
		}
		/* Unmapped from id up to the start of the next extent above it. */
		for (size_t i = 0; i < m->n; i++)
			if (m->e[i].inner > id && m->e[i].inner - 1 < gap_end)
				gap_end = m->e[i].inner - 1;
		*ret = (uint32_t)id;
		*ret_last = (uint32_t)gap_end;
		return true;
	}
	return false;
}

bool id_map_covers(const struct id_map *m, uint32_t first, uint32_t last)
{
	uint32_t a, b;

	return !id_map_first_gap(m, first, last, &a, &b);
}

void id_map_format(const struct id_map *m, char *buf, size_t size)
{
	size_t len = 0;

	if (!size)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < m->n; i++) {
		int k = snprintf(buf + len, size - len, "%s%u %u %u", i ? "; " : "", m->e[i].inner,
				 m->e[i].outer, m->e[i].count);
		if (k < 0 || (size_t)k >= size - len) {
			/* Cut: end with "…" where it fits. */
			if (size >= 4)
				memcpy(buf + size - 4, "\xe2\x80\xa6", 4);
			return;
		}
		len += (size_t)k;
	}
}

/* 340 lines of three 10-digit fields padded to 11 columns each, and a NUL. Static, not
 * malloc'd: `pistisd users ensure` reads the maps once per process and mallocs nothing
 * else, and a first malloc in a fresh process (heap set up with brk, a group mapped, then
 * unmapped) cost more than the read on a VM where every fresh page faults expensively
 * (docs/users.md, "Process start and exit"). Only the pages the text fills are touched.
 * One caller at a time, as id_map_self's maps. */
static char self_text[16384 + 1];

static int read_self(bool gid, struct id_map *ret)
{
	_cleanup_close_ int fd = -1;
	ssize_t n;

	fd = open(gid ? "/proc/self/gid_map" : "/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	n = loop_read(fd, self_text, sizeof(self_text) - 1);
	if (n < 0)
		return (int)n;
	if ((size_t)n == sizeof(self_text) - 1)
		return -EFBIG;
	self_text[n] = '\0';
	if (strlen(self_text) != (size_t)n)
		return -EINVAL;
	return id_map_parse(self_text, ret);
}

/* Whether we are in the initial user namespace, asked once (pistis never changes its
 * namespace). Its maps are "0 0 4294967295" and it always allows setgroups(2)
 * (USERNS_INIT_FLAGS), so one stat of /proc/self/ns/user stands for reading uid_map,
 * gid_map and setgroups, which every `pistisd run` asked. The kernel gives that namespace
 * the fixed inode PROC_USER_INIT_INO and every other one a number from 0xF0000000 up
 * (proc_alloc_inum): a container's own user namespace never passes for it. Anything
 * else (another namespace, no /proc/self/ns/user) reads the files. */
static bool userns_initial(void)
{
	static int initial = -1;

	if (initial < 0)
		initial = host_ns_user_is_initial() == 1;
	return initial;
}

int id_map_setgroups_denied(void)
{
	_cleanup_close_ int fd = -1;
	char buf[16] = "";
	ssize_t n;

	if (userns_initial())
		return 0;
	fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : negative_errno();
	n = loop_read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return (int)n;
	return strncmp(buf, "deny", 4) == 0;
}

int id_map_self(bool gid, const struct id_map **ret)
{
	/* A map is written once and never changes (user_namespaces(7)), and pistis never
	 * changes its namespace: read once, kept for the process's life (the fast path of
	 * every `pistisd run` asks). Static, 8 KB: not on a small stack. */
	static struct id_map maps[2];
	static int have[2]; /* 1 read, else 0 or the -errno of the last try */
	int r;

	if (have[gid] != 1 && userns_initial()) {
		maps[gid].n = 1;
		maps[gid].e[0] = (struct id_map_extent){0, 0, UINT32_MAX};
		have[gid] = 1;
	}
	if (have[gid] != 1) {
		r = read_self(gid, &maps[gid]);
		have[gid] = r < 0 ? r : 1;
		if (r < 0)
			return r;
	}
	*ret = &maps[gid];
	return 0;
}

int id_map_check_needs(const struct id_map_need *needs, size_t n, bool need_setgroups, char *why,
		       size_t size)
{
	const struct id_map *maps[2];
	int r = 0;

	if (size)
		why[0] = '\0';
	for (int g = 0; g < 2 && r == 0; g++) {
		r = id_map_self(g, &maps[g]);
		if (r == -ENOENT) /* no user namespaces in this kernel: the ids are the host's */
			return 0;
		if (r < 0)
			snprintf(why, size, "cannot read /proc/self/%s (%s)",
				 g ? "gid_map" : "uid_map", strerror(-r));
	}
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r == 0; i++) {
		const struct id_map *m = maps[needs[i].gid];
		uint32_t a, b;
		char text[256];

		if (!id_map_first_gap(m, needs[i].first, needs[i].last, &a, &b))
			continue;
		id_map_format(m, text, sizeof(text));
		if (a == b)
			snprintf(why, size,
				 "%s %u (%s) is not mapped in this user namespace (%s: %s)",
				 needs[i].gid ? "gid" : "uid", a, needs[i].what,
				 needs[i].gid ? "gid_map" : "uid_map", text);
		else
			snprintf(why, size,
				 "%ss %u-%u (%s) are not mapped in this user namespace (%s: %s)",
				 needs[i].gid ? "gid" : "uid", a, b, needs[i].what,
				 needs[i].gid ? "gid_map" : "uid_map", text);
		r = -ERANGE;
	}
	if (r == 0 && need_setgroups) {
		r = id_map_setgroups_denied();
		if (r < 0)
			snprintf(why, size, "cannot read /proc/self/setgroups (%s)", strerror(-r));
		else if (r > 0) {
			snprintf(why, size,
				 "setgroups(2) is denied in this user namespace "
				 "(/proc/self/setgroups: "
				 "deny), so no command can be given the agent's groups instead of "
				 "root's");
			r = -EPERM;
		}
	}
	return r;
}
