/* pistisd trusted: add, remove, adopt, list, check, install, harden-setuid. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/escape.h"
#include "lib/fd-util.h"
#include "lib/id-map.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "pistisd/check.h"
#include "pistisd/cli.h"
#include "policy/policy.h"
#include "sandbox-users/users.h"
#include "trusted/internal.h"
#include "trusted/trusted.h"

struct opts {
	const char *root;
	const char *agent;
	const char *keep[TRUSTED_KEEP_MAX];
	size_t n_keep;
	bool json, dry_run, no_install;
};

static void help(FILE *f)
{
	fprintf(f,
		"Usage: pistisd trusted VERB [ARGS] [--root DIR] [--json]\n\n"
		"Trusted commands: scripts an agent may run as pi-tools (the user that owns\n"
		"/data/.secrets) through sudo, and nothing else.\n\n"
		"Verbs:\n"
		"  add NAME SCRIPT       copy SCRIPT to /data/trusted/NAME (root 0755), write the\n"
		"                        wrapper /data/bin/NAME, then install\n"
		"                        (unless --no-install); SCRIPT's #! line must leave\n"
		"                        the caller's arguments to it (no sed, sed -f, sh -s),\n"
		"                        print nothing the script holds (sh -x, sh -v, perl -w,\n"
		"                        python -Wdefault, node --report-, --trace-), load no\n"
		"                        code (perl -M, node --require=) and start no debugger\n"
		"                        (node --inspect=, php -dxdebug., perl -d): only the\n"
		"                        flags docs/trusted.md lists per interpreter;\n"
		"                        a /data/bin/NAME that is not a wrapper is kept: adopt\n"
		"  remove NAME           remove the script and its wrapper, then install\n"
		"  adopt NAME            move a root-owned /data/bin/NAME into /data/trusted,\n"
		"                        then install\n"
		"  list                  the trusted commands, their SHA-256 digests, and which\n"
		"                        start clean (#!PISTISD trusted-interp INTERP)\n"
		"  check                 verify scripts (their interpreters, secure_path,\n"
		"                        pi-tools' home and shell), wrappers, secrets dir,\n"
		"                        drop-in and sudo's view\n"
		"  install               regenerate /etc/sudoers.d/pistis-trusted from\n"
		"                        /data/trusted, check it with visudo, install it,\n"
		"                        confirm with sudo -l; then warn of what agents reach\n"
		"                        without no_new_privs: setuid programs besides sudo,\n"
		"                        directories they may write on a mount without nosuid\n"
		"  harden-setuid         remove setuid/setgid from every image file but sudo\n"
		"                        and the --keep PATHs (not /proc, /sys, /dev, /data)\n\n"
		"Options:\n"
		"  --root DIR            act on the image rooted at DIR (default /); visudo and\n"
		"                        sudo run chrooted into it\n"
		"  --json                machine-readable output\n"
		"  --agent USER          confirm sudo -l for USER only (default: every\n"
		"                        pi-sandbox member)\n"
		"  --no-install          add/remove/adopt: leave sudoers alone\n"
		"  --keep PATH           harden-setuid: keep PATH's bits (repeatable, max %d)\n"
		"  --dry-run             harden-setuid: report only\n"
		"  -h, --help            this text\n\n"
		"NAME matches ^[a-z0-9][a-z0-9_-]{0,63}$. Exit: 0 ok, 1 check failed, 100 usage,\n"
		"111 system error. See docs/trusted.md.\n",
		TRUSTED_KEEP_MAX);
}

#define TRUSTED_JSON_STR_MAX 4096 /* escaped bytes of one JSON string printed */

/* One JSON string of at most TRUSTED_JSON_STR_MAX escaped bytes; a longer one is cut with
 * a mark (escape_json_field). */
static void json_str(const char *s)
{
	_cleanup_free_ char *f = escape_json_field(s, TRUSTED_JSON_STR_MAX);

	printf("%s", f ? f : "null");
}

