/* libFuzzer: server-min's pistis.json (server-min/config.c), the whole of smin_config_load:
 * the input is written to a root-owned 0600 file in a private directory and loaded as
 * `server-min --check` loads it. ${NAME} references resolve against a few variables set
 * here, one of them JSON text (a value must never become structure). Invariants:
 *  - a refusal fills the error, and the error holds no control byte (values are escaped);
 *  - what is taken is what the relay relies on without checking again: two listen
 *    addresses (an absolute path or HOST:PORT, port 1-65535), both TLS paths absolute or
 *    neither, every limit in its range, 1..SMIN_MAX_SANDBOXES sandboxes with valid,
 *    distinct names and tokens of 16..512 printable bytes, none equal to the client token;
 *  - smin_config_free releases everything, after a refusal too (ASan's leak check). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/proto.h"
#include "server-min/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/pistis-fuzz-smin.XXXXXX", path[64];

static void cleanup(void)
{
	(void)unlink(path);
	(void)rmdir(dir);
}

static void setup(void)
{
	if (path[0])
		return;
	/* the directory of a config trust_file_open believes: root's (or ours), 0700 */
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/pistis.json", dir);
	atexit(cleanup);
	setenv("FZ_TOKEN", "env-token-0123456789abcdef", 1);
	setenv("FZ_TOKEN2", "env-token-fedcba9876543210", 1);
	setenv("FZ_JSON", "\"}, {\"name\": \"x\", \"token\": \"0123456789abcdef0123\"", 1);
	setenv("FZ_EMPTY", "", 1);
	log_set_level(LOG_LVL_ERROR);
}

static bool token_ok(const char *t)
{
	size_t n = t ? strlen(t) : 0;

	if (n < SMIN_TOKEN_MIN || n > SMIN_TOKEN_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (t[i] <= ' ' || t[i] > '~')
			return false;
	return true;
}

static bool listen_ok(const char *a)
{
	size_t host_len;
	int port;

	return a && (a[0] == '/' || (smin_listen_split(a, &host_len, &port) == 0 && port >= 1 &&
				     port <= 65535 && host_len > 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smin_config c;
	int fd, r;

	setup();
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) < 0)
		abort();

	r = smin_config_load(path, &c);
	if (r < 0) {
		if (!c.error[0] || strnlen(c.error, sizeof(c.error)) == sizeof(c.error))
			abort();
		for (const char *p = c.error; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				abort();
		smin_config_free(&c);
		return 0;
	}
	if (r != 0 || !listen_ok(c.listen_sandbox) || !listen_ok(c.listen_client))
		abort();
	if (!c.tls_cert != !c.tls_key ||
	    (c.tls_cert && (c.tls_cert[0] != '/' || c.tls_key[0] != '/')))
		abort();
	if (c.handshakes > SMIN_MAX_HANDSHAKES || c.handshakes_per_address < 1 ||
	    c.handshakes_per_address > SMIN_MAX_HANDSHAKES || c.client_queue_grace_s < 1 ||
	    c.client_queue_grace_s > SMIN_MAX_CLIENT_QUEUE_GRACE_S || c.client_queue_max_mib < 1 ||
	    c.client_queue_max_mib > SMIN_MAX_CLIENT_QUEUE_MAX_MIB)
		abort();
	if (!token_ok(c.client_token) || c.n_sandboxes < 1 || c.n_sandboxes > SMIN_MAX_SANDBOXES)
		abort();
	for (size_t i = 0; i < c.n_sandboxes; i++) {
		const struct smin_sandbox_cfg *s = &c.sandboxes[i];

		if (!proto_id_valid(s->name, 63) || !token_ok(s->token) ||
		    !strcmp(s->token, c.client_token))
			abort();
		for (size_t j = 0; j < i; j++)
			if (!strcmp(s->name, c.sandboxes[j].name) ||
			    !strcmp(s->token, c.sandboxes[j].token))
				abort();
	}
	smin_config_free(&c);
	return 0;
}
