#!/bin/bash
# A relay that sends requests and does not read their answers must not grow `pistisd
# serve`'s memory without bound: past 16 MiB of answers waiting, serve stops reading
# requests until they are under half (docs/protocol.md, "Limits"). Before, 6000
# sandbox.status requests of a relay (or of clients through server-min, which stops
# reading a sandbox while a client's queue is full) left every answer in serve's memory:
# hundreds of MiB. A relay of our own on loopback (serve-unread.py), a throwaway Debian
# root, root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd
need_python_root
trap serve_test_cleanup EXIT
serve_setup "$R"
# agents with long ids and uids of their own: a status answer names each command's agent
in_root "$R" pistisd users ensure-base >/dev/null
AG=()
for i in 0 1; do
	a=$(printf 'unread%d-%0240d' $i 0)
	in_root "$R" pistisd users ensure "$a" --uid $((10980 + i)) >/dev/null || echo "# ensure failed"
	AG+=("$a")
done
fake_relay_run "$R" "$W" "$(dirname "$0")/serve-unread.py" "${AG[@]}"
val() { sed -n "s/^$1=//p" "$W/out" | head -n 1; }
sed 's/^/# /' "$W/out"
is "64 commands started" "$(val started)" 64
ok "a status answer is large (over 20 KiB): $(val status_bytes)" test "$(val status_bytes)" -gt 20000
rss=$(val peak_rss_mib)
ok "serve's memory stays under 48 MiB while its answers are not read: peak $rss MiB" \
	test -n "$rss" -a "${rss:-0}" -lt 48
like "... and it says why it stopped reading" "$(cat "$W/pd.log")" \
	'The relay is not reading \(16 MiB of answers wait for it\)'
n=$(val answered)
ok "once the relay reads again, serve reads requests again (over 1000 answered): $n" \
	test "${n:-0}" -gt 1000
ok "pistisd serve is still running" kill -0 "$PD"
done_testing
