/* server-min: the relay. Two faces on two listeners: the sandbox endpoint (pistisd dials in
 * with its per-sandbox token) and the client API (HTTP + WebSocket, a client token). Every
 * byte from a sandbox is untrusted: messages are size-capped while they are assembled,
 * parsed with lib/proto's limits, and every queue is bounded: a full client queue pauses the
 * sandbox feeding it (lws_rx_flow_control), what is meant for a full sandbox queue is
 * refused. A paused sandbox stalls every client of it, so a client may hold one paused only
 * for a grace period (limits.client_queue_grace_s), and its queue never past a hard bound:
 * then it is disconnected, and the commands it read keep their output in pistisd until it
 * re-attaches. One event loop, no threads.
 *
 * Routing: a client's request id "r1" travels to pistisd as "<boot>.<client>.r1" and the
 * answer's id is mapped back; output frames are routed by (sandbox, cmd) to the client that
 * started or attached the command. server-min holds no output of its own beyond queues: a
 * restart loses nothing because pistisd keeps every frame until the client acknowledges it. */
#include <errno.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* (glibc's struct tcp_info stops before tcpi_bytes_received) */
#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log-rate.h"
#include "lib/log.h"
#include "lib/lws-log.h"
#include "lib/macro.h"
#include "lib/parse-num.h"
#include "lib/proto.h"
#include "lib/sha256.h"
#include "lib/siphash.h"
#include "server-min/config.h"

#define QUEUE_SOFT (16u * 1024u * 1024u) /* pause the producer past this */
/* Messages a sandbox may send: a token bucket per sandbox (a message costs one; its values,
 * fragments, skipped bytes, pongs and wire bytes beyond its frames cost more, below; the
 * log says which of them emptied it: enum rate_cost). Past it server-min stops
 * reading from that sandbox until SANDBOX_MSG_RESUME messages are allowed again (nothing is
 * dropped): 50 ms worth, so a sandbox that floods costs a pause and a resume per 250
 * messages, not per message (rate_take). */
#define SANDBOX_MSG_RATE 5000 /* per second */
#define SANDBOX_MSG_BURST 10000
#define SANDBOX_MSG_RESUME (SANDBOX_MSG_RATE / 20)
/* A JSON message costs a token per this many values besides its first: parsing grows with
 * the values (cJSON nodes), and 1 MiB of "[0,0,…]" took ~80 ms, so 5000 such messages a
 * second were a whole core, whatever other sandboxes needed (proto_parse_values). */
#define SANDBOX_VALUES_PER_TOKEN 64
/* Bytes of a message past the limit, read on to its end and dropped, that cost a token
 * (on_rx): at most 20 MB/s of it is read from a sandbox. */
#define SANDBOX_SKIP_PER_TOKEN 4096
/* Bytes a sandbox's TCP connection carries besides its data frames' payload and their
 * allowance (pings, pongs, close frames, TLS records' overhead) that cost a token: the kernel
 * counts them, and wire_check charges them. At most ~5 MB/s of them is read from a sandbox
 * that spends its whole bucket on them (lws parses them at ~140 MB/s a core). */
#define SANDBOX_WIRE_PER_TOKEN 1024
/* What a data frame may carry besides its payload at no charge: its header (at most 14
 * bytes from a client) and one TLS record's overhead (29, TLS 1.2 AES-GCM); over TLS also a
 * 32nd of its payload: pistisd's lws puts at most 1460 bytes in a TLS record (its mbedtls
 * wrapper's SSL_SEND_DATA_MAX_LENGTH), 2% of overhead. */
#define WIRE_FRAME_ALLOWANCE 64
#define WIRE_TLS_ALLOWANCE_SHIFT 5
/* The credit a connection may bank: its frames' unused allowance, and what lws read but
 * held unparsed while the connection was paused (charged before its payload was seen). */
#define WIRE_CREDIT (256 * 1024)
/* wire_check runs at most this often, and asks the kernel about at most WIRE_CHECK_BATCH
 * connections each time (~2.5 us each, 0.4% of a core at most). */
#define WIRE_CHECK_US (20 * 1000)
#define WIRE_CHECK_BATCH 32
#define MAX_CLIENTS 1024
#define MAX_ROUTES 65536
/* Routes one sandbox may hold: pistisd holds at most 256 commands, each with at most one
 * reader; the rest is room for ended ones awaiting their reader's final ack. A sandbox that
 * never sends exec.exit would otherwise keep every route it was ever given until the
 * table, which all sandboxes share, is full. */
#define MAX_ROUTES_PER_SANDBOX 1024
/* Requests forwarded to one sandbox and not yet answered: a sandbox's answers and events
 * reach a client only for a request that client sent to that very sandbox. */
/* A client that sends requests the sandbox does not answer (long exec.starts, a pistisd that
 * stopped answering) must not take every slot and leave the sandbox's other clients with
 * nothing but `limit`, nor may a few such clients together: a client connection may take
 * another slot only while more are free than it holds (pending_add). */
#define MAX_PENDING 4096
/* Routes are found by (sandbox, cmd) for output and acks, by (client, cmd) for stdin, by
 * (sandbox, client, request id) for events named by the owner's id, and all of one client's
 * when it goes (route_insert). */
enum { ROUTE_BY_CMD, ROUTE_BY_READER, ROUTE_BY_OWNER, ROUTE_OF_CLIENT, N_ROUTE_INDEXES };

/* What a sandbox's tokens pay for (rate_take). The throttle's log line names what they went
 * on: it said "messages/s" when pings, pongs or a message never ended had emptied the bucket,
 * and sent the operator looking for messages that were never sent. */
enum rate_cost {
	COST_MESSAGE,	 /* a whole message, JSON or frame */
	COST_VALUES,	 /* a JSON message's values, SANDBOX_VALUES_PER_TOKEN a token */
	COST_FRAGMENT,	 /* a continuation frame */
	COST_SKIPPED,	 /* bytes of a message past the limit, SANDBOX_SKIP_PER_TOKEN a token */
	COST_PONG,	 /* a pong with a payload */
	COST_WIRE,	 /* bytes read besides data frames, SANDBOX_WIRE_PER_TOKEN a token */
	COST_CONNECTION, /* a new connection */
	COST_REATTACH,	 /* a route its hello re-attached */
	N_RATE_COSTS
};

struct msg {
	struct msg *next;
	size_t len;
	bool binary;
	uint8_t buf[]; /* LWS_PRE + len */
};

struct queue {
	struct msg *head, *tail;
	size_t bytes;
};

/* An index over a table: lists threaded through it by entry number, one list per bucket
 * (the entries whose key hashes to it, or simply those of client slot b). The lists are
 * circular and doubly linked: an entry is added at the end, or taken out, in O(1), and one
 * that moves to another entry number (pending_remove) is relinked in O(1). */
#define NIL UINT32_MAX

struct link {
	uint32_t next, prev;
};

struct index {
	uint32_t *head;	   /* [bucket]: the list's first entry, or NIL */
	struct link *link; /* [entry] */
	uint32_t n_buckets;
};

/* A set of route slots that is walked in slot order: bit i of word[i / 64], and a summary
 * with bit w set while word[w] is not 0. */
struct route_slots {
	uint64_t word[MAX_ROUTES / 64];
	uint64_t some[MAX_ROUTES / 64 / 64];
};

struct conn {
	struct lws *wsi;
	bool is_client;
	uint64_t serial;       /* clients: client_by_serial */
	unsigned slot;	       /* clients: index in R.clients */
	bool dropped;	       /* clients: being disconnected for not reading (client_drop) */
	lws_usec_t over_since; /* clients: queue past QUEUE_SOFT, not back under half since */
	bool holds_pauses;     /* clients: some sandbox's pausers has its bit */
	lws_sorted_usec_list_t slow_sul;
	struct sandbox *sb; /* sandbox connections */
	struct queue q;
	uint8_t *rx;	 /* a text message being put together */
	struct msg *rxm; /* a binary one: in a queue entry, forwarded without another copy */
	size_t rx_len;
	bool rx_skip;
	bool rx_frame_done; /* the last piece read ended its frame (a new one starts next) */
	/* sandboxes: the clients (by slot) whose queue past QUEUE_SOFT holds it paused */
	uint64_t pausers[MAX_CLIENTS / 64];
	unsigned n_pausers;
	bool self_paused; /* its own unread answers are past QUEUE_SOFT: not read meanwhile */
	/* sandboxes: malformed messages on this connection (sandbox_malformed), and what the
	 * last one was, for the line that cuts it at SANDBOX_MALFORMED_MAX */
	unsigned malformed;
	char malformed_last[240];
	/* sandboxes: paused for the message-rate bucket (struct sandbox) */
	bool rate_paused, rate_warned;
	lws_sorted_usec_list_t rate_sul;
	bool said_hello; /* sandboxes: its hello is taken once per connection */
	/* sandboxes: its hello named a protocol version this relay does not speak (what it
	 * said, for the line that cuts it); empty: none refused */
	char refused_version[32];
	/* sandboxes over TCP: bytes read from the socket as of the last wire_charge, the
	 * payload (and allowance) lws handed on since, and what is read but not charged yet
	 * (< 0: credit) */
	bool wire_counted;
	uint64_t wire_read;
	uint64_t wire_explained;
	int64_t wire_balance;
};

struct pending {
	uint64_t client; /* serial */
	uint32_t bucket; /* in pend_by_id */
	bool reader;	 /* exec.start or exec.attach: its answer may make the client a reader */
	char id[PROTO_MAX_CLIENT_ID + 1];
};

#define SOFTWARE_MAX 60 /* bytes of a sandbox's hello's software kept (a longer one: none) */

struct sandbox {
	const struct smin_sandbox_cfg *cfg;
	uint8_t token_sha[SHA256_DIGEST_SIZE]; /* its token's, taken once at start-up */
	struct conn *conn;
	/* its hello's software (at most SOFTWARE_MAX bytes), C-escaped: room for the whole
	 * (4 bytes a byte at most), so no cut goes unmarked (a silent one did at 63) */
	char software[4 * SOFTWARE_MAX + 1];
	unsigned connects;
	struct pending *pend; /* requests forwarded to it, not yet answered */
	size_t n_pend;
	uint16_t *pend_of;		 /* [client slot]: how many of them are that client's */
	struct index pend_by_id;	 /* by (client, id), in the order they were sent */
	struct index pend_of_client;	 /* by client slot */
	struct route_slots *route_slots; /* where its routes are in R.routes */
	uint32_t n_routes;		 /* how many */
	bool full_warned; /* sandbox_full logged since its queue last went under the bound */
	/* The message-rate bucket and the log rate belong to the sandbox, not to one of its
	 * connections: with them per connection, a sandbox that redialled after every 10 000
	 * messages sent them at ~650 000 a second, and logged two lines per redial. */
	double tokens;
	lws_usec_t refilled; /* 0: the bucket is full (never used) */
	/* tokens taken, by what for: [1] since spent_since, [0] in the second before it */
	double spent[2][N_RATE_COSTS];
	lws_usec_t spent_since;
	struct log_rate log_rate; /* lines logged about what it sent, or its connections */
};

struct route {
	struct sandbox *sb;
	uint32_t cmd;
	uint64_t client;   /* serial */
	uint64_t last_seq; /* last frame forwarded to the client (dedupes resends) */
	uint64_t acked;	   /* last frame the client acknowledged: all a re-attach may assume */
	char orig_id[PROTO_MAX_CLIENT_ID + 1];
	bool used;
	bool ended; /* exec.exit forwarded: kept for the reader's final ack, then freed */
};

static struct {
	struct smin_config cfg;
	struct sandbox *sbs;
	struct conn *clients[MAX_CLIENTS];
	uint64_t next_serial; /* client connections so far */
	struct route *routes;
	size_t n_routes;			   /* slots ever used (fuzz-relay walks them) */
	uint64_t route_used[MAX_ROUTES / 64];	   /* slots in use */
	uint64_t route_full[MAX_ROUTES / 64 / 64]; /* words of route_used with every bit set */
	struct index route_ix[N_ROUTE_INDEXES];
	uint8_t hash_key[SIPHASH_KEY_SIZE];
	char boot[9];
	struct log_rate refused[3]; /* [REFUSED_SANDBOX], [REFUSED_CLIENT], [REFUSED_HANDSHAKES] */
	struct log_rate dropped;    /* clients disconnected for not reading */
	struct log_rate cut;	    /* sandboxes disconnected for malformed messages */
	/* Connections accepted that are not a WebSocket with a valid token (handshakes: an
	 * unfinished upgrade, or plain HTTP, with the client token or not), by wsi, with their
	 * peer: bounded per peer and in total (docs/server-min.md). */
	struct handshake {
		struct lws *wsi;
		uint8_t peer[16];
	} * hs;
	size_t n_hs;
	uint8_t accepted_peer[16]; /* the accept just allowed, for its LWS_CALLBACK_WSI_CREATE */
	bool accepted;
	struct lws_context *ctx;
	lws_usec_t wire_checked; /* the last wire_check */
	size_t wire_next;	 /* the sandbox it looks at first next time */
	volatile sig_atomic_t stop;
	volatile sig_atomic_t hup; /* a SIGHUP to log from the loop (not from the handler) */
} R;

/* --- lookups ---------------------------------------------------------------------------- */

/* What a message or frame needs is found by key, never by a walk of a table: clients and
 * sandboxes fill the tables (65536 routes, 4096 requests per sandbox), and a walk per frame
 * made every command's output as slow as the fullest table. */

