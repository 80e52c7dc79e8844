/* http_proxy and no_proxy for the clients' libwebsockets context: see proxy-env.h. */
#include "lib/proxy-env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool entry_matches(const char *host, size_t hlen, const char *e, size_t elen)
{
	const char *colon;

	if (elen >= 2 && e[0] == '*' && e[1] == '.')
		e++, elen--;
	if (elen && e[0] == '.')
		e++, elen--;
	if (elen && e[0] == '[') { /* [v6] or [v6]:port */
		const char *close = memchr(e, ']', elen);
		if (!close)
			return false;
		elen = (size_t)(close - e - 1);
		e++;
	} else if ((colon = memchr(e, ':', elen)) &&
		   !memchr(colon + 1, ':', elen - (size_t)(colon + 1 - e)))
		elen = (size_t)(colon - e); /* name:port (one colon: not an IPv6 address) */
	if (!elen || elen > hlen || strncasecmp(host + hlen - elen, e, elen))
		return false;
	/* the whole name, or a whole label below it */
	return elen == hlen || host[hlen - elen - 1] == '.';
}

bool proxy_host_exempt(const char *host, const char *no_proxy)
{
	size_t hlen;

	if (!host || !no_proxy)
		return false;
	hlen = strlen(host);
	if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']')
		host++, hlen -= 2;
	if (hlen && host[hlen - 1] == '.') /* "relay.example.com." */
		hlen--;
	for (const char *p = no_proxy; *p;) {
		size_t n;

		p += strspn(p, ", \t");
		n = strcspn(p, ", \t");
		if (n == 1 && *p == '*')
			return true;
		if (n && hlen && entry_matches(host, hlen, p, n))
			return true;
		p += n;
	}
	return false;
}

bool proxy_host_loopback(const char *host)
{
	struct in_addr a4;
	size_t n = strlen(host);

	if (n && host[n - 1] == '.')
		n--;
	if ((n == 9 && !strncasecmp(host, "localhost", 9)) ||
	    (n > 10 && !strncasecmp(host + n - 10, ".localhost", 10)))
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return !strcmp(host, "::1") || !strcmp(host, "[::1]");
}

int proxy_env_settle(const char *host)
{
	const char *proxy = getenv("http_proxy"), *np = getenv("no_proxy");

	if (!proxy || !*proxy)
		return 0;
	if (!np || !*np)
		np = getenv("NO_PROXY");
	if (!host || proxy_host_loopback(host) || proxy_host_exempt(host, np)) {
		unsetenv("http_proxy");
		return 1;
	}
	return 2;
}
