#!/bin/bash
# What one sandbox's connection may cost server-min is the sandbox's, not the connection's:
# a sandbox that redials is held to the same message rate and log rate as one that does not,
# a JSON message costs by its values (parsing does), and a hello is taken once a connection
# (each one re-attached every route). Nothing but server-min and tests/integration/wsfake.py
# (a fake sandbox and client) on two loopback ports.
. "$(dirname "$0")/../lib.sh"
need_root
need_bins server-min
command -v python3 >/dev/null || missing "no python3"
. "$(dirname "$0")/wsfake-lib.sh"
start() { smin_start "[{\"name\": \"evil\", \"token\": \"$EVIL\"}]"; }

# --- a sandbox that redials after every burst: each connection had a full bucket ---------
# (10 000 messages at once, then 5000 a second; per connection, 3000 hellos a connection
# were all read and answered: ~120 000 in 3 s, and two log lines for every redial)
start || missing "server-min did not listen"
$FAKE sandbox-redial "$SP" "$EVIL" 3 >"$W/rd.out" 2>&1
[ -z "$(val exception "$W/rd.out")" ] || sed 's/^/# /' "$W/rd.out"
a=$(val answers "$W/rd.out") ms=$(val wall_ms "$W/rd.out") n=$(val conns "$W/rd.out")
ok "redial: $n connections got ${a:-?} hellos answered in ${ms:-?} ms (the sandbox's bucket: <= 10000 + 5000/s)" \
	test "${a:-999999}" -le $((10000 + 5 * ${ms:-0} + 500))
lines=$(grep -c "Sandbox 'evil'" "$W/smin.log")
# A window of the log bound is a second from its first line: a run of ms touches at most
# ms/1000 + 1 of them, each with 10 lines and the count of those held before it.
ok "redial: server-min logged $lines lines about them (<= 10 a second)" \
	test "$lines" -le $((11 * (${ms:-0} / 1000 + 1) + 2))
like "redial: and counted those it did not log" "$(cat "$W/smin.log")" \
	"Sandbox 'evil': [0-9]+ more of its messages were not logged"
is "redial: server-min still running" "$(alive)" yes
stop

# --- a hello is taken once a connection: each re-attached every route it had ---------------
start || { echo "# server-min did not listen again"; exit 1; }
$FAKE sandbox-hellos "$SP" "$EVIL" "$CP" "$CT" 64 >"$W/hl.out" 2>&1
[ -z "$(val exception "$W/hl.out")" ] || sed 's/^/# /' "$W/hl.out"
is "hellos: a second and third hello on one connection are bad_request" "$(val again "$W/hl.out")" \
	bad_request,bad_request
is "hellos: ... and re-attach nothing (64 routes: 64 exec.attach a hello)" "$(val attaches "$W/hl.out")" 0
like "hellos: ... and each counts as a malformed message (pistisd never sends one)" \
	"$(cat "$W/smin.log")" "Sandbox 'evil' disconnected; it sent 2 malformed messages on that connection \(the last: a second hello on one connection\)"
stop

# --- JSON messages of half a million values each ---------------------------------------------
# (1 MiB of "[0,0,…]" is ~80 ms of parsing: at 5000 messages a second, a core for as long as
# the sandbox liked, every other sandbox and client waiting behind each one)
start || { echo "# server-min did not listen again"; exit 1; }
$FAKE sandbox-values "$SP" "$EVIL" "$SM" 3 >"$W/vl.out" 2>&1
[ -z "$(val exception "$W/vl.out")" ] || sed 's/^/# /' "$W/vl.out"
cpu=$(val cpu_ms "$W/vl.out") wall=$(val wall_ms "$W/vl.out")
ok "values: server-min used ${cpu:-?} ms of CPU in ${wall:-?} ms of the flood ($(val sent "$W/vl.out") messages; < 25%)" \
	test "$((${cpu:-999999} * 4))" -lt "${wall:-0}"
like "values: ... and says it throttles the sandbox, for JSON values" "$(cat "$W/smin.log")" \
	"Sandbox 'evil' sends over 5000 messages/s or their worth; reading from it is throttled. Tokens of the last 1-2 s: [0-9]+ for JSON values"
is "values: server-min still running" "$(alive)" yes
stop

# --- a message never ended: endless continuation frames, or one frame saying 2^62 bytes -------
# (only a message's end took a token, so 6-byte empty continuation frames, or 1-byte ones,
# of a message that never ends held server-min at 98-99% of a core, silently, and a frame
# past the limit was read on to its end for one token: 89%; red team)
for mode in empty-cont:"continuation frames" byte-cont:"continuation frames" \
	hugeframe:"bytes past the message limit"; do
	what=${mode#*:} mode=${mode%%:*}
	start || { echo "# server-min did not listen again"; exit 1; }
	$FAKE sandbox-fragments "$SP" "$EVIL" "$SM" 3 "$mode" >"$W/fr.out" 2>&1
	[ -z "$(val exception "$W/fr.out")" ] || sed 's/^/# /' "$W/fr.out"
	cpu=$(val cpu_ms "$W/fr.out") wall=$(val wall_ms "$W/fr.out")
	ok "$mode: server-min used ${cpu:-?} ms of CPU in ${wall:-?} ms of the flood ($(val sent "$W/fr.out") frames, or 64 KiB pieces, sent; < 25%)" \
		test "$((${cpu:-999999} * 4))" -lt "${wall:-0}"
	like "$mode: ... and says it throttles the sandbox, for $what" "$(cat "$W/smin.log")" \
		"Sandbox 'evil' sends over 5000 messages/s or their worth; reading from it is throttled. Tokens of the last 1-2 s: [0-9]+ for $what"
	is "$mode: server-min still running" "$(alive)" yes
	stop
done
done_testing
