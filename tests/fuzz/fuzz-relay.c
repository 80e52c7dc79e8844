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
 *    and only when it is an answer ("ok"), never an event;
 *  - the indexes (routes by command, reader and owner id, by client and by sandbox; requests
 *    in flight by id and by client) find what a walk of the tables finds.
 *
 * Input: records of [selector][len hi][len lo][payload]; a selector under 240 picks the peer
 * and the kind by selector % 10 (0..2 client text, 3..5 client binary, 6/7 sandbox 0
 * text/binary, 8/9 sandbox 1). One byte 240..249 makes client selector % 3 disconnect and
 * connect again (a new serial in the same slot), 250..255 sandbox selector % 2 redial. */
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
	if (!R.sbs || routes_init() < 0)
		abort();
	snprintf(R.boot, sizeof(R.boot), "0badc0de");
	memcpy(R.hash_key, "fuzz-relay-key..", sizeof(R.hash_key)); /* runs replay */
	for (int i = 0; i < 2; i++) {
		R.sbs[i].cfg = &sbcfg[i];
		sbconn[i].sb = &R.sbs[i];
		sbconn[i].wsi = (struct lws *)&sbconn[i]; /* never dereferenced: the seam */
		R.sbs[i].conn = &sbconn[i];
	}
	/* serials 1..3 (in slots 1..3), which the seeds' ids name; new ones are 1024 on */
	for (unsigned i = 0; i < N_CLIENTS; i++) {
		clients[i].is_client = true;
		clients[i].serial = i + 1;
		clients[i].slot = i + 1;
		clients[i].wsi = (struct lws *)&clients[i];
		R.clients[i + 1] = &clients[i];
	}
}

/* Client i goes (as when lws closes it) and a new connection takes its slot. */
static void reconnect_client(unsigned i)
{
	struct conn *c = &clients[i];
	uint64_t old = c->serial;

	conn_closed(c);
	for (size_t k = 0; k < R.n_routes; k++)
		if (R.routes[k].used && R.routes[k].client == old)
			__builtin_trap(); /* a route outlived its reader */
	for (int s = 0; s < 2; s++)
		for (size_t k = 0; k < R.sbs[s].n_pend; k++)
			if (R.sbs[s].pend[k].client == old)
				__builtin_trap(); /* a request outlived its client */
	c->dropped = false;
	c->over_since = 0;
	c->serial = ++R.next_serial * MAX_CLIENTS + c->slot;
	R.clients[c->slot] = c;
}

