/* sandbox-users: the pure rules (names, collision rule, uid allocation, parsers, edits)
 * without root, and the file-system side on throwaway roots when run as root. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/fd-util.h"
#include "lib/macro.h"
#include "lib/sha256.h"
#include "lib/tap.h"
#include "sandbox-users/arena.h"
#include "sandbox-users/db.h"
#include "sandbox-users/fs.h"
#include "sandbox-users/ident.h"
#include "sandbox-users/pwfile.h"
#include "sandbox-users/registry.h"
#include "sandbox-users/scan.h"
#include "sandbox-users/users-internal.h"
#include "sandbox-users/users.h"

/* Two ids whose SHA-256 share the first 8 hex digits (9159e502), found by search. */
#define COLLIDE_A "agent-54132"
#define COLLIDE_B "agent-101988"

static const char PASSWD[] = "root:x:0:0:root:/root:/bin/bash\n"
			     "# a comment\n"
			     "\n"
			     "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\r\n"
			     "+@netgroup::::::\n"
			     "app:x:10100:10100::/home/app:/bin/sh\n"
			     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin";
static const char GROUP[] = "root:x:0:\n"
			    "daemon:x:1:\n"
			    "appgrp:x:10101:app\n"
			    "nogroup:x:65534:\n";
static const char SHADOW[] = "root:*:19000:0:99999:7:::\n";
static const char GSHADOW[] = "root:*::\n";

static void db_load(struct users_db *db, const char *pw, const char *gr, const char *sh,
		    const char *gs)
{
	const char *src[] = {pw, gr, sh, gs};

	memset(db, 0, sizeof(*db));
	for (int k = 0; k < _PWFILE_KIND_MAX; k++) {
		size_t line;
		const char *why;
		db->present[k] = src[k] != NULL;
		if (pwfile_parse(k, src[k] ? src[k] : "", src[k] ? strlen(src[k]) : 0, &db->f[k],
				 &line, &why) < 0)
			abort();
	}
	db->nologin = "/usr/sbin/nologin";
}

static char *db_text(struct users_db *db, int k)
{
	char *out = NULL;
	size_t len;

	if (pwfile_format(&db->f[k], &out, &len) < 0)
		abort();
	return out;
}

TEST(agent_id_validation)
{
	char big[USERS_AGENT_ID_MAX + 2];

	EXPECT_EQ(ident_agent_id_check("a"), 0);
	EXPECT_EQ(ident_agent_id_check("Org/agent-1.x_y@z+w=v"), 0);
	EXPECT_EQ(ident_agent_id_check(""), -EINVAL);
	EXPECT_EQ(ident_agent_id_check("-rf"), -EINVAL);
	EXPECT_EQ(ident_agent_id_check(".hidden"), -EINVAL);
	EXPECT_EQ(ident_agent_id_check("+nis"), -EINVAL);
	EXPECT_EQ(ident_agent_id_check("a:b"), -EINVAL);
	EXPECT_EQ(ident_agent_id_check("a\nb"), -EINVAL);
	EXPECT_EQ(ident_agent_id_check("a,b"), -EINVAL);
	EXPECT_EQ(ident_agent_id_check("a b"), -EINVAL);
	EXPECT_EQ(ident_agent_id_check("a\\b"), -EINVAL);
	EXPECT_EQ(ident_agent_id_check("caf\xc3\xa9"), -EINVAL);
	memset(big, 'a', sizeof(big));
	big[USERS_AGENT_ID_MAX] = '\0';
	EXPECT_EQ(ident_agent_id_check(big), 0);
	big[USERS_AGENT_ID_MAX] = 'a';
	big[USERS_AGENT_ID_MAX + 1] = '\0';
	EXPECT_EQ(ident_agent_id_check(big), -ENAMETOOLONG);
}

/* The per-call arena (arena.h): blocks are usable, zeroed where calloc says so even after
 * a realloc moved or grew the last block, grown in place when last, and any pointer (an
 * arena block or a malloc'd one) can be freed. Without an arena (ASan builds, or none
 * begun) the same calls are malloc's. */
TEST(arena_blocks_behave_as_malloc)
{
	for (int round = 0; round < 2; round++) {
		if (round == 1)
			uarena_begin();
		char *a = uarena_alloc(100), *m = malloc(10);
		ASSERT_NOT_NULL(a);
		memset(a, 'a', 100);
		/* The last block grows in place (where there is an arena) and keeps its bytes. */
		char *b = uarena_realloc(a, 9000);
		ASSERT_NOT_NULL(b);
		EXPECT_EQ(b[0], 'a');
		EXPECT_EQ(b[99], 'a');
		memset(b, 'b', 9000);
		/* Shrinking leaves the block where it is; a later calloc is zero all the same. */
		b = uarena_realloc(b, 10);
		uint8_t *z = uarena_calloc(5000, 2);
		ASSERT_NOT_NULL(z);
		for (size_t i = 0; i < 10000; i++)
			ASSERT_EQ(z[i], 0);
		memset(z, 0xff, 10000);
		/* A block that is not the last moves, its bytes with it. */
		char *c = uarena_realloc(b, 20000);
		ASSERT_NOT_NULL(c);
		EXPECT_EQ(c[9], 'b');
		uint32_t *w = uarena_calloc(4096, sizeof(*w));
		ASSERT_NOT_NULL(w);
		for (size_t i = 0; i < 4096; i++)
			ASSERT_EQ(w[i], 0u);
		EXPECT_NULL(uarena_calloc(SIZE_MAX / 2, 4));
		EXPECT_NULL(uarena_reallocarray(NULL, SIZE_MAX / 2, 4));
		/* Too big for the arena: malloc's, freed as such. */
		char *big = uarena_alloc((size_t)80 << 20);
		ASSERT_NOT_NULL(big);
		EXPECT_FALSE(uarena_owns(big));
		EXPECT_FALSE(uarena_owns(m));
		big[0] = big[(80 << 20) - 1] = 1;
		uarena_free(big);
		uarena_free(m);
		uarena_free(c);
		uarena_free(z);
		uarena_free(w);
		uarena_free(NULL);
		if (round == 1)
			uarena_end(false);
	}
}

/* The main thread keeps its arena between calls (arena.c): the next call gets the same
 * mapping back, every byte the last call handed out zero again (calloc, and no copy of
 * /etc/shadow left behind), more than ARENA_RETAIN of it given back; a child forked in
 * between (which has no copy: MADV_DONTFORK) and another thread get their own. */
static void *arena_in_thread(void *arg)
{
	(void)arg;
	uarena_begin();
	char *p = uarena_calloc(3, 4096);
	bool ok = p && p[0] == 0 && p[3 * 4096 - 1] == 0;
	if (ok)
		memset(p, 1, 3 * 4096);
	uarena_end(false);
	return ok ? p : NULL;
}

TEST(arena_kept_between_calls_zeroed_and_not_forked)
{
	size_t big = (size_t)6 << 20;

	uarena_begin();
	char *s1 = uarena_alloc(100);
	ASSERT_NOT_NULL(s1);
	memset(s1, 0x5a, 100);
	/* A block that grows out of the small zone moves to the huge one, its bytes with it;
	 * what comes after it is zero. */
	char *r = uarena_alloc(20000);
	ASSERT_NOT_NULL(r);
	bool arena = uarena_owns(r);
	memset(r, 'r', 20000);
	char *r2 = uarena_realloc(r, 300000);
	ASSERT_NOT_NULL(r2);
	if (arena)
		EXPECT_TRUE(r2 - s1 >= (2 << 20) - 4096); /* in the huge zone */
	EXPECT_EQ(r2[0], 'r');
	EXPECT_EQ(r2[19999], 'r');
	char *a = uarena_alloc(big);
	ASSERT_NOT_NULL(a);
	memset(a, 0x5a, big);
	uint8_t *z = uarena_calloc(1000, 1);
	ASSERT_NOT_NULL(z);
	for (size_t i = 0; i < 1000; i++)
		ASSERT_EQ(z[i], 0);
	if (!arena) { /* malloc's blocks (ASan builds): the arena does not take them back */
		free(s1);
		free(r2);
		free(a);
		free(z);
	}
	uarena_end(false);
	if (arena) {
		/* Still mapped and populated up to 4 MiB of the big block, zero already; the
		 * rest given back. */
		unsigned char in_core[2] = {0, 0};
		char *page = (char *)((uintptr_t)a & ~(uintptr_t)4095);
		ASSERT_EQ(mincore(page, 4096, &in_core[0]), 0);
		ASSERT_EQ(mincore(page + ((size_t)5 << 20), 4096, &in_core[1]), 0);
		EXPECT_EQ(in_core[0] & 1, 1);
		EXPECT_EQ(in_core[1] & 1, 0);
		for (size_t i = 0; i < ((size_t)4 << 20) - 4096; i += 512)
			ASSERT_EQ(a[i], 0);
		for (size_t i = 0; i < 100; i++)
			ASSERT_EQ(s1[i], 0);
		for (size_t i = 0; i < 20000; i++)
			ASSERT_EQ(r[i], 0);
	}

	uarena_begin();
	uint8_t *s2 = uarena_calloc(100, 1);
	uint8_t *b = uarena_calloc(big, 1);
	ASSERT_NOT_NULL(s2);
	ASSERT_NOT_NULL(b);
	if (arena) { /* the same mapping, the same places: each zone's first block */
		EXPECT_TRUE((void *)s2 == (void *)s1);
		EXPECT_TRUE((void *)b == (void *)r2);
	}
	for (size_t i = 0; i < 100; i++)
		ASSERT_EQ(s2[i], 0);
	for (size_t i = 0; i < big; i += 512)
		ASSERT_EQ(b[i], 0);
	ASSERT_EQ(b[big - 1], 0);
	memset(b, 0xa5, 4096);
	memset(s2, 0xa5, 100);
	if (!arena) {
		free(s2);
		free(b);
	}
	uarena_end(false);

	pid_t pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		uarena_begin();
		uint8_t *c = uarena_calloc(8192, 1);
		int bad = !c || c[0] || c[8191];
		if (c)
			memset(c, 1, 8192);
		uarena_end(false);
		_exit(bad);
	}
	int st;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	pthread_t t;
	void *res;
	ASSERT_EQ(pthread_create(&t, NULL, arena_in_thread, NULL), 0);
	ASSERT_EQ(pthread_join(t, &res), 0);
	EXPECT_NOT_NULL(res);
	if (arena)
		EXPECT_TRUE(res != (void *)s2); /* its own mapping, not the kept one */
	else
		free(res);

	uarena_begin();
	uint8_t *d = uarena_calloc(4096, 1);
	ASSERT_NOT_NULL(d);
	if (arena)
		EXPECT_TRUE(d == s2);
	for (size_t i = 0; i < 4096; i++)
		ASSERT_EQ(d[i], 0);
	if (!arena)
		free(d);
	uarena_end(false);
}

/* The huge zone is MADV_HUGEPAGE only while /proc/buddyinfo shows a free block of order
 * 9 or more outside ZONE_DMA (a THP fault that finds none reclaims and compacts first). */