static int no_sudo(const char *root)
{
	log_error("trusted commands need sudo: no setuid-root sudo and visudo found in '%s' "
		  "(install the distribution's sudo package in the image)",
		  root);
	return 1;
}

static int fail(int r, const char *what, const char *root)
{
	if (r == -ENOPKG)
		return no_sudo(root);
	log_error_errno(r, "%s: %m", what);
	return EXIT_SYSTEM;
}

static void print_report(const struct opts *o, const char *verb, const char *name,
			 const char *digest, const struct trusted_install_report *rep,
			 bool installed, int rc)
{
	if (o->json) {
		printf("{\"verb\":");
		json_str(verb);
		if (name) {
			printf(",\"name\":");
			json_str(name);
		}
		if (digest)
			printf(",\"digest\":\"sha256:%s\"", digest);
		if (installed)
			printf(",\"commands\":%zu,\"includedir\":%s,\"removed\":%s,\"agents_"
			       "verified\":%d,"
			       "\"agents_mismatched\":%d",
			       rep->n, rep->includedir ? "true" : "false",
			       rep->removed ? "true" : "false", rep->verified, rep->mismatched);
		if (installed && rep->withdrawn)
			printf(",\"withdrawn\":true");
		printf(",\"ok\":%s,\"message\":", rc == 0 ? "true" : "false");
		json_str(rep ? rep->message : "");
		printf("}\n");
		return;
	}
	if (name && digest)
		printf("%s %s sha256:%s\n", verb, name, digest);
	else if (name)
		printf("%s %s\n", verb, name);
	if (!installed)
		return;
	if (rep->removed)
		printf("sudoers drop-in: no trusted command left, removed\n");
	else if (rc == 0)
		printf("sudoers drop-in: %zu command(s) installed; sudo -l confirmed for %d "
		       "agent(s)%s\n",
		       rep->n, rep->verified,
		       rep->verified ? "" : " (no agent exists yet: nothing to confirm)");
	if (rc != 0)
		log_error("%-s", rep->message); /* text, its names escaped: once */
	if (rep->withdrawn)
		log_error("sudoers drop-in removed: with it agents would run without "
			  "no_new_privs, and sudo grants them more than the trusted commands; "
			  "trusted commands are off until that rule is gone and 'pistisd trusted "
			  "install' succeeds");
}

/* Installed, but agents get setuid only while every tree they share or may write is
 * nosuid: say which is not, so the operator does not learn it from sudo's "no new
 * privileges". */
static void warn_suid_trees(const char *root)
{
	_cleanup_close_ int root_fd = -1;
	char which[POLICY_PATH_MAX + 1] = "";
	const char *what = "shared tree", *blocker = trusted_setuid_blocker();
	int k;

	if (blocker)
		log_warning("trusted commands stay off for agents: %s; agents keep no_new_privs "
			    "and sudo refuses",
			    blocker);
	if (trusted_root_open(root, &root_fd) < 0)
		return;
	k = trusted_shared_tree_suid(root_fd, which, sizeof(which));
	if (k == 0) {
		what = "write rule's tree";
		k = trusted_write_tree_suid(root_fd, which, sizeof(which));
	}
	/* which is a path (a write rule's tree may have been moved by an agent): quoted, so
	 * the log escapes its quotes too */
	if (k > 0)
		log_warning("trusted commands stay off for agents while the %s '%s' is not mounted "
			    "nosuid (a setuid file one agent leaves there would run as it for "
			    "another): mount it nosuid,nodev (pistisd-entry does for the shared "
			    "trees at start-up); pistisd check lists every such tree",
			    what, which);
	else if (k < 0)
		log_warning("trusted commands stay off for agents: cannot tell whether the %s "
			    "'%s' is mounted nosuid (%s)",
			    what, which, strerror(-k));
}

