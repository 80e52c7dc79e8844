/* pistisd users …: thin CLI over the sandbox-users library. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/parse-num.h"
#include "lib/self-phdr.h"
#include "pistisd/cli.h"
#include "pistisd/ipc.h"
#include "pistisd/spawn.h"
#include "sandbox-users/ident.h"
#include "sandbox-users/users-internal.h"
#include "sandbox-users/users.h"
#include "trusted/trusted.h"

struct opts {
	const char *root;
	bool json;
	bool forget;
	bool keep_processes;
	uid_t uid;
	const char **args; /* the operands, pointing into argv */
	int n_args;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pistisd users COMMAND [ARG] [--root DIR] [--json]\n\n"
		"One stable unprivileged identity per agent (docs/users.md).\n\n"
		"Commands:\n"
		"  ensure AGENT_ID [--uid N]  create or confirm the agent's user, group, home,\n"
		"                             TMPDIR and /data/agents dir; print the identity.\n"
		"                             --uid: the uid the server keeps for this agent\n"
		"                             (%u-%u); refused when someone else holds it\n"
		"  ensure AGENT_ID...         many agents under one lock and one rewrite (at most\n"
		"                             %d; all or nothing; no --uid); one identity each,\n"
		"                             blank-line separated (--json: one object a line)\n"
		"  ensure-base                group %s (gid %u), user and group\n"
		"                             %s (%u)\n"
		"  remove AGENT_ID [--forget] [--keep-processes]\n"
		"                             kill the agent's processes, remove its SysV IPC\n"
		"                             objects, delete the user and group, then kill\n"
		"                             what started meanwhile; the registry keeps the\n"
		"                             uid reserved unless --forget; files are kept.\n"
		"                             --forget: the next new agent may get the uid, and\n"
		"                             with it those files (and the home, when its name\n"
		"                             is the same).\n"
		"                             --keep-processes: neither kill nor remove IPC\n"
		"                             objects (not with --forget: the uid may go to\n"
		"                             another)\n"
		"  list                       every identity in the registry\n"
		"  show AGENT_ID              the agent's identity, changing nothing\n"
		"                             (list, show: a warning for what ensure would\n"
		"                             refuse in /etc, e.g. a second line of the name)\n\n"
		"Options:\n"
		"  --root DIR   operate on the root filesystem in DIR (default /)\n"
		"  --json       machine-readable output\n"
		"  -h, --help   this text\n\n"
		"Exit codes: 0 ok, 1 refused (conflict, unknown agent, corrupt file, every\n"
		"agent uid held), 100 usage, 111 system error.\n",
		USERS_AGENT_UID_MIN, USERS_AGENT_UID_MAX, USERS_BATCH_MAX, USERS_SANDBOX_GROUP,
		USERS_SANDBOX_GID, USERS_TOOLS_USER, USERS_TOOLS_UID);
}

static int parse_uid(const char *s, uid_t *ret)
{
	uint64_t v;
	int r = parse_uint_strict(s, USERS_AGENT_UID_MAX, NULL, &v);

	if (r < 0)
		return r;
	if (!users_uid_is_agent((uid_t)v))
		return -ERANGE;
	*ret = (uid_t)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	bool dashdash = false;

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (dashdash || a[0] != '-' || !a[1]) {
			if (o->n_args == USERS_BATCH_MAX) {
				log_error("unexpected argument '%s' (at most %d agent ids)", a,
					  USERS_BATCH_MAX);
				return -EINVAL;
			}
			o->args[o->n_args++] = a;
		} else if (!strcmp(a, "--")) {
			dashdash = true;
		} else if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--forget")) {
			o->forget = true;
		} else if (!strcmp(a, "--keep-processes")) {
			o->keep_processes = true;
		} else if (!strcmp(a, "--root") || !strncmp(a, "--root=", 7)) {
			o->root = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
			if (!o->root || !o->root[0]) {
				log_error("--root needs a directory");
				return -EINVAL;
			}
		} else if (!strcmp(a, "--uid") || !strncmp(a, "--uid=", 6)) {
			const char *v = a[5] == '=' ? a + 6 : (i + 1 < argc ? argv[++i] : NULL);
			if (!v || parse_uid(v, &o->uid) < 0) {
				log_error("--uid needs a number in %u..%u", USERS_AGENT_UID_MIN,
					  USERS_AGENT_UID_MAX);
				return -EINVAL;
			}
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 1;
		} else {
			log_error("unknown option '%s'; see 'pistisd users --help'", a);
			return -EINVAL;
		}
	}
	return 0;
}

