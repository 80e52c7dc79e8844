#pragma once

/* The system's CA bundle for wss:// when no --ca names one. mbedtls (the static binaries'
 * TLS) has no default trust store as OpenSSL has (/etc/ssl/certs), so the clients look for
 * the bundle file the distributions install. */

#include <stddef.h>

/* The first of the usual bundle paths that is a readable regular file, or NULL. */
const char *tls_default_ca_file(void);
