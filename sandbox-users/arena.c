/* A per-call bump allocator over one anonymous mapping: see arena.h. */
#include "sandbox-users/arena.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Address space only (MAP_NORESERVE, nothing committed until populated): enough for a
 * registry and /etc of tens of thousands of agents; larger calls go on in malloc for the
 * blocks that no longer fit. */
#define ARENA_RESERVE ((size_t)64 << 20)
#define ARENA_ALIGN 16
#define ARENA_PAGE ((size_t)4096)
/* Two zones. A call's first ARENA_SMALL_MAX bytes come from 4 KiB pages; a call that
 * needs more moves on to the huge zone, which starts at the first 2 MiB boundary of the
 * mapping and may be backed by transparent huge pages (MADV_HUGEPAGE; where THP is off it
 * is 4 KiB pages like the rest). Why: a creation among 1,000 agents uses ~570 KiB, ~140
 * pages to allocate, zero and map one by one, which on a VM with shadow paging cost ~4 us
 * each, while one huge page cost ~100 us (creation 2.82 -> 1.73 ms there, docs/users.md);
 * a small call (an existing agent among a few: ~5 KiB) never pays for zeroing 2 MiB. */
#define ARENA_HUGE ((size_t)2 << 20)
#define ARENA_SMALL_MAX ((size_t)32 << 10)
#define ARENA_HUGE_ORDER 9 /* 2 MiB in 4 KiB pages */
/* What the main thread keeps populated of the huge zone between calls (below). */
#define ARENA_RETAIN ((size_t)4 << 20)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL: pages fault in */
#endif

/* Each block is preceded by its size, for realloc. Bytes beyond `used` in the current zone
 * have never been handed out, so they are still the zeroes of a fresh mapping (calloc
 * relies on it): nothing moves `used` back during a call. Offsets are from base. */
struct arena {
	char *map;		    /* what mmap returned, ARENA_RESERVE + ARENA_HUGE long */
	char *base;		    /* map rounded up to ARENA_HUGE */
	size_t used;		    /* the bump offset: in the huge zone once >= ARENA_HUGE */
	size_t pop_small, pop_huge; /* populated: [0, pop_small), [ARENA_HUGE, pop_huge) */
	size_t small_end;	    /* the small zone's use, once the call moved on */
	bool advised;		    /* the huge zone's THP advice given (once a mapping) */
	char *last;		    /* the last block, which realloc can grow in place */
	unsigned depth;
};

static _Thread_local struct arena arena;

/* The small zone ends at ARENA_SMALL_MAX, far below where the huge one starts. */
static bool in_huge(void)
{
	return arena.used >= ARENA_HUGE;
}

/* The mapping the main thread keeps between calls. A long-lived caller (pistisd serve
 * ensures the agent before every command; the in-process benchmark) would otherwise
 * populate the same pages afresh each time, one page allocation and zeroing each, which
 * in some VMs costs more than the whole call's parsing. Kept only on the main thread (no
 * thread exit to leak it), zeroed at the end of each call (so the next call's blocks are
 * zero, as calloc relies on, and no byte of /etc/shadow outlives the call), at most
 * ARENA_RETAIN of the huge zone populated, and MADV_DONTFORK: a spawn child neither
 * copies its page tables nor can touch it. */
static struct arena retained;
static pid_t retained_pid; /* a child forked meanwhile does not have the mapping */

/* Under AddressSanitizer every block is malloc's: a block carved out of one mapping has
 * no redzones, and an overflow from one into the next would go unseen by the ASan tests. */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ENABLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ENABLED 0
#endif
#endif
#ifndef ARENA_ENABLED
#define ARENA_ENABLED 1
#endif