/* "key":value, the value one JSON string cut with a mark past 4 KiB escaped
 * (escape_json_field). */
static void print_json_str(const char *key, const char *val, bool comma)
{
	_cleanup_free_ char *esc = escape_json_field(val, 4 * 1024);

	printf("\"%s\":%s%s", key, esc ? esc : "null", comma ? "," : "");
}

/* warning: what the next ensure would refuse (show), or NULL. */
static void print_identity(const struct users_identity *id, bool json, const char *warning)
{
	if (json) {
		putchar('{');
		print_json_str("agent_id", id->agent_id, true);
		print_json_str("name", id->name, true);
		printf("\"uid\":%u,\"gid\":%u,", (unsigned)id->uid, (unsigned)id->gid);
		print_json_str("home", id->home, true);
		print_json_str("tmpdir", id->tmpdir, true);
		print_json_str("agent_dir", id->agent_dir, !!warning);
		if (warning)
			print_json_str("warning", warning, false);
		printf("}\n");
		return;
	}
	/* Agent ids are validated to [A-Za-z0-9._@+=/-]: safe to print as they are. */
	printf("agent_id=%s\nname=%s\nuid=%u\ngid=%u\nhome=%s\ntmpdir=%s\nagent_dir=%s\n",
	       id->agent_id, id->name, (unsigned)id->uid, (unsigned)id->gid, id->home, id->tmpdir,
	       id->agent_dir);
}

/* show and list: what users_check found. base: what refuses every agent; per agent, the
 * reasons by index of the listed entries (list) or in one[0] (show). */
struct warnings {
	const char *what; /* "users show", "users list" */
	const struct users_entry *v;
	size_t n;
	char base[512];
	char (*one)[512];
};

static void collect_warning(const char *agent_id, const char *why, const char *why_text,
			    void *userdata)
{
	struct warnings *w = userdata;

	/* Text on stderr, as every other log line (stdout keeps its format); the raw line
	 * for the JSON answer. */
	if (!agent_id) {
		log_warning("%s: ensure would refuse every agent: %-s", w->what, why_text);
		snprintf(w->base, sizeof(w->base), "ensure would refuse: %s", why);
		return;
	}
	log_warning("%s: ensure would refuse agent '%s': %-s", w->what, agent_id, why_text);
	for (size_t i = 0; i < w->n; i++)
		if (!w->v || !strcmp(w->v[i].agent_id, agent_id)) {
			snprintf(w->one[i], sizeof(w->one[i]), "ensure would refuse: %s", why);
			break;
		}
}

/* users_check, which only warns: a registry it cannot read (show and list just read it)
 * is one more warning, never a failure. */
static void check_etc(const struct opts *o, const char *agent_id, struct warnings *w)
{
	if (users_check(o->root, agent_id, collect_warning, w) < 0)
		collect_warning(NULL, users_last_error(), users_last_error_text(), w);
}

static int fail_exit(int r, const char *what)
{
	const char *detail = users_last_error_text(); /* text, names escaped: %-s */

	if (users_error_is_sentence(r))
		log_error_errno(r, "%s: %-s", what, detail);
	else if (detail[0])
		log_error_errno(r, "%s: %-s (%m)", what, detail);
	else
		log_error_errno(r, "%s: %m", what);
	switch (-r) {
	case EEXIST:
	case ENOENT:
	case EINVAL:
	case ERANGE:
	case E2BIG:
	case EFBIG:
	case EUSERS: /* every agent uid held: the operator's to free, no fault */
	case EPROTONOSUPPORT:
		return 1;
	default:
		return EXIT_SYSTEM;
	}
}

/* remove, once the agent's processes are gone: the SysV IPC objects it made or owns
 * (pistisd/ipc.h), which no kill reaches. Left, they went to the next agent given the uid
 * after --forget as its own (creator and owner its uid), with what the old agent had put
 * in them (red team: a queue's message, a segment's bytes read by the new agent). SysV
 * IPC is not per root: with a process of the uid still running (beside another root),
 * they are left, and said so. */
