/* RELRO is in force (lib/relro.c for the static PIEs, ld.so for the ASan build): what the
 * loader relocated and nothing may change afterwards is read-only by the time main runs.
 * Without lib/relro.c every write below succeeds, in a static PIE and in the non-PIE
 * static binaries built before it alike (gcc makes PIE code by default, so such tables
 * were in writable .data.rel.ro there too, at a fixed address). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/self-phdr.h"
#include "lib/tap.h"

static int one(void)
{
	return 1;
}

static int two(void)
{
	return 2;
}

/* Constant, but holds addresses: relocated at start in a PIE, so it lives in .data.rel.ro
 * (in a non-PIE program, in .rodata). */
static int (*const table[])(void) = {one, two};

/* Defined by ld's default script for every executable (hidden). */
extern void (*const __init_array_start[])(void) __attribute__((visibility("hidden")));

/* The permissions of the mapping that holds p, from /proc/self/maps ("r--p"), or "". */
static void perms_of(const void *p, char ret[5])
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");

	ret[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		char perms[5];

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s", &lo, &hi, perms) == 3 &&
		    (uintptr_t)p >= lo && (uintptr_t)p < hi) {
			memcpy(ret, perms, 5);
			break;
		}
	}
	fclose(f);
}

TEST(const_pointer_table_is_mapped_read_only)
{
	char perms[5];

	perms_of(table, perms);
	ASSERT_STREQ(perms, "r--p");
	perms_of(__init_array_start, perms);
	ASSERT_STREQ(perms, "r--p");
}

/* Whether the kernel lets the process write len bytes at p (as a store would: a
 * copy_to_user into a page without write permission fails with EFAULT). It writes back
 * the bytes already there, so a success changes nothing. A real store would fault, but
 * ASan turns SIGSEGV into an abort, and this test runs in the ASan build too. Returns 0
 * when the write went through, else -errno. */
static int try_write(void *p, size_t len)
{
	int fds[2], r = 0;

	if (pipe(fds) < 0)
		return -errno;
	if (write(fds[1], p, len) != (ssize_t)len)
		r = -EIO;
	else if (read(fds[0], p, len) < 0)
		r = -errno;
	close(fds[0]);
	close(fds[1]);
	return r;
}

TEST(write_to_const_pointer_table_refused)
{
	ASSERT_EQ(try_write((void *)&table[0], sizeof(table[0])), -EFAULT);
}

TEST(write_to_init_array_refused)
{
	ASSERT_EQ(try_write((void *)&__init_array_start[0], sizeof(__init_array_start[0])),
		  -EFAULT);
}

TEST(writable_data_still_writable)
{
	static int (*slot)(void) = one;

	ASSERT_EQ(try_write((void *)&slot, sizeof(slot)), 0);
}

TEST(table_still_calls_through)
{
	ASSERT_EQ(table[0](), 1);
	ASSERT_EQ(table[1](), 2);
}

/* The mapping of /proc/self/maps that holds addr: its start, permissions, file offset and
 * path. 0 when found. */
static int mapping_of(uintptr_t addr, uintptr_t *ret_lo, char ret_perms[5],
		      unsigned long long *ret_off, char *ret_path, size_t path_size)
{
	char line[PATH_MAX + 128];
	FILE *f = fopen("/proc/self/maps", "re");
	int r = -ENOENT;

	if (!f)
		return -errno;
	while (r && fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		int at = 0;

		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %llx %*s %*s %n", &lo, &hi,
			   ret_perms, ret_off, &at) < 4 ||
		    addr < lo || addr >= hi)
			continue;
		*ret_lo = lo;
		snprintf(ret_path, path_size, "%s", at ? line + at : "");
		r = 0;
	}
	fclose(f);
	return r;
}

/* The program headers and load bias self_phdr_get reports (lib/relro.c's constructor and
 * `pistisd users`' map_code use them) put every read-only PT_LOAD segment where the kernel
 * shows this binary's file mapped: at the file offset the header names, with its
 * permissions, and the page size the kernel's. A wrong bias or page size points elsewhere. */
TEST(self_phdr_segments_are_where_maps_shows_them)
{
	struct self_phdr self;
	char exe[PATH_MAX] = "", path[PATH_MAX], perms[5];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	unsigned checked = 0;

	ASSERT_GT(n, 0);
	ASSERT_EQ(self_phdr_get(&self), 0);
	ASSERT_EQ(self.page, (uintptr_t)sysconf(_SC_PAGESIZE));
	ASSERT_GT(self.n, 0u);
	for (size_t i = 0; i < self.n; i++) {
		const ElfW(Phdr) *ph = &self.ph[i];
		uintptr_t a, lo = 0;
		unsigned long long off = 0;

		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
			continue;
		a = (self.bias + ph->p_vaddr) & ~(self.page - 1);
		ASSERT_EQ(mapping_of(a, &lo, perms, &off, path, sizeof(path)), 0);
		EXPECT_STREQ(path, exe);
		EXPECT_EQ(off + (a - lo), (unsigned long long)(ph->p_offset & ~(self.page - 1)));
		EXPECT_EQ(perms[0] == 'r', !!(ph->p_flags & PF_R));
		EXPECT_EQ(perms[2] == 'x', !!(ph->p_flags & PF_X));
		checked++;
	}
	EXPECT_GT(checked, 0u);
}

TEST_HARNESS_MAIN
