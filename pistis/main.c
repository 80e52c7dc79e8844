/* pistis: the command-line client of server-min (docs/api.md).
 *
 *   pistis [--url URL] [--token-file F] [--json] ls | status | exec | read | write | edit
 *
 * exec streams output live, checks every frame's sequence number, acknowledges as it goes,
 * and survives a relay restart or a cut connection: it redials and re-attaches with the
 * last sequence it holds, so output arrives complete and in order. */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "lib/env-build.h"
#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/lws-log.h"
#include "lib/token-file.h"
#include "lib/macro.h"
#include "lib/parse-num.h"
#include "lib/proto.h"
#include "lib/tls-ca.h"
#include "lib/proxy-env.h"
#include "lib/sock-owner.h"
#include "lib/trust-path.h"
#include "lib/ws-url.h"
#include "sandbox-users/users.h"

#define ACK_EVERY (1024u * 1024u)
#define RECONNECT_FOR_S 120
/* --answer-timeout's default. The longest an answer legitimately takes, as the docs tell
 * it: a file operation runs up to 30 s of the sandbox's time; a sandbox frozen or gone
 * is dropped by server-min's 30 s ping timeout and what it held answered `unavailable`;
 * one not connected is `unavailable` at once (server-min starts and resumes none,
 * docs/server-min.md, "A sandbox's life"); entry restarts serve within 30 s
 * (docs/entry.md). Ten times the 30 s those name, so that a provider of one's own that
 * holds a request while it resumes or restarts a sandbox is not cut short. */
#define ANSWER_TIMEOUT_S 300
#define ANSWER_TIMEOUT_MAX_S (UINT64_C(30) * 24 * 3600)
/* policy.plan|check|apply may take their timeout_s (1..3600, default 600) before they
 * answer (docs/protocol.md, "Administration"): that on top of the answer timeout. */
#define POLICY_TIMEOUT_DEFAULT_S 600
#define POLICY_TIMEOUT_MAX_S 3600

enum mode { M_LS, M_STATUS, M_EXEC, M_READ, M_WRITE, M_EDIT, M_CALL };

static struct {
	enum mode mode;
	bool json;
	struct ws_url url;	    /* --url or $PISTIS_URL */
	const char *ca;		    /* --ca or $PISTIS_CA: the bundle wss:// trusts */
	char conn_err[640];	    /* a host name of 255 and the longest reason */
	bool redirect_refused;	    /* conn_err says so: CONNECTION_ERROR keeps it */
	bool refused, refusal_told; /* the handshake callback refused this connection's peer */
	char token[600];
	const char *token_file; /* where the token came from: this file, else $PISTIS_TOKEN */
	bool token_refused;	/* the server answered our upgrade 401: no redial helps */
	const char *sandbox, *agent, *cwd, *tag, *file, *old_text, *new_text;
	const char *call_op, *call_fields; /* call OP [JSON] */
	char **argv;
	bool tty, stdin_pipe;
	uint64_t timeout_ms;
	uint64_t answer_s; /* --answer-timeout: 0 waits for ever */
	/* state */
	struct lws_context *ctx;
	struct lws *wsi;
	struct lws *stdin_wsi, *sig_wsi;
	bool done;
	int exit_code;
	uint32_t cmd;
	uint64_t last_seq, acked;
	size_t since_ack;
	uint64_t stdin_seq;
	/* stdin credit (exec.started's stdin_window, exec.stdin's written): what was sent and
	 * not yet written to the command stays under the window; 0: no window (older pistisd) */
	uint64_t stdin_sent, stdin_written, stdin_window;
	bool stdin_paused;
	unsigned req_n;
	char start_id[32];
	char attach_id[32]; /* the exec.attach of a re-attach (send_start) */
	time_t lost_at;
	unsigned attempt;
	lws_sorted_usec_list_t sul;
	uint8_t *rx;
	size_t rx_len;
	struct msg *q_head, *q_tail;
	struct termios saved_tio;
	bool raw, stdin_eof;
	bool redial;	  /* drop this connection and re-attach from what we hold */
	bool established; /* a connection was up: losing it now is not "cannot connect" */
	uint8_t *wbuf;	  /* stdin for `write` */
	size_t wlen;
	uint64_t foff; /* read/write: where the next piece starts */
	size_t piece;  /* write: the bytes of the piece last sent */
	/* Forwarded bytes (a command's output, a file's) that left a line open: what we print
	 * next on that file starts a line of its own (note_line). */
	bool out_is_err;  /* stdout and stderr are one file (2>&1, a terminal) */
	bool stdout_open; /* stdout's line (stderr's is the log's: log_set_line_open) */
	/* Output frames spliced from the socket into a stdout/stderr pipe (direct_rx): */
	bool out_pipe[_PROTO_STREAM_MAX]; /* the stream's fd is a pipe */
	struct {
		uint64_t seq; /* the frame being spliced, 0: none */
		size_t len;   /* its payload */
		size_t left;  /* of it, still in the socket */
		int fd;	      /* where it goes once whole */
		bool copy;    /* staging pipe full (many small segments): in C.rx instead */
	} sp;
	int stage[2]; /* a pipe holding that frame's payload until all of it has arrived */
	/* The reader of our stdout or stderr went away (EPIPE): the command is being stopped
	 * (output_gone) and what it still sends is dropped. */
	bool out_gone;
	/* Our stdout or stderr failed otherwise (a full disk, EIO): said once, the rest of
	 * what was meant for it dropped, and we do not exit 0 (output_failed). */
	bool out_failed[STDERR_FILENO + 1];
	char sig_id[32]; /* the exec.signal request that stops it: its answer is quiet */
	lws_sorted_usec_list_t kill_sul;
	/* An ending signal we forwarded to the command (on_signal), 0: none yet */
	int fwd_sig;
	lws_sorted_usec_list_t fwd_sul;
	int sig_fd; /* the signalfd of those, -1: none */
	/* The request whose answer we wait for (await_answer), "": none */
	char await_id[32];
	const char *await_op;
	uint64_t await_s;
	struct timespec await_since;
	lws_sorted_usec_list_t answer_sul;
	struct timespec pong_at; /* the connection last shown alive: up, or a pong */
} C = {.exit_code = 1, .stage = {-1, -1}, .sig_fd = -1, .answer_s = ANSWER_TIMEOUT_S};

#define STDIN_PIECE 16384

/* May another piece of stdin go out now: a command to give it to, a connection, and room
 * under the stdin window? */
static bool stdin_may_send(void)
{
	uint64_t inflight = C.stdin_sent > C.stdin_written ? C.stdin_sent - C.stdin_written : 0;

	return C.cmd && C.wsi && (!C.stdin_window || inflight + STDIN_PIECE <= C.stdin_window);
}

/* Read stdin only while a piece may go out: a fast sender waits for a slow command
 * instead of overflowing pistisd's queue (which would end the command's stdin there). */
static void stdin_flow(void)
{
	bool may = stdin_may_send();

	if (!C.stdin_wsi || may == !C.stdin_paused)
		return;
	lws_rx_flow_control(C.stdin_wsi, may);
	C.stdin_paused = !may;
}

struct msg {
	struct msg *next;
	size_t len;
	bool binary;
	uint8_t buf[];
};

static void enqueue(const void *data, size_t len, bool binary)
{
	struct msg *m = malloc(sizeof(*m) + LWS_PRE + len);
	if (!m)
		return;
	m->next = NULL;
	m->len = len;
	m->binary = binary;
	memcpy(m->buf + LWS_PRE, data, len);
	if (C.q_tail)
		C.q_tail->next = m;
	else
		C.q_head = m;
	C.q_tail = m;
	if (C.wsi)
		lws_callback_on_writable(C.wsi);
}

static void send_obj(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (s) {
		enqueue(s, strlen(s), false);
		free(s);
	}
}

static cJSON *request(const char *op, char *id_out, size_t id_size)
{
	cJSON *o = cJSON_CreateObject();
	char id[32];
	snprintf(id, sizeof(id), "r%u", ++C.req_n);
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "op", op);
	if (C.sandbox)
		cJSON_AddStringToObject(o, "sandbox", C.sandbox);
	if (C.agent)
		cJSON_AddStringToObject(o, "agent", C.agent);
	if (id_out)
		snprintf(id_out, id_size, "%s", id);
	return o;
}

static void finish(int code)
{
	C.exit_code = code;
	C.done = true;
	lws_cancel_service(C.ctx);
}

static void restore_tty(void)
{
	if (C.raw)
		(void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &C.saved_tio);
	C.raw = false;
}

/* Our terminal's size as the protocol takes it: a terminal wider or taller than
 * PROTO_MAX_WINSIZE made every --tty command a bad_request (exit 125) before. */
static unsigned winsize_clamp(unsigned short v)
{
	return v > PROTO_MAX_WINSIZE ? PROTO_MAX_WINSIZE : v;
}

static void send_ack(void)
{
	cJSON *o;
	if (!C.cmd || C.acked == C.last_seq)
		return;
	o = request("exec.ack", NULL, 0);
	cJSON_AddNumberToObject(o, "cmd", C.cmd);
	cJSON_AddNumberToObject(o, "seq", (double)C.last_seq);
	send_obj(o);
	C.acked = C.last_seq;
	C.since_ack = 0;
}

static void answer_expired(lws_sorted_usec_list_t *sul);

/* Wait for the answer (ok or error) to request id, op, for --answer-timeout plus extra_s
 * that op may take by its own rules; one that has not come by then ends us
 * (answer_expired). Only answers have a deadline: a command's output and its end may take
 * hours (its --timeout is the sandbox's to keep). */
static void await_answer(const char *id, const char *op, uint64_t extra_s)
{
	if (!C.answer_s)
		return;
	snprintf(C.await_id, sizeof(C.await_id), "%s", id);
	C.await_op = op;
	C.await_s = C.answer_s + extra_s;
	(void)clock_gettime(CLOCK_MONOTONIC, &C.await_since);
	lws_sul_schedule(C.ctx, 0, &C.answer_sul, answer_expired,
			 (lws_usec_t)C.await_s * LWS_US_PER_SEC);
}

