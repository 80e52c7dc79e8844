/* pistisd serve: policy.* and trusted.* (docs/protocol.md "Administration"). Each request
 * runs in a forked helper that stays root (these operations change owners, modes, ACLs and
 * sudoers) but forgets the relay token first. A policy walk can take minutes, so the event
 * loop never waits for it: the helper writes newline-terminated records to a pipe —
 * "E<json>" an event to forward, "A<json>" the one answer — and the parent forwards them as
 * they come. Before the first change of an apply that takes access away from anyone, the
 * walk calls before_tighten: the helper asks the parent over a socketpair ('T'), the parent
 * stops every running command through the session layer and holds new exec.start until the
 * helper is gone, and answers '0' once they have all ended ('F' after ADMIN_STOP_WAIT_US:
 * the apply aborts, nothing was tightened). One administrative operation at a time. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/proto.h"
#include "pistisd/serve.h"
#include "pistisd/spawn.h"
#include "policy/policy.h"
#include "sandbox-users/users.h"
#include "trusted/trusted.h"

#define ADMIN_TIMEOUT_DEFAULT_S 600u
#define ADMIN_TIMEOUT_MAX_S 3600u
#define ADMIN_GRACE_US (30LL * LWS_US_PER_SEC) /* past the walk's own timeout */
#define ADMIN_STOP_WAIT_US (15LL * LWS_US_PER_SEC)
#define ADMIN_RECORD_MAX (256u * 1024u) /* one record from the helper */
#define ADMIN_EVENTS_MAX 10000u		/* policy.event records per request */

struct admin {
	struct watch w, cw;
	pid_t pid;
	char id[PROTO_MAX_ID + 1];
	char *buf;
	size_t len;
	bool answered, failed;
	lws_sorted_usec_list_t timeout, stop_poll;
	lws_usec_t stop_deadline;
};

static struct admin *cur;

/* --- in the helper (root) ------------------------------------------------------------- */

struct hctx {
	int out, ctl;
	const char *id;
	unsigned events;
	uint64_t dropped;
};

static void emit(struct hctx *h, char kind, cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);
	size_t n;

	cJSON_Delete(o);
	if (!s)
		return;
	n = strlen(s);
	if (n + 2 <= ADMIN_RECORD_MAX) {
		char k[1] = {kind};
		(void)loop_write(h->out, k, 1);
		(void)loop_write(h->out, s, n);
		(void)loop_write(h->out, "\n", 1);
	}
	free(s);
}

/* p C-escaped (a name need not be UTF-8). A path too long for buf (an agent's tree may be
 * POLICY_DEPTH_MAX levels deep) is cut before a whole escape and ends "[cut: N bytes], N its
 * length: a bare '"', which no byte of the path can produce (its own come out \"), so a cut
 * path can neither pass for a whole, shallower one nor be forged (escape_c_field's mark). */
static void add_path(cJSON *o, const char *key, const char *p, size_t len)
{
	char buf[POLICY_PATH_MAX * 4 + 48];
	size_t room = sizeof(buf) - 48;

	if (escape_c(p, len, buf, room) >= room) {
		size_t l = strlen(buf);

		snprintf(buf + l, sizeof(buf) - l, "\"[cut: %zu bytes]", len);
	}
	cJSON_AddStringToObject(o, key, buf);
}

static const char *event_kind_name(enum policy_event_kind k)
{
	static const char *const names[] = {
		[POLICY_EV_CHANGE] = "change",
		[POLICY_EV_MISSING] = "missing",
		[POLICY_EV_SYMLINK] = "symlink",
		[POLICY_EV_HARDLINK] = "hardlink",
		[POLICY_EV_DEVICE] = "device",
		[POLICY_EV_OTHER_FS] = "other_fs",
		[POLICY_EV_TOO_DEEP] = "too_deep",
		[POLICY_EV_VANISHED] = "vanished",
		[POLICY_EV_ERROR] = "error",
		[POLICY_EV_NOT_DONE] = "not_done",
		[POLICY_EV_AGENTS_IN_TRUSTED] = "agents_in_trusted",
		[POLICY_EV_FOREIGN_SYMLINK] = "foreign_symlink",
		[POLICY_EV_PRIVATE] = "private",
	};
	return (unsigned)k < ELEMENTSOF(names) && names[k] ? names[k] : "unknown";
}

static cJSON *changes_array(unsigned ch)
{
	static const char *const names[] = {"owner",   "mode", "acl_access", "acl_default",
					    "acl_set", "mark", "unmark"};
	cJSON *a = cJSON_CreateArray();
	for (unsigned i = 0; i < ELEMENTSOF(names); i++)
		if (ch & (1u << i))
			cJSON_AddItemToArray(a, cJSON_CreateString(names[i]));
	return a;
}

