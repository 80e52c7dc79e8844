#pragma once

/* Pure parser and editor for /etc/passwd, /etc/group, /etc/shadow and /etc/gshadow.
 * No I/O: the caller hands in the bytes of the very file it is about to rewrite and gets
 * back the bytes to write. Every line this module did not create or edit is written back
 * byte for byte (comments, blank lines, CRLF, NIS "+"/"-" lines, a missing final newline
 * is completed only when a line is appended after it). A NIS line with fields is also an
 * entry, named with its sign, as the C libraries read it (check_line in pwfile.c). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum pwfile_kind {
	PWFILE_PASSWD,	/* name:passwd:uid:gid:gecos:home:shell */
	PWFILE_GROUP,	/* name:passwd:gid:members */
	PWFILE_SHADOW,	/* name:passwd:lastchg:min:max:warn:inactive:expire:reserved */
	PWFILE_GSHADOW, /* name:passwd:admins:members */
	_PWFILE_KIND_MAX,
};

/* Limits on untrusted files (a root-owned /etc may still come from any image). */
#define PWFILE_LINE_MAX 4096		 /* passwd/shadow: bytes per line, without the terminator */
#define PWFILE_GROUP_LINE_MAX (2u << 20) /* group/gshadow: pi-sandbox lists every agent */
#define PWFILE_SIZE_MAX (32u << 20)	 /* bytes per file */
#define PWFILE_LINES_MAX 500000u	 /* lines per file */
#define PWFILE_MEMBERS_MAX 100000u	 /* members of one group */
#define PWFILE_ID_MAX 4294967294u	 /* (uid_t)-1 is never an id */
#define PWFILE_ID_NONE 4294967295u	 /* a NIS compat line's empty id: matches no id */

/* 32 bytes: one per line of every file, on every call. Offsets and lengths fit 32 bits
 * (files are at most PWFILE_SIZE_MAX bytes). */
struct pwfile_line {
	uint32_t off, len; /* the line in the original buffer, terminator excluded (len:
			    * repl's length where there is one) */
	uint32_t name_len; /* entries: the name is at off */
	uint32_t id;	   /* passwd: uid; group: gid; others: 0 */
	uint32_t gid;	   /* passwd: the primary gid */
	uint8_t term;	   /* terminator bytes: 0 (last line), 1 "\n", 2 "\r\n" */
	bool entry;	   /* a parsed entry (not a comment, blank or bare NIS "+"/"-name") */
	bool deleted;
	bool padded; /* passwd/group: an id written with a leading zero ("040001", which the C
		      * libraries read as 40001) */
	char *repl;  /* edited or appended line (without terminator), owned (uarena_alloc) */
};
_Static_assert(PWFILE_SIZE_MAX <= UINT32_MAX, "line offsets are 32 bits");

struct pwfile {
	enum pwfile_kind kind;
	char *buf; /* the original bytes, owned */
	size_t len;
	struct pwfile_line *lines;
	size_t n_lines, cap_lines;
	size_t n_orig; /* lines that came from buf */
	bool changed;
	struct pwfile_index *ix; /* lookup tables (pwfile_index), or NULL */
};

/* Parse len bytes (copied). On a malformed line returns -EINVAL and sets *ret_line to its
 * 1-based number and ret_why (if not NULL) to a static reason. One pass over the bytes. */
int pwfile_parse(enum pwfile_kind kind, const char *data, size_t len, struct pwfile *ret,
		 size_t *ret_line, const char **ret_why);
/* The same over a buffer from malloc or uarena_alloc (sandbox-users/arena.h) that the
 * pwfile takes over (freed on failure too). */
int pwfile_parse_owned(enum pwfile_kind kind, char *buf, size_t len, struct pwfile *ret,
		       size_t *ret_line, const char **ret_why);
void pwfile_done(struct pwfile *f);

/* Serialise into a malloc'd buffer (the bytes to write). */
int pwfile_format(const struct pwfile *f, char **ret, size_t *ret_len);
/* The same bytes as pieces pointing into f (valid until f changes): runs of unedited lines
 * are one piece each, so nothing is copied. *ret is from uarena_alloc (uarena_free it). */
struct iovec;
int pwfile_iov(const struct pwfile *f, struct iovec **ret, size_t *ret_n);

