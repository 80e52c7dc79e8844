# pistisd: the daemon and multi-call admin CLI. Component libraries add themselves to
# pistisd_LIBS in their own module.mk (before `lib`, which must stay last).
MUSL_BINS += pistisd
pistisd_SRCS := pistisd/main.c pistisd/check.c pistisd/check-report.c
pistisd_LIBS += lib

UNIT_TESTS += test-check
test-check_SRCS := tests/unit/test-check.c pistisd/check-report.c
test-check_LIBS := lib
INTEGRATION_TESTS += tests/integration/check.sh tests/integration/static.sh
