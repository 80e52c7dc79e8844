#include "lib/ws-url.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/parse-num.h"

int ws_url_parse(const char *url, const char *default_path, struct ws_url *ret)
{
	const char *p;
	size_t n;

	*ret = (struct ws_url){0};
	if (!strncmp(url, "ws://", 5)) {
		p = url + 5;
		ret->port = 80;
	} else if (!strncmp(url, "wss://", 6)) {
		p = url + 6;
		ret->port = 443;
		ret->tls = true;
	} else
		return -EPROTONOSUPPORT;
	n = strcspn(p, ":/");
	if (n == 0 || n >= sizeof(ret->host))
		return -EINVAL;
	memcpy(ret->host, p, n);
	ret->host[n] = 0;
	p += n;
	if (*p == ':') {
		const char *end;
		uint64_t port;

		if (parse_uint_strict(p + 1, 65535, &end, &port) < 0 || !port ||
		    (*end && *end != '/'))
			return -ERANGE;
		ret->port = (int)port;
		p = end;
	}
	snprintf(ret->path, sizeof(ret->path), "%s", *p ? p : default_path);
	return 0;
}

const char *ws_url_for_log(const char *url, char *buf, size_t size)
{
	const char *rest = strstr(url, "://"), *at = NULL, *q;
	size_t auth;

	if (!rest) {
		snprintf(buf, size, "%s", url);
		return buf;
	}
	rest += 3;
	auth = strcspn(rest, "/?#");
	for (size_t i = 0; i < auth; i++)
		if (rest[i] == '@')
			at = rest + i; /* the last one: a password may hold an '@' */
	q = rest + strcspn(rest, "?#");
	snprintf(buf, size, "%.*s%s%.*s%s", (int)(rest - url), url, at ? "***@" : "",
		 (int)(q - (at ? at + 1 : rest)), at ? at + 1 : rest,
		 *q == '?'   ? "?***"
		 : *q == '#' ? "#***"
			     : "");
	return buf;
}