/* Trusted commands take no_new_privs away from every agent: each setuid program left in
 * the image (su, mount, pkexec…) is then the agents' to run, and each directory they may
 * write on a mount that honours setuid a place to leave one for another agent. Say so
 * (pistisd check's walk), with the fix. */
#define SETID_NAME_SHOWN 96 /* escaped bytes of each setuid program named */
static void warn_setuid_inventory(const char *root)
{
	struct check_report *r = NULL;
	char names[3 * (SETID_NAME_SHOWN + ESCAPE_QUOTE_EXTRA + 2)] = "";
	size_t n = 0, len = 0;

	if (check_walk(root, &r) < 0)
		return;
	for (size_t i = 0; i < r->n_suid; i++) {
		char q[SETID_NAME_SHOWN + ESCAPE_QUOTE_EXTRA];

		if (!strcmp(path_tail(r->suid[i].path), "sudo"))
			continue;
		/* An agent may make its own files setuid and name them: each quoted and
		 * escaped, cut with a mark (names is text: %-s below). */
		if (n++ < 3)
			len += (size_t)snprintf(
				names + len, sizeof(names) - len, "%s%s", len ? ", " : "",
				escape_c_quote(r->suid[i].path, strlen(r->suid[i].path),
					       SETID_NAME_SHOWN, q, sizeof(q)));
	}
	n += r->n_suid_all - r->n_suid;
	if (n)
		log_warning(
			"agents run without no_new_privs while trusted commands are configured, "
			"and %zu setuid/setgid or capability program(s) besides sudo are in the "
			"image (%-s%s): run `pistisd trusted harden-setuid` (--keep what agents "
			"need); pistisd check lists them",
			n, names, n > 3 ? ", ..." : "");
	if (r->n_writable)
		log_warning("%zu director%s agents may write %s on a mount without nosuid (%-s%s): "
			    "a setuid file one agent leaves there runs as it for another; mount "
			    "them nosuid,nodev or take the write access away (pistisd check: "
			    "agent_writable)",
			    r->n_writable, r->n_writable == 1 ? "y" : "ies",
			    r->n_writable == 1 ? "is" : "are", r->writable,
			    r->n_writable > CHECK_WRITABLE_SHOWN ? ", ..." : "");
	else if (r->walk_truncated)
		log_warning("the walk of the image stopped at a limit before it was done: cannot "
			    "tell whether agents may write a directory on a mount without nosuid "
			    "(pistisd check: agent_writable)");
	check_report_free(r);
}

/* A trusted command runs as pi-tools through sudo, which sets pi-tools' groups: in a user
 * namespace that maps no uid 10002, or denies setgroups, add got as far as "Failed to
 * prepare /data/.secrets: Invalid argument" (its chown) with /data/trusted already
 * changed, and no sudo could ever have run it. Refuse first, naming why. */
static bool ids_mapped(void)
{
	const struct id_map_need base[] = USERS_ID_MAP_BASE;
	char why[512];

	if (id_map_check_needs(base, ELEMENTSOF(base), true, why, sizeof(why)) == 0)
		return true;
	log_error("Refusing: %s; trusted commands run as pi-tools through sudo, which needs both "
		  "(pistisd check: id_map)",
		  why);
	return false;
}

