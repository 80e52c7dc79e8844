#pragma once

/* server-min's configuration file, pistis.json (docs/server-min.md). */

#include <stddef.h>

#define SMIN_MAX_SANDBOXES 1024
#define SMIN_MAX_HANDSHAKES 65536
/* The default bound on them in total (or a quarter of RLIMIT_NOFILE, if less): lws polls every
 * connection at each wake-up, and 4096 idle ones made a relayed round trip ~20x slower
 * (docs/server-min.md, "What idle connections cost"). */
#define SMIN_DEFAULT_HANDSHAKES 1024
/* Plain HTTP connections and unfinished upgrades from one address: a platform's backend opens bursts of clients from
 * one host (relay.sh starts 100 `pistis exec` at once; at 32, 2 of them were refused). */
#define SMIN_HANDSHAKES_PER_ADDRESS 256
/* A client whose queue is past the relay's 16 MiB soft bound holds the sandboxes feeding it
 * paused: it is disconnected once that has lasted this long, or at once past the hard bound. */
#define SMIN_CLIENT_QUEUE_GRACE_S 5
#define SMIN_MAX_CLIENT_QUEUE_GRACE_S 3600
#define SMIN_CLIENT_QUEUE_MAX_MIB 64
#define SMIN_MAX_CLIENT_QUEUE_MAX_MIB 4096
/* A token is what a token file holds (lib/token-file.c): printable ASCII without spaces,
 * and no longer than pistisd serve reads (TOKEN_MAX); server-min compares it with the
 * Authorization header, which lws copies into 640 bytes. */
#define SMIN_TOKEN_MIN 16
#define SMIN_TOKEN_MAX 512

struct smin_sandbox_cfg {
	char *name;
	char *token;
};

struct smin_config {
	char path[256];
	char *text;	      /* the raw file, for line numbers */
	char *listen_sandbox; /* "HOST:PORT" or "/path/to/unix.sock" */
	char *listen_client;  /* "HOST:PORT" */
	char *client_token;
	char *tls_cert; /* PEM files: the sandbox listener speaks TLS (wss://) when set */
	char *tls_key;
	/* "limits": connections that are not a WebSocket with a token, in total and per peer
	 * address (0 in "handshakes": a quarter of RLIMIT_NOFILE, at most
	 * SMIN_DEFAULT_HANDSHAKES, set by the relay) */
	unsigned handshakes, handshakes_per_address;
	/* "limits": how long a client's queue may stay past the soft bound (s), and its hard
	 * bound (MiB) */
	unsigned client_queue_grace_s, client_queue_max_mib;
	struct smin_sandbox_cfg *sandboxes;
	size_t n_sandboxes;
	char error[512]; /* "pistis.json:12: what is wrong" */
};

/* 0, or -errno with c->error filled. */
int smin_config_load(const char *path, struct smin_config *c);
/* A listen address HOST:PORT split at its last ':' (the port digits only, 1-65535): the
 * host's length and the port, or -EINVAL. The one reading for --check and for the bind. */
int smin_listen_split(const char *addr, size_t *ret_host_len, int *ret_port);
void smin_config_free(struct smin_config *c);
