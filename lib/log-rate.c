#include "log-rate.h"

bool log_rate_ok(struct log_rate *lr, uint64_t now_us, unsigned burst)
{
	if (now_us - lr->window_us >= LOG_RATE_WINDOW_US) {
		lr->window_us = now_us;
		lr->n = 0;
	}
	if (lr->n < burst) {
		lr->n++;
		return true;
	}
	lr->held++;
	return false;
}

unsigned log_rate_held(struct log_rate *lr)
{
	unsigned n = lr->held;

	lr->held = 0;
	return n;
}

bool log_rate_window_over(const struct log_rate *lr, uint64_t now_us)
{
	return lr->held && now_us - lr->window_us >= LOG_RATE_WINDOW_US;
}