/* Index of the first live entry named name / with id (passwd uid, group gid), or -1. */
ssize_t pwfile_find_name(const struct pwfile *f, const char *name);
ssize_t pwfile_find_id(const struct pwfile *f, uint32_t id);
/* Index of the first live entry named name from line index from on, or -1. */
ssize_t pwfile_find_name_from(const struct pwfile *f, const char *name, size_t from);

/* The first live entry other than line skip whose id (passwd: uid, group: gid) is id, or
 * with passwd_gid the first passwd entry other than skip whose primary gid is id; -1. */
ssize_t pwfile_other_with_id(const struct pwfile *f, uint32_t id, ssize_t skip, bool passwd_gid);

/* Lookup tables for a caller that asks about many names of one file (users list, a batch
 * ensure): each find above in O(1) instead of a walk over every line, which made checking
 * N agents cost N² (5,000 agents: 3.2 s for `users list`). Built over the live entries;
 * kept up to date by pwfile_append and pwfile_member_add, dropped by any other change
 * (the finds then walk the lines again). Without it every find walks, as a single ensure
 * does (building the tables would cost it more than its few finds). 0 or -ENOMEM. */
int pwfile_index(struct pwfile *f);
/* group/gshadow, indexed: the lines whose member (group) or administrator or member
 * (gshadow) list is not empty, and *ret_n their count; NULL when f is not indexed. A line
 * in it may be deleted or hold an empty list since. */
const uint32_t *pwfile_listed(const struct pwfile *f, size_t *ret_n);

/* Field i (0-based) of entry idx, as a pointer/length into the current line text. */
int pwfile_field(const struct pwfile *f, size_t idx, unsigned i, const char **ret, size_t *ret_len);

/* Append a new entry line (validated against the kind's grammar, no terminator). */
int pwfile_append(struct pwfile *f, const char *line);
/* Remove entry idx. */
void pwfile_delete(struct pwfile *f, size_t idx);

/* group/gshadow: add or remove name in the members (last) field of entry idx; no-op when
 * already (not) there. Returns 1 when the line changed, 0 when not, -errno. */
int pwfile_member_add(struct pwfile *f, size_t idx, const char *name);
int pwfile_member_remove(struct pwfile *f, size_t idx, const char *name);
/* gshadow: remove name from the administrators (third) field of entry idx, keeping the
 * rest of the line byte for byte. Returns 1 when the line changed, 0 when not, -errno. */
int pwfile_admin_remove(struct pwfile *f, size_t idx, const char *name);
/* Whether name is one of the comma-separated entries in p[0..n), white space before an
 * entry skipped as glibc's nss_files does (" name" is name). The one rule for every member
 * and administrator test, and for what pwfile_member_remove and pwfile_admin_remove drop. */
bool pwfile_list_has(const char *p, size_t n, const char *name);
/* True when name is listed in the members field of entry idx. */
bool pwfile_member_has(const struct pwfile *f, size_t idx, const char *name);

/* Without parsing the whole file: find the first entry line named name in data (as
 * pwfile_find_name would after a full parse) and check that one line strictly. Returns 0
 * and fills *ret (offsets into data; name_len, id, gid), -ENOENT, or -EINVAL. For the
 * read-only fast path; anything that writes parses the whole file first. */
int pwfile_scan(enum pwfile_kind kind, const char *data, size_t len, const char *name,
		struct pwfile_line *ret);
/* pwfile_scan for up to PWFILE_SCAN_NAMES_MAX names in one pass over data, for the fast
 * path's looks at one file: ret[i].r is what pwfile_scan(names[i]) returns, ret[i].line
 * its line, and ret[i].second whether a later line starts with "names[i]:" too (db.c
 * refuses a second line of pistis's names). Returns -EINVAL for a bad kind, count or name,
 * else 0. */
#define PWFILE_SCAN_NAMES_MAX 4
struct pwfile_found {
	struct pwfile_line line;
	int r;
	bool second;
};
int pwfile_scan_names(enum pwfile_kind kind, const char *data, size_t len, const char *const *names,
		      size_t n, struct pwfile_found *ret);
/* Member test on a line found by pwfile_scan (group/gshadow). */
bool pwfile_scan_member_has(enum pwfile_kind kind, const char *data, const struct pwfile_line *l,
			    const char *name);

/* Name of a file kind ("passwd", …), for messages and paths. */
const char *pwfile_kind_name(enum pwfile_kind kind);