static void answer_came(void)
{
	C.await_id[0] = 0;
	lws_sul_cancel(&C.answer_sul);
}

/* What a `call` of a policy walk may take before its answer: the request's timeout_s
 * (else pistisd's default; one pistisd would refuse is refused at once anyway). */
static uint64_t call_extra_s(cJSON *req)
{
	struct proto_error err = {0};
	uint64_t t;

	if (strcmp(C.call_op, "policy.plan") && strcmp(C.call_op, "policy.check") &&
	    strcmp(C.call_op, "policy.apply"))
		return 0;
	if (proto_get_u64(req, "timeout_s", POLICY_TIMEOUT_MAX_S, &t, &err) == 0 && t)
		return t;
	return POLICY_TIMEOUT_DEFAULT_S;
}

/* The request each mode but exec and call sends */
static const char *const mode_op[] = {[M_LS] = "sandboxes.list",
				      [M_STATUS] = "sandbox.status",
				      [M_READ] = "fs.read",
				      [M_WRITE] = "fs.write",
				      [M_EDIT] = "fs.edit"};

static void send_start(void)
{
	const char *op = C.mode <= M_EDIT ? mode_op[C.mode] : NULL; /* M_CALL is past it */
	char id[32] = "";
	cJSON *o;

	switch (C.mode) {
	case M_LS:
	case M_STATUS:
		send_obj(request(op, id, sizeof(id)));
		await_answer(id, op, 0);
		return;
	case M_READ: /* a piece at a time (PROTO_MAX_FILE_CHUNK), on from C.foff */
		o = request(op, id, sizeof(id));
		cJSON_AddStringToObject(o, "path", C.file);
		cJSON_AddNumberToObject(o, "offset", (double)C.foff);
		send_obj(o);
		await_answer(id, op, 0);
		return;
	case M_WRITE: { /* the first piece replaces the file, the next ones go at C.foff */
		size_t n = C.wlen - C.foff < PROTO_MAX_FILE_CHUNK ? C.wlen - C.foff
								  : PROTO_MAX_FILE_CHUNK;
		char *b64 = proto_base64_encode(C.wbuf + C.foff, n);
		o = request(op, id, sizeof(id));
		cJSON_AddStringToObject(o, "path", C.file);
		cJSON_AddStringToObject(o, "data", b64 ? b64 : "");
		if (C.foff)
			cJSON_AddNumberToObject(o, "offset", (double)C.foff);
		free(b64);
		send_obj(o);
		C.piece = n;
		C.foff += n;
		await_answer(id, op, 0);
		return;
	}
	case M_EDIT:
		o = request(op, id, sizeof(id));
		cJSON_AddStringToObject(o, "path", C.file);
		cJSON_AddStringToObject(o, "old", C.old_text);
		cJSON_AddStringToObject(o, "new", C.new_text);
		send_obj(o);
		await_answer(id, op, 0);
		return;
	case M_CALL: {
		cJSON *f = NULL, *it;
		uint64_t extra;
		o = request(C.call_op, id, sizeof(id));
		if (C.call_fields) {
			struct proto_error err = {0};
			if (proto_parse(C.call_fields, strlen(C.call_fields), &f, &err) < 0 ||
			    !cJSON_IsObject(f)) {
				log_error("FIELDS must be one JSON object: %s", err.message);
				cJSON_Delete(f);
				cJSON_Delete(o);
				finish(100);
				return;
			}
			while ((it = f->child)) {
				cJSON_DetachItemViaPointer(f, it);
				if (!strcmp(it->string, "id") || !strcmp(it->string, "op"))
					cJSON_Delete(it);
				else {
					cJSON_DeleteItemFromObjectCaseSensitive(o, it->string);
					cJSON_AddItemToObject(o, it->string, it);
				}
			}
			cJSON_Delete(f);
		}
		extra = call_extra_s(o);
		send_obj(o);
		await_answer(id, C.call_op, extra);
		return;
	}
	case M_EXEC:
	default:
		break;
	}
	if (C.cmd) { /* reconnected: pick the stream up where we are */
		o = request("exec.attach", C.attach_id, sizeof(C.attach_id));
		cJSON_AddNumberToObject(o, "cmd", C.cmd);
		cJSON_AddNumberToObject(o, "after", (double)C.last_seq);
		send_obj(o);
		await_answer(C.attach_id, "exec.attach", 0);
		return;
	}
	o = request("exec.start", C.start_id, sizeof(C.start_id));
	{
		cJSON *a = cJSON_AddArrayToObject(o, "argv");
		for (char **p = C.argv; *p; p++)
			cJSON_AddItemToArray(a, cJSON_CreateString(*p));
	}
	if (C.cwd)
		cJSON_AddStringToObject(o, "cwd", C.cwd);
	if (C.tag)
		cJSON_AddStringToObject(o, "tag", C.tag);
	if (C.timeout_ms)
		cJSON_AddNumberToObject(o, "timeout_ms", (double)C.timeout_ms);
	cJSON_AddStringToObject(o, "stdin", C.stdin_pipe || C.tty ? "pipe" : "null");
	if (C.tty) {
		struct winsize ws = {0};
		const char *term = getenv("TERM");

		cJSON_AddBoolToObject(o, "pty", true);
		/* our terminal draws the output: its type, as ssh and docker exec pass it
		 * (one the builder would refuse is left out: the sandbox then picks) */
		if (term && !envb_term_refusal(term))
			cJSON_AddStringToObject(o, "term", term);
		if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
			cJSON_AddNumberToObject(o, "rows", winsize_clamp(ws.ws_row));
			cJSON_AddNumberToObject(o, "cols", winsize_clamp(ws.ws_col));
		}
	}
	send_obj(o);
	await_answer(C.start_id, "exec.start", 0);
}

static _Noreturn void end_by(int sig);
static void on_winch(void);

/* Wait until an output fd takes more (one we inherited non-blocking, EAGAIN; a pipe or
 * terminal we write only what it takes: out_room). An ending signal meanwhile (its reader
 * stalled: `pistis exec … | less` stopped, a reader that sleeps, ^S) ends us by it at once:
 * nothing can be sent while we wait here, so it cannot be forwarded, and a signal read only
 * by the event loop would never be read. A resize is queued as on_signal does. */
