/* pistisd policy: apply | plan | check | explain | save. Thin: parse arguments, call the
 * library, print (escaped), map results to exit codes. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/parse-num.h"
#include "pistisd/cli.h"
#include "pistisd/spawn.h"
#include "policy/internal.h"
#include "policy/policy.h"
#include "sandbox-users/ident.h"
#include "sandbox-users/users.h"

enum cmd { CMD_APPLY, CMD_PLAN, CMD_CHECK, CMD_EXPLAIN, CMD_SAVE };

struct ctx {
	enum cmd cmd;
	const char *root;
	const char *rules_path;
	bool json, progress, verbose;
	unsigned timeout;
	unsigned threads;
	const char *agent;
	long long uid;
	bool first_event;
	bool allow_unprotected_hardlinks; /* --allow protected_hardlinks */
	bool keep_processes;		  /* --keep-processes */
	int root_fd;
	struct timespec start, last_progress;
	bool progress_shown;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pistisd policy COMMAND [OPTIONS]\n\n"
		"Path rules: none / read / write, applied as owners, modes and ACLs.\n\n"
		"Commands:\n"
		"  apply [--rules FILE] [--progress] [--verbose] [--keep-processes]\n"
		"                             apply the rules\n"
		"  plan [--rules FILE] [--progress]\n"
		"                             list what apply would change; change nothing\n"
		"  check [--rules FILE] [--progress]\n"
		"                             exit 1 and list violations if the tree does not\n"
		"                             conform\n"
		"  explain PATH [--agent ID | --uid N] [--rules FILE]\n"
		"                             which rule decides PATH, why, and what the agent\n"
		"                             can do (--uid: an agent's uid, taken as a member\n"
		"                             of its own group and pi-sandbox)\n"
		"  save --rules NEW [--progress] [--verbose] [--keep-processes]\n"
		"                             validate NEW, install it atomically as the rules\n"
		"                             file, then apply it\n"
		"  --progress: entries/s and done so far on a terminal (stderr); --verbose:\n"
		"  list every change, not only what needs attention.\n"
		"  Before apply or save first takes access away, the agents' processes that can\n"
		"  reach the root (--root DIR) are killed (an open fd outlives a mode change);\n"
		"  --keep-processes leaves them running.\n\n"
		"Options (every command):\n"
		"  --root DIR     the sandbox's root (default /); rule paths are inside it\n"
		"  --json         machine-readable output on stdout\n"
		"  --timeout SEC  stop a walk after SEC seconds (default 3600; 0: none)\n"
		"  --threads N    walk with N threads, 0-8 (default 0: one per CPU, at most 8)\n"
		"  --allow protected_hardlinks\n"
		"                 apply or save although fs.protected_hardlinks is not 1 (an\n"
		"                 agent could then link any file into a tree it writes)\n"
		"  -h, --help     this help\n\n"
		"Rules file: " POLICY_RULES_PATH " inside the root; the built-in defaults when\n"
		"it does not exist. Exit: 0 ok, 1 not conforming / not everything done /\n"
		"invalid rules, 100 usage, 111 system error (the root or a --rules file cannot\n"
		"be read), 127 unknown agent (explain --agent).\n"
		"Reference: docs/policy.md.\n");
}

static const char *kind_name(enum policy_event_kind k)
{
	switch (k) {
	case POLICY_EV_CHANGE:
		return "change";
	case POLICY_EV_MISSING:
		return "missing";
	case POLICY_EV_SYMLINK:
		return "symlink";
	case POLICY_EV_HARDLINK:
		return "hardlink";
	case POLICY_EV_DEVICE:
		return "device";
	case POLICY_EV_OTHER_FS:
		return "other-fs";
	case POLICY_EV_TOO_DEEP:
		return "too-deep";
	case POLICY_EV_VANISHED:
		return "vanished";
	case POLICY_EV_ERROR:
		return "error";
	case POLICY_EV_NOT_DONE:
		return "not-done";
	case POLICY_EV_AGENTS_IN_TRUSTED:
		return "agents-in-trusted";
	case POLICY_EV_FOREIGN_SYMLINK:
		return "foreign-symlink";
	case POLICY_EV_PRIVATE:
		return "private";
	default:
		return "?";
	}
}

static void changes_text(unsigned c, char *buf, size_t size)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {
		{POLICY_CH_OWNER, "owner"},
		{POLICY_CH_MODE, "mode"},
		{POLICY_CH_ACL_ACCESS, "strip-acl"},
		{POLICY_CH_ACL_DEFAULT, "strip-default-acl"},
		{POLICY_CH_ACL_SET, "set-default-acl"},
		{POLICY_CH_MARK, "mark-closed"},
		{POLICY_CH_UNMARK, "unmark"},
		{POLICY_CH_CAPS, "strip-caps"},
	};
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (c & names[i].bit)
			o += (size_t)snprintf(buf + o, size - o, "%s%s", o ? "," : "",
					      names[i].name);
}

static void clear_progress(struct ctx *c)
{
	if (c->progress_shown) {
		fputs("\r\033[K", stderr);
		c->progress_shown = false;
	}
}

/* "line N" of the rules file, or "implied" for a rule pistis added (line 0). */
static const char *rule_where(const struct policy_rule *r, char buf[24])
{
	if (!r || !r->line)
		return r ? "implied" : "no rule";
	snprintf(buf, 24, "line %u", r->line);
	return buf;
}

