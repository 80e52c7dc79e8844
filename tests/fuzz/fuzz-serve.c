/* pistisd serve's request dispatcher (pistisd/serve.c → session.c, fsops.c: the real code)
 * fed arbitrary messages from the relay, with the I/O boundaries stubbed (serve-seam.h).
 * Input: records of [kind][len hi][len lo][payload]; odd kind = binary frame, even = text.
 * Invariants:
 *  - everything pistisd writes parses: JSON with the protocol's limits, frames;
 *  - a request that parses (other than exec.ack) is answered exactly once, under its id;
 *    an exec.ack at most once (only errors are answered);
 *  - what reaches the spawn core is sane: an agent uid, gid = uid, argv[0] set, argv
 *    within the limits, a cwd relative to the root fd, every envp entry NAME=value. */
#include "tests/fuzz/serve-seam.h"
#include "pistisd/serve.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
	char want_id[PROTO_MAX_ID + 1];
	unsigned answers; /* messages carrying want_id */
	unsigned texts;
} F;

int fz_on_writable(struct lws *wsi)
{
	return 0;
}

int fz_send_pipe_choked(struct lws *wsi)
{
	return 0;
}

int fz_lws_write_ws_masked_from(struct lws *wsi, unsigned char *buf, const unsigned char *src,
				size_t len, enum lws_write_protocol wp)
{
	memcpy(buf, src, len);
	return fz_lws_write(wsi, buf, len, wp);
}

int fz_lws_write(struct lws *wsi, unsigned char *buf, size_t len, enum lws_write_protocol wp)
{
	struct proto_error err = {0};

	if (wp == LWS_WRITE_BINARY) {
		struct proto_frame f;
		if (proto_frame_parse(buf, len, &f, &err) < 0 || f.stream == PROTO_STREAM_STDIN)
			__builtin_trap();
	} else {
		cJSON *root = NULL, *id;
		if (proto_parse((const char *)buf, len, &root, &err) < 0)
			__builtin_trap(); /* pistisd wrote something its own parser refuses */
		id = cJSON_GetObjectItemCaseSensitive(root, "id");
		if (F.want_id[0] && cJSON_IsString(id) && !strcmp(id->valuestring, F.want_id))
			F.answers++;
		F.texts++;
		cJSON_Delete(root);
	}
	return (int)len;
}

void fz_sul_schedule(struct lws_context *ctx, int tsi, lws_sorted_usec_list_t *sul, sul_cb_t cb,
		     lws_usec_t us)
{
}

void fz_sul_cancel(lws_sorted_usec_list_t *sul)
{
}

int fz_users_ensure(const char *root, const char *agent_id, uid_t want_uid,
		    struct users_identity *ret)
{
	size_t n = strlen(agent_id);
	unsigned h = 0;

	/* the stub refuses what the real one refuses for sure; it never touches /etc */
	if (!n || n > USERS_AGENT_ID_MAX || strpbrk(agent_id, "/\n:"))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		h = h * 31 + (unsigned char)agent_id[i];
	*ret = (struct users_identity){.uid = USERS_AGENT_UID_MIN + h % 1000};
	ret->gid = ret->uid;
	snprintf(ret->agent_id, sizeof(ret->agent_id), "%s", agent_id);
	snprintf(ret->name, sizeof(ret->name), "pi-agent-%08x", h);
	snprintf(ret->home, sizeof(ret->home), "/data/sandbox-home/%s", ret->name);
	snprintf(ret->tmpdir, sizeof(ret->tmpdir), "/data/sandbox-home/%s/tmp", ret->name);
	return 0;
}

int fz_users_ensure_base(const char *root)
{
	return 0;
}

/* session_init asks through this one (the failed step for its message): without it in the
 * seam, every input made a real spawn core and the stand-in's free leaked its four fds
 * (fuzz-smoke: EMFILE after ~5000 inputs). */
int fz_spawn_ctx_new_why(struct spawn_ctx **ret, const char **why)
{
	if (why)
		*why = "the stand-in";
	*ret = (struct spawn_ctx *)calloc(1, 64);
	return *ret ? 0 : -ENOMEM;
}

void fz_spawn_ctx_free(struct spawn_ctx *ctx)
{
	free(ctx);
}

