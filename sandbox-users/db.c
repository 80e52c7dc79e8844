/* Pure identity decisions over an in-memory users_db: see db.h. */
#include "sandbox-users/db.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/escape.h"
#include "lib/macro.h"
#include "sandbox-users/arena.h"
#include "sandbox-users/ident.h"

#define AGENT_GECOS "pistis agent"
#define AGENT_SHELL "/bin/sh"

/* The reason twice: raw in err (for JSON, which escapes it), and in err_text with each name
 * escaped once, a quoted one's ' too (escape_vformat), for a log line's %-s: a user or group
 * name from the image's /etc may hold any byte but ':' and a newline, a quote included. */
static int fail(struct users_db *db, int r, const char *fmt, ...) _printf_(3, 4);
static int fail(struct users_db *db, int r, const char *fmt, ...)
{
	va_list ap, aq;

	va_start(ap, fmt);
	va_copy(aq, ap);
	vsnprintf(db->err, sizeof(db->err), fmt, ap);
	escape_vformat(db->err_text, sizeof(db->err_text), "cut", 0, fmt, aq);
	va_end(aq);
	va_end(ap);
	return r;
}

void users_db_done(struct users_db *db)
{
	registry_done(&db->reg);
	for (int k = 0; k < _PWFILE_KIND_MAX; k++)
		pwfile_done(&db->f[k]);
}

void users_identity_fill(struct users_identity *id, const char *agent_id, const char *name,
			 uid_t uid)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->agent_id, sizeof(id->agent_id), "%s", agent_id);
	snprintf(id->name, sizeof(id->name), "%s", name);
	id->uid = uid;
	id->gid = (gid_t)uid;
	snprintf(id->home, sizeof(id->home), "/data/sandbox-home/%s", name);
	snprintf(id->tmpdir, sizeof(id->tmpdir), "/data/sandbox-home/%s/tmp", name);
	snprintf(id->agent_dir, sizeof(id->agent_dir), "/data/agents/%s", name);
}

/* The record of agent_id, its name checked to be derived from the id (the one check the
 * registry parser leaves until a record is used). NULL with *ret (0: none, -EINVAL: a
 * corrupt record, db->err set). */
static struct registry_record *find_record(const struct users_db *db, const char *agent_id,
					   int *ret)
{
	struct registry_record *rec = registry_find_id(&db->reg, agent_id);
	const char *why = NULL;

	*ret = 0;
	if (rec && registry_verify(rec, &why) < 0) {
		*ret = fail((struct users_db *)db, -EINVAL,
			    "/data/pistis/%s:%u: %s; nothing written", USERS_REGISTRY_FILE,
			    rec->line, why);
		return NULL;
	}
	return rec;
}

/* Name of the entry at idx (for messages); the name is the line's first field. Whole: out
 * is as large as db->err (ENTRY_NAME_SIZE), so a name cut here is one the message is cut for
 * too, and its text form says so (fail). A name cut at 64 bytes inside its quotes read as
 * another, whole name. */
#define ENTRY_NAME_SIZE sizeof(((struct users_db *)0)->err)
static void entry_name(const struct pwfile *f, ssize_t idx, char *out, size_t size)
{
	const char *p = "";
	size_t n = 0;

	if (idx < 0 || pwfile_field(f, (size_t)idx, 0, &p, &n) < 0)
		n = 0;
	snprintf(out, size, "%.*s", n > INT_MAX ? INT_MAX : (int)n, p);
}

/* Whether the password field of line idx can never match a password: "!" or "*" first
 * (locked, usermod -L puts "!" before a hash), or "x" in passwd (the real one is in shadow,
 * checked there; without shadow no crypt() result is "x"). Empty means no password at all. */
static bool field_locked(const struct pwfile *f, size_t idx, bool x_ok)
{
	const char *p = "";
	size_t n = 0;

	if (pwfile_field(f, idx, 1, &p, &n) < 0 || n == 0)
		return false;
	return p[0] == '!' || p[0] == '*' || (x_ok && n == 1 && p[0] == 'x');
}

