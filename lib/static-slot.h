#pragma once

/* One object of static storage that a process hands out to one user at a time, and the
 * heap for a second user at the same time (another thread). For an object made and freed
 * once or a few times a process (pistisd run's spawn context, the env builder's table):
 * alone in its size class in musl's malloc, it was a fresh mmap and, freed, a munmap with
 * its TLB flush (~20 µs on a guest with shadow page tables). zero: hand it out zeroed, as
 * calloc would (else as malloc). */

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline void *static_slot_get(bool *taken, void *obj, size_t size, bool zero)
{
	if (__atomic_exchange_n(taken, true, __ATOMIC_ACQUIRE))
		return zero ? calloc(1, size) : malloc(size);
	if (zero)
		memset(obj, 0, size);
	return obj;
}

/* p from static_slot_get with the same taken and obj: given back, or freed. */
static inline void static_slot_put(bool *taken, void *obj, void *p)
{
	if (p == obj)
		__atomic_store_n(taken, false, __ATOMIC_RELEASE);
	else
		free(p);
}
