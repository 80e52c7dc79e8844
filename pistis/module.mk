# pistis: the command-line client of server-min; see docs/api.md. Static musl like pistisd:
# the dynamic glibc build spent ~1.6 ms of every run loading and relocating Debian's
# libwebsockets, libssl and libcrypto (docs/server-min.md, latency). TLS is now mbedtls.
MUSL_BINS += pistis
pistis_SRCS := pistis/main.c
pistis_LIBS := lib
# The WebSocket client receive path of pistis and pistisd serve (our patched libwebsockets)
# against a fake server: exact output under random segmentation, hostile frames.
INTEGRATION_TESTS += tests/integration/wsrx.sh
# The WebSocket header its splice path takes off the socket itself.
FUZZERS += fuzz-ws-header
fuzz-ws-header_SRCS := tests/fuzz/fuzz-ws-header.c
fuzz-ws-header_LIBS := lib
# pistis's handling of the server's messages (the real main.c, socket stubbed) under
# libFuzzer.
FUZZERS += fuzz-pistis
fuzz-pistis_SRCS := tests/fuzz/fuzz-pistis.c
fuzz-pistis_LIBS := lib