static void on_event(void *userdata, const struct policy_event *ev)
{
	struct hctx *h = userdata;
	cJSON *o;

	if (h->events >= ADMIN_EVENTS_MAX) {
		h->dropped++;
		return;
	}
	h->events++;
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "event", "policy.event");
	cJSON_AddStringToObject(o, "id", h->id);
	cJSON_AddStringToObject(o, "kind", event_kind_name(ev->kind));
	add_path(o, "path", ev->path, ev->path_len);
	if (ev->rule)
		add_path(o, "rule", ev->rule->path, ev->rule->len);
	if (ev->error)
		cJSON_AddStringToObject(o, "error", strerror(-ev->error));
	if (ev->kind == POLICY_EV_TOO_DEEP)
		cJSON_AddNumberToObject(o, "depth_max", ev->depth_max);
	if (ev->kind == POLICY_EV_CHANGE || ev->kind == POLICY_EV_HARDLINK ||
	    ev->kind == POLICY_EV_TOO_DEEP || ev->kind == POLICY_EV_PRIVATE) {
		cJSON_AddItemToObject(o, "changes", changes_array(ev->changes));
		cJSON_AddBoolToObject(o, "violation", ev->violation);
		cJSON_AddNumberToObject(o, "old_uid", ev->old_uid);
		cJSON_AddNumberToObject(o, "new_uid", ev->new_uid);
		cJSON_AddNumberToObject(o, "old_gid", ev->old_gid);
		cJSON_AddNumberToObject(o, "new_gid", ev->new_gid);
		cJSON_AddNumberToObject(o, "old_mode", ev->old_mode & 07777);
		cJSON_AddNumberToObject(o, "new_mode", ev->new_mode & 07777);
	}
	emit(h, 'E', o);
}

static cJSON *stats_json(const struct policy_stats *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "entries", (double)st->entries);
	cJSON_AddNumberToObject(o, "dirs", (double)st->dirs);
	cJSON_AddNumberToObject(o, "changed", (double)st->changed);
	cJSON_AddNumberToObject(o, "violations", (double)st->violations);
	cJSON_AddNumberToObject(o, "symlinks", (double)st->symlinks);
	cJSON_AddNumberToObject(o, "skipped", (double)st->skipped);
	cJSON_AddNumberToObject(o, "errors", (double)st->errors);
	return o;
}

static void on_progress(void *userdata, const struct policy_stats *st)
{
	struct hctx *h = userdata;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "event", "policy.progress");
	cJSON_AddStringToObject(o, "id", h->id);
	cJSON_AddItemToObject(o, "stats", stats_json(st));
	emit(h, 'E', o);
}

static int before_tighten(void *userdata)
{
	struct hctx *h = userdata;
	char c = 'T';

	if (loop_write(h->ctl, &c, 1) < 0)
		return -EIO;
	if (read(h->ctl, &c, 1) != 1)
		return -EIO;
	return c == '0' ? 0 : -EBUSY;
}

