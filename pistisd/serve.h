#pragma once

/* pistisd serve: internal interfaces between the connection (serve.c), the commands
 * (session.c) and the file operations (fsops.c). One event loop, no threads. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include <stdarg.h>

#include "lib/proto.h"

struct lws_context;

/* The outbound side of the one relay connection. */
/* Queue a JSON text (taken over; NULL means ENOMEM and is dropped with a log line). */
void serve_send_json(char *json);
void serve_send_error(const char *id, enum proto_err code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Ask for a writable callback: a command has frames to send. */
void serve_want_write(void);
/* May one more "audit refused" line be written now (at most 20 a second; the rest are
 * counted and said once the second is over)? */
bool serve_audit_refused_allowed(void);
/* A request refused: its error answer, the message formatted from fmt into msg (size bytes)
 * for the caller's audit line. Returns whether that line may be written now
 * (serve_audit_refused_allowed). */
bool serve_refusev(const char *id, enum proto_err code, char *msg, size_t size, const char *fmt,
		   va_list ap) __attribute__((format(printf, 5, 0)));
bool serve_connected(void);
struct lws_context *serve_lws_context(void);

/* The fd watcher shared by commands and file operations: fds live in one epoll set that
 * libwebsockets polls as a single foreign fd. */
struct watch {
	void (*fn)(struct watch *w, uint32_t events);
	int fd;
	bool armed;
	void *owner;
};
int serve_watch(struct watch *w, int fd, uint32_t events, void (*fn)(struct watch *, uint32_t));
void serve_unwatch(struct watch *w);

/* The agent a request names, resolved (users_ensure where linked). */
struct serve_agent {
	char name[64];
	uid_t uid;
	gid_t gid;
	char home[256];
	char tmpdir[256];
};
int serve_resolve_agent(const char *agent, struct serve_agent *ret);
/* Why the last serve_resolve_agent (or users.ensure) failed, in one line: sandbox-users'
 * own words (which file or directory, what is wrong with it) and strerror. */
const char *serve_resolve_error(void);

/* session.c: commands */
int session_init(void);
/* policy_apply_share on serve's root: what every start of an agent's process (a command, a
 * file operation's helper) holds until that process has the agent's uid. -EWOULDBLOCK: an
 * apply holds /data/pistis; *ret_fd -1 where there is no such directory to lock. */
int session_apply_share(int *ret_fd);
void session_done(void);
void session_request(const struct proto_request *req);
/* A binary frame from the server (stdin). */
void session_frame(const struct proto_frame *f);
/* Send one pending frame or exit event; true when something was written (or failed). */
bool session_write_one(void *wsi);
bool session_has_pending(void);
void session_disconnected(void);
cJSON *session_status(const char *agent);
/* Unacknowledged output of all commands together: over it, commands stop being read until
 * acknowledgements bring it under half (pistisd serve --max-buffered). */
#define SESSION_MAX_BUFFERED_DEFAULT (64ull * 1024 * 1024)
void session_set_max_buffered(uint64_t bytes);
/* pistisd serve --share-abstract-sockets: spawn_opts.share_abstract_sockets for every
 * command. */
void session_set_share_abstract_sockets(bool share);
/* pistisd serve --pids-max: every command's RLIMIT_NPROC (an agent's processes and threads,
 * all its commands together) and its agent cgroup's pids.max; 0 leaves spawn's defaults. */
void session_set_pids_max(uint64_t n);
/* pistisd serve --memory-max (bytes) and --cpu-weight (1..10000): memory.max (swap 0) and
 * cpu.weight of each agent's cgroup, all its commands together; 0: none. session_init
 * refuses (-EOPNOTSUPP, said) where the controller is missing. */
void session_set_agent_limits(uint64_t memory_max, unsigned cpu_weight);
uint64_t session_buffered(void);
/* For policy.apply's before_tighten: stop every running command (spawn_stop: SIGTERM to
 * the tree, grace, SIGKILL) and return how many; how many have not ended yet; refuse
 * exec.start (unavailable) while held. */
unsigned session_stop_all(void);
unsigned session_running(void);
/* Once none runs: SIGKILL whatever still runs as an agent of the registry's, tracked or
 * not (spawn_kill_agent_processes); how many, 0 when none is left, -errno when the
 * registry or /proc cannot be read. */
int session_kill_agent_processes(void);
void session_hold_starts(bool hold);
/* pistisd serve's stop signal: refuse exec.start from now on (unavailable), and
 * session_stop_all; how many were told to stop. */
unsigned session_begin_stop(void);

/* Wipe secrets (the relay token) from this process's memory: for forked helpers. */
void serve_forget_secrets(void);

/* fsops.c: file operations as the agent. For before_tighten: refuse new ones (unavailable)
 * while held; kill the running ones (reaped on return), and say how many. */
void fsops_request(const struct proto_request *req);
void fsops_hold(bool hold);
unsigned fsops_stop_all(void);
/* Whether a file operation runs as this agent's uid now (its helper is that uid). */
bool fsops_running_for(uid_t uid);
/* fsops.c tells session.c that the agent of uid has no file operation running any more. */
void session_fsops_ended(uid_t uid);

/* ops-admin.c: policy.* and trusted.* in a forked root helper, one at a time */
void admin_request(const struct proto_request *req);
bool admin_busy(void);