TEST(arena_huge_pages_only_when_one_is_free)
{
	static const struct {
		const char *text;
		bool want;
	} cases[] = {
		{"Node 0, zone      DMA      0      0      0      0      0      0      0      0    "
		 "  1      1      3 \n"
		 "Node 0, zone    DMA32      4      1      2      2      2      2      1      4    "
		 "  4      0      0 \n"
		 "Node 0, zone   Normal    876    230      2    753    777    358    148    159    "
		 " 85      0      0 \n",
		 false},
		{"Node 0, zone   Normal    876    230      2    753    777    358    148    159    "
		 " 85     43      0 \n",
		 true},
		{"Node 0, zone    DMA32      0      0      0      0      0      0      0      0    "
		 "  0      0    752\n",
		 true},
		{"Node 1, zone   Normal      5      0      0      0      0      0      0      0    "
		 "  3      0      0\n"
		 "Node 0, zone   Normal      0      0      0      0      0      0      0      0    "
		 "  0      2      0\n",
		 true},
		{"Node 0, zone   Normal      0      0      0      0      0      0      0      0    "
		 "  7\n",
		 false},
		{"", false},
		{"garbage without the word\n", false},
		{"Node 0, zone Normal 1 2 x 9 9 9 9 9 9 9 9\n",
		 false}, /* stops at what is not a count */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		EXPECT_EQ(uarena_buddyinfo_has_huge(cases[i].text, strlen(cases[i].text)),
			  cases[i].want);
}

TEST(name_is_prefix_plus_8_hex_of_sha256)
{
	char name[USERS_NAME_MAX + 1], hex[SHA256_HEX_SIZE], want[32];

	sha256_hex("agent-1", 7, hex);
	snprintf(want, sizeof(want), "pi-agent-%.8s", hex);
	ASSERT_EQ(ident_name_derive("agent-1", 8, name), 0);
	ASSERT_STREQ(name, want);
	EXPECT_TRUE(ident_name_valid(name));
	EXPECT_TRUE(ident_name_matches(name, "agent-1"));
	EXPECT_FALSE(ident_name_matches(name, "agent-2"));
	EXPECT_FALSE(ident_name_valid("pi-agent-1234567"));
	EXPECT_FALSE(ident_name_valid("pi-agent-ABCDEF12"));
	EXPECT_FALSE(ident_name_valid("pi-agent-0123456789abcdef0123456789"));
	ASSERT_EQ(ident_name_derive(COLLIDE_A, 8, name), 0);
	ASSERT_STREQ(name, "pi-agent-9159e502");
	ASSERT_EQ(ident_name_derive(COLLIDE_B, 8, name), 0);
	ASSERT_STREQ(name, "pi-agent-9159e502");
}

TEST(collision_extends_the_suffix_and_sticks)
{
	struct users_db db;
	struct users_identity a, b, a2, b2;
	char *reg = NULL;
	size_t len, line;
	const char *why;

	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	ASSERT_EQ(users_db_ensure(&db, COLLIDE_A, (uid_t)-1, &a), 0);
	ASSERT_EQ(users_db_ensure(&db, COLLIDE_B, (uid_t)-1, &b), 0);
	EXPECT_STREQ(a.name, "pi-agent-9159e502");
	EXPECT_STREQ(b.name, "pi-agent-9159e502e");
	EXPECT_NE(a.uid, b.uid);

	/* The registry, not the order of arrival, decides after a rebuild. */
	ASSERT_EQ(registry_format(&db.reg, &reg, &len), 0);
	users_db_done(&db);
	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	ASSERT_EQ(registry_parse(reg, len, &db.reg, &line, &why), 0);
	ASSERT_EQ(users_db_ensure(&db, COLLIDE_B, (uid_t)-1, &b2), 0);
	ASSERT_EQ(users_db_ensure(&db, COLLIDE_A, (uid_t)-1, &a2), 0);
	EXPECT_STREQ(a2.name, a.name);
	EXPECT_STREQ(b2.name, b.name);
	EXPECT_EQ(a2.uid, a.uid);
	EXPECT_EQ(b2.uid, b.uid);
	free(reg);
	users_db_done(&db);

	/* A foreign user holding the 8-digit name pushes the agent to 9 digits too. */
	db_load(&db, "pi-agent-9159e502:x:5000:5000::/:/bin/sh\n", "", NULL, NULL);
	ASSERT_EQ(users_db_ensure(&db, COLLIDE_A, (uid_t)-1, &a), 0);
	EXPECT_STREQ(a.name, "pi-agent-9159e5020");
	users_db_done(&db);
}

TEST(uid_allocation_skips_passwd_group_and_registry)
{
	struct users_db db;
	struct users_identity a, b, c;

	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	/* 10100 is app's uid, 10101 appgrp's gid. */
	EXPECT_EQ(a.uid, 10102u);
	EXPECT_EQ(a.gid, 10102u);
	ASSERT_EQ(users_db_ensure(&db, "b", (uid_t)-1, &b), 0);
	EXPECT_EQ(b.uid, 10103u);
	ASSERT_EQ(users_db_remove(&db, "a", false), 0);
	ASSERT_EQ(users_db_ensure(&db, "c", (uid_t)-1, &c), 0);
	EXPECT_EQ(c.uid, 10104u); /* 10102 stays reserved for a */
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	EXPECT_EQ(a.uid, 10102u);
	ASSERT_EQ(users_db_remove(&db, "a", true), 0);
	EXPECT_NULL(registry_find_id(&db.reg, "a"));
	EXPECT_LT(pwfile_find_name(&db.f[PWFILE_PASSWD], a.name), 0);
	users_db_done(&db);
}

TEST(server_uid_honoured_or_refused)
{
	struct users_db db;
	struct users_identity a;

	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	ASSERT_EQ(users_db_ensure(&db, "a", 20000, &a), 0);
	EXPECT_EQ(a.uid, 20000u);
	EXPECT_EQ(users_db_ensure(&db, "a", 20000, &a), 0);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	EXPECT_EQ(a.uid, 20000u);
	EXPECT_EQ(users_db_ensure(&db, "a", 20001, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "already has uid 20000"));
	EXPECT_EQ(users_db_ensure(&db, "b", 20000, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "belongs to agent 'a'"));
	EXPECT_EQ(users_db_ensure(&db, "b", 10100, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "user 'app'"));
	EXPECT_EQ(users_db_ensure(&db, "b", 10101, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "group 'appgrp'"));
	EXPECT_EQ(users_db_ensure(&db, "b", 1000, &a), -ERANGE);
	EXPECT_EQ(users_db_ensure(&db, "b", 60000, &a), -ERANGE);
	EXPECT_EQ(users_db_ensure(&db, "b\n", 20002, &a), -EINVAL);
	users_db_done(&db);
}

TEST(ensure_writes_expected_lines_and_keeps_foreign_bytes)
{
	struct users_db db;
	struct users_identity a;
	char *pw, *gr, *sh, *gs, want[1024];

	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	pw = db_text(&db, PWFILE_PASSWD);
	/* Every original byte kept (CRLF, NIS, comment, blank, the unterminated last line);
	 * the new lines go before the first NIS line, as useradd puts them: glibc's compat
	 * reads no line after a bare "+", and answers from NIS at a "+@netgroup". */
	const char *nis = strstr(PASSWD, "+@netgroup");
	ASSERT_NOT_NULL(nis);
	snprintf(want, sizeof(want),
		 "%.*spi-tools:x:10002:10002:pistis trusted commands:/nonexistent:"
		 "/usr/sbin/nologin\n%s:x:10102:10102:pistis "
		 "agent:/data/sandbox-home/%s:/bin/sh\n%s",
		 (int)(nis - PASSWD), PASSWD, a.name, a.name, nis);
	EXPECT_STREQ(pw, want);
	gr = db_text(&db, PWFILE_GROUP);
	snprintf(want, sizeof(want), "%spi-sandbox:x:10010:%s\npi-tools:x:10002:\n%s:x:10102:\n",
		 GROUP, a.name, a.name);
	EXPECT_STREQ(gr, want);
	sh = db_text(&db, PWFILE_SHADOW);
	snprintf(want, sizeof(want), "%spi-tools:!:::::::\n%s:!:::::::\n", SHADOW, a.name);
	EXPECT_STREQ(sh, want);
	gs = db_text(&db, PWFILE_GSHADOW);
	snprintf(want, sizeof(want), "%spi-sandbox:!::%s\npi-tools:!::\n%s:!::\n", GSHADOW, a.name,
		 a.name);
	EXPECT_STREQ(gs, want);
	EXPECT_TRUE(users_db_is_complete(&db, "a"));
	free(pw);
	free(gr);
	free(sh);
	free(gs);
	users_db_done(&db);
}

/* pi-sandbox lists every agent: its line outgrows any passwd-sized limit. */
/* The file written is pieces pointing into the bytes read (runs of untouched lines) plus
 * the edited and appended lines: it must be byte for byte what a line-by-line rewrite of
 * every line gives, on inputs with CRLF, no final newline, comments, blank and NIS lines,
 * and pi-sandbox first, last (unterminated) or absent. */
static char *line_by_line(const struct pwfile *f)
{
	size_t total = 0, last = SIZE_MAX, o = 0, n = 0, nis = f->n_orig, *order;
	char *out;

	/* The order written: appended lines before the first original NIS line. */
	order = calloc(f->n_lines + 1, sizeof(*order));
	if (!order)
		abort();
	for (size_t i = 0; i < f->n_orig && nis == f->n_orig; i++)
		if (f->lines[i].len && strchr("+-", f->buf[f->lines[i].off]))
			nis = i;
	for (size_t i = 0; i < nis; i++)
		order[n++] = i;
	for (size_t i = f->n_orig; i < f->n_lines; i++)
		order[n++] = i;
	for (size_t i = nis; i < f->n_orig; i++)
		order[n++] = i;
	for (size_t j = 0; j < n; j++)
		if (!f->lines[order[j]].deleted) {
			total += f->lines[order[j]].len + 2;
			last = order[j];
		}
	out = malloc(total + 1);
	if (!out)
		abort();
	for (size_t j = 0; j < n; j++) {
		size_t i = order[j];
		const struct pwfile_line *l = &f->lines[i];
		if (l->deleted)
			continue;
		memcpy(out + o, l->repl ? l->repl : f->buf + l->off, l->len);
		o += l->len;
		if (l->term == 2) {
			memcpy(out + o, "\r\n", 2);
			o += 2;
		} else if (l->term == 1 || i != last)
			out[o++] = '\n';
	}
	out[o] = '\0';
	free(order);
	return out;
}

TEST(pieces_match_a_line_by_line_rewrite_on_odd_inputs)
{
	static const struct {
		const char *group, *gshadow;
	} cases[] = {
		{"pi-sandbox:x:10010:\r\nroot:x:0:\r\n# c\r\n+:::\r\n",
		 "pi-sandbox:!::\r\nroot:*::\r\n"},
		{"root:x:0:\n\n# a comment\n+@nis:::\npi-sandbox:x:10010:x,y",
		 "root:*::\n-@nis:::\npi-sandbox:!::x,y"},
		{"root:x:0:\r\n  \n+@nis:::", "root:*::"},
		{"pi-sandbox:x:10010:x\r\n", "pi-sandbox:!:x:x"},
		{"daemon:x:1:\npi-sandbox:x:10010:\nlast:x:7:", NULL},
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct users_db db;
		struct users_identity a, b;
		db_load(&db, PASSWD, cases[i].group, SHADOW, cases[i].gshadow);
		ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
		ASSERT_EQ(users_db_ensure(&db, "b", (uid_t)-1, &b), 0);
		for (int k = 0; k < _PWFILE_KIND_MAX; k++) {
			if (!db.present[k])
				continue;
			char *fast = db_text(&db, k), *slow = line_by_line(&db.f[k]);
			EXPECT_STREQ(fast, slow);
			free(fast);
			free(slow);
		}
		/* And by hand, where pi-sandbox was edited in place (its terminator kept). */
		char *gr = db_text(&db, PWFILE_GROUP), want[512];
		if (i == 0) {
			snprintf(want, sizeof(want),
				 "pi-sandbox:x:10010:%s,%s,\r\nroot:x:0:\r\n# c\r\n"
				 "pi-tools:x:10002:\n%s:x:10101:\n%s:x:10102:\n+:::\r\n",
				 b.name, a.name, a.name, b.name);
			EXPECT_STREQ(gr, want);
		}
		if (i == 1) {
			snprintf(want, sizeof(want),
				 "root:x:0:\n\n# a comment\npi-tools:x:10002:\n%s:x:10101:\n"
				 "%s:x:10102:\n+@nis:::\npi-sandbox:x:10010:x,y,%s,%s",
				 a.name, b.name, a.name, b.name);
			EXPECT_STREQ(gr, want);
		}
		free(gr);
		users_db_done(&db);
	}
}

TEST(two_thousand_agents_in_one_group_line)
{
	struct users_db db;
	struct users_identity a;
	struct pwfile g;
	char id[32], *gr;
	size_t line;
	const char *why;

	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	for (int i = 0; i < 2000; i++) {
		snprintf(id, sizeof(id), "agent-%d", i);
		ASSERT_EQ(users_db_ensure(&db, id, (uid_t)-1, &a), 0);
	}
	EXPECT_EQ(a.uid, 10102u + 1999u);
	gr = db_text(&db, PWFILE_GROUP);
	ASSERT_EQ(pwfile_parse(PWFILE_GROUP, gr, strlen(gr), &g, &line, &why), 0);
	ssize_t i = pwfile_find_name(&g, "pi-sandbox");
	ASSERT_GE(i, 0);
	EXPECT_GT(g.lines[i].len, 2000u * 17u);
	EXPECT_TRUE(pwfile_member_has(&g, (size_t)i, a.name));
	pwfile_done(&g);
	free(gr);
	users_db_done(&db);
}

TEST(no_shadow_means_locked_passwd_field)
{
	struct users_db db;
	struct users_identity a;
	char *pw;

	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\n", NULL, NULL);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	pw = db_text(&db, PWFILE_PASSWD);
	EXPECT_NOT_NULL(strstr(pw, "\npi-agent-"));
	EXPECT_NOT_NULL(strstr(pw, ":!:10100:10100:"));
	EXPECT_FALSE(db.f[PWFILE_SHADOW].changed);
	free(pw);
	users_db_done(&db);
}

/* An image's /etc may already name an agent (names are derived from the id, so they can be
 * known in advance): a password on its account, or a membership in another group (shadow,
 * sudo, disk, another agent's), would give the agent, or whoever knows the password, more
 * than its identity (su, newgrp and sg are setuid and work where agents run without
 * no_new_privs). Such entries are refused, never adopted. */
TEST(ensure_refuses_image_entries_that_give_the_agent_more)
{
	struct users_db db;
	struct users_identity a;
	char name[64], pw[256], line[512];

	/* A new agent never takes a name /etc already has (the collision rule); these are
	 * the agent's recorded name on a rebuilt image, so the registry holds its record. */
	static const char *const bad_passwd[] = {"", "$6$salt$hash"};
	static const char *const bad_shadow[] = {"", "$6$salt$hash"};

	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\n", NULL, NULL);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	snprintf(name, sizeof(name), "%s", a.name);
	users_db_done(&db);

	for (size_t i = 0; i < ELEMENTSOF(bad_passwd); i++) {
		snprintf(pw, sizeof(pw), "root:x:0:0::/:/bin/sh\n%s:%s:10100:10100::/:/bin/sh\n",
			 name, bad_passwd[i]);
		db_load(&db, pw, "root:x:0:\n", NULL, NULL);
		ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
		EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
		EXPECT_NOT_NULL(strstr(db.err, "has a password in /etc/passwd"));
		users_db_done(&db);
	}
	for (size_t i = 0; i < ELEMENTSOF(bad_shadow); i++) {
		snprintf(pw, sizeof(pw), "root:x:0:0::/:/bin/sh\n%s:x:10100:10100::/:/bin/sh\n",
			 name);
		snprintf(line, sizeof(line), "root:*:1::::::\n%s:%s:19000:0:99999:7:::\n", name,
			 bad_shadow[i]);
		db_load(&db, pw, "root:x:0:\n", line, NULL);
		ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
		EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
		EXPECT_NOT_NULL(strstr(db.err, "has a password in /etc/shadow"));
		users_db_done(&db);
	}
	/* Locked ones are adopted: "!" (ours, useradd's), "*", "!" before a hash (usermod -L). */
	snprintf(pw, sizeof(pw), "root:x:0:0::/:/bin/sh\n%s:x:10100:10100::/:/bin/sh\n", name);
	snprintf(line, sizeof(line), "root:*:1::::::\n%s:!$6$salt$hash:19000:0:99999:7:::\n", name);
	db_load(&db, pw, "root:x:0:\n", line, NULL);
	ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	EXPECT_STREQ(a.name, name);
	users_db_done(&db);

	/* Memberships: in /etc/group, in gshadow's members and in gshadow's admins. */
	snprintf(line, sizeof(line), "root:x:0:\nshadow:x:42:daemon,%s\n", name);
	db_load(&db, "root:x:0:0::/:/bin/sh\n", line, NULL, NULL);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "member of group 'shadow' in /etc/group"));
	users_db_done(&db);
	snprintf(line, sizeof(line), "root:*::\nsudo:*::%s\n", name);
	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\nsudo:x:27:\n", "root:*:1::::::\n",
		line);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "member of group 'sudo' in /etc/gshadow"));
	users_db_done(&db);
	snprintf(line, sizeof(line), "root:*::\nstaff:*:%s:\n", name);
	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\nstaff:x:50:\n", "root:*:1::::::\n",
		line);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "administrator of group 'staff' in /etc/gshadow"));
	users_db_done(&db);
	/* A name that only starts like it, and its own group and pi-sandbox, are fine. */
	snprintf(line, sizeof(line), "root:x:0:\nshadow:x:42:%sf\n%s:x:10100:%s\n", name, name,
		 name);
	db_load(&db, "root:x:0:0::/:/bin/sh\n", line, NULL, NULL);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	users_db_done(&db);
}

/* The agent's group on a rebuilt image: no group password, no one else in it, and its ids
 * on no other user or group. Each refused with the file named; the locked forms adopted. */
TEST(ensure_refuses_a_shared_or_open_agent_group)
{
	struct users_db db;
	struct users_identity a;
	char name[64], pw[512], gr[512], gs[512];
	static const struct {
		const char *group_tail, *gshadow, *pw_extra, *gr_extra, *why;
	} cases[] = {
		{"$6$salt$hash:10100:", "!::", "", "", "has a password in /etc/group"},
		{"x:10100:", "$6$salt$hash::", "", "", "has a password in /etc/gshadow"},
		{"x:10100:", "::", "", "", "has a password in /etc/gshadow"},
		{"x:10100:daemon", "!::", "", "", "other than its agent in /etc/group"},
		{"x:10100:", "!:daemon:", "", "", "other than its agent in /etc/gshadow"},
		{"x:10100:", "!::daemon", "", "", "other than its agent in /etc/gshadow"},
		{"x:10100:", "!::", "evil:x:10100:1::/:/bin/sh\n", "",
		 "user 'evil' in /etc/passwd"},
		{"x:10100:", "!::", "evil:x:1:10100::/:/bin/sh\n", "",
		 "user 'evil' in /etc/passwd"},
		{"x:10100:", "!::", "", "evil:x:10100:\n", "group 'evil' in /etc/group shares"},
		{"!:10100:NAME", "*::NAME", "", "", NULL}, /* locked, only itself: adopted */
	};

	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\n", NULL, NULL);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	snprintf(name, sizeof(name), "%s", a.name);
	users_db_done(&db);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char tail[128], gst[128], *n;
		snprintf(tail, sizeof(tail), "%s", cases[i].group_tail);
		snprintf(gst, sizeof(gst), "%s", cases[i].gshadow);
		if ((n = strstr(tail, "NAME")))
			snprintf(n, sizeof(tail) - (size_t)(n - tail), "%s", name);
		if ((n = strstr(gst, "NAME")))
			snprintf(n, sizeof(gst) - (size_t)(n - gst), "%s", name);
		snprintf(pw, sizeof(pw), "root:x:0:0::/:/bin/sh\n%s%s:x:10100:10100::/:/bin/sh\n",
			 cases[i].pw_extra, name);
		snprintf(gr, sizeof(gr), "root:x:0:\n%s%s:%s\n", cases[i].gr_extra, name, tail);
		snprintf(gs, sizeof(gs), "root:*::\n%s:%s\n", name, gst);
		db_load(&db, pw, gr, NULL, gs);
		ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
		int r = users_db_ensure(&db, "a", (uid_t)-1, &a);
		if (cases[i].why) {
			EXPECT_EQ(r, -EEXIST);
			EXPECT_NOT_NULL(strstr(db.err, cases[i].why));
		} else
			EXPECT_EQ(r, 0);
		users_db_done(&db);
	}
	/* pistis's shared groups carry no group password either. */
	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\npi-sandbox:secret:10010:\n", NULL,
		NULL);
	EXPECT_EQ(users_db_ensure_base(&db), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "group 'pi-sandbox' has a password in /etc/group"));
	users_db_done(&db);
}

/* ensure of agent "a", named name, against these /etc files, as a new agent and as one the
 * registry holds (a rebuilt image): refused with why in the error, or (why NULL) done. */
static void expect_ensure_both(struct tap_metadata *_metadata, const char *name, const char *pw,
			       const char *gr, const char *sh, const char *gs, const char *why)
{
	for (int rebuilt = 0; rebuilt <= 1; rebuilt++) {
		struct users_db db;
		struct users_identity a;

		db_load(&db, pw, gr, sh, gs);
		if (rebuilt)
			ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
		int r = users_db_ensure(&db, "a", (uid_t)-1, &a);
		if (why) {
			EXPECT_EQ(r, -EEXIST);
			EXPECT_NOT_NULL(strstr(db.err, why));
		} else {
			EXPECT_EQ(r, 0);
			EXPECT_STREQ(a.name, name);
		}
		users_db_done(&db);
	}
}

/* An image's gshadow line for the agent's name without its group line: the group line is
 * created, the gshadow line is the image's, and it is held to the same rules, for a new
 * agent (its name is derivable) and for a recorded one (a rebuilt image). */
TEST(ensure_checks_a_gshadow_line_without_a_group_line)
{
	struct users_db db;
	struct users_identity a;
	char name[64], gs[512];
	static const struct {
		const char *gshadow, *why;
	} cases[] = {
		{"$6$salt$hash::", "has a password in /etc/gshadow"},
		{"::", "has a password in /etc/gshadow"},
		{"!:daemon:", "other than its agent in /etc/gshadow"},
		{"!::daemon", "other than its agent in /etc/gshadow"},
		{"!::", NULL},
	};

	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\n", NULL, NULL);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	snprintf(name, sizeof(name), "%s", a.name);
	users_db_done(&db);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		snprintf(gs, sizeof(gs), "root:*::\n%s:%s\n", name, cases[i].gshadow);
		expect_ensure_both(_metadata, name, "root:x:0:0::/:/bin/sh\n", "root:x:0:\n",
				   "root:*:1::::::\n", gs, cases[i].why);
	}
	/* The same for pistis's shared groups. */
	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\n", "root:*:1::::::\n",
		"root:*::\npi-tools:secret::\n");
	EXPECT_EQ(users_db_ensure_base(&db), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "group 'pi-tools' has a password in /etc/gshadow"));
	users_db_done(&db);
}

/* glibc's nss_files skips white space before each member name: " NAME" in sudo's list
 * makes the agent a member of sudo (initgroups). The membership checks read it the same
 * way, for a new agent and for a recorded one (the locked path). */
TEST(ensure_refuses_a_membership_behind_white_space)
{
	struct users_db db;
	struct users_identity a;
	char name[64], pw[256], gr[512], gs[512];
	static const struct {
		const char *gr_tail, *gs_tail, *why;
	} cases[] = {
		{"sudo:x:27: NAME\n", "sudo:*::\n", "member of group 'sudo' in /etc/group"},
		{"sudo:x:27:daemon, NAME\n", "sudo:*::\n", "member of group 'sudo' in /etc/group"},
		{"sudo:x:27:\n", "sudo:*::  NAME\n", "member of group 'sudo' in /etc/gshadow"},
		{"sudo:x:27:\n", "sudo:*: NAME:\n",
		 "administrator of group 'sudo' in /etc/gshadow"},
		{"sudo:x:27:NAME \n", "sudo:*::\n", NULL}, /* glibc keeps trailing bytes */
	};

	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\n", NULL, NULL);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	snprintf(name, sizeof(name), "%s", a.name);
	users_db_done(&db);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char grt[128], gst[128], *n;
		snprintf(grt, sizeof(grt), "%s", cases[i].gr_tail);
		snprintf(gst, sizeof(gst), "%s", cases[i].gs_tail);
		if ((n = strstr(grt, "NAME")))
			snprintf(n, sizeof(grt) - (size_t)(n - grt), "%s%s", name,
				 cases[i].gr_tail + (n - grt) + 4);
		if ((n = strstr(gst, "NAME")))
			snprintf(n, sizeof(gst) - (size_t)(n - gst), "%s%s", name,
				 cases[i].gs_tail + (n - gst) + 4);
		snprintf(pw, sizeof(pw), "root:x:0:0::/:/bin/sh\n");
		snprintf(gr, sizeof(gr), "root:x:0:\n%s", grt);
		snprintf(gs, sizeof(gs), "root:*::\n%s", gst);
		expect_ensure_both(_metadata, name, pw, gr, "root:*:1::::::\n", gs, cases[i].why);
	}
}

/* A second line of one of pistis's names (an agent, pi-sandbox, pi-tools) in any of the
 * four files is refused, whatever its id: NSS reads the first, but initgroups reads every
 * group line, so "pi-sandbox:x:0:AGENT" after the real one put the agent in group 0. So is
 * a leading zero in the ids of the agent's own line. Another name's duplicate or leading
 * zero is the image's own (read as the C libraries read it): ensure goes on. */
