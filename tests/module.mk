# tests/: red-team helpers and tests that attack the privilege boundary from outside any
# one component (docs/hacking.md; findings in the red-team report).
MUSL_TEST_BINS += redteam-probe fake-sudo
redteam-probe_SRCS := tests/redteam-probe.c
fake-sudo_SRCS := tests/fake-sudo.c
INTEGRATION_TESTS += tests/integration/redteam-spawn.sh tests/integration/redteam-trusted.sh \
	tests/integration/redteam-users.sh tests/integration/redteam-pi-env.sh \
	tests/integration/redteam-fsops.sh tests/integration/redteam-cross.sh \
	tests/integration/redteam-reuse.sh tests/integration/redteam-secrets.sh \
	tests/integration/redteam-parse.sh tests/integration/redteam-disk.sh \
	tests/integration/redteam-net.sh tests/integration/redteam-faults.sh \
	tests/integration/redteam-concurrent.sh tests/integration/redteam-dos.sh \
	tests/integration/redteam-accounts.sh \
	tests/integration/redteam-pty.sh tests/integration/client-pipes.sh \
	tests/integration/redteam-lifecycle.sh tests/integration/redteam-ends.sh \
	tests/integration/redteam-upgrade.sh \
	tests/integration/redteam-view.sh tests/integration/redteam-cve.sh \
	tests/integration/redteam-sweep.sh tests/integration/redteam-floor.sh \
	tests/integration/redteam-fsrace.sh
# The runner and lib.sh themselves: an early exit, a whole-file skip, a missing plan, a missing
# prerequisite or a pattern that matches anything is a failure, never green.
INTEGRATION_TESTS += tests/integration/runner.sh
# lib.sh's measuring helpers (processes, SysV IPC, ptys, directories) see what they count:
# the "nothing left" checks that use them cannot pass with a broken measure.
INTEGRATION_TESTS += tests/integration/lib-controls.sh
# Each agent's memory and CPU limits in pistisd serve: refused where no controller is
# delegated, an agent over its memory killed alone where one is (in a cgroup of the test's).
INTEGRATION_TESTS += tests/integration/serve-limits.sh
# tests/run.sh itself: each file in a cgroup of its own, what it left running killed (a
# failure), the cgroup removed.
INTEGRATION_TESTS += tests/integration/run-cgroups.sh
# The limits enforced: pistisd run's and serve's, and cgroup.kill, in a throwaway qemu VM
# whose only cgroup hierarchy is v2 (its guest half is tests/vm/cgroup2-guest.sh).
INTEGRATION_TESTS += tests/integration/cgroup2-vm.sh
# Scale: many agents (list, batch, the images' tools over a long pi-sandbox line), many
# commands at serve's bounds, server-min with its most sandboxes.
INTEGRATION_TESTS += tests/integration/users-scale.sh tests/integration/serve-scale.sh \
	tests/integration/relay-scale.sh
# The binaries in real Docker containers (a private dockerd; docker.io from bootstrap.sh check).
INTEGRATION_TESTS += tests/integration/docker.sh tests/integration/docker-restricted.sh \
	tests/integration/docker-seed.sh tests/integration/docker-example.sh
# Beside what a plain machine has: threaded cgroups, shared mount propagation, NSS sources.
INTEGRATION_TESTS += tests/integration/plain-machine.sh
INTEGRATION_TESTS += tests/integration/shared-pidns.sh
INTEGRATION_TESTS += tests/integration/userns.sh
# Promise 6 over many operations: what pistisd serve and server-min hold, what is left.
INTEGRATION_TESTS += tests/integration/serve-soak.sh tests/integration/relay-soak.sh
# A short run of each benchmark of bench/ that fits in a test run: each still runs here.
INTEGRATION_TESTS += tests/integration/bench-smoke.sh
# The pistis client against a fake sandbox behind server-min: answers that are errors or
# do not say what was done end in the documented exit code, never 0 or a wait without end.
INTEGRATION_TESTS += tests/integration/client-hostile.sh
# Every binary's, command's and verb's --help: exit 0, stdout only, 80 columns; every option
# in --help and docs/.
INTEGRATION_TESTS += tests/integration/help.sh
# The names docs/ lists (checks, error codes, config keys) against the source's.
INTEGRATION_TESTS += tests/integration/doc-names.sh
# The examples docs/ shows (registry, pistis.json, serve.conf, rules, Dockerfile) as pasted.
INTEGRATION_TESTS += tests/integration/doc-examples.sh
INTEGRATION_TESTS += tests/integration/workload.sh
# The seed pages' promises to users, end to end through the relay, one line each.
INTEGRATION_TESTS += tests/integration/seed-promises.sh