static void wait_writable(int fd)
{
	struct pollfd pf[2] = {{.fd = fd, .events = POLLOUT}, {.fd = C.sig_fd, .events = POLLIN}};
	struct signalfd_siginfo si;

	for (;;) {
		pf[0].revents = pf[1].revents = 0;
		if (poll(pf, C.sig_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			return;
		if (C.sig_fd >= 0 && (pf[1].revents & POLLIN) &&
		    read(C.sig_fd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo != SIGWINCH)
				end_by((int)si.ssi_signo);
			on_winch();
		}
		if (pf[0].revents)
			return;
	}
}

/* The output fd of a stream: stderr's, else stdout's (as on_binary always wrote them). */
static int stream_fd(unsigned stream)
{
	return stream == PROTO_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO;
}

/* Forwarded bytes went to fd (stdout or stderr), last their last byte (-1: not seen, they
 * were spliced): whether they left its line open, so that a log line or a JSON line we
 * print next is not glued to the end of an agent's (red team: a command whose output ended
 * "{forged} " without a newline put its forged exit event first on the line of the real
 * one, and a remote "pistis: ok " hid the real error that followed). One not seen counts
 * as open: a blank line at worst. */
static void note_line(int fd, int last)
{
	bool open = last != '\n';

	if (fd == STDOUT_FILENO || C.out_is_err)
		C.stdout_open = open;
	if (fd == STDERR_FILENO || C.out_is_err)
		log_set_line_open(open);
}

static void signal_cmd(int sig, char *id_out, size_t id_size)
{
	cJSON *o = request("exec.signal", id_out, id_size);

	cJSON_AddNumberToObject(o, "cmd", C.cmd);
	cJSON_AddNumberToObject(o, "signal", sig);
	send_obj(o);
}

static void kill_after_pipe(lws_sorted_usec_list_t *sul)
{
	(void)sul;
	if (!C.done && C.cmd && C.wsi)
		signal_cmd(SIGKILL, C.sig_id, sizeof(C.sig_id));
}

/* Our stdout or stderr failed with EPIPE: its reader is gone (`pistis exec … | head -1`);
 * `read` stops there too, exiting 141, where it read the whole file into the closed pipe.
 * As a shell pipeline's writer gets SIGPIPE, the command does: exec.signal SIGPIPE now,
 * SIGKILL PIPE_KILL_MS later should it ignore SIGPIPE (it never sees the EPIPE that would
 * end it here); we drop the rest of its output and exit with its status once it ended
 * (141). It went on for ever before, and so did we, writing into the closed pipe. */
#define PIPE_KILL_MS 2000
static void output_gone(void)
{
	if (C.mode == M_READ) /* `pistis read … | head`: the rest of the file is not wanted */
		finish(128 + SIGPIPE);
	if (C.out_gone || C.mode != M_EXEC)
		return;
	C.out_gone = true;
	if (!C.cmd)
		return;
	signal_cmd(SIGPIPE, C.sig_id, sizeof(C.sig_id));
	lws_sul_schedule(C.ctx, 0, &C.kill_sul, kill_after_pipe,
			 (lws_usec_t)PIPE_KILL_MS * LWS_US_PER_MS);
}

/* A write to our stdout or stderr failed with err, not EPIPE (a full disk, EIO): what was
 * meant for it is lost. `pistis read FILE >/mnt/full/copy` and `pistis exec -- cat FILE`
 * into a full disk exited 0 with a cut file, without a word (red team: into /dev/full,
 * every command exited 0), where cat says why and exits 1. Said once per file; later
 * output for it is dropped, never written after a gap; `read` stops with 1; exec's command
 * runs on (it cannot be told, and stopping it could cut what it does short), and we exit
 * with its status, 1 where that is 0. */
static void output_failed(int fd, int err)
{
	int i = fd == STDERR_FILENO ? STDERR_FILENO : STDOUT_FILENO;

	if (!C.out_failed[i]) {
		C.out_failed[i] = true;
		log_error_errno(-err, "Failed to write to %s: %m; %s",
				i == STDERR_FILENO ? "stderr" : "stdout",
				C.mode == M_EXEC ? "the command's output to it is dropped"
						 : "stopping");
	}
	if (C.mode != M_EXEC)
		finish(1);
}

/* What went to stdout through stdio (json_out, ls) out now: a failure is output lost, as
 * for out_write (a reader gone, EPIPE, is not: `pistis ls | head -1`). Later writes into
 * a stream in error fail the same way, so its reason is taken at the first. */
static void stdout_flush(void)
{
	int e;

	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return;
	e = errno ? errno : EIO;
	clearerr(stdout);
	if (e != EPIPE)
		output_failed(STDOUT_FILENO, e);
}

/* Whether what fd gets is dropped: its reader is gone or it failed. */
static bool out_dropped(int fd)
{
	return C.out_gone || C.out_failed[fd == STDERR_FILENO ? STDERR_FILENO : STDOUT_FILENO];
}

static size_t out_min(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* How much of n bytes a write to fd (stdout or stderr) takes without blocking, once there
 * is room: a write that blocks would keep us from the signals we forward (wait_writable).
 * A pipe: its free space (waiting for some first); a terminal (^S, a stopped reader):
 * pieces of 512 once it polls writable; anything else (a file): all of it. */

enum out_kind { OUT_UNSEEN, OUT_OTHER, OUT_TTY, OUT_PIPE };

/* What fd (stdout or stderr) is, asked once: its file does not change under us. */
static enum out_kind out_kind_of(int fd)
{
	static enum out_kind kind[STDERR_FILENO + 1];
	struct stat st = {0};

	if (fd < STDOUT_FILENO || fd > STDERR_FILENO)
		return OUT_OTHER;
	if (kind[fd] == OUT_UNSEEN) {
		kind[fd] = OUT_OTHER;
		if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && isatty(fd))
			kind[fd] = OUT_TTY;
		else if (S_ISFIFO(st.st_mode))
			kind[fd] = OUT_PIPE;
	}
	return kind[fd];
}

static size_t out_room(int fd, size_t n)
{
	enum out_kind k = C.sig_fd < 0 ? OUT_OTHER : out_kind_of(fd);
	int cap, used = 0;

	if (k == OUT_TTY) {
		wait_writable(fd);
		return out_min(n, 512);
	}
	/* the capacity is asked each time: the reader may change it (F_SETPIPE_SZ) */
	if (k != OUT_PIPE || (cap = fcntl(fd, F_GETPIPE_SZ)) <= 0)
		return n;
	/* bytes in it may hold a page each more than they fill (the reader's partly read one,
	 * the last written): two pages to spare; else, once a page is free, one page (a
	 * write of up to PIPE_BUF into a free page does not block) */
	if (ioctl(fd, FIONREAD, &used) < 0)
		return n;
	if (cap - used >= 3 * PIPE_BUF)
		return out_min(n, (size_t)(cap - used - 2 * PIPE_BUF));
	wait_writable(fd);
	return out_min(n, PIPE_BUF);
}

/* All of buf to fd (stdout or stderr), waiting where the pipe is full, also when the fd
 * we inherited is non-blocking. A reader gone (EPIPE) stops the command (output_gone);
 * other errors drop the output and the command goes on. */
static void out_write(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	if (out_dropped(fd))
		return;
	if (n > 0)
		note_line(fd, (unsigned char)p[n - 1]);
	while (n > 0) {
		ssize_t w = write(fd, p, out_room(fd, n));
		if (w < 0 && errno == EAGAIN) {
			wait_writable(fd);
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EPIPE)
			output_gone();
		else if (w <= 0)
			output_failed(fd, w < 0 ? errno : EIO);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* cJSON text to stdout, with the characters that drive or rearrange a terminal written as
 * \uXXXX escapes: DEL, the C1 controls U+0080-U+009F (U+009B is a CSI to xterm and the
 * Linux console), U+2028/U+2029 and the bidirectional controls (CVE-2021-42574). cJSON
 * escapes only what is below U+0020, and names, argv and messages come from agents; the
 * escapes are the same JSON string, so what a program reads is unchanged. */
static void json_out(const char *s)
{
	size_t len = strlen(s);

	if (C.out_failed[STDOUT_FILENO]) /* never after a gap (output_failed) */
		return;
	if (C.stdout_open)
		putchar('\n');
	C.stdout_open = false;
	for (size_t i = 0; i < len; i++) {
		unsigned cp;
		size_t n = utf8_display_control(s + i, len - i, &cp);

		if (s[i] == 0x7f)
			cp = 0x7f, n = 1;
		if (n) {
			printf("\\u%04x", cp);
			i += n - 1;
		} else {
			putchar(s[i]);
		}
	}
	putchar('\n');
	/* out now, before a log line written straight to stderr: one file with 2>&1 */
	stdout_flush();
	if (C.out_is_err)
		log_set_line_open(false);
}

static void print_json(cJSON *root)
{
	char *s = cJSON_Print(root);
	if (s)
		json_out(s);
	free(s);
}

/* obj's integer field key in 0..max (the server is not trusted with a double that a cast
 * would turn into anything: 1e999, -1, 2.5 are refused). */
static bool num(cJSON *obj, const char *key, uint64_t max, uint64_t *ret)
{
	struct proto_error err = {0};

	return proto_get_u64(obj, key, max, ret, &err) == 0;
}

/* A write whose piece after the first got no ok (refused, or the connection lost): the
 * first piece replaced the file, so it holds part of stdin now; say how much. */
static void write_cut(const char *what)
{
	if (C.mode == M_WRITE && C.foff > C.piece)
		log_error("fs.write: %s now holds only the first %" PRIu64 " of the %zu bytes "
			  "(the piece at byte %" PRIu64 " %s; part of it may be there too)",
			  C.file, C.foff - C.piece, C.wlen, C.foff - C.piece, what);
}

/* The awaited answer did not come within C.await_s (await_answer): the relay or the
 * sandbox is not answering, and we would have waited for ever. A relay or protocol
 * failure, 125, saying which request, how long, and what it may have left done. */
static void answer_expired(lws_sorted_usec_list_t *sul)
{
	struct timespec now = C.await_since;
	int64_t ms;

	(void)sul;
	if (C.done || !C.await_id[0])
		return;
	(void)clock_gettime(CLOCK_MONOTONIC, &now);
	ms = ((int64_t)now.tv_sec - C.await_since.tv_sec) * 1000 +
	     (now.tv_nsec - C.await_since.tv_nsec) / 1000000;
	log_error("%s: no answer from the server within %" PRIu64 " s (waited %" PRId64 ".%" PRId64
		  " s); the relay or the sandbox%s%s%s is not answering "
		  "(--answer-timeout SEC waits longer, 0 for ever)",
		  C.await_op, C.await_s, ms / 1000, ms % 1000 / 100, C.sandbox ? " '" : "",
		  C.sandbox ? C.sandbox : "", C.sandbox ? "'" : "");
	if (C.mode == M_EXEC && C.cmd)
		log_error("Command %u may still be running; its output from sequence %" PRIu64
			  " on and its exit status are not known here (exec.attach finds it)",
			  C.cmd, C.last_seq + 1);
	else if (C.mode == M_EXEC)
		log_error("The command may have started all the same%s%s%s (exec.list lists it)",
			  C.tag ? ": its tag is '" : "", C.tag ? C.tag : "", C.tag ? "'" : "");
	write_cut("was not answered");
	C.await_id[0] = 0;
	finish(125);
}

static void on_text(const char *buf, size_t len)
{
	struct proto_error err = {0};
	cJSON *root = NULL, *ev, *ok, *e;

	if (proto_parse(buf, len, &root, &err) < 0) {
		log_error("Bad message from the server: %s", err.message);
		return;
	}
	ok = cJSON_GetObjectItemCaseSensitive(root, "ok");
	ev = cJSON_GetObjectItemCaseSensitive(root, "event");
	e = cJSON_GetObjectItemCaseSensitive(root, "error");
	/* the answer awaited (an event under its id is not): what follows may ask again */
	if (C.await_id[0] && (ok || e)) {
		cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
		if (cJSON_IsString(id) && !strcmp(id->valuestring, C.await_id))
			answer_came();
	}
	if (C.mode == M_CALL) { /* every message on one line; the answer ends it */
		char *s = cJSON_PrintUnformatted(root);
		if (s)
			json_out(s);
		free(s);
		stdout_flush();
		if (ok)
			finish(cJSON_IsTrue(ok) ? 0 : 1);
		goto out;
	}
	if (cJSON_IsFalse(ok) || e) {
		cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
		cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
		cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
		bool unavailable =
			cJSON_IsString(code) && !strcmp(code->valuestring, "unavailable");
		/* stopping a command whose reader is gone: it may have ended meanwhile */
		if ((C.out_gone || C.fwd_sig) && cJSON_IsString(id) &&
		    !strcmp(id->valuestring, C.sig_id))
			goto out;
		if (C.mode == M_EXEC && C.cmd && unavailable) {
			/* the sandbox has not redialled the restarted relay yet: try again */
			C.redial = true;
			goto out;
		}
		if (C.json)
			print_json(root);
		else
			log_error("%s: %s", cJSON_IsString(code) ? code->valuestring : "error",
				  cJSON_IsString(msg) ? msg->valuestring : "");
		/* A later piece refused: the first replaced the file, so it now holds part of
		 * stdin, and only the remote error said anything (client-hostile.sh). */
		write_cut("failed");
		/* A re-attach refused (the command is gone, not_found): nothing more of it
		 * will come. It was taken for an error about a frame and we waited for ever. */
		if (C.mode == M_EXEC && C.cmd && cJSON_IsString(id) &&
		    !strcmp(id->valuestring, C.attach_id)) {
			log_error("Cannot re-attach command %u; its output from sequence %" PRIu64
				  " on and its exit status are lost",
				  C.cmd, C.last_seq + 1);
			finish(125);
			goto out;
		}
		/* errors about a single frame or ack do not end an exec */
		/* a command that could not start: 127 not found, 126 cannot run (like a shell) */
		if (C.mode != M_EXEC || !C.cmd)
			finish(C.mode != M_EXEC ? 1
			       : cJSON_IsString(code) && !strcmp(code->valuestring, "not_found")
				       ? 127
			       : cJSON_IsString(code) && (!strcmp(code->valuestring, "denied") ||
							  !strcmp(code->valuestring, "cannot_exec"))
				       ? 126
				       : 125);
		goto out;
	}
	if (C.mode != M_EXEC) {
		/* An answer is ok or an error: one that is neither (no "ok", "ok": "yes") said
		 * nothing was done and exited 0 (client-hostile.sh). */
		if (!cJSON_IsTrue(ok)) {
			if (!ok && cJSON_IsString(ev))
				goto out; /* an event, not the answer */
			log_error("%s: an answer that is neither ok nor an error", mode_op[C.mode]);
			finish(125);
			goto out;
		}
		/* --json prints each answer, and a read or write still goes on to its next
		 * piece: the first answer ended both, so a --json write of 300 KB wrote the
		 * first 128 KiB and exited 0 (relay-hostile.sh). */
		if (C.json || C.mode == M_STATUS)
			print_json(root);
		if (C.mode == M_LS && !C.json) {
			cJSON *s, *list = cJSON_GetObjectItemCaseSensitive(root, "sandboxes");
			cJSON_ArrayForEach(s, list)
			{
				cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name");
				char name[256];

				/* server-min's names are [A-Za-z0-9._:-]; another server's are
				 * not the terminal's to interpret */
				escape_c(cJSON_IsString(n) ? n->valuestring : "?",
					 cJSON_IsString(n) ? strlen(n->valuestring) : 1, name,
					 sizeof(name));
				printf("%-24s %s\n", name,
				       cJSON_IsTrue(
					       cJSON_GetObjectItemCaseSensitive(s, "connected"))
					       ? "connected"
					       : "disconnected");
			}
		} else if (C.mode == M_READ) {
			cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "data");
			cJSON *eof = cJSON_GetObjectItemCaseSensitive(root, "eof");
			uint8_t *bytes = NULL;
			uint64_t off, plen;
			size_t n = 0;
			/* A piece that does not say what it is (no data that decodes, no eof, not
			 * the piece asked for, or no bytes and not the end) would print a file
			 * cut short, or a hole, with exit 0: said, and 125. */
			if (!cJSON_IsString(d) || !cJSON_IsBool(eof) ||
			    !num(root, "offset", UINT64_MAX, &off) || off != C.foff ||
			    !num(root, "length", UINT64_MAX, &plen) ||
			    proto_base64_decode(d->valuestring, strlen(d->valuestring), &bytes,
						&n) < 0 ||
			    plen != n || (!n && cJSON_IsFalse(eof))) {
				free(bytes);
				log_error("fs.read: a malformed answer at byte %" PRIu64
					  " (data, offset, length or eof): the file is incomplete",
					  C.foff);
				finish(125);
				goto out;
			}
			if (!C.json)
				out_write(STDOUT_FILENO, bytes, n);
			free(bytes);
			/* more to come: the next piece */
			if (cJSON_IsFalse(eof)) {
				C.foff += n;
				send_start();
				goto out;
			}
		} else if (C.mode == M_WRITE) {
			uint64_t got;
			/* each piece's bytes all written: an answer with a smaller length
			 * exited 0 with a file cut short */
			if (!num(root, "length", UINT64_MAX, &got) || got != C.piece) {
				log_error("fs.write: the answer does not say all %zu bytes at byte "
					  "%" PRIu64 " were written (length): %s is incomplete",
					  C.piece, C.foff - C.piece, C.file);
				finish(125);
				goto out;
			}
			if (C.foff < C.wlen) {
				send_start();
				goto out;
			}
		}
		finish(0);
		goto out;
	}
	/* exec.start or exec.attach answered ok without naming the command: nothing of it
	 * could be told apart, and we waited for ever (client-hostile.sh) */
	{
		cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
		uint64_t named;

		if (ok && cJSON_IsString(id) &&
		    (!strcmp(id->valuestring, C.start_id) ||
		     (C.cmd && !strcmp(id->valuestring, C.attach_id))) &&
		    (!cJSON_IsString(ev) ||
		     (strcmp(ev->valuestring, "exec.started") &&
		      strcmp(ev->valuestring, "exec.attached")) ||
		     !num(root, "cmd", UINT32_MAX, &named) || !named ||
		     (C.cmd && named != C.cmd))) {
			log_error("%s: an answer that names no command (or another one)",
				  C.cmd ? "exec.attach" : "exec.start");
			finish(125);
			goto out;
		}
	}
	if (!cJSON_IsString(ev))
		goto out;
	if (!strcmp(ev->valuestring, "exec.started") || !strcmp(ev->valuestring, "exec.attached")) {
		uint64_t cmd, win, got, wr;
		if (num(root, "cmd", UINT32_MAX, &cmd))
			C.cmd = (uint32_t)cmd;
		C.stdin_window =
			num(root, "stdin_window", UINT64_MAX, &win) && win >= 2 * STDIN_PIECE ? win
											      : 0;
		/* an attach starts the credit again from what pistisd holds */
		if (num(root, "stdin_received", UINT64_MAX, &got) &&
		    num(root, "stdin_written", got, &wr)) {
			C.stdin_sent = got;
			C.stdin_written = wr;
		}
		/* stdin is read only once there is a command to give it to */
		if (C.cmd && (C.stdin_pipe || C.tty) && !C.stdin_wsi && !C.stdin_eof) {
			lws_sock_file_fd_type fd = {.filefd = STDIN_FILENO};
			C.stdin_wsi = lws_adopt_descriptor_vhost(
				lws_get_vhost_by_name(C.ctx, "default"), LWS_ADOPT_RAW_FILE_DESC,
				fd, PROTO_CLIENT_SUBPROTOCOL, NULL);
		}
		stdin_flow();
		C.attempt = 0;
		C.lost_at = 0;
	} else if (!strcmp(ev->valuestring, "exec.stdin")) {
		uint64_t wr;
		if (num(root, "written", C.stdin_sent, &wr) && wr > C.stdin_written)
			C.stdin_written = wr;
		stdin_flow();
	} else if (!strcmp(ev->valuestring, "exec.detached")) {
		/* one reader per command: another client attached it (or it is gone) */
		cJSON *why = cJSON_GetObjectItemCaseSensitive(root, "reason");
		log_error("Command %u is no longer read here: %s; stopping", C.cmd,
			  cJSON_IsString(why) ? why->valuestring : "another client attached it");
		finish(125);
	} else if (!strcmp(ev->valuestring, "exec.exit")) {
		cJSON *last = cJSON_GetObjectItemCaseSensitive(root, "last_seq");
		uint64_t last_seq, code, sig;
		/* pistisd sends last_seq in every exec.exit (docs/protocol.md) and server-min
		 * passes it on: without it nothing says the output that arrived is all of it,
		 * and one without it was taken as complete, exit 0. */
		if (!last) {
			log_error("Exit event of command %u names no last_seq (the sequence of its "
				  "last output frame; %" PRIu64 " arrived): its output may be "
				  "incomplete",
				  C.cmd, C.last_seq);
			finish(125);
			goto out;
		}
		if (!num(root, "last_seq", UINT64_MAX, &last_seq) || last_seq != C.last_seq) {
			log_error("Exit event names sequence %.0f but %llu arrived",
				  cJSON_IsNumber(last) ? last->valuedouble : -1.0,
				  (unsigned long long)C.last_seq);
			finish(125);
			goto out;
		}
		C.acked = (uint64_t)-1; /* force the final ack even at sequence 0 */
		send_ack();
		if (C.json)
			print_json(root);
		/* as a shell says it; anything else (out of range, not a number) is 125 */
		C.exit_code = num(root, "signal", 64, &sig) && sig > 0 ? 128 + (int)sig
			      : num(root, "code", 255, &code)	       ? (int)code
								       : 125;
		/* let the ack go out, then stop */
		C.mode = M_EXEC;
		C.done = true;
	}
out:
	cJSON_Delete(root);
}

/* Frame seq's payload is complete at the output: it is the last one held. */
static void frame_done(uint64_t seq, size_t len)
{
	C.last_seq = seq;
	C.since_ack += len;
	if (C.since_ack >= ACK_EVERY)
		send_ack();
}

static void on_binary(const uint8_t *buf, size_t len)
{
	struct proto_error err = {0};
	struct proto_frame f;

	if (proto_frame_parse(buf, len, &f, &err) < 0 || f.cmd != C.cmd)
		return;
	if (f.seq <= C.last_seq)
		return; /* a resend we already have */
	if (f.seq != C.last_seq + 1) {
		log_error("Output frame %llu arrived after %llu: a gap; re-attaching",
			  (unsigned long long)f.seq, (unsigned long long)C.last_seq);
		C.redial = true;
		return;
	}
	if (f.len)
		out_write(stream_fd(f.stream), f.payload, f.len);
	frame_done(f.seq, f.len);
}

/* Drop what the staging pipe holds (a frame that never arrived whole). */
static void stage_drop(void)
{
	uint8_t junk[4096];

	while (C.stage[0] >= 0 && read(C.stage[0], junk, sizeof(junk)) > 0)
		;
}

/* The staged payload (len bytes) into fd, moved pipe to pipe (no copy): waits where fd
 * is full, also when the fd we inherited is non-blocking; an output that fails drops the
 * rest, as out_write does (its reader gone, EPIPE: output_gone). */
static void stage_flush(int fd, size_t len)
{
	if (out_dropped(fd))
		return stage_drop();
	if (len > 0)
		note_line(fd, -1);
	while (len > 0) {
		/* NONBLOCK: a full output waits in wait_writable, where signals are heard */
		ssize_t n =
			splice(C.stage[0], NULL, fd, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			wait_writable(fd);
			continue;
		}
		if (n < 0 && errno == EPIPE)
			output_gone();
		else
			output_failed(fd, n < 0 ? errno : EIO);
		stage_drop();
		return;
	}
}

/* LWS_CALLBACK_CLIENT_RECEIVE_DIRECT (scripts/patches/libwebsockets/0006): the socket is
 * readable at a WebSocket frame boundary with nothing buffered in lws. When the next frame
 * is exactly the output frame on_binary would write next — one final, unmasked binary
 * WebSocket frame, a valid header for this command with sequence last_seq + 1, a non-empty
 * payload for a stream whose fd is a pipe — its two headers are read here and its payload
 * is spliced from the socket into a private staging pipe, and from there, once all of it
 * is in, into the output pipe: never copied through user space, and nothing of a frame
 * reaches the output before the whole frame has arrived (a connection lost mid-frame
 * drops the staged part, lost(); the frame is resent whole after the re-attach). Anything
 * else (a control or text frame, a fragment, a resend, a gap, a header not all arrived
 * yet) is left to lws and on_binary, which decide exactly as before. A frame may take
 * several calls (the socket runs dry: C.sp.left); lws calls again at the next readable
 * socket and reads nothing itself until the frame is done. Returns 1 when bytes were taken
 * from the socket, 0 to let lws read, -1 to close. */
static int direct_rx(struct lws *wsi)
{
	const int sfd = lws_get_socket_fd(wsi);
	size_t taken = 0;

	if (C.mode != M_EXEC || !C.cmd || C.rx_len)
		return 0;
	while (taken < ACK_EVERY) {
		if (!C.sp.seq) {
			uint8_t h[PROTO_WS_HEADER_MAX + PROTO_FRAME_HEADER];
			struct proto_error err = {0};
			struct proto_frame f;
			uint64_t plen = 0;
			size_t hl;
			ssize_t n = recv(sfd, h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
			/* Not a final binary frame, masked (lws refuses it), odd, or its headers
			 * not all here yet: lws reads it. proto_frame_parse reads only the
			 * frame header of the plen bytes it is told of. */
			hl = n > 0 ? proto_ws_binary_header(h, (size_t)n, &plen) : 0;
			if (!hl || (size_t)n < hl + PROTO_FRAME_HEADER ||
			    plen <= PROTO_FRAME_HEADER ||
			    plen > PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD ||
			    proto_frame_parse(h + hl, (size_t)plen, &f, &err) < 0 ||
			    f.cmd != C.cmd || f.seq != C.last_seq + 1 ||
			    (f.stream != PROTO_STREAM_STDOUT && f.stream != PROTO_STREAM_STDERR) ||
			    !C.out_pipe[f.stream])
				break;
			/* peeked, so there: both headers are taken off the socket */
			if (recv(sfd, h, hl + PROTO_FRAME_HEADER, MSG_DONTWAIT) !=
			    (ssize_t)(hl + PROTO_FRAME_HEADER))
				return -1;
			C.sp.seq = f.seq;
			C.sp.len = C.sp.left = f.len;
			C.sp.fd = stream_fd(f.stream);
			taken += hl + PROTO_FRAME_HEADER;
		}
		while (C.sp.left) {
			const size_t have = C.sp.len - C.sp.left;
			ssize_t n;
			int avail = 0;
			if (C.sp.copy)
				n = recv(sfd, C.rx + have, C.sp.left, MSG_DONTWAIT);
			else
				n = splice(sfd, NULL, C.stage[1], NULL, C.sp.left,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				C.sp.left -= (size_t)n;
				taken += (size_t)n;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0 || errno != EAGAIN)
				return -1; /* closed or failed mid-frame: lost() drops the part */
			if (C.sp.copy || ioctl(sfd, FIONREAD, &avail) < 0 || avail <= 0)
				return 1; /* mid-frame, the socket dry: lws must not read; wait */
			/* The socket has more but the staging pipe is full: its slots hold
			 * segments, not pages, and a peer that sent small ones fills them
			 * early. The frame goes on in memory (C.rx is free: no message is
			 * being put together while a frame is taken here). */
			for (size_t got = 0; got < have;) {
				ssize_t r = read(C.stage[0], C.rx + got, have - got);
				if (r <= 0)
					return -1;
				got += (size_t)r;
			}
			C.sp.copy = true;
		}
		if (C.sp.copy)
			out_write(C.sp.fd, C.rx, C.sp.len);
		else
			stage_flush(C.sp.fd, C.sp.len);
		C.sp.copy = false;
		uint64_t seq = C.sp.seq;
		C.sp.seq = 0;
		frame_done(seq, C.sp.len);
	}
	return taken ? 1 : 0;
}

static void connect_now(lws_sorted_usec_list_t *sul);

static void lost(void)
{
	C.wsi = NULL;
	answer_came();	/* its request went with the connection: 125 here, or asked again */
	if (C.sp.seq) { /* a frame cut mid-splice: none of it went out; it comes again */
		C.sp.seq = 0;
		C.sp.copy = false;
		stage_drop();
	}
	while (C.q_head) {
		struct msg *m = C.q_head;
		C.q_head = m->next;
		free(m);
	}
	C.q_tail = NULL;
	if (C.done)
		return;
	if (C.mode != M_EXEC || !C.cmd || C.token_refused) {
		/* 111 is "cannot connect": a connection lost after the request went out may
		 * have left it done in part (a write's first pieces): a relay failure, 125 */
		log_error("Connection to the server failed%s%s%s",
			  C.established ? " before the answer" : "", C.conn_err[0] ? ": " : "",
			  C.conn_err);
		if (C.established)
			write_cut("was not answered");
		finish(C.mode == M_EXEC || C.established ? 125 : 111);
		return;
	}
	if (!C.lost_at)
		C.lost_at = time(NULL);
	if (time(NULL) - C.lost_at > RECONNECT_FOR_S) {
		log_error("Server unreachable for %d s; giving up on command %u%s%s",
			  RECONNECT_FOR_S, C.cmd, C.conn_err[0] ? ": " : "", C.conn_err);
		finish(125);
		return;
	}
	C.acked = C.last_seq; /* the new connection starts from what we hold */
	{
		unsigned ms = 100u << (C.attempt < 5 ? C.attempt : 5);
		C.attempt++;
		lws_sul_schedule(C.ctx, 0, &C.sul, connect_now,
				 (lws_usec_t)(ms + (unsigned)random() % ms) * 1000);
	}
}

static void read_stdin(struct lws *wsi)
{
	uint8_t buf[LWS_PRE + PROTO_FRAME_HEADER + STDIN_PIECE];
	ssize_t n;
	uint16_t flags = 0;

	if (!stdin_may_send())
		return stdin_flow();
	n = read(STDIN_FILENO, buf + LWS_PRE + PROTO_FRAME_HEADER, STDIN_PIECE);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		flags = PROTO_FRAME_EOF;
		n = 0;
		lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
		C.stdin_wsi = NULL;
		C.stdin_eof = true;
	}
	if (!C.cmd || !C.wsi)
		return;
	proto_frame_header_put(buf + LWS_PRE, PROTO_STREAM_STDIN, flags, C.cmd, ++C.stdin_seq);
	enqueue(buf + LWS_PRE, PROTO_FRAME_HEADER + (size_t)n, true);
	C.stdin_sent += (uint64_t)n;
	stdin_flow();
}

/* End by sig as it would have ended us, our terminal put back first (--tty left the
 * caller's shell raw, no echo, no line editing, no ^C, before: red team). */
static _Noreturn void end_by(int sig)
{
	sigset_t one;

	restore_tty();
	signal(sig, SIG_DFL);
	sigemptyset(&one);
	sigaddset(&one, sig);
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	raise(sig);
	_exit(128 + sig);
}

#define FWD_WAIT_MS 5000
static void fwd_expired(lws_sorted_usec_list_t *sul)
{
	(void)sul;
	if (C.done)
		return; /* its exit came: we end with its status */
	log_warning("Command %u did not end within %d s of signal %d; leaving it running "
		    "(exec.attach finds it)",
		    C.cmd, FWD_WAIT_MS / 1000, C.fwd_sig);
	end_by(C.fwd_sig);
}

/* SIGINT, SIGTERM, SIGHUP, SIGQUIT (kill, timeout(1), ^C without --tty, a closed terminal)
 * go to the command, as a shell's would reach its child, and we exit with its status once
 * it ended; before, they ended only us and the command ran on in the sandbox. One that has
 * not ended FWD_WAIT_MS later, a second signal, or no command or connection to send it to:
 * we end by the signal at once (the command is left, as before). SIGWINCH: a resize. */
static void on_signal(int fd)
{
	struct signalfd_siginfo si;

	if (read(fd, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo != SIGWINCH) {
		/* The terminal stays raw while the command may still write to it and read
		 * keys; end_by and our end put it back. */
		if (C.fwd_sig || !C.cmd || !C.wsi || C.done)
			end_by((int)si.ssi_signo);
		C.fwd_sig = (int)si.ssi_signo;
		signal_cmd(C.fwd_sig, C.sig_id, sizeof(C.sig_id));
		lws_sul_schedule(C.ctx, 0, &C.fwd_sul, fwd_expired,
				 (lws_usec_t)FWD_WAIT_MS * LWS_US_PER_MS);
		return;
	}
	on_winch();
}

/* Our terminal's size changed: the command's follows. */
static void on_winch(void)
{
	struct winsize ws = {0};
	cJSON *o;

	if (!C.cmd)
		return;
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row)
		return;
	o = request("exec.resize", NULL, 0);
	cJSON_AddNumberToObject(o, "cmd", C.cmd);
	cJSON_AddNumberToObject(o, "rows", winsize_clamp(ws.ws_row));
	cJSON_AddNumberToObject(o, "cols", winsize_clamp(ws.ws_col));
	send_obj(o);
}

/* The client token opens every sandbox, and server-min may share a network namespace with
 * agents (pistisd, server-min and pistis on one machine): while server-min is away (a
 * restart, through which `pistis exec` redials for 120 s) an agent could bind its port and
 * be handed the token. So, as pistisd serve does for its relay (docs/protocol.md,
 * "Transport"), the socket at the other end is looked up by its four-tuple before the
 * token is written: one of this namespace that is an agent's or pi-tools' (and not the
 * caller's own uid) is refused, and so is one whose owner cannot be told, or a peer at a
 * local address where the lookups do not work. A peer elsewhere is the network's to vouch
 * for (wss://). Why, in C.conn_err. */
static bool server_owner_barred(uid_t uid)
{
	return uid != getuid() && (users_uid_is_agent(uid) || uid == USERS_TOOLS_UID);
}

static bool server_peer_believed(struct lws *wsi)
{
	enum sock_verdict v;
	uid_t uid;
	int err;

	v = sock_tcp_peer_verdict(lws_get_socket_fd(wsi), server_owner_barred, &uid, &err);
	switch (v) {
	case SOCK_REFUSED_NOT_TCP:
		snprintf(C.conn_err, sizeof(C.conn_err),
			 "cannot tell who listens at %s:%d (%s); not sending the token", C.url.host,
			 C.url.port, strerror(-err));
		return false;
	case SOCK_REFUSED_OWNER:
		snprintf(C.conn_err, sizeof(C.conn_err),
			 "refusing %s:%d: the socket there belongs to uid %u (%s), not to "
			 "server-min; not sending the token (its port is taken while server-min "
			 "is away: stop that process)",
			 C.url.host, C.url.port, (unsigned)uid,
			 uid == USERS_TOOLS_UID ? USERS_TOOLS_USER : "an agent");
		return false;
	case SOCK_REFUSED_UNTOLD:
		snprintf(C.conn_err, sizeof(C.conn_err),
			 "refusing %s:%d: the socket there is not accepted and no one listens "
			 "there any more; not sending the token",
			 C.url.host, C.url.port);
		return false;
	case SOCK_REFUSED_BLIND:
		snprintf(C.conn_err, sizeof(C.conn_err),
			 "refusing %s:%d: an address of this network namespace, and who owns the "
			 "socket there cannot be told (socket diagnostics: %s); not sending the "
			 "token (use wss://)",
			 C.url.host, C.url.port, strerror(-err));
		return false;
	case SOCK_BELIEVED_LOCAL:
	case SOCK_BELIEVED_ELSEWHERE:
	default:
		break;
	}
	return true;
}

/* A connection whose peer vanished without a FIN (a machine gone, a NAT entry dropped, a
 * relay stopped) delivers nothing, ever: the kernel's own keepalive is off and its
 * retransmissions give up after ~15 min, and only when there is something to send. lws's
 * validity timer sends a WebSocket ping once none of ours has been answered for
 * secs_since_valid_ping and closes the connection at secs_since_valid_hangup (only a pong
 * counts: lws_validity_confirmed); its default, 300/310 s, is set here from the answer
 * timeout, as a pong is an answer too: ping after min(T, 20) s, drop after min(2T, 30) s,
 * 20/30 s where T is 0. A command then re-attaches on a new connection (lost()), where
 * it sat through a silence of hours on the dead one before. */
static lws_retry_bo_t keepalive;

static void keepalive_set(void)
{
	uint64_t t = C.answer_s;

	keepalive.secs_since_valid_ping = (uint16_t)(t && t < 20 ? t : 20);
	keepalive.secs_since_valid_hangup = (uint16_t)(t && t < 15 ? 2 * t : 30);
}

static int cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		unsigned char **p = in, *end = (*p) + len;
		char v[640];
		int n;

		if (!server_peer_believed(wsi)) {
			C.refused = true;
			return -1;
		}
		n = snprintf(v, sizeof(v), "Bearer %s", C.token);
		return lws_add_http_header_by_name(wsi, (const unsigned char *)"authorization:",
						   (const unsigned char *)v, n, p, end)
			       ? -1
			       : 0;
	}
	case LWS_CALLBACK_CLIENT_ESTABLISHED: { /* small messages (answers, acks, a command's first frame) must not wait for
		   * Nagle + delayed ACK (~40 ms per round trip on loopback) */
		int one = 1;
		(void)setsockopt(lws_get_socket_fd(wsi), IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof(one));
	}
		C.wsi = wsi;
		C.established = true;
		(void)clock_gettime(CLOCK_MONOTONIC, &C.pong_at);
		C.conn_err[0] = 0; /* a failed dial's reason is not this connection's */
		/* splice output into a pipe: plain ws:// only (TLS bytes need decrypting) */
		if (C.mode == M_EXEC && !C.url.tls && C.stage[0] >= 0 &&
		    (C.out_pipe[PROTO_STREAM_STDOUT] || C.out_pipe[PROTO_STREAM_STDERR]))
			lws_ws_client_rx_direct(wsi, 1);
		if (C.mode == M_WRITE) /* a redial starts over: the first piece truncates */
			C.foff = 0;
		send_start();
		break;
	case LWS_CALLBACK_CLIENT_RECEIVE_DIRECT:
		return wsi == C.wsi ? direct_rx(wsi) : 0;
	case LWS_CALLBACK_CLIENT_RECEIVE: {
		bool bin = lws_frame_is_binary(wsi);
		size_t max = bin ? PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD : PROTO_MAX_MESSAGE;
		const uint8_t *msg = in;
		if (lws_is_first_fragment(wsi))
			C.rx_len = 0;
		if (C.rx_len + len > max) {
			/* for the one line lost() prints, if it gives up */
			snprintf(C.conn_err, sizeof(C.conn_err),
				 "the server sent a %s message over %zu bytes (the protocol's "
				 "limit), so the connection was closed",
				 bin ? "binary" : "text", max);
			return -1;
		}
		if (C.rx_len || !lws_is_final_fragment(wsi)) {
			/* a message in pieces is put together in C.rx; one in one piece is
			 * read where lws has it */
			memcpy(C.rx + C.rx_len, in, len);
			C.rx_len += len;
			if (!lws_is_final_fragment(wsi))
				break;
			msg = C.rx;
			len = C.rx_len;
		}
		C.rx_len = 0;
		if (bin)
			on_binary(msg, len);
		else
			on_text((const char *)msg, len);
		if (C.redial) {
			C.redial = false;
			return -1; /* closes; CLIENT_CLOSED redials with backoff */
		}
		break;
	}
	case LWS_CALLBACK_CLIENT_WRITEABLE: {
		struct msg *m = C.q_head;
		if (m) {
			int n = lws_write(wsi, m->buf + LWS_PRE, m->len,
					  m->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT);
			C.q_head = m->next;
			if (!C.q_head)
				C.q_tail = NULL;
			free(m);
			if (n < 0)
				return -1;
		}
		if (C.q_head)
			lws_callback_on_writable(wsi);
		else if (C.done)
			finish(C.exit_code);
		break;
	}
	case LWS_CALLBACK_CLIENT_HTTP_REDIRECT:
		/* Never followed: the token would go to wherever the answer points;
		 * server-min does not redirect. in: the Location, len: the status. The reason
		 * is kept for CLIENT_CONNECTION_ERROR, which lws calls next. */
		snprintf(C.conn_err, sizeof(C.conn_err),
			 "refusing the server's redirect (HTTP %u) to %.256s; not following it "
			 "(the token goes only to the server given)",
			 (unsigned)len, in ? (const char *)in : "");
		C.redirect_refused = true;
		return -1;
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		/* server-min answers an upgrade with a wrong client token 401 (lws: "HS: ws
		 * upgrade unauthorized"): said as what it is, with where the token came from
		 * (never the token), and final: the same token would be refused again. */
		if (wsi && lws_http_client_http_response(wsi) == HTTP_STATUS_UNAUTHORIZED) {
			snprintf(C.conn_err, sizeof(C.conn_err),
				 "the server refused the client token from %s%s (HTTP 401): it is "
				 "not server-min's client_token",
				 C.token_file ? "--token-file " : "$PISTIS_TOKEN",
				 C.token_file ? C.token_file : "");
			C.token_refused = true;
			lost();
			break;
		}
		/* lws says why (a refused connection, a certificate that does not verify): kept
		 * for the one line lost() prints, escaped there by the log */
		if (!C.redirect_refused)
			snprintf(C.conn_err, sizeof(C.conn_err), "%.*s",
				 in ? (int)strnlen(in, len ? len : sizeof(C.conn_err)) : 0,
				 in ? (const char *)in : "");
		C.redirect_refused = false;
		lost();
		break;
	case LWS_CALLBACK_CLIENT_RECEIVE_PONG:
		(void)clock_gettime(CLOCK_MONOTONIC, &C.pong_at);
		break;
	case LWS_CALLBACK_CLIENT_CLOSED:
		if (wsi == C.wsi) {
			struct timespec now = {0};

			/* closed by the keepalive: why, for the line lost() may print */
			(void)clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - C.pong_at.tv_sec >= keepalive.secs_since_valid_hangup)
				snprintf(C.conn_err, sizeof(C.conn_err),
					 "no answer to our pings for %u s: the server or the "
					 "network to it is gone",
					 (unsigned)keepalive.secs_since_valid_hangup);
			lost();
		}
		break;
	case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
		/* Closed before the upgrade: a refused peer (server_peer_believed) ends here,
		 * not in CLIENT_CONNECTION_ERROR; its reason is in C.conn_err. */
		if (C.refused) {
			C.refused = false;
			if (C.mode == M_EXEC && C.cmd && !C.refusal_told) {
				C.refusal_told = true; /* once: it redials every few seconds */
				log_warning("%s; redialling for up to %d s", C.conn_err,
					    RECONNECT_FOR_S);
			}
			lost();
		}
		break;
	case LWS_CALLBACK_RAW_RX_FILE:
		if (wsi == C.stdin_wsi)
			read_stdin(wsi);
		else if (wsi == C.sig_wsi)
			on_signal(lws_get_socket_fd(wsi));
		break;
	case LWS_CALLBACK_RAW_CLOSE_FILE:
		if (wsi == C.stdin_wsi) {
			C.stdin_wsi = NULL;
			C.stdin_eof = true;
			if (C.cmd && C.wsi) {
				uint8_t h[PROTO_FRAME_HEADER];
				proto_frame_header_put(h, PROTO_STREAM_STDIN, PROTO_FRAME_EOF,
						       C.cmd, ++C.stdin_seq);
				enqueue(h, sizeof(h), true);
			}
		}
		break;
	default:
		break;
	}
	return 0;
}