static void on_event(void *userdata, const struct policy_event *ev)
{
	struct ctx *c = userdata;
	_cleanup_free_ char *p = NULL;
	char ch[128], wb[24];

	/* apply lists only what needs attention unless --verbose; plan and check list all.
	 * Decided before escaping: a first apply reports every node it changes. */
	if (c->cmd == CMD_APPLY && !c->verbose && ev->kind == POLICY_EV_CHANGE)
		return;
	p = escape_dup(ev->path, ev->path_len, c->json);
	if (!p)
		return;
	changes_text(ev->changes, ch, sizeof(ch));
	clear_progress(c);
	if (c->json) {
		printf("%s\n    {\"kind\":\"%s\",\"path\":\"%s\",\"rule\":",
		       c->first_event ? "" : ",", kind_name(ev->kind), p);
		if (ev->rule) {
			_cleanup_free_ char *r = escape_dup(ev->rule->path, ev->rule->len, true);
			printf("{\"path\":\"%s\",\"access\":\"%s\",\"line\":%u}", r ? r : "",
			       policy_access_name(ev->rule->access), ev->rule->line);
		} else {
			printf("null");
		}
		printf(",\"changes\":\"%s\",\"violation\":%s", ch,
		       ev->violation ? "true" : "false");
		if (ev->kind == POLICY_EV_TOO_DEEP)
			printf(",\"depth_max\":%u", ev->depth_max);
		if (ev->kind == POLICY_EV_CHANGE || ev->kind == POLICY_EV_HARDLINK ||
		    ev->kind == POLICY_EV_DEVICE || ev->kind == POLICY_EV_TOO_DEEP ||
		    ev->kind == POLICY_EV_OTHER_FS || ev->kind == POLICY_EV_PRIVATE)
			printf(",\"old\":{\"uid\":%u,\"gid\":%u,\"mode\":\"%04o\"},"
			       "\"new\":{\"uid\":%u,\"gid\":%u,\"mode\":\"%04o\"}",
			       (unsigned)ev->old_uid, (unsigned)ev->old_gid,
			       (unsigned)(ev->old_mode & 07777), (unsigned)ev->new_uid,
			       (unsigned)ev->new_gid, (unsigned)(ev->new_mode & 07777));
		if (ev->error)
			printf(",\"error\":\"%s\"", strerror(-ev->error));
		printf("}");
		c->first_event = false;
		return;
	}
	switch (ev->kind) {
	case POLICY_EV_CHANGE:
		printf("%s %s: %s (owner %u:%u -> %u:%u, mode %04o -> %04o)\n",
		       c->cmd == CMD_APPLY || c->cmd == CMD_SAVE ? "changed"
		       : c->cmd == CMD_PLAN			 ? "would change"
								 : "violation",
		       p, ch, (unsigned)ev->old_uid, (unsigned)ev->old_gid, (unsigned)ev->new_uid,
		       (unsigned)ev->new_gid, (unsigned)(ev->old_mode & 07777),
		       (unsigned)(ev->new_mode & 07777));
		break;
	case POLICY_EV_MISSING:
		printf("not there yet: %s (rule %s): skipped\n", p, rule_where(ev->rule, wb));
		break;
	case POLICY_EV_SYMLINK:
		printf("error: %s (rule %s) is a symlink or lies under one: rule not "
		       "applied\n",
		       p, rule_where(ev->rule, wb));
		break;
	case POLICY_EV_HARDLINK:
		printf("%s %s: has more than one link: never chowned or loosened (would need "
		       "%s)%s\n",
		       ev->violation && c->cmd == CMD_CHECK ? "violation" : "left", p, ch,
		       ev->violation ? "; not what the rule says while it has another name: "
				       "remove the name that should not be there"
				     : "");
		break;
	case POLICY_EV_DEVICE:
		printf("%s %s: device node under a %s rule: never loosened, left as is\n",
		       ev->violation ? "violation" : "left", p,
		       ev->rule ? policy_access_name(ev->rule->access) : "?");
		break;
	case POLICY_EV_OTHER_FS:
		if (!ev->violation) {
			printf("left %s: another file system (mount point): not crossed\n", p);
			break;
		}
		printf("violation %s: a mount point (another file system, or a bind mount) under "
		       "a %s rule, not crossed, and not what the rule says (would need %s; "
		       "owner %u:%u, mode %04o): put a rule on its own path, or change what is "
		       "mounted there\n",
		       p, ev->rule ? policy_access_name(ev->rule->access) : "?", ch,
		       (unsigned)ev->old_uid, (unsigned)ev->old_gid,
		       (unsigned)(ev->old_mode & 07777));
		break;
	case POLICY_EV_AGENTS_IN_TRUSTED:
		if (S_ISLNK(ev->old_mode)) {
			printf("%s %s: a symlink of agent uid %u in a trusted commands' tree "
			       "(what follows it would trust the agent's file): left; remove it\n",
			       ev->violation ? "violation" : "error", p, (unsigned)ev->old_uid);
			break;
		}
		if (ev->old_uid < USERS_AGENT_UID_MIN || ev->old_uid > USERS_AGENT_UID_MAX) {
			printf("%s %s: agents could write it (owner %u, group %u, mode %04o, or "
			       "an access ACL) in a trusted commands' tree: its bytes may be an "
			       "agent's; never made %s (it would then be trusted), left; remove "
			       "it\n",
			       ev->violation ? "violation" : "error", p, (unsigned)ev->old_uid,
			       (unsigned)ev->old_gid, (unsigned)(ev->old_mode & 07777),
			       ev->new_uid == 0 ? "root's" : "pi-tools'");
			break;
		}
		printf("%s %s: owned by agent uid %u in a trusted commands' tree: never made "
		       "%s (it would then be trusted), not entered; remove it\n",
		       ev->violation ? "violation" : "error", p, (unsigned)ev->old_uid,
		       ev->new_uid == 0 ? "root's" : "pi-tools'");
		break;
	case POLICY_EV_FOREIGN_SYMLINK:
		printf("%s %s: a symlink of uid %u under a %s rule: what follows it (git running "
		       "a hook) gets what it points to, which its owner may change; left, never "
		       "followed: remove it or put a file of root's in its place\n",
		       ev->violation ? "violation" : "error", p, (unsigned)ev->old_uid,
		       ev->rule ? policy_access_name(ev->rule->access) : "?");
		break;
	case POLICY_EV_TOO_DEEP:
		/* Failing closed: the directory is made root:root 0700 (not walked below). */
		if (ev->error)
			printf("error %s: deeper than the walk's bound (%u levels), and closing it "
			       "failed (%s): what lies below was not walked; left no looser than "
			       "before\n",
			       p, ev->depth_max, strerror(-ev->error));
		else if (c->cmd == CMD_PLAN)
			printf("would close %s: deeper than the walk's bound (%u levels); what "
			       "lies below would not be walked (root:root 0700: agents could not "
			       "reach it)\n",
			       p, ev->depth_max);
		else if (c->cmd == CMD_CHECK)
			printf("violation %s: deeper than the walk's bound (%u levels); what lies "
			       "below was not checked (apply closes it: root:root 0700)\n",
			       p, ev->depth_max);
		else
			printf("closed %s: deeper than the walk's bound (%u levels); what lies "
			       "below was not walked (root:root 0700: agents cannot reach it; make "
			       "the tree shallower and apply again)\n",
			       p, ev->depth_max);
		break;
	case POLICY_EV_PRIVATE:
		printf("left %s: %s's private %s (owner %u:%u, mode %04o) under a write rule, "
		       "not closed by pistis: never opened to the agents%s; make it readable to "
		       "its group, or move it out\n",
		       p, ev->old_uid == 0 ? "root" : "pi-tools",
		       S_ISDIR(ev->old_mode)	? "directory"
		       : S_ISFIFO(ev->old_mode) ? "FIFO"
		       : S_ISSOCK(ev->old_mode) ? "socket"
						: "file",
		       (unsigned)ev->old_uid, (unsigned)ev->old_gid,
		       (unsigned)(ev->old_mode & 07777),
		       S_ISDIR(ev->old_mode) ? ", not entered" : "");
		break;
	case POLICY_EV_VANISHED:
		printf("skipped %s: changed or removed while walked\n", p);
		break;
	case POLICY_EV_ERROR:
		printf("error %s: %s%s%s: left no looser than before\n", p, strerror(-ev->error),
		       *ch ? " while changing " : "", ch);
		break;
	case POLICY_EV_NOT_DONE:
		printf("not done %s: the walk stopped (%s) before finishing this directory\n", p,
		       ev->error ? strerror(-ev->error) : "error");
		break;
	default:
		break;
	}
}

