#!/bin/bash
# WebSocket control frames from a sandbox cost it tokens of its message rate like anything
# else it sends: a flood of pings or pongs is throttled, and the other sandboxes' round trips
# stay what they were. Each flood runs against a fresh server-min, with a baseline taken in the
# same run just before it. Nothing but server-min and tests/integration/wsfake.py (a fake
# sandbox flooding, another answering, and a client pinging that one every 5 ms).
. "$(dirname "$0")/../lib.sh"
need_root
need_bins server-min
command -v python3 >/dev/null || missing "no python3"
. "$(dirname "$0")/wsfake-lib.sh"
start() { # [SANDBOX-LISTENER]: the sandboxes' listener, 127.0.0.1:$SP unless a socket path
	smin_start "[{\"name\": \"evil\", \"token\": \"$EVIL\"}, {\"name\": \"good\", \"token\": \"$GOOD\"}]" "$@"
}

# flood NAME MODE SANDBOX-ADDRESS WHAT: MODE's flood (wsfake.py scenario_sandbox_control) for
# 3 s, server-min under 25% of a core meanwhile, another sandbox's median round trip under
# twice its baseline plus 0.5 ms, the sandbox throttled and said to be, for WHAT (the line
# said "messages/s" whatever had emptied the bucket)
flood() {
	local name=$1 mode=$2 addr=$3 what=$4 cpu wall q f
	$FAKE sandbox-control "$addr" "$EVIL" "$GOOD" "$CP" "$CT" "$SM" 3 "$mode" >"$W/cf.out" 2>&1
	[ -z "$(val exception "$W/cf.out")" ] || sed 's/^/# /' "$W/cf.out"
	cpu=$(val flood_cpu_ms "$W/cf.out") wall=$(val flood_wall_ms "$W/cf.out")
	q=$(val quiet_rtt_us "$W/cf.out") f=$(val flood_rtt_us "$W/cf.out")
	ok "$name: server-min used ${cpu:-?} ms of CPU in ${wall:-?} ms of the flood ($(val sent_kib "$W/cf.out") KiB sent; < 25%)" \
		test "$((${cpu:-999999} * 4))" -lt "${wall:-0}"
	ok "$name: another sandbox's round trip ${f:-?} us during it, ${q:-?} us before (< 2x + 500 us)" \
		test "${f:-999999}" -lt "$((2 * ${q:-0} + 500))"
	like "$name: ... and server-min says it throttles the sandbox, for $what" "$(cat "$W/smin.log")" \
		"Sandbox 'evil' sends over 5000 messages/s or their worth; reading from it is throttled. Tokens of the last 1-2 s: [0-9]+ for $what"
	ok "$name: server-min's RSS $(val rss0_kb "$W/cf.out") kB before, $(val rss1_kb "$W/cf.out") kB after (< 4 MiB more)" \
		test "$(val rss1_kb "$W/cf.out")" -lt "$(($(val rss0_kb "$W/cf.out") + 4096))"
	is "$name: server-min still running" "$(alive)" yes
}

# --- unsolicited pongs with a payload ---------------------------------------------------------
# (lws hands them on as LWS_CALLBACK_RECEIVE_PONG, which server-min ignored: 125-byte pongs
# held it at 95-98% of a core, and another sandbox's round trip went from 0.2 to 1.7 ms; red
# team). Over a unix socket too, where the kernel counts no bytes.
start || missing "server-min did not listen"
flood pong-125 pong-125 "$SP" "pongs with a payload"
stop
start "$W/sandbox.sock" || { echo "# server-min did not listen again"; exit 1; }
flood "pong-125 (unix socket)" pong-125 "$W/sandbox.sock" "pongs with a payload"
stop

# --- pings, empty pongs, pings inside a message never ended -----------------------------------
# (lws answers a ping, or drops an empty pong, without a word to server-min: each flood held
# it at 95-99% of a core, and another sandbox's round trip went from 0.13-0.37 ms to
# 1.5-2.9 ms; red team). The kernel's count of the bytes read is charged (TCP only).
for mode in ping-0 ping-125 pong-0 frag; do
	start || { echo "# server-min did not listen again"; exit 1; }
	flood "$mode" "$mode" "$SP" "pings, empty pongs and other bytes besides data frames"
	stop
done
done_testing
