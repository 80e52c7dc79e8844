#!/bin/bash
# The WebSocket CLIENT receive path of the shipped static binaries (our patched
# libwebsockets: scripts/patches/libwebsockets/0001 parses a server's payload in bulk, 0004
# refuses masked frames), attacked from a fake server (tests/integration/wsserver.py,
# standard library only) on loopback:
#  - differential: `pistis exec` against a fake server-min that answers with a random
#    payload (1-6 MiB of stdout, some stderr) in random protocol frames (0..256 KiB,
#    the 125/126/127 length forms and their edges), messages in 1-5 fragments with
#    pings/pongs between them, ignored text messages up to 1 MiB (over the 256 KiB receive
#    buffer: handed to the callback in pieces), the 101 response and the first frames in
#    one stream, and the bytes cut at random points: every offset inside the 2/4/10-byte
#    headers (the 8-byte length included), 1-byte writes, around the receive buffer's size,
#    before the last payload byte. Synchronised cuts wait (sock_diag) until pistis has
#    read every byte, so they reach the parser as separate reads. stdout, stderr and the
#    exit code must be exact; the last ack must name the last frame.
#    Seeds: PISTIS_WSRX_SEED (default: from the clock, printed), PISTIS_WSRX_SEEDS
#    (default 40); a failure prints its seed and how to rerun it.
#  - differential through `pistisd serve --relay` (a throwaway root, as relay.sh): the fake
#    server-min starts `cat` (or `sha256sum`) with stdin "pipe" for an agent and sends a
#    random payload (1-6 MiB; sha256sum under 1 MiB) as stdin frames (stream 0, sequence
#    1, 2, 3...) of random sizes up to 256 KiB, the 125/126/127 and 65535/65536 length
#    edges and pistisd's 64 KiB socket read size among them, in the same random fragments,
#    control frames and cuts, plus cuts at multiples of the read size inside a payload;
#    exec.ack and ping requests (some over pistisd's 256 KiB receive buffer, up to 1 MiB:
#    handed to its callback in pieces) between the frames; stdin closed by the EOF flag
#    on the last data frame, an empty EOF frame or exec.close_stdin. The output frames
#    (acked as they come) must be the payload (its sha256), in sequence, with EOF on both
#    streams, exit 0, every request answered, no error; at the end sandbox.status lists no
#    command. One pistisd, one connection, a command per seed; PISTIS_WSRX_SERVE_SEEDS
#    (default 40), from the same PISTIS_WSRX_SEED.
#  - hostile frames to `pistis exec`, before exec.started (must fail with exit 125 and
#    "Connection to the server failed") and in the middle of the output (must drop the
#    connection, redial, re-attach after the last frame it holds, and finish with the
#    complete output): masked frames, RSV bits, reserved opcodes, 64-bit lengths with the
#    top bit set, a 2^40-byte length, control frames over 125 bytes or with an extended
#    length, fragmented control frames, a continuation without a start, a new message
#    while one is unfinished, a stream cut inside a header or a payload, garbage after a
#    close, a 1-byte close, garbage; and a text message over 1 MiB (pistis only: pistisd
#    answers it too_large), for which pistis must say why before exec.started ("the server
#    sent a text message over 1048576 bytes"). Invalid UTF-8 in a text frame may be kept
#    (neither client asks lws to check UTF-8; the JSON parser decides), but must not crash.
#  - the same frames to `pistisd serve --relay` (a throwaway root, as relay.sh): it must
#    drop the connection (or keep answering), stay alive and redial; then a 2^40-byte
#    binary message streamed for 4 s: pistisd's RSS must stay small.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd pistis
command -v python3 >/dev/null || missing "no python3"
FAKE="python3 $(cd "$(dirname "$0")" && pwd)/wsserver.py"
SEED=${PISTIS_WSRX_SEED:-$(($(date +%s) % 1000000))}
SEEDS=${PISTIS_WSRX_SEEDS:-40}
SSEEDS=${PISTIS_WSRX_SERVE_SEEDS:-40}
W=$(mktemp -d "${TMPDIR:-/tmp}/pistis-wsrx.$$.XXXXXX")
cleanup() {
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	wait 2>/dev/null
	root_cleanup
	rm -rf "$W"
}
trap cleanup EXIT
val() { sed -n "s/^$1=//p" "$2" | head -n 1; }
show() { grep -v '^[a-z_0-9]*=' "$1" | sed 's/^# //; s/^/# /'; }
echo "# seeds $SEED..$((SEED + SEEDS - 1)) (PISTIS_WSRX_SEED, PISTIS_WSRX_SEEDS)," \
	"serve $SEED..$((SEED + SSEEDS - 1)) (PISTIS_WSRX_SERVE_SEEDS)"