/* A user or group of pistis's (an agent, pi-sandbox, pi-tools) has one line in each file
 * of the four, its ids written as pistis writes them. NSS resolves a name by its first
 * line, and every check here looks at that line; but glibc's initgroups and musl's
 * getgrouplist read every line of /etc/group, so a second "pi-sandbox:x:0:AGENT" or
 * "AGENT:x:27:AGENT" put the agent in root's or sudo's group for su, runuser, sudo -u and
 * cron (red team), and a second passwd or shadow line is a second account of the name to
 * any tool that walks the file. A second line is refused whatever it holds, never edited
 * away. So is a leading zero in the ids of the first ("040001"): the C libraries read it
 * as 40001, but a search for ":40001:" does not find it (the lock-free fast path's uid
 * check, users.c). Lines of other names are the image's own business (duplicates or
 * leading zeros there are read as the C libraries read them). */
static int check_single_line(struct users_db *db, int k, const char *name)
{
	const struct pwfile *f = &db->f[k];
	bool user = k == PWFILE_PASSWD || k == PWFILE_SHADOW;
	ssize_t first, again;
	char ids[32] = "";

	if (!db->present[k] || (first = pwfile_find_name(f, name)) < 0)
		return 0;
	again = pwfile_find_name_from(f, name, (size_t)first + 1);
	if (again >= 0) {
		if (k == PWFILE_PASSWD || k == PWFILE_GROUP)
			snprintf(ids, sizeof(ids), ", %s %u", user ? "uid" : "gid",
				 f->lines[again].id);
		return fail(db, -EEXIST,
			    "%s '%s' has a second line in /etc/%s (line %zu%s); a %s of pistis's "
			    "has one line only: refusing",
			    user ? "user" : "group", name, pwfile_kind_name(k), (size_t)again + 1,
			    ids, user ? "user" : "group");
	}
	if (f->lines[first].padded)
		return fail(db, -EEXIST,
			    "%s '%s' in /etc/%s (line %zu) has an id written with a leading zero; "
			    "pistis's ids are plain decimal: refusing",
			    user ? "user" : "group", name, pwfile_kind_name(k), (size_t)first + 1);
	return 0;
}

/* An agent's user is a member of its own group and pi-sandbox, and of nothing else: an
 * image's /etc may name it in advance (the name is derived from the id), and a membership
 * in shadow, sudo, disk or another agent's group, or a gshadow admin entry, would give it
 * that group through newgrp, sg or gpasswd (setuid programs, which work where agents run
 * without no_new_privs) or sudoers' %group rules. pi-tools (agent false) is a member of its
 * own group only: sudo -u pi-tools gives a trusted command every group initgroups finds for
 * it, so a membership of root's group, sudo, docker or an agent's group would run an
 * agent's arguments with that group. Every other group is refused, not a list of dangerous
 * ones: no such list is complete (staff writes /usr/local/bin, which is on secure_path;
 * lxd, kvm, disk, adm...), pistis never puts pi-tools in a group, and what a trusted
 * command needs belongs in /data/.secrets. Refused, never adopted or edited. */