/* An error answer; err may carry a rules file's line. */
static void answer_error(struct hctx *h, enum proto_err code, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void answer_error(struct hctx *h, enum proto_err code, unsigned line, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddStringToObject(o, "id", h->id);
	cJSON_AddBoolToObject(o, "ok", false);
	cJSON_AddStringToObject(e, "code", proto_err_name(code));
	cJSON_AddStringToObject(e, "message", msg);
	if (line)
		cJSON_AddNumberToObject(e, "line", line);
	cJSON_AddItemToObject(o, "error", e);
	emit(h, 'A', o);
}

static void answer_ok(struct hctx *h, cJSON *o)
{
	char *s = proto_ok_build(h->id, o);
	if (s) {
		cJSON *p = cJSON_Parse(s);
		free(s);
		if (p)
			emit(h, 'A', p);
	}
}

/* The rules: the request's "rules" (a rules file's text, or the array itself), else
 * POLICY_RULES_PATH (root-owned, not group/other-writable), else the built-in defaults. */
static int load_rules(struct hctx *h, int root_fd, cJSON *req, struct policy_rules **ret,
		      char **ret_text, size_t *ret_len)
{
	struct policy_error err = {0};
	cJSON *j = cJSON_GetObjectItemCaseSensitive(req, "rules");
	_cleanup_free_ char *text = NULL;
	int r;

	if (j && !cJSON_IsNull(j)) {
		if (cJSON_IsString(j))
			text = strdup(j->valuestring);
		else if (cJSON_IsArray(j))
			text = cJSON_Print(j);
		else
			return answer_error(h, PROTO_E_BAD_REQUEST, 0,
					    "\"rules\" must be a string or an array"),
			       -EINVAL;
		if (!text)
			return answer_error(h, PROTO_E_INTERNAL, 0, "out of memory"), -ENOMEM;
		r = policy_rules_parse(text, strlen(text), ret, &err);
	} else {
		r = policy_rules_load(root_fd, POLICY_RULES_PATH, true, true, ret, NULL, NULL,
				      &err);
		if (r == -ENOENT)
			r = policy_rules_parse(policy_defaults_json, policy_defaults_json_len(),
					       ret, &err);
	}
	if (r < 0) {
		if (err.msg[0])
			answer_error(h, PROTO_E_BAD_REQUEST, err.line, "invalid rules: %s",
				     err.msg);
		else
			answer_error(h, proto_err_from_errno(r), 0, "cannot read rules: %s",
				     strerror(-r));
		return r;
	}
	r = policy_rules_check_fs(root_fd, *ret, &err);
	if (r < 0) {
		answer_error(h, PROTO_E_BAD_REQUEST, err.line, "invalid rules: %s", err.msg);
		policy_rules_free(*ret);
		*ret = NULL;
		return r;
	}
	if (ret_text) {
		*ret_len = text ? strlen(text) : 0;
		*ret_text = TAKE_PTR(text);
	}
	return 0;
}

static void do_walk(struct hctx *h, int root_fd, enum proto_op op, cJSON *req)
{
	_cleanup_(policy_rules_freep) struct policy_rules *rules = NULL;
	_cleanup_free_ char *text = NULL;
	struct policy_walk_opts o = {
		.mode = op == PROTO_OP_POLICY_PLAN    ? POLICY_PLAN
			: op == PROTO_OP_POLICY_CHECK ? POLICY_CHECK
						      : POLICY_APPLY,
		.timeout_sec = ADMIN_TIMEOUT_DEFAULT_S,
		.on_event = on_event,
		.on_progress = on_progress,
		.before_tighten = before_tighten,
		.userdata = h,
	};
	struct policy_stats st = {0};
	cJSON *t = cJSON_GetObjectItemCaseSensitive(req, "timeout_s"), *a;
	size_t len = 0;
	struct rlimit rl;
	bool saved = false;
	_cleanup_close_ int lock_fd = -1;
	int r;

	if (t) {
		if (!cJSON_IsNumber(t) || t->valuedouble < 1 ||
		    t->valuedouble > ADMIN_TIMEOUT_MAX_S)
			return answer_error(h, PROTO_E_BAD_REQUEST, 0,
					    "\"timeout_s\" must be 1..%u", ADMIN_TIMEOUT_MAX_S);
		o.timeout_sec = (unsigned)t->valuedouble;
	}
	if (load_rules(h, root_fd, req, &rules, &text, &len) < 0)
		return;
	/* One apply at a time in the root: `pistisd policy apply|save` on the command line may
	 * be running (policy_apply_lock); waited for within the timeout. */
	if (op == PROTO_OP_POLICY_APPLY) {
		r = policy_apply_lock(root_fd, o.timeout_sec * 1000u, &lock_fd);
		if (r == -EWOULDBLOCK)
			return answer_error(h, PROTO_E_LIMIT, 0,
					    "another policy apply or save runs in this root (%s "
					    "locked past timeout_s); nothing done",
					    POLICY_STATE_DIR);
		if (r < 0)
			return answer_error(h, proto_err_from_errno(r), 0, "cannot lock %s: %s",
					    POLICY_STATE_DIR, strerror(-r));
	}
	/* apply with new rules saves them first: what is on disk is what was applied */
	if (op == PROTO_OP_POLICY_APPLY && text) {
		r = policy_rules_save(root_fd, text, len);
		if (r < 0)
			return answer_error(h, proto_err_from_errno(r), 0, "cannot save %s: %s",
					    POLICY_RULES_PATH, strerror(-r));
		if (r > 0) /* in place, which every reader now gets: applied below */
			log_warning_errno(-r,
					  "policy.apply: saved %s, but syncing its directory "
					  "failed: %m; applying the new rules",
					  POLICY_RULES_PATH);
		saved = true;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	r = policy_walk(root_fd, rules, &o, &st);
	if (r < 0 && r != -ETIME && st.entries == 0 && r != -EBUSY)
		return answer_error(h, proto_err_from_errno(r), 0, "walk failed: %s", strerror(-r));
	a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "mode", proto_op_name(op) + strlen("policy."));
	/* complete: everything the rules ask for was done. Not when the walk stopped early
	 * ("stopped" says why), nor when it ran to the end with part of the tree not done
	 * (stats.errors: a change that failed, a rule path that is a symlink, a directory
	 * closed at the depth bound; the events name each). */
	cJSON_AddBoolToObject(a, "complete", r >= 0 && !st.errors);
	if (r < 0)
		cJSON_AddStringToObject(a, "stopped",
					r == -ETIME   ? "timeout"
					: r == -EBUSY ? "commands_not_stopped"
						      : strerror(-r));
	if (op == PROTO_OP_POLICY_CHECK)
		cJSON_AddBoolToObject(a, "conforming", r >= 0 && !st.violations && !st.errors);
	if (op == PROTO_OP_POLICY_APPLY)
		cJSON_AddBoolToObject(a, "saved", saved);
	cJSON_AddNumberToObject(a, "rules", (double)rules->n);
	cJSON_AddItemToObject(a, "stats", stats_json(&st));
	cJSON_AddNumberToObject(a, "events", h->events);
	cJSON_AddNumberToObject(a, "events_dropped", (double)h->dropped);
	answer_ok(h, a);
}

static void do_explain(struct hctx *h, int root_fd, cJSON *req)
{
	_cleanup_(policy_rules_freep) struct policy_rules *rules = NULL;
	struct proto_error perr = {0};
	char norm[POLICY_PATH_MAX + 1];
	const char *path = NULL, *agent = NULL;
	struct users_identity ident;
	struct policy_explain *ex;
	uid_t uid = (uid_t)-1;
	gid_t gids[2] = {(gid_t)-1, USERS_SANDBOX_GID};
	cJSON *o, *ag;
	int n, r;

	if (proto_get_string(req, "path", PROTO_MAX_PATH, &path, &perr) < 0 || !path)
		return answer_error(h, PROTO_E_BAD_REQUEST, 0, "\"path\" is required");
	n = policy_path_normalise(path, strlen(path), norm, sizeof(norm));
	if (n < 0)
		return answer_error(h, PROTO_E_BAD_REQUEST, 0,
				    "\"path\" must be absolute, without \"..\"");
	r = proto_get_string(req, "agent", PROTO_MAX_AGENT, &agent, &perr);
	if (r < 0 && r != -ENOENT)
		return answer_error(h, PROTO_E_BAD_REQUEST, 0, "\"agent\" must be a string");
	if (agent && *agent) {
		r = users_lookup("/", agent, &ident);
		if (r < 0)
			return answer_error(h, proto_err_from_errno(r), 0, "agent: %s",
					    strerror(-r));
		uid = ident.uid;
		gids[0] = ident.gid;
	}
	if (load_rules(h, root_fd, req, &rules, NULL, NULL) < 0)
		return;
	ex = calloc(1, sizeof(*ex));
	if (!ex)
		return answer_error(h, PROTO_E_INTERNAL, 0, "out of memory");
	r = policy_explain(root_fd, rules, norm, uid, gids, 2, ex);
	if (r < 0) {
		free(ex);
		return answer_error(h, proto_err_from_errno(r), 0, "explain: %s", strerror(-r));
	}
	o = cJSON_CreateObject();
	add_path(o, "path", norm, (size_t)n);
	if (ex->rule) {
		cJSON *ru = cJSON_AddObjectToObject(o, "rule");
		add_path(ru, "path", ex->rule->path, ex->rule->len);
		cJSON_AddStringToObject(ru, "access", policy_access_name(ex->rule->access));
		if (ex->rule->line)
			cJSON_AddNumberToObject(ru, "line", ex->rule->line);
	} else
		cJSON_AddNullToObject(o, "rule");
	cJSON_AddBoolToObject(o, "exists", ex->exists);
	cJSON_AddBoolToObject(o, "symlink_on_way", ex->symlink_on_way);
	if (ex->symlink_on_way)
		add_path(o, "stop_at", ex->stop_at, strlen(ex->stop_at));
	if (ex->exists) {
		mode_t m = ex->st.st_mode;
		cJSON_AddStringToObject(o, "type",
					S_ISDIR(m)   ? "directory"
					: S_ISREG(m) ? "file"
					: S_ISLNK(m) ? "symlink"
						     : "other");
		cJSON_AddNumberToObject(o, "uid", ex->st.st_uid);
		cJSON_AddNumberToObject(o, "gid", ex->st.st_gid);
		cJSON_AddNumberToObject(o, "mode", m & 07777);
		cJSON_AddBoolToObject(o, "acl", ex->has_acl);
		cJSON_AddBoolToObject(o, "default_acl", ex->has_default_acl);
		if (ex->rule) {
			cJSON *tg = cJSON_AddObjectToObject(o, "target");
			if (ex->target.uid != (uid_t)-1)
				cJSON_AddNumberToObject(tg, "uid", ex->target.uid);
			if (ex->target.gid != (gid_t)-1)
				cJSON_AddNumberToObject(tg, "gid", ex->target.gid);
			cJSON_AddNumberToObject(tg, "mode", ex->target.mode & 07777);
			cJSON_AddBoolToObject(tg, "hardlink_left", ex->target_hardlink_left);
			cJSON_AddBoolToObject(tg, "private_left", ex->target_private_left);
			if (ex->private_at[0])
				add_path(tg, "private_above", ex->private_at,
					 strlen(ex->private_at));
		}
	}
	if (ex->agent) {
		ag = cJSON_AddObjectToObject(o, "agent");
		cJSON_AddStringToObject(ag, "name", agent);
		cJSON_AddNumberToObject(ag, "uid", uid);
		cJSON_AddBoolToObject(ag, "can_traverse", ex->can_traverse);
		cJSON_AddBoolToObject(ag, "can_read", ex->can_read);
		cJSON_AddBoolToObject(ag, "can_write", ex->can_write);
		cJSON_AddBoolToObject(ag, "can_replace", ex->can_replace);
		if (ex->blocked_by[0])
			add_path(ag, "blocked_by", ex->blocked_by, strlen(ex->blocked_by));
	}
	free(ex);
	answer_ok(h, o);
}

static const char *trusted_name(struct hctx *h, cJSON *req)
{
	struct proto_error perr = {0};
	const char *name = NULL;

	if (proto_get_string(req, "name", TRUSTED_NAME_MAX, &name, &perr) < 0 || !name ||
	    !trusted_name_valid(name)) {
		answer_error(h, PROTO_E_BAD_REQUEST, 0,
			     "\"name\" must match [a-z0-9][a-z0-9_-]{0,63}");
		return NULL;
	}
	return name;
}

/* Regenerate and verify the sudoers drop-in; adds "install" to o. 1: a check failed. */
static int install(struct hctx *h, cJSON *o)
{
	struct trusted_install_report rep = {0};
	char why[512];
	cJSON *j;
	int r;

	r = trusted_secrets_ensure("/", why, sizeof(why));
	if (r > 0) {
		/* Nothing installed: the secrets' directory is not one to write secrets to. */
		char msg[600];
		snprintf(msg, sizeof(msg), "refusing /data/.secrets: %s", why);
		j = cJSON_AddObjectToObject(o, "install");
		cJSON_AddBoolToObject(j, "ok", false);
		cJSON_AddStringToObject(j, "message", msg);
		return 1;
	}
	if (r >= 0)
		r = trusted_install("/", NULL, &rep);
	if (r < 0) {
		cJSON_Delete(o);
		answer_error(h, proto_err_from_errno(r), 0, "install: %s", strerror(-r));
		return r;
	}
	j = cJSON_AddObjectToObject(o, "install");
	cJSON_AddBoolToObject(j, "ok", r == 0);
	cJSON_AddNumberToObject(j, "commands", (double)rep.n);
	cJSON_AddBoolToObject(j, "includedir", rep.includedir);
	cJSON_AddBoolToObject(j, "removed", rep.removed);
	cJSON_AddNumberToObject(j, "verified", rep.verified);
	cJSON_AddNumberToObject(j, "mismatched", rep.mismatched);
	cJSON_AddBoolToObject(j, "withdrawn", rep.withdrawn);
	if (rep.message[0])
		cJSON_AddStringToObject(j, "message", rep.message);
	return r;
}

/* trusted.add without "data": the script an operator already put in /data/bin/NAME becomes
 * the trusted command (`pistisd trusted adopt`), as the seed promises ("moved into
 * /data/trusted when you apply"). Answers an error itself (and frees o) when it fails. */
static int adopt(struct hctx *h, const char *name, cJSON *o)
{
	char why[256];
	int r = trusted_adopt_from_bin("/", name);

	if (r >= 0) {
		cJSON_AddBoolToObject(o, "adopted", r == 0);
		return 0;
	}
	cJSON_Delete(o);
	if (!trusted_adopt_strerror(r, name, why, sizeof(why)))
		answer_error(h, proto_err_from_errno(r), 0, "adopt: %s", strerror(-r));
	else
		answer_error(h, r == -ENOEXEC ? PROTO_E_BAD_REQUEST : proto_err_from_errno(r), 0,
			     "%s%s", why, r == -ENOENT ? " (give the script in \"data\")" : "");
	return -1;
}

static void do_trusted(struct hctx *h, enum proto_op op, cJSON *req)
{
	_cleanup_close_ int lock_fd = -1;
	cJSON *o;
	int r;

	if (op == PROTO_OP_TRUSTED_LIST) {
		_cleanup_free_ struct trusted_entry *v = NULL;
		size_t n = 0, skipped = 0;
		cJSON *a;

		r = trusted_list("/", &v, &n, &skipped);
		if (r == -ENOENT)
			n = 0;
		else if (r < 0)
			return answer_error(h, proto_err_from_errno(r), 0, "list: %s",
					    strerror(-r));
		o = cJSON_CreateObject();
		a = cJSON_AddArrayToObject(o, "commands");
		for (size_t i = 0; i < n; i++) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "name", v[i].name);
			cJSON_AddStringToObject(e, "digest", v[i].digest);
			cJSON_AddNumberToObject(e, "uid", v[i].uid);
			cJSON_AddNumberToObject(e, "mode", v[i].mode & 07777);
			cJSON_AddItemToArray(a, e);
		}
		cJSON_AddNumberToObject(o, "skipped", (double)skipped);
		return answer_ok(h, o);
	}

	const char *name = trusted_name(h, req);
	if (!name)
		return;
	/* One add, remove or install at a time in the root: `pistisd trusted` on the command
	 * line may be running (trusted_lock). */
	{
		_cleanup_close_ int root_fd = -1;

		r = trusted_root_open("/", &root_fd);
		if (r >= 0)
			r = trusted_lock(root_fd, TRUSTED_LOCK_WAIT_S * 1000u, &lock_fd);
	}
	if (r == -EWOULDBLOCK)
		return answer_error(h, PROTO_E_LIMIT, 0,
				    "another trusted add, remove or install runs in this root "
				    "(/%s held for %d s); nothing done",
				    TRUSTED_LOCK, TRUSTED_LOCK_WAIT_S);
	if (r < 0)
		return answer_error(h, proto_err_from_errno(r), 0, "cannot lock /%s: %s",
				    TRUSTED_LOCK, strerror(-r));
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", name);
	if (op == PROTO_OP_TRUSTED_ADD && !cJSON_GetObjectItemCaseSensitive(req, "data")) {
		if (adopt(h, name, o) < 0)
			return;
	} else if (op == PROTO_OP_TRUSTED_ADD) {
		struct proto_error perr = {0};
		const char *b64 = NULL;
		_cleanup_free_ uint8_t *data = NULL;
		_cleanup_close_ int fd = -1;
		char digest[SHA256_HEX_SIZE], why[1024];
		size_t len = 0;

		if (proto_get_string(req, "data", PROTO_MAX_STRING, &b64, &perr) < 0 || !b64 ||
		    proto_base64_decode(b64, strlen(b64), &data, &len) < 0) {
			cJSON_Delete(o);
			return answer_error(h, PROTO_E_BAD_REQUEST, 0,
					    "\"data\" must be the script, base64 (without "
					    "\"data\": /data/bin/%s is adopted)",
					    name);
		}
		if (len > TRUSTED_SCRIPT_MAX) {
			cJSON_Delete(o);
			return answer_error(h, PROTO_E_TOO_LARGE, 0, "the script is over %d bytes",
					    TRUSTED_SCRIPT_MAX);
		}
		/* trusted_add_fd wants a root-owned regular file no one else may write: a
		 * sealed memfd of our own, 0755. */
		fd = memfd_create("pistis-trusted", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0 || loop_write(fd, data, len) < 0 || fchmod(fd, 0755) < 0 ||
		    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK) < 0 ||
		    lseek(fd, 0, SEEK_SET) < 0) {
			cJSON_Delete(o);
			return answer_error(h, PROTO_E_INTERNAL, 0, "memfd: %s", strerror(errno));
		}
		r = trusted_add_fd("/", name, fd, digest, why, sizeof(why));
		if (r == -ENOEXEC) {
			cJSON_Delete(o);
			return answer_error(h, PROTO_E_BAD_REQUEST, 0, "add: %s", why);
		}
		if (r == -EEXIST) {
			cJSON_Delete(o);
			return answer_error(h, PROTO_E_EXISTS, 0,
					    "add: /data/bin/%s is there and is not a trusted "
					    "command's wrapper: not replaced (trusted.add without "
					    "\"data\" makes that script the trusted command)",
					    name);
		}
		if (r < 0) {
			cJSON_Delete(o);
			return answer_error(h, proto_err_from_errno(r), 0, "add: %s%s",
					    strerror(-r),
					    r == -EPERM ? " (/data, /data/trusted and /data/bin "
							  "must be root's alone)"
							: "");
		}
		cJSON_AddStringToObject(o, "digest", digest);
	} else {
		r = trusted_remove("/", name);
		if (r < 0) {
			cJSON_Delete(o);
			return answer_error(h, proto_err_from_errno(r), 0, "remove: %s",
					    r == -ENOENT ? "no such trusted command"
							 : strerror(-r));
		}
	}
	if (install(h, o) < 0)
		return;
	answer_ok(h, o);
}