/* A client connection's serial names it to pistisd (request ids "<boot>.<serial>.<id>",
 * readers "<boot>.<serial>") and in logs: (connections so far) * MAX_CLIENTS + its slot.
 * Found from its slot, and never the same twice in a run (64 bits), so what was meant for a
 * connection that is gone never reaches the one that took its slot. */
static struct conn *client_by_serial(uint64_t serial)
{
	struct conn *c = R.clients[serial % MAX_CLIENTS];

	return c && c->serial == serial ? c : NULL;
}

static void index_free(struct index *ix)
{
	free(ix->head);
	free(ix->link);
	ix->head = NULL;
	ix->link = NULL;
}

static void index_clear(struct index *ix)
{
	memset(ix->head, 0xff, ix->n_buckets * sizeof(*ix->head)); /* NIL */
}

static int index_init(struct index *ix, uint32_t n_buckets, uint32_t n_entries)
{
	ix->head = malloc(n_buckets * sizeof(*ix->head));
	ix->link = calloc(n_entries, sizeof(*ix->link));
	ix->n_buckets = n_buckets;
	if (!ix->head || !ix->link) {
		index_free(ix);
		return -ENOMEM;
	}
	index_clear(ix);
	return 0;
}

/* Entry i at the end of bucket b's list. */
static void index_add(struct index *ix, uint32_t b, uint32_t i)
{
	struct link *l = ix->link;
	uint32_t first = ix->head[b];

	if (first == NIL) {
		l[i] = (struct link){i, i};
		ix->head[b] = i;
		return;
	}
	l[i] = (struct link){first, l[first].prev};
	l[l[first].prev].next = i;
	l[first].prev = i;
}

static void index_del(struct index *ix, uint32_t b, uint32_t i)
{
	struct link *l = ix->link;

	if (l[i].next == i) {
		ix->head[b] = NIL;
		return;
	}
	l[l[i].prev].next = l[i].next;
	l[l[i].next].prev = l[i].prev;
	if (ix->head[b] == i)
		ix->head[b] = l[i].next;
}

/* Entry `from` of bucket b's list is now entry `to` (taken out of every list before). */
static void index_move(struct index *ix, uint32_t b, uint32_t from, uint32_t to)
{
	struct link *l = ix->link;

	if (l[from].next == from)
		l[to] = (struct link){to, to};
	else {
		l[to] = l[from];
		l[l[to].prev].next = to;
		l[l[to].next].prev = to;
	}
	if (ix->head[b] == from)
		ix->head[b] = to;
}

/* The entry after i in bucket b's list, NIL after its last. */
static uint32_t index_next(const struct index *ix, uint32_t b, uint32_t i)
{
	uint32_t n = ix->link[i].next;

	return n == ix->head[b] ? NIL : n;
}

/* The bucket of a key made of two numbers and a string (a request id, or ""): SipHash under
 * this run's random key, so neither a sandbox choosing command numbers nor a client choosing
 * ids can put its entries into one bucket. Only an id's first PROTO_MAX_CLIENT_ID bytes are
 * hashed (no stored id is longer; the comparison that follows sees all of it). */
static uint32_t key_bucket(uint64_t a, uint64_t b, const char *s, uint32_t n_buckets)
{
	uint8_t key[16 + PROTO_MAX_CLIENT_ID];
	size_t n = strnlen(s, PROTO_MAX_CLIENT_ID);

	memcpy(key, &a, 8);
	memcpy(key + 8, &b, 8);
	memcpy(key + 16, s, n);
	return (uint32_t)(siphash24(R.hash_key, key, 16 + n) % n_buckets);
}

/* --- logging what peers make happen ------------------------------------------------------ */

static void client_forget(struct conn *c);
static int peer_key(int fd, uint8_t ret_key[static 16], char *ret_name, size_t name_size);

/* Reading from c again, unless something else still holds it paused. */
static void rx_resume(struct conn *c)
{
	if (!c->n_pausers && !c->self_paused && !c->rate_paused)
		lws_rx_flow_control(c->wsi, 1);
}

/* Client c, past QUEUE_SOFT, holds the sandbox connection s paused. */
static void pause_for(struct conn *s, struct conn *c)
{
	uint64_t bit = UINT64_C(1) << (c->slot % 64);

	if (s->pausers[c->slot / 64] & bit)
		return;
	s->pausers[c->slot / 64] |= bit;
	c->holds_pauses = true;
	if (!s->n_pausers++)
		lws_rx_flow_control(s->wsi, 0);
}

/* Client c drained (or is gone): the sandboxes it held paused are read again, unless another
 * client still holds them. Only its own: resuming every paused sandbox whenever any client
 * drained let a sandbox paused for a client that does not read push more at it each time
 * another client of it read something. */
static void release_pauses(struct conn *c)
{
	uint64_t bit = UINT64_C(1) << (c->slot % 64);

	if (!c->holds_pauses) /* (every writable callback of every client comes here) */
		return;
	c->holds_pauses = false;
	for (size_t i = 0; i < R.cfg.n_sandboxes; i++) {
		struct conn *s = R.sbs[i].conn;
		if (s && s->pausers[c->slot / 64] & bit) {
			s->pausers[c->slot / 64] &= ~bit;
			if (!--s->n_pausers)
				rx_resume(s);
		}
	}
}

static void queue_clear(struct queue *q)
{
	while (q->head) {
		struct msg *m = q->head;
		q->head = m->next;
		free(m);
	}
	q->tail = NULL;
	q->bytes = 0;
}

/* Client c no longer reads what it is sent, and the sandboxes that feed it wait for it: it
 * is disconnected now. Everything it held here goes at once (queue, pauses, routes, request
 * slots), so the sandboxes are read again before lws has closed the socket; the commands it
 * read keep running in pistisd, which keeps their frames until a reader acknowledges them,
 * so a client that redials and re-attaches (exec.attach after its last sequence) loses
 * nothing. */
static void client_drop(struct conn *c, const char *why)
{
	char peer[64] = "?";
	unsigned held;

	if (c->dropped)
		return;
	if (log_rate_ok(&R.dropped, (uint64_t)lws_now_usecs(), 5)) {
		char more[64] = "";
		uint8_t key[16];
		if (R.ctx)
			(void)peer_key(lws_get_socket_fd(c->wsi), key, peer, sizeof(peer));
		if ((held = log_rate_held(&R.dropped)))
			snprintf(more, sizeof(more), " (and %u more since the last report)", held);
		log_warning("Disconnected client %" PRIu64 " (%s), which does not read: %s "
			    "(%zu MiB waiting); its commands keep their output until it "
			    "re-attaches%s",
			    c->serial, peer, why, c->q.bytes >> 20, more);
	}
	c->dropped = true;
	client_forget(c);
	if (R.ctx) /* (the fuzz target has no context, nor sockets) */
		lws_set_timeout(c->wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
}

static void slow_timeout(lws_sorted_usec_list_t *sul)
{
	struct conn *c = lws_container_of(sul, struct conn, slow_sul);
	char why[96];

	if (!c->over_since)
		return;
	snprintf(why, sizeof(why), "its queue stayed over %u MiB for %u s", QUEUE_SOFT >> 20,
		 R.cfg.client_queue_grace_s);
	client_drop(c, why);
}

/* Queue m (len, binary and the payload set) to `to`; the queue owns it. */
static void enqueue_msg(struct conn *to, struct msg *m, struct conn *from)
{
	size_t len = m->len;

	if (to->dropped) {
		free(m);
		return;
	}
	m->next = NULL;
	if (to->q.tail)
		to->q.tail->next = m;
	else
		to->q.head = m;
	to->q.tail = m;
	to->q.bytes += len;
	lws_callback_on_writable(to->wsi);
	if (!to->is_client)
		return;
	if (to->q.bytes > (size_t)R.cfg.client_queue_max_mib << 20) {
		char why[64];
		snprintf(why, sizeof(why), "its queue passed %u MiB", R.cfg.client_queue_max_mib);
		return client_drop(to, why);
	}
	if (to->q.bytes <= QUEUE_SOFT)
		return;
	/* Backpressure: a client that falls behind pauses the sandbox feeding it — for at most
	 * the grace period, since that stalls the sandbox's other clients too. Never the other
	 * way round: one client connection may talk to many sandboxes, and pausing it for one
	 * that stopped reading would stall its requests to all the others; what is meant for
	 * a sandbox past its bound is refused instead (sandbox_full). */
	if (!to->over_since) {
		to->over_since = lws_now_usecs();
		if (R.ctx)
			lws_sul_schedule(R.ctx, 0, &to->slow_sul, slow_timeout,
					 (lws_usec_t)R.cfg.client_queue_grace_s * LWS_US_PER_SEC);
	}
	if (from && !from->is_client)
		pause_for(from, to);
}

static void enqueue(struct conn *to, const void *data, size_t len, bool binary, struct conn *from)
{
	struct msg *m = malloc(sizeof(*m) + LWS_PRE + len);

	if (!m)
		return;
	m->len = len;
	m->binary = binary;
	memcpy(m->buf + LWS_PRE, data, len);
	enqueue_msg(to, m, from);
}

/* A sandbox whose queue is past QUEUE_SOFT has stopped reading (or reads slower than its
 * clients write): client messages for it are refused with `limit` until it drains, so its
 * queue stays bounded without pausing clients. Logged once each time it fills up. */
static bool sandbox_full(struct sandbox *sb)
{
	if (sb->conn->q.bytes <= QUEUE_SOFT) {
		sb->full_warned = false;
		return false;
	}
	if (!sb->full_warned) {
		sb->full_warned = true;
		log_warning("Sandbox '%s' is not reading (%zu MiB wait for it): client messages "
			    "for it are refused until it drains",
			    sb->cfg->name, sb->conn->q.bytes >> 20);
	}
	return true;
}

/* Only sandboxes are paused for a full peer (enqueue_msg): a client drained under half the
 * bound resumes those it held; a sandbox drained has nobody to resume. */
static void resume_producers(struct conn *c)
{
	if (!c->is_client || c->q.bytes > QUEUE_SOFT / 2)
		return;
	if (c->over_since) {
		c->over_since = 0;
		if (R.ctx)
			lws_sul_cancel(&c->slow_sul);
	}
	release_pauses(c);
}

/* A peer that sends requests but never reads the answers (server-min's own replies: errors,
 * acks, events) is not read from again until they drain, as a full reader pauses whoever
 * feeds it: its requests cannot grow the queue without bound. */
static void send_text(struct conn *to, char *json)
{
	if (!json)
		return;
	enqueue(to, json, strlen(json), false, NULL);
	free(json);
	if (to->q.bytes > QUEUE_SOFT && !to->self_paused) {
		to->self_paused = true;
		lws_rx_flow_control(to->wsi, 0);
	}
}

static void send_error(struct conn *to, const char *id, enum proto_err code, const char *fmt, ...)
	_printf_(4, 5);
static void send_error(struct conn *to, const char *id, enum proto_err code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	send_text(to, proto_error_build(id, code, msg));
}

/* A relayed message as the text that goes on: NULL when it cannot, *ret_err saying why
 * (PROTO_E_INTERNAL: out of memory; PROTO_E_TOO_LARGE: past PROTO_MAX_MESSAGE, *ret_len its
 * length). Re-encoding may grow a message: cJSON writes numbers with %1.15g, so "1e14" (4
 * bytes) goes on as "100000000000000" (15), and a sandbox's 655 KB of them left as 2 MB,
 * which the client refused by dropping its connection. It grows by at most what its 131 072
 * values (PROTO_MAX_VALUES) gain, 15 bytes each ("5e-324" is "4.94065645841247e-324"): the
 * text printed is never much over 3 MiB. */
static char *message_print(const cJSON *root, size_t *ret_len, enum proto_err *ret_err)
{
	char *s = cJSON_PrintUnformatted(root);

	*ret_len = 0;
	if (!s) {
		*ret_err = PROTO_E_INTERNAL;
		return NULL;
	}
	*ret_len = strlen(s);
	if (*ret_len > PROTO_MAX_MESSAGE) {
		free(s);
		*ret_err = PROTO_E_TOO_LARGE;
		return NULL;
	}
	*ret_err = PROTO_E_OK;
	return s;
}

/* What a sandbox sends is logged (bad messages, hellos), but at most SANDBOX_LOG_BURST lines
 * a second per connection: it may send 5000 messages a second. The count of those not
 * logged is reported before the next line, or when it disconnects. */
#define SANDBOX_LOG_BURST 10

static void sandbox_log_report(struct sandbox *sb)
{
	unsigned held = log_rate_held(&sb->log_rate);

	if (held)
		log_warning("Sandbox '%s': %u more of its messages were not logged (over %u a "
			    "second)",
			    sb->cfg->name, held, SANDBOX_LOG_BURST);
}

static bool sandbox_log_ok(struct conn *c)
{
	if (!log_rate_ok(&c->sb->log_rate, (uint64_t)lws_now_usecs(), SANDBOX_LOG_BURST))
		return false;
	sandbox_log_report(c->sb);
	return true;
}

/* Whether a sandbox's hello names the protocol version this relay speaks; if not, what it
 * named, for the log ("2", "none", "not a number"). */
static bool hello_version_ok(const cJSON *root, char *ret_said, size_t size)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");

	if (cJSON_IsNumber(v) && v->valuedouble == PROTO_VERSION)
		return true;
	if (cJSON_IsNumber(v))
		snprintf(ret_said, size, "%.10g", v->valuedouble);
	else
		snprintf(ret_said, size, "%s", v ? "not a number" : "none");
	return false;
}