static int check_memberships(struct users_db *db, const char *name, bool agent)
{
	const size_t nl = strlen(name);
	char other[ENTRY_NAME_SIZE];

	for (int k = PWFILE_GROUP; k <= PWFILE_GSHADOW; k += PWFILE_GSHADOW - PWFILE_GROUP) {
		const struct pwfile *f = &db->f[k];
		/* group: name:passwd:gid:members; gshadow: name:passwd:admins:members. */
		if (!db->present[k])
			continue;
		/* The lines the names resolve to (their first, whose gids ensure_group
		 * checked; check_single_line refused any second one), not every line that
		 * bears one of the names: initgroups reads them all. */
		ssize_t own_i = pwfile_find_name(f, name),
			sb_i = agent ? pwfile_find_name(f, USERS_SANDBOX_GROUP) : -1;
		/* Indexed (users list, a batch): only the lines that list anyone. */
		size_t n_listed = 0;
		const uint32_t *listed = pwfile_listed(f, &n_listed);
		size_t n_walk = listed ? n_listed : f->n_lines;
		for (size_t j = 0; j < n_walk; j++) {
			const size_t i = listed ? listed[j] : j;
			const char *p = NULL, *m = NULL;
			size_t n = 0, mn = 0;
			if (!f->lines[i].entry || f->lines[i].deleted ||
			    pwfile_field(f, i, 3, &m, &mn) < 0 ||
			    (k == PWFILE_GSHADOW && pwfile_field(f, i, 2, &p, &n) < 0))
				continue;
			if (mn < nl && n < nl)
				continue; /* most lines (every agent's group) list no one */
			/* Its own group and pi-sandbox (every agent) may list it as a member:
			 * their member lists (pi-sandbox's is long) are not even walked. */
			bool own = (ssize_t)i == own_i || (ssize_t)i == sb_i;
			bool admin = pwfile_list_has(p, n, name);
			/* pwfile_member_has: a long list (pi-sandbox's, which pi-tools' check
			 * reads on every agent's ensure) by its set where f is indexed. */
			if (!admin && (own || !pwfile_member_has(f, i, name)))
				continue;
			entry_name(f, (ssize_t)i, other, sizeof(other));
			if (agent)
				return fail(
					db, -EEXIST,
					"user '%s' is %s of group '%s' in /etc/%s (line %zu); an "
					"agent belongs to its own group and %s only: refusing",
					name, admin ? "an administrator" : "a member", other,
					pwfile_kind_name(k), i + 1, USERS_SANDBOX_GROUP);
			return fail(db, -EEXIST,
				    "user '%s' is %s of group '%s' in /etc/%s (line %zu); trusted "
				    "commands run with its groups, and it belongs to its own group "
				    "only (take it off that line): refusing",
				    name, admin ? "an administrator" : "a member", other,
				    pwfile_kind_name(k), i + 1);
		}
	}
	return 0;
}

/* Whether field i of line idx lists no one, or only name. */
static bool field_only(const struct pwfile *f, size_t idx, unsigned i, const char *name)
{
	const char *p = "";
	size_t n = 0, nl = strlen(name);

	if (pwfile_field(f, idx, i, &p, &n) < 0)
		return false;
	return n == 0 || (n == nl && !memcmp(p, name, nl));
}

/* An existing line of one of pistis's groups, as an image may carry it: no group password
 * (newgrp and sg would let whoever knows it into the group: x, ! or * in group, ! or * in
 * gshadow), and for a private group (an agent's, pi-tools') no member or administrator but
 * its user (a member reads what the agent shares with its group, e.g. files its umask
 * leaves group-readable; in pi-tools' group, what trusted commands leave there). Refused,
 * never adopted or edited. */
static int check_group_line(struct users_db *db, const char *name, ssize_t i, bool private)
{
	const struct pwfile *gr = &db->f[PWFILE_GROUP], *gs = &db->f[PWFILE_GSHADOW];
	ssize_t j = db->present[PWFILE_GSHADOW] ? pwfile_find_name(gs, name) : -1;
	bool gr_ok;

	gr_ok = field_locked(gr, (size_t)i, true);
	if (!gr_ok || (j >= 0 && !field_locked(gs, (size_t)j, false)))
		return fail(db, -EEXIST,
			    "group '%s' has a password in /etc/%s (line %zu); it must be locked "
			    "('x', '!' or '*'): refusing to adopt it",
			    name, gr_ok ? "gshadow" : "group", (size_t)(gr_ok ? j : i) + 1);
	if (!private)
		return 0;
	gr_ok = field_only(gr, (size_t)i, 3, name);
	if (gr_ok &&
	    (j < 0 || (field_only(gs, (size_t)j, 2, "") && field_only(gs, (size_t)j, 3, name))))
		return 0;
	if (!strcmp(name, USERS_TOOLS_USER))
		return fail(db, -EEXIST,
			    "group '%s' lists members or administrators other than %s in /etc/%s "
			    "(line %zu); whoever is in it reads what trusted commands share with "
			    "their group (take them off that line): refusing to adopt it",
			    name, name, gr_ok ? "gshadow" : "group", (size_t)(gr_ok ? j : i) + 1);
	return fail(db, -EEXIST,
		    "group '%s' lists members or administrators other than its agent in /etc/%s "
		    "(line %zu); an agent's group is its own: refusing to adopt it",
		    name, gr_ok ? "gshadow" : "group", (size_t)(gr_ok ? j : i) + 1);
}

