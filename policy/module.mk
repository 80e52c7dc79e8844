# policy: path rules (policy_*) and `pistisd policy`; see docs/policy.md.
LIBS += policy
policy_SRCS := policy/rules.c policy/target.c policy/resolve.c policy/walk.c policy/walk-node.c \
	policy/mark.c policy/store.c \
	policy/explain.c policy/defaults.c
pistisd_LIBS := policy $(pistisd_LIBS)
# The CLI is linked as an object: pistisd/main.c refers to policy_cli_main weakly, and a
# weak reference never pulls a member out of an archive.
pistisd_SRCS += policy/cli.c

# defaults.c pulls policy/defaults.json in with .incbin, which -MMD does not see.
$(foreach v,musl host asan tsan fuzz analyze,$(B)/$(v)/obj/policy/defaults.o): policy/defaults.json

UNIT_TESTS += test-policy test-policy-walk
TSAN_TESTS += test-policy-walk
test-policy_SRCS := tests/unit/test-policy.c
test-policy_LIBS := policy lib
test-policy-walk_SRCS := tests/unit/test-policy-walk.c
test-policy-walk_LIBS := policy lib

FUZZERS += fuzz-rules
fuzz-rules_SRCS := tests/fuzz/fuzz-rules.c
fuzz-rules_LIBS := policy lib

INTEGRATION_TESTS += tests/integration/policy.sh tests/integration/policy-race.sh \
	tests/integration/agents-stop.sh \
	tests/integration/redteam-policy.sh