/* Malformed messages (sandbox_malformed) one sandbox connection may send before it is cut
 * (sandbox_cut). pistisd sends none: a connection that sends them is broken or hostile, and
 * each one dropped may leave a client waiting on an answer, or with a gap in a command's
 * output, that only a redial's re-attach resends. A few are tolerated, so that one stray
 * message does not fail every request in flight. */
#define SANDBOX_MALFORMED_MAX 16

/* Sandbox c sent something malformed (what, after "sent "): it is dropped, logged at the
 * sandbox's log rate, and counted towards SANDBOX_MALFORMED_MAX. Not what a race makes of
 * a well-formed message (an answer for a client that has gone): only what pistisd never
 * sends. */
static void sandbox_malformed(struct conn *c, const char *fmt, ...) _printf_(2, 3);
static void sandbox_malformed(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->malformed_last, sizeof(c->malformed_last), fmt, ap);
	va_end(ap);
	c->malformed++;
	if (sandbox_log_ok(c))
		log_warning("Sandbox '%s' sent %s", c->sb->cfg->name, c->malformed_last);
}

/* --- routes ----------------------------------------------------------------------------- */

static int routes_init(void)
{
	R.routes = calloc(MAX_ROUTES, sizeof(*R.routes));
	if (!R.routes)
		return -ENOMEM;
	for (int k = 0; k < N_ROUTE_INDEXES; k++)
		if (index_init(&R.route_ix[k], k == ROUTE_OF_CLIENT ? MAX_CLIENTS : MAX_ROUTES,
			       MAX_ROUTES) < 0)
			return -ENOMEM;
	return 0;
}

static uint32_t route_bucket(const struct route *r, int k)
{
	size_t sb = (size_t)(r->sb - R.sbs);

	switch (k) {
	case ROUTE_BY_CMD:
		return key_bucket(sb, r->cmd, "", MAX_ROUTES);
	case ROUTE_BY_READER:
		return key_bucket(r->client, r->cmd, "", MAX_ROUTES);
	case ROUTE_BY_OWNER:
		return key_bucket(r->client, sb, r->orig_id, MAX_ROUTES);
	default:
		return (uint32_t)(r->client % MAX_CLIENTS);
	}
}

/* Slot i, filled in, is in use: in every index, and in the bitmaps. */
static void route_insert(uint32_t i)
{
	struct route *r = &R.routes[i];
	uint64_t bit = UINT64_C(1) << (i % 64);

	r->used = true;
	R.route_used[i / 64] |= bit;
	if (R.route_used[i / 64] == UINT64_MAX)
		R.route_full[i / 4096] |= UINT64_C(1) << (i / 64 % 64);
	r->sb->route_slots->word[i / 64] |= bit;
	r->sb->route_slots->some[i / 4096] |= UINT64_C(1) << (i / 64 % 64);
	r->sb->n_routes++;
	if (i >= R.n_routes)
		R.n_routes = i + 1;
	for (int k = 0; k < N_ROUTE_INDEXES; k++)
		index_add(&R.route_ix[k], route_bucket(r, k), i);
}

static void route_remove(struct route *r)
{
	uint32_t i = (uint32_t)(r - R.routes);
	uint64_t bit = UINT64_C(1) << (i % 64);

	for (int k = 0; k < N_ROUTE_INDEXES; k++)
		index_del(&R.route_ix[k], route_bucket(r, k), i);
	R.route_used[i / 64] &= ~bit;
	R.route_full[i / 4096] &= ~(UINT64_C(1) << (i / 64 % 64));
	if (!(r->sb->route_slots->word[i / 64] &= ~bit))
		r->sb->route_slots->some[i / 4096] &= ~(UINT64_C(1) << (i / 64 % 64));
	r->sb->n_routes--;
	r->used = false;
}

/* The lowest free slot, or NIL when all MAX_ROUTES are taken: the one a walk of the table
 * from its start took, so a route gets the slot it always got, and a sandbox's routes are
 * re-attached in the order they always were (route_next_of). */
static uint32_t route_slot_free(void)
{
	for (uint32_t w = 0; w < ELEMENTSOF(R.route_full); w++)
		if (~R.route_full[w]) {
			uint32_t u = w * 64 + (uint32_t)__builtin_ctzll(~R.route_full[w]);
			return u * 64 + (uint32_t)__builtin_ctzll(~R.route_used[u]);
		}
	return NIL;
}

/* sb's first route in slot i or after, or NULL: its routes in slot order, for a hello. */
static struct route *route_next_of(const struct sandbox *sb, uint32_t i)
{
	const struct route_slots *set = sb->route_slots;
	uint32_t w = i / 64;
	uint64_t bits;

	if (!set || w >= MAX_ROUTES / 64)
		return NULL;
	if ((bits = set->word[w] & UINT64_MAX << (i % 64)))
		return &R.routes[w * 64 + (uint32_t)__builtin_ctzll(bits)];
	for (uint32_t s = (w + 1) / 64; s < ELEMENTSOF(set->some); s++) {
		uint64_t some = set->some[s];
		if (s == (w + 1) / 64)
			some &= UINT64_MAX << ((w + 1) % 64);
		if (some) {
			w = s * 64 + (uint32_t)__builtin_ctzll(some);
			return &R.routes[w * 64 + (uint32_t)__builtin_ctzll(set->word[w])];
		}
	}
	return NULL;
}

/* The route of sb's command cmd: at most one (route_set replaces it). */
static struct route *route_find(struct sandbox *sb, uint32_t cmd)
{
	const struct index *ix = &R.route_ix[ROUTE_BY_CMD];
	uint32_t b = key_bucket((size_t)(sb - R.sbs), cmd, "", MAX_ROUTES);

	for (uint32_t i = ix->head[b]; i != NIL; i = index_next(ix, b, i))
		if (R.routes[i].sb == sb && R.routes[i].cmd == cmd)
			return &R.routes[i];
	return NULL;
}

/* A command cmd that client reads: the route in the highest slot, as a walk of the table
 * from its end found it. *ret_several: client reads a command cmd in another sandbox too
 * (one per sandbox at most: route_find). */
static struct route *route_find_client(uint64_t client, uint32_t cmd, bool *ret_several)
{
	const struct index *ix = &R.route_ix[ROUTE_BY_READER];
	uint32_t b = key_bucket(client, cmd, "", MAX_ROUTES);
	struct route *found = NULL;

	*ret_several = false;
	for (uint32_t i = ix->head[b]; i != NIL; i = index_next(ix, b, i))
		if (R.routes[i].client == client && R.routes[i].cmd == cmd) {
			*ret_several = found != NULL;
			if (!found || &R.routes[i] > found)
				found = &R.routes[i];
		}
	return found;
}

/* A command of sb that client reads through the request id (its events and errors). */
static bool route_of_owner(struct sandbox *sb, uint64_t client, const char *id)
{
	const struct index *ix = &R.route_ix[ROUTE_BY_OWNER];
	uint32_t b = key_bucket(client, (size_t)(sb - R.sbs), id, MAX_ROUTES);

	for (uint32_t i = ix->head[b]; i != NIL; i = index_next(ix, b, i))
		if (R.routes[i].sb == sb && R.routes[i].client == client &&
		    !strcmp(R.routes[i].orig_id, id))
			return true;
	return false;
}

/* Make room: drop one of sb's routes, an ended one (its reader only owes the final ack)
 * before a running one, the lowest slot of each kind; its reader is told, never left
 * waiting for output that will not come. The slot is free afterwards. */
static void route_evict(struct sandbox *sb, const char *why)
{
	struct route *victim = NULL;
	struct conn *cl;

	for (struct route *rt = route_next_of(sb, 0); rt;
	     rt = route_next_of(sb, (uint32_t)(rt - R.routes) + 1)) {
		if (!victim)
			victim = rt;
		if (rt->ended) {
			victim = rt;
			break;
		}
	}
	if (!victim)
		return;
	route_remove(victim); /* (what the message below needs stays in the slot) */
	if ((cl = client_by_serial(victim->client))) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "cmd", victim->cmd);
		cJSON_AddStringToObject(o, "reason", why);
		send_text(cl, proto_event_build("exec.detached", victim->orig_id, o));
	}
}

/* A free slot for a new route of sb, or NIL. sb at its own bound gives up one of its own;
 * a full table, one of the sandbox holding the most routes if that is more than sb holds
 * (so a sandbox that hoards routes loses them, not the others). */
static uint32_t route_slot_for(struct sandbox *sb)
{
	uint32_t i;
	struct sandbox *most = sb;

	if (sb->n_routes >= MAX_ROUTES_PER_SANDBOX)
		route_evict(sb, "too many commands routed for this sandbox");
	if ((i = route_slot_free()) != NIL)
		return i;
	for (size_t k = 0; k < R.cfg.n_sandboxes; k++)
		if (R.sbs[k].n_routes > most->n_routes)
			most = &R.sbs[k];
	if (most == sb || most->n_routes <= sb->n_routes + 1)
		return NIL;
	route_evict(most, "the relay's route table is full");
	return route_slot_free();
}

static struct route *route_set(struct sandbox *sb, uint32_t cmd, uint64_t client,
			       const char *orig_id, uint64_t from)
{
	struct route *r = route_find(sb, cmd);
	struct conn *prev;
	uint32_t i;

	if (!sb->route_slots && !(sb->route_slots = calloc(1, sizeof(*sb->route_slots))))
		return NULL;
	if (r && r->client != client && (prev = client_by_serial(r->client))) {
		/* one reader per command: tell the one that lost it (a queue past its bound
		 * drops it, and r with its routes: the slot is then free, and still this one) */
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "cmd", cmd);
		cJSON_AddStringToObject(o, "reason", "another client attached");
		send_text(prev, proto_event_build("exec.detached", r->orig_id, o));
	}
	if (r) {
		i = (uint32_t)(r - R.routes);
		if (r->used)
			route_remove(r); /* its keys change */
	} else if ((i = route_slot_for(sb)) == NIL)
		return NULL;
	r = &R.routes[i];
	*r = (struct route){
		.sb = sb, .cmd = cmd, .client = client, .last_seq = from, .acked = from};
	snprintf(r->orig_id, sizeof(r->orig_id), "%s", orig_id);
	route_insert(i);
	return r;
}

/* --- requests in flight ------------------------------------------------------------------ */

/* A client connection may take another slot while more slots are free than it holds: N
 * connections that send requests nobody answers end up with about MAX_PENDING / (N + 1)
 * each (one alone with half), so slots stay free for every other client, and a client
 * that holds none is refused only when every slot is taken, which needs more clients
 * than MAX_CLIENTS. -ENOBUFS: no slot is free; -EDQUOT: this client holds as many as are
 * free. */
static int pending_add(struct sandbox *sb, const struct conn *c, const char *id, bool reader)
{
	size_t free_slots = MAX_PENDING - sb->n_pend;
	struct pending *p;
	uint32_t i;

	if (!sb->pend) {
		sb->pend = calloc(MAX_PENDING, sizeof(*sb->pend));
		sb->pend_of = calloc(MAX_CLIENTS, sizeof(*sb->pend_of));
		if (!sb->pend || !sb->pend_of ||
		    index_init(&sb->pend_by_id, MAX_PENDING, MAX_PENDING) < 0 ||
		    index_init(&sb->pend_of_client, MAX_CLIENTS, MAX_PENDING) < 0) {
			free(sb->pend);
			free(sb->pend_of);
			sb->pend = NULL;
			sb->pend_of = NULL;
			index_free(&sb->pend_by_id);
			index_free(&sb->pend_of_client);
			return -ENOMEM;
		}
	}
	if (!free_slots)
		return -ENOBUFS;
	if (sb->pend_of[c->slot] >= free_slots)
		return -EDQUOT;
	i = (uint32_t)sb->n_pend++;
	p = &sb->pend[i];
	p->client = c->serial;
	p->bucket = key_bucket(c->serial, 0, id, MAX_PENDING);
	p->reader = reader;
	snprintf(p->id, sizeof(p->id), "%s", id);
	sb->pend_of[c->slot]++;
	index_add(&sb->pend_by_id, p->bucket, i);
	index_add(&sb->pend_of_client, c->slot, i);
	return 0;
}

/* The last entry takes the place of entry i, as it always did: the table's order is the
 * order pending_fail_all answers in. */
static void pending_remove(struct sandbox *sb, uint32_t i)
{
	uint32_t last = (uint32_t)--sb->n_pend;
	const struct pending *l = &sb->pend[last];

	sb->pend_of[sb->pend[i].client % MAX_CLIENTS]--;
	index_del(&sb->pend_by_id, sb->pend[i].bucket, i);
	index_del(&sb->pend_of_client, sb->pend[i].client % MAX_CLIENTS, i);
	if (i == last)
		return;
	index_move(&sb->pend_by_id, l->bucket, last, i);
	index_move(&sb->pend_of_client, l->client % MAX_CLIENTS, last, i);
	sb->pend[i] = *l;
}

/* Whether client sent id to sb and has no answer yet; an answer (final) takes it (of two
 * requests in flight with one id, the first sent). *ret_reader: the request was an
 * exec.start or exec.attach. */
static bool pending_match(struct sandbox *sb, uint64_t client, const char *id, bool final,
			  bool *ret_reader)
{
	const struct index *ix = &sb->pend_by_id;
	uint32_t b;

	*ret_reader = false;
	if (!sb->pend)
		return false;
	b = key_bucket(client, 0, id, MAX_PENDING);
	for (uint32_t i = ix->head[b]; i != NIL; i = index_next(ix, b, i))
		if (sb->pend[i].client == client && !strcmp(sb->pend[i].id, id)) {
			*ret_reader = sb->pend[i].reader;
			if (final)
				pending_remove(sb, i);
			return true;
		}
	return false;
}