static int do_install(const struct opts *o, const char *verb, const char *name, const char *digest)
{
	struct trusted_install_report rep;
	int r;

	char why[512];

	r = trusted_secrets_ensure(o->root, why, sizeof(why));
	if (r < 0)
		return fail(r, "Failed to prepare /data/.secrets", o->root);
	if (r) {
		log_error("Refusing /data/.secrets: %-s", why);
		return EXIT_FAILURE;
	}
	r = trusted_install(o->root, o->agent, &rep);
	/* add and remove have changed /data/trusted already: say where that leaves sudo when
	 * the previous drop-in is still the one in place (a full /etc or /data left the
	 * operator guessing whether the command was on). */
	if (r < 0 && r != -ENOPKG && name && strcmp(verb, "unchanged") && !rep.replaced &&
	    !rep.removed) {
		log_error_errno(
			r,
			"Failed to install the sudoers drop-in: %m; '%s' is %s in "
			"/data/trusted, but sudo keeps the previous drop-in, %s: run "
			"'pistisd trusted install' once this is fixed",
			name, verb,
			strcmp(verb, "removed")
				? "which does not grant this script"
				: "which still names it (its script is gone: nothing runs)");
		return EXIT_SYSTEM;
	}
	if (r < 0)
		return fail(r, "Failed to install the sudoers drop-in", o->root);
	print_report(o, verb, name, digest, &rep, true, r);
	if (r == 0 && !rep.removed) {
		warn_suid_trees(o->root);
		warn_setuid_inventory(o->root);
	}
	return r;
}

static int verb_add(const struct opts *o, const char *name, const char *script)
{
	char digest[SHA256_HEX_SIZE], why[1024] = "";
	_cleanup_close_ int fd = -1;
	int r;

	r = trusted_open_script(script, &fd);
	if (r == -ELOOP) {
		log_error("'%s' is a symlink: give the script itself", script);
		return 1;
	}
	if (r < 0)
		return fail(r, "Failed to open the script", o->root);
	r = trusted_add_fd(o->root, name, fd, digest, why, sizeof(why));
	if (r == -ENOEXEC) {
		log_error("'%s' not added: %-s", script, why);
		return 1;
	}
	if (r == -EPERM) {
		log_error(
			"'%s' must be owned by root and writable by no one else (chown root, chmod "
			"go-w), and /data, /data/trusted and /data/bin root's alone",
			script);
		return 1;
	}
	if (r == -EBADFD) {
		log_error("'%s' is not a regular file", script);
		return 1;
	}
	if (r == -EEXIST) {
		log_error("/data/bin/%s is there and is not a trusted command's wrapper: not "
			  "replaced. `pistisd trusted adopt %s` makes that script the trusted "
			  "command; or remove it first",
			  name, name);
		return 1;
	}
	if (r == -EFBIG) {
		log_error("'%s' is larger than %d bytes", script, TRUSTED_SCRIPT_MAX);
		return 1;
	}
	if (r < 0 && r != -ENOPKG && why[0]) {
		log_error_errno(r, "Failed to add the trusted command: %-s (%m)", why);
		return EXIT_SYSTEM;
	}
	if (r < 0)
		return fail(r, "Failed to add the trusted command", o->root);
	if (o->no_install) {
		print_report(o, "added", name, digest, NULL, false, 0);
		return 0;
	}
	return do_install(o, "added", name, digest);
}

/* Whether the installed drop-in names /data/trusted/NAME. */
static bool dropin_names(const char *root, const char *name)
{
	_cleanup_close_ int root_fd = -1, dir_fd = -1;
	_cleanup_free_ char *text = NULL;
	char path[128];
	size_t len = 0, pl;

	if (trusted_root_open(root, &root_fd) < 0 ||
	    trusted_open_dir(root_fd, TRUSTED_SUDOERS_DIR, false, 0755, 0, 0, false, &dir_fd) < 0 ||
	    trusted_read_file(dir_fd, TRUSTED_DROPIN_NAME, 4 * 1024 * 1024, &text, &len) < 0)
		return false;
	pl = (size_t)snprintf(path, sizeof(path), "/data/trusted/%s", name);
	for (const char *p = text; (p = strstr(p, path)); p += pl)
		if (!p[pl] || strchr(" ,\n\"", p[pl]))
			return true;
	return false;
}