static double elapsed(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static void on_progress(void *userdata, const struct policy_stats *st)
{
	struct ctx *c = userdata;
	struct timespec now;
	double t;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (elapsed(&c->last_progress, &now) < 0.25)
		return;
	c->last_progress = now;
	t = elapsed(&c->start, &now);
	fprintf(stderr, "\r\033[Kpolicy: %" PRIu64 " entries, %" PRIu64 " changed, %.0f/s",
		st->entries, st->changed, t > 0 ? (double)st->entries / t : 0.0);
	c->progress_shown = true;
}

static int open_root(const char *root, int *ret_fd)
{
	/* The root is the operator's choice (it may be reached through a symlink); what
	 * lies beneath it is resolved without following any. */
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return log_error_errno(negative_errno(), "Failed to open root '%s': %m", root);
	*ret_fd = fd;
	return 0;
}

/* ret_bytes (may be NULL; only with --rules): the bytes parsed, for save to install. */
static int load_rules(struct ctx *c, int root_fd, struct policy_rules **ret, char **ret_bytes,
		      size_t *ret_len)
{
	struct policy_error err = {0};
	int r;

	if (c->rules_path)
		r = policy_rules_load(root_fd, c->rules_path, false, true, ret, ret_bytes, ret_len,
				      &err);
	else {
		r = policy_rules_load(root_fd, POLICY_RULES_PATH, true, true, ret, NULL, NULL,
				      &err);
		if (r == -ENOENT) {
			log_debug("no %s in the root: built-in defaults", POLICY_RULES_PATH);
			r = policy_rules_parse(policy_defaults_json, policy_defaults_json_len(),
					       ret, &err);
		}
	}
	if (r < 0) {
		/* Names go to the log as they are (the log escapes them); err.msg is text with its
		 * names escaped by the parser (serve's answers carry it too): %-s, once. */
		const char *what = c->rules_path ? c->rules_path : POLICY_RULES_PATH;

		if (err.msg[0] && err.line)
			log_error("Invalid rules in '%s', line %u: %-s", what, err.line, err.msg);
		else if (err.msg[0])
			log_error("Invalid rules: %-s", err.msg);
		else
			return log_error_errno(r, "Failed to read rules '%s': %m", what), -EIO;
		return r == -ENOMEM || r == -EIO ? -EIO : -EINVAL;
	}
	r = policy_rules_check_fs(root_fd, *ret, &err);
	if (r < 0) {
		log_error("Invalid rules, line %u: %-s", err.line, err.msg);
		policy_rules_free(*ret);
		*ret = NULL;
		return -EINVAL;
	}
	return 0;
}

static int exit_for_load(int r)
{
	return r == -EINVAL ? 1 : EXIT_SYSTEM;
}

static void print_summary(struct ctx *c, const char *name, const struct policy_stats *st, int r)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	clear_progress(c);
	if (c->json) {
		printf("\n  ],\n  \"summary\":{\"entries\":%" PRIu64 ",\"dirs\":%" PRIu64
		       ",\"changed\":%" PRIu64 ",\"violations\":%" PRIu64 ",\"symlinks\":%" PRIu64
		       ",\"skipped\":%" PRIu64 ",\"errors\":%" PRIu64
		       ",\"seconds\":%.3f,\"complete\":%s}\n}\n",
		       st->entries, st->dirs, st->changed, st->violations, st->symlinks,
		       st->skipped, st->errors, elapsed(&c->start, &now),
		       r < 0 || st->errors ? "false" : "true");
		return;
	}
	printf("%s: %" PRIu64 " entries, %" PRIu64 " %s, %" PRIu64 " violations, %" PRIu64
	       " errors, %" PRIu64 " skipped, %" PRIu64 " symlinks left alone (%.2f s)%s\n",
	       name, st->entries, st->changed,
	       c->cmd == CMD_APPLY || c->cmd == CMD_SAVE ? "changed" : "to change", st->violations,
	       st->errors, st->skipped, st->symlinks, elapsed(&c->start, &now),
	       r == -ETIME ? " — stopped: time limit"
	       : r < 0	   ? " — stopped early"
			   : "");
}

