# trusted: trusted commands (trusted_*) and `pistisd trusted`; see docs/trusted.md.
LIBS += trusted
trusted_SRCS := trusted/render.c trusted/interp.c trusted/elf.c trusted/fs.c trusted/store.c trusted/dyn.c trusted/install.c \
	trusted/setuid.c
pistisd_LIBS := trusted $(pistisd_LIBS)
# main.c refers to trusted_cli_main weakly, and a weak reference never pulls a member out
# of an archive: the CLI is linked as an object so `pistisd trusted` is really there.
pistisd_SRCS += trusted/cli.c trusted/exec.c

UNIT_TESTS += test-trusted
test-trusted_SRCS := tests/unit/test-trusted.c
test-trusted_LIBS := trusted policy users lib

FUZZERS += fuzz-trusted-sudo-list fuzz-trusted-name
fuzz-trusted-sudo-list_SRCS := tests/fuzz/fuzz-trusted-sudo-list.c
fuzz-trusted-sudo-list_LIBS := trusted lib
fuzz-trusted-name_SRCS := tests/fuzz/fuzz-trusted-name.c
fuzz-trusted-name_LIBS := trusted lib

INTEGRATION_TESTS += tests/integration/trusted.sh
