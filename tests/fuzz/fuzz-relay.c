/* server-min's message handlers (server-min/relay.c, the real code, compiled into this
 * target) fed arbitrary traffic from three clients and two sandboxes. The test seam is the
 * socket: lws_callback_on_writable and lws_rx_flow_control are redirected to no-ops before
 * relay.c is compiled, and messages land in the relay's own queues, which the target then
 * inspects. Invariants:
 *  - everything queued to a client parses (JSON with the protocol's limits, or a frame);
 *  - a sandbox's answer reaches only the client whose id it carries (any other client can
 *    only be told exec.detached), and the id is mapped back to the client's own id;
 *  - a sandbox's frame reaches only the client that holds the command's route;
 *  - an exec.ack reaches a sandbox only from the command's reader, clamped to what the
 *    relay forwarded to that reader;
 *  - a sandbox's message makes at most one client the reader of a command it did not read,
 *    and only when it is an answer ("ok"), never an event.
 *
 * Input: records of [selector][len hi][len lo][payload]; selector % 10 picks the peer and
 * the kind (0..2 client text, 3..5 client binary, 6/7 sandbox 0 text/binary, 8/9 sandbox 1). */
#include <libwebsockets.h>

static int fz_on_writable(struct lws *wsi)
{
	return 0;
}
static void fz_rx_flow(struct lws *wsi, int enable)
{
}
#define lws_callback_on_writable fz_on_writable
#define lws_rx_flow_control fz_rx_flow
#define main relay_main
int relay_main(int argc, char **argv);
#include "server-min/relay.c"
#undef main

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_CLIENTS 3
static struct conn clients[N_CLIENTS], sbconn[2];
static struct smin_sandbox_cfg sbcfg[2] = {{(char *)"s1", (char *)"token-one-0123456789"},
					   {(char *)"s2", (char *)"token-two-0123456789"}};

static void setup(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	log_set_level(LOG_LVL_ERROR);
	R.cfg.sandboxes = sbcfg;
	R.cfg.n_sandboxes = 2;
	R.cfg.client_token = (char *)"client-token-0123456789";
	R.cfg.client_queue_grace_s = SMIN_CLIENT_QUEUE_GRACE_S;
	R.cfg.client_queue_max_mib = SMIN_CLIENT_QUEUE_MAX_MIB;
	R.sbs = calloc(2, sizeof(*R.sbs));
	R.routes = calloc(MAX_ROUTES, sizeof(*R.routes));
	if (!R.sbs || !R.routes)
		abort();
	snprintf(R.boot, sizeof(R.boot), "0badc0de");
	for (int i = 0; i < 2; i++) {
		R.sbs[i].cfg = &sbcfg[i];
		sbconn[i].sb = &R.sbs[i];
		sbconn[i].wsi = (struct lws *)&sbconn[i]; /* never dereferenced: the seam */
		R.sbs[i].conn = &sbconn[i];
	}
	for (unsigned i = 0; i < N_CLIENTS; i++) {
		clients[i].is_client = true;
		clients[i].serial = i + 1;
		clients[i].slot = i;
		clients[i].wsi = (struct lws *)&clients[i];
		R.clients[i] = &clients[i];
	}
	R.next_serial = N_CLIENTS;
}

static size_t qlen(const struct queue *q)
{
	size_t n = 0;
	for (const struct msg *m = q->head; m; m = m->next)
		n++;
	return n;
}

static const struct msg *nth(const struct queue *q, size_t i)
{
	const struct msg *m = q->head;
	while (m && i--)
		m = m->next;
	return m;
}

static cJSON *parse_msg(const struct msg *m)
{
	struct proto_error err = {0};
	cJSON *root = NULL;

	if (proto_parse((const char *)m->buf + LWS_PRE, m->len, &root, &err) < 0)
		__builtin_trap(); /* the relay queued something that does not parse */
	return root;
}

/* The routes as they were before the record being checked (an ack may free its route: the
 * reader's final one, after exec.exit). */
static struct route before_routes[MAX_ROUTES];
static size_t n_before_routes;

static const struct route *route_before(const struct sandbox *sb, uint32_t cmd)
{
	for (size_t i = 0; i < n_before_routes; i++)
		if (before_routes[i].used && before_routes[i].sb == sb &&
		    before_routes[i].cmd == cmd)
			return &before_routes[i];
	return NULL;
}