static int remove_agent_ipc(const struct opts *o, uid_t uid, bool after)
{
	_cleanup_close_ int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct ipc_obj v[1];
	size_t n = 0;
	int r;

	if (proc_fd < 0)
		return fail_exit(negative_errno(), "users remove: open /proc");
	r = ipc_agent_objects(proc_fd, uid, v, ELEMENTSOF(v), &n);
	if (r < 0)
		return fail_exit(
			r, "users remove: list the agent's SysV IPC objects in /proc/sysvipc");
	if (n == 0)
		return 0;
	if (spawn_uid_has_processes(proc_fd, uid)) {
		log_warning("users remove: agent '%s' left %zu SysV IPC object(s), kept: a process "
			    "of uid %u runs outside the root",
			    o->args[0], n, (unsigned)uid);
		return 0;
	}
	r = ipc_remove_agent_objects(proc_fd, uid);
	if (r < 0) {
		log_error(
			"users remove: cannot remove the SysV IPC objects agent '%s' left: %s; %s",
			o->args[0], strerror(-r),
			after ? "the agent was removed, they were not" : "nothing was removed");
		return EXIT_SYSTEM;
	}
	if (r > 0)
		log_notice("users remove: removed %d SysV IPC object(s) agent '%s' left (shared "
			   "memory, message queues, semaphores)",
			   r, o->args[0]);
	return 0;
}

/* The uid the registry holds for the id of a remove; (uid_t)-1 when none (users_remove
 * then says so). Returns 0 or the exit code of a failure. */
static int agent_uid(const struct opts *o, uid_t *ret)
{
	_cleanup_free_ struct users_entry *v = NULL;
	size_t n = 0;
	int r;

	*ret = (uid_t)-1;
	r = users_list(o->root, &v, &n);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return fail_exit(r, "users remove");
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].agent_id, o->args[0]))
			*ret = v[i].uid;
	return 0;
}

/* remove: the agent's processes that can reach the root are killed (SIGKILL,
 * spawn_kill_agents_reaching), then its SysV IPC objects removed (remove_agent_ipc). A
 * removed agent has no business running; and once its uid is forgotten, the next agent may
 * get it, and whatever still ran would be that agent. Done before the registry is written
 * (a failure then removes nothing) and again after (after: what started in between, a
 * command pistisd serve began for the agent while it was still in the registry, which
 * would otherwise run on as the uid's next holder; once the agent is gone from the
 * registry and /etc nothing starts for it). Returns 0, or the exit code of a failure. */
