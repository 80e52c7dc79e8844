# The wire protocol's tests (lib/proto.c is in liblib) and server-min; see docs/protocol.md.
UNIT_TESTS += test-proto
test-proto_SRCS := tests/unit/test-proto.c
test-proto_LIBS := lib
FUZZERS += fuzz-proto-msg fuzz-proto-frame
fuzz-proto-msg_SRCS := tests/fuzz/fuzz-proto-msg.c
fuzz-proto-msg_LIBS := lib
fuzz-proto-frame_SRCS := tests/fuzz/fuzz-proto-frame.c
fuzz-proto-frame_LIBS := lib

# server-min: the relay (host glibc build, system libwebsockets/cJSON/OpenSSL).
HOST_BINS += server-min
server-min_SRCS := server-min/relay.c server-min/config.c
server-min_LIBS := lib
INTEGRATION_TESTS += tests/integration/relay.sh
# The relay's message handlers (the real relay.c, sockets stubbed) under libFuzzer.
FUZZERS += fuzz-relay
fuzz-relay_SRCS := tests/fuzz/fuzz-relay.c server-min/config.c
fuzz-relay_LIBS := lib
INTEGRATION_TESTS += tests/integration/relay-hostile.sh
# The relay over a unix socket, and where its path is believed.
INTEGRATION_TESTS += tests/integration/relay-unix.sh
INTEGRATION_TESTS += tests/integration/relay-log.sh
# A hostile peer before the token: HTTP framing (smuggling), keep-alive without a token.
INTEGRATION_TESTS += tests/integration/relay-api-hostile.sh
# The same before the token on the TLS sandbox listener: timeouts, the per-address bound.
INTEGRATION_TESTS += tests/integration/relay-tls-hostile.sh
# One SIGTERM stops server-min at once, whatever its peers hold open.
INTEGRATION_TESTS += tests/integration/relay-stop.sh
# One sandbox redialling, sending JSON heavy to parse, or hellos: held to its own rate.
INTEGRATION_TESTS += tests/integration/relay-sandbox-rate.sh
# One sandbox flooding pings or pongs: held to the same rate.
INTEGRATION_TESTS += tests/integration/relay-control-frames.sh
# Malformed messages from a sandbox: logged, counted, and the connection cut at a bound.
INTEGRATION_TESTS += tests/integration/relay-sandbox-malformed.sh
# One client that does not read stalls a sandbox for at most a grace period.
INTEGRATION_TESTS += tests/integration/relay-slow.sh
# Under valgrind memcheck: what server-min allocated is freed at its exit.
INTEGRATION_TESTS += tests/integration/relay-exit-leaks.sh
# One agent stalling its spawn children does not stall serve for the others.
INTEGRATION_TESTS += tests/integration/serve-stall.sh tests/integration/serve-restart.sh \
	tests/integration/serve-credit.sh tests/integration/serve-strays.sh \
	tests/integration/serve-trusted-strays.sh tests/integration/serve-unread.sh \
	tests/integration/serve-dying.sh
# A policy apply on the command line beside serve: no command starts while it holds the
# state directory (policy_apply_share).
INTEGRATION_TESTS += tests/integration/policy-beside-serve.sh
# bench/relay.sh's floor: the relay's three hops as plain copy loops (no WebSocket, no loop).
MUSL_TEST_BINS += bench-fwd
bench-fwd_SRCS := bench/bench-fwd.c
bench-fwd_LIBS := lib
# pistis.json under libFuzzer: smin_config_load on any bytes, from a private 0600 file.
FUZZERS += fuzz-smin-config
fuzz-smin-config_SRCS := tests/fuzz/fuzz-smin-config.c server-min/config.c
fuzz-smin-config_LIBS := lib