static int verb_remove(const struct opts *o, const char *name)
{
	int r = trusted_remove(o->root, name);

	/* Script and wrapper gone, but a remove cut short before its install left the
	 * drop-in naming the script: the install is what is left to do. */
	if (r == -ENOENT && !o->no_install && dropin_names(o->root, name))
		r = 0;
	if (r == -ENOENT) {
		log_error("no trusted command '%s'", name);
		return 1;
	}
	if (r < 0 && r != -ENOPKG) {
		/* the name is checked: no byte of it needs escaping */
		log_error_errno(r,
				"Failed to remove the trusted command: /data/trusted/%s or its "
				"wrapper /data/bin/%s (%m); sudo's drop-in is unchanged: remove it "
				"again",
				name, name);
		return EXIT_SYSTEM;
	}
	if (r < 0)
		return fail(r, "Failed to remove the trusted command", o->root);
	if (o->no_install) {
		print_report(o, "removed", name, NULL, NULL, false, 0);
		return 0;
	}
	return do_install(o, "removed", name, NULL);
}

static int verb_adopt(const struct opts *o, const char *name)
{
	char why[256];
	int r = trusted_adopt_from_bin(o->root, name);

	if (trusted_adopt_strerror(r, name, why, sizeof(why))) {
		log_error("%s%s", why,
			  r == -ENOEXEC ? " (`pistisd trusted add` of a copy says which)" : "");
		return 1;
	}
	if (r < 0)
		return fail(r, "Failed to adopt the script", o->root);
	if (o->no_install) {
		print_report(o, r == 1 ? "unchanged" : "adopted", name, NULL, NULL, false, 0);
		return 0;
	}
	return do_install(o, r == 1 ? "unchanged" : "adopted", name, NULL);
}

static int verb_list(const struct opts *o)
{
	_cleanup_free_ struct trusted_entry *v = NULL;
	size_t n = 0, skipped = 0, i;
	int r = trusted_list(o->root, &v, &n, &skipped);

	if (r < 0)
		return fail(r, "Failed to list /data/trusted", o->root);
	if (o->json)
		printf("{\"commands\":[");
	for (i = 0; i < n; i++) {
		if (o->json) {
			printf("%s{\"name\":\"%s\",\"digest\":\"sha256:%s\",\"owner\":%u,\"mode\":"
			       "\"%04o\",\"clean_start\":%s}",
			       i ? "," : "", v[i].name, v[i].digest, (unsigned)v[i].uid,
			       (unsigned)v[i].mode, v[i].clean_start ? "true" : "false");
		} else {
			printf("%-24s sha256:%s%s%s\n", v[i].name, v[i].digest,
			       v[i].clean_start ? "  clean start" : "",
			       v[i].uid != 0 || v[i].mode != 0755 ? "  (not root 0755!)" : "");
		}
	}
	if (o->json)
		printf("],\"skipped\":%zu}\n", skipped);
	else if (skipped)
		printf("(%zu file(s) in /data/trusted with invalid names ignored)\n", skipped);
	return 0;
}