/* The sandbox's connection is gone (or replaced) with requests in flight: their answers
 * will never come (pistisd does not replay answers across connections), so every client
 * still waiting is told now instead of waiting for nothing. */
static void pending_fail_all(struct sandbox *sb, const char *what)
{
	size_t n = sb->n_pend;

	/* The table is emptied before anyone is told: an answer can push a client past its
	 * queue's hard bound, and dropping it took its entries out of this table mid-loop
	 * (each replaced by another client's, which the loop had passed: never told). The
	 * entries' bytes stay where they are until the next request is added. */
	sb->n_pend = 0;
	if (sb->pend) {
		memset(sb->pend_of, 0, MAX_CLIENTS * sizeof(*sb->pend_of));
		index_clear(&sb->pend_by_id);
		index_clear(&sb->pend_of_client);
	}
	for (size_t i = 0; i < n; i++) {
		struct conn *cl = client_by_serial(sb->pend[i].client);
		if (cl)
			send_error(
				cl, sb->pend[i].id, PROTO_E_UNAVAILABLE,
				"sandbox \"%s\" %s before it answered: the request may or may "
				"not have taken effect (exec.list, or exec.attach by tag, tells)",
				sb->cfg->name, what);
	}
}

static int cmp_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Client c's requests leave every table, each from its last entry down as a walk from the
 * end took them (so what stays is in the order it always was): then each one taken out is
 * replaced by an entry of another client, and the others' positions hold. */
static void pending_drop_client(const struct conn *c)
{
	uint32_t mine[MAX_PENDING];

	for (size_t k = 0; k < R.cfg.n_sandboxes; k++) {
		struct sandbox *sb = &R.sbs[k];
		const struct index *ix = &sb->pend_of_client;
		size_t n = 0;
		if (!sb->pend || !sb->pend_of[c->slot])
			continue;
		for (uint32_t i = ix->head[c->slot]; i != NIL; i = index_next(ix, c->slot, i))
			mine[n++] = i;
		qsort(mine, n, sizeof(*mine), cmp_desc);
		for (size_t j = 0; j < n; j++)
			pending_remove(sb, mine[j]);
	}
}

/* --- messages from clients --------------------------------------------------------------- */

/* Whether this client's id is waiting for an answer at, or names a command it reads on, a
 * sandbox other than sb. A sandbox's message reaches a client under the id of a request
 * sent to that sandbox or of a command of that sandbox the client reads: with one id in use
 * at two sandboxes, one could answer in the other's name. */
static bool client_id_elsewhere(const struct sandbox *sb, uint64_t client, const char *id)
{
	bool reader;

	for (size_t k = 0; k < R.cfg.n_sandboxes; k++)
		if (&R.sbs[k] != sb && (pending_match(&R.sbs[k], client, id, false, &reader) ||
					route_of_owner(&R.sbs[k], client, id)))
			return true;
	return false;
}

static struct sandbox *sandbox_named(const char *name)
{
	if (!name)
		return R.cfg.n_sandboxes == 1 ? &R.sbs[0] : NULL;
	for (size_t i = 0; i < R.cfg.n_sandboxes; i++)
		if (!strcmp(R.sbs[i].cfg->name, name))
			return &R.sbs[i];
	return NULL;
}

static cJSON *sandboxes_json(void)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; i < R.cfg.n_sandboxes && a; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", R.sbs[i].cfg->name);
		cJSON_AddBoolToObject(o, "connected", R.sbs[i].conn != NULL);
		if (R.sbs[i].software[0])
			cJSON_AddStringToObject(o, "software", R.sbs[i].software);
		cJSON_AddNumberToObject(o, "connects", R.sbs[i].connects);
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

/* pistisd bounds unacknowledged output per reader (docs/protocol.md, "reader"): the reader
 * of what a client starts or attaches is its connection, named by the relay, never by the
 * client (which could name another's and spend that one's share). */
static void set_reader(cJSON *req, uint64_t serial)
{
	char reader[PROTO_MAX_READER + 1];

	snprintf(reader, sizeof(reader), "%s.%" PRIu64, R.boot, serial);
	cJSON_DeleteItemFromObjectCaseSensitive(req, "reader");
	cJSON_AddStringToObject(req, "reader", reader);
}

static void client_text(struct conn *c, const char *buf, size_t len)
{
	struct proto_error err = {0};
	struct proto_request req;
	cJSON *root = NULL;
	const char *sbname = NULL;
	struct sandbox *sb;
	char fwd_id[PROTO_MAX_ID + 1], orig_id[PROTO_MAX_CLIENT_ID + 1];
	_cleanup_free_ char *out = NULL;
	struct route *rt = NULL; /* exec.ack: the command's */
	uint64_t ack_seq = 0;
	enum proto_err perr;
	size_t out_len;
	int r;

	if (proto_parse(buf, len, &root, &err) < 0)
		return send_error(c, NULL, err.code, "%s", err.message);
	if (proto_request_parse(root, PROTO_MAX_CLIENT_ID, &req, &err) < 0) {
		send_error(c, req.id, err.code, "%s", err.message);
		goto out;
	}
	if (req.op == PROTO_OP_SANDBOXES_LIST) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "sandboxes", sandboxes_json());
		send_text(c, proto_ok_build(req.id, o));
		goto out;
	}
	if (req.op == PROTO_OP_HELLO) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "version", PROTO_VERSION);
		cJSON_AddStringToObject(o, "software", "server-min " PISTIS_VERSION);
		send_text(c, proto_ok_build(req.id, o));
		goto out;
	}
	if (proto_get_string(root, "sandbox", 63, &sbname, &err) == -EINVAL) {
		send_error(c, req.id, PROTO_E_BAD_REQUEST, "%s", err.message);
		goto out;
	}
	sb = sandbox_named(sbname);
	if (!sb) {
		send_error(c, req.id, PROTO_E_NOT_FOUND,
			   sbname ? "no sandbox \"%.63s\"" : "\"sandbox\" is required%s",
			   sbname ? sbname : " (more than one is configured)");
		goto out;
	}
	if (!sb->conn) {
		send_error(c, req.id, PROTO_E_UNAVAILABLE, "sandbox \"%s\" is not connected",
			   sb->cfg->name);
		goto out;
	}
	if (sandbox_full(sb)) {
		/* an acknowledgement has no answer, and a later one covers it */
		if (req.op != PROTO_OP_EXEC_ACK)
			send_error(c, req.id, PROTO_E_LIMIT,
				   "sandbox \"%s\" is not reading: %zu MiB wait for it",
				   sb->cfg->name, sb->conn->q.bytes >> 20);
		goto out;
	}
	if (req.op != PROTO_OP_EXEC_ACK && client_id_elsewhere(sb, c->serial, req.id)) {
		send_error(c, req.id, PROTO_E_BAD_REQUEST,
			   "id \"%.64s\" is in use at another sandbox (a request waiting for its "
			   "answer, or a command this connection reads): use another",
			   req.id);
		goto out;
	}
	snprintf(fwd_id, sizeof(fwd_id), "%s.%" PRIu64 ".%s", R.boot, c->serial, req.id);
	snprintf(orig_id, sizeof(orig_id), "%s", req.id); /* req.id dies with the replace */
	cJSON_DeleteItemFromObjectCaseSensitive(root, "sandbox");
	cJSON_ReplaceItemInObjectCaseSensitive(root, "id", cJSON_CreateString(fwd_id));
	if (req.op == PROTO_OP_EXEC_START || req.op == PROTO_OP_EXEC_ATTACH)
		set_reader(root, c->serial);
	if (req.op == PROTO_OP_EXEC_ACK) {
		/* An acknowledgement frees frames in pistisd for good, so only the command's
		 * current reader may give one, and only for frames this relay forwarded to it:
		 * an earlier reader (or any other client) acking further would make pistisd drop
		 * frames the current reader still needs. The reader's position is kept for the
		 * re-attach after a sandbox reconnect. */
		uint64_t cmd = 0;
		if (proto_get_u64(root, "cmd", UINT32_MAX, &cmd, &err) == 0 &&
		    proto_get_u64(root, "seq", UINT64_MAX >> 11, &ack_seq, &err) == 0)
			rt = route_find(sb, (uint32_t)cmd);
		if (!rt || rt->client != c->serial) {
			log_debug("Dropped an exec.ack from client %" PRIu64 ": not the reader of "
				  "command %llu",
				  c->serial, (unsigned long long)cmd);
			goto out;
		}
		if (ack_seq > rt->last_seq) {
			ack_seq = rt->last_seq;
			cJSON_ReplaceItemInObjectCaseSensitive(root, "seq",
							       cJSON_CreateNumber((double)ack_seq));
		}
	}
	/* Printed before anything is taken or changed for it: a request that cannot go on is
	 * answered here, and holds nothing (pistisd would answer one over the limit too_large
	 * with id null, which names no client: it waited for ever, and held a slot). */
	if (!(out = message_print(root, &out_len, &perr))) {
		if (perr == PROTO_E_TOO_LARGE)
			send_error(c, orig_id, perr,
				   "the request is %zu bytes once re-encoded for sandbox \"%s\" "
				   "(its id lengthened, numbers written out in full: 1e14 as "
				   "100000000000000), over the limit of %u; not sent",
				   out_len, sb->cfg->name, PROTO_MAX_MESSAGE);
		else
			send_error(c, orig_id, perr, "out of memory; not sent to sandbox \"%s\"",
				   sb->cfg->name);
		goto out;
	}
	if (req.op == PROTO_OP_EXEC_ACK) {
		if (ack_seq > rt->acked)
			rt->acked = ack_seq;
		if (rt->ended && ack_seq >= rt->last_seq)
			route_remove(rt);
	} else if ((r = pending_add(sb, c, orig_id,
				    req.op == PROTO_OP_EXEC_START ||
					    req.op == PROTO_OP_EXEC_ATTACH)) < 0) {
		if (r == -EDQUOT)
			send_error(c, orig_id, PROTO_E_LIMIT,
				   "%u of this connection's requests to sandbox \"%s\" are waiting "
				   "for an answer, and %zu slots are free: a connection takes one "
				   "only while more are free than it holds",
				   (unsigned)sb->pend_of[c->slot], sb->cfg->name,
				   (size_t)(MAX_PENDING - sb->n_pend));
		else
			send_error(c, orig_id, PROTO_E_LIMIT,
				   "%u requests to sandbox \"%s\" are waiting for an answer",
				   MAX_PENDING, sb->cfg->name);
		goto out;
	}
	enqueue(sb->conn, out, out_len, false, c);
out:
	cJSON_Delete(root);
}

static void client_binary(struct conn *c, const uint8_t *buf, size_t len)
{
	struct proto_error err = {0};
	struct proto_frame f;
	struct route *rt;
	bool several;

	if (proto_frame_parse(buf, len, &f, &err) < 0)
		return send_error(c, NULL, err.code, "%s", err.message);
	if (f.stream != PROTO_STREAM_STDIN)
		return send_error(c, NULL, PROTO_E_BAD_FRAME, "clients send only stdin frames");
	rt = route_find_client(c->serial, f.cmd, &several);
	if (!rt || !rt->sb->conn)
		return send_error(c, NULL, PROTO_E_NOT_FOUND, "no attached command %u", f.cmd);
	/* A frame does not name its sandbox, and command numbers are per sandbox: when this
	 * client reads command N in two of them, stdin meant for one must not reach the other. */
	if (several)
		return send_error(c, NULL, PROTO_E_NOT_UNIQUE,
				  "command %u is attached in more than one sandbox; send "
				  "exec.stdin with \"sandbox\"",
				  f.cmd);
	if (sandbox_full(rt->sb))
		return send_error(
			c, NULL, PROTO_E_LIMIT,
			"sandbox \"%s\" is not reading: %zu MiB wait for it; stdin frame %llu "
			"of command %u dropped",
			rt->sb->cfg->name, rt->sb->conn->q.bytes >> 20, (unsigned long long)f.seq,
			f.cmd);
	enqueue(rt->sb->conn, buf, len, true, c);
}

/* --- messages from sandboxes -------------------------------------------------------------- */

/* How many exec.attach it sent (each costs the sandbox a token: rate_take). */
static size_t reattach_routes(struct sandbox *sb)
{
	size_t n = 0;

	for (struct route *rt = route_next_of(sb, 0); rt;
	     rt = route_next_of(sb, (uint32_t)(rt - R.routes) + 1)) {
		char id[PROTO_MAX_ID + 1];
		cJSON *o;
		char *s;
		if (!client_by_serial(rt->client))
			continue;
		snprintf(id, sizeof(id), "%s.%" PRIu64 ".%s", R.boot, rt->client, rt->orig_id);
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "id", id);
		cJSON_AddStringToObject(o, "op", "exec.attach");
		cJSON_AddNumberToObject(o, "cmd", rt->cmd);
		set_reader(o, rt->client);
		/* only what the client acknowledged: frames queued to it may still be lost */
		cJSON_AddNumberToObject(o, "after", (double)rt->acked);
		s = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		if (s) {
			enqueue(sb->conn, s, strlen(s), false, NULL);
			free(s);
			n++;
		}
	}
	return n;
}

/* Routes to commands the sandbox no longer holds are ended before the re-attach: after a
 * pistisd restart its command numbers start at 1 again, and a re-attach by number would make
 * the old reader the reader of a new command, perhaps another agent's. Its hello lists the
 * commands it holds (at most 256; more are not looked at). The reader is told. */