static void check_new(size_t before_c[N_CLIENTS], size_t before_s[2], int kind, int peer,
		      const uint8_t *in, size_t len)
{
	struct proto_error err = {0};
	char want_id[PROTO_MAX_ID + 1] = "";
	unsigned want_client = 0;

	/* what a sandbox's text claims to be addressed to */
	if (kind == 6 || kind == 8) {
		cJSON *root = NULL, *id;
		if (proto_parse((const char *)in, len, &root, &err) == 0) {
			id = cJSON_GetObjectItemCaseSensitive(root, "id");
			unsigned serial;
			int off = 0;
			if (cJSON_IsString(id) &&
			    sscanf(id->valuestring, "0badc0de.%u.%n", &serial, &off) == 1 && off) {
				want_client = serial;
				snprintf(want_id, sizeof(want_id), "%s", id->valuestring + off);
			}
			cJSON_Delete(root);
		}
	}
	for (unsigned i = 0; i < N_CLIENTS; i++) {
		size_t n = qlen(&clients[i].q);
		for (size_t k = before_c[i]; k < n; k++) {
			const struct msg *m = nth(&clients[i].q, k);
			struct proto_frame f;
			if (m->binary) {
				if (proto_frame_parse(m->buf + LWS_PRE, m->len, &f, &err) < 0)
					__builtin_trap();
				/* a frame goes only to the route's reader */
				if (kind == 7 || kind == 9) {
					struct route *rt =
						route_find(&R.sbs[(kind - 7) / 2], f.cmd);
					if (!rt || rt->client != clients[i].serial)
						__builtin_trap();
				} else
					__builtin_trap(); /* clients never cause frames to clients */
				continue;
			}
			cJSON *root = parse_msg(m);
			cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "event");
			bool detached =
				cJSON_IsString(ev) && !strcmp(ev->valuestring, "exec.detached");
			if ((kind == 6 || kind == 8) && !detached) {
				cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
				if (want_client != clients[i].serial)
					__builtin_trap(); /* delivered to the wrong client */
				if (!cJSON_IsString(id) || strcmp(id->valuestring, want_id))
					__builtin_trap(); /* the id was not mapped back */
			}
			if (kind <= 5 && i != (unsigned)peer && !detached)
				__builtin_trap(); /* a client's request answered to another one */
			cJSON_Delete(root);
		}
	}
	for (int s = 0; s < 2; s++) {
		size_t n = qlen(&sbconn[s].q);
		for (size_t k = before_s[s]; k < n; k++) {
			const struct msg *m = nth(&sbconn[s].q, k);
			if (m->binary)
				continue;
			cJSON *root = parse_msg(m);
			cJSON *op = cJSON_GetObjectItemCaseSensitive(root, "op");
			if (cJSON_IsString(op) && !strcmp(op->valuestring, "exec.ack")) {
				uint64_t cmd = 0, seq = 0;
				const struct route *rt;
				if (proto_get_u64(root, "cmd", UINT32_MAX, &cmd, &err) < 0 ||
				    proto_get_u64(root, "seq", UINT64_MAX >> 11, &seq, &err) < 0)
					__builtin_trap();
				rt = route_before(&R.sbs[s], (uint32_t)cmd);
				if (!rt || rt->client != clients[peer].serial || seq > rt->last_seq)
					__builtin_trap(); /* an ack the reader could not give */
			}
			cJSON_Delete(root);
		}
	}
}

/* Reader changes a sandbox's message made: routes whose reader is new. */

static void check_readers(size_t n_before, const uint8_t *in, size_t len)
{
	struct proto_error err = {0};
	unsigned changed = 0;
	cJSON *root = NULL;
	bool answer = false;

	for (size_t i = 0; i < R.n_routes; i++) {
		const struct route *a = &R.routes[i];
		const struct route *b = i < n_before ? &before_routes[i] : NULL;
		if (a->used && (!b || !b->used || b->sb != a->sb || b->cmd != a->cmd ||
				b->client != a->client))
			changed++;
	}
	if (!changed)
		return;
	if (proto_parse((const char *)in, len, &root, &err) == 0)
		answer = cJSON_GetObjectItemCaseSensitive(root, "ok") != NULL;
	cJSON_Delete(root);
	if (changed > 1 || !answer)
		__builtin_trap(); /* readers made by events, or several by one message */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setup();
	while (size >= 3) {
		int sel = data[0] % 10;
		size_t len = (size_t)data[1] << 8 | data[2];
		size_t before_c[N_CLIENTS], before_s[2];
		int peer;
		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		for (unsigned i = 0; i < N_CLIENTS; i++)
			before_c[i] = qlen(&clients[i].q);
		for (int s = 0; s < 2; s++)
			before_s[s] = qlen(&sbconn[s].q);
		peer = sel % 3;
		n_before_routes = R.n_routes;
		memcpy(before_routes, R.routes, sizeof(*R.routes) * n_before_routes);
		if (sel <= 2)
			client_text(&clients[peer], (const char *)data, len);
		else if (sel <= 5)
			client_binary(&clients[peer], data, len);
		else if (sel == 6 || sel == 8) {
			sandbox_text(&sbconn[(sel - 6) / 2], (const char *)data, len);
			check_readers(n_before_routes, data, len);
		} else
			sandbox_binary(&sbconn[(sel - 7) / 2], data, len);
		check_new(before_c, before_s, sel, peer, data, len);
		data += len;
		size -= len;
	}
	for (unsigned i = 0; i < N_CLIENTS; i++)
		queue_clear(&clients[i].q);
	for (int s = 0; s < 2; s++)
		queue_clear(&sbconn[s].q);
	memset(R.routes, 0, sizeof(*R.routes) * R.n_routes);
	R.n_routes = 0;
	return 0;
}