/* A private identity's uid and gid are its own (an agent's, pi-tools'): no other user has
 * its uid or its group as primary group, no other group its gid (an image's line or an
 * operator's slip would share its files, processes or group: for pi-tools, the secrets).
 * Refused with the other entry named. */
static int check_ids_private(struct users_db *db, const char *name, uint32_t uid)
{
	const struct pwfile *pw = &db->f[PWFILE_PASSWD], *gr = &db->f[PWFILE_GROUP];
	const char *who = !strcmp(name, USERS_TOOLS_USER) ? "" : "agent ";
	ssize_t mine = pwfile_find_name(pw, name), j;
	char other[ENTRY_NAME_SIZE];

	if ((j = pwfile_other_with_id(pw, uid, mine, false)) >= 0 ||
	    (j = pwfile_other_with_id(pw, uid, mine, true)) >= 0) {
		entry_name(pw, j, other, sizeof(other));
		return fail(db, -EEXIST,
			    "user '%s' in /etc/passwd shares id %u (line %zu, as uid or primary "
			    "gid) with %suser '%s'; %s ids are its own: refusing",
			    other, uid, (size_t)j + 1, who, name,
			    *who ? "an agent's" : "pi-tools'");
	}
	if ((j = pwfile_other_with_id(gr, uid, pwfile_find_name(gr, name), false)) >= 0) {
		entry_name(gr, j, other, sizeof(other));
		return fail(db, -EEXIST,
			    "group '%s' in /etc/group shares gid %u (line %zu) with %suser '%s'; "
			    "%s group is its own: refusing",
			    other, uid, (size_t)j + 1, who, name,
			    *who ? "an agent's" : "pi-tools'");
	}
	return 0;
}

/* A group called name with exactly gid (created when missing), plus its gshadow line. */
static int ensure_group(struct users_db *db, const char *name, uint32_t gid, bool private)
{
	struct pwfile *gr = &db->f[PWFILE_GROUP], *gs = &db->f[PWFILE_GSHADOW];
	char line[128], other[ENTRY_NAME_SIZE];
	ssize_t i = pwfile_find_name(gr, name);
	int r;

	r = check_single_line(db, PWFILE_GROUP, name);
	if (r >= 0)
		r = check_single_line(db, PWFILE_GSHADOW, name);
	if (r < 0)
		return r;
	if (i >= 0) {
		if (gr->lines[i].id != gid)
			return fail(db, -EEXIST,
				    "group '%s' exists in /etc/group with gid %u, expected %u",
				    name, gr->lines[i].id, gid);
	} else {
		i = pwfile_find_id(gr, gid);
		if (i >= 0) {
			entry_name(gr, i, other, sizeof(other));
			return fail(db, -EEXIST, "gid %u is taken by group '%s' in /etc/group", gid,
				    other);
		}
		snprintf(line, sizeof(line), "%s:%s:%u:", name,
			 db->present[PWFILE_GSHADOW] ? "x" : "!", gid);
		r = pwfile_append(gr, line);
		if (r < 0)
			return fail(db, r, "cannot add group '%s'", name);
		i = (ssize_t)gr->n_lines - 1;
	}
	/* Also when the group line is new: an image's gshadow line for the name (a rebuilt
	 * image, or a derivable name before the agent exists) would be adopted as it is. */
	r = check_group_line(db, name, i, private);
	if (r < 0)
		return r;
	if (db->present[PWFILE_GSHADOW] && pwfile_find_name(gs, name) < 0) {
		snprintf(line, sizeof(line), "%s:!::", name);
		r = pwfile_append(gs, line);
		if (r < 0)
			return fail(db, r, "cannot add group '%s' to /etc/gshadow", name);
	}
	return 0;
}