/* The stand-in context has no cgroup: session_init's orphan reaping finds nothing. */
int fz_spawn_ctx_cgroup_base_fd(const struct spawn_ctx *ctx)
{
	(void)ctx;
	return -1;
}

/* Nor controllers: a limit asked for would be refused (serve's options are not fuzzed),
 * and no process is moved anywhere. */
unsigned fz_spawn_ctx_cgroup_features(const struct spawn_ctx *ctx)
{
	(void)ctx;
	return 0;
}

unsigned fz_spawn_ctx_cgroup_delegated(const struct spawn_ctx *ctx)
{
	(void)ctx;
	return 0;
}

int fz_spawn_ctx_cgroup_make_room(struct spawn_ctx *ctx)
{
	(void)ctx;
	return -ENODEV;
}

/* No /proc: no SysV IPC objects are looked for or removed (pistisd/ipc.h). */
int fz_spawn_ctx_proc_fd(const struct spawn_ctx *ctx)
{
	(void)ctx;
	return -1;
}

bool fz_spawn_agent_has_processes(const struct spawn_ctx *ctx, uid_t uid)
{
	(void)ctx, (void)uid;
	return true;
}

/* No process to kill, and no fork (privs_run_as_agent's) under the fuzzer. */
int fz_spawn_kill_uid(uid_t uid)
{
	(void)uid;
	return 0;
}

/* Nor a dead daemon's command sessions (the stand-in context has no audit sessions). */
int fz_spawn_kill_orphaned_sessions(const struct spawn_ctx *ctx, uid_t *uids, size_t n)
{
	(void)ctx, (void)uids, (void)n;
	return 0;
}

/* Every function of the spawn core that takes the context is a stand-in: the real ones read
 * its fields, past the 64 bytes of this one (CI's fuzz smoke: spawn_ctx_reap_dying, called
 * when a command is freed, read n_dying out of a neighbouring heap block). */
int fz_spawn_kill_agent_processes(const struct spawn_ctx *ctx, uid_t *uids, size_t n)
{
	(void)ctx, (void)uids, (void)n;
	return 0;
}

/* No cgroup, so no command cgroup is ever left dying. */
size_t fz_spawn_ctx_reap_dying(struct spawn_ctx *ctx, unsigned wait_ms)
{
	(void)ctx, (void)wait_ms;
	return 0;
}

size_t fz_spawn_ctx_take_stuck(struct spawn_ctx *ctx)
{
	(void)ctx;
	return 0;
}

unsigned fz_spawn_ctx_dying_due_ms(const struct spawn_ctx *ctx)
{
	(void)ctx;
	return 0;
}

/* ... and says commands are scoped (no start-up warning per input). */
bool fz_spawn_ctx_can_scope(const struct spawn_ctx *ctx, int *ret_why)
{
	(void)ctx;
	if (ret_why)
		*ret_why = 0;
	return true;
}

void fz_spawn_ctx_disable_scope(struct spawn_ctx *ctx, int error)
{
	(void)ctx;
	(void)error;
}

/* No probe child per input (session_init runs for every one). */
int fz_scope_probe_child(void)
{
	return 0;
}

/* No apply runs in the fuzzer's root: the start goes on, with no lock to hand the child. */
int fz_policy_apply_share(int root_fd, int *ret_fd)
{
	(void)root_fd;
	*ret_fd = -1;
	return 0;
}

int fz_spawn_start_async(struct spawn_ctx *ctx, const struct spawn_opts *o, struct spawn_proc **ret,
			 struct spawn_error *err)
{
	struct spawn_proc *p;
	size_t n = 0;