_noreturn_ static void helper(int out, int ctl, const struct proto_request *req)
{
	struct hctx h = {.id = req->id};
	_cleanup_close_ int root_fd = -1;
	sigset_t all;
	int o, c;

	serve_forget_secrets();
	/* Keep only the two pipes (as fds 3 and 4): a walk can take minutes, and the relay
	 * socket held open here would hide a dropped connection from the server. */
	o = fcntl(out, F_DUPFD_CLOEXEC, 10);
	c = fcntl(ctl, F_DUPFD_CLOEXEC, 10);
	if (o < 0 || c < 0 || dup3(o, 3, O_CLOEXEC) < 0 || dup3(c, 4, O_CLOEXEC) < 0)
		_exit(1);
	(void)close_all_fds_from(5);
	h.out = 3;
	h.ctl = 4;
	/* the parent blocks signals for its signalfd; visudo and sudo must not inherit that */
	sigemptyset(&all);
	(void)sigprocmask(SIG_SETMASK, &all, NULL);
	(void)signal(SIGPIPE, SIG_DFL);
	umask(0022);
	root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		answer_error(&h, PROTO_E_INTERNAL, 0, "open /: %s", strerror(errno));
	else
		switch (req->op) {
		case PROTO_OP_POLICY_APPLY:
		case PROTO_OP_POLICY_PLAN:
		case PROTO_OP_POLICY_CHECK:
			do_walk(&h, root_fd, req->op, req->root);
			break;
		case PROTO_OP_POLICY_EXPLAIN:
			do_explain(&h, root_fd, req->root);
			break;
		default:
			do_trusted(&h, req->op, req->root);
			break;
		}
	_exit(0);
}