/* A user called name with uid and primary gid (created when missing), plus shadow. */
static int ensure_user(struct users_db *db, const char *name, uint32_t uid, const char *gecos,
		       const char *home, const char *shell)
{
	struct pwfile *pw = &db->f[PWFILE_PASSWD], *sh = &db->f[PWFILE_SHADOW];
	char line[512], other[ENTRY_NAME_SIZE];
	ssize_t i = pwfile_find_name(pw, name);
	int r;

	r = check_single_line(db, PWFILE_PASSWD, name);
	if (r >= 0)
		r = check_single_line(db, PWFILE_SHADOW, name);
	if (r < 0)
		return r;
	if (i >= 0) {
		if (pw->lines[i].id != uid || pw->lines[i].gid != uid)
			return fail(db, -EEXIST,
				    "user '%s' exists in /etc/passwd with uid %u gid %u, expected "
				    "%u",
				    name, pw->lines[i].id, pw->lines[i].gid, uid);
		/* "x" sends the lookup to shadow (locked there, or no password matches "x"). */
		if (!field_locked(pw, (size_t)i, true))
			return fail(db, -EEXIST,
				    "user '%s' has a password in /etc/passwd; its account must be "
				    "locked ('x', '!' or '*'): refusing to adopt it",
				    name);
	} else {
		i = pwfile_find_id(pw, uid);
		if (i >= 0) {
			entry_name(pw, i, other, sizeof(other));
			return fail(db, -EEXIST, "uid %u is taken by user '%s' in /etc/passwd", uid,
				    other);
		}
		snprintf(line, sizeof(line), "%s:%s:%u:%u:%s:%s:%s", name,
			 db->present[PWFILE_SHADOW] ? "x" : "!", uid, uid, gecos, home, shell);
		r = pwfile_append(pw, line);
		if (r < 0)
			return fail(db, r, "cannot add user '%s'", name);
	}
	i = db->present[PWFILE_SHADOW] ? pwfile_find_name(sh, name) : -1;
	if (i >= 0 && !field_locked(sh, (size_t)i, false))
		return fail(db, -EEXIST,
			    "user '%s' has a password in /etc/shadow; its account must be locked "
			    "('!' or '*'): refusing to adopt it",
			    name);
	if (db->present[PWFILE_SHADOW] && i < 0) {
		/* "!": no password can ever match; empty aging fields: aging disabled. */
		snprintf(line, sizeof(line), "%s:!:::::::", name);
		r = pwfile_append(sh, line);
		if (r < 0)
			return fail(db, r, "cannot add user '%s' to /etc/shadow", name);
	}
	return 0;
}

static int add_member(struct users_db *db, const char *group, const char *name)
{
	for (int k = PWFILE_GROUP; k <= PWFILE_GSHADOW; k += PWFILE_GSHADOW - PWFILE_GROUP) {
		ssize_t i;
		int r;
		if (!db->present[k])
			continue;
		i = pwfile_find_name(&db->f[k], group);
		if (i < 0)
			continue;
		r = pwfile_member_add(&db->f[k], (size_t)i, name);
		if (r < 0)
			return fail(db, r, "cannot add '%s' to group '%s'", name, group);
	}
	return 0;
}

int users_db_ensure_base(struct users_db *db)
{
	int r;

	r = ensure_group(db, USERS_SANDBOX_GROUP, USERS_SANDBOX_GID, false);
	if (r < 0)
		return r;
	/* pi-tools' group is private, as an agent's: trusted commands run in it. */
	r = ensure_group(db, USERS_TOOLS_USER, USERS_TOOLS_UID, true);
	if (r < 0)
		return r;
	r = ensure_user(db, USERS_TOOLS_USER, USERS_TOOLS_UID, "pistis trusted commands",
			"/nonexistent", db->nologin ? db->nologin : "/usr/sbin/nologin");
	if (r < 0)
		return r;
	r = check_memberships(db, USERS_TOOLS_USER, false);
	if (r < 0)
		return r;
	return check_ids_private(db, USERS_TOOLS_USER, USERS_TOOLS_UID);
}

struct taken_ctx {
	const struct users_db *db;
};

static bool name_taken(const char *name, void *userdata)
{
	const struct users_db *db = ((struct taken_ctx *)userdata)->db;

	/* Called only for an agent without a record, so any record with this name is
	 * another agent's; a user or group of that name in /etc is someone else's too. */
	return registry_find_name(&db->reg, name) ||
	       pwfile_find_name(&db->f[PWFILE_PASSWD], name) >= 0 ||
	       pwfile_find_name(&db->f[PWFILE_GROUP], name) >= 0;
}

