/* pistisd serve: dial out to the relay and serve the wire protocol (docs/protocol.md).
 *
 * One event loop: libwebsockets' service loop owns the relay connection; every other fd
 * (command pipes, pidfds, file-operation pipes, the signalfd) lives in one epoll set that
 * lws polls as a single adopted "raw file" fd. That keeps our own fds under our own control
 * (lws would close a raw-file wsi on POLLHUP with data still in a pipe) and costs one
 * epoll_wait per wake-up. pistisd never listens on the network. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "lib/agent-limits.h"
#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log-rate.h"
#include "lib/log.h"
#include "lib/lws-log.h"
#include "lib/token-file.h"
#include "lib/macro.h"
#include "lib/parse-num.h"
#include "lib/proto.h"
#include "lib/sha256.h"
#include "lib/proxy-env.h"
#include "lib/sock-owner.h"
#include "lib/tls-ca.h"
#include "lib/trust-path.h"
#include "lib/ws-url.h"
#include "pistisd/check.h"
#include "pistisd/cli.h"
#include "pistisd/serve.h"
#include "pistisd/spawn.h"
#include "sandbox-users/users.h"
#include "trusted/trusted.h"

#define TOKEN_MAX 512
#define RECENT_IDS 256
/* Answers and events waiting for the relay past this: no more requests are read until they
 * are under half (OUT_SOFT / 2). */
#define OUT_SOFT (16u * 1024u * 1024u)
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 15000
#define CERT_DER_MAX 16384 /* a relay's leaf certificate; RSA-4096 ones are under 2 KiB */

static struct {
	struct lws_context *ctx;
	struct lws_vhost *vhost;
	struct lws *conn;
	bool established; /* hello answered */
	bool want_exit;
	/* a stop signal came: the commands were told to stop; exit once they ended and
	 * their exec.exit went out, or at stop_deadline_ns */
	bool stopping;
	uint64_t stop_deadline_ns;
	lws_sorted_usec_list_t stop_sul;
	/* where to dial */
	char host[256];
	char path[256];
	char unix_addr[112]; /* "+/path" */
	int port;
	bool tls;
	const char *ca;
	uint8_t pin[32];
	bool have_pin;
	bool plain_remote_told; /* the warning about a ws:// relay elsewhere, once */
	char token[TOKEN_MAX + 1];
	size_t token_len;
	/* "Bearer <token>" in the upgrade request lws built (forget_sent_token) */
	unsigned char *sent_token;
	size_t sent_token_len;
	char name[64];
	/* the relay's close frame on this connection (note_close): status, reason */
	unsigned close_status;
	char close_reason[124]; /* a control frame's 125 bytes less the status, NUL */
	unsigned attempt;
	lws_sorted_usec_list_t reconnect_sul;
	lws_sorted_usec_list_t clock_beat_sul;
	/* inbound message assembly */
	uint8_t *rx;
	size_t rx_len;
	bool rx_skip;
	/* outbound JSON queue */
	struct outmsg *out_head, *out_tail;
	size_t out_bytes;
	bool rx_paused;	      /* out_bytes passed OUT_SOFT: the relay is not read meanwhile */
	bool rx_pause_logged; /* once per connection */
	/* request ids seen on this connection */
	char recent[RECENT_IDS][PROTO_MAX_ID + 1];
	unsigned recent_next;
	/* what the start-up check found (sandbox.status) */
	cJSON *check;
	time_t started;
	unsigned connects;
	/* the epoll set */
	int epfd;
	struct lws *ep_wsi;
	struct watch sigw;
} S = {.epfd = -1, .sigw = {.fd = -1}};

struct outmsg {
	struct outmsg *next;
	size_t len;
	uint8_t buf[]; /* LWS_PRE + len */
};

/* libwebsockets builds the upgrade request in its per-thread buffer, which later socket
 * reads reuse from its start: the token after the request's first ~250 bytes stayed until a
 * read that long came, and every helper forked meanwhile (fs helpers run as the agent) held
 * it. Where it was written is wiped once the request is out, if nothing overwrote it. */
static void forget_sent_token(void)
{
	if (S.sent_token && S.sent_token_len == 7 + S.token_len &&
	    !memcmp(S.sent_token, "Bearer ", 7) && !memcmp(S.sent_token + 7, S.token, S.token_len))
		explicit_bzero(S.sent_token, S.sent_token_len);
	S.sent_token = NULL;
	S.sent_token_len = 0;
}

void serve_forget_secrets(void)
{
	forget_sent_token();
	explicit_bzero(S.token, sizeof(S.token));
	S.token_len = 0;
}

struct lws_context *serve_lws_context(void)
{
	return S.ctx;
}

bool serve_connected(void)
{
	return S.conn && S.established;
}

void serve_want_write(void)
{
	if (S.conn)
		lws_callback_on_writable(S.conn);
}

void serve_send_json(char *json)
{
	struct outmsg *m;
	size_t len;

	if (!json) {
		log_error("Out of memory building a message; dropped");
		return;
	}
	if (!S.conn) {
		free(json); /* nobody to tell: answers are not replayed, output is */
		return;
	}
	len = strlen(json);
	m = malloc(sizeof(*m) + LWS_PRE + len);
	if (!m) {
		free(json);
		return;
	}
	m->next = NULL;
	m->len = len;
	memcpy(m->buf + LWS_PRE, json, len);
	free(json);
	if (S.out_tail)
		S.out_tail->next = m;
	else
		S.out_head = m;
	S.out_tail = m;
	S.out_bytes += len;
	lws_callback_on_writable(S.conn);
	/* A relay (or a client through it) that sends requests and does not read their
	 * answers must not grow this queue without bound: a sandbox.status answer is up to
	 * ~100 KiB, and thousands of them can be in flight. Requests are not read until the
	 * answers drain, as server-min does with a peer that does not read its own. */
	if (S.out_bytes > OUT_SOFT && !S.rx_paused) {
		S.rx_paused = true;
		lws_rx_flow_control(S.conn, 0);
		if (!S.rx_pause_logged)
			log_warning("The relay is not reading (%zu MiB of answers wait for it): "
				    "its requests are not read until they drain (logged once a "
				    "connection)",
				    S.out_bytes >> 20);
		S.rx_pause_logged = true;
	}
}

void serve_send_error(const char *id, enum proto_err code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	serve_send_json(proto_error_build(id, code, msg));
}

/* Refused requests are logged (audit refused …), at most AUDIT_REFUSED_PER_S a second: a
 * relay, or a client through it, can send bad requests as fast as the wire takes them, and
 * one line each would fill the disk and hold the loop in write(2). What is left out is
 * counted and said once the second is over. */
#define AUDIT_REFUSED_PER_S 20

static struct {
	struct log_rate rate;
	lws_sorted_usec_list_t sul;
} R;

static void refused_summary(lws_sorted_usec_list_t *sul)
{
	unsigned held = log_rate_held(&R.rate);

	(void)sul;
	if (held)
		log_notice("audit refused: %u more refused request(s) in that second not logged "
			   "(at most %u a second)",
			   held, AUDIT_REFUSED_PER_S);
}

bool serve_audit_refused_allowed(void)
{
	uint64_t now = spawn_now_ns() / 1000u;

	if (log_rate_window_over(&R.rate, now)) {
		lws_sul_cancel(&R.sul);
		refused_summary(&R.sul);
	}
	if (log_rate_ok(&R.rate, now, AUDIT_REFUSED_PER_S))
		return true;
	if (R.rate.held == 1 && S.ctx)
		lws_sul_schedule(S.ctx, 0, &R.sul, refused_summary,
				 (lws_usec_t)(R.rate.window_us + LOG_RATE_WINDOW_US - now) + 1);
	return false;
}

