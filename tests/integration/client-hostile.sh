#!/bin/bash
# The `pistis` client against a fake sandbox (tests/integration/wsfake.py) behind the real
# server-min: answers that are errors or do not say what was done must end in the exit code
# docs/api.md gives, never 0 with a file cut short, and never a wait without end.
. "$(dirname "$0")/../lib.sh"
need_bins server-min pistis
command -v python3 >/dev/null || missing "no python3"
W=$(mktemp -d "${TMPDIR:-/tmp}/pistis-client-hostile.$$.XXXXXX")
FAKE="python3 $(cd "$(dirname "$0")" && pwd)/wsfake.py"
# below the ephemeral range (32768+), so a client socket cannot hold our port
SP=$((20000 + RANDOM % 12000)); CP=$((SP + 1))
cleanup() {
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
EVIL=evil-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
CT=client-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
cat >"$W/pistis.json" <<J
{"listen": {"sandbox": "127.0.0.1:$SP", "client": "127.0.0.1:$CP"}, "client_token": "$CT",
 "sandboxes": [{"name": "evil", "token": "$EVIL"}]}
J
"$BIN/server-min" --config "$W/pistis.json" >"$W/smin.log" 2>&1 &
SM=$!
for _ in $(seq 100); do
	PISTIS_URL=ws://127.0.0.1:$CP PISTIS_TOKEN=$CT "$BIN/pistis" ls >/dev/null 2>&1 && break
	sleep 0.1
done
val() { sed -n "s/^$1=//p" "$2" | head -n 1; }

$FAKE client-hostile "$SP" "$EVIL" "$CP" "$CT" "$BIN/pistis" "$SM" >"$W/ch.out" 2>&1
wait "$SM" 2>/dev/null # its last case kills server-min
SM=
[ -z "$(val exception "$W/ch.out")" ] || sed 's/^/# /' "$W/ch.out"
is "exec: a re-attach refused (not_found) ends with 125; it waited for ever" \
	"$(val attach_refused "$W/ch.out")" 125:exec.start,exec.attach
like "... saying the rest of the output and the status are lost" \
	"$(val attach_refused_stderr "$W/ch.out")" "Cannot re-attach command 7; its output from sequence 1 on"
is "write: an answer whose length is short of the bytes sent is 125; it exited 0" \
	"$(val write_short "$W/ch.out")" 125:fs.write
like "... saying so" "$(val write_short_stderr "$W/ch.out")" \
	"does not say all 5 bytes at byte 0 were written \\(length\\): /f is incomplete"
is "write: an answer neither ok nor an error is 125; it exited 0" \
	"$(val write_no_ok "$W/ch.out")" 125:fs.write
is "edit: an answer neither ok nor an error is 125; it exited 0" \
	"$(val edit_no_ok "$W/ch.out")" 125:fs.edit
like "... saying so" "$(val edit_no_ok_stderr "$W/ch.out")" "fs.edit: an answer that is neither ok nor an error"
is "write: an empty stdin is one fs.write of nothing, exit 0" "$(val write_empty "$W/ch.out")" 0:fs.write
is "write: a later piece refused exits 1 (an error answer)" "$(val write_later "$W/ch.out")" 1:fs.write,fs.write
like "... saying the file now holds only the first piece" "$(val write_later_stderr "$W/ch.out")" \
	"fs.write: /f now holds only the first 131072 of the 300000 bytes \\(the piece at byte 131072 failed"
is "write: a closed stdin (<&-) is refused, 100, nothing sent; it emptied the file, exit 0" \
	"$(val write_closed "$W/ch.out")" 100:
like "... saying so" "$(val write_closed_stderr "$W/ch.out")" "write: stdin is closed; nothing written"
is "write: a stdin that fails (EISDIR) is said, exit 1, nothing sent" "$(val write_eisdir "$W/ch.out")" 1:
like "... with its reason" "$(val write_eisdir_stderr "$W/ch.out")" "Failed to read stdin: Is a directory; nothing written"
is "exec: exec.start answered ok without a command is 125; it waited for ever" \
	"$(val start_no_cmd "$W/ch.out")" 125:exec.start
is "exec: ... with a cmd that is not a number: 125" "$(val start_bad_cmd "$W/ch.out")" 125:exec.start
like "... saying so" "$(val start_no_cmd_stderr "$W/ch.out")" "exec.start: an answer that names no command"
is "write: the connection lost at the second piece is 125, not 111 (cannot connect)" \
	"$(val write_drop "$W/ch.out")" 125:fs.write,fs.write
like "... saying so, and what the file holds" "$(val write_drop_stderr "$W/ch.out")" \
	"Connection to the server failed before the answer.*/f now holds only the first 131072 of the 300000 bytes \\(the piece at byte 131072 was not answered"
is "write: a piece answered twice (server-min passes one), a later one refused: exit 1" \
	"$(val write_dup "$W/ch.out")" 1:fs.write,fs.write,fs.write
# --- a sandbox that never answers: --answer-timeout ends each request with 125 ----------------
# CASE|STATUS:OPS|WHAT IS CHECKED|WHAT ITS STDERR SAYS|THE REGEX STDERR MATCHES
while IFS='|' read -r case want what says re; do
	is "$what" "$(val "$case" "$W/ch.out")" "$want"
	like "... $says" "$(val "${case}_stderr" "$W/ch.out")" "$re"
done <<'CASES'
mute_ping|125:ping|call ping: no answer within --answer-timeout 2 is 125; it waited for ever|saying which request and how long|ping: no answer from the server within 2 s \(waited 2\.[0-9] s\); the relay or the sandbox 'evil' is not answering \(--answer-timeout SEC waits longer, 0 for ever\)
mute_list|125:exec.list|call exec.list: no answer is 125|saying so|exec.list: no answer from the server within 1 s
mute_read|125:fs.read|read: no answer is 125|saying so|fs.read: no answer from the server within 1 s
mute_write|125:fs.write,fs.write|write: the second piece not answered is 125|saying so, and what the file holds|fs.write: no answer from the server within 1 s.*/f now holds only the first 131072 of the 300000 bytes \(the piece at byte 131072 was not answered
mute_start|125:exec.start|exec: exec.start not answered is 125|saying the command may have started, and its tag|exec.start: no answer from the server within 1 s.* \| pistis: The command may have started all the same: its tag is 't1' \(exec.list lists it\)
CASES
like "call ping with no answer: after 2 s, not at once" "$(val mute_ping_secs "$W/ch.out")" '^[23]$'
like "exec: a command silent for longer than --answer-timeout is not cut: its own status" \
	"$(val slow_command "$W/ch.out")" '^3:exec.start'
is "exec: exec.exit without last_seq is 125; it exited 0 with whatever output had come" \
	"$(val exit_no_last_seq "$W/ch.out")" 125:exec.start
like "... saying so" "$(val exit_no_last_seq_stderr "$W/ch.out")" \
	"Exit event of command 7 names no last_seq \\(the sequence of its last output frame; 1 arrived\\): its output may be incomplete"
like "exec: a connection gone silent under a running command is dropped by the keepalive and the command re-attached" \
	"$(val silent_link "$W/ch.out")" '^4:exec.start,exec.attach'
done_testing
