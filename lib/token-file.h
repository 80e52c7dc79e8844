#pragma once

/* One reader for the secret token files (pistis --token-file, pistisd serve --token-file):
 * reached by trust_path_open (lib/trust-path.h) from / with the rule TRUST_STICKY |
 * TRUST_RDONLY_MOUNT | TRUST_LEAF_LINK_BENEATH: every directory on the way, and on the way
 * of every link's target, root's (or also_owner's) and changeable by no one else (not
 * group/other-writable unless sticky or on a read-only mount), every link root's (or
 * also_owner's), and a link in the file's place followed only within its own directory,
 * as a Kubernetes Secret volume's files are. Then opened beneath the last directory
 * O_NOFOLLOW|O_NONBLOCK|O_NOCTTY|O_CLOEXEC (a FIFO never blocks the open) and checked on
 * the opened fd (a rename cannot swap the file between check and read): a regular file,
 * owned by root or the caller's also_owner, with none of the forbidden mode bits; at most
 * size - 1 bytes; trailing CR/LF trimmed; the rest printable ASCII without spaces (no
 * NUL, no control byte: a token goes into an HTTP header). */

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct token_file_rule {
	uid_t also_owner; /* allowed owner besides root; (uid_t)-1: root only */
	mode_t forbidden; /* mode bits that must be clear, e.g. 077 */
	/* For token_file_load's messages: what the file must be ("a regular file owned by
	 * root with mode 0600 or stricter"), and the shortest token taken (0: any). */
	const char *file_rule;
	size_t min_len;
};

struct token_file_info {
	uid_t uid;	    /* of the file, once opened */
	mode_t mode;	    /* & 07777 */
	const char *why;    /* what is wrong, a phrase after the file's name ("is a symbolic
			     * link"); NULL when the error is the errno's own (open, read) */
	char dir[PATH_MAX]; /* the directory (or link) found wanting, when why says one was */
};

/* Read the token into buf (NUL-terminated, *ret_len bytes). Returns 0, or -errno with
 * ret_info->why set for a broken rule: -ELOOP a link in the file's place that is not
 * followed, or more than 40 links on the way; -EPERM a directory or link on the way (named
 * in ret_info->dir), not a regular file, or owner or mode; -EFBIG over size - 1 bytes;
 * -EINVAL empty or a NUL, control or space byte. buf is wiped on failure, and the bytes
 * read never stay anywhere else. */
int token_file_read(const char *path, const struct token_file_rule *rule, char *buf, size_t size,
		    size_t *ret_len, struct token_file_info *ret_info);

/* token_file_read, then the length bound of rule->min_len, each failure logged in one line
 * that names the file, what is wrong with it and what it must be. Returns 0 or -errno. */
int token_file_load(const char *path, const struct token_file_rule *rule, char *buf, size_t size,
		    size_t *ret_len);
