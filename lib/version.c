#include "lib/version.h"

#include <stdio.h>

#if __has_include(<pistis-deps-versions.h>)
#include <pistis-deps-versions.h>
#endif

#ifndef PISTIS_VERSION
#define PISTIS_VERSION "unknown"
#endif

void version_print(const char *prog, int which)
{
	printf("%s %s\n", prog, PISTIS_VERSION);
#ifdef __GLIBC__
	printf("libc: glibc %d.%d\n", __GLIBC__, __GLIBC_MINOR__);
#else
	printf("libc: musl (static)\n");
#endif
	if (which == VERSION_ALL_LIBS) {
#ifdef PISTIS_DEP_VERSIONS
		printf("linked: %s\n", PISTIS_DEP_VERSIONS);
#else
		printf("linked: the system's shared libseccomp, libcap, libacl, cJSON, OpenSSL, "
		       "libwebsockets\n");
#endif
	} else {
		printf("linked: no external libraries\n");
	}
}