# --- differential through pistis exec ---------------------------------------------------------
$FAKE exec-diff "$BIN/pistis" "$SEED" "$SEEDS" >"$W/diff.out" 2>&1
show "$W/diff.out"
is "exec-diff: the fake server ran" "$(val exception "$W/diff.out")" ""
is "exec-diff: $SEEDS seeds, stdout/stderr/exit code/last ack exact in all" \
	"$(val seeds_failed "$W/diff.out")/$(val seeds "$W/diff.out")" "0/$SEEDS"
echo "# $(grep -E '^(bytes|frames|fragments|control|hdr_splits|sync_cuts|cuts|byte_runs|cap_splits|merged|seconds)=' "$W/diff.out" | paste -sd' ' -)"
is "exec-diff: splits at every offset inside the 2-, 4- and 10-byte headers" \
	"$(val hdr_split_offsets "$W/diff.out")" 13/13
is "exec-diff: all three length forms (7-bit, 16-bit, 64-bit)" "$(val length_forms "$W/diff.out")" 7,16,64
ok "exec-diff: fragmented messages, control frames between fragments, 1-byte writes" \
	test "$(val fragments "$W/diff.out")" -gt 0 -a "$(val control "$W/diff.out")" -gt 0 \
	-a "$(val byte_runs "$W/diff.out")" -gt 0
ok "exec-diff: half the seeds had stdout and stderr in pipes (output frames spliced)" \
	test "$(val pipes "$W/diff.out")" -ge $((SEEDS / 2))
ok "exec-diff: the 101 response and the first frames arrived in one stream in some seeds" \
	test "$(val merged "$W/diff.out")" -gt 0

# --- hostile frames to pistis -----------------------------------------------------------------
$FAKE client-hostile "$BIN/pistis" "$SEED" >"$W/ch.out" 2>&1
show "$W/ch.out"
is "pistis: the fake server ran" "$(val exception "$W/ch.out")" ""
is "pistis: every hostile case, before and during output: no crash, the documented outcome" \
	"$(val failed_cases "$W/ch.out")" none
like "pistis: ran them all" "$(val cases "$W/ch.out")" '^[0-9]{2,}$'
unlike "pistis: a masked frame fails the connection (RFC 6455 5.1), is not unmasked" \
	"$(val kept "$W/ch.out")" masked
is "pistis: nothing else kept the connection but invalid UTF-8 text" \
	"$(val kept "$W/ch.out" | tr , '\n' | grep -v -e utf8 -e '^none$')" ""

# --- the connection cut in the middle of an output frame (stdout a pipe: spliced) -------------
$FAKE client-cut-frame "$BIN/pistis" "$SEED" 40 >"$W/cf.out" 2>&1
show "$W/cf.out"
is "pistis: a frame cut by a lost connection, resent whole: output exact, no part of the cut one (pipe and file)" \
	"$(val cut_failed "$W/cf.out")/$(val cut_cases "$W/cf.out")" "0/40"
like "pistis: cuts inside the WebSocket header, the frame header and the payload" \
	"$(val cut_in "$W/cf.out")" '^frame header:[0-9]+,payload:[0-9]+,ws header:[0-9]+$'

# --- numbers from the server: exec.exit's code, signal and last_seq ---------------------------
$FAKE client-exit-values "$BIN/pistis" >"$W/cx.out" 2>&1
show "$W/cx.out"
is "pistis: exec.exit values out of range, fractional, infinite or mistyped, or no last_seq, give 125, the rest as a shell" \
	"$(val exit_failed "$W/cx.out")/$(val exit_cases "$W/cx.out")" "0/20"

# --- names from the server: `pistis ls` prints them escaped ---------------------------------
# server-min's names are [A-Za-z0-9._:-]; another server's could carry an OSC title, a
# screen clear or a newline that forges a line of the listing.
$FAKE client-ls-names "$BIN/pistis" >"$W/ln.out" 2>&1
show "$W/ln.out"
is "pistis ls: a listing with hostile names exits 0" "$(val ls_rc "$W/ln.out")" 0
like "... prints a plain name as it is" "$(val ls_first "$W/ln.out")" '^ok +disconnected$'
is "... names with ESC, CSI, C1, DEL and newlines as printable ASCII" \
	"$(val ls_clean "$W/ln.out")" yes
is "... one line a sandbox (a newline in a name forges none)" "$(val ls_lines "$W/ln.out")" 6

# --- pistisd serve: a throwaway root, as relay.sh ---------------------------------------------
R=$(root_fresh debian) || missing "no debian test root: pistisd serve untested"
serve_setup "$R"
# below the ephemeral range (32768+), so a client socket cannot hold our port
SP=$((20000 + RANDOM % 12000))

