#pragma once

enum {
	VERSION_NO_LIBS = 0,
	VERSION_ALL_LIBS = 1, /* the binary links libseccomp, libcap, libacl, cJSON, OpenSSL, lws */
};

/* "NAME VERSION" and, for binaries that link the six libraries, their versions as built
 * (the static build records them in pistis-deps-versions.h). */
void version_print(const char *prog, int which);
