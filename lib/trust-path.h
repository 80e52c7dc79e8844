#pragma once

/* Whether a path root's daemon is about to trust (a CA bundle, the relay's unix socket) may be
 * believed: every directory on the way to it, and every symbolic link's directory on that
 * way (links are followed by hand, at most 40), is root's and writable by no one else
 * (root's group at most, and then with no access ACL: root_only_writable_at; a sticky
 * world-writable directory such as /tmp is no exception).
 * Otherwise a local user (an agent) could put a node of its own there: a CA of its own, so
 * that a relay of its own gets the token, or a socket of its own, which then is the relay. */

#include <stddef.h>

enum trust_leaf {
	TRUST_LEAF_FILE,   /* a regular file, root's and writable by no one else too */
	TRUST_LEAF_SOCKET, /* a socket, whoever's (bind-mounted from a host, say), or nothing
			    * yet where only root may make it */
};

/* Returns 0, or -errno with why (size bytes) naming the node and what is wrong with it,
 * "what" naming the path's use ("the CA bundle"): -EPERM for an owner or mode, -ELOOP for
 * too many links, -EINVAL for a node of the wrong type. */
int trust_path_check(const char *path, enum trust_leaf leaf, const char *what, char *why,
		     size_t size);
