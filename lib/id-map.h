#pragma once

/* The user namespace pistis runs in: which of its uids and gids the kernel maps to the
 * host's (/proc/self/uid_map, gid_map) and whether setgroups(2) is allowed
 * (/proc/self/setgroups). Rootless Docker and Podman, Docker's --userns-remap, Kubernetes
 * hostUsers: false and unprivileged LXC run the container's "root" as uid 0 of a namespace
 * that maps only a range of ids, often 65,536 of them, sometimes fewer. An id the map does
 * not cover cannot be set (setresuid, setresgid: EINVAL) nor given to a file (fchown:
 * EINVAL), and a file owned by one shows as the overflow id 65534, out of reach of every
 * capability of the namespace's root (user_namespaces(7)). The pure part (parse, cover)
 * is unit-tested; id_map_self and id_map_setgroups_denied read /proc. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ID_MAP_MAX_EXTENTS 340 /* the kernel's limit since Linux 4.15 */

struct id_map_extent {
	uint32_t inner, outer, count;
};

struct id_map {
	size_t n;
	struct id_map_extent e[ID_MAP_MAX_EXTENTS];
};

/* Parse the text of a uid_map or gid_map: lines of three unsigned numbers (inner, outer,
 * count), count >= 1, no range past 2^32. -EINVAL on anything else, -E2BIG over
 * ID_MAP_MAX_EXTENTS lines. */
int id_map_parse(const char *text, struct id_map *ret);

/* The initial user namespace's map, "0 0 4294967295": ids are the host's. */
bool id_map_is_initial(const struct id_map *m);

/* Whether every id from first to last (inclusive) is mapped. */
bool id_map_covers(const struct id_map *m, uint32_t first, uint32_t last);

/* The first id from first to last that is not mapped, in *ret, and the last of the run of
 * unmapped ids that starts there (up to last) in *ret_last; false when all are mapped. */
bool id_map_first_gap(const struct id_map *m, uint32_t first, uint32_t last, uint32_t *ret,
		      uint32_t *ret_last);

/* The host id that inner id maps to; false when it is not mapped. */
bool id_map_outer(const struct id_map *m, uint32_t inner, uint32_t *ret);

/* "0 200000 65536; 65536 300000 1" (at most size - 1 bytes, "…" where cut). */
void id_map_format(const struct id_map *m, char *buf, size_t size);

/* /proc/self/uid_map (gid false) or gid_map (gid true), parsed, read once and kept for the
 * process's life (a namespace's map never changes); in the initial user namespace its
 * fixed map without a read. -errno when it cannot be read (a
 * kernel without user namespaces has no such file: ENOENT). */
int id_map_self(bool gid, const struct id_map **ret);

/* 1 when /proc/self/setgroups says "deny" (setgroups(2) fails with EPERM in this user
 * namespace, whatever the capabilities), 0 when "allow" or absent (kernels before 3.19) or
 * in the initial user namespace (not read),
 * -errno when it cannot be read. */
int id_map_setgroups_denied(void);

/* An id range pistis needs mapped: uids (gid false) or gids from first to last, named by
 * what ("agents", "pi-tools"). */
struct id_map_need {
	const char *what;
	uint32_t first, last;
	bool gid;
};

/* Whether this process's user namespace maps every range of needs, and, with
 * need_setgroups, allows setgroups(2). 0 when it does (or no user namespace exists: a
 * kernel without them), else why says in one sentence what is not mapped (the first such
 * range, e.g. "uids 10100-59999 (agents) are not mapped in this user namespace (uid_map:
 * 0 200000 10000)") and the result is -ERANGE, or -EPERM for setgroups denied; -errno with
 * why saying so when the maps cannot be read. */
int id_map_check_needs(const struct id_map_need *needs, size_t n, bool need_setgroups, char *why,
		       size_t size);