/* before_tighten of apply and save: SIGKILL the agents' processes that can reach the tree
 * (an fd opened under the old modes outlives the new ones), sweeping /proc until a sweep
 * finds none (a process forking meanwhile is caught by the next one). Agents: the
 * registry's uids, removed agents' included; "can reach": the process's root is the walk's
 * root or a directory above it. Processes of the same uids under another root (another
 * sandbox's chroot on this machine) are left alone. Each failure aborts the apply before
 * anything is tightened. */
/* users_list says ENOENT for a root without /etc as well as for one without a registry;
 * only the registry's absence means no agent ever had a uid here (red team: under a root
 * with a registry and no /etc, the agents' processes ran on through the tightening). */
static bool registry_absent(int root_fd)
{
	struct stat st;

	return fstatat(root_fd, "data/pistis/" USERS_REGISTRY_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
	       errno == ENOENT;
}

static int stop_agents(void *userdata)
{
	struct ctx *c = userdata;
	_cleanup_free_ struct users_entry *e = NULL;
	_cleanup_free_ uid_t *uids = NULL;
	unsigned killed = 0;
	size_t n = 0;
	int r;

	if (c->keep_processes)
		return 0;
	r = users_list(c->root, &e, &n);
	if (r == -ENOENT && registry_absent(c->root_fd))
		return 0; /* no registry: no agent ever had a uid under this root */
	if (r < 0)
		return log_error_errno(r,
				       "Cannot read the agents' registry to stop their processes "
				       "before tightening (%-s%s%m); nothing was tightened "
				       "(--keep-processes applies without stopping them)",
				       users_last_error_text(),
				       *users_last_error_text() ? ": " : "");
	uids = calloc(n ? n : 1, sizeof(*uids));
	if (!uids)
		return log_error_errno(-ENOMEM, "Out of memory");
	for (size_t i = 0; i < n; i++)
		uids[i] = e[i].uid;
	r = spawn_kill_agents_reaching(c->root_fd, uids, n, &killed);
	if (r == -ETIME)
		return log_error_errno(r,
				       "%u agent process(es) that can reach %s still ran %d s "
				       "after SIGKILL; nothing was tightened",
				       killed, c->root, SPAWN_KILL_AGENTS_SEC);
	if (r < 0)
		return log_error_errno(
			r, "Cannot list the agents' processes in /proc to stop them before "
			   "tightening: %m; nothing was tightened");
	if (killed)
		log_notice("tightening: killed %u agent process(es) that can reach %s first (an "
			   "open fd would outlive the new modes)",
			   killed, c->root);
	return 0;
}

/* The closing-mark key, said before the walk (docs/policy.md, "Without a usable key"). apply
 * and save: a none rule closes without marking where the root has none yet. Every walk: one
 * that cannot be used, and why (the walk's own error event only names the errno). */
static void note_mark_key(int root_fd, const struct policy_rules *rules, bool changes)
{
	struct policy_mark_key k;
	bool none = false;
	int r;

	for (size_t i = 0; i < rules->n; i++)
		none |= rules->rules[i].access == POLICY_NONE;
	policy_mark_key_init(&k, root_fd);
	r = policy_mark_key_load(&k);
	if (r == -EBADMSG)
		log_error("Closing-mark key %s/%s is not root's 0600 regular file of %d bytes: it "
			  "is not used, so no mark counts and none is made or removed (nothing "
			  "closed opens); remove it and run `pistisd users ensure-base` for a new "
			  "one",
			  POLICY_STATE_DIR, POLICY_MARK_KEY_FILE, POLICY_MARK_KEY_SIZE);
	else if (r < 0)
		log_error_errno(r,
				"Cannot read the closing-mark key %s/%s: %m; no mark counts and "
				"none is made or removed (nothing closed opens)",
				POLICY_STATE_DIR, POLICY_MARK_KEY_FILE);
	else if (changes && none && k.state == POLICY_MARK_KEY_ABSENT)
		log_notice("No closing-mark key (%s/%s; `pistisd users ensure-base` makes it): "
			   "what none rules close now carries no mark, and a later write rule "
			   "leaves it closed",
			   POLICY_STATE_DIR, POLICY_MARK_KEY_FILE);
	policy_mark_key_done(&k);
}

static int run_walk(struct ctx *c, int root_fd, const struct policy_rules *rules)
{
	static const char *names[] = {"apply", "plan", "check", "explain", "save"};
	struct policy_walk_opts o = {
		.mode = c->cmd == CMD_PLAN    ? POLICY_PLAN
			: c->cmd == CMD_CHECK ? POLICY_CHECK
					      : POLICY_APPLY,
		.timeout_sec = c->timeout,
		.threads = c->threads,
		.on_event = on_event,
		/* apply and save list only what needs attention unless --verbose */
		.skip_events = (c->cmd == CMD_APPLY || c->cmd == CMD_SAVE) && !c->verbose
				       ? 1u << POLICY_EV_CHANGE
				       : 0,
		.on_progress = c->progress && isatty(STDERR_FILENO) ? on_progress : NULL,
		.before_tighten = stop_agents,
		.userdata = c,
	};
	struct policy_stats st = {0};
	struct rlimit rl;
	int r;

	/* One fd per directory level: use what the hard limit allows. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	note_mark_key(root_fd, rules, c->cmd == CMD_APPLY || c->cmd == CMD_SAVE);
	clock_gettime(CLOCK_MONOTONIC, &c->start);
	c->first_event = true;
	if (c->json) {
		_cleanup_free_ char *root = escape_dup(c->root, strlen(c->root), true);

		printf("{\n  \"command\":\"%s\",\n  \"root\":\"%s\",\n  \"events\":[",
		       names[c->cmd], root ? root : "");
	}
	r = policy_walk(root_fd, rules, &o, &st);
	print_summary(c, names[c->cmd], &st, r);
	fflush(stdout);
	if (r < 0 && r != -ETIME)
		log_error_errno(r, "Walk stopped: %m; directories listed as 'not done' are "
				   "left no looser than before");
	if (c->cmd == CMD_CHECK)
		return st.violations || st.errors || r < 0 ? 1 : 0;
	return st.errors || r < 0 ? 1 : 0;
}

static void print_mode_line(const char *label, const struct stat *st)
{
	printf("  %s: %s, owner %u:%u, mode %04o", label,
	       S_ISDIR(st->st_mode)   ? "directory"
	       : S_ISREG(st->st_mode) ? "file"
	       : S_ISLNK(st->st_mode) ? "symlink"
				      : "special file",
	       (unsigned)st->st_uid, (unsigned)st->st_gid, (unsigned)(st->st_mode & 07777));
}

static int do_explain(struct ctx *c, int root_fd, const struct policy_rules *rules, const char *arg)
{
	char norm[POLICY_PATH_MAX + 1];
	_cleanup_free_ char *p = NULL, *rp = NULL, *stop = NULL, *blk = NULL, *priv = NULL;
	struct users_identity ident;
	struct policy_explain ex;
	gid_t gids[2];
	uid_t uid = (uid_t)-1;
	int n, r;

	n = policy_path_normalise(arg, strlen(arg), norm, sizeof(norm));
	if (n < 0) {
		log_error("PATH must be absolute, without '..' (inside --root)");
		return EXIT_USAGE;
	}
	if (c->agent) {
		r = users_lookup(c->root, c->agent, &ident);
		if (r < 0) {
			log_error_errno(r, "Failed to look up agent '%s': %m", c->agent);
			return r == -ENOENT ? EXIT_NOT_FOUND : EXIT_SYSTEM;
		}
		uid = ident.uid;
		gids[0] = ident.gid;
	} else if (c->uid >= 0) {
		uid = (uid_t)c->uid;
	}
	if (!c->agent)
		gids[0] = uid;
	gids[1] = USERS_SANDBOX_GID; /* every agent is in pi-sandbox */
	r = policy_explain(root_fd, rules, norm, uid, gids, 2, &ex);
	if (r < 0)
		return log_error_errno(r, "Failed to explain: %m"), EXIT_SYSTEM;

	p = escape_dup(norm, (size_t)n, c->json);
	rp = ex.rule ? escape_dup(ex.rule->path, ex.rule->len, c->json) : NULL;
	stop = escape_dup(ex.stop_at, strlen(ex.stop_at), c->json);
	blk = escape_dup(ex.blocked_by, strlen(ex.blocked_by), c->json);
	priv = escape_dup(ex.private_at, strlen(ex.private_at), c->json);
	if (!p || (ex.rule && !rp) || !stop || !blk || !priv)
		return log_error("Out of memory"), EXIT_SYSTEM;

	char wb[24];
	bool read_only_broken =
		ex.rule && ex.rule->access != POLICY_WRITE && (ex.can_replace || ex.can_write);
	if (c->json) {
		printf("{\"path\":\"%s\",\"rule\":", p);
		if (ex.rule)
			printf("{\"path\":\"%s\",\"access\":\"%s\",\"line\":%u}", rp,
			       policy_access_name(ex.rule->access), ex.rule->line);
		else
			printf("null");
		if (ex.reserved)
			printf(",\"reserved\":\"%s\"", ex.reserved);
		printf(",\"exists\":%s,\"symlink\":%s,\"stopped_at\":\"%s\"",
		       ex.exists ? "true" : "false", ex.symlink_on_way ? "true" : "false", stop);
		if (ex.exists)
			printf(",\"now\":{\"uid\":%u,\"gid\":%u,\"mode\":\"%04o\",\"acl\":%s,"
			       "\"default_acl\":%s}",
			       (unsigned)ex.st.st_uid, (unsigned)ex.st.st_gid,
			       (unsigned)(ex.st.st_mode & 07777), ex.has_acl ? "true" : "false",
			       ex.has_default_acl ? "true" : "false");
		if (ex.exists && ex.rule && !ex.symlink_on_way)
			printf(",\"implies\":{\"uid\":%d,\"gid\":%u,\"mode\":\"%04o\",\"default_"
			       "acl\":%s,"
			       "\"left_as_is\":%s,\"pinned\":%s,\"beyond_mount\":%s}",
			       ex.target.uid == (uid_t)-1 ? -1 : (int)ex.target.uid,
			       (unsigned)ex.target.gid, (unsigned)ex.target.mode,
			       ex.target.flags & POLICY_T_DEFAULT_ACL ? "true" : "false",
			       ex.target_hardlink_left || ex.target_private_left ||
					       ex.private_at[0] ||
					       (ex.target.flags & POLICY_T_LEAVE)
				       ? "true"
				       : "false",
			       ex.target.flags & POLICY_T_PINNED ? "true" : "false",
			       ex.mount_at[0] ? "true" : "false");
		if (ex.exists && ex.rule && !ex.symlink_on_way && ex.private_at[0])
			printf(",\"private_above\":\"%s\"", priv);
		if (ex.agent)
			printf(",\"agent\":{\"uid\":%u,\"traverse\":%s,\"blocked_by\":\"%s\","
			       "\"read\":%s,"
			       "\"write\":%s,\"replace\":%s,\"read_only_holds\":%s}",
			       (unsigned)uid, ex.can_traverse ? "true" : "false", blk,
			       ex.can_read ? "true" : "false", ex.can_write ? "true" : "false",
			       ex.can_replace ? "true" : "false",
			       read_only_broken ? "false" : "true");
		printf("}\n");
		return 0;
	}

	printf("%s\n", p);
	if (ex.rule) {
		printf("  rule: \"%s\" %s (%s): the most specific rule covering this path", rp,
		       policy_access_name(ex.rule->access), rule_where(ex.rule, wb));
		for (size_t i = 0; i < rules->n; i++) {
			const struct policy_rule *o = &rules->rules[i];
			if (o != ex.rule && policy_path_under(o->path, o->len, norm, (size_t)n)) {
				_cleanup_free_ char *op = escape_dup(o->path, o->len, false);
				printf("; overrides \"%s\" %s (%s)", op ? op : "",
				       policy_access_name(o->access), rule_where(o, wb));
			}
		}
		printf("\n");
	} else if (ex.reserved) {
		printf("  rule: none applies: %s is pistis's own (the agents' homes, its state), "
		       "which no rule changes\n",
		       ex.reserved);
	} else {
		printf("  rule: none covers this path: it keeps the permissions it has\n");
	}
	if (ex.symlink_on_way)
		printf("  %s is a symlink: policy never follows or changes it\n", stop);
	else if (!ex.exists)
		printf("  not there (yet): stopped at %s\n", *stop ? stop : "/");
	if (ex.exists) {
		print_mode_line("now", &ex.st);
		printf(", access ACL %s, default ACL %s\n", ex.has_acl ? "yes" : "no",
		       ex.has_default_acl ? "yes" : "no");
	}
	if (ex.exists && ex.rule && !ex.symlink_on_way && ex.private_at[0]) {
		printf("  implies: nothing: apply does not enter %s, a directory of root's or "
		       "pi-tools' closed to the agents and not closed by pistis (left as it is, "
		       "never opened to the agents), so this node keeps what it has\n",
		       priv);
	} else if (ex.exists && ex.rule && !ex.symlink_on_way) {
		if (ex.target.uid == (uid_t)-1)
			printf("  implies: owner kept (%u), group %u, mode %04o",
			       (unsigned)ex.st.st_uid, (unsigned)ex.target.gid,
			       (unsigned)ex.target.mode);
		else
			printf("  implies: owner %u:%u, mode %04o", (unsigned)ex.target.uid,
			       (unsigned)ex.target.gid, (unsigned)ex.target.mode);
		printf("%s, no access ACL\n", ex.target.flags & POLICY_T_DEFAULT_ACL
						      ? ", default ACL u::rwx,g::rwx,o::---"
						      : ", no default ACL");
		if (ex.target_hardlink_left)
			printf("  note: it has %ju links: apply leaves it as is (never chowned or "
			       "loosened)\n",
			       (uintmax_t)ex.st.st_nlink);
		if (ex.target.flags & POLICY_T_LEAVE)
			printf("  note: a device node: apply never loosens it\n");
		if (ex.target_private_left)
			printf("  note: %s's, closed to the agents, and not closed by pistis: "
			       "apply "
			       "leaves it as is (never opened to the agents)\n",
			       ex.st.st_uid == 0 ? "root" : "pi-tools");
		if (ex.mount_at[0]) {
			_cleanup_free_ char *mp =
				escape_dup(ex.mount_at, strlen(ex.mount_at), false);
			printf("  note: %s is a mount point below the rule's path: apply does not "
			       "cross it, so this node keeps what it has (put a rule on the mount "
			       "point to cover it)\n",
			       mp ? mp : "");
		}
		if (ex.target.flags & POLICY_T_PINNED)
			printf("  note: root's and sticky: a none or read rule lies below, and no "
			       "agent may rename what it protects or the directories on the way\n");
	}
	if (ex.agent) {
		printf("  agent uid %u (groups %u, %u): traverse %s", (unsigned)uid,
		       (unsigned)gids[0], (unsigned)gids[1], ex.can_traverse ? "yes" : "no");
		if (!ex.can_traverse)
			printf(" (blocked at %s)", blk);
		printf(", read %s, write %s, replace %s\n", ex.can_read ? "yes" : "no",
		       ex.can_write ? "yes" : "no", ex.can_replace ? "yes" : "no");
		if (read_only_broken && !ex.can_replace)
			printf("  warning: the agent can write it%s: %s is not effective here\n",
			       ex.st.st_uid == uid ? " (it owns it, and may chmod it)" : "",
			       policy_access_name(ex.rule->access));
		else if (read_only_broken && strcmp(ex.replace_via, norm) == 0)
			printf("  warning: the agent can write the directory holding it, so it can "
			       "replace this node (rename/unlink): %s is not effective here\n",
			       policy_access_name(ex.rule->access));
		else if (read_only_broken) {
			_cleanup_free_ char *rv =
				escape_dup(ex.replace_via, strlen(ex.replace_via), false);
			printf("  warning: the agent can rename %s, a directory on the way, and "
			       "put its own in its place: %s is not effective here\n",
			       rv ? rv : "", policy_access_name(ex.rule->access));
		}
	}
	return 0;
}

static int do_save(struct ctx *c, int root_fd)
{
	_cleanup_(policy_rules_freep) struct policy_rules *rules = NULL;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	/* Validated (syntax, limits, symlinks, its owner and mode on the opened fd) before
	 * anything is replaced, and the very bytes validated are the ones installed: NEW is
	 * read once. (Read twice, an agent's 0666 file swapped in between was saved as root's
	 * 0644 rules.json, or rules other than those checked, unless the second read repeated
	 * every check.) */
	r = load_rules(c, root_fd, &rules, &buf, &len);
	if (r < 0)
		return exit_for_load(r);
	r = policy_rules_save(root_fd, buf, len);
	if (r == -EPERM)
		return log_error("The directory of %s must be owned by root and not writable by "
				 "group or others; nothing replaced",
				 POLICY_RULES_PATH),
		       EXIT_SYSTEM;
	if (r < 0)
		return log_error_errno(r, "Failed to save %s: %m; nothing replaced",
				       POLICY_RULES_PATH),
		       EXIT_SYSTEM;
	if (r > 0)
		log_warning_errno(-r,
				  "Saved %s, but syncing its directory failed: %m; applying the "
				  "new rules (a crash before the disk catches up may bring back "
				  "the old file)",
				  POLICY_RULES_PATH);
	if (!c->json)
		printf("saved %s (%zu rules); applying\n", POLICY_RULES_PATH, rules->n);
	return run_walk(c, root_fd, rules);
}

/* apply and save: one at a time in a root (policy_apply_lock), waiting for another for up
 * to --timeout (0: as long as it takes), and saying so. The first TAKE_LOCK_QUIET_MS are
 * not told: a command's start holds the lock shared for about a millisecond
 * (policy_apply_share). */
#define TAKE_LOCK_QUIET_MS 200u
static int take_lock(struct ctx *c, int root_fd, int *ret_fd)
{
	unsigned wait_ms =
		c->timeout && c->timeout < UINT_MAX / 1000u ? c->timeout * 1000u : UINT_MAX;
	int r = policy_apply_lock(
		root_fd, wait_ms < TAKE_LOCK_QUIET_MS ? wait_ms : TAKE_LOCK_QUIET_MS, ret_fd);

	if (r == -EWOULDBLOCK) {
		log_notice("Another policy apply or save is running in this root (it holds %s); "
			   "waiting for it",
			   POLICY_STATE_DIR);
		r = policy_apply_lock(root_fd, wait_ms, ret_fd);
	}
	if (r == -EWOULDBLOCK)
		return log_error("Another policy apply or save still runs in this root after %u "
				 "s (--timeout); nothing done",
				 c->timeout),
		       r;
	if (r < 0)
		return log_error_errno(r, "Failed to lock %s: %m; nothing done", POLICY_STATE_DIR),
		       r;
	return 0;
}

int policy_cli_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"root", required_argument, NULL, 'r'},
		{"json", no_argument, NULL, 'j'},
		{"rules", required_argument, NULL, 'R'},
		{"progress", no_argument, NULL, 'p'},
		{"verbose", no_argument, NULL, 'v'},
		{"timeout", required_argument, NULL, 't'},
		{"agent", required_argument, NULL, 'a'},
		{"uid", required_argument, NULL, 'u'},
		{"threads", required_argument, NULL, 'T'},
		{"allow", required_argument, NULL, 'A'},
		{"keep-processes", no_argument, NULL, 'K'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	static const char *names[] = {"apply", "plan", "check", "explain", "save"};
	struct ctx c = {.root = "/", .uid = -1, .timeout = 3600};
	_cleanup_(policy_rules_freep) struct policy_rules *rules = NULL;
	_cleanup_close_ int root_fd = -1, lock_fd = -1;
	const char *cmd, *explain_path = NULL;
	uint64_t v;
	int o, r;
	bool found = false;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (!strcmp(cmd, names[i]))
			c.cmd = (enum cmd)i, found = true;
	if (!found) {
		log_error("unknown policy command '%s'; see 'pistisd policy --help'", cmd);
		return EXIT_USAGE;
	}
	optind = 1;
	opterr = 0; /* getopt would print a bad option raw: log_bad_option escapes it */
	while ((o = getopt_long(argc - 1, argv + 1, "h", opts, NULL)) >= 0) {
		switch (o) {
		case 'r':
			c.root = optarg;
			break;
		case 'j':
			c.json = true;
			break;
		case 'R':
			c.rules_path = optarg;
			break;
		case 'p':
			c.progress = true;
			break;
		case 'v':
			c.verbose = true;
			break;
		case 't':
			if (parse_uint_strict(optarg, UINT32_MAX, NULL, &v) < 0) {
				log_error("--timeout wants seconds, got '%s'", optarg);
				return EXIT_USAGE;
			}
			c.timeout = (unsigned)v;
			break;
		case 'T':
			if (parse_uint_strict(optarg, POLICY_WALK_THREADS_MAX, NULL, &v) < 0) {
				log_error("--threads wants a number from 0 (one per CPU) to %d, "
					  "got '%s'",
					  POLICY_WALK_THREADS_MAX, optarg);
				return EXIT_USAGE;
			}
			c.threads = (unsigned)v;
			break;
		case 'a':
			c.agent = optarg;
			break;
		case 'K':
			c.keep_processes = true;
			break;
		case 'A':
			if (strcmp(optarg, "protected_hardlinks")) {
				log_error("--allow knows only 'protected_hardlinks', got '%s'",
					  optarg);
				return EXIT_USAGE;
			}
			c.allow_unprotected_hardlinks = true;
			break;
		case 'u':
			if (parse_uint_strict(optarg, UINT32_MAX - 1, NULL, &v) < 0) {
				log_error("--uid wants a number, got '%s'", optarg);
				return EXIT_USAGE;
			}
			c.uid = (long long)v;
			/* explain answers for an agent: a member of its own group and
			 * pi-sandbox, as every agent is. */
			if (!users_uid_is_agent((uid_t)c.uid)) {
				log_error("--uid %s is not an agent's uid (%u-%u): explain answers "
					  "for agents",
					  optarg, USERS_AGENT_UID_MIN, USERS_AGENT_UID_MAX);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			log_bad_option(argv + 1, optind, optopt, "pistisd policy --help");
			return EXIT_USAGE;
		}
	}
	if (c.cmd == CMD_EXPLAIN) {
		if (optind + 1 != argc - 1) {
			log_error("explain wants one PATH");
			return EXIT_USAGE;
		}
		explain_path = argv[optind + 1];
	} else if (optind != argc - 1) {
		log_error("unexpected argument '%s'", argv[optind + 1]);
		return EXIT_USAGE;
	}
	if (c.cmd == CMD_SAVE && !c.rules_path) {
		log_error("save wants --rules NEW");
		return EXIT_USAGE;
	}
	if ((c.agent || c.uid >= 0) && c.cmd != CMD_EXPLAIN) {
		log_error("--agent and --uid belong to explain");
		return EXIT_USAGE;
	}
	if (c.agent && ident_agent_id_check(c.agent) < 0) {
		log_error("invalid agent id: 1-%d bytes of [A-Za-z0-9._@+=/-], starting with a "
			  "letter or digit",
			  USERS_AGENT_ID_MAX);
		return EXIT_USAGE;
	}
	if (c.json)
		log_set_format(LOG_FORMAT_JSON);
	if (getenv("PISTIS_NO_OPENAT2"))
		policy_resolve_force_fallback(true);

	/* Without protected_hardlinks an agent can link any file (/etc/shadow) into a tree it
	 * writes; the walk leaves a file with two names alone, but once the other name is
	 * replaced (passwd and shadow are, on every change) the agent's is the only one, and a
	 * write rule would hand the old inode to pi-sandbox. pistisd serve refuses to start
	 * then (pistisd check); so do the commands that change the tree. */
	if ((c.cmd == CMD_APPLY || c.cmd == CMD_SAVE) && !c.allow_unprotected_hardlinks &&
	    !policy_hardlinks_protected()) {
		log_error("refusing to %s: fs.protected_hardlinks is not 1 (read from "
			  "/proc/sys/fs/protected_hardlinks), so an agent can hardlink any file, "
			  "/etc/shadow included, into a tree it may write; set it to 1 on the host "
			  "(it is not namespaced), or pass --allow protected_hardlinks",
			  c.cmd == CMD_APPLY ? "apply" : "save");
		return EXIT_SYSTEM;
	}
	if (c.keep_processes && c.cmd != CMD_APPLY && c.cmd != CMD_SAVE) {
		log_error("--keep-processes belongs to apply and save");
		return EXIT_USAGE;
	}
	if (open_root(c.root, &root_fd) < 0)
		return EXIT_SYSTEM;
	c.root_fd = root_fd;
	if ((c.cmd == CMD_APPLY || c.cmd == CMD_SAVE) && take_lock(&c, root_fd, &lock_fd) < 0)
		return EXIT_SYSTEM;
	if (c.cmd == CMD_SAVE)
		return do_save(&c, root_fd);
	r = load_rules(&c, root_fd, &rules, NULL, NULL);
	if (r < 0)
		return exit_for_load(r);
	if (c.cmd == CMD_EXPLAIN)
		return do_explain(&c, root_fd, rules, explain_path);
	return run_walk(&c, root_fd, rules);
}