void uarena_begin(void)
{
	char *p;

	if (arena.depth++ > 0 || !ARENA_ENABLED)
		return;
	/* `retained` is the main thread's alone: no other thread reads it. */
	if (gettid() == getpid() && retained.base) {
		if (retained_pid != getpid()) {
			retained = (struct arena){0}; /* a fork's child: not mapped here */
		} else {
			arena = retained;
			retained = (struct arena){0};
			arena.depth = 1;
			return;
		}
	}
	p = mmap(NULL, ARENA_RESERVE + ARENA_HUGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return; /* RLIMIT_AS, strict overcommit: malloc it is */
	arena.map = p;
	arena.base = (char *)(((uintptr_t)p + ARENA_HUGE - 1) & ~(uintptr_t)(ARENA_HUGE - 1));
	/* Where THP is "always", the small zone would otherwise zero a whole huge page for a
	 * few KiB of buffers. */
	(void)madvise(arena.base, ARENA_RESERVE, MADV_NOHUGEPAGE);
	(void)madvise(arena.map, ARENA_RESERVE + ARENA_HUGE, MADV_DONTFORK);
	arena.used = arena.pop_small = 0;
	arena.pop_huge = ARENA_HUGE;
	arena.last = NULL;
}

void uarena_end(bool keep)
{
	if (arena.depth == 0 || --arena.depth > 0)
		return;
	if (arena.base && !keep && gettid() == getpid()) {
		/* Every byte handed out goes back to zero; what was populated but never handed
		 * out is zero still (the gap between the zones was never touched). Beyond
		 * ARENA_RETAIN of the huge zone the pages go back to the kernel. */
		if (in_huge()) {
			explicit_bzero(arena.base, arena.small_end);
			explicit_bzero(arena.base + ARENA_HUGE, arena.used - ARENA_HUGE);
		} else
			explicit_bzero(arena.base, arena.used);
		if (arena.pop_huge > ARENA_HUGE + ARENA_RETAIN) {
			(void)madvise(arena.base + ARENA_HUGE + ARENA_RETAIN,
				      arena.pop_huge - ARENA_HUGE - ARENA_RETAIN, MADV_DONTNEED);
			arena.pop_huge = ARENA_HUGE + ARENA_RETAIN;
		}
		retained = (struct arena){.map = arena.map,
					  .base = arena.base,
					  .pop_small = arena.pop_small,
					  .pop_huge = arena.pop_huge,
					  .advised = arena.advised};
		retained_pid = getpid();
	} else if (arena.base && !keep)
		(void)munmap(arena.map, ARENA_RESERVE + ARENA_HUGE);
	arena = (struct arena){0};
}

bool uarena_owns(const void *p)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)arena.base;

	return arena.base && a >= b && a - b < ARENA_RESERVE;
}

/* Map the pages of the current zone up to end now, in one call, instead of one fault per
 * page as they are first written (only a hint: on failure they fault in as usual). In the
 * huge zone the first call maps a whole huge page where THP gives one. */
static void populate(size_t end)
{
	size_t *pop = in_huge() ? &arena.pop_huge : &arena.pop_small;
	size_t from = *pop, to;

	if (end <= from)
		return;
	to = (end + ARENA_PAGE - 1) & ~(ARENA_PAGE - 1);
	(void)madvise(arena.base + from, to - from, MADV_POPULATE_WRITE);
	*pop = to;
}

static size_t *header(void *p)
{
	return (size_t *)(void *)((char *)p - ARENA_ALIGN);
}

bool uarena_buddyinfo_has_huge(const char *s, size_t n)
{
	const char *end = s + n;

	/* "Node 0, zone   Normal   c0 c1 ... c10": the free blocks of each order. */
	while (s < end) {
		const char *eol = memchr(s, '\n', (size_t)(end - s)), *p;
		unsigned order = 0;
		bool dma;

		if (!eol)
			eol = end;
		p = memmem(s, (size_t)(eol - s), "zone", 4);
		if (p) {
			p += 4;
			while (p < eol && *p == ' ')
				p++;
			/* ZONE_DMA serves only GFP_DMA allocations, never a THP. */
			dma = eol - p >= 4 && !memcmp(p, "DMA ", 4);
			while (p < eol && *p != ' ')
				p++;
			while (p < eol) {
				bool nonzero = false, digits = false;

				while (p < eol && *p == ' ')
					p++;
				while (p < eol && *p >= '0' && *p <= '9') {
					nonzero |= *p != '0';
					digits = true;
					p++;
				}
				if (!digits)
					break;
				if (order >= ARENA_HUGE_ORDER && nonzero && !dma)
					return true;
				order++;
			}
		}
		s = eol + 1;
	}
	return false;
}