static int verb_check(const struct opts *o)
{
	_cleanup_free_ struct trusted_entry *v = NULL;
	char why[1024], sudo[256];
	size_t n = 0, i, problems = 0;
	const char *failed = NULL; /* a check that could not be made: what it was */
	int r, ret = 0, failed_r = 0;

	if (o->json)
		printf("{\"problems\":[");
#define PROBLEM(...)                                                                               \
	do {                                                                                       \
		char _m[1200];                                                                     \
		snprintf(_m, sizeof(_m), __VA_ARGS__);                                             \
		if (o->json) {                                                                     \
			printf("%s", problems ? "," : "");                                         \
			json_str(_m);                                                              \
		} else {                                                                           \
			char _e[4 * sizeof(_m)];                                                   \
			escape_ctl(_m, strlen(_m), _e, sizeof(_e));                                \
			printf("FAIL %s\n", _e);                                                   \
		}                                                                                  \
		problems++;                                                                        \
	} while (0)
/* A check that cannot be made ends the report, which stays one JSON document ("ok":false
 * and what failed) rather than the "{\"problems\":[" begun above. */
#define CHECK_FAILED(r, what)                                                                      \
	do {                                                                                       \
		ret = fail((r), (what), o->root);                                                  \
		failed = (what);                                                                   \
		failed_r = (r);                                                                    \
		goto out;                                                                          \
	} while (0)

	if (trusted_find_sudo(o->root, sudo, sizeof(sudo), NULL, 0) < 0) {
		PROBLEM("trusted commands need sudo: no setuid-root sudo and visudo in the image");
		goto out;
	}
	r = trusted_list(o->root, &v, &n, NULL);
	if (r < 0)
		CHECK_FAILED(r, "Failed to list /data/trusted");
	if (n > 0) {
		r = trusted_secure_path_check(o->root, why, sizeof(why));
		if (r < 0)
			CHECK_FAILED(r, "Failed to check secure_path and pi-tools' home");
		if (r)
			PROBLEM("%s", why);
	}
	for (i = 0; i < n; i++) {
		if (v[i].uid != 0 || v[i].mode != 0755)
			PROBLEM("/data/trusted/%s is not root-owned 0755", v[i].name);
		r = trusted_scripts_interp_check(o->root, &v[i], 1, why, sizeof(why));
		if (r < 0)
			CHECK_FAILED(r, "Failed to check a script's interpreter");
		if (r)
			PROBLEM("%s", why);
		r = trusted_wrapper_check(o->root, v[i].name, why, sizeof(why));
		if (r < 0)
			CHECK_FAILED(r, "Failed to check a wrapper");
		if (r)
			PROBLEM("%s", why);
	}
	r = trusted_secrets_check(o->root, why, sizeof(why));
	if (r < 0)
		CHECK_FAILED(r, "Failed to check /data/.secrets");
	if (r)
		PROBLEM("%s", why);
	r = trusted_dropin_current(o->root, why, sizeof(why));
	if (r < 0)
		CHECK_FAILED(r, "Failed to read the sudoers drop-in");
	if (r)
		PROBLEM("%s", why);
	r = trusted_check_sudoers(o->root, why, sizeof(why));
	if (r < 0)
		CHECK_FAILED(r, "Failed to run visudo");
	if (r)
		PROBLEM("%s", why);
	if (n > 0) {
		struct trusted_install_report rep = {0};

		r = trusted_verify_agents(o->root, o->agent, &rep);
		if (r < 0)
			CHECK_FAILED(r, "Failed to run sudo -l");
		if (r)
			PROBLEM("%s", rep.message);
	}
out:
	if (o->json) {
		printf("],\"commands\":%zu,\"ok\":%s", n, problems || failed ? "false" : "true");
		if (failed) {
			char e[256];

			snprintf(e, sizeof(e), "%s: %s", failed, strerror(-failed_r));
			printf(",\"error\":");
			json_str(e);
		}
		printf("}\n");
	} else if (!problems && !failed)
		printf("ok: %zu trusted command(s), drop-in current, sudo agrees\n", n);
#undef PROBLEM
#undef CHECK_FAILED
	return failed ? ret : problems ? 1 : 0;
}

struct setid_print {
	const struct opts *o;
	size_t n;
};

static void setid_cb(const struct trusted_setid_file *f, void *userdata)
{
	struct setid_print *p = userdata;

	if (p->o->json) {
		_cleanup_free_ char *path = escape_json_field(f->path, TRUSTED_JSON_STR_MAX);

		printf("%s{\"path\":%s,\"mode\":\"%04o\",\"uid\":%u,\"gid\":%u,\"caps\":%s,"
		       "\"kept\":%s,\"changed\":%s}",
		       p->n ? "," : "", path ? path : "null", (unsigned)(f->mode & 07777),
		       (unsigned)f->uid, (unsigned)f->gid, f->caps ? "true" : "false",
		       f->kept ? "true" : "false", f->changed ? "true" : "false");
	} else {
		/* "caps": the file carries capabilities (security.capability), which go with
		 * the setid bits. The path whole: the walk bounds it (PATH_MAX). */
		_cleanup_free_ char *path = escape_c_dup(f->path);

		printf("%-7s %04o -> %04o %-4s %s\n",
		       f->kept	    ? "kept"
		       : f->changed ? "cleared"
				    : "would",
		       (unsigned)(f->mode & 07777),
		       (unsigned)(f->kept ? f->mode & 07777 : f->mode & 0777),
		       f->caps ? "caps" : "", path ? path : "?");
	}
	p->n++;
}