/* --- in the daemon ---------------------------------------------------------------------- */

static void admin_free(struct admin *a)
{
	if (a->failed || !a->answered)
		serve_send_error(a->id, PROTO_E_INTERNAL, "%s",
				 a->failed ? "administrative helper sent a bad record"
					   : "administrative helper failed");
	serve_unwatch(&a->w);
	serve_unwatch(&a->cw);
	safe_close(a->w.fd);
	safe_close(a->cw.fd);
	lws_sul_cancel(&a->timeout);
	lws_sul_cancel(&a->stop_poll);
	if (a->pid > 0) {
		(void)kill(a->pid, SIGKILL);
		(void)waitpid(a->pid, NULL, 0);
	}
	session_hold_starts(false);
	fsops_hold(false);
	free(a->buf);
	free(a);
	cur = NULL;
}

static void admin_timeout(lws_sorted_usec_list_t *sul)
{
	struct admin *a = lws_container_of(sul, struct admin, timeout);
	serve_send_error(a->id, PROTO_E_LIMIT, "administrative operation timed out");
	a->answered = true;
	admin_free(a);
}

static void records(struct admin *a)
{
	char *p = a->buf, *nl;

	while (!a->failed && (nl = memchr(p, '\n', a->len - (size_t)(p - a->buf)))) {
		*nl = 0;
		if ((p[0] != 'E' && p[0] != 'A') || a->answered)
			a->failed = true;
		else {
			if (p[0] == 'A') {
				/* The walk is over (the answer is its last record): starts and
				 * file operations may go on now, not only once the helper has
				 * exited and its pipe reached EOF (an exec.start right after the
				 * answer was refused "a policy apply is tightening"). */
				a->answered = true;
				session_hold_starts(false);
				fsops_hold(false);
			}
			serve_send_json(strdup(p + 1));
		}
		p = nl + 1;
	}
	a->len -= (size_t)(p - a->buf);
	memmove(a->buf, p, a->len);
}