static int stop_agent(const struct opts *o, uid_t uid, bool after)
{
	_cleanup_close_ int root_fd = -1;
	unsigned killed = 0;
	int r;

	if (uid == (uid_t)-1)
		return 0;
	root_fd = open(o->root ? o->root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return fail_exit(negative_errno(), "users remove: open the root");
	r = spawn_kill_agents_reaching(root_fd, &uid, 1, &killed);
	if (r == -ETIME) {
		log_error("users remove: %u process(es) of agent '%s' still ran %d s after "
			  "SIGKILL; %s",
			  killed, o->args[0], SPAWN_KILL_AGENTS_SEC,
			  after ? "the agent was removed, but do not give its uid to another "
				  "agent before they are gone"
				: "nothing was removed");
		return EXIT_SYSTEM;
	}
	if (r < 0)
		return fail_exit(r, "users remove: list the agent's processes in /proc");
	if (killed)
		log_notice("users remove: killed %u process(es) of agent '%s' %s", killed,
			   o->args[0], after ? "started while it was being removed" : "first");
	return remove_agent_ipc(o, uid, after);
}

/* An agent this call wrote (new, or made again after a rebuild): trusted install could not
 * ask sudo what it may run (trusted_confirm_new_agent); 0, or -errno when a rule grants it
 * more and the drop-in could not be withdrawn (logged). */
static int confirm_trusted(const struct opts *o, const struct users_identity *id)
{
	return id->written ? trusted_confirm_new_agent(o->root, id->name) : 0;
}

static int need_agent_id(const struct opts *o, const char *cmd)
{
	if (o->n_args != 1) {
		log_error("'users %s' takes one AGENT_ID; see 'pistisd users --help'", cmd);
		return -EINVAL;
	}
	if (ident_agent_id_check(o->args[0]) < 0) {
		log_error("invalid agent id: 1-%d bytes of [A-Za-z0-9._@+=/-], starting with a "
			  "letter or digit",
			  USERS_AGENT_ID_MAX);
		return -EINVAL;
	}
	return 0;
}

static bool cmd_known(const char *cmd)
{
	static const char *const cmds[] = {"ensure", "show", "ensure-base", "remove", "list"};

	for (size_t i = 0; i < ELEMENTSOF(cmds); i++)
		if (!strcmp(cmd, cmds[i]))
			return true;
	return false;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels say EINVAL: pages fault in */
#endif

/* Map the binary's read-only segments (headers, code, constants) in one call each, instead
 * of a page fault per 64 KiB window as a command first runs each part of them: a `pistisd
 * users` process is short, and its faults on the code spread over the 1 MB binary cost a
 * creation 2-3 % on a VM with shadow page tables (docs/users.md, "Process start and
 * exit"). Only a hint: those pages are the page cache's, shared, never written; where the
 * kernel lacks the advice they fault in as before. */
static void map_code(void)
{
	struct self_phdr self;

	if (self_phdr_get(&self) < 0)
		return;
	for (size_t i = 0; i < self.n; i++) {
		const ElfW(Phdr) *ph = &self.ph[i];
		uintptr_t a, b;

		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
			continue;
		a = (self.bias + ph->p_vaddr) & ~(self.page - 1);
		b = self.bias + ph->p_vaddr + ph->p_filesz;
		(void)madvise((void *)a, b - a, MADV_POPULATE_READ);
	}
}

int users_cli_main(int argc, char **argv)
{
	/* Static, not malloc'd: parse_args takes at most USERS_BATCH_MAX operands, and a
	 * creation mallocs nothing else, so the process never sets up a heap (a first malloc
	 * costs a brk, a mapping and their fresh pages: docs/users.md, "Process start and
	 * exit"). Only the pages the operands fill are touched. */
	static const char *args[USERS_BATCH_MAX];
	struct opts o = {.uid = (uid_t)-1};
	const char *cmd;
	int r;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!cmd_known(cmd)) { /* before the options: `BOGUS --help` is no success */
		log_error("unknown users command '%s'; see 'pistisd users --help'", cmd);
		return EXIT_USAGE;
	}
	/* pistisd exits when this returns: what the call allocated is left to exit(2). */
	users_leave_memory_to_exit();
	map_code();
	o.args = args;
	r = parse_args(argc, argv, &o);
	if (r > 0)
		return 0;
	if (r < 0)
		return EXIT_USAGE;
	if (o.uid != (uid_t)-1 && strcmp(cmd, "ensure")) {
		log_error("--uid only applies to 'ensure'");
		return EXIT_USAGE;
	}
	if ((o.forget || o.keep_processes) && strcmp(cmd, "remove")) {
		log_error("%s only applies to 'remove'",
			  o.forget ? "--forget" : "--keep-processes");
		return EXIT_USAGE;
	}
	if (o.forget && o.keep_processes) {
		log_error("--forget with --keep-processes would hand the uid of running processes "
			  "to the next agent");
		return EXIT_USAGE;
	}

	if (!strcmp(cmd, "ensure") && o.n_args > 1) {
		_cleanup_free_ struct users_identity *ids = NULL;
		if (o.uid != (uid_t)-1) {
			log_error("--uid applies to one AGENT_ID only");
			return EXIT_USAGE;
		}
		for (int i = 0; i < o.n_args; i++)
			if (ident_agent_id_check(o.args[i]) < 0) {
				log_error("invalid agent id #%d: 1-%d bytes of [A-Za-z0-9._@+=/-], "
					  "starting with a letter or digit",
					  i + 1, USERS_AGENT_ID_MAX);
				return EXIT_USAGE;
			}
		ids = calloc((size_t)o.n_args, sizeof(*ids));
		if (!ids) {
			log_error("out of memory");
			return EXIT_SYSTEM;
		}
		r = users_ensure_many(o.root, o.args, (size_t)o.n_args, ids);
		if (r < 0)
			return fail_exit(r, "users ensure");
		for (int i = 0; i < o.n_args; i++)
			if (confirm_trusted(&o, &ids[i]) < 0)
				return EXIT_SYSTEM;
		for (int i = 0; i < o.n_args; i++) {
			if (i && !o.json)
				putchar('\n');
			print_identity(&ids[i], o.json, NULL);
		}
		return 0;
	}
	if (!strcmp(cmd, "ensure") || !strcmp(cmd, "show")) {
		struct users_identity id;
		bool ensure = !strcmp(cmd, "ensure");
		if (need_agent_id(&o, cmd) < 0)
			return EXIT_USAGE;
		r = ensure ? users_ensure(o.root, o.args[0], o.uid, &id)
			   : users_lookup(o.root, o.args[0], &id);
		if (r < 0)
			return fail_exit(r, ensure ? "users ensure" : "users show");
		if (ensure && confirm_trusted(&o, &id) < 0)
			return EXIT_SYSTEM;
		char one[1][512] = {""};
		struct warnings w = {.what = "users show", .n = 1, .one = one};
		if (!ensure)
			check_etc(&o, o.args[0], &w);
		print_identity(&id, o.json, w.base[0] ? w.base : one[0][0] ? one[0] : NULL);
		return 0;
	}
	if (!strcmp(cmd, "ensure-base")) {
		if (o.n_args) {
			log_error("'users ensure-base' takes no argument");
			return EXIT_USAGE;
		}
		r = users_ensure_base(o.root);
		if (r < 0)
			return fail_exit(r, "users ensure-base");
		if (o.json)
			printf("{\"sandbox_group\":\"%s\",\"sandbox_gid\":%u,\"tools_user\":\"%s\","
			       "\"tools_uid\":%u}\n",
			       USERS_SANDBOX_GROUP, USERS_SANDBOX_GID, USERS_TOOLS_USER,
			       USERS_TOOLS_UID);
		else
			printf("%s gid=%u\n%s uid=%u gid=%u\n", USERS_SANDBOX_GROUP,
			       USERS_SANDBOX_GID, USERS_TOOLS_USER, USERS_TOOLS_UID,
			       USERS_TOOLS_UID);
		return 0;
	}
	if (!strcmp(cmd, "remove")) {
		if (need_agent_id(&o, cmd) < 0)
			return EXIT_USAGE;
		uid_t uid = (uid_t)-1;

		if (!o.keep_processes) {
			r = agent_uid(&o, &uid);
			if (r == 0)
				r = stop_agent(&o, uid, false);
			if (r != 0)
				return r;
		}
		r = users_remove(o.root, o.args[0], o.forget);
		if (r < 0)
			return fail_exit(r, "users remove");
		if (!o.keep_processes) {
			r = stop_agent(&o, uid, true);
			if (r != 0)
				return r;
		}
		if (o.json) {
			putchar('{');
			print_json_str("agent_id", o.args[0], false);
			printf(",\"removed\":true,\"forgotten\":%s}\n",
			       o.forget ? "true" : "false");
		}
		return 0;
	}
	if (!strcmp(cmd, "list")) {
		_cleanup_free_ struct users_entry *v = NULL;
		size_t n = 0;
		if (o.n_args) {
			log_error("'users list' takes no argument");
			return EXIT_USAGE;
		}
		r = users_list(o.root, &v, &n);
		if (r < 0)
			return fail_exit(r, "users list");
		_cleanup_free_ char(*one)[512] = calloc(n ? n : 1, sizeof(*one));
		if (!one) {
			log_error("users list: out of memory");
			return EXIT_SYSTEM;
		}
		struct warnings w = {.what = "users list", .v = v, .n = n, .one = one};
		check_etc(&o, NULL, &w);
		if (o.json)
			putchar('[');
		for (size_t i = 0; i < n; i++) {
			if (o.json) {
				const char *warn = !v[i].active ? NULL
						   : w.base[0]	? w.base
						   : one[i][0]	? one[i]
								: NULL;
				printf("%s{", i ? "," : "");
				print_json_str("agent_id", v[i].agent_id, true);
				print_json_str("name", v[i].name, true);
				printf("\"uid\":%u,\"state\":\"%s\"%s", (unsigned)v[i].uid,
				       v[i].active ? "active" : "reserved", warn ? "," : "");
				if (warn)
					print_json_str("warning", warn, false);
				putchar('}');
			} else
				printf("%u\t%s\t%s\t%s\n", (unsigned)v[i].uid, v[i].name,
				       v[i].active ? "active" : "reserved", v[i].agent_id);
		}
		if (o.json)
			printf("]\n");
		return 0;
	}
	return EXIT_USAGE; /* not reached: cmd_known knows only the commands above */
}
