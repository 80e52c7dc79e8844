#!/bin/bash
# Red team: the 64 KiB every command may hold while its agent is over its output bound
# (docs/protocol.md, "Readers and acknowledgements") must not let one agent take the bound on
# all commands' output. Ended commands do not count against an agent's 32, so an agent whose
# short commands each end under the floor, read by readers that never acknowledge, piled up
# to 256 of them (16 MiB) past its share: under `--max-buffered 8` the total was full, and
# another agent's command, whose reader acknowledges, stayed paused for the 10 minutes those
# commands wait for an attach. A relay of our own on loopback (serve-floor.py), agents of
# uids 33101 and 33102, a throwaway Debian root, root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd
need_python_root
trap serve_test_cleanup EXIT
serve_setup "$R"
SERVE_ARGS="--max-buffered 8" fake_relay_run "$R" "$W" "$(dirname "$0")/serve-floor.py"
val() { sed -n "s/^$1=//p" "$W/out" | head -n 1; }
sed 's/^/# /' "$W/out"
[ -n "$(val alice_exit)" ] || sed 's/^/# /' "$W/pd.log" | tail -n 20
ok "mallory started 64 short commands or more ($(val mallory_started))" \
	test "$(val mallory_started)" -ge 64
ok "mallory holds at most half the 8 MiB bound, and a read each of its 32 (${m:=$(val mallory_buffered)})" \
	test "${m:-99999999}" -le $((4 * 1048576 + 32 * 60000))
ok "... so the bound on all output is not reached (${t:=$(val total_buffered)} < 8 MiB)" \
	test "${t:-99999999}" -lt $((8 * 1048576))
is "alice's command, whose reader acknowledges, gets its 2 MiB" "$(val alice_bytes)" 2097152
is "... and its end" "$(val alice_exit)" yes
ok "pistisd serve is still running" kill -0 "$PD"
done_testing
