#!/bin/bash
# `pistis exec` in pipelines, as a user of ssh or a shell pipeline expects it (client
# review):
# - a reader that goes away (`pistis exec … | head -1`): the command gets SIGPIPE, as a
#   pipeline's writer does (SIGKILL a moment later if it ignores SIGPIPE), and pistis exits
#   quietly with its status, 141 (before: pistis wrote into the closed pipe for ever and the
#   command ran on, also after pistis was killed).
# - a closed stdin, stdout or stderr (`<&-`, `>&-`) is /dev/null (before: libwebsockets' first
#   fd took its number: `exec -i … <&-` read that for stdin and never ended).
# - SIGINT, SIGTERM, SIGHUP to pistis exec without a terminal reach the command and pistis
#   exits with its status; one that ignores the signal is left after 5 s, pistis ending by
#   it (before: the signal ended only pistis, and the command ran on). Stalled on a full
#   stdout, pistis still hears them and ends by them.
# - an output that fails otherwise (a full disk): said, and no exit 0 (before: exit 0, the
#   copy cut, without a word).
# - what held: binary output byte-exact, stdout and stderr kept apart, stdin from a file.
# Root, private mount namespace, a throwaway Debian root, loopback; agent uid 33012.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
need_python_root
trap serve_test_cleanup EXIT

in_root "$R" pistisd users ensure-base >/dev/null || exit 1
in_root "$R" pistisd users ensure c --uid 33012 >/dev/null || exit 1
relay_up "$R" "$W" || { echo "Bail out! pistisd serve did not connect: $(tail -n 3 "$W/pd.log")"; exit 1; }
P() { timeout 20 "$BIN/pistis" exec --sandbox s1 --agent c "$@"; }
# alive MARK: a process of the agent's whose argv holds MARK
alive() { pgrep -u 33012 -f "$1" >/dev/null; }
gone() { for _ in $(seq 30); do alive "$1" || return 0; sleep 0.1; done; return 1; }

# --- the reader goes away ---------------------------------------------------------------------
for splice in "" 1; do
	how=${splice:+", not spliced"}
	s=$SECONDS
	PISTIS_NO_SPLICE=$splice P -- sh -c 'exec yes mark-yes-$0' "$splice" 2>"$W/e" |
		head -n 1 >"$W/first"
	rc=${PIPESTATUS[0]}
	is "pistis exec … | head -n 1$how: the first line" "$(cat "$W/first")" "mark-yes-$splice"
	is "... pistis exits 141 (SIGPIPE), not for ever" "$rc" 141
	ok "... within seconds" [ $((SECONDS - s)) -lt 10 ]
	is "... quietly" "$(cat "$W/e")" ""
	ok "... and the command is stopped" gone "mark-yes-$splice"
done
# a command that ignores SIGPIPE never sees the EPIPE that ends it locally: SIGKILL follows
s=$SECONDS
rc=$(P -- sh -c 'trap "" PIPE; exec sh -c "while :; do echo mark-ign; done"' 2>"$W/e" |
	head -n 1 >/dev/null; echo "${PIPESTATUS[0]}")
is "a command that ignores SIGPIPE is killed after the grace: 137" "$rc" 137
ok "... within seconds" [ $((SECONDS - s)) -lt 10 ]
ok "... and is gone" gone "mark-ign"
is "... quietly" "$(cat "$W/e")" ""
like "pistisd serves on" "$(P -- echo alive 2>&1)" '^alive$'

# --- closed standard fds ----------------------------------------------------------------------
out=$(P -i -- sh -c 'wc -c; echo done' <&- 2>&1); rc=$?
is "exec -i with stdin closed: the command reads end of file" "$out" "0
done"
is "... exit 0" "$rc" 0
rc=0; P -- sh -c 'echo out; echo err >&2' >&- 2>"$W/e" || rc=$?
is "exec with stdout closed: stderr still arrives" "$(cat "$W/e")" err
is "... exit 0" "$rc" 0
rc=0; out=$(P -- sh -c 'echo out; echo err >&2' 2>&-) || rc=$?
is "exec with stderr closed: stdout arrives" "$out" out
is "... exit 0" "$rc" 0

# --- signals to pistis without a terminal ---------------------------------------------------
# bg CMD…: pistis exec in the background with SIGINT not ignored (job control on), its pid
# in BP once the command printed "ready"
bg() {
	set -m
	"$BIN/pistis" exec --sandbox s1 --agent c -- "$@" >"$W/bo" 2>"$W/be" &
	BP=$!
	set +m
	for _ in $(seq 50); do grep -q ready "$W/bo" && return; sleep 0.1; done
}
trapper='for s in INT TERM HUP; do trap "echo got-$s; exit 3" $s; done; echo ready $0; while :; do sleep 0.1; done'
for sig in INT TERM HUP; do
	bg sh -c "$trapper" "mark-trap-$sig"
	kill -$sig "$BP"
	rc=0; wait "$BP" || rc=$?
	is "SIG$sig to pistis exec (no --tty) reaches the command" "$(grep got "$W/bo")" "got-$sig"
	is "... pistis exits with the command's status" "$rc" 3
	ok "... the command is gone" gone "mark-trap-$sig"
