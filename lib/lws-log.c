#include "lib/lws-log.h"

#include <libwebsockets.h>
#include <string.h>

#include "lib/log.h"
#include "lib/mono-clock.h"

static struct {
	long long window_ns;
	unsigned n, held;
} rate;

void log_lws_emit(int level, const char *line)
{
	enum log_level ours = level & LLL_ERR	   ? LOG_LVL_ERROR
			      : level & LLL_WARN   ? LOG_LVL_WARNING
			      : level & LLL_NOTICE ? LOG_LVL_NOTICE
						   : LOG_LVL_DEBUG;
	long long now = (long long)mono_ns();
	size_t len = line ? strlen(line) : 0;

	if (now - rate.window_ns >= 1000000000LL) {
		rate.window_ns = now;
		rate.n = 0;
	}
	if (rate.n >= LWS_LOG_BURST) {
		rate.held++;
		return;
	}
	rate.n++;
	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (rate.held) {
		log_full_errno(ours, 0, "libwebsockets: %.*s (and %u earlier lines not logged)",
			       (int)len, line ? line : "", rate.held);
		rate.held = 0;
	} else
		log_full_errno(ours, 0, "libwebsockets: %.*s", (int)len, line ? line : "");
}

void log_lws_flush(void)
{
	if (rate.held)
		log_warning("libwebsockets: %u more lines not logged (at most %d a second)",
			    rate.held, LWS_LOG_BURST);
	rate.held = 0;
}

void log_lws_setup(void)
{
	lws_set_log_level(log_get_level() >= LOG_LVL_DEBUG ? LLL_ERR | LLL_WARN | LLL_NOTICE
							   : LLL_ERR,
			  log_lws_emit);
}