static int verb_harden(const struct opts *o)
{
	struct setid_print p = {.o = o};
	char why[768];
	int r;

	if (o->json)
		printf("{\"files\":[");
	r = trusted_harden_setuid(o->root, o->keep, o->n_keep, o->dry_run ? TRUSTED_DRY_RUN : 0,
				  setid_cb, &p, why, sizeof(why));
	if (o->json) {
		char e[4 * sizeof(why)];

		escape_json(why, strlen(why), e, sizeof(e));
		printf("],\"ok\":%s,\"incomplete\":%s%s%s}\n", r == 0 ? "true" : "false",
		       r == 1 ? "\"" : "null", r == 1 ? e : "", r == 1 ? "\"" : "");
	}
	if (r < 0)
		return fail(r, "Failed to walk the image for setuid/setgid files", o->root);
	if (r == 1) {
		/* why is text: %-s escapes its control bytes, not its escapes a second time */
		log_error("harden-setuid: %-s; remove or flatten them and run it again", why);
		return 1;
	}
	return 0;
}

/* add, remove, adopt and install: one at a time in a root (trusted_lock), waiting for
 * another for up to TRUSTED_LOCK_WAIT_S and saying so. */
static int take_lock(const struct opts *o, int *ret_fd)
{
	_cleanup_close_ int root_fd = -1;
	int r = trusted_root_open(o->root, &root_fd);

	if (r >= 0)
		r = trusted_lock(root_fd, 0, ret_fd);
	if (r == -EWOULDBLOCK) {
		log_notice("Another trusted add, remove, adopt or install is running in this root "
			   "(it holds /%s); waiting for it",
			   TRUSTED_LOCK);
		r = trusted_lock(root_fd, TRUSTED_LOCK_WAIT_S * 1000u, ret_fd);
	}
	if (r == -EWOULDBLOCK)
		log_error("Another trusted add, remove, adopt or install still runs in this root "
			  "after %d s (it holds /%s); nothing done",
			  TRUSTED_LOCK_WAIT_S, TRUSTED_LOCK);
	else if (r == -EPERM)
		log_error("Cannot lock /%s: it or /data/pistis is not root's alone (owner root, "
			  "no group or other write; the lock file 0600); nothing done",
			  TRUSTED_LOCK);
	else if (r == -EBADFD || r == -EISDIR || r == -ELOOP)
		log_error("Cannot lock /%s: not a regular file with one link (remove it); "
			  "nothing done",
			  TRUSTED_LOCK);
	else if (r < 0)
		log_error_errno(r, "Failed to lock /%s: %m; nothing done", TRUSTED_LOCK);
	return r < 0 ? EXIT_SYSTEM : 0;
}

static bool verb_known(const char *verb)
{
	static const char *const verbs[] = {"add",   "remove",	"adopt",	"list",
					    "check", "install", "harden-setuid"};

	for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
		if (!strcmp(verb, verbs[i]))
			return true;
	return false;
}