static void drop_gone_routes(struct sandbox *sb, const cJSON *commands)
{
	if (!cJSON_IsArray(commands))
		return; /* a hello without the list: nothing is known */
	for (struct route *rt = route_next_of(sb, 0); rt;
	     rt = route_next_of(sb, (uint32_t)(rt - R.routes) + 1)) {
		const cJSON *e;
		struct conn *cl;
		unsigned k = 0;
		bool held = false;
		cJSON_ArrayForEach(e, commands)
		{
			const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "cmd");
			if (++k > 256 || (held = cJSON_IsNumber(n) && n->valuedouble == rt->cmd))
				break;
		}
		if (held)
			continue;
		route_remove(rt); /* (what the message below needs stays in the slot) */
		if ((cl = client_by_serial(rt->client))) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddNumberToObject(o, "cmd", rt->cmd);
			cJSON_AddStringToObject(o, "reason",
						"the sandbox no longer has the command "
						"(pistisd restarted)");
			send_text(cl, proto_event_build("exec.detached", rt->orig_id, o));
		}
	}
}

/* The id of a message for one of this run's clients is "BOOT.SERIAL.ID", as fwd_id and
 * the reader ids are written: BOOT this run's 8 hex digits, SERIAL the client's, in
 * decimal as PRIu64 writes it (no sign, space or leading zero). Returns ID and the serial,
 * or NULL for any other spelling: an id is matched by its bytes, so two spellings of one
 * serial must not both reach a client. */
static const char *client_id_split(const char *s, uint64_t *ret_serial)
{
	size_t n = strlen(R.boot);
	const char *end;

	if (strncmp(s, R.boot, n) || s[n] != '.' || (s[n + 1] == '0' && s[n + 2] != '.'))
		return NULL;
	if (parse_uint_strict(s + n + 1, UINT64_MAX, &end, ret_serial) < 0 || *end != '.')
		return NULL;
	return end + 1;
}

static void rate_take(struct conn *c, enum rate_cost what, double n);

/* A message from sandbox c for client, under its id, that cannot go on (message_print:
 * perr, n bytes when re-encoded from len): the client is never left waiting on it. The
 * request it answers, or sent an event for (`requested`: still in the table unless
 * `answer` took it), is answered here and its slot freed: what the sandbox sends for it
 * afterwards is dropped, as for a request it was not sent. An event of a command the
 * client reads (route: an exec.exit, say) detaches the client from the command, as losing
 * it to another reader would. A message past the limit is bad input from the sandbox,
 * counted and logged as such. */
static void sandbox_unsent(struct conn *c, struct conn *client, const char *id, bool requested,
			   bool answer, struct route *route, size_t len, size_t n,
			   enum proto_err perr)
{
	struct sandbox *sb = c->sb;
	bool reader;

	if (perr == PROTO_E_TOO_LARGE)
		sandbox_malformed(c,
				  "a message of %zu bytes that grew to %zu, past %u, when "
				  "re-encoded for a client; dropped",
				  len, n, PROTO_MAX_MESSAGE);
	if (requested && !answer)
		(void)pending_match(sb, client->serial, id, true, &reader);
	if (requested) {
		if (perr == PROTO_E_TOO_LARGE)
			send_error(
				client, id, perr,
				"the reply from sandbox \"%s\" grew past 1 MiB when re-encoded "
				"(%zu bytes from %zu: numbers are written out in full); dropped: "
				"the request may or may not have taken effect",
				sb->cfg->name, n, len);
		else
			send_error(client, id, perr,
				   "out of memory for the reply from sandbox \"%s\"; dropped: the "
				   "request may or may not have taken effect",
				   sb->cfg->name);
	} else if (route) {
		cJSON *o = cJSON_CreateObject();
		char *ev;
		cJSON_AddNumberToObject(o, "cmd", route->cmd);
		cJSON_AddStringToObject(
			o, "reason",
			perr == PROTO_E_TOO_LARGE
				? "the sandbox sent an event for it that grew past "
				  "1 MiB when re-encoded"
				: "out of memory for an event the sandbox sent for it");
		ev = proto_event_build("exec.detached", route->orig_id, o);
		route_remove(route); /* after the last read of its fields */
		send_text(client, ev);
	}
}

static void sandbox_text(struct conn *c, const char *buf, size_t len)
{
	struct proto_error err = {0};
	cJSON *root = NULL, *idv, *ev, *cmdv;
	uint64_t serial;
	struct conn *client;
	struct route *rt;
	bool has_cmd, own_route, requested, reader_req, answer;
	const char *id;
	char cid[PROTO_MAX_CLIENT_ID + 1];
	_cleanup_free_ char *out = NULL;
	enum proto_err perr;
	size_t values, out_len;
	int parsed = proto_parse_values(buf, len, &root, &err, &values);

	rate_take(c, COST_VALUES, (double)(values / SANDBOX_VALUES_PER_TOKEN));
	if (parsed < 0) {
		sandbox_malformed(c, "a bad message: %s", err.message);
		return;
	}
	if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "op"))) {
		struct proto_request req;
		bool hello = proto_request_parse(root, PROTO_MAX_ID, &req, &err) == 0 &&
			     req.op == PROTO_OP_HELLO;

		if (!hello)
			send_text(c, proto_error_build(req.id, PROTO_E_UNKNOWN_OP,
						       "the relay serves only hello"));
		else if (c->said_hello) {
			/* pistisd says it once per connection; each one re-attached every route
			 * (a sandbox with 256 routes made the relay send 256 messages a hello).
			 * Another is a message pistisd never sends: malformed. */
			send_text(c,
				  proto_error_build(req.id, PROTO_E_BAD_REQUEST,
						    "hello was already said on this connection"));
			sandbox_malformed(c, "a second hello on one connection");
		} else if (!hello_version_ok(root, c->refused_version,
					     sizeof(c->refused_version))) {
			/* A pistisd of another protocol version (an image upgraded or rolled back
			 * past this relay) reads every request by other rules: served, its
			 * answers would be taken for ours. Before, any hello was accepted. The
			 * connection is cut when this message is done (sandbox_refuse), with the
			 * reason in the close frame: an answer queued now would not be sent. */
			c->said_hello = true;
		} else {
			const char *sw = NULL;
			c->said_hello = true;
			(void)proto_get_string(root, "software", SOFTWARE_MAX, &sw, &err);
			/* Shown by GET /v1/sandboxes and sandboxes.list, which an operator reads
			 * with curl on a terminal: the sandbox's bytes C-escaped (cut at a whole
			 * escape), so no ESC, C1 control (U+009B is a CSI) or bidi override
			 * reaches it raw. pistisd says "pistisd X.Y.Z". */
			escape_c(sw ? sw : "", sw ? strlen(sw) : 0, c->sb->software,
				 sizeof(c->sb->software));
			send_text(c, proto_ok_build(req.id, NULL));
			if (sandbox_log_ok(c))
				log_info("Sandbox '%s' said hello (%-s)", c->sb->cfg->name,
					 c->sb->software);
			drop_gone_routes(c->sb, cJSON_GetObjectItemCaseSensitive(root, "commands"));
			rate_take(c, COST_REATTACH, (double)reattach_routes(c->sb));
		}
		goto out;
	}
	idv = cJSON_GetObjectItemCaseSensitive(root, "id");
	if (!cJSON_IsString(idv) || !(id = client_id_split(idv->valuestring, &serial))) {
		/* not addressed to a client of this relay run (or a protocol error) */
		if (cJSON_GetObjectItemCaseSensitive(root, "error"))
			log_debug("Sandbox '%s' reported an error without a client",
				  c->sb->cfg->name);
		goto out;
	}
	client = client_by_serial(serial);
	ev = cJSON_GetObjectItemCaseSensitive(root, "event");
	cmdv = cJSON_GetObjectItemCaseSensitive(root, "cmd");
	has_cmd = cJSON_IsNumber(cmdv) && cmdv->valuedouble >= 1 && cmdv->valuedouble <= UINT32_MAX;
	rt = has_cmd ? route_find(c->sb, (uint32_t)cmdv->valuedouble) : NULL;
	answer = !!cJSON_GetObjectItemCaseSensitive(root, "ok");
	/* Only for what this client asked of this sandbox: a request sent to it and not yet
	 * answered (an answer carries "ok" and settles it), or a command of this sandbox the
	 * client reads: its events, under the id its reader gave (pistisd's owner id), never
	 * an answer. A sandbox that knows the relay's id scheme cannot answer, or send events
	 * or output, in another sandbox's name: not even through a command of its own that
	 * the same client reads, with the id of a request the client sent elsewhere. */
	own_route = rt && rt->client == serial && !answer && !strcmp(id, rt->orig_id);
	requested = pending_match(c->sb, serial, id, answer, &reader_req);
	if (!requested && !own_route && (has_cmd || !route_of_owner(c->sb, serial, id))) {
		/* not malformed: the client may have gone, and its requests with it */
		log_debug("Sandbox '%s' sent a message for a request it was not sent; dropped",
			  c->sb->cfg->name);
		goto out;
	}
	/* Printed for the client before anything is changed for it (no reader is made by an
	 * answer that does not go on). id equals one this client gave (a request's or a
	 * route's): PROTO_MAX_CLIENT_ID bytes at most, copied as the replace frees it. */
	if (client) {
		snprintf(cid, sizeof(cid), "%s", id);
		id = cid;
		cJSON_ReplaceItemInObjectCaseSensitive(root, "id", cJSON_CreateString(id));
		if (!(out = message_print(root, &out_len, &perr))) {
			sandbox_unsent(c, client, id, requested, answer, own_route ? rt : NULL, len,
				       out_len, perr);
			goto out;
		}
	}
	if (cJSON_IsString(ev) && has_cmd) {
		uint32_t cmd = (uint32_t)cmdv->valuedouble;
		if (!strcmp(ev->valuestring, "exec.started") ||
		    !strcmp(ev->valuestring, "exec.attached")) {
			cJSON *from = cJSON_GetObjectItemCaseSensitive(root, "from");
			/* A new reader only by the answer to its exec.start or exec.attach, one
			 * command each; a re-attach refreshes its own route. Events under any
			 * other request's id would let a sandbox make routes for commands nobody
			 * started until the table, which all sandboxes share, is full. */
			if (client && ((requested && reader_req && answer) || own_route) &&
			    proto_id_valid(id, PROTO_MAX_CLIENT_ID))
				(void)route_set(c->sb, cmd, serial, id,
						cJSON_IsNumber(from) && from->valuedouble > 0 &&
								from->valuedouble <
									9007199254740992.0
							? (uint64_t)from->valuedouble
							: 0);
		} else if (!strcmp(ev->valuestring, "exec.exit")) {
			/* the reader's final ack lets pistisd forget the command (else it keeps
			 * it 10 minutes, and counts it against its 256): the route waits for it */
			if (own_route)
				rt->ended = true;
		}
	}
	if (out)
		enqueue(client, out, out_len, false, c);
out:
	cJSON_Delete(root);
}

/* A frame from a sandbox goes to its command's reader: a copy of buf, or *own itself (the
 * frame in a queue entry: taken, *own is set to NULL). */
static void sandbox_frame(struct conn *c, const uint8_t *buf, size_t len, struct msg **own)
{
	struct proto_error err = {0};
	struct proto_frame f;
	struct route *rt;
	struct conn *client;

	if (proto_frame_parse(buf, len, &f, &err) < 0) {
		sandbox_malformed(c, "a bad frame: %s; dropped", err.message);
		return;
	}
	rt = route_find(c->sb, f.cmd);
	if (!rt || !(client = client_by_serial(rt->client)))
		return; /* nobody attached: pistisd keeps it until someone acknowledges */
	if (f.seq <= rt->last_seq)
		return; /* a resend the client already has */
	rt->last_seq = f.seq;
	if (own && *own) {
		enqueue_msg(client, *own, c);
		*own = NULL;
	} else
		enqueue(client, buf, len, true, c);
}

static void sandbox_binary(struct conn *c, const uint8_t *buf, size_t len)
{
	sandbox_frame(c, buf, len, NULL);
}

/* --- libwebsockets glue -------------------------------------------------------------------- */

enum { REFUSED_SANDBOX, REFUSED_CLIENT, REFUSED_HANDSHAKES };

/* Anyone who reaches a listener can try tokens, or open connections, as fast as it connects:
 * a refusal is logged at most once a second per kind, with the count of those that were not. */
static void log_refused(unsigned kind, const char *fmt, ...) _printf_(2, 3);
static void log_refused(unsigned kind, const char *fmt, ...)
{
	struct log_rate *lr = &R.refused[kind];
	char what[160];
	unsigned held;
	va_list ap;

	if (!log_rate_ok(lr, (uint64_t)lws_now_usecs(), 1))
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if ((held = log_rate_held(lr)))
		log_warning("Refused a %s (and %u more since the last report)", what, held);
	else
		log_warning("Refused a %s", what);
}

/* --- connections that have not shown a token yet ------------------------------------------ */

/* The peer an accepted socket counts against: its IPv4 address, or its IPv6 /64 (one host
 * usually holds a whole /64, so per address would be no bound), as 16 bytes; all unix-socket
 * peers are one. 0, or -errno. */
static int peer_key(int fd, uint8_t ret_key[static 16], char *ret_name, size_t name_size)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	memset(ret_key, 0, 16);
	snprintf(ret_name, name_size, "a unix socket");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return -errno;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
		ret_key[10] = ret_key[11] = 0xff; /* as ::ffff:a.b.c.d */
		memcpy(ret_key + 12, &in->sin_addr, 4);
		inet_ntop(AF_INET, &in->sin_addr, ret_name, (socklen_t)name_size);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
		bool v4 = IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr); /* a dual-stack listener's */
		memcpy(ret_key, &in6->sin6_addr, 16);
		if (v4)
			inet_ntop(AF_INET, ret_key + 12, ret_name, (socklen_t)name_size);
		else {
			inet_ntop(AF_INET6, &in6->sin6_addr, ret_name, (socklen_t)name_size);
			memset(ret_key + 8, 0, 8);
		}
	}
	return 0;
}

