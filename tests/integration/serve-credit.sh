#!/bin/bash
# Output credit in `pistisd serve`: readers that stop acknowledging must not keep other
# commands paused. Two readers that never acknowledge hold a quarter of the 64 MiB bound
# each, half of it together; a third reader's command, paused for its own 8 MiB bound,
# must read again once that reader has acknowledged, and run to its end. Before, any
# total over half kept every paused command paused. A relay of our own on loopback
# (serve-credit.py), a throwaway Debian root, root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd
need_python_root
trap serve_test_cleanup EXIT
serve_setup "$R"
fake_relay_run "$R" "$W" "$(dirname "$0")/serve-credit.py"
val() { sed -n "s/^$1=//p" "$W/out" | head -n 1; }
[ -n "$(val alice_bytes)" ] || sed 's/^/# /' "$W/out" "$W/pd.log" | tail -n 20
is "the acknowledging reader gets all of its 30 MiB while two others stall at half the bound" \
	"$(val alice_bytes)" 31457280
is "... and its command's end" "$(val alice_exit)" yes
is "an agent over its bound by its own stalled reader: all commands over half the bound" \
	"$(val total_over_half)" yes
is "... its next command, read by another client, still runs to its end" "$(val dave_echo_exit)" yes
ok "pistisd serve is still running" kill -0 "$PD"
done_testing