TEST(ensure_refuses_a_second_line_of_a_pistis_name)
{
	struct users_db db;
	struct users_identity a;
	char name[64], pw[512], gr[512], sh[512], gs[512];
	static const struct {
		const char *pw_tail, *gr_tail, *sh_tail, *gs_tail, *why;
	} cases[] = {
		{"", "pi-sandbox:x:0:NAME\n", "", "",
		 "group 'pi-sandbox' has a second line in "
		 "/etc/group (line 5, gid 0)"},
		{"", "pi-sandbox:x:10010:NAME\n", "", "", "group 'pi-sandbox' has a second line"},
		{"", "pi-sandbox:x:0:\n", "", "", "group 'pi-sandbox' has a second line"},
		{"", "NAME:x:27:NAME\n", "", "",
		 "has a second line in /etc/group (line 5, gid 27)"},
		{"", "NAME:x:10100:\n", "", "", "has a second line in /etc/group"},
		{"", "", "", "NAME:!::daemon\n", "has a second line in /etc/gshadow (line 5)"},
		{"", "", "", "pi-sandbox:!::NAME\n",
		 "group 'pi-sandbox' has a second line in "
		 "/etc/gshadow"},
		{"NAME:x:0:0::/:/bin/sh\n", "", "", "",
		 "has a second line in /etc/passwd (line 4, "
		 "uid 0)"},
		{"", "", "NAME::1::::::\n", "", "has a second line in /etc/shadow (line 4)"},
		{"", "pi-tools:x:0:pi-tools\n", "", "", "group 'pi-tools' has a second line"},
		{"pi-tools:x:0:0::/:/bin/sh\n", "", "", "", "user 'pi-tools' has a second line"},
		/* another name's duplicates and leading zeros are the image's own */
		{"svc:x:01000:01000::/:/bin/sh\nsvc:x:1001:1001::/:/bin/sh\n",
		 "svc:x:01000:\nsvc:x:1001:\n", "svc:*:1::::::\nsvc:*:1::::::\n",
		 "svc:*::\nsvc:*::\n", NULL},
	};

	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\n", NULL, NULL);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	snprintf(name, sizeof(name), "%s", a.name);
	users_db_done(&db);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		/* The identity as ensure leaves it, then the case's lines after it. */
		const char *tail[4] = {cases[i].pw_tail, cases[i].gr_tail, cases[i].sh_tail,
				       cases[i].gs_tail};
		char t[4][256];
		for (int k = 0; k < 4; k++) {
			const char *n = strstr(tail[k], "NAME");
			size_t o = 0;
			t[k][0] = '\0';
			for (const char *q = tail[k]; *q;) {
				if (n && q == n) {
					o += (size_t)snprintf(t[k] + o, sizeof(t[k]) - o, "%s",
							      name);
					q += 4;
					n = strstr(q, "NAME");
				} else
					t[k][o++] = *q++, t[k][o] = '\0';
			}
		}
		snprintf(pw, sizeof(pw),
			 "root:x:0:0::/:/bin/sh\npi-tools:x:10002:10002::/:/bin/false\n"
			 "%s:x:10100:10100::/:/bin/sh\n%s",
			 name, t[0]);
		snprintf(gr, sizeof(gr),
			 "root:x:0:\npi-sandbox:x:10010:%s\npi-tools:x:10002:\n%s:x:10100:\n%s",
			 name, name, t[1]);
		snprintf(sh, sizeof(sh), "root:*:1::::::\npi-tools:!:::::::\n%s:!:::::::\n%s", name,
			 t[2]);
		snprintf(gs, sizeof(gs), "root:*::\npi-sandbox:!::%s\npi-tools:!::\n%s:!::\n%s",
			 name, name, t[3]);
		db_load(&db, pw, gr, sh, gs);
		ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
		int r = users_db_ensure(&db, "a", (uid_t)-1, &a);
		if (cases[i].why) {
			EXPECT_EQ(r, -EEXIST);
			EXPECT_NOT_NULL(strstr(db.err, cases[i].why));
		} else {
			EXPECT_EQ(r, 0);
			EXPECT_STREQ(a.name, name);
		}
		users_db_done(&db);
	}

	/* A new agent: the second pi-sandbox line refuses it too (ensure_base's check). */
	db_load(&db, "root:x:0:0::/:/bin/sh\n", "root:x:0:\npi-sandbox:x:10010:\npi-sandbox:x:0:\n",
		NULL, NULL);
	EXPECT_EQ(users_db_ensure(&db, "b", (uid_t)-1, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "group 'pi-sandbox' has a second line in /etc/group"));
	users_db_done(&db);

	/* The agent's own lines with a leading zero: refused, naming file and line. */
	snprintf(pw, sizeof(pw), "root:x:0:0::/:/bin/sh\n%s:x:010100:10100::/:/bin/sh\n", name);
	db_load(&db, pw, "root:x:0:\n", NULL, NULL);
	ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "in /etc/passwd (line 2) has an id written with a leading "
				       "zero"));
	users_db_done(&db);
	snprintf(pw, sizeof(pw), "root:x:0:0::/:/bin/sh\n%s:x:10100:010100::/:/bin/sh\n", name);
	db_load(&db, pw, "root:x:0:\n", NULL, NULL);
	ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "has an id written with a leading zero"));
	users_db_done(&db);
	snprintf(gr, sizeof(gr), "root:x:0:\n%s:x:010100:\n", name);
	db_load(&db, "root:x:0:0::/:/bin/sh\n", gr, NULL, NULL);
	ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "in /etc/group (line 2) has an id written with a leading "
				       "zero"));
	users_db_done(&db);
	/* Another user on the agent's uid, spelled with a leading zero: the same uid. */
	snprintf(pw, sizeof(pw), "root:x:0:0::/:/bin/sh\ntwin:x:010100:1::/:/bin/sh\n");
	db_load(&db, pw, "root:x:0:\n", NULL, NULL);
	ASSERT_EQ(registry_add(&db.reg, 10100, name, "a", REGISTRY_ACTIVE), 0);
	EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "uid 10100 is taken by user 'twin'"));
	users_db_done(&db);
}

/* remove takes the agent out of a member or administrator list where glibc would see it,
 * white space before the name included; every other byte of the line stays. */
TEST(remove_clears_a_member_behind_white_space)
{
	struct users_db db;
	struct users_identity a;
	char line[2][256], want[1024], *out;

	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	snprintf(line[0], sizeof(line[0]), "sudo:x:27:ops, %s,%s ", a.name, a.name);
	ASSERT_EQ(pwfile_append(&db.f[PWFILE_GROUP], line[0]), 0);
	snprintf(line[1], sizeof(line[1]), "sudo:*:  %s:ops, %s", a.name, a.name);
	ASSERT_EQ(pwfile_append(&db.f[PWFILE_GSHADOW], line[1]), 0);
	ASSERT_EQ(users_db_remove(&db, "a", false), 0);
	out = db_text(&db, PWFILE_GROUP);
	snprintf(want, sizeof(want), "sudo:x:27:ops,%s \n", a.name);
	EXPECT_NOT_NULL(strstr(out, want));
	free(out);
	out = db_text(&db, PWFILE_GSHADOW);
	EXPECT_NOT_NULL(strstr(out, "sudo:*::ops\n"));
	free(out);
	users_db_done(&db);
}

/* remove clears every line of the agent's name in each of the four files, not only the
 * first: a second one left behind kept the account (ensure refuses such a second line,
 * so it can only come from outside). A second line with another id is someone else's
 * doing: nothing is removed, and the error names the file and line. */
TEST(remove_clears_every_line_of_the_name)
{
	struct users_db db;
	struct users_identity a;
	char line[256], *out;

	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	snprintf(line, sizeof(line), "%s:x:%u:%u::/:/bin/sh", a.name, a.uid, a.uid);
	ASSERT_EQ(pwfile_append(&db.f[PWFILE_PASSWD], line), 0);
	snprintf(line, sizeof(line), "%s:x:%u:", a.name, a.uid);
	ASSERT_EQ(pwfile_append(&db.f[PWFILE_GROUP], line), 0);
	snprintf(line, sizeof(line), "%s:!:::::::", a.name);
	ASSERT_EQ(pwfile_append(&db.f[PWFILE_SHADOW], line), 0);
	snprintf(line, sizeof(line), "%s:!::", a.name);
	ASSERT_EQ(pwfile_append(&db.f[PWFILE_GSHADOW], line), 0);
	ASSERT_EQ(users_db_remove(&db, "a", false), 0);
	for (int k = 0; k < _PWFILE_KIND_MAX; k++) {
		out = db_text(&db, k);
		EXPECT_NULL(strstr(out, a.name));
		free(out);
	}
	users_db_done(&db);

	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	snprintf(line, sizeof(line), "%s:x:0:0::/root:/bin/sh", a.name);
	ASSERT_EQ(pwfile_append(&db.f[PWFILE_PASSWD], line), 0);
	db.f[PWFILE_PASSWD].changed = false;
	EXPECT_EQ(users_db_remove(&db, "a", false), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "in /etc/passwd (line "));
	EXPECT_NOT_NULL(strstr(db.err, "has uid 0, not the registry's"));
	EXPECT_FALSE(db.f[PWFILE_PASSWD].changed);
	out = db_text(&db, PWFILE_PASSWD);
	EXPECT_NOT_NULL(strstr(out, line));
	free(out);
	users_db_done(&db);
}

/* uid = gid, and the group is the agent's alone: a gid some account in /etc/passwd already
 * has as its primary group (without a group line) is not handed out, or that account would
 * share the agent's group. */
TEST(uid_allocation_skips_primary_gids_of_passwd)
{
	struct users_db db;
	struct users_identity a;

	db_load(&db, "root:x:0:0::/:/bin/sh\nsvc:x:900:10100::/:/bin/sh\n", "root:x:0:\n", NULL,
		NULL);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	EXPECT_EQ(a.uid, 10101u);
	EXPECT_EQ(users_db_ensure(&db, "b", 10100, &a), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "uid 10100 is the primary group of user 'svc'"));
	users_db_done(&db);
}

/* A name from the image's /etc that a refusal quotes (any byte but ':', ',', a blank and a
 * control byte: a quote, a backslash, invalid UTF-8): raw in err (for JSON), escaped once in
 * err_text, its quote too, so "x'in'/etc" cannot end its quotes in a log line and make it name
 * another file. */
TEST(conflict_names_escaped_once_in_the_text_form)
{
	struct users_db db;

	db_load(&db, "x'in'/etc\\n\xff:x:10002:10002::/:/bin/sh\n", "", NULL, NULL);
	EXPECT_EQ(users_db_ensure_base(&db), -EEXIST);
	EXPECT_STREQ(db.err_text,
		     "uid 10002 is taken by user 'x\\'in\\'/etc\\\\n\\xff' in /etc/passwd");
	EXPECT_STREQ(db.err, "uid 10002 is taken by user 'x'in'/etc\\n\xff' in /etc/passwd");
	users_db_done(&db);

	/* a long name is never cut inside its quotes (it was, silently, at 64 bytes): whole,
	 * or the message is cut at its end with a mark */
	{
		char pw[1024], want[512];

		memset(pw, 'n', 100);
		snprintf(pw + 100, sizeof(pw) - 100, ":x:10002:10002::/:/bin/sh\n");
		db_load(&db, pw, "", NULL, NULL);
		EXPECT_EQ(users_db_ensure_base(&db), -EEXIST);
		snprintf(want, sizeof(want), "user '%.100s' in /etc/passwd", pw);
		EXPECT_NOT_NULL(strstr(db.err_text, want));
		users_db_done(&db);
		memset(pw, 'n', 600);
		snprintf(pw + 600, sizeof(pw) - 600, ":x:10002:10002::/:/bin/sh\n");
		db_load(&db, pw, "", NULL, NULL);
		EXPECT_EQ(users_db_ensure_base(&db), -EEXIST);
		EXPECT_NOT_NULL(strstr(db.err_text, "nnn...[cut: "));
		users_db_done(&db);
	}
}

TEST(ensure_base_conflicts)
{
	struct users_db db;

	db_load(&db, "root:x:0:0::/:/bin/sh\n", "pi-sandbox:x:999:\n", NULL, NULL);
	EXPECT_EQ(users_db_ensure_base(&db), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "group 'pi-sandbox' exists in /etc/group with gid 999"));
	users_db_done(&db);

	db_load(&db, "root:x:0:0::/:/bin/sh\n", "docker:x:10010:\n", NULL, NULL);
	EXPECT_EQ(users_db_ensure_base(&db), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "gid 10010 is taken by group 'docker'"));
	users_db_done(&db);

	db_load(&db, "bob:x:10002:10002::/:/bin/sh\n", "", NULL, NULL);
	EXPECT_EQ(users_db_ensure_base(&db), -EEXIST);
	EXPECT_NOT_NULL(strstr(db.err, "uid 10002 is taken by user 'bob'"));
	users_db_done(&db);

	/* Right ids already there: kept, nothing changes. */
	db_load(&db, "pi-tools:x:10002:10002::/x:/bin/false\n",
		"pi-sandbox:x:10010:someone\npi-tools:x:10002:\n", NULL, NULL);
	EXPECT_EQ(users_db_ensure_base(&db), 0);
	EXPECT_FALSE(db.f[PWFILE_PASSWD].changed);
	EXPECT_FALSE(db.f[PWFILE_GROUP].changed);
	users_db_done(&db);
}

/* pi-tools runs trusted commands (sudo -u pi-tools: every group initgroups finds for it) and
 * owns the secrets. Its group is its own, as an agent's is, and it is a member of no other
 * group (root's, sudo, docker, pi-sandbox, an agent's, or any other: no list of the
 * dangerous ones is complete); its ids are on no other line. ensure_base refuses each with
 * the file and line, and so does every ensure (which implies it). */
TEST(ensure_base_keeps_pi_tools_to_itself)
{
	static const char pw_base[] = "root:x:0:0::/:/bin/sh\n"
				      "pi-tools:x:10002:10002::/nonexistent:/bin/false\n";
	static const struct {
		const char *pw_tail, *gr_tail, *gs_tail, *why; /* why NULL: accepted */
	} cases[] = {
		{"", "pi-tools:x:10002:daemon\n", "",
		 "group 'pi-tools' lists members or administrators other than pi-tools in "
		 "/etc/group (line 3)"},
		{"", "pi-tools:x:10002:pi-tools,pi-agent-0123abcd\n", "",
		 "other than pi-tools in /etc/group"},
		{"", "pi-tools:x:10002:\n", "pi-tools:!:daemon:\n",
		 "other than pi-tools in /etc/gshadow (line 3)"},
		{"", "pi-tools:x:10002:\n", "pi-tools:!::daemon\n",
		 "other than pi-tools in /etc/gshadow"},
		{"", "pi-tools:x:10002:\nroot2:x:0:pi-tools\n", "",
		 "user 'pi-tools' is a member of group 'root2' in /etc/group (line 4)"},
		{"", "pi-tools:x:10002:\nsudo:x:27:daemon, pi-tools\n", "",
		 "user 'pi-tools' is a member of group 'sudo' in /etc/group"},
		{"", "pi-tools:x:10002:\ndocker:x:999:pi-tools\n", "",
		 "a member of group 'docker' in /etc/group"},
		{"", "pi-tools:x:10002:\nusers:x:100:pi-tools\n", "",
		 "a member of group 'users' in /etc/group"},
		{"", "pi-tools:x:10002:\npi-agent-0123abcd:x:10100:pi-tools\n", "",
		 "a member of group 'pi-agent-0123abcd' in /etc/group"},
		{"", "pi-tools:x:10002:\n", "pi-tools:!::\nsudo:*::pi-tools\n",
		 "user 'pi-tools' is a member of group 'sudo' in /etc/gshadow (line 4)"},
		{"", "pi-tools:x:10002:\n", "pi-tools:!::\nstaff:*:pi-tools:\n",
		 "user 'pi-tools' is an administrator of group 'staff' in /etc/gshadow"},
		{"", "pi-tools:x:10002:\n", "pi-tools:!:pi-tools:\n",
		 "other than pi-tools in /etc/gshadow"},
		{"alias:x:10002:1::/:/bin/sh\n", "pi-tools:x:10002:\n", "",
		 "user 'alias' in /etc/passwd shares id 10002 (line 3, as uid or primary gid) with "
		 "user 'pi-tools'"},
		{"svc:x:500:10002::/:/bin/sh\n", "pi-tools:x:10002:\n", "",
		 "user 'svc' in /etc/passwd shares id 10002"},
		{"", "pi-tools:x:10002:\ntools2:x:10002:daemon\n", "",
		 "group 'tools2' in /etc/group shares gid 10002 (line 4) with user 'pi-tools'"},
		/* itself in its own group, a longer name elsewhere: accepted */
		{"", "pi-tools:x:10002:pi-tools\nsudo:x:27:pi-toolsx\n", "pi-tools:*::pi-tools\n",
		 NULL},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char pw[512], gr[512], gs[512];
		struct users_db db;
		snprintf(pw, sizeof(pw), "%s%s", pw_base, cases[i].pw_tail);
		snprintf(gr, sizeof(gr), "root:x:0:\npi-sandbox:x:10010:\n%s", cases[i].gr_tail);
		snprintf(gs, sizeof(gs), "root:*::\npi-sandbox:!::\n%s", cases[i].gs_tail);
		db_load(&db, pw, gr, "root:*:1::::::\npi-tools:!:1::::::\n", gs);
		int r = users_db_ensure_base(&db);
		if (cases[i].why) {
			EXPECT_EQ(r, -EEXIST);
			EXPECT_NOT_NULL(strstr(db.err, cases[i].why));
		} else {
			EXPECT_EQ(r, 0);
		}
		users_db_done(&db);
		/* An agent's ensure implies ensure-base: refused the same. */
		struct users_identity a;
		db_load(&db, pw, gr, "root:*:1::::::\npi-tools:!:1::::::\n", gs);
		r = users_db_ensure(&db, "a", (uid_t)-1, &a);
		if (cases[i].why) {
			EXPECT_EQ(r, -EEXIST);
			EXPECT_NOT_NULL(strstr(db.err, cases[i].why));
		} else {
			EXPECT_EQ(r, 0);
		}
		users_db_done(&db);
	}
	/* Root's group and pi-sandbox, whose lines come first. */
	static const char *const first[][2] = {
		{"root:x:0:pi-tools\npi-sandbox:x:10010:\npi-tools:x:10002:\n",
		 "user 'pi-tools' is a member of group 'root' in /etc/group (line 1)"},
		{"root:x:0:\npi-sandbox:x:10010:pi-agent-0123abcd,pi-tools\npi-tools:x:10002:\n",
		 "user 'pi-tools' is a member of group 'pi-sandbox' in /etc/group (line 2)"},
	};
	for (size_t i = 0; i < ELEMENTSOF(first); i++) {
		struct users_db db;
		db_load(&db, pw_base, first[i][0], NULL, NULL);
		EXPECT_EQ(users_db_ensure_base(&db), -EEXIST);
		EXPECT_NOT_NULL(strstr(db.err, first[i][1]));
		EXPECT_FALSE(db.f[PWFILE_GROUP].changed);
		users_db_done(&db);
	}
}