/* Who sent an upgrade, for its log line: the address the handshake lines name (peer_key),
 * which goes through the log's escaping like any value. */
static void peer_name(struct lws *wsi, char *buf, size_t size)
{
	uint8_t key[16];

	if (peer_key(lws_get_socket_fd(wsi), key, buf, size) < 0)
		snprintf(buf, size, "a peer already gone");
}

/* A new connection (fd): refused when its peer already has handshakes_per_address
 * connections that are not a WebSocket with a token, or all peers together hold
 * `handshakes`. Without the bound one peer could hold every fd server-min may open (lws only
 * closes an unfinished upgrade after 10 s, and a peer can open thousands in that time): no
 * sandbox or client could connect or redial. */
static bool handshake_allowed(int fd)
{
	char name[INET6_ADDRSTRLEN];
	uint8_t key[16];
	unsigned same = 0;

	R.accepted = false;
	if (peer_key(fd, key, name, sizeof(name)) < 0)
		return false; /* gone already */
	if (R.n_hs >= R.cfg.handshakes) {
		log_refused(REFUSED_HANDSHAKES,
			    "connection from %s: %u connections are plain HTTP or unfinished "
			    "upgrades",
			    name, R.cfg.handshakes);
		return false;
	}
	for (size_t i = 0; i < R.n_hs; i++)
		if (!memcmp(R.hs[i].peer, key, 16) && ++same >= R.cfg.handshakes_per_address) {
			log_refused(REFUSED_HANDSHAKES,
				    "connection from %s: %u of its connections are plain HTTP or "
				    "unfinished upgrades",
				    name, same);
			return false;
		}
	memcpy(R.accepted_peer, key, 16);
	R.accepted = true;
	return true;
}

/* lws creates the connection's wsi right after the filter allowed its fd. */
static void handshake_started(struct lws *wsi)
{
	if (!R.accepted || R.n_hs >= R.cfg.handshakes)
		return;
	R.accepted = false;
	R.hs[R.n_hs].wsi = wsi;
	memcpy(R.hs[R.n_hs].peer, R.accepted_peer, 16);
	R.n_hs++;
}

/* It is a WebSocket with a valid token, or it is gone. */
static void handshake_done(struct lws *wsi)
{
	for (size_t i = 0; i < R.n_hs; i++)
		if (R.hs[i].wsi == wsi) {
			R.hs[i] = R.hs[--R.n_hs];
			return;
		}
}

/* Every request server-min takes is a GET without a body. libwebsockets frames bodies its own
 * way: the first of two Content-Lengths ("0,38" is 0), atoll of "0x26" or "3 8", none when the
 * value is longer than 31 characters, Transfer-Encoding ignored, and a POST without
 * Content-Length 100 MiB long. A proxy in front (docs/server-min.md: a TLS terminator for the
 * client listener) that frames as RFC 9112 does would then see other requests on the
 * connection than server-min does (request smuggling). So a request that is not a GET, or
 * has a Transfer-Encoding or a Content-Length other than one "0", is refused and its
 * connection closed. */
static bool http_no_body(struct lws *wsi)
{
	char cl[4];

	return lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 &&
	       !lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) &&
	       (!lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) ||
		(lws_hdr_copy(wsi, cl, sizeof(cl), WSI_TOKEN_HTTP_CONTENT_LENGTH) == 1 &&
		 cl[0] == '0'));
}

/* Every connection passes through its listener's first protocol: accepted, created, gone. */
static bool handshake_event(struct lws *wsi, enum lws_callback_reasons reason, void *in, int *ret)
{
	switch (reason) {
	case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
		*ret = handshake_allowed((int)(intptr_t)in) ? 0 : -1;
		return true;
	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
		/* WebSocket only. The system's libwebsockets has HTTP/2: an "Upgrade: h2c" that
		 * carried no token got 101, and lws had cleared the connection's timeout first, so
		 * one that then said nothing was held (under the handshake bounds) for ever. */
		if (!strcasecmp((const char *)in, "websocket"))
			break;
		*ret = -1;
		return true;
	case LWS_CALLBACK_RAW_ADOPT:
	case LWS_CALLBACK_RAW_RX:
		/* A CONNECT request: lws turns the connection into a raw socket bound to this
		 * protocol, its timeout cleared; one without a token was held for ever. */
		*ret = -1;
		return true;
	case LWS_CALLBACK_FILTER_HTTP_CONNECTION: /* a request that is no upgrade */
		if (http_no_body(wsi))
			break;
		(void)lws_return_http_status(wsi, HTTP_STATUS_BAD_REQUEST, NULL);
		*ret = -1;
		return true;
	case LWS_CALLBACK_WSI_CREATE:
		handshake_started(wsi);
		break;
	case LWS_CALLBACK_WSI_DESTROY:
		handshake_done(wsi);
		break;
	default:
		break;
	}
	return false;
}

static bool check_bearer(struct lws *wsi, const char *want, size_t want_len)
{
	char h[640];
	int n = lws_hdr_copy(wsi, h, sizeof(h), WSI_TOKEN_HTTP_AUTHORIZATION);
	bool ok;

	if (n < 8 || strncmp(h, "Bearer ", 7))
		return false;
	ok = proto_secret_equal(h + 7, (size_t)n - 7, want, want_len);
	explicit_bzero(h, sizeof(h));
	return ok;
}

static struct sandbox *sandbox_by_bearer(struct lws *wsi)
{
	uint8_t d[SHA256_DIGEST_SIZE];
	char h[640];
	struct sandbox *found = NULL;
	int n = lws_hdr_copy(wsi, h, sizeof(h), WSI_TOKEN_HTTP_AUTHORIZATION);

	if (n < 8 || strncmp(h, "Bearer ", 7))
		return NULL;
	/* The token given is hashed once and compared with every sandbox's digest, taken at
	 * start-up, with no early exit: timing says nothing about which (nor about content or
	 * length: proto_secret_equal). Hashing both sides per sandbox cost ~3 ms of CPU per
	 * wrong token with 1000 sandboxes: a peer without any token kept server-min at 84 % of
	 * a core with 280 upgrades a second. */
	sha256(h + 7, (size_t)n - 7, d);
	explicit_bzero(h, sizeof(h));
	for (size_t i = 0; i < R.cfg.n_sandboxes; i++)
		if (sha256_equal(d, R.sbs[i].token_sha))
			found = &R.sbs[i];
	explicit_bzero(d, sizeof(d));
	return found;
}

/* Small messages (answers, acks, a command's first frame) must not wait for Nagle +
 * delayed ACK (~40 ms per round trip on loopback). A unix socket refuses it: harmless. */
static void set_nodelay(struct lws *wsi)
{
	int one = 1;
	(void)setsockopt(lws_get_socket_fd(wsi), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void rate_refill(struct sandbox *sb)
{
	lws_usec_t now = lws_now_usecs();

	if (!sb->refilled)
		sb->tokens = SANDBOX_MSG_BURST;
	else
		sb->tokens += (double)(now - sb->refilled) * SANDBOX_MSG_RATE / LWS_US_PER_SEC;
	if (sb->tokens > SANDBOX_MSG_BURST)
		sb->tokens = SANDBOX_MSG_BURST;
	sb->refilled = now;
}

static void rate_resume(lws_sorted_usec_list_t *sul);

/* Read from c again when the bucket holds SANDBOX_MSG_RESUME tokens. */
static void rate_wait(struct conn *c)
{
	double us = (SANDBOX_MSG_RESUME - c->sb->tokens) * LWS_US_PER_SEC / SANDBOX_MSG_RATE;

	if (R.ctx) /* (the fuzz target has no context) */
		lws_sul_schedule(R.ctx, 0, &c->rate_sul, rate_resume, (lws_usec_t)us);
}

static void rate_resume(lws_sorted_usec_list_t *sul)
{
	struct conn *c = lws_container_of(sul, struct conn, rate_sul);

	if (!c->sb) /* replaced by a newer connection, and closing */
		return;
	rate_refill(c->sb);
	if (c->sb->tokens < SANDBOX_MSG_RESUME - 1) /* (messages taken while paused) */
		return rate_wait(c);
	c->rate_paused = false;
	rx_resume(c);
}

/* The tokens sb took for `what`, by second: the throttle's log line names what they went on
 * in the last one or two. */
static void rate_tally(struct sandbox *sb, enum rate_cost what, double n)
{
	lws_usec_t now = sb->refilled; /* (rate_refill's) */

	if (now - sb->spent_since >= 2 * LWS_US_PER_SEC) {
		memset(sb->spent, 0, sizeof(sb->spent));
		sb->spent_since = now;
	} else if (now - sb->spent_since >= LWS_US_PER_SEC) {
		memcpy(sb->spent[0], sb->spent[1], sizeof(sb->spent[1]));
		memset(sb->spent[1], 0, sizeof(sb->spent[1]));
		sb->spent_since += LWS_US_PER_SEC;
	}
	sb->spent[1][what] += n;
}

/* What each cost is called in that line, and its price where it is not a token each. */
static const struct {
	const char *what, *price;
} rate_costs[N_RATE_COSTS] = {
	[COST_MESSAGE] = {"messages", ""},
	[COST_VALUES] = {"JSON values", " (1 per 64 in a message)"},
	[COST_FRAGMENT] = {"continuation frames", ""},
	[COST_SKIPPED] = {"bytes past the message limit", " (1 per 4 KiB)"},
	[COST_PONG] = {"pongs with a payload", ""},
	[COST_WIRE] = {"pings, empty pongs and other bytes besides data frames", " (1 per KiB)"},
	[COST_CONNECTION] = {"connections", ""},
	[COST_REATTACH] = {"routes a hello re-attached", ""},
};

/* The throttle's line: what the sandbox's tokens of the last second or two went on, the
 * most first. */
static void rate_log_throttled(struct conn *c)
{
	const struct sandbox *sb = c->sb;
	bool listed[N_RATE_COSTS] = {false};
	char spent[512] = "";
	size_t k = 0;

	for (;;) {
		double most = 0.5; /* (what prints as 0 is left out) */
		int top = -1, n;
		for (int i = 0; i < N_RATE_COSTS; i++)
			if (!listed[i] && sb->spent[0][i] + sb->spent[1][i] > most) {
				most = sb->spent[0][i] + sb->spent[1][i];
				top = i;
			}
		if (top < 0)
			break;
		listed[top] = true;
		n = snprintf(spent + k, sizeof(spent) - k, "%s%.0f for %s%s", k ? "; " : "", most,
			     rate_costs[top].what, rate_costs[top].price);
		if (n < 0 || (size_t)n >= sizeof(spent) - k)
			break;
		k += (size_t)n;
	}
	log_warning("Sandbox '%s' sends over %u messages/s or their worth; reading from it is "
		    "throttled. Tokens of the last 1-2 s: %s",
		    sb->cfg->name, SANDBOX_MSG_RATE, spent);
}

/* What a sandbox sent (or a connection: n tokens for what it costs) takes tokens; an empty
 * bucket pauses reading until
 * SANDBOX_MSG_RESUME messages are allowed again, not one: lws polls with timeout 0 through
 * the last millisecond before a timer (poll's timeout is in ms, rounded down), so a resume
 * every ~200 us, one message's worth, spins in poll: a whole core for a sandbox that floods.
 * (Nor does lws spin on what it read and holds for a paused connection: its service loop
 * skips flow-controlled connections when it looks for buffered input.) */
static void rate_take(struct conn *c, enum rate_cost what, double n)
{
	rate_refill(c->sb);
	c->sb->tokens -= n;
	rate_tally(c->sb, what, n);
	if (c->sb->tokens >= 0 || c->rate_paused)
		return;
	if (!c->rate_warned && (c->rate_warned = true) && sandbox_log_ok(c))
		rate_log_throttled(c);
	c->rate_paused = true;
	lws_rx_flow_control(c->wsi, 0);
	rate_wait(c);
}

/* Bytes read so far from c's socket: the kernel's count of what it received, less what is
 * still queued (taken second, so that what arrives between the two is not counted as read
 * yet). -1 where the kernel keeps no count (a unix socket). */
static int wire_bytes(struct conn *c, uint64_t *ret)
{
	int fd = lws_get_socket_fd(c->wsi), queued;
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received) ||
	    ioctl(fd, FIONREAD, &queued) < 0 || queued < 0)
		return -1;
	*ret = ti.tcpi_bytes_received - (uint64_t)queued;
	return 0;
}

/* What sandbox connection c read since the last call beyond its data frames' payload and
 * their allowance costs it a token per SANDBOX_WIRE_PER_TOKEN bytes. libwebsockets 4.1
 * answers a ping and drops an empty pong without a word to server-min (lws_ws_rx_sm), and
 * parses them a byte at a time: a sandbox that sent endless empty pings held server-min at
 * a whole core, never throttled, and another sandbox's round trip went from 0.13-0.37 to
 * 1.5-3.2 ms (red team). Only the kernel sees those bytes. */
static void wire_charge(struct conn *c)
{
	uint64_t now;
	int64_t n;

	if (wire_bytes(c, &now) < 0)
		return;
	c->wire_balance += (int64_t)(now - c->wire_read) - (int64_t)c->wire_explained;
	c->wire_read = now;
	c->wire_explained = 0;
	if (c->wire_balance < -WIRE_CREDIT)
		c->wire_balance = -WIRE_CREDIT;
	n = c->wire_balance / SANDBOX_WIRE_PER_TOKEN;
	if (n > 0) {
		c->wire_balance -= n * SANDBOX_WIRE_PER_TOKEN;
		rate_take(c, COST_WIRE, (double)n);
	}
}