static void on_records(struct watch *w, uint32_t events)
{
	struct admin *a = lws_container_of(w, struct admin, w);
	ssize_t n;

	if (a->failed)
		goto done;
	n = read(w->fd, a->buf + a->len, ADMIN_RECORD_MAX - a->len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		a->len += (size_t)n;
		records(a);
		if (a->len == ADMIN_RECORD_MAX)
			a->failed = true;
		if (!a->failed)
			return;
	}
	if (!a->failed && a->len)
		a->failed = true; /* a record without its newline */
done:
	/* EOF: the helper is exiting, reap it. A bad record: it may still be walking (up to
	 * the time limit) and would fill the pipe nobody reads: admin_free kills it first,
	 * never a blocking wait on a live helper in the event loop. */
	if (!a->failed) {
		(void)waitpid(a->pid, NULL, 0);
		a->pid = 0;
	}
	admin_free(a);
}

static void stop_reply(struct admin *a, char c)
{
	lws_sul_cancel(&a->stop_poll);
	(void)loop_write(a->cw.fd, &c, 1);
}

static void stop_poll(lws_sorted_usec_list_t *sul)
{
	struct admin *a = lws_container_of(sul, struct admin, stop_poll);

	if (!session_running()) {
		/* The commands have ended; what runs as an agent outside them (a setsid'ed
		 * grandchild where there is no cgroup, one a restarted daemon never knew)
		 * would keep its fds through the new modes just the same. */
		int k = session_kill_agent_processes();
		if (k < 0)
			log_warning_errno(k, "Cannot list processes to stop agents' strays: %m");
		if (k <= 0)
			return stop_reply(a, '0');
		log_notice("audit policy.apply: tightening; killed %d agent process(es) outside "
			   "any running command",
			   k);
	}
	if ((lws_usec_t)(spawn_now_ns() / 1000u) > a->stop_deadline) { /* a freeze not counted */
		log_error("Commands did not end in time; the policy apply is aborted");
		return stop_reply(a, 'F');
	}
	lws_sul_schedule(serve_lws_context(), 0, &a->stop_poll, stop_poll, 50 * LWS_US_PER_MS);
}