TEST(pwfile_roundtrip_and_strictness)
{
	static const struct {
		int kind;
		const char *text;
		size_t line;
	} bad[] = {
		{PWFILE_PASSWD, "root:x:0:0::/:/bin/sh\nbad:x:0:0::/\n", 2},
		{PWFILE_PASSWD, "a:x:0:0::/:/bin/sh:extra\n", 1},
		{PWFILE_PASSWD, "a:x:-1:0::/:/bin/sh\n", 1},
		{PWFILE_PASSWD, "a:x:4294967295:0::/:/bin/sh\n", 1},
		{PWFILE_PASSWD, "a:x:99999999999:0::/:/bin/sh\n", 1},
		{PWFILE_PASSWD, "a:x: 1:0::/:/bin/sh\n", 1},
		{PWFILE_PASSWD, ":x:1:0::/:/bin/sh\n", 1},
		{PWFILE_PASSWD, "\n\na:x:1:0::/:/bin\x1b[m\n", 3},
		{PWFILE_GROUP, "g:x:abc:\n", 1},
		{PWFILE_GROUP, "g:x:1\n", 1},
		{PWFILE_SHADOW, "s:!:::\n", 1},
		{PWFILE_GSHADOW, "g:!:\n", 1},
		{PWFILE_PASSWD, "root:x:0:0::/:/bin/sh\n+svc:x:10100:x::/:/bin/sh\n", 2},
		{PWFILE_PASSWD, "+svc:x:10100\n", 1},
		{PWFILE_GROUP, "+::::\n", 1},
	};
	struct pwfile f;
	size_t line, len;
	const char *why;
	char *out;

	ASSERT_EQ(pwfile_parse(PWFILE_PASSWD, PASSWD, strlen(PASSWD), &f, &line, &why), 0);
	ASSERT_EQ(pwfile_format(&f, &out, &len), 0);
	EXPECT_EQ(len, strlen(PASSWD));
	EXPECT_STREQ(out, PASSWD);
	EXPECT_EQ(pwfile_find_name(&f, "app"), 5);
	EXPECT_EQ(pwfile_find_id(&f, 65534), 6);
	/* A NIS compat line with fields is an entry named with its sign, as the C libraries
	 * read it; its empty ids are none. */
	EXPECT_EQ(pwfile_find_name(&f, "+@netgroup"), 4);
	EXPECT_EQ(f.lines[4].id, PWFILE_ID_NONE);
	EXPECT_EQ(f.lines[4].gid, PWFILE_ID_NONE);
	free(out);
	pwfile_done(&f);

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		int r = pwfile_parse(bad[i].kind, bad[i].text, strlen(bad[i].text), &f, &line,
				     &why);
		EXPECT_EQ(r, -EINVAL);
		EXPECT_EQ(line, (size_t)bad[i].line);
		EXPECT_NOT_NULL(why);
	}
	ASSERT_EQ(pwfile_parse(PWFILE_PASSWD, "a:x:1:1::/:/bin/sh\0b", 20, &f, &line, &why),
		  -EINVAL);

	char *long_line = malloc(PWFILE_LINE_MAX + 64);
	memset(long_line, 'a', PWFILE_LINE_MAX + 10);
	memcpy(long_line, "a:x:1:1:", 8);
	memcpy(long_line + PWFILE_LINE_MAX + 2, "::\n", 4);
	EXPECT_EQ(pwfile_parse(PWFILE_PASSWD, long_line, strlen(long_line), &f, &line, &why),
		  -EINVAL);
	EXPECT_STREQ(why, "line too long");
	free(long_line);
}

TEST(pwfile_members_edit_keeps_crlf)
{
	const char *g = "a:x:1:\r\nb:x:2:u1,u2,u3\n";
	struct pwfile f;
	size_t line, len;
	const char *why;
	char *out;

	ASSERT_EQ(pwfile_parse(PWFILE_GROUP, g, strlen(g), &f, &line, &why), 0);
	EXPECT_EQ(pwfile_member_add(&f, 0, "x"), 1);
	EXPECT_EQ(pwfile_member_add(&f, 0, "x"), 0);
	EXPECT_EQ(pwfile_member_add(&f, 0, "y"), 1);
	EXPECT_EQ(pwfile_member_remove(&f, 1, "u2"), 1);
	EXPECT_EQ(pwfile_member_remove(&f, 1, "u"), 0);
	EXPECT_EQ(pwfile_member_add(&f, 0, "bad:name"), -EINVAL);
	EXPECT_TRUE(pwfile_member_has(&f, 0, "y"));
	EXPECT_FALSE(pwfile_member_has(&f, 1, "u2"));
	ASSERT_EQ(pwfile_format(&f, &out, &len), 0);
	/* On a CRLF line new members go first, each followed by a ',': glibc reads the \r as
	 * part of the last entry, and skips it as white space before an empty one. */
	EXPECT_STREQ(out, "a:x:1:y,x,\r\nb:x:2:u1,u3\n");
	free(out);
	pwfile_done(&f);
}

TEST(registry_roundtrip_and_errors)
{
	char a_name[USERS_NAME_MAX + 1], b_name[USERS_NAME_MAX + 1], text[1024], *out;
	struct registry reg;
	size_t line, len;
	const char *why;

	ident_name_derive("a", 8, a_name);
	ident_name_derive("b", 8, b_name);
	snprintf(text, sizeof(text),
		 "pistis-users-registry 1\n# note\n\n10100:%s:active:a\n10107:%s:reserved:b\n",
		 a_name, b_name);
	ASSERT_EQ(registry_parse(text, strlen(text), &reg, &line, &why), 0);
	ASSERT_EQ(reg.n, 2u);
	EXPECT_EQ(registry_find_id(&reg, "b")->uid, 10107u);
	EXPECT_TRUE(registry_find_id(&reg, "b")->state == REGISTRY_RESERVED);
	ASSERT_EQ(registry_format(&reg, &out, &len), 0);
	snprintf(text, sizeof(text),
		 "pistis-users-registry 1\n10100:%s:active:a\n10107:%s:reserved:b\n", a_name,
		 b_name);
	EXPECT_STREQ(out, text);
	free(out);
	registry_done(&reg);
	EXPECT_EQ(registry_parse("", 0, &reg, &line, &why), 0);
	EXPECT_EQ(reg.n, 0u);
	registry_done(&reg);

	const struct {
		const char *rec;
		size_t line;
		int err;
	} bad[] = {
		{"10100:@:active:a\n10100:@:active:b\n", 3, -EINVAL}, /* duplicate uid */
		{"10100:@:active:a\n10101:@:active:a\n", 3, -EINVAL}, /* duplicate id */
		{"10100:@:active:b\n", 2, -EINVAL},		      /* name not derived */
		{"100:@:active:a\n", 2, -EINVAL},		      /* uid out of range */
		{"10100:@:gone:a\n", 2, -EINVAL},		      /* bad state */
		{"10100:@:active:a:b\n", 2, -EINVAL},		      /* ':' in id */
		{"10100:@:active:a", 2, -EINVAL},		      /* torn last line */
		{"010100:@:active:a\n", 2, -EINVAL},		      /* a leading zero */
		{"10100:@:active:a\n010100:@:reserved:b\n", 3, -EINVAL},
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		size_t o = (size_t)snprintf(text, sizeof(text), "pistis-users-registry 1\n");
		for (const char *c = bad[i].rec; *c; c++)
			o += (size_t)snprintf(text + o, sizeof(text) - o, "%s",
					      *c == '@' ? a_name : (char[]){*c, 0});
		EXPECT_EQ(registry_parse(text, strlen(text), &reg, &line, &why), bad[i].err);
		EXPECT_EQ(line, (size_t)bad[i].line);
	}
	EXPECT_EQ(registry_parse("pistis-users-registry 2\n", 24, &reg, &line, &why),
		  -EPROTONOSUPPORT);
	EXPECT_EQ(registry_parse("10100:x:active:a\n", 17, &reg, &line, &why), -EINVAL);
	EXPECT_EQ(line, 1u);
}

/* registry_format appends the added records to the bytes read when those are exactly what
 * it would write; every other case (a comment, a blank line, a state
 * changed, a record deleted) is formatted from scratch. Both ways give the same bytes as
 * a fresh format of the same records. */
TEST(registry_format_appends_only_to_canonical_bytes)
{
	char a[USERS_NAME_MAX + 1], b[USERS_NAME_MAX + 1], c[USERS_NAME_MAX + 1];
	char text[1024], want[1024], *out;
	struct registry reg;
	size_t line, len;
	const char *why;

	ident_name_derive("a", 8, a);
	ident_name_derive("b", 8, b);
	ident_name_derive("c", 8, c);
	const struct {
		const char *head; /* between the header and the records */
		const char *uid_a;
		int edit; /* 0: add c; 1: add c and reserve a; 2: add c and delete b */
		bool append;
	} cases[] = {
		{"", "10100", 0, true},	      {"", "10100", 1, false},	 {"", "10100", 2, false},
		{"# x\n", "10100", 0, false}, {"\n", "10100", 0, false},
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		snprintf(text, sizeof(text),
			 "pistis-users-registry 1\n%s%s:%s:active:a\n10107:%s:reserved:b\n",
			 cases[i].head, cases[i].uid_a, a, b);
		ASSERT_EQ(registry_parse(text, strlen(text), &reg, &line, &why), 0);
		/* Read canonical: the edits below are what must send it to a full format. */
		EXPECT_EQ(reg.canonical, cases[i].append || cases[i].edit != 0);
		ASSERT_EQ(registry_add(&reg, 10101, c, "c", REGISTRY_ACTIVE), 0);
		if (cases[i].edit == 1)
			registry_find_id(&reg, "a")->state = REGISTRY_RESERVED;
		if (cases[i].edit == 2) {
			registry_delete(&reg, registry_find_id(&reg, "b"));
			EXPECT_FALSE(reg.canonical);
		}
		ASSERT_EQ(registry_format(&reg, &out, &len), 0);
		int o = snprintf(want, sizeof(want), "pistis-users-registry 1\n10100:%s:%s:a\n", a,
				 cases[i].edit == 1 ? "reserved" : "active");
		if (cases[i].edit != 2)
			o += snprintf(want + o, sizeof(want) - (size_t)o, "10107:%s:reserved:b\n",
				      b);
		snprintf(want + o, sizeof(want) - (size_t)o, "10101:%s:active:c\n", c);
		EXPECT_STREQ(out, want);
		EXPECT_EQ(len, strlen(want));
		/* The bytes read stay as read (ids are (id, id_len) into them): the append
		 * writes them as they are, the first of two pieces, not a copy. */
		EXPECT_EQ(memcmp(reg.buf, text, strlen(text)), 0);
		EXPECT_EQ(registry_find_name(&reg, a)->id_len, 1);
		EXPECT_EQ(registry_find_name(&reg, a)->id[0], 'a');
		struct iovec v[2];
		size_t n = 0;
		char *tail = NULL;
		ASSERT_EQ(registry_pieces(&reg, v, &n, &tail), 0);
		EXPECT_EQ(n, cases[i].append ? 2u : 1u);
		if (cases[i].append) {
			EXPECT_TRUE(v[0].iov_base == reg.buf);
			EXPECT_EQ(v[0].iov_len, strlen(text));
		}
		uarena_free(tail);
		/* The same bytes as the full format, which the append must never differ from. */
		bool canonical = reg.canonical;
		char *full = NULL;
		size_t full_len = 0;
		reg.canonical = false;
		ASSERT_EQ(registry_format(&reg, &full, &full_len), 0);
		reg.canonical = canonical;
		EXPECT_EQ(full_len, len);
		EXPECT_STREQ(full, out);
		free(full);
		free(out);
		registry_done(&reg);
	}
}

TEST(registry_lazy_parse_checks_syntax_everywhere_and_derivation_on_use)
{
	char a_name[USERS_NAME_MAX + 1], b_name[USERS_NAME_MAX + 1], text[1024];
	struct registry reg;
	struct registry_record *rec;
	size_t line;
	const char *why = NULL;

	ident_name_derive("a", 8, a_name);
	ident_name_derive("b", 8, b_name);
	/* b's name has the right shape but is not derived from "b". */
	snprintf(text, sizeof(text),
		 "pistis-users-registry 1\n10100:%s:active:a\n10101:pi-agent-%s:active:b\n", a_name,
		 "0123abcd");
	ASSERT_EQ(registry_parse_owned(strdup(text), strlen(text), true, &reg, &line, &why), 0);
	rec = registry_find_id(&reg, "a");
	ASSERT_NOT_NULL(rec);
	EXPECT_EQ(registry_verify(rec, &why), 0);
	rec = registry_find_id(&reg, "b");
	ASSERT_NOT_NULL(rec);
	EXPECT_EQ(registry_verify(rec, &why), -EINVAL);
	EXPECT_EQ(rec->line, 3u);
	EXPECT_STREQ(why, "user name is not derived from the agent id");
	EXPECT_NOT_NULL(registry_find_name(&reg, a_name));
	EXPECT_NULL(registry_find_name(&reg, b_name));
	registry_done(&reg);
	/* The strict parse refuses the same text at the same line. */
	EXPECT_EQ(registry_parse(text, strlen(text), &reg, &line, &why), -EINVAL);
	EXPECT_EQ(line, 3u);

	/* Every other check stays in the lazy parse: syntax and duplicates on any line. */
	const char *bad[] = {
		"10100:@:active:a\n10100:@:active:b\n",			    /* duplicate uid */
		"10100:@:active:a\n10101:@:active:b\n",			    /* duplicate name */
		"10100:@:active:a\n10101:pi-agent-0123abcd:active:a\n",	    /* duplicate id */
		"10100:@:active:a\n10101:pi-agent-zz:active:b\n",	    /* name shape */
		"10100:@:active:a\n10101:pi-agent-0123abcd:gone:b\n",	    /* state */
		"10100:@:active:a\n10101:pi-agent-0123abcd:active:b\x01\n", /* control byte */
		"10100:@:active:a\n10101:pi-agent-0123abcd:active:-b\n",    /* id shape */
		"10100:@:active:a\n10101:pi-agent-0123abcd:active:b",	    /* torn last line */
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		size_t o = (size_t)snprintf(text, sizeof(text), "pistis-users-registry 1\n");
		for (const char *c = bad[i]; *c; c++)
			o += (size_t)snprintf(text + o, sizeof(text) - o, "%s",
					      *c == '@' ? a_name : (char[]){*c, 0});
		EXPECT_EQ(registry_parse_owned(strdup(text), strlen(text), true, &reg, &line, &why),
			  -EINVAL);
		EXPECT_EQ(line, 3u);
	}
}

TEST(registry_index_survives_add_and_delete)
{
	struct registry reg = {0};
	char name[USERS_NAME_MAX + 1], id[32];

	for (unsigned i = 0; i < 3000; i++) {
		snprintf(id, sizeof(id), "agent-%u", i);
		ident_name_derive(id, 8, name);
		ASSERT_EQ(registry_add(&reg, USERS_AGENT_UID_MIN + i, name, id, REGISTRY_ACTIVE),
			  0);
	}
	EXPECT_EQ(registry_add(&reg, 20000, name, "other", REGISTRY_ACTIVE), -EEXIST);
	registry_delete(&reg, registry_find_id(&reg, "agent-7"));
	EXPECT_NULL(registry_find_id(&reg, "agent-7"));
	for (unsigned i = 0; i < 3000; i += 97) {
		snprintf(id, sizeof(id), "agent-%u", i);
		ident_name_derive(id, 8, name);
		if (i == 7)
			continue;
		ASSERT_NOT_NULL(registry_find_id(&reg, id));
		EXPECT_EQ(registry_find_id(&reg, id)->uid, USERS_AGENT_UID_MIN + i);
		EXPECT_TRUE(registry_find_name(&reg, name) == registry_find_id(&reg, id));
	}
	registry_done(&reg);
}

/* --- file-system side: needs root (chown) ------------------------------------------ */

static void need_root(struct tap_metadata *_metadata)
{
	if (geteuid() != 0)
		SKIP("needs root");
	(void)_metadata;
}

static void write_file(const char *dir, const char *name, const char *text, mode_t mode, gid_t gid)
{
	char p[2048];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0 || loop_write(fd, text, strlen(text)) < 0 || fchown(fd, 0, gid) < 0 ||
	    fchmod(fd, mode) < 0)
		abort();
	close(fd);
}

static char *read_text(const char *dir, const char *name)
{
	char p[2048], *s = NULL;
	size_t len;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fd_read_all(fd, 1 << 20, &s, &len) < 0)
		s = NULL;
	close(fd);
	return s;
}

static char *make_root(void)
{
	char tmpl[] = "/tmp/test-users.XXXXXX", etc[2048];
	char *root = strdup(mkdtemp(tmpl));

	snprintf(etc, sizeof(etc), "%s/etc", root);
	mkdir(etc, 0755);
	write_file(etc, "passwd", PASSWD, 0644, 0);
	write_file(etc, "group", GROUP, 0644, 0);
	write_file(etc, "shadow", SHADOW, 0640, 42);
	write_file(etc, "gshadow", GSHADOW, 0640, 42);
	return root;
}

static void rm_root(char *root)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		abort();
	free(root);
}

static int stat_at(const char *root, const char *rel, struct stat *st)
{
	char p[2048];

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	return lstat(p, st);
}

