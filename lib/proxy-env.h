#pragma once

/* The HTTP proxy of a client's environment. libwebsockets reads http_proxy itself when the
 * context is made, and knows no no_proxy: a relay the operator named in no_proxy, or one
 * on a unix socket, went through the proxy all the same (the proxy saw the token of a
 * ws:// relay; a unix relay got a CONNECT line and never answered it). */

#include <stdbool.h>

/* Whether no_proxy (a no_proxy/NO_PROXY value, curl's syntax: names separated by commas or
 * blanks, each matching that host and every host below it, a leading '.' or a "*." allowed,
 * case-insensitive, "[::1]" as "::1", an entry's ":PORT" ignored, "*" alone every host)
 * exempts host. No CIDR ranges: "10.0.0.0/8" matches nothing. NULL or empty: false. */
bool proxy_host_exempt(const char *host, const char *no_proxy);

/* Whether host is a loopback name or address: "localhost" (and names below it), 127.0.0.0/8,
 * ::1. Such a server is in the client's own network namespace, where only a direct
 * connection lets the client see whose socket it reaches (lib/sock-owner): through a proxy
 * of the same namespace, an agent that took the server's port while it was away would be
 * handed the token, the proxy's socket being all the client sees. */
bool proxy_host_loopback(const char *host);

/* The client's choice before it makes its libwebsockets context: when http_proxy is set and
 * host is NULL (a unix socket), a loopback host, or one no_proxy/NO_PROXY exempts, http_proxy
 * is removed from the environment (returns 1); when it is set and stays, returns 2; unset or
 * empty, 0. */
int proxy_env_settle(const char *host);