/* Whether the buddy allocator has a free block of a huge page's order in a zone a THP can
 * come from. /proc/buddyinfo; unreadable (no /proc): no. Its first KiB only (~100 bytes a
 * zone): a stack buffer no larger than what the call's stack has already touched, since a
 * fresh stack page costs more than the read; nodes past it count as having none. */
static bool huge_page_free(void)
{
	char buf[1024];
	ssize_t n;
	int fd = open("/proc/buddyinfo", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n > 0 && uarena_buddyinfo_has_huge(buf, (size_t)n);
}

/* Where the current zone ends. */
static size_t zone_limit(void)
{
	return in_huge() ? ARENA_RESERVE : ARENA_SMALL_MAX;
}

void *uarena_alloc(size_t n)
{
	size_t start, end;

	if (!arena.base || n > ARENA_RESERVE - ARENA_HUGE - ARENA_ALIGN * 2)
		return malloc(n);
	start = arena.used + ARENA_ALIGN;
	end = (start + n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	if (end > zone_limit() && !in_huge()) {
		arena.small_end = arena.used;
		/* Huge pages only where one is free now: under THP's default defrag setting
		 * a fault in a MADV_HUGEPAGE range that finds none reclaims and compacts
		 * memory first, which can take milliseconds on a host full of page cache.
		 * Decided once a mapping: a kept arena has its huge page already. */
		if (!arena.advised && huge_page_free())
			(void)madvise(arena.base + ARENA_HUGE, ARENA_RESERVE - ARENA_HUGE,
				      MADV_HUGEPAGE);
		arena.advised = true;
		arena.used = ARENA_HUGE;
		start = arena.used + ARENA_ALIGN;
		end = (start + n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	}
	if (end > zone_limit())
		return malloc(n);
	populate(end);
	arena.last = arena.base + start;
	*header(arena.last) = n;
	arena.used = end;
	return arena.last;
}

void *uarena_calloc(size_t n, size_t size)
{
	void *p;

	if (size && n > SIZE_MAX / size)
		return NULL;
	if (!arena.base)
		return calloc(n, size);
	p = uarena_alloc(n * size);
	/* A fresh arena block is zero already; one that fell back to malloc is not. */
	if (p && !uarena_owns(p))
		memset(p, 0, n * size);
	return p;
}

void *uarena_realloc(void *p, size_t n)
{
	size_t old;
	void *q;

	if (!p)
		return uarena_alloc(n);
	if (!uarena_owns(p))
		return realloc(p, n);
	old = *header(p);
	if (n <= old)
		return p;
	if (p == arena.last && n <= zone_limit() - ARENA_ALIGN - (size_t)((char *)p - arena.base)) {
		/* The last block grows in place: the bytes after it were never handed out. */
		size_t end = ((size_t)((char *)p - arena.base) + n + ARENA_ALIGN - 1) &
			     ~(size_t)(ARENA_ALIGN - 1);
		populate(end);
		arena.used = end;
		*header(p) = n;
		return p;
	}
	q = uarena_alloc(n);
	if (q)
		memcpy(q, p, old);
	return q;
}

void *uarena_reallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return uarena_realloc(p, n * size);
}

void uarena_free(void *p)
{
	/* An arena block goes with the arena. */
	if (!uarena_owns(p))
		free(p);
}