static void ensure_and_check(struct tap_metadata *_metadata, bool openat2)
{
	char *root = make_root(), *pw;
	struct users_identity id, again;
	struct stat st;

	ufs_set_openat2(openat2);
	ASSERT_EQ(users_ensure(root, "agent-1", (uid_t)-1, &id), 0);
	EXPECT_EQ(id.uid, 10102u);
	pw = read_text(root, "etc/passwd");
	ASSERT_NOT_NULL(strstr(pw, id.name));
	free(pw);
	/* shadow keeps root:shadow 0640; the old file is the "-" backup. */
	ASSERT_EQ(stat_at(root, "etc/shadow", &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0640u);
	EXPECT_EQ(st.st_gid, 42u);
	pw = read_text(root, "etc/passwd-");
	EXPECT_STREQ(pw, PASSWD);
	free(pw);
	ASSERT_EQ(stat_at(root, "data/sandbox-home", &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0711u);
	EXPECT_EQ(st.st_uid, 0u);
	ASSERT_EQ(stat_at(root, "data/agents", &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0711u);
	ASSERT_EQ(stat_at(root, id.home + 1, &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0700u);
	EXPECT_EQ(st.st_uid, id.uid);
	EXPECT_EQ(st.st_gid, id.gid);
	ASSERT_EQ(stat_at(root, id.tmpdir + 1, &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0700u);
	EXPECT_EQ(st.st_uid, id.uid);
	ASSERT_EQ(stat_at(root, id.agent_dir + 1, &st), 0);
	EXPECT_EQ(st.st_uid, id.uid);
	ASSERT_EQ(stat_at(root, "data/pistis/users.registry", &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0600u);
	ASSERT_EQ(stat_at(root, "data/pistis", &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0700u);

	struct stat before, after;
	ASSERT_EQ(stat_at(root, "etc/passwd", &before), 0);
	ASSERT_EQ(users_ensure(root, "agent-1", (uid_t)-1, &again), 0);
	EXPECT_EQ(again.uid, id.uid);
	EXPECT_STREQ(again.name, id.name);
	/* An existing agent is confirmed without rewriting anything. */
	ASSERT_EQ(stat_at(root, "etc/passwd", &after), 0);
	EXPECT_EQ(after.st_ino, before.st_ino);
	ASSERT_EQ(users_lookup(root, "agent-1", &again), 0);
	EXPECT_STREQ(again.name, id.name);
	EXPECT_EQ(users_lookup(root, "agent-2", &again), -ENOENT);
	rm_root(root);
}

TEST(ensure_on_a_root_openat2)
{
	need_root(_metadata);
	ensure_and_check(_metadata, true);
}

TEST(ensure_on_a_root_fallback)
{
	need_root(_metadata);
	ensure_and_check(_metadata, false);
}

/* fdatasync as the library calls it (ufs_sync, between ensure's read of /etc and its
 * renames), with a writer that does not take /etc/.pwd.lock (busybox's adduser, a
 * script's >>) appending a line to <racing_root>/etc/passwd on each of the next
 * racing_left calls. */
static char *racing_root;
static unsigned racing_left;

int fdatasync(int fd)
{
	if (racing_root && racing_left > 0) {
		char path[2048];
		int w;

		racing_left--;
		snprintf(path, sizeof(path), "%s/etc/passwd", racing_root);
		w = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (w < 0 || write(w, "\nracer:x:2000:2000::/:/bin/sh", 29) != 29)
			abort();
		close(w);
	}
	return (int)syscall(SYS_fdatasync, fd);
}

static unsigned count(const char *s, const char *what)
{
	unsigned n = 0;

	for (; (s = strstr(s, what)); s++)
		n++;
	return n;
}

/* Such a line written while ensure held the lock was lost to its rename, without a word.
 * Now ensure sees /etc/passwd changed since it read it, writes nothing and tries again
 * (three tries in all): a writer that keeps writing gets -EAGAIN and nothing of ours;
 * one that writes once gets its line kept beside the agent's. */
TEST(ensure_keeps_lines_written_meanwhile_without_the_lock)
{
	char *root, *pw;
	struct users_identity id;
	unsigned n1;

	need_root(_metadata);
	root = make_root();
	racing_root = root;
	racing_left = 1000;
	EXPECT_EQ(users_ensure(root, "agent-race", (uid_t)-1, &id), -EAGAIN);
	EXPECT_NOT_NULL(strstr(users_last_error(), "/etc/passwd changed while"));
	pw = read_text(root, "etc/passwd");
	n1 = 1000 - racing_left;
	EXPECT_EQ(count(pw, "\nracer:x:2000:"), n1);
	EXPECT_GE(n1, 3u); /* one at least in each of the three tries */
	EXPECT_NULL(strstr(pw, "pi-agent-"));
	free(pw);
	EXPECT_EQ(users_lookup(root, "agent-race", &id), -ENOENT);

	racing_left = 1;
	ASSERT_EQ(users_ensure(root, "agent-race", (uid_t)-1, &id), 0);
	EXPECT_EQ(racing_left, 0u);
	pw = read_text(root, "etc/passwd");
	EXPECT_EQ(count(pw, "\nracer:x:2000:"), n1 + 1);
	EXPECT_NOT_NULL(strstr(pw, id.name));
	free(pw);
	racing_root = NULL;
	rm_root(root);
}

/* The same writer crossing the other writing calls: a batch, ensure-base and remove
 * returned -EAGAIN at once (only a single ensure tried again), and pistisd-entry's
 * ensure-base failed a container's start for it. Each reads again and tries again now,
 * the writer's line kept; one that keeps writing still gets -EAGAIN and nothing of ours. */
TEST(other_writers_try_again_after_a_write_without_the_lock)
{
	const char *ids[] = {"agent-b1", "agent-b2"};
	struct users_identity got[2], id;
	char *root, *pw;

	need_root(_metadata);
	root = make_root();
	racing_root = root;

	racing_left = 1;
	ASSERT_EQ(users_ensure_base(root), 0);
	EXPECT_EQ(racing_left, 0u);
	pw = read_text(root, "etc/group");
	EXPECT_NOT_NULL(strstr(pw, "pi-sandbox:"));
	free(pw);

	racing_left = 1;
	ASSERT_EQ(users_ensure_many(root, ids, 2, got), 0);
	EXPECT_EQ(racing_left, 0u);
	pw = read_text(root, "etc/passwd");
	EXPECT_NOT_NULL(strstr(pw, got[0].name));
	EXPECT_NOT_NULL(strstr(pw, got[1].name));
	free(pw);

	racing_left = 1;
	ASSERT_EQ(users_remove(root, "agent-b1", false), 0);
	EXPECT_EQ(racing_left, 0u);
	pw = read_text(root, "etc/passwd");
	EXPECT_NULL(strstr(pw, got[0].name));
	EXPECT_EQ(count(pw, "\nracer:x:2000:"), 3u);
	free(pw);

	racing_left = 1000;
	EXPECT_EQ(users_remove(root, "agent-b2", true), -EAGAIN);
	EXPECT_NOT_NULL(strstr(users_last_error(), "/etc/passwd changed while"));
	racing_left = 0;
	EXPECT_EQ(users_lookup(root, "agent-b2", &id), 0);
	pw = read_text(root, "etc/passwd");
	EXPECT_NOT_NULL(strstr(pw, got[1].name));
	free(pw);
	racing_root = NULL;
	rm_root(root);
}

/* The caller's fds are the caller's: a first ensure (no registry yet) once closed fd 0,
 * a ctx field zeroed instead of -1, and pistisd serve's next open landed on 0. */
TEST(ensure_leaves_the_callers_fds_alone)
{
	char *root;
	struct users_identity id;
	struct stat before[3], after[3];
	int saved = dup(0);

	need_root(_metadata);
	ASSERT_GE(saved, 0);
	for (int fd = 0; fd < 3; fd++)
		ASSERT_EQ(fstat(fd, &before[fd]), 0);
	root = make_root();
	ASSERT_EQ(users_ensure(root, "agent-fds", (uid_t)-1, &id), 0);
	ASSERT_EQ(users_ensure(root, "agent-fds", (uid_t)-1, &id), 0);
	ASSERT_EQ(users_ensure_base(root), 0);
	for (int fd = 0; fd < 3; fd++) {
		ASSERT_EQ(fstat(fd, &after[fd]), 0);
		EXPECT_EQ(after[fd].st_ino, before[fd].st_ino);
		EXPECT_EQ(after[fd].st_dev, before[fd].st_dev);
	}
	dup2(saved, 0);
	close(saved);
	rm_root(root);
}

TEST(open_dir_never_follows_a_link)
{
	char *root;
	char p[2048];
	int fd;

	need_root(_metadata);
	root = make_root();
	snprintf(p, sizeof(p), "%s/data", root);
	ASSERT_EQ(symlink("/", p), 0);
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int mode = 0; mode < 2; mode++) {
		ufs_set_openat2(mode == 0);
		EXPECT_EQ(ufs_open_dir(fd, "data/tmp"), -ELOOP);
		EXPECT_EQ(ufs_open_dir(fd, "data"), -ELOOP);
		EXPECT_EQ(ufs_open_dir(fd, "etc/../etc"), -EINVAL);
		int ok = ufs_open_dir(fd, "etc");
		EXPECT_GE(ok, 0);
		close(ok);
	}
	ufs_set_openat2(true);
	/* ensure refuses a /data that is a link (it would write outside the root), and says
	 * that this is why; a missing /etc is named missing, not taken for a link. */
	EXPECT_EQ(users_ensure(root, "a", (uid_t)-1, NULL), -ELOOP);
	EXPECT_NOT_NULL(strstr(users_last_error(), "cannot open /data (a symbolic link: refused)"));
	char etc[1024], away[1040];
	snprintf(etc, sizeof(etc), "%s/etc", root);
	snprintf(away, sizeof(away), "%s.away", etc);
	ASSERT_EQ(rename(etc, away), 0);
	EXPECT_EQ(users_lookup(root, "a", NULL), -ENOENT);
	EXPECT_NOT_NULL(strstr(users_last_error(), "/etc'"));
	EXPECT_NULL(strstr(users_last_error(), "link"));
	ASSERT_EQ(rename(away, etc), 0);
	close(fd);
	rm_root(root);
}

TEST(planted_symlink_at_home_is_replaced_not_followed)
{
	char *root, p[1024], target[4096];
	struct users_identity id;
	struct stat st;

	need_root(_metadata);
	root = make_root();
	ASSERT_EQ(users_ensure(root, "a", (uid_t)-1, &id), 0);
	/* An earlier life of the volume: the home is a link to a victim directory. */
	snprintf(target, sizeof(target), "%s/victim", root);
	ASSERT_EQ(mkdir(target, 0755), 0);
	snprintf(p, sizeof(p), "%s%s", root, id.home);
	ASSERT_EQ(system("true"), 0);
	snprintf(target, sizeof(target), "rm -rf '%s' && ln -s '%s/victim' '%s'", p, root, p);
	ASSERT_EQ(system(target), 0);
	snprintf(p, sizeof(p), "%s%s", root, id.agent_dir);
	snprintf(target, sizeof(target), "rm -rf '%s' && ln -s /etc '%s'", p, p);
	ASSERT_EQ(system(target), 0);

	ASSERT_EQ(users_ensure(root, "a", (uid_t)-1, &id), 0);
	ASSERT_EQ(stat_at(root, "victim", &st), 0);
	EXPECT_EQ(st.st_uid, 0u);
	EXPECT_EQ(st.st_mode & 07777, 0755u);
	ASSERT_EQ(stat(root, &st), 0);
	ASSERT_EQ(stat("/etc", &st), 0);
	EXPECT_EQ(st.st_uid, 0u);
	ASSERT_EQ(stat_at(root, id.home + 1, &st), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	EXPECT_EQ(st.st_uid, id.uid);
	ASSERT_EQ(stat_at(root, id.agent_dir + 1, &st), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	EXPECT_EQ(st.st_uid, id.uid);

	/* Inside its own home the agent swaps tmp for a link to root's directory, or
	 * moves in a directory it does not own: neither is followed nor adopted. */
	snprintf(p, sizeof(p), "%s%s", root, id.tmpdir);
	snprintf(target, sizeof(target), "rm -rf '%s' && ln -s '%s/victim' '%s'", p, root, p);
	ASSERT_EQ(system(target), 0);
	ASSERT_EQ(users_ensure(root, "a", (uid_t)-1, &id), 0);
	ASSERT_EQ(stat_at(root, "victim", &st), 0);
	EXPECT_EQ(st.st_uid, 0u);
	ASSERT_EQ(stat_at(root, id.tmpdir + 1, &st), 0);
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	EXPECT_EQ(st.st_uid, id.uid);
	snprintf(target, sizeof(target), "rmdir '%s' && mkdir '%s'", p, p);
	ASSERT_EQ(system(target), 0); /* now root-owned: not the agent's own */
	EXPECT_EQ(users_ensure(root, "a", (uid_t)-1, &id), -EPERM);
	ASSERT_EQ(stat_at(root, id.tmpdir + 1, &st), 0);
	EXPECT_EQ(st.st_uid, 0u);
	rm_root(root);
}

/* The lock-free confirmation of an existing agent looks for its name and its id in the
 * whole of /etc/group, /etc/gshadow and /etc/passwd: a place it must not be sends the call
 * to the locked path, which refuses; a longer name that merely contains it does not. Lines
 * at the very end of a file, without a newline, included (the scans' edges). */
TEST(fast_path_sends_doubt_to_the_locked_path)
{
	char *root = make_root(), etc[2048], text[4096], line[4][128];
	struct users_identity id;

	snprintf(etc, sizeof(etc), "%s/etc", root);
	ASSERT_EQ(users_ensure(root, "fast", (uid_t)-1, &id), 0);
	snprintf(line[0], sizeof(line[0]), "staff:x:50:daemon,%s", id.name);
	snprintf(line[1], sizeof(line[1]), "staff:x:50:daemon,%sx", id.name);
	snprintf(line[2], sizeof(line[2]), "staff:*:%s:", id.name);
	snprintf(line[3], sizeof(line[3]), "twin:x:%u:%u::/:/bin/sh", id.uid, id.uid);
	/* glibc skips white space before a member name: these are memberships. */
	char spaced[3][128];
	snprintf(spaced[0], sizeof(spaced[0]), "sudo:x:27: %s", id.name);
	snprintf(spaced[1], sizeof(spaced[1]), "sudo:*::daemon, %s", id.name);
	snprintf(spaced[2], sizeof(spaced[2]), "sudo:x:27:\t%s", id.name);
	char twin_group[64];
	snprintf(twin_group, sizeof(twin_group), "twin:x:%u:", id.uid);
	/* A second line of one of pistis's names (initgroups reads every line), and the
	 * agent's uid with a leading zero on another user (the same uid to the C libraries). */
	char second[9][128];
	snprintf(second[0], sizeof(second[0]), "pi-sandbox:x:0:%s", id.name);
	snprintf(second[1], sizeof(second[1]), "%s:x:27:%s", id.name, id.name);
	snprintf(second[2], sizeof(second[2]), "%s:x:0:0::/:/bin/sh", id.name);
	snprintf(second[3], sizeof(second[3]), "%s::1::::::", id.name);
	snprintf(second[4], sizeof(second[4]), "pi-tools:x:0:pi-tools");
	snprintf(second[5], sizeof(second[5]), "pi-sandbox:!::%s", id.name);
	snprintf(second[6], sizeof(second[6]), "twin:x:0%u:1::/:/bin/sh", id.uid);
	/* glibc reads ids with strtoul: a sign or a space before the number is the same uid
	 * to it; the lock-free path's ":UID:" search missed them and confirmed the agent */
	snprintf(second[7], sizeof(second[7]), "twin:x:+%u:1::/:/bin/sh", id.uid);
	snprintf(second[8], sizeof(second[8]), "twin:x: %u:1::/:/bin/sh", id.uid);
	const struct {
		const char *file, *tail, *why; /* why NULL: confirmed */
		mode_t mode;
		gid_t gid;
	} cases[] = {
		{"group", line[0], "member of group 'staff' in /etc/group", 0644, 0},
		{"group", line[1], NULL, 0644, 0}, /* a longer name that contains it */
		{"gshadow", line[2], "administrator of group 'staff'", 0640, 42},
		{"passwd", line[3], "user 'twin' in /etc/passwd shares id", 0644, 0},
		{"group", twin_group, "group 'twin' in /etc/group shares gid", 0644, 0},
		{"group", spaced[0], "member of group 'sudo' in /etc/group", 0644, 0},
		{"gshadow", spaced[1], "member of group 'sudo' in /etc/gshadow", 0640, 42},
		/* a tab is a control byte: the parser refuses the file */
		{"group", spaced[2], "control character", 0644, 0},
		{"group", second[0], "group 'pi-sandbox' has a second line in /etc/group", 0644, 0},
		{"group", second[1], "has a second line in /etc/group", 0644, 0},
		{"passwd", second[2], "has a second line in /etc/passwd", 0644, 0},
		{"shadow", second[3], "has a second line in /etc/shadow", 0640, 42},
		{"group", second[4], "group 'pi-tools' has a second line in /etc/group", 0644, 0},
		{"gshadow", second[5], "group 'pi-sandbox' has a second line in /etc/gshadow", 0640,
		 42},
		{"passwd", second[6], "user 'twin' in /etc/passwd shares id", 0644, 0},
		{"passwd", second[7], "invalid uid", 0644, 0},
		{"passwd", second[8], "invalid uid", 0644, 0},
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char rel[32], *orig;
		snprintf(rel, sizeof(rel), "etc/%s", cases[i].file);
		orig = read_text(root, rel);
		ASSERT_NOT_NULL(orig);
		/* The planted line last, without a newline: the scans' far edge. */
		snprintf(text, sizeof(text), "%s%s%s", orig,
			 orig[0] && orig[strlen(orig) - 1] != '\n' ? "\n" : "", cases[i].tail);
		write_file(etc, cases[i].file, text, cases[i].mode, cases[i].gid);
		int r = users_ensure(root, "fast", (uid_t)-1, &id);
		if (cases[i].why) {
			EXPECT_EQ(r,
				  strstr(cases[i].why, "control") || strstr(cases[i].why, "invalid")
					  ? -EINVAL
					  : -EEXIST);
			EXPECT_NOT_NULL(strstr(users_last_error(), cases[i].why));
		} else {
			EXPECT_EQ(r, 0);
		}
		write_file(etc, cases[i].file, orig, cases[i].mode, cases[i].gid);
		free(orig);
	}
	EXPECT_EQ(users_ensure(root, "fast", (uid_t)-1, &id), 0);
	rm_root(root);
}

/* The confirmation of an existing agent checks pi-tools' password and the group passwords
 * of pi-sandbox and pi-tools on the lines it reads, as the locked path does (ensure_base):
 * one that is not locked sends the call there, which refuses it. */
TEST(fast_path_checks_the_base_passwords)
{
	char *root = make_root(), etc[2048];
	struct users_identity id;
	const struct {
		const char *file, *from, *to, *why;
		mode_t mode;
		gid_t gid;
	} cases[] = {
		{"passwd", "\npi-tools:x:", "\npi-tools::",
		 "user 'pi-tools' has a password in /etc/passwd", 0644, 0},
		{"shadow", "\npi-tools:!:", "\npi-tools::",
		 "user 'pi-tools' has a password in /etc/shadow", 0640, 42},
		{"shadow", "\npi-tools:!:", "\npi-tools:$6$s$h:", "has a password in /etc/shadow",
		 0640, 42},
		{"group", "\npi-tools:x:", "\npi-tools:pw:",
		 "group 'pi-tools' has a password in /etc/group", 0644, 0},
		{"gshadow", "\npi-tools:!:", "\npi-tools::",
		 "group 'pi-tools' has a password in /etc/gshadow", 0640, 42},
		{"group", "\npi-sandbox:x:", "\npi-sandbox:pw:",
		 "group 'pi-sandbox' has a password in /etc/group", 0644, 0},
		{"gshadow", "\npi-sandbox:!:", "\npi-sandbox:$6$s$h:",
		 "group 'pi-sandbox' has a password in /etc/gshadow", 0640, 42},
	};

	snprintf(etc, sizeof(etc), "%s/etc", root);
	ASSERT_EQ(users_ensure(root, "fast", (uid_t)-1, &id), 0);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char rel[32], text[8192], *orig, *at;
		snprintf(rel, sizeof(rel), "etc/%s", cases[i].file);
		orig = read_text(root, rel);
		ASSERT_NOT_NULL(orig);
		at = strstr(orig, cases[i].from);
		ASSERT_NOT_NULL(at);
		snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - orig), orig, cases[i].to,
			 at + strlen(cases[i].from));
		write_file(etc, cases[i].file, text, cases[i].mode, cases[i].gid);
		EXPECT_EQ(users_ensure(root, "fast", (uid_t)-1, &id), -EEXIST);
		EXPECT_NOT_NULL(strstr(users_last_error(), cases[i].why));
		write_file(etc, cases[i].file, orig, cases[i].mode, cases[i].gid);
		free(orig);
	}
	EXPECT_EQ(users_ensure(root, "fast", (uid_t)-1, &id), 0);
	rm_root(root);
}

/* The confirmation of an existing agent checks pi-tools' group and memberships on the lines
 * it reads, and looks for pi-tools' name and id anywhere else in the files, as the locked
 * path does (ensure_base): any such place sends the call there, which refuses it. */
TEST(fast_path_keeps_pi_tools_to_itself)
{
	char *root = make_root(), etc[2048], own_from[128], own_to[128];
	struct users_identity id;

	snprintf(etc, sizeof(etc), "%s/etc", root);
	ASSERT_EQ(users_ensure(root, "fast", (uid_t)-1, &id), 0);
	snprintf(own_from, sizeof(own_from), "\n%s:x:%u:\n", id.name, id.uid);
	snprintf(own_to, sizeof(own_to), "\n%s:x:%u:pi-tools\n", id.name, id.uid);
	const struct {
		const char *file, *from, *to, *why; /* why NULL: confirmed */
		mode_t mode;
		gid_t gid;
	} cases[] = {
		{"group", "\npi-tools:x:10002:\n", "\npi-tools:x:10002:daemon\n",
		 "group 'pi-tools' lists members or administrators other than pi-tools in "
		 "/etc/group",
		 0644, 0},
		{"gshadow", "\npi-tools:!::\n", "\npi-tools:!:daemon:\n",
		 "other than pi-tools in /etc/gshadow", 0640, 42},
		{"gshadow", "\npi-tools:!::\n", "\npi-tools:!::daemon\n",
		 "other than pi-tools in /etc/gshadow", 0640, 42},
		{"group", "root:x:0:\n", "root:x:0:pi-tools\n",
		 "user 'pi-tools' is a member of group 'root' in /etc/group (line 1)", 0644, 0},
		{"group", "\ndaemon:x:1:\n", "\ndaemon:x:1: pi-tools\n",
		 "user 'pi-tools' is a member of group 'daemon' in /etc/group (line 2)", 0644, 0},
		{"group", "\npi-sandbox:x:10010:", "\npi-sandbox:x:10010:pi-tools,",
		 "a member of group 'pi-sandbox' in /etc/group", 0644, 0},
		{"group", own_from, own_to, "a member of group 'pi-agent-", 0644, 0},
		{"gshadow", "root:*::\n", "root:*:pi-tools:\n",
		 "user 'pi-tools' is an administrator of group 'root' in /etc/gshadow", 0640, 42},
		{"gshadow", "root:*::\n", "root:*::pi-tools\n",
		 "user 'pi-tools' is a member of group 'root' in /etc/gshadow", 0640, 42},
		{"passwd", "\nnobody:", "\nalias:x:10002:1::/:/bin/sh\nnobody:",
		 "user 'alias' in /etc/passwd shares id 10002", 0644, 0},
		{"passwd", "\nnobody:", "\nsvc:x:500:10002::/:/bin/sh\nnobody:",
		 "user 'svc' in /etc/passwd shares id 10002", 0644, 0},
		{"group", "\nnogroup:", "\ntools2:x:10002:\nnogroup:",
		 "group 'tools2' in /etc/group shares gid 10002", 0644, 0},
		{"group", "\ndaemon:x:1:\n", "\ndaemon:x:1:pi-toolsx\n", NULL, 0644, 0},
		{"group", "\npi-tools:x:10002:\n", "\npi-tools:x:10002:pi-tools\n", NULL, 0644, 0},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		char rel[32], text[8192], *orig, *at;
		snprintf(rel, sizeof(rel), "etc/%s", cases[i].file);
		orig = read_text(root, rel);
		ASSERT_NOT_NULL(orig);
		at = strstr(orig, cases[i].from);
		ASSERT_NOT_NULL(at);
		snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - orig), orig, cases[i].to,
			 at + strlen(cases[i].from));
		write_file(etc, cases[i].file, text, cases[i].mode, cases[i].gid);
		int r = users_ensure(root, "fast", (uid_t)-1, &id);
		if (cases[i].why) {
			EXPECT_EQ(r, -EEXIST);
			EXPECT_NOT_NULL(strstr(users_last_error(), cases[i].why));
		} else {
			EXPECT_EQ(r, 0);
		}
		/* Refused: nothing written (the planted line is still there). */
		char *now = read_text(root, rel);
		ASSERT_NOT_NULL(now);
		if (cases[i].why)
			EXPECT_STREQ(now, text);
		free(now);
		write_file(etc, cases[i].file, orig, cases[i].mode, cases[i].gid);
		free(orig);
	}
	EXPECT_EQ(users_ensure(root, "fast", (uid_t)-1, &id), 0);
	rm_root(root);
}

/* users_last_error_text, for a log line: the reason with each name escaped once, its quote
 * too; users_last_error keeps the raw line for a JSON answer. */
TEST(last_error_text_escapes_names_once)
{
	char *root, etc[2048], text[4096];

	need_root(_metadata);
	root = make_root();
	snprintf(etc, sizeof(etc), "%s/etc", root);
	snprintf(text, sizeof(text), "%s\nx'in'/etc\\n\xff:x:10002:10002::/:/bin/sh\n", PASSWD);
	write_file(etc, "passwd", text, 0644, 0);
	EXPECT_EQ(users_ensure_base(root), -EEXIST);
	EXPECT_STREQ(users_last_error_text(),
		     "uid 10002 is taken by user 'x\\'in\\'/etc\\\\n\\xff' in /etc/passwd");
	EXPECT_STREQ(users_last_error(),
		     "uid 10002 is taken by user 'x'in'/etc\\n\xff' in /etc/passwd");
	rm_root(root);
}

TEST(corrupt_files_name_file_and_line_and_write_nothing)
{
	char *root, etc[2048], *before, *after;

	need_root(_metadata);
	root = make_root();
	snprintf(etc, sizeof(etc), "%s/etc", root);
	write_file(etc, "group", "root:x:0:\nbroken:x:zero:\n", 0644, 0);
	EXPECT_EQ(users_ensure(root, "a", (uid_t)-1, NULL), -EINVAL);
	EXPECT_NOT_NULL(strstr(users_last_error(), "/etc/group:2: invalid gid"));
	before = read_text(root, "etc/passwd");
	EXPECT_STREQ(before, PASSWD);
	free(before);
	EXPECT_NULL(read_text(root, "data/pistis/users.registry"));
	EXPECT_NULL(read_text(root, "etc/passwd-"));

	write_file(etc, "group", GROUP, 0644, 0);
	ASSERT_EQ(users_ensure(root, "a", (uid_t)-1, NULL), 0);
	snprintf(etc, sizeof(etc), "%s/data/pistis", root);
	before = read_text(root, "data/pistis/users.registry");
	char *bad = malloc(strlen(before) + 32);
	sprintf(bad, "%s10200:pi-agent-zz:active:b\n", before);
	write_file(etc, "users.registry", bad, 0600, 0);
	free(bad);
	free(before);
	before = read_text(root, "etc/passwd");
	EXPECT_EQ(users_ensure(root, "b", (uid_t)-1, NULL), -EINVAL);
	EXPECT_NOT_NULL(strstr(users_last_error(), "/data/pistis/users.registry:3:"));
	after = read_text(root, "etc/passwd");
	EXPECT_STREQ(after, before);
	free(before);
	free(after);
	rm_root(root);
}

/* A name not derived from its id is found when that record is used (ensure, lookup,
 * remove, list); a record nobody uses costs no SHA-256. A syntax error anywhere is still
 * an error naming file and line, with nothing written. */
TEST(registry_derivation_checked_on_use)
{
	char *root, dir[2048], *reg, *bad, *before, *after;
	struct users_identity id;
	struct users_entry *v = NULL;
	size_t n = 0;

	need_root(_metadata);
	root = make_root();
	ASSERT_EQ(users_ensure(root, "a", (uid_t)-1, NULL), 0);
	snprintf(dir, sizeof(dir), "%s/data/pistis", root);
	reg = read_text(root, "data/pistis/users.registry");
	bad = malloc(strlen(reg) + 64);
	sprintf(bad, "%s10200:pi-agent-0123abcd:active:b\n", reg);
	write_file(dir, "users.registry", bad, 0600, 0);
	before = read_text(root, "etc/passwd");
	EXPECT_EQ(users_ensure(root, "b", (uid_t)-1, NULL), -EINVAL);
	EXPECT_NOT_NULL(strstr(users_last_error(), "/data/pistis/users.registry:3: user name is "
						   "not derived from the agent id"));
	EXPECT_EQ(users_lookup(root, "b", &id), -EINVAL);
	EXPECT_EQ(users_remove(root, "b", false), -EINVAL);
	EXPECT_EQ(users_list(root, &v, &n), -EINVAL);
	EXPECT_NOT_NULL(strstr(users_last_error(), "users.registry:3:"));
	after = read_text(root, "etc/passwd");
	EXPECT_STREQ(after, before);
	free(after);
	/* Another agent: b's record is not used, so it is not hashed. */
	EXPECT_EQ(users_lookup(root, "a", &id), 0);
	EXPECT_EQ(users_ensure(root, "c", (uid_t)-1, NULL), 0);

	/* A broken line that nobody uses is still refused. */
	sprintf(bad, "%s10201:pi-agent-zz:active:d\n", reg);
	write_file(dir, "users.registry", bad, 0600, 0);
	free(before);
	before = read_text(root, "etc/passwd");
	EXPECT_EQ(users_ensure(root, "e", (uid_t)-1, NULL), -EINVAL);
	EXPECT_NOT_NULL(
		strstr(users_last_error(), "/data/pistis/users.registry:3: invalid user name"));
	after = read_text(root, "etc/passwd");
	EXPECT_STREQ(after, before);
	free(after);
	free(before);
	free(bad);
	free(reg);
	rm_root(root);
}

/* root's etc directory: its path in dir, an fd to it returned. */
static int open_etc(const char *root, char *dir, size_t size)
{
	snprintf(dir, size, "%s/etc", root);
	return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* Staging: nothing reaches the real name before ufs_sync; commit keeps the old file as the
 * "-" backup; abort leaves no trace. */
TEST(staged_files_sync_then_commit)
{
	char *root, dir[2048], *t;
	_cleanup_close_ int fd = -1;
	struct ufs_staged a, b;
	struct ufs_staged *v[] = {&a, &b};
	struct iovec iov[] = {{.iov_base = "new ", .iov_len = 4},
			      {.iov_base = "text\n", .iov_len = 5}};

	need_root(_metadata);
	root = make_root();
	fd = open_etc(root, dir, sizeof(dir));
	ASSERT_GE(fd, 0);
	write_file(dir, "f", "old\n", 0640, 0);
	ASSERT_EQ(ufs_stage(&a, fd, "f", iov, 2, 0, 0, 0640, true), 0);
	ASSERT_EQ(ufs_stage(&b, fd, "g", iov, 1, 0, 0, 0600, false), 0);
	t = read_text(root, "etc/f");
	EXPECT_STREQ(t, "old\n");
	free(t);
	t = read_text(root, "etc/f+");
	EXPECT_STREQ(t, "new text\n");
	free(t);
	ASSERT_EQ(ufs_sync(v, 2), 0);
	ASSERT_EQ(ufs_commit(&a), 0);
	t = read_text(root, "etc/f");
	EXPECT_STREQ(t, "new text\n");
	free(t);
	t = read_text(root, "etc/f-");
	EXPECT_STREQ(t, "old\n");
	free(t);
	ufs_abort(&b);
	EXPECT_NULL(read_text(root, "etc/g"));
	EXPECT_NULL(read_text(root, "etc/g+"));
	/* Not synced: never renamed over the real file. */
	ASSERT_EQ(ufs_stage(&a, fd, "f", iov, 1, 0, 0, 0640, true), 0);
	EXPECT_EQ(ufs_commit(&a), -EINVAL);
	t = read_text(root, "etc/f");
	EXPECT_STREQ(t, "new text\n");
	free(t);
	EXPECT_NULL(read_text(root, "etc/f+"));
	rm_root(root);
}

static ino_t ino_of(int dfd, const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_ino : 0;
}

/* One staged replacement of dir_fd/f with text, synced and committed. */
static int replace(int fd, const char *text)
{
	struct ufs_staged a;
	struct ufs_staged *v[] = {&a};
	struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
	int r = ufs_stage(&a, fd, "f", &iov, 1, 0, 0, 0640, true);

	if (r < 0)
		return r;
	r = ufs_sync(v, 1);
	return r < 0 ? (ufs_abort(&a), r) : ufs_commit(&a);
}

/* The previous backup's inode is rewritten and swapped in (RENAME_EXCHANGE) only when it is
 * a plain file of the right owner and mode that nobody else has open: a reader holding it
 * keeps its bytes, a reader opening it meanwhile waits for the whole new content, and a
 * failed batch leaves the backup a true version of the file. */
TEST(backup_rewritten_in_place_only_when_no_one_has_it_open)
{
	char *root, dir[2048], p[2100], *t;
	_cleanup_close_ int fd = -1, held = -1;
	struct ufs_staged a;
	struct iovec iov = {.iov_base = "v4 longer\n", .iov_len = 10};
	ino_t cur, bak;
	char buf[64];
	int pfd[2];
	pid_t pid;

	need_root(_metadata);
	root = make_root();
	fd = open_etc(root, dir, sizeof(dir));
	ASSERT_GE(fd, 0);
	write_file(dir, "f", "v1 with a long tail\n", 0640, 0);
	ASSERT_EQ(replace(fd, "v2\n"), 0); /* no backup yet: a new file, f- linked */
	cur = ino_of(fd, "f");
	bak = ino_of(fd, "f-");
	ASSERT_EQ(replace(fd, "v3\n"), 0);
	/* Recycled: the old backup's inode holds v3 now, the v2 inode is the backup. */
	EXPECT_EQ(ino_of(fd, "f"), bak);
	EXPECT_EQ(ino_of(fd, "f-"), cur);
	t = read_text(root, "etc/f");
	EXPECT_STREQ(t, "v3\n"); /* the longer old content cut to length */
	free(t);
	t = read_text(root, "etc/f-");
	EXPECT_STREQ(t, "v2\n");
	free(t);

	/* A reader still holding the backup (it opened f when the backup was current): the
	 * lease is refused, a new file is made, the reader's bytes stay. */
	snprintf(p, sizeof(p), "%s/f-", dir);
	held = open(p, O_RDONLY | O_CLOEXEC);
	ASSERT_GE(held, 0);
	cur = ino_of(fd, "f");
	bak = ino_of(fd, "f-");
	ASSERT_EQ(replace(fd, "v4\n"), 0);
	EXPECT_NE(ino_of(fd, "f"), bak);
	EXPECT_EQ(ino_of(fd, "f-"), cur);
	ASSERT_EQ(pread(held, buf, sizeof(buf), 0), 3);
	EXPECT_EQ(memcmp(buf, "v2\n", 3), 0);
	held = safe_close(held);

	/* Another link, owner or mode than the file needs: never rewritten. */
	snprintf(p, sizeof(p), "%s/f-", dir);
	ASSERT_EQ(chmod(p, 0644), 0);
	bak = ino_of(fd, "f-");
	ASSERT_EQ(replace(fd, "v5\n"), 0);
	EXPECT_NE(ino_of(fd, "f"), bak);
	snprintf(p, sizeof(p), "%s/f-", dir);
	snprintf(buf, sizeof(buf), "%s", "f-link");
	ASSERT_EQ(linkat(fd, "f-", fd, buf, 0), 0);
	bak = ino_of(fd, "f-");
	ASSERT_EQ(replace(fd, "v6\n"), 0);
	EXPECT_NE(ino_of(fd, "f"), bak);
	t = read_text(root, "etc/f-link");
	EXPECT_STREQ(t, "v4\n");
	free(t);
	ASSERT_EQ(unlinkat(fd, "f-link", 0), 0);

	/* Someone opening the backup while it is rewritten waits until the content is whole. */
	ASSERT_EQ(replace(fd, "v7\n"), 0); /* f- is v6 now, recyclable */
	bak = ino_of(fd, "f-");
	ASSERT_EQ(ufs_stage(&a, fd, "f", &iov, 1, 0, 0, 0640, true), 0);
	ASSERT_TRUE(a.recycled);
	ASSERT_EQ(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char b[64] = "";
		int o;

		close(a.fd); /* the lease is the parent's open file, not this copy's */
		o = openat(fd, "f-", O_RDONLY); /* waits for the lease */
		ssize_t n = o < 0 ? -1 : read(o, b, sizeof(b));

		bool whole = n == 10 && !memcmp(b, "v4 longer\n", 10);

		_exit(whole && write(pfd[1], "k", 1) == 1 ? 0 : 1);
	}
	close(pfd[1]);
	struct pollfd pl = {.fd = pfd[0], .events = POLLIN};
	EXPECT_EQ(poll(&pl, 1, 300), 0); /* still waiting in open() */
	struct ufs_staged *v[] = {&a};
	ASSERT_EQ(ufs_sync(v, 1), 0); /* closes: the lease goes, the open goes on */
	EXPECT_EQ(poll(&pl, 1, 10000), 1);
	int status;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(pfd[0]);
	ASSERT_EQ(ufs_commit(&a), 0);
	EXPECT_EQ(ino_of(fd, "f"), bak);

	/* A batch that fails after the backup was rewritten: the backup becomes the current
	 * file, never content that did not take effect. */
	ASSERT_EQ(ufs_stage(&a, fd, "f", &iov, 1, 0, 0, 0640, true), 0);
	ASSERT_TRUE(a.recycled);
	ufs_abort(&a);
	EXPECT_EQ(ino_of(fd, "f-"), ino_of(fd, "f"));
	t = read_text(root, "etc/f");
	EXPECT_STREQ(t, "v4 longer\n");
	free(t);

	/* Off: always a new file. */
	ufs_set_recycle(false);
	ASSERT_EQ(unlinkat(fd, "f-", 0), 0);
	ASSERT_EQ(replace(fd, "v8\n"), 0);
	bak = ino_of(fd, "f-");
	ASSERT_EQ(replace(fd, "v9\n"), 0);
	EXPECT_NE(ino_of(fd, "f"), bak);
	ufs_set_recycle(true);
	rm_root(root);
}

/* A staged "+" file left by a crashed writer is replaced, never followed or reused: a
 * symlink or a FIFO in its place is removed and a new regular file made; owner and mode
 * come out exact whatever the umask. */
TEST(staged_file_replaces_leftovers)
{
	char *root, dir[2048], p[2100], *t;
	_cleanup_close_ int fd = -1;
	struct ufs_staged a, b;
	struct ufs_staged *v[] = {&a, &b};
	struct iovec iov = {.iov_base = "x\n", .iov_len = 2};
	struct stat st;
	mode_t old_umask;

	need_root(_metadata);
	root = make_root();
	fd = open_etc(root, dir, sizeof(dir));
	ASSERT_GE(fd, 0);
	write_file(dir, "target", "untouched\n", 0600, 0);
	snprintf(p, sizeof(p), "%s/f+", dir);
	ASSERT_EQ(symlink("target", p), 0);
	snprintf(p, sizeof(p), "%s/g+", dir);
	ASSERT_EQ(mkfifo(p, 0600), 0);
	old_umask = umask(077);
	ASSERT_EQ(ufs_stage(&a, fd, "f", &iov, 1, 10150, 42, 0644, false), 0);
	ASSERT_EQ(ufs_stage(&b, fd, "g", &iov, 1, 0, 0, 0640, false), 0);
	umask(old_umask);
	ASSERT_EQ(ufs_sync(v, 2), 0);
	ASSERT_EQ(ufs_commit(&a), 0);
	ASSERT_EQ(ufs_commit(&b), 0);
	t = read_text(root, "etc/target");
	EXPECT_STREQ(t, "untouched\n");
	free(t);
	ASSERT_EQ(fstatat(fd, "f", &st, AT_SYMLINK_NOFOLLOW), 0);
	EXPECT_TRUE(S_ISREG(st.st_mode));
	EXPECT_EQ(st.st_mode & 07777, 0644u);
	EXPECT_EQ(st.st_uid, 10150u);
	EXPECT_EQ(st.st_gid, 42u);
	ASSERT_EQ(fstatat(fd, "g", &st, AT_SYMLINK_NOFOLLOW), 0);
	EXPECT_TRUE(S_ISREG(st.st_mode));
	EXPECT_EQ(st.st_mode & 07777, 0640u);
	t = read_text(root, "etc/g");
	EXPECT_STREQ(t, "x\n");
	free(t);
	rm_root(root);
}

/* The batch form: one lock and one rewrite for many agents, the same identities as one by
 * one, and all or nothing. */
TEST(ensure_many_is_all_or_nothing)
{
	const char *ids[] = {"m1", "m2", "m1", "m3"};
	struct users_identity got[ELEMENTSOF(ids)], one;
	char *root, etc[2048], *before, *after;

	need_root(_metadata);
	root = make_root();
	ASSERT_EQ(users_ensure(root, "m0", (uid_t)-1, &one), 0);
	ASSERT_EQ(users_ensure_many(root, ids, ELEMENTSOF(ids), got), 0);
	EXPECT_EQ(got[0].uid, one.uid + 1);
	EXPECT_EQ(got[1].uid, one.uid + 2);
	EXPECT_EQ(got[2].uid, got[0].uid);
	EXPECT_EQ(got[3].uid, one.uid + 3);
	for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
		EXPECT_EQ(users_ensure(root, ids[i], (uid_t)-1, &one), 0); /* fast path: complete */
		EXPECT_STREQ(one.name, got[i].name);
		EXPECT_EQ(one.uid, got[i].uid);
	}
	const char *bad[] = {"m4", "-m5"};
	EXPECT_EQ(users_ensure_many(root, bad, 2, got), -EINVAL);
	EXPECT_EQ(users_ensure_many(root, bad, 0, got), -E2BIG);
	/* A conflict (pi-sandbox with another gid) refuses the whole batch, writing nothing. */
	snprintf(etc, sizeof(etc), "%s/etc", root);
	before = read_text(root, "etc/group");
	char *g = malloc(strlen(before) + 32);
	ASSERT_NOT_NULL(g);
	sprintf(g, "%s", before);
	char *ps = strstr(g, "pi-sandbox:x:10010:");
	ASSERT_NOT_NULL(ps);
	memcpy(ps + strlen("pi-sandbox:x:"), "10011", 5);
	write_file(etc, "group", g, 0644, 0);
	free(g);
	free(before);
	before = read_text(root, "data/pistis/users.registry");
	const char *more[] = {"m6", "m7"};
	EXPECT_EQ(users_ensure_many(root, more, 2, got), -EEXIST);
	after = read_text(root, "data/pistis/users.registry");
	EXPECT_STREQ(after, before);
	free(after);
	free(before);
	rm_root(root);
}

TEST(remove_reserves_and_forget_releases)
{
	char *root = NULL, *pw;
	struct users_identity a, b;
	struct users_entry *v = NULL;
	size_t n = 0;

	need_root(_metadata);
	root = make_root();
	ASSERT_EQ(users_ensure(root, "a", (uid_t)-1, &a), 0);
	ASSERT_EQ(users_remove(root, "a", false), 0);
	pw = read_text(root, "etc/passwd");
	EXPECT_NULL(strstr(pw, a.name));
	free(pw);
	pw = read_text(root, "etc/group");
	EXPECT_NULL(strstr(pw, a.name));
	free(pw);
	ASSERT_EQ(users_list(root, &v, &n), 0);
	ASSERT_EQ(n, 1u);
	EXPECT_FALSE(v[0].active);
	free(v);
	EXPECT_EQ(users_lookup(root, "a", &b), -ENOENT);
	ASSERT_EQ(users_ensure(root, "b", (uid_t)-1, &b), 0);
	EXPECT_NE(b.uid, a.uid);
	ASSERT_EQ(users_remove(root, "a", true), 0);
	EXPECT_EQ(users_remove(root, "a", true), -ENOENT);
	ASSERT_EQ(users_ensure(root, "c", a.uid, &b), 0);
	EXPECT_EQ(b.uid, a.uid);
	rm_root(root);
}

/* `users remove` takes the agent out of gshadow's administrator lists (field 3) as well as
 * the member lists: an admin of a group can add members to it with gpasswd. Every other
 * byte stays: other admins, empty entries, a CR, a name that only starts like the
 * agent's. */
TEST(remove_clears_gshadow_admin_lists)
{
	struct users_db db;
	struct users_identity a;
	char line[3][256], want[1024], *out;

	db_load(&db, PASSWD, GROUP, SHADOW, GSHADOW);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	/* What gpasswd -A (or an image's /etc) may add after the agent was made. */
	snprintf(line[0], sizeof(line[0]), "appgrp:!:%s:app", a.name);
	snprintf(line[1], sizeof(line[1]), "daemon:*:ops,%s,,%sx:%s,ops", a.name, a.name, a.name);
	snprintf(line[2], sizeof(line[2]), "nogroup:!:%s,%s:", a.name, a.name);
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(pwfile_append(&db.f[PWFILE_GSHADOW], line[i]), 0);
	ASSERT_EQ(users_db_remove(&db, "a", false), 0);
	out = db_text(&db, PWFILE_GSHADOW);
	snprintf(want, sizeof(want),
		 "root:*::\npi-sandbox:!::\npi-tools:!::\nappgrp:!::app\ndaemon:*:ops,,%sx:"
		 "ops\nnogroup:!::\n",
		 a.name);
	EXPECT_STREQ(out, want);
	free(out);
	users_db_done(&db);
}

TEST(pwfile_admin_remove_keeps_the_rest_of_the_line)
{
	const char *g = "a:!:x,y:x\r\nb:*:y:\nc:!::x\n";
	struct pwfile f;
	size_t line, len;
	const char *why;
	char *out;

	ASSERT_EQ(pwfile_parse(PWFILE_GSHADOW, g, strlen(g), &f, &line, &why), 0);
	EXPECT_EQ(pwfile_admin_remove(&f, 0, "x"), 1);
	EXPECT_EQ(pwfile_admin_remove(&f, 1, "y"), 1);
	EXPECT_EQ(pwfile_admin_remove(&f, 2, "x"), 0); /* a member, not an admin */
	ASSERT_EQ(pwfile_format(&f, &out, &len), 0);
	EXPECT_STREQ(out, "a:!:y:x\r\nb:*::\nc:!::x\n");
	free(out);
	pwfile_done(&f);
	ASSERT_EQ(pwfile_parse(PWFILE_GROUP, "a:x:1:x\n", 8, &f, &line, &why), 0);
	EXPECT_EQ(pwfile_admin_remove(&f, 0, "x"), -EINVAL);
	pwfile_done(&f);
}

/* The read side (trusted install's sudo -l): readers share, a writer waits for them and
 * a reader for a writer; a FIFO or a link is refused unopened as on the write side. */
TEST(lock_read_side_shares_with_readers_only)
{
	char *root = NULL, p[2048];
	int dfd, fd, pipefd[2];
	pid_t pid;
	char c;

	need_root(_metadata);
	root = make_root();
	dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(dfd, 0);
	ASSERT_EQ(pipe2(pipefd, O_CLOEXEC), 0);
	/* POSIX locks are per process: the other holder is a child. */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int l = ufs_lock(dfd, "lock", 1000, UFS_LOCK_READ);

		(void)!write(pipefd[1], l >= 0 ? "r" : "x", 1);
		pause();
		_exit(0);
	}
	ASSERT_EQ(read(pipefd[0], &c, 1), 1);
	ASSERT_EQ(c, 'r');
	fd = ufs_lock(dfd, "lock", 100, UFS_LOCK_READ);
	EXPECT_GE(fd, 0);
	if (fd >= 0)
		close(fd);
	EXPECT_EQ(ufs_lock(dfd, "lock", 100, 0), -ETIMEDOUT);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int l = ufs_lock(dfd, "lock", 1000, 0);

		(void)!write(pipefd[1], l >= 0 ? "w" : "x", 1);
		pause();
		_exit(0);
	}
	ASSERT_EQ(read(pipefd[0], &c, 1), 1);
	ASSERT_EQ(c, 'w');
	EXPECT_EQ(ufs_lock(dfd, "lock", 100, UFS_LOCK_READ), -ETIMEDOUT);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	snprintf(p, sizeof(p), "%s/fifo", root);
	ASSERT_EQ(mkfifo(p, 0600), 0);
	EXPECT_EQ(ufs_lock(dfd, "fifo", 15000, UFS_LOCK_READ), -EBADFD);
	ASSERT_EQ(symlinkat("lock", dfd, "link"), 0);
	EXPECT_EQ(ufs_lock(dfd, "link", 100, UFS_LOCK_READ), -ELOOP);
	close(pipefd[0]);
	close(pipefd[1]);
	close(dfd);
	rm_root(root);
}

/* A lock file that is a FIFO (no reader: O_WRONLY would block forever), a socket, another
 * owner's file or a group/other-writable one: refused at once, nothing blocks. */
TEST(lock_refuses_fifo_socket_and_foreign_files)
{
	char *root = NULL, p[2048];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timespec t0, t1;
	int dfd, fd, s;

	need_root(_metadata);
	root = make_root();
	dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(dfd, 0);
	snprintf(p, sizeof(p), "%s/fifo", root);
	ASSERT_EQ(mkfifo(p, 0600), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT_EQ(ufs_lock(dfd, "fifo", 15000, 0), -EBADFD);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	EXPECT_LT(t1.tv_sec - t0.tv_sec, 2);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", root);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_GE(s, 0);
	if (strlen(root) + 5 < sizeof(sa.sun_path)) {
		ASSERT_EQ(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
		EXPECT_EQ(ufs_lock(dfd, "sock", 100, 0), -EBADFD);
	}
	close(s);
	write_file(root, "foreign", "", 0600, 0);
	ASSERT_EQ(fchownat(dfd, "foreign", 10150, 10150, 0), 0);
	EXPECT_EQ(ufs_lock(dfd, "foreign", 100, 0), -EPERM);
	write_file(root, "loose", "", 0666, 0);
	EXPECT_EQ(ufs_lock(dfd, "loose", 100, UFS_NO_GROUP_OTHER_WRITE), -EPERM);
	/* Not asked of /etc/.pwd.lock: the type and the owner only. O_NONBLOCK is gone. */
	fd = ufs_lock(dfd, "loose", 100, 0);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	close(fd);
	/* A missing one is created, root 0600. */
	fd = ufs_lock(dfd, "new", 100, UFS_NO_GROUP_OTHER_WRITE);
	ASSERT_GE(fd, 0);
	close(fd);
	close(dfd);
	/* Through users_ensure: the file is named, and the error comes at once. */
	snprintf(p, sizeof(p), "%s/etc/.pwd.lock", root);
	ASSERT_EQ(mkfifo(p, 0600), 0);
	EXPECT_EQ(users_ensure(root, "a", (uid_t)-1, NULL), -EBADFD);
	EXPECT_NOT_NULL(strstr(users_last_error(), "/etc/.pwd.lock"));
	unlink(p);
	ASSERT_EQ(users_ensure(root, "a", (uid_t)-1, NULL), 0);
	snprintf(p, sizeof(p), "%s/data/pistis/users.registry.lock", root);
	unlink(p);
	ASSERT_EQ(mkfifo(p, 0600), 0);
	EXPECT_EQ(users_ensure(root, "b", (uid_t)-1, NULL), -EBADFD);
	EXPECT_NOT_NULL(strstr(users_last_error(), "users.registry.lock"));
	rm_root(root);
}

static void expect_registry_refused(struct tap_metadata *_metadata, const char *root)
{
	struct users_identity id;
	struct users_entry *v = NULL;
	size_t n = 0;

	EXPECT_EQ(users_lookup(root, "a", &id), -EPERM);
	EXPECT_EQ(users_list(root, &v, &n), -EPERM);
	free(v);
	EXPECT_EQ(users_ensure(root, "a", (uid_t)-1, &id), -EPERM); /* existing: fast path */
	EXPECT_EQ(users_ensure(root, "new", (uid_t)-1, &id), -EPERM);
	EXPECT_EQ(users_remove(root, "a", false), -EPERM);
}

/* The registry, its directory: root-owned and not group/other-writable, checked on the
 * opened fds by every path; a repair of a mere 0755 still happens. */
TEST(registry_owner_and_mode_checked_on_every_path)
{
	char *root = NULL, dir[2048], file[2100];
	struct users_identity id;
	struct stat st;

	need_root(_metadata);
	root = make_root();
	ASSERT_EQ(users_ensure(root, "a", (uid_t)-1, &id), 0);
	snprintf(dir, sizeof(dir), "%s/data/pistis", root);
	snprintf(file, sizeof(file), "%s/users.registry", dir);
	ASSERT_EQ(chmod(file, 0620), 0);
	expect_registry_refused(_metadata, root);
	EXPECT_NOT_NULL(strstr(users_last_error(), "users.registry"));
	ASSERT_EQ(chmod(file, 0600), 0);
	ASSERT_EQ(chown(file, 10150, 10150), 0);
	expect_registry_refused(_metadata, root);
	ASSERT_EQ(chown(file, 0, 0), 0);
	ASSERT_EQ(chmod(dir, 0777), 0);
	expect_registry_refused(_metadata, root);
	EXPECT_EQ(stat(dir, &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0777u); /* refused, not repaired */
	ASSERT_EQ(chmod(dir, 0755), 0);
	ASSERT_EQ(chown(dir, 10150, 0), 0);
	expect_registry_refused(_metadata, root);
	ASSERT_EQ(chown(dir, 0, 0), 0);
	EXPECT_EQ(users_lookup(root, "a", &id), 0);
	EXPECT_EQ(users_ensure(root, "b", (uid_t)-1, &id), 0);
	EXPECT_EQ(stat(dir, &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0700u);
	rm_root(root);
}

/* statx's mount-root attribute (or the st_dev fallback) on a known mount point. */
TEST(stat_mount_sees_a_mount_point)
{
	struct stat st;
	bool mount = false;
	int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	ASSERT_GE(root, 0);
	ASSERT_EQ(ufs_stat_mount(root, root, "proc", AT_SYMLINK_NOFOLLOW, &st, &mount), 0);
	EXPECT_TRUE(mount);
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	ASSERT_EQ(ufs_stat_mount(root, root, "etc", AT_SYMLINK_NOFOLLOW, &st, &mount), 0);
	EXPECT_FALSE(mount);
	close(root);
}

static void bind_at(struct tap_metadata *_metadata, const char *src, const char *root,
		    const char *rel)
{
	char p[2048];

	snprintf(p, sizeof(p), "%s%s", root, rel);
	ASSERT_EQ(mount(src, p, NULL, MS_BIND, NULL), 0);
}

/* A bind mount at the home, the TMPDIR or /data/agents/<user> is never handed over, even
 * one the agent already owns; the fast path sends it to the refusal too. */
TEST(mount_point_homes_refused)
{
	char *root = NULL, src[] = "/tmp/test-users-src.XXXXXX", p[2048];
	struct users_identity id;
	struct stat st;

	need_root(_metadata);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		SKIP("no mount namespace");
	root = make_root();
	ASSERT_NOT_NULL(mkdtemp(src));
	ASSERT_EQ(chmod(src, 0755), 0);
	ASSERT_EQ(users_ensure(root, "a", (uid_t)-1, &id), 0);
	for (int i = 0; i < 3; i++) {
		const char *rel = i == 0 ? id.home : i == 1 ? id.tmpdir : id.agent_dir;
		bind_at(_metadata, src, root, rel);
		EXPECT_EQ(users_ensure(root, "a", (uid_t)-1, &id), -EBUSY);
		EXPECT_NOT_NULL(strstr(users_last_error(), "mount point"));
		ASSERT_EQ(stat(src, &st), 0);
		EXPECT_EQ(st.st_uid, 0u);
		EXPECT_EQ(st.st_mode & 07777, 0755u);
		/* Already the agent's: refused all the same (the fast path does not confirm it). */
		ASSERT_EQ(chown(src, id.uid, id.gid), 0);
		ASSERT_EQ(chmod(src, 0700), 0);
		EXPECT_EQ(users_ensure(root, "a", (uid_t)-1, &id), -EBUSY);
		snprintf(p, sizeof(p), "%s%s", root, rel);
		ASSERT_EQ(umount2(p, MNT_DETACH), 0);
		ASSERT_EQ(chown(src, 0, 0), 0);
		ASSERT_EQ(chmod(src, 0755), 0);
		EXPECT_EQ(users_ensure(root, "a", (uid_t)-1, &id), 0);
	}
	rmdir(src);
	rm_root(root);
}

/* Two pages of 'a' between PROT_NONE pages: a buffer placed at the end of the readable
 * ones (or at their start) faults on any load past its end (or before its start). */
static char *guarded_pages(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, (size_t)pg * 4, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED || mprotect(m + pg, (size_t)pg * 2, PROT_READ | PROT_WRITE) < 0)
		return NULL;
	memset(m + pg, 'a', (size_t)pg * 2);
	return m + pg;
}

/* The lengths around the 16-byte steps and their last partial blocks. */
static const size_t edge_lens[] = {0,  1,  2,  7,  8,  15, 16, 17,  18,	 19,  31,
				   32, 33, 34, 47, 48, 49, 63, 100, 255, 256, 1000};

TEST(scan_chr_and_rchr_find_memchr_s_byte_at_the_edges)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *base = guarded_pages();

	ASSERT_NOT_NULL(base);
	for (size_t k = 0; k < ELEMENTSOF(edge_lens); k++)
		for (int at_end = 0; at_end < 2; at_end++) {
			size_t n = edge_lens[k];
			char *p = at_end ? base + 2 * pg - (long)n : base;
			/* no match, then one at each place (0 and n - 1 among them) */
			EXPECT_NULL(scan_chr(p, n, ':'));
			EXPECT_NULL(scan_rchr(p, n, ':'));
			for (size_t j = 0; j < n; j++) {
				p[j] = ':';
				ASSERT_EQ(scan_chr(p, n, ':'), p + j);
				ASSERT_EQ(scan_rchr(p, n, ':'), p + j);
				/* two: the first and the last, in other blocks or the same */
				for (size_t i = j + 1; i < n && i < j + 40; i++) {
					p[i] = ':';
					ASSERT_EQ(scan_chr(p, n, ':'), p + j);
					ASSERT_EQ(scan_rchr(p, n, ':'), p + i);
					p[i] = 'a';
				}
				p[j] = 'a';
			}
			/* a match just outside the buffer is not one */
			if (!at_end) {
				p[n] = ':';
				EXPECT_NULL(scan_chr(p, n, ':'));
				p[n] = 'a';
			} else if (n < (size_t)pg) {
				p[-1] = ':';
				EXPECT_NULL(scan_rchr(p, n, ':'));
				p[-1] = 'a';
			}
		}
	/* random bytes against memchr and memrchr (every byte value, 0x80 and up too) */
	srandom(7);
	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)random() % 200;
		char *p = base + 2 * pg - (long)n;
		for (size_t j = 0; j < n; j++)
			p[j] = random() % 8 ? 'a' : (char)(random() % 256);
		char c = (char)(random() % 256);
		ASSERT_EQ(scan_chr(p, n, c), memchr(p, c, n));
		ASSERT_EQ(scan_rchr(p, n, c), memrchr(p, c, n));
	}
	munmap(base - pg, (size_t)pg * 4);
}

/* users.c's rule, a byte at a time: the reference scan_odd_number must agree with. */
static bool odd_number_slow(const char *d, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (d[i] != ':')
			continue;
		char c = d[i + 1];
		if ((c == '0' && i + 2 < n && d[i + 2] >= '0' && d[i + 2] <= '9') || c == '+' ||
		    c == '-' || c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r')
			return true;
	}
	return false;
}

TEST(scan_odd_number_finds_every_odd_spelling_at_the_edges)
{
	static const char *const odd[] = {":00", ":09", ":+",  ":-", ": ",
					  ":\t", ":\v", ":\f", ":\r"};
	static const char *const fine[] = {":0:", ":0a", ":0", ":1", ":\n", ":/", ":", ":x"};
	long pg = sysconf(_SC_PAGESIZE);
	char *base = guarded_pages();

	ASSERT_NOT_NULL(base);
	for (size_t k = 0; k < ELEMENTSOF(edge_lens); k++)
		for (int at_end = 0; at_end < 2; at_end++) {
			size_t n = edge_lens[k];
			char *p = at_end ? base + 2 * pg - (long)n : base;
			EXPECT_FALSE(scan_odd_number(p, n));
			for (size_t j = 0; j < n; j++) {
				for (size_t s = 0; s < ELEMENTSOF(odd); s++) {
					size_t m = strlen(odd[s]);
					if (j + m > n)
						continue;
					memcpy(p + j, odd[s], m);
					ASSERT_TRUE(scan_odd_number(p, n));
					memset(p + j, 'a', m);
				}
				for (size_t s = 0; s < ELEMENTSOF(fine); s++) {
					size_t m = strlen(fine[s]);
					if (j + m > n)
						continue;
					memcpy(p + j, fine[s], m);
					ASSERT_FALSE(scan_odd_number(p, n));
					memset(p + j, 'a', m);
				}
				/* cut short by the buffer's end: ":0" then the digit beyond it */
				if (j + 2 == n) {
					memcpy(p + j, ":0", 2);
					if (!at_end)
						p[n] = '7';
					ASSERT_FALSE(scan_odd_number(p, n));
					memset(p + j, 'a', 3 - (size_t)at_end);
				}
			}
		}
	srandom(11);
	for (int round = 0; round < 20000; round++) {
		static const char alphabet[] = "::::0000123+- \t\n\v\f\ra";
		size_t n = (size_t)random() % 80;
		char *p = base + 2 * pg - (long)n;
		for (size_t j = 0; j < n; j++)
			p[j] = alphabet[(size_t)random() % (sizeof(alphabet) - 1)];
		ASSERT_EQ(scan_odd_number(p, n), odd_number_slow(p, n));
	}
	munmap(base - pg, (size_t)pg * 4);
}

TEST(scan_find_short_needles_at_the_edges)
{
	static const char *const needles[] = {"\n0", ":1:", "\n0:", "ab", "pi-agent-", ":10100:"};
	long pg = sysconf(_SC_PAGESIZE);
	char *base = guarded_pages();

	ASSERT_NOT_NULL(base);
	for (size_t k = 0; k < ELEMENTSOF(edge_lens); k++)
		for (size_t s = 0; s < ELEMENTSOF(needles); s++) {
			size_t n = edge_lens[k], m = strlen(needles[s]);
			char *p = base + 2 * pg - (long)n;
			EXPECT_NULL(scan_find(p, n, needles[s], m));
			for (size_t j = 0; j + m <= n; j++) {
				memcpy(p + j, needles[s], m);
				ASSERT_EQ(scan_find(p, n, needles[s], m), p + j);
				/* the needle cut by the buffer's end is not found */
				ASSERT_NULL(scan_find(p, j + m - 1, needles[s], m));
				memset(p + j, 'a', m);
			}
		}
	srandom(13);
	for (int round = 0; round < 20000; round++) {
		static const char alphabet[] = "\n\n0:1a";
		size_t n = (size_t)random() % 100, m = 2 + (size_t)random() % 3;
		char *p = base + 2 * pg - (long)n, needle[4];
		for (size_t j = 0; j < n; j++)
			p[j] = alphabet[(size_t)random() % (sizeof(alphabet) - 1)];
		for (size_t j = 0; j < m; j++)
			needle[j] = alphabet[(size_t)random() % (sizeof(alphabet) - 1)];
		ASSERT_EQ(scan_find(p, n, needle, m), memmem(p, n, needle, m));
	}
	munmap(base - pg, (size_t)pg * 4);
}

/* The fast path's one pass per file: for each name what pwfile_scan answers, and whether
 * a later line starts with "name:" too. */
TEST(pwfile_scan_names_finds_first_lines_and_second_ones)
{
	static const char pw[] = "ab:x:9:9::/:/bin/sh\n"
				 "a:x:1:1::/:/bin/sh\n"
				 "b:x:2:2::/:/bin/sh\r\n"
				 "# a:x:5:5::/:/bin/sh\n"
				 "c:x:3\n"
				 "a:x:3:3::/:/bin/sh\n"
				 "c:x:4:4::/:/bin/sh\n"
				 "d:x:7:7::/:/bin/sh";
	const char *const names[] = {"a", "b", "c", "d"}, *const none[] = {"e", "abc"};
	long pg = sysconf(_SC_PAGESIZE);
	char *base = guarded_pages();
	struct pwfile_found f[4];
	struct pwfile_line l;

	ASSERT_NOT_NULL(base);
	/* at the end of a page: the last line, without its newline, ends the buffer */
	char *p = base + 2 * pg - (long)strlen(pw);
	memcpy(p, pw, strlen(pw));
	ASSERT_EQ(pwfile_scan_names(PWFILE_PASSWD, p, strlen(pw), names, 4, f), 0);
	for (size_t k = 0; k < 4; k++) {
		EXPECT_EQ(f[k].r, pwfile_scan(PWFILE_PASSWD, p, strlen(pw), names[k], &l));
		if (f[k].r == 0) {
			EXPECT_EQ(f[k].line.off, l.off);
			EXPECT_EQ(f[k].line.len, l.len);
			EXPECT_EQ(f[k].line.id, l.id);
		}
	}
	EXPECT_EQ(f[0].r, 0);
	EXPECT_EQ(f[0].line.off, 20u);
	EXPECT_TRUE(f[0].second);
	EXPECT_EQ(f[1].r, 0);
	EXPECT_EQ(f[1].line.term, 2);
	EXPECT_FALSE(f[1].second);
	EXPECT_EQ(f[2].r, -EINVAL); /* its first line is broken, and a second follows */
	EXPECT_TRUE(f[2].second);
	EXPECT_EQ(f[3].r, 0);
	EXPECT_EQ(f[3].line.id, 7u);
	EXPECT_FALSE(f[3].second);
	ASSERT_EQ(pwfile_scan_names(PWFILE_PASSWD, p, strlen(pw), none, 2, f), 0);
	EXPECT_EQ(f[0].r, -ENOENT);
	EXPECT_FALSE(f[0].second);
	EXPECT_EQ(f[1].r, -ENOENT); /* "ab:" is not "abc" */
	/* the buffer cut anywhere: never read past it, and the same answers as pwfile_scan */
	for (size_t n = 0; n <= strlen(pw); n++) {
		char *q = base + 2 * pg - (long)n;
		memmove(q, pw, n);
		ASSERT_EQ(pwfile_scan_names(PWFILE_PASSWD, q, n, names, 4, f), 0);
		for (size_t k = 0; k < 4; k++)
			ASSERT_EQ(f[k].r, pwfile_scan(PWFILE_PASSWD, q, n, names[k], &l));
	}
	const char *const empty[] = {"a", ""};
	EXPECT_EQ(pwfile_scan_names(PWFILE_PASSWD, pw, strlen(pw), names, 0, f), -EINVAL);
	EXPECT_EQ(pwfile_scan_names(PWFILE_PASSWD, pw, strlen(pw), names, PWFILE_SCAN_NAMES_MAX + 1,
				    f),
		  -EINVAL);
	EXPECT_EQ(pwfile_scan_names(PWFILE_PASSWD, pw, strlen(pw), empty, 2, f), -EINVAL);
	EXPECT_EQ(pwfile_scan_names(_PWFILE_KIND_MAX, pw, strlen(pw), names, 1, f), -EINVAL);
	munmap(base - pg, (size_t)pg * 4);
}

TEST_HARNESS_MAIN

/* NIS compat lines ('+'/'-' first) with fields are read as glibc's and musl's files
 * parsers read them: initgroups and musl's getgrouplist honour their member lists, and
 * musl's getpwuid their uids. So their ids are taken and their memberships refused, as
 * for any other line; a bare "+" or "-name" is kept and means nothing here. */
TEST(nis_compat_lines_count)
{
	static const char pw[] = "root:x:0:0:root:/root:/bin/sh\n+\n-someone\n"
				 "+svc:x:10100:10100::/nonexistent:/bin/sh\n+@ng::::::\n";
	static const char gr[] = "root:x:0:\n+:::\n-@ng\n-grp:x:10101:\n";
	struct users_db db;
	struct users_identity a;
	char bad[256];

	/* The uid of a '+' passwd line and the gid of a '-' group line are taken. */
	db_load(&db, pw, gr, NULL, NULL);
	ASSERT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), 0);
	EXPECT_EQ(a.uid, 10102u);
	EXPECT_EQ(users_db_ensure(&db, "b", 10100, &a), -EEXIST);
	EXPECT_TRUE(strstr(db.err, "user '+svc'") != NULL);
	EXPECT_EQ(users_db_ensure(&db, "c", 10101, &a), -EEXIST);
	EXPECT_TRUE(strstr(db.err, "group '-grp'") != NULL);
	users_db_done(&db);

	/* A membership on a '+' or '-' group line is refused, as on any other. */
	for (int sign = 0; sign < 2; sign++) {
		char name[USERS_NAME_MAX + 1];
		ASSERT_EQ(ident_name_derive("a", IDENT_HEX_MIN, name), 0);
		snprintf(bad, sizeof(bad), "root:x:0:\n%cshadow:x:42:%s\n", sign ? '-' : '+', name);
		db_load(&db, pw, bad, NULL, NULL);
		EXPECT_EQ(users_db_ensure(&db, "a", (uid_t)-1, &a), -EEXIST);
		EXPECT_TRUE(strstr(db.err, sign ? "group '-shadow'" : "group '+shadow'") != NULL);
		users_db_done(&db);
	}
}