	if (!users_uid_is_agent(o->uid) || o->gid != o->uid || !o->argv || !o->argv[0] || !o->cwd ||
	    o->cwd[0] == '/' || o->cwd_root_fd < 0)
		__builtin_trap();
	while (o->argv[n])
		n++;
	if (n > PROTO_MAX_ARGV + 3)
		__builtin_trap();
	for (char *const *e = o->envp; e && *e; e++)
		if (!strchr(*e, '=') || **e == '=')
			__builtin_trap();
	if (o->argv[0][0] == 'F') { /* let some starts fail like a missing program */
		*err = (struct spawn_error){.step = SPAWN_STEP_EXEC, .error = ENOENT};
		return -ENOENT;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = 4242;
	p->pidfd = p->fd_in = p->fd_out = p->fd_err = p->exec_fd = p->cgroup_fd = -1;
	/* 'T': a child that never reaches execve (an agent stopped it), decided by the first
	 * poll as the deadline would; everything else has exec'd */
	if (o->argv[0][0] == 'T')
		p->exec_err =
			(struct spawn_error){.step = SPAWN_STEP_EXEC_TIMEOUT, .error = ETIMEDOUT};
	*ret = p;
	return 0;
}

int fz_spawn_exec_poll(struct spawn_proc *p, int wait_ms, struct spawn_error *err)
{
	*err = p->exec_err;
	return p->exec_err.step ? -p->exec_err.error : 1;
}

ssize_t fz_spawn_read(struct spawn_proc *p, int fd, void *buf, size_t size)
{
	return -EAGAIN;
}
int fz_spawn_reap(struct spawn_proc *p)
{
	return 0;
}
int fz_spawn_signal(struct spawn_proc *p, int sig)
{
	return sig == 9 ? -EPERM : 0;
}
/* Nor any real signal: the real stop and leftover kill signal the stand-in's process group
 * (pid 4242), which on the machine running the fuzzer may be anyone's. */
int fz_spawn_stop(struct spawn_proc *p)
{
	return p->reaped ? -ESRCH : 0;
}
int fz_spawn_kill_leftovers(struct spawn_proc *p)
{
	(void)p;
	return 0;
}
bool fz_spawn_tree_alive(struct spawn_proc *p)
{
	(void)p;
	return false;
}
int fz_spawn_resize(struct spawn_proc *p, unsigned short cols, unsigned short rows)
{
	return rows > 1000 ? -ENOTTY : 0;
}
int fz_spawn_next_timeout_ms(const struct spawn_proc *p)
{
	return -1;
}
void fz_spawn_tick(struct spawn_proc *p)
{
}
bool fz_spawn_done(const struct spawn_proc *p)
{
	return false;
}
const struct spawn_result *fz_spawn_result(const struct spawn_proc *p)
{
	return &p->result;
}
void fz_spawn_free(struct spawn_proc *p)
{
	free(p);
}
void fz_spawn_release(struct spawn_proc *p)
{
	(void)p;
}
pid_t fz_fork(void)
{
	errno = EAGAIN; /* file operations are answered as a failed fork */
	return -1;
}

static void drain(void)
{
	for (int guard = 0; guard < 100000 && (S.out_head || session_has_pending()); guard++)
		if (on_writable(S.conn) < 0)
			break;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool init;
	struct proto_error err = {0};

	if (!init) {
		log_set_level(LOG_LVL_ERROR);
		if (session_init() < 0)
			abort();
		init = true;
	}
	S.conn = (struct lws *)&S; /* never dereferenced: lws is behind the seam */
	S.established = true;
	while (size >= 3) {
		bool binary = data[0] & 1;
		size_t len = (size_t)data[1] << 8 | data[2];
		struct proto_request req;
		cJSON *root = NULL;
		bool expect_one = false, at_most_one = false;

		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		F.want_id[0] = 0;
		F.answers = 0;
		if (!binary && proto_parse((const char *)data, len, &root, &err) == 0 &&
		    cJSON_GetObjectItemCaseSensitive(root, "op") &&
		    proto_request_parse(root, PROTO_MAX_ID, &req, &err) == 0) {
			snprintf(F.want_id, sizeof(F.want_id), "%s", req.id);
			at_most_one = req.op == PROTO_OP_EXEC_ACK;
			expect_one = !at_most_one;
		}
		cJSON_Delete(root);
		if (binary)
			handle_binary(data, len);
		else
			handle_text((const char *)data, len);
		drain();
		if ((expect_one && F.answers != 1) || (at_most_one && F.answers > 1))
			__builtin_trap(); /* a request went unanswered, or was answered twice */
		data += len;
		size -= len;
	}
	/* a fresh connection for the next input: the real teardown path */
	connection_lost("fuzz input done");
	session_done();
	if (session_init() < 0)
		abort();
	return 0;
}
