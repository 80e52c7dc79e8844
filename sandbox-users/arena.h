#pragma once

/* One mapping for the big, short-lived buffers of one sandbox-users call (the five files
 * read, their line and record arrays, the hash sets, the registry written): a bump
 * allocator over a single reserved anonymous mapping, populated as it is used by one
 * MADV_POPULATE_WRITE per block: 4 KiB pages for a call's first 32 KiB, then a zone that
 * transparent huge pages may back (arena.c says why). Unmapped when the call is over, or,
 * on the main thread of a long-lived caller, zeroed and kept for its next call.
 *
 * Why: musl's allocator serves every block of this size from its own mmap, whose group
 * header page then faults on first write, and hands it back with munmap; a creation made
 * ~18 such mappings, each a VMA to build and tear down. Here it is one.
 *
 * uarena_* behave as malloc/calloc/realloc/free while no arena is active (unit tests,
 * fuzzers) and for any block that does not fit; uarena_free takes either kind of pointer
 * (an arena block is released with the arena, a malloc'd one is freed). Per thread: the
 * active arena is thread-local, and calls do not nest. */

#include <stdbool.h>
#include <stddef.h>

/* Reserve the arena (no memory is committed until used). Failure is not an error: the
 * call then runs on malloc. */
void uarena_begin(void);
/* End the call's arena: unmapped, or zeroed and kept on the main thread (arena.c); keep:
 * leave it as it is to exit(2), as users_leave_memory_to_exit. */
void uarena_end(bool keep);

void *uarena_alloc(size_t n);
void *uarena_calloc(size_t n, size_t size);
void *uarena_realloc(void *p, size_t n);
void *uarena_reallocarray(void *p, size_t n, size_t size);
void uarena_free(void *p);
/* Whether p lies in the active arena (its pages are populated already). */
bool uarena_owns(const void *p);

/* Whether /proc/buddyinfo text shows a free block of a huge page's order in a zone other
 * than DMA (arena.c: only then is the huge zone MADV_HUGEPAGE). Exported for tests. */
bool uarena_buddyinfo_has_huge(const char *s, size_t n);

static inline void uarena_freep(void *p)
{
	uarena_free(*(void **)p);
}
#define _cleanup_uarena_ __attribute__((cleanup(uarena_freep)))