/* The lookup tables (pwfile_index) that users list and a batch use: the same lines, the
 * same identities and the same refusals as the walks a single ensure makes, over a list
 * long enough for pi-sandbox's member set and in-place growth (3,000 agents). */
TEST(indexed_files_decide_as_the_walks_do)
{
	static const char pw[] = "root:x:0:0:root:/root:/bin/sh\n"
				 "svc:x:10105:10105::/:/bin/sh\n"
				 "gsvc:x:900:10107::/:/bin/sh\n";
	char gr[512], name[USERS_NAME_MAX + 1], id[32];
	struct users_db plain, ix;
	struct users_identity a, b;
	int refused = 0;

	/* agent-2500 is named, before it exists, as a member of sudo. */
	ASSERT_EQ(ident_name_derive("agent-2500", IDENT_HEX_MIN, name), 0);
	snprintf(gr, sizeof(gr), "root:x:0:\nsudo:x:27:%s\ngrp:x:10110:\n", name);
	db_load(&plain, pw, gr, SHADOW, GSHADOW);
	db_load(&ix, pw, gr, SHADOW, GSHADOW);
	for (int i = 0; i < 3000; i++) {
		snprintf(id, sizeof(id), "agent-%d", i);
		for (int k = 0; k < _PWFILE_KIND_MAX; k++)
			if (!ix.f[k].ix)
				ASSERT_EQ(pwfile_index(&ix.f[k]), 0);
		int r1 = users_db_ensure(&plain, id, (uid_t)-1, &a);
		int r2 = users_db_ensure(&ix, id, (uid_t)-1, &b);
		ASSERT_EQ(r1, r2);
		if (r1 < 0) {
			EXPECT_STREQ(plain.err, ix.err);
			refused++;
			continue;
		}
		EXPECT_EQ(a.uid, b.uid);
		EXPECT_STREQ(a.name, b.name);
	}
	EXPECT_EQ(refused, 1);			    /* agent-2500, a member of sudo */
	EXPECT_TRUE(ix.f[PWFILE_GROUP].ix != NULL); /* kept through the appends */
	for (int k = 0; k < _PWFILE_KIND_MAX; k++) {
		char *t1 = db_text(&plain, k), *t2 = db_text(&ix, k);
		EXPECT_STREQ(t1, t2);
		free(t1);
		free(t2);
	}
	/* The uid a passwd line holds, and one held as a primary gid, are refused by name. */
	EXPECT_EQ(users_db_ensure(&ix, "x1", 10105, &b), -EEXIST);
	EXPECT_TRUE(strstr(ix.err, "svc") != NULL);
	EXPECT_EQ(users_db_ensure(&ix, "x2", 10107, &b), -EEXIST);
	EXPECT_TRUE(strstr(ix.err, "primary group of user 'gsvc'") != NULL);
	users_db_done(&plain);
	users_db_done(&ix);

	/* A second line of pi-sandbox far down the file: found through the tables too. */
	snprintf(gr, sizeof(gr),
		 "root:x:0:\npi-sandbox:x:10010:\ngrp:x:10110:\n"
		 "pi-sandbox:x:0:\n");
	db_load(&ix, pw, gr, SHADOW, GSHADOW);
	for (int k = 0; k < _PWFILE_KIND_MAX; k++)
		ASSERT_EQ(pwfile_index(&ix.f[k]), 0);
	EXPECT_EQ(users_db_ensure(&ix, "agent-1", (uid_t)-1, &b), -EEXIST);
	EXPECT_TRUE(strstr(ix.err, "second line") != NULL);
	users_db_done(&ix);
}
