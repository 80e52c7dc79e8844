#!/bin/bash
# One slow client must not stall a sandbox for everyone else: server-min + a real pistisd over
# a throwaway Debian root, a fake client (tests/integration/wsfake.py) that stops reading while
# its commands flood output, and the real `pistis` as the other client, on loopback.
# docs/server-min.md, "Clients that do not read".
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
command -v python3 >/dev/null || missing "no python3"
R=$(root_fresh debian) || missing "no debian test root"
W=$(mktemp -d "${TMPDIR:-/tmp}/pistis-slow.$$.XXXXXX")
FAKE="python3 $(cd "$(dirname "$0")" && pwd)/wsfake.py"
# below the ephemeral range (32768+), so a client socket cannot hold our port
SP=$((20000 + RANDOM % 12000)); CP=$((SP + 1)); SP2=$((SP + 2)); CP2=$((SP + 3))
cleanup() {
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	[ -n "${SM2:-}" ] && kill "$SM2" 2>/dev/null
	wait 2>/dev/null
	root_cleanup
	rm -rf "$W"
}
trap cleanup EXIT
val() { sed -n "s/^$1=//p" "$2" | head -n 1; }

serve_setup "$R"
EVIL=evil-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
CT=client-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
GRACE=3

# --- configuration ---------------------------------------------------------------------------
cfg() { # FILE LIMITS
	printf '{\n  "client_token": "client-0123456789",\n  "limits": %s,\n  "sandboxes": [{"name":"a","token":"tok-a-0123456789"}]\n}\n' "$2" >"$1"
}
cfg "$W/g0.json" '{"client_queue_grace_s": 0}'
like "config: a grace of 0 s is refused with its line" "$("$BIN/server-min" --config "$W/g0.json" --check 2>&1)" \
	'g0.json:3: .*client_queue_grace_s.* must be a whole number 1..3600'
cfg "$W/m0.json" '{"client_queue_max_mib": 4097}'
like "config: a hard bound over 4096 MiB is refused with its line" "$("$BIN/server-min" --config "$W/m0.json" --check 2>&1)" \
	'm0.json:3: .*client_queue_max_mib.* must be a whole number 1..4096'
cfg "$W/ok.json" '{"client_queue_grace_s": 10, "client_queue_max_mib": 128}'
ok "config: client queue limits validate" "$BIN/server-min" --config "$W/ok.json" --check

# --- a client stops reading while its commands flood output ----------------------------------
cat >"$W/pistis.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP", "client": "127.0.0.1:$CP"}, "client_token": "$CT",
 "limits": {"client_queue_grace_s": $GRACE},
 "sandboxes": [{"name": "s1", "token": "$(cat "$R/etc/pistis/token")"}]}
J
"$BIN/server-min" --config "$W/pistis.json" >"$W/smin.log" 2>&1 &
SM=$!
# --max-buffered 256: one reader may then hold 64 MiB unacknowledged in pistisd, more than
# server-min's 16 MiB soft bound, which is what this test is about. With the default (a
# quarter of 64 MiB) pistisd itself stops at 16 MiB for one reader (relay.sh, "one reader").
in_root "$R" pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1 \
	--max-buffered 256 ${ALLOW:+--allow $ALLOW} >"$W/pd.log" 2>&1 &
PD=$!
export PISTIS_URL=ws://127.0.0.1:$CP PISTIS_TOKEN=$CT PISTIS_SANDBOX=s1
for _ in $(seq 100); do "$BIN/pistis" ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
"$BIN/pistis" exec --agent alice -- true # the agents exist before timing anything
"$BIN/pistis" exec --agent bob -- true
# 5 commands of 1.4 M lines (12.6 MB) each: pistisd sends each up to its 8 MiB window, 40 MiB
# in all, more than the socket buffers and server-min's 16 MiB soft bound hold
$FAKE slow-reader "$CP" "$CT" s1 "$BIN/pistis" "$W/smin.log" "$GRACE" 5 1400000 >"$W/sr.out" 2>&1
[ -z "$(val exception "$W/sr.out")" ] || sed 's/^/# /' "$W/sr.out"
is "slow client: the other client's command output is complete" "$(val fast_output "$W/sr.out")" ok
fm=$(val fast_ms "$W/sr.out")
ok "slow client: ... within the grace period and a margin (${fm:-?} ms < $((GRACE + 5))000)" test "${fm:-999999}" -lt $(((GRACE + 5) * 1000))
is "slow client: the other client's request is answered" "$(val fast_ping "$W/sr.out")" ok
pm=$(val fast_ping_ms "$W/sr.out")
ok "slow client: ... at once (${pm:-?} ms < 2000)" test "${pm:-999999}" -lt 2000
ds=$(val slow_dropped_s "$W/sr.out")
ok "slow client: disconnected after the grace period ($ds s after it stopped reading; $GRACE..$((GRACE + 8)))" \
	awk -v d="$ds" -v g=$GRACE 'BEGIN { exit !(d != "never" && d + 0 >= g - 0.2 && d + 0 <= g + 8) }'
like "slow client: logged, naming it" "$(cat "$W/smin.log")" \
	"Disconnected client [0-9]+ \(127\.0\.0\.1\), which does not read: its queue stayed over 16 MiB for $GRACE s \([0-9]+ MiB waiting\)"
is "slow client: one line for it" "$(grep -c "Disconnected client" "$W/smin.log")" 1
is "slow client: re-attached, every command's output complete (sha256)" "$(val slow_output "$W/sr.out")" ok
is "slow client: 5 x 12.6 MB" "$(val slow_total_mib "$W/sr.out")" 60
is "slow client: pistisd and server-min still running" \
	"$(kill -0 "$PD" 2>/dev/null && kill -0 "$SM" 2>/dev/null && echo yes)" yes
is "slow client: s1 still serves" "$("$BIN/pistis" exec --agent alice -- echo fine 2>&1)" fine

# --- the hard bound: disconnected at once, not after the grace period -------------------------
cat >"$W/hard.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP2", "client": "127.0.0.1:$CP2"}, "client_token": "$CT",
 "limits": {"client_queue_grace_s": 60, "client_queue_max_mib": 8},
 "sandboxes": [{"name": "evil", "token": "$EVIL"}]}
J
"$BIN/server-min" --config "$W/hard.json" >"$W/smin2.log" 2>&1 &
SM2=$!
for _ in $(seq 50); do PISTIS_URL=ws://127.0.0.1:$CP2 "$BIN/pistis" ls >/dev/null 2>&1 && break; sleep 0.1; done
$FAKE hard-bound "$SP2" "$EVIL" "$CP2" "$CT" "$W/smin2.log" >"$W/hb.out" 2>&1
[ -z "$(val exception "$W/hb.out")" ] || sed 's/^/# /' "$W/hb.out"
hs=$(val dropped_s "$W/hb.out")
ok "hard bound: the client that does not read is disconnected at once ($hs s < 10, grace 60)" \
	awk -v d="$hs" 'BEGIN { exit !(d != "never" && d + 0 < 10) }'
like "hard bound: the line says why" "$(val why "$W/hb.out")" "its queue passed 8 MiB"
is "hard bound: the sandbox is read again" "$(val sandbox_read_again "$W/hb.out")" yes
is "hard bound: another client's request to it is answered" "$(val ping "$W/hb.out")" ok
done_testing