/* Sandbox connections' wire bytes are charged after a pass of the event loop, at most every
 * WIRE_CHECK_US and WIRE_CHECK_BATCH connections at a time, in turn: no wake-up of its own
 * (a flood wakes the loop), and a flood is read for at most ~20 ms (with up to 32 sandboxes
 * connected) before it is paused for what it read. */
static void wire_check(void)
{
	lws_usec_t now = lws_now_usecs();
	unsigned checked = 0;

	if (now - R.wire_checked < WIRE_CHECK_US)
		return;
	R.wire_checked = now;
	for (size_t k = 0; k < R.cfg.n_sandboxes && checked < WIRE_CHECK_BATCH; k++) {
		struct conn *c = R.sbs[R.wire_next].conn;
		R.wire_next = (R.wire_next + 1) % R.cfg.n_sandboxes;
		if (c && c->wire_counted) {
			wire_charge(c);
			checked++;
		}
	}
}

static void on_rx(struct conn *c, const void *in, size_t len)
{
	bool first = lws_is_first_fragment(c->wsi), final = lws_is_final_fragment(c->wsi);
	bool binary = lws_frame_is_binary(c->wsi);
	size_t max = binary ? PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD : PROTO_MAX_MESSAGE;

	if (first) {
		c->rx_len = 0;
		c->rx_skip = false;
	}
	/* Besides its message, each continuation frame of a sandbox's costs a token, and so
	 * does every SANDBOX_SKIP_PER_TOKEN bytes of a message past the limit, which is read
	 * on to its end and dropped: only a message's end was charged, so endless 6-byte
	 * continuation frames of a message never ended, or a frame that says 2^62 bytes, held
	 * server-min at a whole core, silently (red team). pistisd sends every message as one
	 * frame within the limit, so none of this touches its output. */
	if (!c->is_client) {
		bool new_frame = first || c->rx_frame_done;
		if (!first && c->rx_frame_done)
			rate_take(c, COST_FRAGMENT, 1);
		if ((c->rx_skip || c->rx_len + len > max) && len)
			rate_take(c, COST_SKIPPED, (double)len / SANDBOX_SKIP_PER_TOKEN);
		c->rx_frame_done = lws_remaining_packet_payload(c->wsi) == 0;
		/* what its wire bytes are weighed against (wire_charge) */
		c->wire_explained += len + (new_frame ? WIRE_FRAME_ALLOWANCE : 0) +
				     (R.cfg.tls_cert ? len >> WIRE_TLS_ALLOWANCE_SHIFT : 0);
	}
	if (binary ? !c->rxm && !(c->rxm = malloc(sizeof(struct msg) + LWS_PRE + max))
		   : !c->rx && !(c->rx = malloc(PROTO_MAX_MESSAGE + 1)))
		return;
	if (!c->rx_skip && c->rx_len + len > max) {
		c->rx_skip = true;
		if (c->is_client)
			send_error(c, NULL, PROTO_E_TOO_LARGE, "message over %zu bytes dropped",
				   max);
		else
			sandbox_malformed(c, "a message over %zu bytes; dropped", max);
	}
	if (!c->rx_skip) {
		memcpy((binary ? c->rxm->buf + LWS_PRE : c->rx) + c->rx_len, in, len);
		c->rx_len += len;
	}
	if (!final)
		return;
	if (!c->is_client)
		rate_take(c, COST_MESSAGE, 1);
	if (c->rx_skip)
		return;
	if (!binary)
		c->is_client ? client_text(c, (const char *)c->rx, c->rx_len)
			     : sandbox_text(c, (const char *)c->rx, c->rx_len);
	else if (c->is_client)
		client_binary(c, c->rxm->buf + LWS_PRE, c->rx_len);
	else if (c->rx_len < max / 2)
		/* a short frame is queued as an exact-size copy; the buffer is kept */
		sandbox_binary(c, c->rxm->buf + LWS_PRE, c->rx_len);
	else {
		/* a long one is queued in the buffer it arrived in, cut to its size (realloc
		 * shrinks in place) so the queue's memory stays what its byte count says */
		struct msg *m = realloc(c->rxm, sizeof(*m) + LWS_PRE + c->rx_len);
		if (m)
			c->rxm = m;
		c->rxm->len = c->rx_len;
		c->rxm->binary = true;
		sandbox_frame(c, c->rxm->buf + LWS_PRE, c->rx_len, &c->rxm);
		free(c->rxm); /* not queued (nobody attached): a full-size one next time */
		c->rxm = NULL;
	}
	c->rx_len = 0;
}

/* Several messages per writable callback while the socket takes them. */
static int on_writable(struct conn *c)
{
	for (int i = 0; i < 16 && c->q.head; i++) {
		struct msg *m = c->q.head;
		int n = lws_write(c->wsi, m->buf + LWS_PRE, m->len,
				  m->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT);
		c->q.head = m->next;
		if (!c->q.head)
			c->q.tail = NULL;
		c->q.bytes -= m->len;
		free(m);
		if (n < 0)
			return -1;
		if (lws_send_pipe_choked(c->wsi))
			break;
	}
	resume_producers(c);
	if (c->self_paused && c->q.bytes <= QUEUE_SOFT / 2) {
		c->self_paused = false;
		rx_resume(c);
	}
	if (c->q.head)
		lws_callback_on_writable(c->wsi);
	return 0;
}

/* Client c is gone (or being dropped): nothing is routed to it any more. Its queue goes
 * with it and the sandboxes it held paused are read again (with the queue still counted, one
 * stayed paused until another client drained, and its other clients' requests waited for
 * ever). Idempotent: a dropped client comes here again when lws closes it. */
static void client_forget(struct conn *c)
{
	const struct index *ix = &R.route_ix[ROUTE_OF_CLIENT];

	if (R.clients[c->slot] == c) { /* (else forgotten before, and the slot may be another's) */
		while (ix->head[c->slot] != NIL)
			route_remove(&R.routes[ix->head[c->slot]]);
		pending_drop_client(c);
		R.clients[c->slot] = NULL;
	}
	queue_clear(&c->q);
	c->over_since = 0;
	if (R.ctx)
		lws_sul_cancel(&c->slow_sul);
	release_pauses(c);
}

/* Sandbox connection c is no longer the sandbox's: what was asked of it is answered
 * unavailable; its routes wait for the redial, which re-attaches them. */
static void sandbox_forget(struct conn *c)
{
	c->sb->conn = NULL;
	pending_fail_all(c->sb, "disconnected");
	resume_producers(c);
}

/* Sandbox connection c goes now, not when lws has finished the close handshake (up to 5 s),
 * with a close frame (1008) whose reason says why: what it asked is answered unavailable, and
 * it is no longer its sandbox's (as a connection that a redial replaced). Returns -1, for the
 * callback to return. */
static int sandbox_close(struct conn *c, const char *reason)
{
	sandbox_forget(c);
	c->sb = NULL;
	lws_close_reason(c->wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION, (unsigned char *)reason,
			 strlen(reason));
	return -1;
}

/* Sandbox connection c said hello with another protocol version: cut now, like
 * sandbox_cut, with one line at the same rate saying which version and what to do. */
static int sandbox_refuse(struct conn *c)
{
	if (log_rate_ok(&R.cut, (uint64_t)lws_now_usecs(), 5))
		log_warning("Disconnected sandbox '%s': its hello speaks protocol version %s, "
			    "this relay version %d only (pistisd and server-min of different "
			    "releases?); run a server-min that speaks its version. It may redial",
			    c->sb->cfg->name, c->refused_version, PROTO_VERSION);
	return sandbox_close(c, "unsupported protocol version");
}

/* Sandbox connection c sent SANDBOX_MALFORMED_MAX malformed messages: it goes now
 * (sandbox_close). One line, at most 5 a second for all sandboxes, the next counting the
 * rest: a sandbox may redial and be cut again as fast as its message rate allows. */
static int sandbox_cut(struct conn *c)
{
	if (log_rate_ok(&R.cut, (uint64_t)lws_now_usecs(), 5)) {
		char more[64] = "";
		unsigned held = log_rate_held(&R.cut);
		if (held)
			snprintf(more, sizeof(more), " (and %u more since the last report)", held);
		log_warning("Disconnected sandbox '%s', which sent %u malformed messages on this "
			    "connection (the last: %s); its requests in flight are answered "
			    "unavailable, and it may redial%s",
			    c->sb->cfg->name, c->malformed, c->malformed_last, more);
	}
	return sandbox_close(c, "too many malformed messages");
}

static void conn_closed(struct conn *c)
{
	if (c->is_client)
		client_forget(c);
	else if (c->sb && c->sb->conn == c) {
		bool logged = sandbox_log_ok(c);
		if (logged && c->malformed)
			log_warning("Sandbox '%s' disconnected; it sent %u malformed messages on "
				    "that connection (the last: %s)",
				    c->sb->cfg->name, c->malformed, c->malformed_last);
		else if (logged)
			log_info("Sandbox '%s' disconnected", c->sb->cfg->name);
		sandbox_forget(c);
	}
	queue_clear(&c->q);
	free(c->rx);
	c->rx = NULL;
	free(c->rxm);
	c->rxm = NULL;
}

static int cb_sandbox(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		      size_t len)
{
	struct conn *c = user;

	switch (reason) {
	case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
		struct sandbox *sb;

		if (!http_no_body(wsi))
			return -1;
		sb = sandbox_by_bearer(wsi);
		if (!sb) {
			char peer[INET6_ADDRSTRLEN];

			peer_name(wsi, peer, sizeof(peer));
			log_refused(REFUSED_SANDBOX,
				    "sandbox connection from %s with a wrong token", peer);
			return -1;
		}
		handshake_done(wsi);
		memset(c, 0, sizeof(*c));
		c->sb = sb;
		return 0;
	}
	case LWS_CALLBACK_ESTABLISHED:
		c->wsi = wsi;
		set_nodelay(wsi);
		if (c->sb->conn) {
			/* a stale connection (the sandbox redialled before we saw the drop) */
			struct conn *old = c->sb->conn;
			old->sb = NULL;
			lws_set_timeout(old->wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
		}
		pending_fail_all(c->sb, "reconnected"); /* the old connection's questions */
		c->sb->conn = c;
		c->sb->connects++;
		/* a connection costs a token: one that comes while the bucket is dry starts
		 * paused (a redial is no way round the rate, nor past the log's) */
		rate_take(c, COST_CONNECTION, 1);
		c->wire_counted = wire_bytes(c, &c->wire_read) == 0;
		if (sandbox_log_ok(c))
			log_info("Sandbox '%s' connected", c->sb->cfg->name);
		break;
	case LWS_CALLBACK_RECEIVE:
		if (!c->sb)
			break;
		on_rx(c, in, len);
		if (c->refused_version[0])
			return sandbox_refuse(c);
		if (c->malformed >= SANDBOX_MALFORMED_MAX)
			return sandbox_cut(c);
		break;
	case LWS_CALLBACK_RECEIVE_PONG:
		/* A pong with a payload costs a token, like a message: unsolicited 125-byte
		 * pongs, uncharged, held server-min at a whole core (red team). pistisd answers
		 * server-min's empty pings with empty pongs, which lws hands on to nobody. */
		if (c->sb)
			rate_take(c, COST_PONG, 1);
		break;
	case LWS_CALLBACK_SERVER_WRITEABLE:
		return on_writable(c);
	case LWS_CALLBACK_CLOSED:
		lws_sul_cancel(&c->rate_sul);
		conn_closed(c);
		break;
	default:
		break;
	}
	return 0;
}

static int cb_client(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		     size_t len)
{
	struct conn *c = user;

	switch (reason) {
	case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
		if (!http_no_body(wsi))
			return -1;
		if (!check_bearer(wsi, R.cfg.client_token, strlen(R.cfg.client_token))) {
			char peer[INET6_ADDRSTRLEN];

			peer_name(wsi, peer, sizeof(peer));
			log_refused(REFUSED_CLIENT, "client connection from %s with a wrong token",
				    peer);
			/* Answered 401 before the close: a bare close read as "read failed" to
			 * pistis, which could not tell a refused token from a server gone. */
			(void)lws_return_http_status(wsi, HTTP_STATUS_UNAUTHORIZED, NULL);
			return -1;
		}
		handshake_done(wsi);
		return 0;
	case LWS_CALLBACK_ESTABLISHED: {
		set_nodelay(wsi);
		unsigned slot = MAX_CLIENTS;
		memset(c, 0, sizeof(*c));
		for (unsigned i = 0; i < MAX_CLIENTS; i++)
			if (!R.clients[i]) {
				slot = i;
				break;
			}
		if (slot == MAX_CLIENTS)
			return -1;
		c->wsi = wsi;
		c->is_client = true;
		c->serial = ++R.next_serial * MAX_CLIENTS + slot;
		c->slot = slot;
		R.clients[slot] = c;
		break;
	}
	case LWS_CALLBACK_RECEIVE:
		if (!c->dropped)
			on_rx(c, in, len);
		break;
	case LWS_CALLBACK_SERVER_WRITEABLE:
		return on_writable(c);
	case LWS_CALLBACK_CLOSED:
		conn_closed(c);
		break;
	default:
		break;
	}
	return 0;
}