int trusted_cli_main(int argc, char **argv)
{
	enum { OPT_ROOT = 0x100, OPT_JSON, OPT_AGENT, OPT_NO_INSTALL, OPT_KEEP, OPT_DRY_RUN };
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{"root", required_argument, NULL, OPT_ROOT},
		{"json", no_argument, NULL, OPT_JSON},
		{"agent", required_argument, NULL, OPT_AGENT},
		{"no-install", no_argument, NULL, OPT_NO_INSTALL},
		{"keep", required_argument, NULL, OPT_KEEP},
		{"dry-run", no_argument, NULL, OPT_DRY_RUN},
		{0},
	};
	struct opts o = {.root = "/"};
	_cleanup_close_ int lock_fd = -1;
	const char *verb, *name = NULL;
	int c, nargs;

	if (argc < 2) {
		help(stderr);
		return EXIT_USAGE;
	}
	verb = argv[1];
	if (!strcmp(verb, "--help") || !strcmp(verb, "-h") || !strcmp(verb, "help")) {
		help(stdout);
		return 0;
	}
	if (!verb_known(verb)) { /* before the options: `BOGUS --help` is no success */
		log_error("unknown verb '%s'; see 'pistisd trusted --help'", verb);
		return EXIT_USAGE;
	}
	optind = 1;
	opterr = 0; /* getopt would print a bad option raw: log_bad_option escapes it */
	while ((c = getopt_long(argc - 1, argv + 1, "h", longopts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help(stdout);
			return 0;
		case OPT_ROOT:
			o.root = optarg;
			break;
		case OPT_JSON:
			o.json = true;
			log_set_format(LOG_FORMAT_JSON);
			break;
		case OPT_AGENT:
			o.agent = optarg;
			break;
		case OPT_NO_INSTALL:
			o.no_install = true;
			break;
		case OPT_KEEP:
			if (o.n_keep >= TRUSTED_KEEP_MAX) {
				log_error("at most %d --keep paths", TRUSTED_KEEP_MAX);
				return EXIT_USAGE;
			}
			o.keep[o.n_keep++] = optarg;
			break;
		case OPT_DRY_RUN:
			o.dry_run = true;
			break;
		default:
			log_bad_option(argv + 1, optind, optopt, "pistisd trusted --help");
			return EXIT_USAGE;
		}
	}
	if (o.root[0] != '/') {
		log_error("--root needs an absolute path, got '%s'", o.root);
		return EXIT_USAGE;
	}
	nargs = argc - 1 - optind;
	char **args = argv + 1 + optind;

	if (!strcmp(verb, "add") || !strcmp(verb, "remove") || !strcmp(verb, "adopt")) {
		if (nargs != (!strcmp(verb, "add") ? 2 : 1)) {
			log_error("usage: pistisd trusted %s NAME%s", verb,
				  !strcmp(verb, "add") ? " SCRIPT" : "");
			return EXIT_USAGE;
		}
		name = args[0];
		if (!trusted_name_valid(name)) {
			/* the log escapes the name, once */
			log_error("invalid name '%s': use ^[a-z0-9][a-z0-9_-]{0,63}$ (no '.', '~', "
				  "'/' or upper case)",
				  name);
			return EXIT_USAGE;
		}
		if (strcmp(verb, "remove") && !ids_mapped())
			return EXIT_SYSTEM;
		if (take_lock(&o, &lock_fd))
			return EXIT_SYSTEM;
		if (!strcmp(verb, "add"))
			return verb_add(&o, name, args[1]);
		if (!strcmp(verb, "remove"))
			return verb_remove(&o, name);
		return verb_adopt(&o, name);
	}
	if (nargs != 0) {
		log_error("'%s' takes no arguments; see 'pistisd trusted --help'", verb);
		return EXIT_USAGE;
	}
	if (!strcmp(verb, "list"))
		return verb_list(&o);
	if (!strcmp(verb, "check"))
		return verb_check(&o);
	if (!strcmp(verb, "install"))
		return !ids_mapped()		 ? EXIT_SYSTEM
		       : take_lock(&o, &lock_fd) ? EXIT_SYSTEM
						 : do_install(&o, "installed", NULL, NULL);
	return verb_harden(&o); /* the last of verb_known's */
}
