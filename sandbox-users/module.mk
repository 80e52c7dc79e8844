# sandbox-users: agent identities (users_*) and `pistisd users`; see docs/users.md.
UNIT_TESTS += test-users-sha256
test-users-sha256_SRCS := tests/unit/test-users-sha256.c
test-users-sha256_LIBS := lib