/* An upgrade that names no sub-protocol (or the HTTP one) lands on a listener's first
 * protocol: refused, or it would be a WebSocket that no token was asked for, kept alive by
 * answered pings for as long as its peer likes. */
static bool upgrade_to_http_protocol(enum lws_callback_reasons reason)
{
	return reason == LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION ||
	       reason == LWS_CALLBACK_ESTABLISHED;
}

static int cb_http_none(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
			size_t len)
{
	int r;

	if (handshake_event(wsi, reason, in, &r))
		return r;
	if (upgrade_to_http_protocol(reason))
		return -1;
	if (reason == LWS_CALLBACK_HTTP) {
		/* closed, not kept alive: see cb_http's 401 */
		(void)lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL);
		return -1;
	}
	return lws_callback_http_dummy(wsi, reason, user, in, len);
}

/* Plain HTTP on the client listener: GET /v1/sandboxes (bearer token). */
static int cb_http(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		   size_t len)
{
	uint8_t buf[LWS_PRE + 256], *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf);
	unsigned status = HTTP_STATUS_OK;
	char *body = NULL;
	bool authed;
	int r;

	if (handshake_event(wsi, reason, in, &r))
		return r;
	if (upgrade_to_http_protocol(reason))
		return -1;
	if (reason != LWS_CALLBACK_HTTP)
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	/* Even with the token, the connection stays counted among the handshakes while it is open
	 * (until it upgrades): kept alive, it counted against no bound, and one token holder (or
	 * a leaked token) held 3000 of them from one address, each kept by a request every few
	 * seconds (every idle connection costs every poll: docs/server-min.md). */
	authed = check_bearer(wsi, R.cfg.client_token, strlen(R.cfg.client_token));
	if (!authed) {
		status = HTTP_STATUS_UNAUTHORIZED;
		body = proto_error_build(NULL, PROTO_E_UNAUTHORIZED, "bearer token required");
	} else if (!strcmp((const char *)in, "/v1/sandboxes")) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "sandboxes", sandboxes_json());
		body = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
	} else {
		status = HTTP_STATUS_NOT_FOUND;
		body = proto_error_build(NULL, PROTO_E_NOT_FOUND, "no such endpoint");
	}
	if (!body)
		return -1;
	if (lws_add_http_common_headers(wsi, status, "application/json",
					(lws_filepos_t)strlen(body), &p, end) ||
	    lws_finalize_write_http_header(wsi, start, &p, end)) {
		free(body);
		return -1;
	}
	{
		size_t n = strlen(body);
		uint8_t *b = malloc(LWS_PRE + n);
		int w = -1;
		if (b) {
			memcpy(b + LWS_PRE, body, n);
			w = lws_write(wsi, b + LWS_PRE, n, LWS_WRITE_HTTP_FINAL);
			free(b);
		}
		free(body);
		if (w < 0)
			return -1;
	}
	/* Without the token the connection is closed: kept alive, each 401 set lws' timeout
	 * again, and a connection that asked every few seconds held its place under the
	 * handshake bounds for ever instead of the 10 s of an unfinished upgrade. */
	if (!authed)
		return -1;
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* tx_packet_size: lws gives a write to the socket at most this much at a time (else
 * rx_buffer_size, 64 KiB) and copies the rest into its own buffer: a whole frame in one
 * send lets the kernel take what it can. */
#define TX_PACKET (PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD)

static const struct lws_protocols sandbox_protocols[] = {
	{"http-none", cb_http_none, 0, 0, 0, NULL, 0},
	{PROTO_SUBPROTOCOL, cb_sandbox, sizeof(struct conn), 65536, 0, NULL, TX_PACKET},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

static const struct lws_protocols client_protocols[] = {
	{"http", cb_http, 0, 0, 0, NULL, 0},
	{PROTO_CLIENT_SUBPROTOCOL, cb_client, sizeof(struct conn), 65536, 0, NULL, TX_PACKET},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

static const lws_retry_bo_t heartbeat = {
	.secs_since_valid_ping = 10,
	.secs_since_valid_hangup = 30,
};

static int make_vhost(const char *name, const char *addr, const struct lws_protocols *protos,
		      bool tls)
{
	struct lws_context_creation_info info;
	char host[128];
	size_t host_len;

	memset(&info, 0, sizeof(info));
	info.vhost_name = name;
	info.protocols = protos;
	info.retry_and_idle_policy = &heartbeat;
	/* not h2, lws' default where it has HTTP/2: server-min speaks HTTP/1.1 and WebSocket only
	 * (LWS_CALLBACK_HTTP_CONFIRM_UPGRADE refuses h2c) */
	info.alpn = "http/1.1";
	if (addr[0] == '/') {
		info.options = LWS_SERVER_OPTION_UNIX_SOCK;
		info.iface = addr;
	} else {
		if (smin_listen_split(addr, &host_len, &info.port) < 0 || host_len >= sizeof(host))
			return log_error_errno(-EINVAL,
					       "listen address '%s' must be HOST:PORT (port "
					       "1-65535) or /path",
					       addr);
		memcpy(host, addr, host_len);
		host[host_len] = 0;
		info.iface = host;
		/* libwebsockets 4.1 with IPv6 makes the listener an IPv6 socket and parses an
		 * IPv4 address into the sockaddr_in6 as if it were a sockaddr_in: the address
		 * lands in sin6_flowinfo, sin6_addr stays ::, and "127.0.0.1:7701" listened on
		 * every address of the host (lws_interface_to_sa). An IPv4 address is bound on
		 * an IPv4 socket. */
		if (inet_pton(AF_INET, host, &(struct in_addr){0}) == 1)
			info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
	}
	if (tls) {
		info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
		info.ssl_cert_filepath = R.cfg.tls_cert;
		info.ssl_private_key_filepath = R.cfg.tls_key;
	}
	if (!lws_create_vhost(R.ctx, &info))
		return log_error_errno(-EADDRINUSE, "Failed to listen on %s for %s", addr, name);
	log_info("Listening for %s on %s", name, addr);
	return 0;
}

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		R.hup = 1;
	else
		R.stop = 1;
	if (R.ctx)
		lws_cancel_service(R.ctx);
}

/* on_signal reads R.ctx: SIGTERM, SIGINT and SIGHUP are blocked first, so one while the
 * context is torn down (an operator's second ^C, an orchestrator's repeated TERM) stays
 * pending instead of waking a context that is being freed or is gone. */
static void context_destroy(void)
{
	sigset_t stop_signals;

	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGHUP);
	sigprocmask(SIG_BLOCK, &stop_signals, NULL);
	lws_context_destroy(R.ctx);
	R.ctx = NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: server-min [--config FILE] [--check] [--log-format text|json] [-v]\n\n"
		"The minimal pistis server: relays clients' commands to sandboxes' pistisd.\n"
		"  --config FILE   configuration (default ./pistis.json); see docs/server-min.md\n"
		"  --check         validate the configuration and exit (0 ok, 1 invalid)\n"
		"  --log-format    text (default) or json\n"
		"  -v, --verbose   debug logging\n"
		"  -h, --help      this text\n"
		"  --version       print the version\n\n"
		"SIGTERM, SIGINT: stop at once. SIGHUP: logged, nothing reloaded (restart\n"
		"server-min to change its configuration; clients and sandboxes redial).\n");
}

/* One descriptor per connected sandbox (up to SMIN_MAX_SANDBOXES) and client (up to
 * MAX_CLIENTS), a quarter of the limit for unfinished handshakes, and lws' own: 1024, the
 * soft limit Docker and containerd give a container, ran out at the ~1017th sandbox, whose
 * upgrade (and every client's after it) then hung unanswered (red team, scale). Raised to
 * SMIN_NOFILE (at most the hard limit) before the handshake bound is taken from it and
 * before libwebsockets sizes its fd table from it, as pistisd serve does. */
#define SMIN_NOFILE 8192

static void raise_nofile(size_t n_sandboxes)
{
	/* the configured sandboxes, every client, the least handshake bound, lws' few */
	const rlim_t need = (rlim_t)n_sandboxes + MAX_CLIENTS + 16 + 64;
	rlim_t now = 0;
	int r = fd_limit_raise(SMIN_NOFILE, &now);

	if (r < 0)
		log_warning_errno(r, "Cannot raise the open-files limit: %m");
	if (now && now < need)
		log_warning("The open-files limit is %llu: %zu sandboxes and up to %d clients "
			    "need %llu descriptors, and a connection past the limit is never "
			    "answered; raise it (docker run --ulimit nofile=8192)",
			    (unsigned long long)now, n_sandboxes, MAX_CLIENTS,
			    (unsigned long long)need);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"check", no_argument, NULL, 'k'},
		{"log-format", required_argument, NULL, 'l'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	struct lws_context_creation_info info;
	const char *config = "pistis.json";
	bool check_only = false;
	uint8_t rnd[4];
	int c, r;

	log_set_program("server-min");
	/* It holds every sandbox's and the client's token: no core dump of it, and no
	 * ptrace or /proc/PID/mem of it by other processes of its user (ssh-agent's rule). */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	opterr = 0; /* getopt would print a bad option raw: log_bad_option escapes it */
	while ((c = getopt_long(argc, argv, "hv", opts, NULL)) >= 0) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'k':
			check_only = true;
			break;
		case 'l':
			log_set_format(!strcmp(optarg, "json") ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT);
			break;
		case 'v':
			log_set_level(LOG_LVL_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("server-min %s\n", PISTIS_VERSION);
			return 0;
		default:
			log_bad_option(argv, optind, optopt, "server-min --help");
			return 100;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 100;
	}
	r = smin_config_load(config, &R.cfg);
	if (r < 0) {
		log_error("%-s", R.cfg.error); /* its values escaped once (config.c) */
		return check_only ? 1 : 111;
	}
	if (check_only) {
		printf("%s: ok (%zu sandboxes)\n", config, R.cfg.n_sandboxes);
		return 0;
	}
	raise_nofile(R.cfg.n_sandboxes);
	if (!R.cfg.handshakes) {
		/* a quarter of the fds it may open (the rest stay for sandboxes, clients and
		 * lws' own), and no more than SMIN_DEFAULT_HANDSHAKES: lws polls every one at
		 * each wake-up, and idle ones slow every round trip (docs/server-min.md) */
		struct rlimit rl = {.rlim_cur = 1024};
		rlim_t n;
		(void)getrlimit(RLIMIT_NOFILE, &rl);
		n = rl.rlim_cur / 4;
		if (n > SMIN_DEFAULT_HANDSHAKES)
			n = SMIN_DEFAULT_HANDSHAKES;
		R.cfg.handshakes = n < 16 ? 16 : (unsigned)n;
	}
	R.sbs = calloc(R.cfg.n_sandboxes, sizeof(*R.sbs));
	R.hs = calloc(R.cfg.handshakes, sizeof(*R.hs));
	if (!R.sbs || !R.hs || routes_init() < 0)
		return log_error("Out of memory"), 111;
	for (size_t i = 0; i < R.cfg.n_sandboxes; i++) {
		R.sbs[i].cfg = &R.cfg.sandboxes[i];
		sha256(R.sbs[i].cfg->token, strlen(R.sbs[i].cfg->token), R.sbs[i].token_sha);
	}
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd) ||
	    getrandom(R.hash_key, sizeof(R.hash_key), 0) != sizeof(R.hash_key))
		return log_error_errno(-errno, "getrandom: %m"), 111;
	snprintf(R.boot, sizeof(R.boot), "%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);

	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	/* A daemon's SIGHUP asks it to reload, and its default action ended server-min (every
	 * sandbox and client cut). Nothing is reloaded: the sandboxes' table, their digests and
	 * the listeners are made once, and live connections point into them. */
	signal(SIGHUP, on_signal);
	log_lws_setup();
	memset(&info, 0, sizeof(info));
	info.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
		       (R.cfg.tls_cert ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0);
	info.gid = (gid_t)-1;
	info.uid = (uid_t)-1;
	/* lws reads a socket in pieces of this size (default 4 KiB: a read and a poll per
	 * 4 KiB of output); one buffer for the whole event loop */
	info.pt_serv_buf_size = 256 * 1024;
	R.ctx = lws_create_context(&info);
	if (!R.ctx)
		return log_error("Failed to create the libwebsockets context"), 111;
	if (make_vhost("sandboxes", R.cfg.listen_sandbox, sandbox_protocols,
		       R.cfg.tls_cert != NULL) < 0 ||
	    make_vhost("clients", R.cfg.listen_client, client_protocols, false) < 0) {
		context_destroy();
		log_lws_flush();
		return 111;
	}
	log_info("server-min %s ready: %zu sandboxes", PISTIS_VERSION, R.cfg.n_sandboxes);
	while (!R.stop) {
		if (lws_service(R.ctx, 0) < 0)
			break;
		if (R.hup) {
			R.hup = 0;
			log_info("SIGHUP: nothing to reload; restart server-min to change its "
				 "configuration (%s)",
				 config);
		}
		wire_check();
	}
	context_destroy();
	log_lws_flush();
	/* (smin_config_free zeroes R.cfg, n_sandboxes with it: after the loop) */
	for (size_t i = 0; i < R.cfg.n_sandboxes; i++) {
		free(R.sbs[i].pend);
		free(R.sbs[i].pend_of);
		index_free(&R.sbs[i].pend_by_id);
		index_free(&R.sbs[i].pend_of_client);
		free(R.sbs[i].route_slots);
	}
	smin_config_free(&R.cfg);
	free(R.sbs);
	free(R.routes);
	for (int k = 0; k < N_ROUTE_INDEXES; k++)
		index_free(&R.route_ix[k]);
	free(R.hs);
	return 0;
}
