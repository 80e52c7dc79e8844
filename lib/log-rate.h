#pragma once

#include <stdbool.h>
#include <stdint.h>

/* At most `burst` log lines a second from one source (anything a peer can make happen as
 * fast as it sends: a line each would fill the log and the disk under it, and hold the
 * writer in write(2)); the lines held back are counted, for a later line to report. Time
 * is the caller's monotonic clock in microseconds, so that each daemon keeps its own
 * (libwebsockets' or the spawn core's). Zero-initialised is ready. */
struct log_rate {
	uint64_t window_us; /* start of the current second */
	unsigned n;	    /* lines let through in it */
	unsigned held;	    /* lines held back since the last log_rate_held */
};

#define LOG_RATE_WINDOW_US 1000000u

/* Whether one more line may be logged at now_us. */
bool log_rate_ok(struct log_rate *lr, uint64_t now_us, unsigned burst);

/* The lines held back since the last call (and none from now on). */
unsigned log_rate_held(struct log_rate *lr);

/* Whether the second of lr's last line is over at now_us, with lines held back in it:
 * the moment to say how many before the next window starts counting. */
bool log_rate_window_over(const struct log_rate *lr, uint64_t now_us);