# --- differential through pistisd serve's stdin -----------------------------------------------
$FAKE serve-diff "$((SP + 1))" "$(cat "$R/etc/pistis/token")" "$SEED" "$SSEEDS" alice \
	>"$W/sd.out" 2>&1 &
FK=$!
sleep 0.3
in_root "$R" pistisd serve --relay ws://127.0.0.1:$((SP + 1)) --token-file /etc/pistis/token \
	--name s1 ${ALLOW:+--allow $ALLOW} >"$W/pd-diff.log" 2>&1 &
PD=$!
wait $FK
kill "$PD" 2>/dev/null
wait "$PD" 2>/dev/null
PD=
show "$W/sd.out"
is "serve-diff: the fake server ran" "$(val exception "$W/sd.out")" ""
is "serve-diff: pistisd dialled with its token" "$(val auth "$W/sd.out")" ok
is "serve-diff: $SSEEDS seeds, stdout/exit/sequence exact, every request answered, in all" \
	"$(val seeds_failed "$W/sd.out")/$(val seeds "$W/sd.out")" "0/$SSEEDS"
echo "# $(grep -E '^(bytes|ws_bytes|stdin_frames|frames|fragments|control|requests|pongs|hdr_splits|sync_cuts|cuts|byte_runs|cap_splits|read_splits|cat|sha256sum|close_[a-z]*|seconds)=' "$W/sd.out" | paste -sd' ' -)"
is "serve-diff: pistisd forgot every command acknowledged to its end" \
	"$(val left_commands "$W/sd.out")/$(val left_buffered "$W/sd.out")" 0/0
is "serve-diff: the same pistisd process throughout" "$(val serve_alive "$W/sd.out")" yes
is "serve-diff: splits at every offset inside the 2-, 4- and 10-byte headers" \
	"$(val hdr_split_offsets "$W/sd.out")" 13/13
is "serve-diff: all three length forms (7-bit, 16-bit, 64-bit)" "$(val length_forms "$W/sd.out")" 7,16,64
ok "serve-diff: fragments, control frames between them, 1-byte writes, splits at read-size multiples" \
	test "$(val fragments "$W/sd.out")" -gt 0 -a "$(val control "$W/sd.out")" -gt 0 \
	-a "$(val byte_runs "$W/sd.out")" -gt 0 -a "$(val read_splits "$W/sd.out")" -gt 0
grep -q 'Connected to the relay' "$W/pd-diff.log" || sed 's/^/# /' "$W/pd-diff.log" | tail -n 20

# --- hostile frames to pistisd serve ----------------------------------------------------------
$FAKE serve-hostile "$SP" "$(cat "$R/etc/pistis/token")" "$SEED" >"$W/sh.out" 2>&1 &
FK=$!
sleep 0.3
in_root "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1 \
	${ALLOW:+--allow $ALLOW} >"$W/pd.log" 2>&1 &
PD=$!
wait $FK
show "$W/sh.out"
is "serve: the fake server ran" "$(val exception "$W/sh.out")" ""
is "serve: pistisd dialled with its token" "$(val auth "$W/sh.out")" ok
is "serve: every hostile case: dropped (or kept and still answering), alive, redialled" \
	"$(val failed_cases "$W/sh.out")" none
like "serve: ran them all" "$(val cases "$W/sh.out")" '^[0-9]{2,}$'
pid=$(val serve_pid "$W/sh.out")
ok "serve: the same pistisd process throughout (pid $pid)" kill -0 "${pid:-0}"
like "serve: it streamed a 2^40-byte message for 4 s" "$(val huge_sent_mib "$W/sh.out")" '^[0-9]{3,}$'
r0=$(val rss_before_kb "$W/sh.out") r1=$(val rss_max_kb "$W/sh.out")
ok "serve: RSS while it streamed: ${r1:-?} kB (before: ${r0:-?} kB; < before + 16 MiB)" \
	test "${r1:-999999}" -gt 0 -a "${r1:-999999}" -lt $((${r0:-0} + 16384))
unlike "serve: a masked frame fails the connection (RFC 6455 5.1), is not unmasked" \
	"$(val kept "$W/sh.out")" masked
is "serve: nothing else kept the connection but invalid UTF-8 text" \
	"$(val kept "$W/sh.out" | tr , '\n' | grep -v -e utf8 -e '^none$')" ""
is "serve: it answered the 2^40-byte message with too_large" "$(val huge_error "$W/sh.out")" too_large
like "serve: a close frame from the relay: its status and reason logged, escaped" \
	"$(cat "$W/pd.log")" "Relay connection lost: closed by the relay, status 1008, reason 'bye \\\\x1b\\[31mred\\\\nnext \\\\'q\\\\''"
grep -q 'Relay connection lost' "$W/pd.log" || sed 's/^/# /' "$W/pd.log" | tail -n 20
done_testing