static bool uid_used(const struct users_db *db, uint32_t uid)
{
	return registry_find_uid(&db->reg, uid) ||
	       pwfile_find_id(&db->f[PWFILE_PASSWD], uid) >= 0 ||
	       pwfile_find_id(&db->f[PWFILE_GROUP], uid) >= 0 ||
	       pwfile_other_with_id(&db->f[PWFILE_PASSWD], uid, -1, true) >= 0;
}

/* First uid from USERS_AGENT_UID_MIN free in the registry, passwd (uids and primary gids:
 * the agent's gid is its uid, and its group is its own) and group (gids), in one pass over
 * each: a bitmap of the agent range. */
static int pick_uid(struct users_db *db, uint32_t *ret)
{
	const uint32_t lo = USERS_AGENT_UID_MIN, n = USERS_AGENT_UID_MAX - USERS_AGENT_UID_MIN + 1;
	_cleanup_uarena_ uint8_t *used = uarena_calloc((n + 7) / 8, 1);

	if (!used)
		return fail(db, -ENOMEM, "out of memory");
#define MARK(x)                                                                                    \
	do {                                                                                       \
		uint32_t _x = (x);                                                                 \
		if (_x >= lo && _x - lo < n)                                                       \
			used[(_x - lo) / 8] |= (uint8_t)(1u << ((_x - lo) % 8));                   \
	} while (0)
	for (size_t i = 0; i < db->reg.n; i++)
		MARK(db->reg.recs[i].uid);
	for (int k = PWFILE_PASSWD; k <= PWFILE_GROUP; k++)
		for (size_t i = 0; i < db->f[k].n_lines; i++)
			if (db->f[k].lines[i].entry && !db->f[k].lines[i].deleted) {
				MARK(db->f[k].lines[i].id);
				if (k == PWFILE_PASSWD)
					MARK(db->f[k].lines[i].gid);
			}
#undef MARK
	for (uint32_t k = 0; k < n; k++)
		if (!(used[k / 8] & (1u << (k % 8)))) {
			*ret = lo + k;
			return 0;
		}
	/* Not ENOSPC: its "No space left on device" read as a full disk (red team, scale).
	 * Who holds the uids, and what frees one. */
	size_t reserved = 0;
	for (size_t i = 0; i < db->reg.n; i++)
		reserved += db->reg.recs[i].state != REGISTRY_ACTIVE;
	return fail(db, -EUSERS,
		    "no free uid left in %u..%u: the registry holds %zu agents (%zu active, "
		    "%zu reserved after remove; 'pistisd users remove ID --forget' frees a "
		    "reserved one's uid), /etc's users and groups the other %zu",
		    USERS_AGENT_UID_MIN, USERS_AGENT_UID_MAX, db->reg.n, db->reg.n - reserved,
		    reserved, (size_t)n > db->reg.n ? (size_t)n - db->reg.n : 0);
}

int users_db_ensure(struct users_db *db, const char *agent_id, uid_t want_uid,
		    struct users_identity *ret)
{
	struct registry_record *rec;
	char name[USERS_NAME_MAX + 1];
	struct users_identity id;
	uint32_t uid = 0;
	int r;

	db->err[0] = db->err_text[0] = '\0';
	r = ident_agent_id_check(agent_id);
	if (r < 0)
		return fail(db, r,
			    "invalid agent id: 1-%d bytes of [A-Za-z0-9._@+=/-], starting with a "
			    "letter or digit",
			    USERS_AGENT_ID_MAX);
	if (want_uid != (uid_t)-1 && !users_uid_is_agent(want_uid))
		return fail(db, -ERANGE, "uid %u is outside the agent range %u..%u",
			    (unsigned)want_uid, USERS_AGENT_UID_MIN, USERS_AGENT_UID_MAX);
	r = users_db_ensure_base(db);
	if (r < 0)
		return r;

