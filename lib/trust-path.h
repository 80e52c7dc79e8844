#pragma once

/* Whether root may believe what a path names: a CA bundle or the relay's unix socket
 * (pistisd serve), a secret token file (lib/token-file.c). One walker, trust_path_open:
 * from / (a relative path from the working directory's own name), one component at a time
 * with O_PATH|O_NOFOLLOW fds, every directory reached judged on its fd before anything in
 * it is looked up, including every directory of a symbolic link's target: a link is
 * followed by hand, only when root's (or also_owner's), at most 40 of them (ELOOP beyond,
 * as the kernel). ".." is the kernel's (the parent of the directory reached, judged again).
 * It returns the last directory's fd and the leaf's name, for the caller to open the leaf
 * beneath it: the chain checked is the chain used.
 * A directory is believed when it is owned by root (or also_owner) and writable by no one
 * else: not group- or other-writable, but where the rule's flags allow a sticky directory
 * (/tmp: no one else can rename or remove what is there), one on a read-only mount (a
 * Kubernetes Secret volume, group-writable for an fsGroup), or root's group writing a
 * directory of root's that has no access ACL (root_only_writable_at: its named entries
 * would hide behind the group bits). Otherwise whoever may write it could put a node of
 * their own on the way: a CA of their own, so that a relay of their own gets the token; a
 * socket of their own, which then is the relay; a hard link to another root-only file, or
 * a directory of their choosing, in a token file's place. */

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

enum {
	TRUST_STICKY = 1 << 0,	     /* a sticky directory is believed, whoever may write it */
	TRUST_RDONLY_MOUNT = 1 << 1, /* so is one on a read-only mount */
	TRUST_ROOT_GROUP = 1 << 2,   /* root's group may write one of root's without an ACL */
	/* A symbolic link as the last component is followed only as a Kubernetes Secret
	 * volume's files need (token -> ..data/token, ..data -> ..2026_12_02_10_00_00.1): the
	 * link and its directory root's (or also_owner's), that directory not group- or
	 * other-writable (sticky or not) unless on a read-only mount; its target relative and
	 * never above that directory (no absolute link, no ".." past it, on the way either),
	 * on no other mount, and ending in no link again. Without this flag a last link is
	 * followed as any other. */
	TRUST_LEAF_LINK_BENEATH = 1 << 3,
};

struct trust_rule {
	uid_t also_owner; /* believed besides root; (uid_t)-1: root only */
	unsigned flags;	  /* TRUST_* */
};

/* What trust_path_open refused, with the node at fault (the path as walked: a link's
 * target in place of the link) in trust_fault.node and its stat in trust_fault.st. */
enum trust_fault_kind {
	TRUST_FAULT_ERRNO,	     /* a system call on node failed (the -errno returned) */
	TRUST_FAULT_NAME,	     /* the path is empty or too long (-EINVAL, -ENAMETOOLONG) */
	TRUST_FAULT_MISSING,	     /* node, on the way, is not there (-ENOENT): the directory
				 * that would hold it was believed */
	TRUST_FAULT_DIR,	     /* node is a directory not believed (-EPERM) */
	TRUST_FAULT_LINK,	     /* node is a symbolic link not root's (-EPERM) */
	TRUST_FAULT_LOOP,	     /* more than 40 symbolic links (-ELOOP) */
	TRUST_FAULT_LEAF_LINK_OWNER, /* TRUST_LEAF_LINK_BENEATH: the link or its directory
				      * is not root's (-ELOOP) */
	TRUST_FAULT_LEAF_LINK_DIR,   /* ... its directory others may write (-ELOOP) */
	TRUST_FAULT_LEAF_LINK_OUT,   /* ... it leaves its directory or ends in a link (-ELOOP) */
};

struct trust_fault {
	enum trust_fault_kind kind;
	char node[PATH_MAX];
	struct stat st; /* of node, for TRUST_FAULT_DIR and TRUST_FAULT_LINK */
};

/* Walks path by rule. Returns an O_PATH fd of the directory that holds the leaf, its name
 * in ret_leaf (NAME_MAX + 1 bytes; "." when path ends in "/", "." or ".."), fault->node
 * then naming the leaf as walked; the leaf is looked up only to follow it where it is a
 * link, so it may be missing or anything. Or -errno with *fault saying why. */
int trust_path_open(const char *path, const struct trust_rule *rule, char *ret_leaf,
		    struct trust_fault *fault);

/* One line for what trust_path_open refused (its -errno r and *fault) on the way to path,
 * for "what" (the path's use: "the CA bundle"), into why (size bytes): the node at fault,
 * its owner and mode where they are the reason, and what the rule asks of it. Returns r. */
int trust_fault_why(int r, const struct trust_fault *fault, const char *path,
		    const struct trust_rule *rule, const char *what, char *why, size_t size);

/* The regular file path names, reached by trust_path_open and believed as its directories
 * are: owned by root (or rule->also_owner) and writable by no one else (root's group only
 * on a file of root's without an access ACL, under TRUST_ROOT_GROUP). Looked at through
 * an O_PATH fd first (a device or FIFO is never opened), then opened O_RDONLY|O_NOFOLLOW
 * beneath the last directory believed and judged on that fd. Returns the fd, or -errno
 * with why (size bytes) naming the node and what is wrong: -EPERM an owner or mode, -ELOOP
 * links, -EINVAL not a regular file, -EAGAIN replaced between the two opens. */
int trust_file_open(const char *path, const struct trust_rule *rule, const char *what, char *why,
		    size_t size);

enum trust_leaf {
	TRUST_LEAF_FILE,   /* a regular file, root's and writable by no one else too */
	TRUST_LEAF_SOCKET, /* a socket, whoever's (bind-mounted from a host, say), or nothing
			    * yet where only root may make it */
};

/* For root's daemon: trust_path_open with root only and TRUST_ROOT_GROUP (no sticky or
 * read-only exception: a socket's owner is not checked, so in /tmp an agent's would pass),
 * then the leaf. Returns 0, or -errno with why (size bytes) naming the node and what is
 * wrong with it, "what" naming the path's use ("the CA bundle"): -EPERM for an owner or
 * mode, -ELOOP for too many links, -EINVAL for a node of the wrong type. */
int trust_path_check(const char *path, enum trust_leaf leaf, const char *what, char *why,
		     size_t size);