done
bg sh -c 'echo ready; exec sleep 29.5'
kill -INT "$BP"
rc=0; wait "$BP" || rc=$?
is "SIGINT to pistis exec running sleep: 130" "$rc" 130
# ended by the signal, not exit(130): a calling shell script stops at ^C as for a local
# command (bash goes on after a child that caught SIGINT and exited)
out=$(python3 -c '
import signal, subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
p.stdout.readline()
p.send_signal(signal.SIGINT)
print(p.wait())' "$BIN/pistis" exec --sandbox s1 --agent c -- sh -c 'echo ready; exec sleep 29.4')
is "... by SIGINT itself, as a shell sees it" "$out" -2
ok "... and sleep is gone" gone "sleep 29.5"
is "... quietly" "$(cat "$W/be")" ""
bg sh -c 'trap "" TERM; echo ready $0; while :; do sleep 0.1; done' mark-deaf
s=$SECONDS
kill -TERM "$BP"
rc=0; wait "$BP" || rc=$?
is "a command that ignores SIGTERM: pistis ends by it after the wait" "$rc" 143
ok "... within 5-8 s" [ $((SECONDS - s)) -ge 4 ] && [ $((SECONDS - s)) -lt 9 ]
like "... saying the command was left running" "$(cat "$W/be")" 'did not end within 5 s of signal 15; leaving it running'
pkill -KILL -u 33012 -f mark-deaf
# a reader that stalls: pistis blocked on its full stdout still hears SIGTERM (nothing can be
# sent then: it ends by it at once)
mkfifo "$W/fifo"
"$BIN/pistis" exec --sandbox s1 --agent c -- sh -c 'exec yes mark-stall' >"$W/fifo" 2>"$W/be" &
BP=$!
exec 7<"$W/fifo"
sleep 2
s=$SECONDS
kill -TERM "$BP"
for _ in $(seq 30); do kill -0 "$BP" 2>/dev/null || break; sleep 0.1; done
ok "SIGTERM to pistis exec whose reader stalls: it ends at once" sh -c "! kill -0 $BP 2>/dev/null"
rc=0; kill -KILL "$BP" 2>/dev/null; wait "$BP" || rc=$?
exec 7<&-
is "... by SIGTERM" "$rc" 143
pkill -KILL -u 33012 -f mark-stall

# --- what held -------------------------------------------------------------------------------
head -c 3000000 /dev/urandom >"$R/tmp/blob"
chmod 644 "$R/tmp/blob"

# --- an output that fails (a full disk: /dev/full) ---------------------------------------------
# Each exited 0 without a word before, the copy cut or empty; cat says why and exits 1.
for splice in "" 1; do
	how=${splice:+", not spliced"}
	rc=0; PISTIS_NO_SPLICE=$splice P -- cat /tmp/blob >/dev/full 2>"$W/e" || rc=$?
	is "exec -- cat into a full disk$how: exit 1, not 0" "$rc" 1
	like "... saying why" "$(cat "$W/e")" "Failed to write to stdout: No space left on device"
done
rc=0; P -- sh -c 'cat /tmp/blob; exit 3' >/dev/full 2>/dev/null || rc=$?
is "... a command that fails keeps its own status (3)" "$rc" 3
rc=0; timeout 20 "$BIN/pistis" read --sandbox s1 --agent c /tmp/blob >/dev/full 2>"$W/e" || rc=$?
is "read into a full disk: exit 1, not 0" "$rc" 1
like "... saying why" "$(cat "$W/e")" "Failed to write to stdout: No space left on device"
rc=0; timeout 20 "$BIN/pistis" --json status --sandbox s1 >/dev/full 2>"$W/e" || rc=$?
is "status --json into a full disk: exit 1" "$rc" 1
rc=0; timeout 20 "$BIN/pistis" ls >/dev/full 2>"$W/e" || rc=$?
is "ls into a full disk: exit 1" "$rc" 1
like "... saying so" "$(cat "$W/e")" "Failed to write to stdout"
P -- cat /tmp/blob >"$W/blob" 2>/dev/null
ok "binary output into a file is byte-exact" cmp -s "$R/tmp/blob" "$W/blob"
P -- cat /tmp/blob 2>/dev/null | cat >"$W/blob2"
ok "... and into a pipe" cmp -s "$R/tmp/blob" "$W/blob2"
P -- cat /tmp/blob 2>/dev/null | (sleep 2; dd bs=1k status=none) >"$W/blob3"
ok "... and into a slow reader" cmp -s "$R/tmp/blob" "$W/blob3"
timeout 20 "$BIN/pistis" read --sandbox s1 --agent c /tmp/blob 2>"$W/e" | head -c 10 >/dev/null
is "pistis read of 3 MB | head -c 10: stops, 141 (SIGPIPE) as cat does" "${PIPESTATUS[0]}" 141
is "... quietly" "$(cat "$W/e")" ""
P -i -- sha256sum <"$R/tmp/blob" >"$W/sum" 2>&1
is "stdin from a 3 MB file reaches the command whole" "$(cut -d' ' -f1 "$W/sum")" \
	"$(sha256sum <"$R/tmp/blob" | cut -d' ' -f1)"
P -- sh -c 'for i in 1 2 3; do echo o$i; echo e$i >&2; done' >"$W/o" 2>"$W/e"
is "stdout and stderr apart, in order: stdout" "$(tr '\n' ' ' <"$W/o")" "o1 o2 o3 "
is "... stderr" "$(tr '\n' ' ' <"$W/e")" "e1 e2 e3 "

done_testing