	rec = find_record(db, agent_id, &r);
	if (r < 0)
		return r;
	if (rec) {
		if (want_uid != (uid_t)-1 && want_uid != rec->uid)
			return fail(db, -EEXIST,
				    "agent '%s' already has uid %u (user '%s'); refusing uid %u "
				    "(remove it with --forget first to change its uid)",
				    agent_id, rec->uid, rec->name, (unsigned)want_uid);
		if (rec->state != REGISTRY_ACTIVE) {
			rec->state = REGISTRY_ACTIVE;
			db->reg.changed = true;
		}
		snprintf(name, sizeof(name), "%s", rec->name);
		uid = rec->uid;
	} else {
		struct taken_ctx ctx = {db};
		r = ident_name_pick(agent_id, name_taken, &ctx, name);
		if (r < 0)
			return fail(db, r, "no free user name for agent '%s'", agent_id);
		if (want_uid != (uid_t)-1) {
			struct registry_record *o = registry_find_uid(&db->reg, want_uid);
			if (o)
				return fail(db, -EEXIST,
					    "uid %u belongs to agent '%.*s' (user '%s')",
					    (unsigned)want_uid, (int)o->id_len, o->id, o->name);
			if (uid_used(db, want_uid)) {
				ssize_t i = pwfile_find_id(&db->f[PWFILE_PASSWD], want_uid);
				char other[ENTRY_NAME_SIZE];
				bool is_user = i >= 0;
				if (!is_user)
					i = pwfile_find_id(&db->f[PWFILE_GROUP], want_uid);
				if (!is_user && i < 0) {
					i = pwfile_other_with_id(&db->f[PWFILE_PASSWD], want_uid,
								 -1, true);
					entry_name(&db->f[PWFILE_PASSWD], i, other, sizeof(other));
					return fail(db, -EEXIST,
						    "uid %u is the primary group of user '%s' in "
						    "/etc/passwd",
						    (unsigned)want_uid, other);
				}
				entry_name(&db->f[is_user ? PWFILE_PASSWD : PWFILE_GROUP], i, other,
					   sizeof(other));
				return fail(db, -EEXIST, "uid %u belongs to %s '%s' in /etc/%s",
					    (unsigned)want_uid, is_user ? "user" : "group", other,
					    is_user ? "passwd" : "group");
			}
			uid = want_uid;
		} else {
			r = pick_uid(db, &uid);
			if (r < 0)
				return r;
		}
		r = registry_add(&db->reg, uid, name, agent_id, REGISTRY_ACTIVE);
		if (r < 0)
			return fail(db, r, "cannot add agent '%s' to the registry", agent_id);
	}

	users_identity_fill(&id, agent_id, name, uid);
	r = ensure_group(db, name, uid, true);
	if (r < 0)
		return r;
	r = ensure_user(db, name, uid, AGENT_GECOS, id.home, AGENT_SHELL);
	if (r < 0)
		return r;
	r = check_memberships(db, name, true);
	if (r < 0)
		return r;
	r = check_ids_private(db, name, uid);
	if (r < 0)
		return r;
	r = add_member(db, USERS_SANDBOX_GROUP, name);
	if (r < 0)
		return r;
	if (ret)
		*ret = id;
	return 0;
}

int users_db_lookup(const struct users_db *db, const char *agent_id, struct users_identity *ret)
{
	const struct registry_record *rec;

	int r;

	if (ident_agent_id_check(agent_id) < 0)
		return -EINVAL;
	rec = find_record(db, agent_id, &r);
	if (r < 0)
		return r;
	if (!rec || rec->state != REGISTRY_ACTIVE)
		return -ENOENT;
	if (ret)
		users_identity_fill(ret, agent_id, rec->name, rec->uid);
	return 0;
}

