#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A WebSocket URL as pistisd serve's --relay and pistis's --url take it:
 * ws://HOST[:PORT][/PATH] or wss://… (no user part is checked for here: serve refuses
 * one itself, with its own reason). */
struct ws_url {
	char host[256];
	char path[256]; /* from the first '/' on; cut to fit */
	int port;	/* 80 (ws) or 443 (wss) when not given */
	bool tls;	/* wss:// */
};

/* Parse url into *ret, its path default_path when it has none. -EPROTONOSUPPORT when it
 * is not ws:// or wss://, -EINVAL when the host is empty or too long, -ERANGE when the port
 * is not 1-65535 or anything but a path follows it. */
int ws_url_parse(const char *url, const char *default_path, struct ws_url *ret);

/* url as a log line may show it: the bytes of a user part ("tok@", "user:pass@") and of a
 * query or fragment replaced by "***", so that a credential put there reaches no log file
 * (a refusal is logged, and logs outlive the command line). Anything without "://" (a
 * Unix socket path) is shown as it is. Cut to fit buf; returns buf. */
const char *ws_url_for_log(const char *url, char *buf, size_t size);