/* rx_buffer_size: a whole output frame reaches the callback in one piece (no copy);
 * tx_packet_size: a stdin frame goes to the socket in one send, not 64 KiB at a time. */
static const struct lws_protocols protocols[] = {
	{PROTO_CLIENT_SUBPROTOCOL, cb, 0, PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD, 0, NULL,
	 PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

static void connect_now(lws_sorted_usec_list_t *sul)
{
	struct lws_client_connect_info cc = {0};
	cc.retry_and_idle_policy = &keepalive;
	cc.context = C.ctx;
	cc.address = C.url.host;
	cc.port = C.url.port;
	cc.path = C.url.path;
	cc.host = C.url.host;
	cc.origin = C.url.host;
	cc.protocol = PROTO_CLIENT_SUBPROTOCOL;
	cc.ssl_connection = C.url.tls ? LCCSCF_USE_SSL : 0;
	if (!lws_client_connect_via_info(&cc))
		lost();
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pistis [--url URL] [--token-file FILE] [--ca FILE] [--json] COMMAND …\n\n"
		"  ls                                   list sandboxes\n"
		"  status [--sandbox S]                 pistisd's status\n"
		"  exec [--sandbox S] --agent A [--tty] [-i] [--timeout SEC] [--cwd DIR]\n"
		"       [--tag T] -- CMD…\n"
		"                                       run CMD, stream its output, exit with\n"
		"                                       its code (-i: CMD reads our stdin;\n"
		"                                       --tty: that, on a pseudo-terminal)\n"
		"  read  [--sandbox S] --agent A PATH   print a file (read as the agent)\n"
		"  write [--sandbox S] --agent A PATH   write stdin to a file (as the agent)\n"
		"  edit  [--sandbox S] --agent A PATH --old TEXT --new TEXT\n"
		"  call  [--sandbox S] [--agent A] OP ['{JSON fields}']\n"
		"                                       send one request (policy.plan,\n"
		"                                       trusted.list…), print every message\n"
		"                                       for it, one a line\n\n"
		"Short options: -t --tty, -i --interactive, -j --json, -h --help (this text);\n"
		"--version prints the version.\n\n"
		"Server: --url or $PISTIS_URL (default ws://127.0.0.1:7701/v1/ws); token:\n"
		"--token-file or $PISTIS_TOKEN; wss:// trusts --ca FILE or $PISTIS_CA, else the\n"
		"system's bundle; --sandbox defaults to $PISTIS_SANDBOX. Exit codes: the\n"
		"command's own, 128+N for a signal, 1 an error answer, 125 relay or protocol\n"
		"failure (also a connection lost before the answer), 100 usage, 111 cannot\n"
		"connect. A reader of our output that goes away (| head) stops the\n"
		"command: SIGPIPE, SIGKILL 2 s later; exit 141 (137). An output that fails\n"
		"otherwise (a full disk) is said and dropped; we exit 1 where we would exit 0.\n"
		"--answer-timeout SEC (default 300, 0: for ever; policy walks through call get\n"
		"their timeout_s more): a request not answered by then ends with 125; a\n"
		"command's output and end are no answers and have no deadline. A connection\n"
		"silent to our pings for min(2 x SEC, 30) s (0: 30 s) is dropped; exec redials.\n"
		"SIGINT, SIGTERM, SIGHUP and SIGQUIT to exec go to the command and we exit with\n"
		"its status; not ended 5 s later or a second signal: we end by it, leaving it.\n"
		"Output into a pipe is spliced from the socket over ws:// ($PISTIS_NO_SPLICE=1\n"
		"turns that off).\n"
		"See docs/api.md.\n");
}

/* The token goes into an HTTP header: a CR or LF would add header lines. */
static bool token_printable(const char *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (t[i] <= ' ' || t[i] > '~')
			return false;
	return true;
}

/* The client token reaches every sandbox: a file others can read, or that someone else
 * owns (and may rewrite, or swap for a FIFO that never answers), or a symlink, is refused
 * (lib/token-file.c, checked on the opened fd). */
static int read_token_file(const char *path)
{
	const struct token_file_rule rule = {
		.also_owner = getuid(),
		.forbidden = 077,
		.file_rule = "a regular file of yours (or root's) that group and others cannot "
			     "access: chmod 600",
	};
	size_t len = 0;

	return token_file_load(path, &rule, C.token, sizeof(C.token), &len);
}

/* The size a CA bundle may have (a distribution's is ~200 KiB). */
#define CA_FILE_MAX (16u << 20)

/* The bundle wss:// trusts decides who may read the token and every command's output: a
 * regular file that is the caller's or root's and that nobody else may write, lest another
 * user add a CA of their own. trust_file_open (lib/trust-path.c): every directory on the
 * way yours or root's and not writable by others unless sticky or on a read-only mount, a
 * link followed only when yours or root's, every directory of its target judged too
 * (bundles often are a link); the file opened beneath the last directory believed, judged
 * on that fd and read from it: lws gets the bytes, not the name, so the bundle checked is
 * the bundle used. */
static int load_ca_file(const char *path, char **ret, size_t *ret_len)
{
	const struct trust_rule rule = {
		.also_owner = getuid(),
		.flags = TRUST_STICKY | TRUST_RDONLY_MOUNT,
	};
	char why[PATH_MAX + 300];
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	fd = trust_file_open(path, &rule, "the CA bundle", why, sizeof(why));
	if (fd == -EPERM || fd == -ELOOP)
		return log_error_errno(fd, "Refusing --ca '%s': %s", path, why);
	if (fd < 0)
		return log_error_errno(fd, "Cannot use --ca '%s': %s", path, why);
	if (fstat(fd, &st) < 0)
		return log_error_errno(-errno, "Cannot use --ca '%s': %s", path, strerror(errno));
	r = fd_read_all_hint(fd, CA_FILE_MAX, (size_t)st.st_size, ret, ret_len);
	if (r < 0)
		return log_error_errno(r, "Cannot read --ca '%s': %s", path,
				       r == -EFBIG ? "larger than 16 MiB" : strerror(-r));
	if (*ret_len == 0) {
		free(*ret);
		*ret = NULL;
		return log_error_errno(-EINVAL, "Cannot use --ca '%s': it is empty", path);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"url", required_argument, NULL, 'u'},
		{"ca", required_argument, NULL, 'A'},
		{"token-file", required_argument, NULL, 'T'},
		{"json", no_argument, NULL, 'j'},
		{"sandbox", required_argument, NULL, 's'},
		{"agent", required_argument, NULL, 'a'},
		{"tty", no_argument, NULL, 't'},
		{"interactive", no_argument, NULL, 'i'},
		{"timeout", required_argument, NULL, 'm'},
		{"answer-timeout", required_argument, NULL, 'W'},
		{"cwd", required_argument, NULL, 'c'},
		{"tag", required_argument, NULL, 'g'},
		{"old", required_argument, NULL, 'o'},
		{"new", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	struct lws_context_creation_info info;
	_cleanup_free_ char *ca_mem = NULL;
	size_t ca_len = 0;
	const char *url = getenv("PISTIS_URL"), *token_file = NULL, *cmd;
	int c;

	/* `pistis write PATH <&-`: no stdin is not an empty one (it emptied the file, exit 0) */
	const bool stdin_closed = fcntl(STDIN_FILENO, F_GETFD) < 0 && errno == EBADF;

	log_set_program("pistis");
	/* A closed stdin, stdout or stderr (`pistis exec … >&-`) is /dev/null here, as for
	 * the command: the first fd we open (libwebsockets' event pipe, the socket) took its
	 * number before, and the command's output went into it, or the socket was read as
	 * our stdin. */
	if (fd_ensure_std() < 0)
		return 111;
	/* It holds the client token: no core dump of it, and no ptrace or /proc/PID/mem of
	 * it by other processes of the caller's (ssh-agent's rule). */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	C.sandbox = getenv("PISTIS_SANDBOX");
	/* options may come before or after the command word */
	opterr = 0; /* getopt would print a bad option raw: log_bad_option escapes it */
	while ((c = getopt_long(argc, argv, "+hjti", opts, NULL)) >= 0 || optind < argc) {
		if (c < 0) {
			if (C.argv)
				break;
			if (C.file) {
				if (*C.file) {
					log_error("one PATH only");
					return 100;
				}
				C.file = argv[optind++];
				continue;
			}
			/* call's operands, like PATH, may come before or after the options */
			if (C.call_op) {
				if (!*C.call_op)
					C.call_op = argv[optind++];
				else if (!C.call_fields)
					C.call_fields = argv[optind++];
				else {
					log_error("call takes an OP and one JSON object of fields");
					return 100;
				}
				continue;
			}
			cmd = argv[optind++];
			if (!strcmp(cmd, "ls"))
				C.mode = M_LS;
			else if (!strcmp(cmd, "status"))
				C.mode = M_STATUS;
			else if (!strcmp(cmd, "call")) {
				C.mode = M_CALL;
				C.call_op = "";
			} else if (!strcmp(cmd, "exec"))
				C.mode = M_EXEC, C.argv = (char **)"";
			else if (!strcmp(cmd, "read") || !strcmp(cmd, "write") ||
				 !strcmp(cmd, "edit")) {
				C.mode = cmd[0] == 'r' ? M_READ : cmd[0] == 'w' ? M_WRITE : M_EDIT;
				C.file = "";
			} else {
				log_error("unknown command '%s'", cmd);
				return 100;
			}
			continue;
		}
		switch (c) {
		case 'u':
			url = optarg;
			break;
		case 'T':
			token_file = optarg;
			break;
		case 'A':
			C.ca = optarg;
			break;
		case 'j':
			C.json = true;
			break;
		case 's':
			C.sandbox = optarg;
			break;
		case 'a':
			C.agent = optarg;
			break;
		case 't':
			C.tty = true;
			break;
		case 'i':
			C.stdin_pipe = true;
			break;
		case 'm':
			/* whole seconds, at most the protocol's 30 days */
			if (parse_uint_strict(optarg, UINT64_C(30) * 24 * 3600, NULL,
					      &C.timeout_ms) < 0 ||
			    !C.timeout_ms) {
				log_error("--timeout wants whole seconds, 1 to 2592000 (30 days), "
					  "got '%s'",
					  optarg);
				return 100;
			}
			C.timeout_ms *= 1000;
			break;
		case 'W':
			if (parse_uint_strict(optarg, ANSWER_TIMEOUT_MAX_S, NULL, &C.answer_s) <
			    0) {
				log_error("--answer-timeout wants whole seconds, 0 (wait for ever) "
					  "to 2592000 (30 days), got '%s'",
					  optarg);
				return 100;
			}
			break;
		case 'c':
			C.cwd = optarg;
			break;
		case 'g':
			C.tag = optarg;
			break;
		case 'o':
			C.old_text = optarg;
			break;
		case 'n':
			C.new_text = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("pistis %s\n", PISTIS_VERSION);
			return 0;
		default:
			log_bad_option(argv, optind, optopt, "pistis --help");
			return 100;
		}
	}
	if (!C.argv && !C.file && C.mode == M_LS && optind > argc) {
		usage(stderr);
		return 100;
	}
	if (C.mode == M_CALL && !*C.call_op) {
		log_error("call needs an OP");
		return 100;
	}
	if (C.mode == M_EXEC) {
		if (optind >= argc || !C.agent) {
			log_error("exec needs --agent and a command after --");
			return 100;
		}
		C.argv = argv + optind;
	} else if (C.file) {
		if (!*C.file || optind != argc || !C.agent ||
		    (C.mode == M_EDIT && (!C.old_text || !C.new_text))) {
			usage(stderr);
			return 100;
		}
	}
	if (ws_url_parse(url ? url : "ws://127.0.0.1:7701/v1/ws", "/v1/ws", &C.url) < 0) {
		log_error("--url must be ws://HOST[:PORT][/PATH] or wss://…");
		return 100;
	}
	if (token_file) {
		if (read_token_file(token_file) < 0)
			return 111;
		C.token_file = token_file;
	} else if (getenv("PISTIS_TOKEN") && *getenv("PISTIS_TOKEN")) {
		const char *t = getenv("PISTIS_TOKEN");
		if (strlen(t) >= sizeof(C.token) || !token_printable(t, strlen(t))) {
			log_error("$PISTIS_TOKEN must be at most %zu printable characters without "
				  "spaces",
				  sizeof(C.token) - 1);
			return 100;
		}
		memcpy(C.token, t, strlen(t));
	} else {
		log_error("no token: --token-file FILE or $PISTIS_TOKEN");
		return 100;
	}
	if (C.mode == M_WRITE) {
		_cleanup_free_ char *t = NULL;
		int r;

		if (stdin_closed)
			return log_error("write: stdin is closed; nothing written (an empty file: "
					 "</dev/null)"),
			       100;
		/* all of stdin before the first byte goes out: one that fails is no file */
		r = fd_read_all(STDIN_FILENO, PROTO_MAX_FILE / 2, &t, &C.wlen);
		if (r == -EFBIG)
			return log_error("stdin is over %u bytes", PROTO_MAX_FILE / 2), 100;
		if (r < 0)
			return log_error_errno(r, "Failed to read stdin: %m; nothing written"), 1;
		C.wbuf = (uint8_t *)TAKE_PTR(t);
	}
	C.rx = malloc(PROTO_MAX_MESSAGE + 1);
	if (!C.rx)
		return 111;
	signal(SIGPIPE, SIG_IGN);
	/* Output into a pipe: a 1 MiB pipe takes a whole frame or four per write instead of
	 * a 64 KiB one blocking us (and waking the reader) 4 times a frame. Best effort: the
	 * size is the unprivileged maximum, and a pipe we cannot grow stays as it is. */
	if (C.mode == M_EXEC || C.mode == M_READ)
		(void)fcntl(STDOUT_FILENO, F_SETPIPE_SZ, 1024 * 1024);
	/* With --json the exit event follows the command's output on stdout: its line is
	 * known to end (note_line) only where the output went through us, not spliced. */
	for (int s = PROTO_STREAM_STDOUT; s <= PROTO_STREAM_STDERR; s++) {
		struct stat st;
		C.out_pipe[s] =
			!C.json && fstat(stream_fd((unsigned)s), &st) == 0 && S_ISFIFO(st.st_mode);
	}
	C.out_is_err = fd_same_file(STDOUT_FILENO, STDERR_FILENO);
	/* The staging pipe of the splice path (direct_rx): room for a whole frame, or no
	 * splicing at all. */
	if (C.mode == M_EXEC &&
	    (C.out_pipe[PROTO_STREAM_STDOUT] || C.out_pipe[PROTO_STREAM_STDERR]) &&
	    !getenv("PISTIS_NO_SPLICE") && pipe2(C.stage, O_CLOEXEC | O_NONBLOCK) == 0 &&
	    fcntl(C.stage[1], F_SETPIPE_SZ, (int)PROTO_MAX_FRAME_PAYLOAD) <
		    (int)PROTO_MAX_FRAME_PAYLOAD) {
		close(C.stage[0]);
		close(C.stage[1]);
		C.stage[0] = C.stage[1] = -1;
	}
	keepalive_set();
	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
	log_lws_setup();
	/* libwebsockets takes http_proxy from the environment and knows no no_proxy: a server
	 * exempted there (127.0.0.1 in most) went through the proxy, which saw the token */
	if (proxy_env_settle(C.url.host) == 2 && !C.url.tls)
		log_warning("Dialling ws://%s:%d through the proxy http_proxy names: the proxy "
			    "sees the client token and every message (use wss://, or name the "
			    "server's host in no_proxy)",
			    C.url.host, C.url.port);
	memset(&info, 0, sizeof(info));
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = protocols;
	info.gid = (gid_t)-1;
	info.uid = (uid_t)-1;
	info.options = C.url.tls ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0;
	if (C.url.tls) {
		/* mbedtls has no default trust store: --ca, else the system's bundle file */
		if (!C.ca && getenv("PISTIS_CA") && *getenv("PISTIS_CA"))
			C.ca = getenv("PISTIS_CA");
		if (C.ca) {
			if (load_ca_file(C.ca, &ca_mem, &ca_len) < 0)
				return 111;
			info.client_ssl_ca_mem = ca_mem;
			info.client_ssl_ca_mem_len = (unsigned)ca_len;
		} else
			info.client_ssl_ca_filepath = tls_default_ca_file();
		if (!C.ca && !info.client_ssl_ca_filepath) {
			log_error("wss:// needs the system's CA bundle "
				  "(/etc/ssl/certs/ca-certificates.crt, ...) or --ca FILE; none "
				  "found");
			return 111;
		}
	}
	/* lws reads the socket in pieces of this size (default 4 KiB) */
	info.pt_serv_buf_size = 256 * 1024;
	/* lws sizes (and initialises) its fd tables from RLIMIT_NOFILE, 2 x 160 KB and about
	 * 0.5 ms of every start with a limit of 20000; the client has a socket, stdin and a
	 * signalfd. */
	info.fd_limit_per_thread = 64;
	C.ctx = lws_create_context(&info);
	if (!C.ctx)
		return 111;
	if (C.mode == M_EXEC) {
		sigset_t mask;
		int sfd;

		sigemptyset(&mask);
		if (C.tty && isatty(STDIN_FILENO)) {
			struct termios t;
			if (tcgetattr(STDIN_FILENO, &C.saved_tio) == 0) {
				t = C.saved_tio;
				cfmakeraw(&t);
				/* TCSANOW: keep typed-ahead input */
				if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
					C.raw = true;
			}
			sigaddset(&mask, SIGWINCH);
		}
		/* Ours to forward (on_signal) unless ignored when we started (nohup, a shell's
		 * background job): those stay ignored. */
		for (const int *g = (const int[]){SIGTERM, SIGINT, SIGHUP, SIGQUIT, 0}; *g; g++) {
			struct sigaction old;
			if (sigaction(*g, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
				sigaddset(&mask, *g);
		}
		sigprocmask(SIG_BLOCK, &mask, NULL);
		sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
		if (sfd >= 0) {
			lws_sock_file_fd_type fd = {.filefd = sfd};
			C.sig_fd = sfd;
			C.sig_wsi = lws_adopt_descriptor_vhost(
				lws_get_vhost_by_name(C.ctx, "default"), LWS_ADOPT_RAW_FILE_DESC,
				fd, PROTO_CLIENT_SUBPROTOCOL, NULL);
		}
		/* nobody would read them: the ending signals end us as before */
		if (!C.sig_wsi) {
			C.sig_fd = -1;
			sigprocmask(SIG_UNBLOCK, &mask, NULL);
		}
	}
	connect_now(NULL);
	while (!C.done || C.q_head)
		if (lws_service(C.ctx, 0) < 0 || (C.done && !C.wsi))
			break;
	restore_tty();
	lws_context_destroy(C.ctx);
	log_lws_flush();
	/* ls's lines, the last of stdio's (stdout_flush, without the finish: the loop is
	 * over) */
	errno = 0;
	if ((fflush(stdout) != 0 || ferror(stdout)) && errno != EPIPE &&
	    !C.out_failed[STDOUT_FILENO]) {
		C.out_failed[STDOUT_FILENO] = true;
		/* errno is the reason only when this flush failed, not an earlier one */
		if (errno)
			log_error_errno(-errno, "Failed to write to stdout: %m");
		else
			log_error("Failed to write to stdout");
	}
	if ((C.out_failed[STDOUT_FILENO] || C.out_failed[STDERR_FILENO]) && C.exit_code == 0)
		C.exit_code = 1;
	/* The command ended by the signal we passed on: so do we, so that a calling shell
	 * script stops at ^C as it does for a local command (exit(130) it would go on from) */
	if (C.fwd_sig && C.exit_code == 128 + C.fwd_sig)
		end_by(C.fwd_sig);
	return C.exit_code;
}
