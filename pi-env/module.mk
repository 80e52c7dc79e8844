# pi-env: the chain-loader. The builder itself is lib/env-build.c (pistisd links it too).
MUSL_BINS += pi-env
pi-env_SRCS := pi-env/main.c
pi-env_LIBS := lib

UNIT_TESTS += test-env
test-env_SRCS := tests/unit/test-env.c
test-env_LIBS := lib

FUZZERS += fuzz-env
fuzz-env_SRCS := tests/fuzz/fuzz-env.c
fuzz-env_LIBS := lib

INTEGRATION_TESTS += tests/integration/pi-env.sh
DOCS += docs/pi-env.md
