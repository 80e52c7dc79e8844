# pistisd: the daemon and multi-call admin CLI. Component libraries add themselves to
# pistisd_LIBS in their own module.mk (before `lib`, which must stay last).
MUSL_BINS += pistisd
pistisd_SRCS := pistisd/main.c
pistisd_LIBS += lib
