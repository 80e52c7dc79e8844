#include "lib/tls-ca.h"

#include <sys/stat.h>
#include <unistd.h>

#include "lib/macro.h"

const char *tls_default_ca_file(void)
{
	/* Debian, Ubuntu, Alpine, Arch, Gentoo; Fedora, RHEL; openSUSE; Alpine's and the BSDs'
	 * cert.pem */
	static const char *const bundles[] = {
		"/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/ca-bundle.pem",
		"/etc/ssl/cert.pem",
	};

	for (size_t i = 0; i < ELEMENTSOF(bundles); i++) {
		struct stat st;
		if (stat(bundles[i], &st) == 0 && S_ISREG(st.st_mode) &&
		    access(bundles[i], R_OK) == 0)
			return bundles[i];
	}
	return NULL;
}
