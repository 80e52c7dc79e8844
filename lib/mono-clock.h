#pragma once

/* CLOCK_MONOTONIC in nanoseconds or milliseconds, for deadlines and rate windows. The
 * clock cannot fail with a valid id and pointer, so its result is not checked; it runs on
 * while the process is frozen or stopped (pistisd/spawn.c takes such stalls out of its own
 * deadlines). */

#include <stdint.h>
#include <time.h>

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int64_t mono_ms(void)
{
	return (int64_t)(mono_ns() / 1000000u);
}
