#pragma once

/* The test seam of fuzz-serve: pistisd serve's real request handlers (serve.c, session.c,
 * fsops.c) are compiled with their I/O boundaries redirected to the fuzz target's stubs —
 * the socket (lws_write and friends), the timers, user creation (users_ensure would edit
 * /etc/passwd), process creation (spawn_*) and fork (file-operation helpers). Everything
 * between a received message and those calls is the production code. */

#include <libwebsockets.h>

#include "pistisd/spawn.h"
#include "sandbox-users/users.h"

int fz_on_writable(struct lws *wsi);
int fz_lws_write(struct lws *wsi, unsigned char *buf, size_t len, enum lws_write_protocol wp);
/* our lws patch 0005; the fuzz build links the system libwebsockets, which lacks it */
int fz_lws_write_ws_masked_from(struct lws *wsi, unsigned char *buf, const unsigned char *src,
				size_t len, enum lws_write_protocol wp);
void fz_sul_schedule(struct lws_context *ctx, int tsi, lws_sorted_usec_list_t *sul, sul_cb_t cb,
		     lws_usec_t us);
void fz_sul_cancel(lws_sorted_usec_list_t *sul);
int fz_users_ensure(const char *root, const char *agent_id, uid_t want_uid,
		    struct users_identity *ret);
int fz_users_ensure_base(const char *root);
int fz_spawn_ctx_new_why(struct spawn_ctx **ret, const char **why);
void fz_spawn_ctx_free(struct spawn_ctx *ctx);
int fz_spawn_ctx_cgroup_base_fd(const struct spawn_ctx *ctx);
unsigned fz_spawn_ctx_cgroup_features(const struct spawn_ctx *ctx);
unsigned fz_spawn_ctx_cgroup_delegated(const struct spawn_ctx *ctx);
int fz_spawn_ctx_cgroup_make_room(struct spawn_ctx *ctx);
int fz_spawn_ctx_proc_fd(const struct spawn_ctx *ctx);
bool fz_spawn_agent_has_processes(const struct spawn_ctx *ctx, uid_t uid);
int fz_spawn_kill_uid(uid_t uid);
int fz_spawn_kill_orphaned_sessions(const struct spawn_ctx *ctx, uid_t *uids, size_t n);
int fz_spawn_kill_agent_processes(const struct spawn_ctx *ctx, uid_t *uids, size_t n);
size_t fz_spawn_ctx_reap_dying(struct spawn_ctx *ctx, unsigned wait_ms);
size_t fz_spawn_ctx_take_stuck(struct spawn_ctx *ctx);
unsigned fz_spawn_ctx_dying_due_ms(const struct spawn_ctx *ctx);
int fz_spawn_stop(struct spawn_proc *p);
int fz_spawn_kill_leftovers(struct spawn_proc *p);
bool fz_spawn_tree_alive(struct spawn_proc *p);
bool fz_spawn_ctx_can_scope(const struct spawn_ctx *ctx, int *ret_why);
void fz_spawn_ctx_disable_scope(struct spawn_ctx *ctx, int error);
int fz_scope_probe_child(void);
int fz_spawn_start_async(struct spawn_ctx *ctx, const struct spawn_opts *opts,
			 struct spawn_proc **ret, struct spawn_error *err);
int fz_spawn_exec_poll(struct spawn_proc *p, int wait_ms, struct spawn_error *err);
ssize_t fz_spawn_read(struct spawn_proc *p, int fd, void *buf, size_t size);
int fz_spawn_reap(struct spawn_proc *p);
int fz_spawn_signal(struct spawn_proc *p, int sig);
int fz_spawn_resize(struct spawn_proc *p, unsigned short cols, unsigned short rows);
int fz_spawn_next_timeout_ms(const struct spawn_proc *p);
void fz_spawn_tick(struct spawn_proc *p);
bool fz_spawn_done(const struct spawn_proc *p);
const struct spawn_result *fz_spawn_result(const struct spawn_proc *p);
void fz_spawn_free(struct spawn_proc *p);
void fz_spawn_release(struct spawn_proc *p);
pid_t fz_fork(void);
int fz_policy_apply_share(int root_fd, int *ret_fd);
int fz_send_pipe_choked(struct lws *wsi);

#define lws_callback_on_writable fz_on_writable
#define lws_write fz_lws_write
#define lws_write_ws_masked_from fz_lws_write_ws_masked_from
#define lws_sul_schedule fz_sul_schedule
#define lws_sul_cancel fz_sul_cancel
#define users_ensure fz_users_ensure
#define users_ensure_base fz_users_ensure_base
#define spawn_ctx_new_why fz_spawn_ctx_new_why
#define spawn_ctx_free fz_spawn_ctx_free
#define spawn_ctx_cgroup_base_fd fz_spawn_ctx_cgroup_base_fd
#define spawn_ctx_cgroup_features fz_spawn_ctx_cgroup_features
#define spawn_ctx_cgroup_delegated fz_spawn_ctx_cgroup_delegated
#define spawn_ctx_cgroup_make_room fz_spawn_ctx_cgroup_make_room
#define spawn_ctx_proc_fd fz_spawn_ctx_proc_fd
#define spawn_agent_has_processes fz_spawn_agent_has_processes
#define spawn_kill_orphaned_sessions fz_spawn_kill_orphaned_sessions
#define spawn_kill_agent_processes fz_spawn_kill_agent_processes
#define spawn_ctx_reap_dying fz_spawn_ctx_reap_dying
#define spawn_ctx_take_stuck fz_spawn_ctx_take_stuck
#define spawn_ctx_dying_due_ms fz_spawn_ctx_dying_due_ms
#define spawn_stop fz_spawn_stop
#define spawn_kill_leftovers fz_spawn_kill_leftovers
#define spawn_tree_alive fz_spawn_tree_alive
#define spawn_kill_uid fz_spawn_kill_uid
#define spawn_ctx_can_scope fz_spawn_ctx_can_scope
#define spawn_ctx_disable_scope fz_spawn_ctx_disable_scope
#define scope_probe_child fz_scope_probe_child
#define spawn_start_async fz_spawn_start_async
#define spawn_exec_poll fz_spawn_exec_poll
#define spawn_read fz_spawn_read
#define spawn_reap fz_spawn_reap
#define spawn_signal fz_spawn_signal
#define spawn_resize fz_spawn_resize
#define spawn_next_timeout_ms fz_spawn_next_timeout_ms
#define spawn_tick fz_spawn_tick
#define spawn_done fz_spawn_done
#define spawn_result(p) fz_spawn_result(p) /* function-like: struct spawn_result stays */
#define spawn_free fz_spawn_free
#define spawn_release fz_spawn_release
#define fork fz_fork
#define policy_apply_share fz_policy_apply_share
#define lws_send_pipe_choked fz_send_pipe_choked