/* Sandbox s redials: what it had in flight is answered unavailable (cb_sandbox). */
static void reconnect_sandbox(int s)
{
	pending_fail_all(&R.sbs[s], "reconnected");
	if (R.sbs[s].n_pend)
		__builtin_trap();
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
	uint64_t want_client = 0;

	/* what a sandbox's text claims to be addressed to */
	if (kind == 6 || kind == 8) {
		cJSON *root = NULL, *id;
		if (proto_parse((const char *)in, len, &root, &err) == 0) {
			id = cJSON_GetObjectItemCaseSensitive(root, "id");
			uint64_t serial;
			int off = 0;
			bool ours = cJSON_IsString(id) &&
				    sscanf(id->valuestring, "0badc0de.%" SCNu64 ".%n", &serial,
					   &off) == 1;
			if (ours && off) {
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

/* --- the indexes against walks of the tables (how the relay found things before) ------- */

static const struct route *walk_find(const struct sandbox *sb, uint32_t cmd, unsigned *ret_n)
{
	const struct route *found = NULL;

	*ret_n = 0;
	for (size_t i = 0; i < R.n_routes; i++)
		if (R.routes[i].used && R.routes[i].sb == sb && R.routes[i].cmd == cmd) {
			found = found ? found : &R.routes[i];
			++*ret_n;
		}
	return found;
}

/* From the end, as route_find_client walked. */
static const struct route *walk_find_client(uint64_t client, uint32_t cmd, unsigned *ret_n)
{
	const struct route *found = NULL;

	*ret_n = 0;
	for (size_t i = R.n_routes; i-- > 0;)
		if (R.routes[i].used && R.routes[i].client == client && R.routes[i].cmd == cmd) {
			found = found ? found : &R.routes[i];
			++*ret_n;
		}
	return found;
}

static bool walk_owner(const struct sandbox *sb, uint64_t client, const char *id)
{
	for (size_t i = 0; i < R.n_routes; i++)
		if (R.routes[i].used && R.routes[i].sb == sb && R.routes[i].client == client &&
		    !strcmp(R.routes[i].orig_id, id))
			return true;
	return false;
}

static void check_route_lookups(struct sandbox *sb, uint64_t client, uint32_t cmd, const char *id)
{
	unsigned n, n_client;
	const struct route *want = walk_find(sb, cmd, &n);
	const struct route *want_client = walk_find_client(client, cmd, &n_client);
	bool several;

	if (n > 1 || route_find(sb, cmd) != want)
		__builtin_trap(); /* two routes for one command, or the index missed one */
	if (route_find_client(client, cmd, &several) != want_client || several != (n_client > 1))
		__builtin_trap();
	if (route_of_owner(sb, client, id) != walk_owner(sb, client, id))
		__builtin_trap();
}

static void check_indexes(void)
{
	size_t used = 0, listed = 0;
	uint32_t lowest_free = (uint32_t)R.n_routes;

	for (uint32_t i = 0; i < R.n_routes + 64 && i < MAX_ROUTES; i += 64) {
		uint64_t w = R.route_used[i / 64];
		bool full = R.route_full[i / 4096] >> (i / 64 % 64) & 1;
		if (i >= R.n_routes ? w != 0 : full != (w == UINT64_MAX))
			__builtin_trap(); /* the bitmaps disagree with the table */
	}
	for (uint32_t i = 0; i < R.n_routes; i++) {
		const struct route *r = &R.routes[i];
		bool bit = R.route_used[i / 64] >> (i % 64) & 1;
		if (bit != r->used)
			__builtin_trap();
		for (int k = 0; k < 2; k++) {
			const struct route_slots *set = R.sbs[k].route_slots;
			if ((set && set->word[i / 64] >> (i % 64) & 1) !=
				    (r->used && r->sb == &R.sbs[k]) ||
			    (set &&
			     (set->some[i / 4096] >> (i / 64 % 64) & 1) != !!set->word[i / 64]))
				__builtin_trap();
		}
		if (!r->used) {
			if (lowest_free == R.n_routes)
				lowest_free = i;
			continue;
		}
		used++;
		check_route_lookups(r->sb, r->client, r->cmd, r->orig_id);
		/* and keys next to it, which no route may hold */
		check_route_lookups(r->sb, r->client, r->cmd + 1, "r1");
		check_route_lookups(&R.sbs[r->sb == &R.sbs[0]], r->client + MAX_CLIENTS, r->cmd,
				    r->orig_id);
	}
	if (route_slot_free() != lowest_free)
		__builtin_trap();     /* a route would not get the slot a walk gave it */
	for (int k = 0; k < 2; k++) { /* a hello walks each sandbox's routes in slot order */
		size_t want = 0, got = 0;
		for (uint32_t i = 0; i < R.n_routes; i++)
			want += R.routes[i].used && R.routes[i].sb == &R.sbs[k];
		for (const struct route *r = route_next_of(&R.sbs[k], 0), *prev = NULL; r;
		     prev = r, r = route_next_of(&R.sbs[k], (uint32_t)(r - R.routes) + 1), got++)
			if (!r->used || r->sb != &R.sbs[k] || (prev && r <= prev))
				__builtin_trap();
		if (got != want)
			__builtin_trap();
	}
	/* every route is on its reader's list (the clients' slots are 1..3) */
	for (uint32_t slot = 1; slot <= N_CLIENTS; slot++) {
		const struct index *ix = &R.route_ix[ROUTE_OF_CLIENT];
		for (uint32_t i = ix->head[slot]; i != NIL; i = index_next(ix, slot, i), listed++)
			if (!R.routes[i].used || R.routes[i].client % MAX_CLIENTS != slot ||
			    !client_by_serial(R.routes[i].client))
				__builtin_trap(); /* a route whose reader is gone */
	}
	if (listed != used)
		__builtin_trap();
	for (int k = 0; k < 2; k++) {
		struct sandbox *sb = &R.sbs[k];
		size_t n = 0;
		if (!sb->pend)
			continue;
		for (size_t j = 0; j < sb->n_pend; j++) {
			const struct pending *p = &sb->pend[j];
			unsigned same = 0;
			bool reader;
			for (size_t x = 0; x < sb->n_pend; x++)
				same += sb->pend[x].client == p->client &&
					!strcmp(sb->pend[x].id, p->id);
			if (p->bucket != key_bucket(p->client, 0, p->id, MAX_PENDING) ||
			    !pending_match(sb, p->client, p->id, false, &reader) ||
			    (same == 1 && reader != p->reader) ||
			    pending_match(sb, p->client + MAX_CLIENTS, p->id, false, &reader))
				__builtin_trap(); /* the index misses a request, or finds one not sent */
		}
		for (uint32_t slot = 1; slot <= N_CLIENTS; slot++) {
			const struct index *ix = &sb->pend_of_client;
			size_t m = 0;
			for (uint32_t i = ix->head[slot]; i != NIL;
			     i = index_next(ix, slot, i), m++)
				if (i >= sb->n_pend || sb->pend[i].client % MAX_CLIENTS != slot)
					__builtin_trap();
			if (m != sb->pend_of[slot])
				__builtin_trap();
			n += m;
		}
		if (n != sb->n_pend)
			__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setup();
	while (size >= 3) {
		int sel = data[0] % 10;
		size_t len = (size_t)data[1] << 8 | data[2];
		size_t before_c[N_CLIENTS], before_s[2];
		int peer;
		if (data[0] >= 240) {
			if (data[0] < 250)
				reconnect_client(data[0] % N_CLIENTS);
			else
				reconnect_sandbox(data[0] % 2);
			check_indexes();
			data++;
			size--;
			continue;
		}
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
		check_indexes();
		data += len;
		size -= len;
	}
	/* the next input starts from nothing: no routes, no requests, serials 1..3 */
	for (uint32_t i = 0; i < R.n_routes; i++)
		if (R.routes[i].used)
			route_remove(&R.routes[i]);
	R.n_routes = 0;
	for (int s = 0; s < 2; s++) {
		pending_fail_all(&R.sbs[s], "reset");
		queue_clear(&sbconn[s].q);
	}
	for (unsigned i = 0; i < N_CLIENTS; i++) {
		queue_clear(&clients[i].q);
		clients[i].serial = i + 1;
	}
	R.next_serial = 0;
	return 0;
}
