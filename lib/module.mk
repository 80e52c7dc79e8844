LIBS += lib
lib_SRCS := lib/log.c lib/escape.c lib/fd-util.c lib/tap.c lib/version.c
lib_SRCS += lib/sha256.c lib/siphash.c
lib_SRCS += lib/env-build.c

UNIT_TESTS += test-lib
test-lib_SRCS := tests/unit/test-lib.c
test-lib_LIBS := lib
lib_SRCS += lib/proto.c
lib_SRCS += lib/mountinfo.c
lib_SRCS += lib/sig-util.c
lib_SRCS += lib/statx.c
lib_SRCS += lib/tls-ca.c
lib_SRCS += lib/token-file.c