bool users_db_is_complete(const struct users_db *db, const char *agent_id)
{
	const struct pwfile *pw = &db->f[PWFILE_PASSWD], *gr = &db->f[PWFILE_GROUP];
	const struct registry_record *rec;
	ssize_t i;
	int r;

	rec = find_record(db, agent_id, &r);
	if (!rec || rec->state != REGISTRY_ACTIVE)
		return false;
	i = pwfile_find_name(pw, rec->name);
	if (i < 0 || pw->lines[i].id != rec->uid || pw->lines[i].gid != rec->uid)
		return false;
	i = pwfile_find_name(gr, rec->name);
	if (i < 0 || gr->lines[i].id != rec->uid)
		return false;
	for (int k = PWFILE_SHADOW; k <= PWFILE_GSHADOW; k++)
		if (db->present[k] && pwfile_find_name(&db->f[k], rec->name) < 0)
			return false;
	/* The base, as ensure_base would find it. */
	i = pwfile_find_name(gr, USERS_SANDBOX_GROUP);
	if (i < 0 || gr->lines[i].id != USERS_SANDBOX_GID ||
	    !pwfile_member_has(gr, (size_t)i, rec->name))
		return false;
	if (db->present[PWFILE_GSHADOW]) {
		i = pwfile_find_name(&db->f[PWFILE_GSHADOW], USERS_SANDBOX_GROUP);
		if (i < 0 || !pwfile_member_has(&db->f[PWFILE_GSHADOW], (size_t)i, rec->name))
			return false;
		if (pwfile_find_name(&db->f[PWFILE_GSHADOW], USERS_TOOLS_USER) < 0)
			return false;
	}
	i = pwfile_find_name(gr, USERS_TOOLS_USER);
	if (i < 0 || gr->lines[i].id != USERS_TOOLS_UID)
		return false;
	i = pwfile_find_name(pw, USERS_TOOLS_USER);
	if (i < 0 || pw->lines[i].id != USERS_TOOLS_UID || pw->lines[i].gid != USERS_TOOLS_UID)
		return false;
	if (db->present[PWFILE_SHADOW] &&
	    pwfile_find_name(&db->f[PWFILE_SHADOW], USERS_TOOLS_USER) < 0)
		return false;
	return true;
}

int users_db_remove(struct users_db *db, const char *agent_id, bool forget)
{
	struct registry_record *rec;
	char name[USERS_NAME_MAX + 1];
	ssize_t i;
	int r;

	db->err[0] = db->err_text[0] = '\0';
	if (ident_agent_id_check(agent_id) < 0)
		return fail(db, -EINVAL, "invalid agent id");
	rec = find_record(db, agent_id, &r);
	if (r < 0)
		return r;
	if (!rec)
		return fail(db, -ENOENT, "agent '%s' is not in the registry", agent_id);
	snprintf(name, sizeof(name), "%s", rec->name);

	/* Every line of the name goes, not only the first (ensure refuses a second one, but
	 * remove is how the name is cleared: a line left behind would keep the account for
	 * any tool that walks the file). Any of them with another id is someone else's
	 * doing: nothing is removed. */
	for (size_t j = 0; j < 2; j++) {
		int k = j ? PWFILE_GROUP : PWFILE_PASSWD;
		const struct pwfile *f = &db->f[k];
		bool user = k == PWFILE_PASSWD;
		for (i = pwfile_find_name(f, name); i >= 0;
		     i = pwfile_find_name_from(f, name, (size_t)i + 1))
			if (f->lines[i].id != rec->uid)
				return fail(db, -EEXIST,
					    "%s '%s' in /etc/%s (line %zu) has %s %u, not the "
					    "registry's %u; not removing it",
					    user ? "user" : "group", name, pwfile_kind_name(k),
					    (size_t)i + 1, user ? "uid" : "gid", f->lines[i].id,
					    rec->uid);
	}

	for (int k = 0; k < _PWFILE_KIND_MAX; k++) {
		struct pwfile *f = &db->f[k];
		if (!db->present[k])
			continue;
		for (i = pwfile_find_name(f, name); i >= 0;
		     i = pwfile_find_name_from(f, name, (size_t)i + 1))
			pwfile_delete(f, (size_t)i);
		/* Out of every group's member list and every gshadow administrator list
		 * (gpasswd -A, an image's /etc), so a later holder of the name never inherits
		 * a membership or the right to add members. */
		if (k == PWFILE_GROUP || k == PWFILE_GSHADOW)
			for (size_t j = 0; j < f->n_lines; j++)
				if (f->lines[j].entry && !f->lines[j].deleted &&
				    (pwfile_member_remove(f, j, name) < 0 ||
				     (k == PWFILE_GSHADOW && pwfile_admin_remove(f, j, name) < 0)))
					return fail(db, -ENOMEM, "out of memory");
	}
	if (forget)
		registry_delete(&db->reg, rec);
	else if (rec->state != REGISTRY_RESERVED) {
		rec->state = REGISTRY_RESERVED;
		db->reg.changed = true;
	}
	return 0;
}
