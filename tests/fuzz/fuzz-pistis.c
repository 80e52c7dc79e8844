/* libFuzzer: what the pistis client does with the server's messages (pistis/main.c, the
 * real code, compiled into this target): on_text and on_binary in every mode, fed any
 * sequence of text and binary messages. A sandbox's events and output reach the client
 * through the relay, so their bytes are the sandbox's. The seam is the socket and the
 * event loop: the lws calls the handlers make are redirected to stubs before main.c is
 * compiled; output goes to /dev/null (stdout), errors to the log (stderr).
 *
 * Input: one byte of setup (mode: bits 0-2 % 7; bit 3 --json; bit 4 a command already
 * started), then records of [kind][len hi][len lo][payload]; odd kind = binary, even = text.
 * Invariants:
 *  - everything the client queues to send is one message its own parser takes, with an
 *    id and an op, and an exec.ack names the command and a sequence it has written out;
 *  - output frames are taken strictly in sequence: last_seq only grows, one at a time;
 *  - an exit code is a shell's: 0..255;
 *  - no leak (the queue is freed between inputs). */
#include <fcntl.h>
#include <libwebsockets.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* our lws patch 0006; the fuzz build links the system libwebsockets, which lacks it */
#define LWS_CALLBACK_CLIENT_RECEIVE_DIRECT 120
static void fz_rx_direct(struct lws *wsi, int on)
{
}
static int fz_on_writable(struct lws *wsi)
{
	return 0;
}
static void fz_rx_flow(struct lws *wsi, int enable)
{
}
static void fz_cancel(struct lws_context *ctx)
{
}
/* the answer deadline's timer (there is no context): armed and cancelled, never fired */
static void fz_sul_schedule(struct lws_context *ctx, int tsi, lws_sorted_usec_list_t *sul,
			    sul_cb_t cb, lws_usec_t us)
{
}
static void fz_sul_cancel(lws_sorted_usec_list_t *sul)
{
}
#define lws_ws_client_rx_direct fz_rx_direct
#define lws_callback_on_writable fz_on_writable
#define lws_rx_flow_control fz_rx_flow
#define lws_cancel_service fz_cancel
#define lws_sul_schedule fz_sul_schedule
#define lws_sul_cancel fz_sul_cancel
#define main pistis_main
int pistis_main(int argc, char **argv);
/* the case of that callback is not one of the system header's enum */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wswitch"
#include "pistis/main.c"
#pragma clang diagnostic pop
#undef main

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The client's log and a command's stderr frames go to fd 2, some 5 MB a second of it:
 * libFuzzer is told to close our stderr (its own reports and the sanitizers' go to a copy),
 * unless the command line says otherwise. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static char *args[64];
	int n = 0;

	for (int i = 0; i < *argc; i++)
		if (!strncmp((*argv)[i], "-close_fd_mask=", 15))
			return 0;
	if (*argc + 2 > (int)(sizeof(args) / sizeof(args[0])))
		return 0;
	for (; n < *argc; n++)
		args[n] = (*argv)[n];
	args[n++] = (char *)"-close_fd_mask=2";
	args[n] = NULL;
	*argc = n;
	*argv = args;
	return 0;
}

static void setup(void)
{
	static bool done;
	int fd;

	if (done)
		return;
	done = true;
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0)
		abort();
	close(fd);
	log_set_level(LOG_LVL_ERROR);
}

static void queue_free(void)
{
	while (C.q_head) {
		struct msg *m = C.q_head;
		C.q_head = m->next;
		free(m);
	}
	C.q_tail = NULL;
}

/* Every message queued since the last look is a request the client's own parser takes. */
static void queue_check(void)
{
	for (struct msg *m = C.q_head; m; m = m->next) {
		struct proto_error err = {0};
		cJSON *root = NULL, *op;

		if (m->binary)
			continue;
		if (proto_parse((const char *)m->buf + LWS_PRE, m->len, &root, &err) < 0 ||
		    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "id")) ||
		    !cJSON_IsString(op = cJSON_GetObjectItemCaseSensitive(root, "op")))
			abort();
		if (!strcmp(op->valuestring, "exec.ack")) {
			cJSON *cmd = cJSON_GetObjectItemCaseSensitive(root, "cmd");
			cJSON *seq = cJSON_GetObjectItemCaseSensitive(root, "seq");
			if (!cJSON_IsNumber(cmd) || cmd->valuedouble != C.cmd ||
			    !cJSON_IsNumber(seq) || seq->valuedouble > (double)C.last_seq)
				abort();
		}
		cJSON_Delete(root);
	}
	queue_free();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t wbuf[] = "some bytes to write";
	static char *cmd_argv[] = {(char *)"true", NULL};

	setup();
	if (size < 1)
		return 0;
	C = (typeof(C)){.exit_code = 1, .stage = {-1, -1}, .sig_fd = -1, .answer_s = 1};
	C.mode = (enum mode)((data[0] & 7) % 7);
	C.json = data[0] & 8;
	C.wsi = (struct lws *)&C; /* connected: requests are queued and "sent" */
	C.sandbox = "s1";
	C.agent = "a1";
	C.file = "f";
	C.old_text = "a";
	C.new_text = "b";
	C.call_op = "sandboxes.list";
	C.argv = cmd_argv;
	C.wbuf = wbuf;
	C.wlen = sizeof(wbuf) - 1;
	if (data[0] & 16)
		C.cmd = 7;
	data++;
	size--;

	while (size >= 3 && !C.done) {
		uint8_t kind = data[0];
		size_t len = (size_t)data[1] << 8 | data[2];
		uint64_t before = C.last_seq;

		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		if (kind & 1) {
			on_binary(data, len);
		} else {
			/* the relay hands on_text a message as lws does: a copy, not terminated */
			char *copy = malloc(len ? len : 1);
			if (!copy)
				abort();
			memcpy(copy, data, len);
			on_text(copy, len);
			free(copy);
		}
		if (C.last_seq < before || C.last_seq > before + 1)
			abort();
		queue_check();
		data += len;
		size -= len;
	}
	if (C.exit_code < 0 || C.exit_code > 255)
		abort();
	queue_free();
	return 0;
}
