#!/bin/bash
# Red team: the 64 KiB every command may hold while its agent is over its output bound
# (docs/protocol.md, "Readers and acknowledgements") must not let one agent take the bound on
# all commands' output. Ended commands do not count against an agent's 32, so an agent whose
# short commands each end under the floor, read by readers that never acknowledge, piled up
# to 256 of them (16 MiB) past its share: under `--max-buffered 8` the total was full, and
# another agent's command, whose reader acknowledges, stayed paused for the 10 minutes those
# commands wait for an attach. And the stdin serve queued for a command: ended commands kept
# theirs (1 MiB each) as long. A relay of our own on loopback (serve-floor.py), agents of
# uids 33101-33103, a throwaway Debian root, root, private mount namespace.
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
# Stdin too: what serve queued for a command's stdin stayed, 1 MiB each, until the command
# was forgotten; ended commands, which do not count against an agent's 32, kept theirs for
# the 10 minutes they wait for an acknowledgement (148 of them: serve from 1 to 154 MB).
ok "trudy started its short commands, each sent 1 MiB of stdin ($(val trudy_started))" \
	test "$(val trudy_started)" -ge 100
ok "... and serve holds none of it once they ended (grew ${g:=$(val stdin_rss_growth_kib)} KiB)" \
	test "${g:-999999}" -lt 32768
ok "pistisd serve is still running" kill -0 "$PD"
done_testing
