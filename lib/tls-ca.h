#pragma once

/* The system's CA bundle for wss:// when no --ca names one. mbedtls (the static binaries'
 * TLS) has no default trust store as OpenSSL has (/etc/ssl/certs), so the clients look for
 * the bundle file the distributions install. */

#include <stddef.h>

/* The first of the usual bundle paths that is a readable regular file, or NULL. */
const char *tls_default_ca_file(void);

/* Whether the CA bundle at path may be believed: the file it names is a regular file, and
 * it, every directory on the way to it and every symbolic link's directory on that way are
 * root's and writable by no one else (root's group at most; a sticky world-writable
 * directory such as /tmp is no exception). Otherwise a local user (an agent) could add a
 * CA of its own, and a relay of its own would get the token. Returns 0, or -errno with
 * why (size bytes) naming the node and what is wrong with it: -EPERM for an owner or
 * mode, -ELOOP for too many links, -EINVAL for a node that is no directory or file. */
int tls_ca_file_check(const char *path, char *why, size_t size);