static void on_ctl(struct watch *w, uint32_t events)
{
	struct admin *a = lws_container_of(w, struct admin, cw);
	char c;
	ssize_t n = read(w->fd, &c, 1);
	unsigned k;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n != 1 || c != 'T') {
		serve_unwatch(w); /* the helper closed it (or spoke nonsense): records decide */
		return;
	}
	/* before_tighten: nothing new starts, everything running is stopped (file operations
	 * too: their helpers hold fds opened as the agent) */
	session_hold_starts(true);
	fsops_hold(true);
	k = session_stop_all();
	log_notice("audit policy.apply: tightening; stopping %u running command(s), %u file "
		   "operation(s)",
		   k, fsops_stop_all());
	a->stop_deadline = (lws_usec_t)(spawn_now_ns() / 1000u) + ADMIN_STOP_WAIT_US;
	stop_poll(&a->stop_poll);
}

bool admin_busy(void)
{
	return cur != NULL;
}

void admin_request(const struct proto_request *req)
{
	struct admin *a;
	int p[2], s[2];
	pid_t pid;

	/* A helper whose answer is out has done its request: all it does after is _exit.
	 * Reaped here (killed: it holds nothing the answer did not already report, and its
	 * locks go with it) rather than refusing: a server that sent its next administrative
	 * request as soon as the answer came got "limit" about one time in three, before
	 * the loop had seen the pipe's EOF (red team, serve-soak.sh). */
	if (cur && cur->answered)
		admin_free(cur);
	if (cur)
		return serve_send_error(req->id, PROTO_E_LIMIT,
					"another policy/trusted operation is running");
	a = calloc(1, sizeof(*a));
	if (a)
		a->buf = malloc(ADMIN_RECORD_MAX);
	if (!a || !a->buf) {
		if (a)
			free(a);
		return serve_send_error(req->id, PROTO_E_INTERNAL, "out of memory");
	}
	a->w.fd = a->cw.fd = -1;
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(a->buf);
		free(a);
		return serve_send_error(req->id, PROTO_E_INTERNAL, "pipe: %s", strerror(errno));
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) < 0) {
		close(p[0]);
		close(p[1]);
		free(a->buf);
		free(a);
		return serve_send_error(req->id, PROTO_E_INTERNAL, "socketpair: %s",
					strerror(errno));
	}
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		close(s[0]);
		close(s[1]);
		free(a->buf);
		free(a);
		return serve_send_error(req->id, PROTO_E_INTERNAL, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		close(p[0]);
		close(s[0]);
		helper(p[1], s[1], req);
	}
	close(p[1]);
	close(s[1]);
	cur = a;
	a->pid = pid;
	snprintf(a->id, sizeof(a->id), "%s", req->id);
	log_notice("audit %s id=%s pid=%d", req->op_name, req->id, (int)pid);
	(void)fd_set_nonblock(p[0], 1);
	(void)fd_set_nonblock(s[0], 1);
	a->w.fd = p[0];
	a->cw.fd = s[0];
	if (serve_watch(&a->w, p[0], EPOLLIN, on_records) < 0 ||
	    serve_watch(&a->cw, s[0], EPOLLIN, on_ctl) < 0) {
		serve_send_error(req->id, PROTO_E_INTERNAL, "epoll: %s", strerror(errno));
		a->answered = true;
		admin_free(a);
		return;
	}
	lws_sul_schedule(serve_lws_context(), 0, &a->timeout, admin_timeout,
			 (lws_usec_t)ADMIN_TIMEOUT_MAX_S * LWS_US_PER_SEC + ADMIN_GRACE_US);
}