bool serve_refusev(const char *id, enum proto_err code, char *msg, size_t size, const char *fmt,
		   va_list ap)
{
	vsnprintf(msg, size, fmt, ap);
	serve_send_json(proto_error_build(id, code, msg));
	return serve_audit_refused_allowed();
}

/* A request refused before any operation looked at it. */
static void audit_refused(const char *id, const char *op, enum proto_err code, const char *msg)
{
	if (serve_audit_refused_allowed())
		log_notice("audit refused op=\"%s\" id=\"%s\" code=%s message=\"%s\"",
			   op ? op : "?", id ? id : "", proto_err_name(code), msg);
}

static void out_clear(void)
{
	while (S.out_head) {
		struct outmsg *m = S.out_head;
		S.out_head = m->next;
		free(m);
	}
	S.out_tail = NULL;
	S.out_bytes = 0;
	S.rx_paused = false;
}

int serve_watch(struct watch *w, int fd, uint32_t events, void (*fn)(struct watch *, uint32_t))
{
	struct epoll_event ev = {.events = events, .data.ptr = w};

	w->fn = fn;
	w->fd = fd;
	if (epoll_ctl(S.epfd, w->armed ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	w->armed = true;
	return 0;
}

/* The batch of events cb_epoll is dispatching. A handler may unwatch and free a watch
 * whose own event waits later in the same batch (an administrative helper's record pipe
 * and control socket both report its exit; the first handler frees both watches):
 * serve_unwatch forgets such events, so the loop never reads a freed watch. */
static struct {
	struct epoll_event *ev;
	int n;
} batch;

void serve_unwatch(struct watch *w)
{
	if (w->armed && w->fd >= 0)
		(void)epoll_ctl(S.epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->armed = false;
	for (int i = 0; i < batch.n; i++)
		if (batch.ev[i].data.ptr == w)
			batch.ev[i].data.ptr = NULL;
}

/* Agents already ensured, for exec.start and fs.*: users_ensure reads and parses the five
 * files on every call (0.1-1 ms with many agents), while these change only when pistisd
 * itself (or an operator) rewrites them. An entry is used only while the files' stat
 * fingerprints are the ones seen when it was made (every writer replaces them by rename:
 * a new inode and ctime) and while the agent's home and TMPDIR are still its directories
 * (the agent may remove its TMPDIR; ensure recreates it). Anything else: users_ensure. */
#define AGENT_CACHE 64
static const char *const fingerprint_files[] = {"/etc/passwd", "/etc/group", "/etc/shadow",
						"/etc/gshadow", "/data/pistis/users.registry"};
struct file_print {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	bool present;
};
static struct {
	struct file_print print[ELEMENTSOF(fingerprint_files)];
	bool racy; /* a file changed within the last second when print was taken */
	struct agent_cache_entry {
		char agent[USERS_AGENT_ID_MAX + 1];
		struct serve_agent a;
		uint64_t used;
	} e[AGENT_CACHE];
	unsigned n;
	uint64_t clock;
} AC;

static bool print_equal(const struct file_print *a, const struct file_print *b)
{
	return a->present == b->present && a->dev == b->dev && a->ino == b->ino &&
	       a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec && a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* A print taken within a second of a file's last change is not trusted (as git treats an
 * index entry as old as the index itself): the writers swap each file with its backup, so
 * two rewrites alternate between the same two inodes, and where timestamps are coarse (a
 * kernel without multigrain timestamps, a file system with 1 s or 10 ms steps) `remove
 * --forget A` then `ensure B` given A's uid could leave every field as it was, and A's
 * cached uid would run as B. A change a second or more after the print differs from it. */
static bool fingerprint_current(bool update)
{
	struct timespec now;
	bool same = !AC.racy, racy = false;

	clock_gettime(CLOCK_REALTIME, &now);
	for (size_t i = 0; i < ELEMENTSOF(fingerprint_files); i++) {
		struct file_print f = {0};
		struct stat st;
		if (fstatat(AT_FDCWD, fingerprint_files[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
			f = (struct file_print){.dev = st.st_dev,
						.ino = st.st_ino,
						.size = st.st_size,
						.mtime = st.st_mtim,
						.ctime = st.st_ctim,
						.present = true};
		if (!print_equal(&f, &AC.print[i]))
			same = false;
		if (f.present && f.ctime.tv_sec >= now.tv_sec - 1)
			racy = true;
		if (update)
			AC.print[i] = f;
	}
	if (update)
		AC.racy = racy;
	return same;
}

static bool own_dir(const char *path, uid_t uid)
{
	struct stat st;
	return fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
	       st.st_uid == uid;
}

static char resolve_why[700];

const char *serve_resolve_error(void)
{
	return resolve_why;
}

/* want_uid: (uid_t)-1, or the uid the server keeps for the agent (users.ensure's "uid"),
 * which bypasses the cache: users_ensure checks it against the registry and /etc. */
static int resolve(const char *agent, bool cached, uid_t want_uid, struct serve_agent *ret)
{
	struct users_identity id;
	struct agent_cache_entry *e = NULL;
	int r;

	if (cached && fingerprint_current(false)) {
		for (unsigned i = 0; i < AC.n; i++)
			if (!strcmp(AC.e[i].agent, agent)) {
				e = &AC.e[i];
				break;
			}
		if (e && own_dir(e->a.home, e->a.uid) && own_dir(e->a.tmpdir, e->a.uid)) {
			e->used = ++AC.clock;
			*ret = e->a;
			return 0;
		}
	}
	r = users_ensure("/", agent, want_uid, &id);
	if (r < 0) {
		/* The client and the log get sandbox-users' own line ("cannot make
		 * /data/sandbox-home/pi-agent-…/tmp"), not strerror alone: a planted FIFO in
		 * an agent's home came back as "Not a directory", naming nothing. */
		const char *why = users_last_error();
		bool whole = users_error_is_sentence(r);

		snprintf(resolve_why, sizeof(resolve_why), "%s%s%s", why,
			 *why && !whole ? ": " : "", whole ? "" : strerror(-r));
		/* resolve_why is raw, for the answer (JSON escapes it); the log takes the text
		 * form, its names escaped once (%-s) */
		/* one line per request a client may send at wire speed: within the refusals'
		 * budget (serve_audit_refused_allowed) */
		if (!serve_audit_refused_allowed())
			return r;
		if (whole)
			log_warning("Cannot ensure agent '%s': %-s", agent,
				    users_last_error_text());
		else
			log_warning_errno(r, "Cannot ensure agent '%s': %-s%s%m", agent,
					  users_last_error_text(), *why ? ": " : "");
		return r;
	}
	if (!users_uid_is_agent(id.uid)) {
		snprintf(resolve_why, sizeof(resolve_why), "uid %u is outside the agent range",
			 (unsigned)id.uid);
		return -EPERM;
	}
	/* Made just now (or again after a rebuild): trusted install could not ask sudo what
	 * it may run; a rule that grants more withdraws the drop-in before it runs. */
	if (id.written && (r = trusted_confirm_new_agent("/", id.name)) < 0) {
		snprintf(resolve_why, sizeof(resolve_why),
			 "sudo grants the agent more than the trusted commands, and the sudoers "
			 "drop-in could not be removed");
		return r;
	}
	*ret = (struct serve_agent){.uid = id.uid, .gid = id.gid};
	snprintf(ret->name, sizeof(ret->name), "%s", id.name);
	snprintf(ret->home, sizeof(ret->home), "%s", id.home);
	snprintf(ret->tmpdir, sizeof(ret->tmpdir), "%s", id.tmpdir);

	/* Remember it under the files' state after the ensure (which may have written them):
	 * a changed fingerprint empties the cache first. */
	if (!fingerprint_current(true))
		AC.n = 0;
	e = NULL;
	for (unsigned i = 0; i < AC.n && !e; i++)
		if (!strcmp(AC.e[i].agent, agent))
			e = &AC.e[i];
	if (!e && AC.n < AGENT_CACHE)
		e = &AC.e[AC.n++];
	if (!e) { /* full: the least recently used goes */
		e = &AC.e[0];
		for (unsigned i = 1; i < AC.n; i++)
			if (AC.e[i].used < e->used)
				e = &AC.e[i];
	}
	snprintf(e->agent, sizeof(e->agent), "%s", agent);
	e->a = *ret;
	e->used = ++AC.clock;
	return 0;
}

int serve_resolve_agent(const char *agent, struct serve_agent *ret)
{
	return resolve(agent, true, (uid_t)-1, ret);
}

/* --- inbound ------------------------------------------------------------------------ */

static bool id_seen(const char *id)
{
	for (unsigned i = 0; i < RECENT_IDS; i++)
		if (S.recent[i][0] && !strcmp(S.recent[i], id))
			return true;
	snprintf(S.recent[S.recent_next], sizeof(S.recent[0]), "%s", id);
	S.recent_next = (S.recent_next + 1) % RECENT_IDS;
	return false;
}

static void send_hello(void)
{
	cJSON *o = cJSON_CreateObject(), *caps;

	if (!o)
		return;
	cJSON_AddStringToObject(o, "id", "hello");
	cJSON_AddStringToObject(o, "op", "hello");
	cJSON_AddNumberToObject(o, "version", PROTO_VERSION);
	cJSON_AddStringToObject(o, "sandbox", S.name);
	cJSON_AddStringToObject(o, "software", "pistisd " PISTIS_VERSION);
	caps = cJSON_AddArrayToObject(o, "capabilities");
	for (const char *const *c = (const char *const[]){"exec", "pty", "replay", "fs", NULL}; *c;
	     c++)
		cJSON_AddItemToArray(caps, cJSON_CreateString(*c));
	cJSON_AddItemToObject(o, "commands", session_status(NULL));
	serve_send_json(cJSON_PrintUnformatted(o));
	cJSON_Delete(o);
}

static void handle_status(const struct proto_request *req)
{
	struct proto_error err = {0};
	const char *agent = NULL;
	cJSON *o;
	int r;

	/* With an agent, only its commands: a server acting for an agent names it, as for
	 * exec.list, and the other agents' commands and tags are none of its business. */
	r = proto_get_string(req->root, "agent", PROTO_MAX_AGENT, &agent, &err);
	if ((r < 0 && r != -ENOENT) || (agent && !*agent))
		return serve_send_error(req->id, PROTO_E_BAD_REQUEST, "\"agent\" must be a name");
	o = cJSON_CreateObject();
	if (!o)
		return;
	cJSON_AddStringToObject(o, "sandbox", S.name);
	cJSON_AddNumberToObject(o, "version", PROTO_VERSION);
	cJSON_AddStringToObject(o, "software", "pistisd " PISTIS_VERSION);
	cJSON_AddNumberToObject(o, "pid", getpid());
	cJSON_AddNumberToObject(o, "uptime_s", (double)(time(NULL) - S.started));
	cJSON_AddNumberToObject(o, "connects", S.connects);
	if (S.check)
		cJSON_AddItemReferenceToObject(o, "check", S.check);
	cJSON_AddItemToObject(o, "commands", session_status(agent));
	cJSON_AddNumberToObject(o, "buffered", (double)session_buffered());
	serve_send_json(proto_ok_build(req->id, o));
}

static void handle_users_ensure(const struct proto_request *req)
{
	struct proto_error err = {0};
	struct serve_agent a;
	const char *agent = NULL;
	uint64_t want = UINT64_MAX;
	cJSON *o;
	int r;

	r = proto_get_string(req->root, "agent", PROTO_MAX_AGENT, &agent, &err);
	if (r < 0 || !*agent)
		return serve_send_error(req->id, PROTO_E_BAD_REQUEST, "\"agent\" is required");
	/* The server may keep the agents' ids (as the users' rebuild story asks of the
	 * portal) and dictate them, for a sandbox whose /data did not survive. */
	r = proto_get_u64(req->root, "uid", UINT32_MAX, &want, &err);
	if (r == -EINVAL)
		return serve_send_error(req->id, err.code, "%s", err.message);
	if (r == 0 && !users_uid_is_agent((uid_t)want))
		return serve_send_error(
			req->id, PROTO_E_BAD_REQUEST, "\"uid\" must be an agent uid (%u..%u)",
			(unsigned)USERS_AGENT_UID_MIN, (unsigned)USERS_AGENT_UID_MAX);
	/* users.ensure: always the real thing */
	r = resolve(agent, false, r == 0 ? (uid_t)want : (uid_t)-1, &a);
	if (r < 0)
		return serve_send_error(req->id, proto_err_from_errno(r), "cannot ensure agent: %s",
					serve_resolve_error());
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "user", a.name);
	cJSON_AddNumberToObject(o, "uid", a.uid);
	cJSON_AddNumberToObject(o, "gid", a.gid);
	cJSON_AddStringToObject(o, "home", a.home);
	serve_send_json(proto_ok_build(req->id, o));
}

static void handle_text(const char *buf, size_t len)
{
	struct proto_error err = {0};
	struct proto_request req;
	cJSON *root = NULL;

	if (proto_parse(buf, len, &root, &err) < 0) {
		audit_refused(NULL, NULL, err.code, err.message);
		serve_send_json(proto_error_build(NULL, err.code, err.message));
		return;
	}
	/* Answers to our own requests (hello) carry "ok" and no "op". */
	if (!cJSON_GetObjectItemCaseSensitive(root, "op") &&
	    cJSON_GetObjectItemCaseSensitive(root, "ok")) {
		cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
		if (cJSON_IsString(id) && !strcmp(id->valuestring, "hello")) {
			if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "ok"))) {
				S.established = true;
				S.attempt = 0;
				log_info("Relay accepted hello; serving");
			} else
				log_error("Relay refused hello; will retry");
		}
		cJSON_Delete(root);
		return;
	}
	if (proto_request_parse(root, PROTO_MAX_ID, &req, &err) < 0) {
		audit_refused(req.id, NULL, err.code, err.message);
		serve_send_json(proto_error_build(req.id, err.code, err.message));
		cJSON_Delete(root);
		return;
	}
	if (id_seen(req.id)) {
		audit_refused(req.id, req.op_name, PROTO_E_DUPLICATE_ID, "request id already used");
		serve_send_error(req.id, PROTO_E_DUPLICATE_ID, "request id \"%s\" was already used",
				 req.id);
		cJSON_Delete(root);
		return;
	}
	switch (req.op) {
	case PROTO_OP_PING:
		serve_send_json(proto_ok_build(req.id, NULL));
		break;
	case PROTO_OP_HELLO:
		serve_send_json(proto_ok_build(req.id, NULL));
		break;
	case PROTO_OP_SANDBOX_STATUS:
		handle_status(&req);
		break;
	case PROTO_OP_USERS_ENSURE:
		handle_users_ensure(&req);
		break;
	case PROTO_OP_EXEC_START:
	case PROTO_OP_EXEC_STDIN:
	case PROTO_OP_EXEC_CLOSE_STDIN:
	case PROTO_OP_EXEC_SIGNAL:
	case PROTO_OP_EXEC_RESIZE:
	case PROTO_OP_EXEC_ATTACH:
	case PROTO_OP_EXEC_ACK:
	case PROTO_OP_EXEC_LIST:
		session_request(&req);
		break;
	case PROTO_OP_FS_READ:
	case PROTO_OP_FS_WRITE:
	case PROTO_OP_FS_EDIT:
	case PROTO_OP_FS_LIST:
	case PROTO_OP_FS_STAT:
	case PROTO_OP_FS_MKDIR:
	case PROTO_OP_FS_REMOVE:
	case PROTO_OP_FS_MOVE:
	case PROTO_OP_FS_READ_PROMPT:
		fsops_request(&req);
		break;
	case PROTO_OP_POLICY_APPLY:
	case PROTO_OP_POLICY_PLAN:
	case PROTO_OP_POLICY_EXPLAIN:
	case PROTO_OP_POLICY_CHECK:
	case PROTO_OP_TRUSTED_ADD:
	case PROTO_OP_TRUSTED_REMOVE:
	case PROTO_OP_TRUSTED_LIST:
		admin_request(&req);
		break;
	case PROTO_OP_SANDBOXES_LIST:
	case PROTO_OP_UNKNOWN:
	case _PROTO_OP_MAX:
	default:
		audit_refused(req.id, req.op_name, PROTO_E_UNKNOWN_OP, "not a sandbox operation");
		serve_send_error(req.id, PROTO_E_UNKNOWN_OP, "\"%s\" is not a sandbox operation",
				 req.op_name);
		break;
	}
	cJSON_Delete(root);
}

static void handle_binary(const uint8_t *buf, size_t len)
{
	struct proto_error err = {0};
	struct proto_frame f;

	if (proto_frame_parse(buf, len, &f, &err) < 0) {
		audit_refused(NULL, "frame", err.code, err.message);
		serve_send_json(proto_error_build(NULL, err.code, err.message));
		return;
	}
	session_frame(&f);
}

static void on_receive(struct lws *wsi, const void *in, size_t len)
{
	bool first = lws_is_first_fragment(wsi), final = lws_is_final_fragment(wsi);
	bool binary = lws_frame_is_binary(wsi);
	size_t max = binary ? PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD : PROTO_MAX_MESSAGE;

	if (first) {
		S.rx_len = 0;
		S.rx_skip = false;
	}
	if (!S.rx_skip && S.rx_len + len > max) {
		S.rx_skip = true;
		audit_refused(NULL, binary ? "frame" : NULL, PROTO_E_TOO_LARGE,
			      "message too large");
		serve_send_error(NULL, PROTO_E_TOO_LARGE, "message over %zu bytes dropped", max);
	}
	if (!S.rx_skip) {
		memcpy(S.rx + S.rx_len, in, len);
		S.rx_len += len;
	}
	if (!final || S.rx_skip)
		return;
	if (binary)
		handle_binary(S.rx, S.rx_len);
	else
		handle_text((const char *)S.rx, S.rx_len);
	S.rx_len = 0;
}

/* --- outbound ----------------------------------------------------------------------- */

/* Something is still to go out: a queued JSON answer, or a command's output or exit once
 * the hello is answered (before that, session output cannot be sent). */
static bool out_pending(void)
{
	return S.out_head || (S.established && session_has_pending());
}

/* Several messages per writable callback while the socket takes them (one per callback
 * costs a poll round trip per 64 KiB frame); JSON answers go before output frames. */
static int on_writable(struct lws *wsi)
{
	for (int i = 0; i < 16; i++) {
		if (S.out_head) {
			struct outmsg *m = S.out_head;
			int n = lws_write(wsi, m->buf + LWS_PRE, m->len, LWS_WRITE_TEXT);
			S.out_head = m->next;
			if (!S.out_head)
				S.out_tail = NULL;
			S.out_bytes -= m->len;
			free(m);
			if (n < 0)
				return -1;
		} else if (!S.established || !session_write_one(wsi))
			break;
		if (lws_send_pipe_choked(wsi))
			break;
	}
	if (S.rx_paused && S.out_bytes <= OUT_SOFT / 2) {
		S.rx_paused = false;
		lws_rx_flow_control(wsi, 1);
	}
	if (out_pending())
		lws_callback_on_writable(wsi);
	return 0;
}

/* --- connection lifecycle ------------------------------------------------------------- */

static void connect_now(lws_sorted_usec_list_t *sul);

static void schedule_reconnect(void)
{
	unsigned shift = S.attempt < 10 ? S.attempt : 10;
	uint64_t ms = (uint64_t)BACKOFF_MIN_MS << shift;
	unsigned jitter;

	if (S.want_exit)
		return;
	if (ms > BACKOFF_MAX_MS)
		ms = BACKOFF_MAX_MS;
	/* ±25% jitter so a relay restart is not met by every sandbox in the same millisecond */
	jitter = (unsigned)(ms / 2) ? (unsigned)random() % (unsigned)(ms / 2) : 0;
	ms = ms * 3 / 4 + jitter;
	S.attempt++;
	log_info("Reconnecting to the relay in %llu ms", (unsigned long long)ms);
	lws_sul_schedule(S.ctx, 0, &S.reconnect_sul, connect_now, (lws_usec_t)ms * 1000);
}

static const lws_retry_bo_t heartbeat = {
	.secs_since_valid_ping = 10,   /* lws sends a WebSocket ping after 10 s of quiet */
	.secs_since_valid_hangup = 30, /* and drops a peer that stayed silent for 30 s */
};

/* The loop wakes at least every SPAWN_CLOCK_BEAT_MS and says so to the spawn core's
 * clock: a wake-up much later than that was a freeze of the whole sandbox (docker pause)
 * or a stop of serve, whose length no timeout of a command, file operation or ended
 * command's linger counts (spawn_now_ns; docs/spawn.md, "Freezes"). */
static void clock_beat(lws_sorted_usec_list_t *sul)
{
	static uint64_t told;
	uint64_t stalled = spawn_clock_stalled_ns();

	if (stalled - told >= SPAWN_STALL_MIN_MS * 1000000ull)
		log_notice("Serve did not run for %llu ms (the sandbox frozen or stopped); no "
			   "timeout of a command or file operation counts that time",
			   (unsigned long long)((stalled - told) / 1000000u));
	told = stalled;
	spawn_clock_expect_wake(SPAWN_CLOCK_BEAT_MS);
	lws_sul_schedule(S.ctx, 0, sul, clock_beat, SPAWN_CLOCK_BEAT_MS * LWS_US_PER_MS);
}

static void connect_now(lws_sorted_usec_list_t *sul)
{
	struct lws_client_connect_info cc = {0};

	cc.context = S.ctx;
	cc.vhost = S.vhost;
	cc.address = S.unix_addr[0] ? S.unix_addr : S.host;
	cc.port = S.port;
	cc.path = S.path;
	cc.host = S.unix_addr[0] ? "localhost" : S.host;
	cc.origin = cc.host;
	cc.protocol = PROTO_SUBPROTOCOL;
	cc.local_protocol_name = PROTO_SUBPROTOCOL;
	cc.ssl_connection = S.tls ? LCCSCF_USE_SSL : 0;
	cc.retry_and_idle_policy = &heartbeat;
	cc.pwsi = &S.conn;
	if (!lws_client_connect_via_info(&cc)) {
		S.conn = NULL;
		schedule_reconnect();
	}
}

/* The relay's close frame (RFC 6455 5.5.1): a 2-byte status, then the reason, which
 * server-min fills to say why it cut (another protocol version, too many malformed
 * messages). Kept for connection_lost's line: before, the log said only "closed", and the
 * operator had to read the relay's log to learn why the sandbox kept redialling. */
static void note_close(const unsigned char *in, size_t len)
{
	size_t n = len > 2 ? len - 2 : 0;

	if (n > sizeof(S.close_reason) - 1)
		n = sizeof(S.close_reason) - 1;
	S.close_status = in && len >= 2 ? (unsigned)in[0] << 8 | in[1] : 0;
	if (n && in)
		memcpy(S.close_reason, in + 2, n);
	S.close_reason[n] = '\0';
}

static void connection_lost(const char *why)
{
	if ((S.conn || S.established) && S.close_status)
		log_warning("Relay connection lost: closed by the relay, status %u, reason '%s'",
			    S.close_status, S.close_reason);
	else if (S.conn || S.established)
		log_warning("Relay connection lost: %s", why);
	S.close_status = 0;
	S.close_reason[0] = '\0';
	S.conn = NULL;
	S.established = false;
	S.recent_next = 0;
	memset(S.recent, 0, sizeof(S.recent));
	out_clear();
	session_disconnected();
	schedule_reconnect();
}

/* --pin: the SHA-256 of the relay's leaf certificate (DER). Checked when lws asks for the
 * upgrade request's headers: the TLS handshake is over (mbedtls has verified the chain and
 * the host name), no byte of HTTP has gone out yet, and the token goes out in this very
 * request. Fail closed: a certificate we cannot get is a mismatch. */
static bool pin_matches(struct lws *wsi)
{
	_cleanup_free_ union lws_tls_cert_info_results *ci = NULL;
	uint8_t digest[SHA256_DIGEST_SIZE];

	ci = malloc(sizeof(*ci) + CERT_DER_MAX);
	if (!ci) {
		log_error("Out of memory checking the relay certificate against --pin; refusing");
		return false;
	}
#ifdef PISTIS_FUZZ
	/* The fuzz build links the system's libwebsockets, which lacks the backported
	 * LWS_TLS_CERT_INFO_DER_RAW (scripts/patches/libwebsockets/0003); it never dials TLS.
	 * Fail closed all the same. */
	(void)wsi;
	if (true) {
#else
	if (lws_tls_peer_cert_info(wsi, LWS_TLS_CERT_INFO_DER_RAW, ci, CERT_DER_MAX) < 0 ||
	    ci->ns.len <= 0) {
#endif
		log_error("Cannot read the relay's certificate to check --pin; refusing");
		return false;
	}
	sha256(ci->ns.name, (size_t)ci->ns.len, digest);
	if (memcmp(digest, S.pin, sizeof(digest))) {
		log_error("Relay certificate does not match --pin; refusing");
		return false;
	}
	return true;
}

/* A relay reached over TCP must not be a socket an agent bound, nor pi-tools (as which
 * trusted commands run): agents share pistisd's network namespace, and their listener on
 * the relay's port while the relay is away (a restart, a crash) would be handed the
 * sandbox's token and then obeyed, as every request from the relay is. The socket at the
 * other end is looked up by its four-tuple (lib/sock-owner): one of this namespace must
 * not be an agent's or pi-tools' (for one not accepted yet, its listener's); one whose
 * owner cannot be told is refused, and so is a peer at a local address where the lookups
 * do not work; a peer that no socket of this namespace is (another host, another
 * namespace) is the network's to vouch for (wss:// and --pin). Called before the token
 * is written. */
static bool relay_owner_barred(uid_t uid)
{
	return users_uid_is_agent(uid) || uid == USERS_TOOLS_UID;
}

static bool relay_peer_believed(struct lws *wsi)
{
	enum sock_verdict v;
	uid_t uid;
	int err;

	if (S.unix_addr[0])
		return true; /* its directories are root's alone (path_believed) */
	v = sock_tcp_peer_verdict(lws_get_socket_fd(wsi), relay_owner_barred, &uid, &err);
	switch (v) {
	case SOCK_REFUSED_NOT_TCP:
		log_error_errno(err,
				"Cannot tell who listens at the relay's address %s:%d (%m); "
				"not sending the token",
				S.host, S.port);
		return false;
	case SOCK_REFUSED_OWNER:
		log_error(
			"Refusing the relay at %s:%d: the socket there belongs to uid %u (%s), "
			"not to the relay; not sending the token (the relay's port is taken "
			"while the relay is away: stop that process; docs/protocol.md, Transport)",
			S.host, S.port, (unsigned)uid,
			uid == USERS_TOOLS_UID ? USERS_TOOLS_USER : "an agent");
		return false;
	case SOCK_REFUSED_UNTOLD:
		log_error("Refusing the relay at %s:%d: the socket there is not accepted (or is "
			  "closing) and no one listens there any more: whose it is cannot be "
			  "told; not sending the token",
			  S.host, S.port);
		return false;
	case SOCK_REFUSED_BLIND:
		log_error_errno(err,
				"Refusing the relay at %s:%d: an address of this network "
				"namespace, and who owns the socket there cannot be told (socket "
				"diagnostics: %m); not sending the token (use a unix socket path, "
				"or wss:// with --pin)",
				S.host, S.port);
		return false;
	case SOCK_BELIEVED_ELSEWHERE:
		if (!S.tls && !S.plain_remote_told) {
			/* No socket of this namespace: nothing but the network vouches for the
			 * peer, and agents are on the sandbox's side of it (a resolver at a
			 * local address whose port is free, a name in no_proxy, a hosts file
			 * a rule lets them write) */
			S.plain_remote_told = true;
			log_warning("The relay at %s:%d is outside this network namespace and "
				    "dialled over plain ws://: the token and every command cross "
				    "the network in clear, and nothing proves the peer is the "
				    "relay (whoever answers for its name or address gets the "
				    "token); use wss:// (and --pin)",
				    S.host, S.port);
		}
		return true;
	case SOCK_BELIEVED_LOCAL:
	default:
		break;
	}
	return true;
}

static int cb_relay(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		unsigned char **p = in, *end = (*p) + len;
		char value[TOKEN_MAX + 8];
		int n, r;
		if (!relay_peer_believed(wsi) || (S.have_pin && !pin_matches(wsi)))
			return -1;
		n = snprintf(value, sizeof(value), "Bearer %.*s", (int)S.token_len, S.token);
		r = lws_add_http_header_by_name(wsi, (const unsigned char *)"authorization:",
						(const unsigned char *)value, n, p, end);
		explicit_bzero(value, sizeof(value));
		if (r)
			return -1;
		S.sent_token = *p - 2 - n; /* the value, before its "\r\n" */
		S.sent_token_len = (size_t)n;
		return 0;
	}
	case LWS_CALLBACK_CLIENT_ESTABLISHED: { /* small messages (answers, acks, a command's first frame) must not wait for
		   * Nagle + delayed ACK (~40 ms per round trip on loopback) */
		int one = 1;
		(void)setsockopt(lws_get_socket_fd(wsi), IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof(one));
	}
		forget_sent_token();
		log_info("Connected to the relay");
		S.connects++;
		S.conn = wsi;
		S.rx_pause_logged = false;
		S.established = false;
		send_hello();
		break;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		if (wsi == S.conn)
			on_receive(wsi, in, len);
		break;
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		if (wsi == S.conn)
			return on_writable(wsi);
		break;
	case LWS_CALLBACK_CLIENT_HTTP_REDIRECT:
		/* Never followed: the token would go to wherever the answer points, and a
		 * redirected dial is judged by the first one's transport (a unix socket's
		 * path is believed, a TCP peer on the way is then never looked up).
		 * server-min does not redirect. in: the Location, len: the status. */
		log_error("Refusing the relay's redirect (HTTP %u) to \"%.256s\": the token goes "
			  "only to the address given with --relay (set it to the relay's own)",
			  (unsigned)len, in ? (const char *)in : "");
		return -1;
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		forget_sent_token();
		connection_lost(in ? (const char *)in : "connection error");
		break;
	case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
		if (wsi == S.conn)
			note_close((const unsigned char *)in, len);
		break;
	case LWS_CALLBACK_CLIENT_CLOSED:
		if (wsi == S.conn)
			connection_lost("closed");
		break;
	case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
		/* Closed before the upgrade: a refused relay (relay_peer_believed, --pin) ends
		 * here, not in CLIENT_CONNECTION_ERROR; dial again all the same, with the
		 * backoff, so the real relay is found once it is back. */
		forget_sent_token();
		if (wsi == S.conn || !S.conn)
			connection_lost("closed before the upgrade");
		break;
	default:
		break;
	}
	return 0;
}

static int cb_epoll(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	struct epoll_event ev[32];
	int n;

	if (reason != LWS_CALLBACK_RAW_RX_FILE)
		return 0;
	n = epoll_wait(S.epfd, ev, (int)ELEMENTSOF(ev), 0);
	batch.ev = ev;
	batch.n = n > 0 ? n : 0;
	for (int i = 0; i < n; i++) {
		struct watch *w = ev[i].data.ptr;
		if (w && w->armed)
			w->fn(w, ev[i].events);
	}
	batch.n = 0;
	return 0;
}

/* A stop: the running commands got SIGTERM (session_begin_stop: their tree, a grace of
 * SPAWN_GRACE_MS_DEFAULT, then SIGKILL). Every STOP_POLL_MS: once none runs and every
 * exec.exit is out (or no relay takes it), exit; at the deadline, exit anyway (the loop's
 * end SIGKILLs what is left). */
#define STOP_POLL_MS 20
#define STOP_DEADLINE_MS (SPAWN_GRACE_MS_DEFAULT + 2000)

static void stop_check(lws_sorted_usec_list_t *sul)
{
	unsigned running = session_running();
	bool flushed = !serve_connected() || !out_pending();

	(void)sul;
	if ((!running && flushed) || spawn_now_ns() >= S.stop_deadline_ns) {
		if (running)
			log_warning("Stopping with %u command(s) still running after %u ms: killed",
				    running, STOP_DEADLINE_MS);
		S.want_exit = true;
		lws_cancel_service(S.ctx);
		return;
	}
	lws_sul_schedule(S.ctx, 0, &S.stop_sul, stop_check, STOP_POLL_MS * LWS_US_PER_MS);
}

static void on_signal(struct watch *w, uint32_t events)
{
	struct signalfd_siginfo si;
	unsigned n;

	if (read(w->fd, &si, sizeof(si)) != sizeof(si))
		return;
	if (S.stopping) {
		log_notice("Signal %u again: stopping now, killing what still runs", si.ssi_signo);
		S.want_exit = true;
		lws_cancel_service(S.ctx);
		return;
	}
	S.stopping = true;
	n = session_begin_stop();
	log_notice("Signal %u: stopping; %u running command(s) sent SIGTERM, SIGKILL after %u ms "
		   "(a second signal: at once)",
		   si.ssi_signo, n, SPAWN_GRACE_MS_DEFAULT);
	S.stop_deadline_ns = spawn_now_ns() + (uint64_t)STOP_DEADLINE_MS * 1000000u;
	stop_check(&S.stop_sul);
}

/* tx_packet_size: lws hands a write to the socket at most this much at a time and copies
 * the rest into its own buffer (one send and a poll round trip per pt_serv_buf_size, 4 KiB
 * by default); a whole output frame in one send lets the kernel take what it can. */
static const struct lws_protocols protocols[] = {
	{PROTO_SUBPROTOCOL, cb_relay, 0, 0, 0, NULL, PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD},
	{"pistis-epoll", cb_epoll, 0, 0, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

/* --- setup ---------------------------------------------------------------------------- */

/* The token file must be root's alone, a regular file, every directory on its way root's
 * (a Kubernetes Secret's link beside it is followed only beneath its own directory):
 * lib/token-file.c and lib/trust-path.c, the file checked on the fd opened beneath the last
 * directory checked, so a rename race cannot swap in another file. */
static int read_token(const char *path)
{
	const struct token_file_rule rule = {
		.also_owner = (uid_t)-1,
		.forbidden = 077,
		.file_rule = "a regular file owned by root with mode 0600 or stricter",
		.min_len = 16,
	};
	size_t len = 0;
	int r = token_file_load(path, &rule, S.token, sizeof(S.token), &len);

	if (r >= 0)
		S.token_len = len;
	return r;
}

static int parse_url(const char *url)
{
	struct ws_url u;
	char shown[PATH_MAX];
	const char *p;
	int r;

	if (url[0] == '/') {
		if (strlen(url) + 2 > sizeof(S.unix_addr))
			return log_error_errno(-ENAMETOOLONG, "Unix socket path '%s' is too long",
					       url);
		snprintf(S.unix_addr, sizeof(S.unix_addr), "+%s", url);
		snprintf(S.path, sizeof(S.path), "/v1/sandbox");
		return 0;
	}
	r = ws_url_parse(url, "/v1/sandbox", &u);
	(void)ws_url_for_log(url, shown, sizeof(shown)); /* the only form any log gets */
	if (r == -EPROTONOSUPPORT)
		return log_error_errno(-EINVAL,
				       "--relay '%s' must be ws://, wss:// or an absolute "
				       "unix socket path",
				       shown);
	/* A user part is no place for a secret: the URL is on serve's command line, which
	 * every agent reads where /proc has no hidepid (Docker's defaults). "tok@host" was
	 * taken as a host name and failed only at the dial (red team, redteam-sweep.sh). */
	p = strstr(url, "://") + 3;
	if (memchr(p, '@', strcspn(p, "/?#")))
		return log_error_errno(-EINVAL,
				       "--relay '%s' has a user part: the relay URL is on pistisd "
				       "serve's command line, which agents may read; authenticate "
				       "with --token-file only",
				       shown);
	if (r == -EINVAL)
		return log_error_errno(-EINVAL, "--relay '%s' has no usable host", shown);
	if (r < 0)
		return log_error_errno(-EINVAL, "--relay '%s' has a bad port", shown);
	snprintf(S.host, sizeof(S.host), "%s", u.host);
	snprintf(S.path, sizeof(S.path), "%s", u.path);
	S.port = u.port;
	S.tls = u.tls;
	return 0;
}

/* trust_path_check, its refusal logged ("Refusing WHAT[SUFFIX]: why"). */
static bool path_believed(const char *path, enum trust_leaf leaf, const char *what,
			  const char *suffix)
{
	char why[PATH_MAX + 160];

	if (trust_path_check(path, leaf, what, why, sizeof(why)) >= 0)
		return true;
	log_error("Refusing %s%s: %s", what, suffix, why);
	return false;
}

static int parse_pin(const char *s)
{
	size_t j = 0;

	for (size_t i = 0; s[i] && j < 64; i++) {
		char c = s[i];
		int v;
		if (c == ':')
			continue;
		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v = c - 'A' + 10;
		else
			return -EINVAL;
		S.pin[j / 2] = (uint8_t)(S.pin[j / 2] << 4 | v);
		j++;
	}
	if (j != 64)
		return -EINVAL;
	S.have_pin = true;
	return 0;
}

/* The start-up check: the probes of `pistisd check` (without the setuid walk of the image,
 * which can take seconds), logged, kept for sandbox.status, and a refusal to start when a
 * hard requirement does not hold and was not allowed by name. */
static int startup_check(check_mask_t allowed)
{
	struct check_report *r = NULL;
	cJSON *findings, *allow;
	int failed, k;

	k = check_run("/", CHECK_SKIP_SETUID_WALK, &r);
	if (k < 0)
		return log_error_errno(k, "Failed to run the start-up check: %m");
	r->allowed = allowed;
	S.check = cJSON_CreateObject();
	findings = cJSON_AddArrayToObject(S.check, "findings");
	allow = cJSON_AddArrayToObject(S.check, "allowed");
	for (int id = 0; id < _CHECK_MAX; id++) {
		const struct check_result *res = &r->results[id];
		bool hard = check_is_hard(id), allowed_here = allowed & CHECK_BIT(id);
		char v[4 * sizeof(res->value) + 1];
		cJSON *f;

		if (allowed_here)
			cJSON_AddItemToArray(allow, cJSON_CreateString(check_name(id)));
		if (res->status == CHECK_STATUS_OK || id == CHECK_SETUID_FILES)
			continue;
		if (hard && !allowed_here)
			log_error("check: %s: %s (%-s): %s", check_name(id),
				  check_status_to_string(res->status),
				  check_value_text(res, v, sizeof(v)), check_advice(id));
		else
			log_warning("check: %s: %s (%-s)%s", check_name(id),
				    check_status_to_string(res->status),
				    check_value_text(res, v, sizeof(v)),
				    hard ? " [hard requirement, allowed]" : "");
		f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "name", check_name(id));
		cJSON_AddStringToObject(f, "status", check_status_to_string(res->status));
		/* As the log line has it: a raw value may quote names agents chose (a mount
		 * point beneath a directory an agent renamed) or be cut inside a character, and
		 * a string that is not UTF-8 made every sandbox.status answer one the relay
		 * must drop as malformed (red team). */
		cJSON_AddStringToObject(f, "value", check_value_text(res, v, sizeof(v)));
		cJSON_AddBoolToObject(f, "hard", hard);
		cJSON_AddItemToArray(findings, f);
	}
	failed = check_first_failure(r);
	cJSON_AddStringToObject(S.check, "verdict", failed >= 0 ? "fail" : "ok");
	if (failed >= 0) {
		log_error(
			"Refusing to start: hard requirement '%s' does not hold (opt out: --allow "
			"%s, or PISTIS_ALLOW; see 'pistisd check')",
			check_name(failed), check_name(failed));
		check_report_free(r);
		return -EPERM;
	}
	check_report_free(r);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pistisd serve --relay URL --token-file FILE [OPTIONS]\n\n"
		"Dial out to the relay and run commands and file operations for it.\n"
		"URL is ws://HOST[:PORT][/PATH], wss://HOST[:PORT][/PATH] or "
		"/path/to/unix.sock\n"
		"(the directories and links on a socket's way root's, writable by no one else;\n"
		"over TCP, a socket of this network namespace at the relay's address that is an\n"
		"agent's or pi-tools' is refused before the token is sent).\n\n"
		"  --relay URL         where to dial (never listens)\n"
		"  --token-file FILE   this sandbox's token (root-owned, mode 0600)\n"
		"  --ca FILE           CA bundle for wss:// (default: the system's, e.g.\n"
		"                      /etc/ssl/certs/ca-certificates.crt); it and the\n"
		"                      directories and links on its way root's, writable by\n"
		"                      no one else\n"
		"  --pin SHA256        also require this SHA-256 of the relay's certificate (hex)\n"
		"  --name NAME         sandbox name sent in hello (default: host name)\n"
		"  --allow NAMES       start although these hard requirements of 'pistisd check'\n"
		"                      do not hold (also PISTIS_ALLOW=name,name)\n"
		"  --log-format FMT    text (default) or json\n"
		"  --max-buffered N    unacknowledged output of all commands together, in MiB\n"
		"                      (default 64; one reader's commands stop at a quarter of\n"
		"                      it, each command at 8 MiB)\n"
		"  --share-abstract-sockets\n"
		"                      let commands connect to abstract UNIX sockets bound\n"
		"                      outside their own tree: other agents', the host's\n"
		"                      (default: each command only to its own, where the\n"
		"                      kernel has Landlock ABI >= 6)\n"
		"  --pids-max N        processes and threads of each agent, all its commands\n"
		"                      together (NPROC, default 512; and the agent's cgroup\n"
		"                      pids.max where the pids controller is delegated)\n"
		"  --memory-max BYTES  memory of each agent, all its commands together (its\n"
		"                      cgroup's memory.max, no swap; K/M/G/T suffixes, at\n"
		"                      least 1M); over it, the command the kernel picks is\n"
		"                      killed (SIGKILL). Refused (111) where the memory\n"
		"                      controller is not delegated\n"
		"  --cpu-weight N      each agent's share of CPU time, all its commands together\n"
		"                      (its cgroup's cpu.weight, 1..10000, default 100).\n"
		"                      Refused (111) where the cpu controller is not delegated\n"
		"  -v, --verbose       debug logging\n"
		"  -h, --help\n\n"
		"SIGTERM, SIGINT, SIGHUP: stop; running commands get SIGTERM, 2 s, then SIGKILL,\n"
		"their ends are sent and logged, then serve exits (at most 4 s; a second signal:\n"
		"at once).\n"
		"Exit codes: 0 stopped by a signal, 1 a hard requirement does not hold,\n"
		"100 usage, 111 system error (a limit asked for that cannot hold here too).\n"
		"See docs/protocol.md.\n");
}

/* Every running command holds ~5 fds here (pipes, pidfd, cgroup, exec report) and a file
 * operation ~4: 256 commands need well over 1024, the soft limit Docker and containerd
 * give a container. Raised to SERVE_NOFILE (at most the hard limit), before the spawner
 * thread exists (setrlimit is then a single-thread call) and before libwebsockets sizes
 * its fd table from it. Agents get their own limit in the spawn child (4096). */
#define SERVE_NOFILE 8192

static void raise_nofile(void)
{
	rlim_t now = 0;
	int r = fd_limit_raise(SERVE_NOFILE, &now);

	if (r < 0)
		log_warning_errno(r, "Cannot raise the open-files limit: %m");
	if (now && now < 2048)
		log_warning("The open-files limit is %llu: fewer than the 256 commands a "
			    "sandbox may run at once will start (each needs ~5 descriptors); raise "
			    "it (docker run --ulimit nofile=8192)",
			    (unsigned long long)now);
}

int serve_cli_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"relay", required_argument, NULL, 'r'},
		{"token-file", required_argument, NULL, 't'},
		{"ca", required_argument, NULL, 'c'},
		{"pin", required_argument, NULL, 'p'},
		{"name", required_argument, NULL, 'n'},
		{"allow", required_argument, NULL, 'a'},
		{"log-format", required_argument, NULL, 'l'},
		{"max-buffered", required_argument, NULL, 'm'},
		{"share-abstract-sockets", no_argument, NULL, 's'},
		{"pids-max", required_argument, NULL, 'P'},
		{"memory-max", required_argument, NULL, 'M'},
		{"cpu-weight", required_argument, NULL, 'W'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct lws_context_creation_info info;
	const char *relay = NULL, *token_file = NULL, *bad = NULL, *env;
	check_mask_t allowed = 0;
	uint64_t memory_max = 0;
	unsigned cpu_weight = 0;
	size_t bad_len = 0;
	sigset_t mask;
	int c, r, sfd;

	opterr = 0; /* getopt would print a bad option raw: log_bad_option escapes it */
	while ((c = getopt_long(argc, argv, "hv", opts, NULL)) >= 0) {
		switch (c) {
		case 'r':
			relay = optarg;
			break;
		case 't':
			token_file = optarg;
			break;
		case 'c':
			S.ca = optarg;
			break;
		case 'p':
			if (parse_pin(optarg) < 0) {
				log_error("--pin must be 64 hex digits (colons allowed)");
				return EXIT_USAGE;
			}
			break;
		case 'm': {
			uint64_t mib;
			if (parse_uint_strict(optarg, 65536, NULL, &mib) < 0 || !mib) {
				log_error("--max-buffered must be 1..65536 (MiB)");
				return EXIT_USAGE;
			}
			session_set_max_buffered(mib << 20);
			break;
		}
		case 'n':
			if (!proto_id_valid(optarg, sizeof(S.name) - 1)) {
				log_error("--name must be 1..63 characters of [A-Za-z0-9._:-]");
				return EXIT_USAGE;
			}
			snprintf(S.name, sizeof(S.name), "%s", optarg);
			break;
		case 'a':
			if (check_allow_parse(optarg, &allowed, &bad, &bad_len) < 0) {
				char q[64 + ESCAPE_QUOTE_EXTRA]; /* a longer name: cut, marked */

				log_error("--allow: unknown check %-s (see 'pistisd check --help')",
					  escape_c_quote(bad, bad_len, 64, q, sizeof(q)));
				return EXIT_USAGE;
			}
			break;
		case 'l':
			if (!strcmp(optarg, "json"))
				log_set_format(LOG_FORMAT_JSON);
			else if (strcmp(optarg, "text")) {
				log_error("--log-format must be text or json");
				return EXIT_USAGE;
			}
			break;
		case 's':
			session_set_share_abstract_sockets(true);
			break;
		case 'P': {
			uint64_t n;
			if (parse_uint_strict(optarg, 1u << 22, NULL, &n) < 0 || !n) {
				log_error("--pids-max must be 1..4194304");
				return EXIT_USAGE;
			}
			session_set_pids_max(n);
			break;
		}
		case 'M':
			if (parse_size_strict(optarg, AGENT_MEMORY_MIN, AGENT_MEMORY_MAX,
					      &memory_max) < 0) {
				log_error("--memory-max must be from 1M to 1024T (bytes, or with a "
					  "K, M, G or T suffix)");
				return EXIT_USAGE;
			}
			break;
		case 'W': {
			uint64_t n;
			if (parse_uint_strict(optarg, 10000, NULL, &n) < 0 || !n) {
				log_error("--cpu-weight must be 1..10000");
				return EXIT_USAGE;
			}
			cpu_weight = (unsigned)n;
			break;
		}
		case 'v':
			log_set_level(LOG_LVL_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			log_bad_option(argv, optind, optopt, "pistisd serve --help");
			return EXIT_USAGE;
		}
	}
	if (optind != argc || !relay || !token_file) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (parse_url(relay) < 0)
		return EXIT_USAGE;
	session_set_agent_limits(memory_max, cpu_weight);
	if (S.have_pin && !S.tls) {
		log_error("--pin needs a wss:// relay");
		return EXIT_USAGE;
	}
	if (S.tls && !S.ca) {
		S.ca = tls_default_ca_file();
		if (!S.ca) {
			log_error("wss:// needs a CA bundle: no system bundle found "
				  "(/etc/ssl/certs/ca-certificates.crt, ...); pass --ca FILE");
			return EXIT_USAGE;
		}
	}
	/* A CA bundle an agent could write (or a directory or link on its way) would let it
	 * add a CA of its own, and a relay of its own would get the token; a socket it could
	 * put in the relay's place would be the relay, and get the token and send commands
	 * as any agent. */
	if (S.tls && !path_believed(S.ca, TRUST_LEAF_FILE, "the CA bundle", " for wss://"))
		return EXIT_SYSTEM;
	if (S.unix_addr[0] &&
	    !path_believed(S.unix_addr + 1, TRUST_LEAF_SOCKET, "the relay socket", ""))
		return EXIT_SYSTEM;
	if (!S.name[0]) {
		char h[64] = "";
		(void)gethostname(h, sizeof(h) - 1);
		snprintf(S.name, sizeof(S.name), "%s", proto_id_valid(h, 63) ? h : "sandbox");
	}
	env = getenv("PISTIS_ALLOW");
	if (env && check_allow_parse(env, &allowed, &bad, &bad_len) < 0) {
		char q[64 + ESCAPE_QUOTE_EXTRA]; /* a longer name: cut, marked */

		log_error("PISTIS_ALLOW: unknown check %-s",
			  escape_c_quote(bad, bad_len, 64, q, sizeof(q)));
		return EXIT_USAGE;
	}
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (read_token(token_file) < 0)
		return EXIT_SYSTEM;
	r = startup_check(allowed);
	if (r == -EPERM)
		return 1;
	if (r < 0)
		return EXIT_SYSTEM;
	S.started = time(NULL);

	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return log_error_errno(-errno, "sigprocmask: %m"), EXIT_SYSTEM;
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	S.epfd = epoll_create1(EPOLL_CLOEXEC);
	S.rx = malloc(PROTO_MAX_MESSAGE + PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD);
	if (sfd < 0 || S.epfd < 0 || !S.rx)
		return log_error_errno(-errno, "Failed to set up the event loop: %m"), EXIT_SYSTEM;

	raise_nofile();
	log_lws_setup();
	/* libwebsockets takes http_proxy from the environment as it makes the context, and
	 * knows no no_proxy: a relay the operator exempted went through the proxy (which saw
	 * the token of a ws:// one), and a unix socket relay got a CONNECT line. */
	switch (proxy_env_settle(S.unix_addr[0] ? NULL : S.host)) {
	case 1:
		log_info("Dialling the relay directly, not through http_proxy (%s)",
			 S.unix_addr[0]		       ? "a unix socket"
			 : proxy_host_loopback(S.host) ? "a loopback address"
						       : "no_proxy names its host");
		break;
	case 2:
		if (!S.tls)
			log_warning("Dialling the relay ws://%s:%d through the proxy http_proxy "
				    "names: the proxy sees the token and every message (use "
				    "wss://, or name the relay's host in no_proxy)",
				    S.host, S.port);
		break;
	default:
		break;
	}
	memset(&info, 0, sizeof(info));
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = protocols;
	info.gid = (gid_t)-1;
	info.uid = (uid_t)-1;
	info.options = S.tls ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0;
	info.client_ssl_ca_filepath = S.ca;
	/* lws reads the socket in pieces of this size (default 4 KiB): stdin frames and
	 * large answers in fewer reads */
	info.pt_serv_buf_size = 64 * 1024;
	S.ctx = lws_create_context(&info);
	if (!S.ctx)
		return log_error("Failed to create the libwebsockets context"), EXIT_SYSTEM;
	S.vhost = lws_get_vhost_by_name(S.ctx, "default");

	/* pi-sandbox and pi-tools first: every agent's groups name pi-sandbox */
	r = users_ensure_base("/");
	if (r < 0)
		log_warning_errno(r, "Failed to ensure the base identities: %-s%s%m",
				  users_last_error_text(), *users_last_error_text() ? ": " : "");
	r = session_init();
	if (r < 0) {
		lws_context_destroy(S.ctx);
		log_lws_flush();
		return EXIT_SYSTEM; /* said by session_init */
	}
	if (serve_watch(&S.sigw, sfd, EPOLLIN, on_signal) < 0)
		return log_error_errno(-errno, "epoll: %m"), EXIT_SYSTEM;
	{
		lws_sock_file_fd_type fdt = {.filefd = S.epfd};
		S.ep_wsi = lws_adopt_descriptor_vhost(S.vhost, LWS_ADOPT_RAW_FILE_DESC, fdt,
						      "pistis-epoll", NULL);
		if (!S.ep_wsi)
			return log_error("Failed to adopt the epoll fd into libwebsockets"),
			       EXIT_SYSTEM;
	}
	{
		char shown[PATH_MAX];
		log_info("pistisd serve %s: sandbox '%s', relay %s", PISTIS_VERSION, S.name,
			 ws_url_for_log(relay, shown, sizeof(shown)));
	}
	clock_beat(&S.clock_beat_sul);
	connect_now(NULL);
	while (!S.want_exit)
		if (lws_service(S.ctx, 0) < 0)
			break;
	session_done();
	lws_context_destroy(S.ctx);
	log_lws_flush();
	explicit_bzero(S.token, sizeof(S.token));
	free(S.rx);
	cJSON_Delete(S.check);
	return 0;
}
