#!/bin/bash
# `pistisd policy apply` on the command line while `pistisd serve` runs agents' commands in
# the same root. The apply takes /data/pistis (flock), stops every agent process it finds,
# then tightens: a command serve started after that stop and before the tightening kept
# what it opened, as its fd outlives the change. Every start now holds /data/pistis shared
# until the child has the agent's uid (policy_apply_share), so a start during an apply is
# refused, and one in flight when the apply comes is finished before the apply's stop looks.
# Here the apply's first change (a chown back to root) is held 5 s (strace), so a start
# falls in that window every time. Debian root, server-min on loopback; root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
command -v strace >/dev/null || missing "no strace"
command -v flock >/dev/null || missing "no flock"

P=$BIN/pistisd
R=$(root_fresh debian) || missing "root_fresh debian failed"
W=$(scratch)
trap serve_test_cleanup EXIT # the apply and the command's client below are jobs

mkdir -p "$R/w/d"
echo secret >"$R/w/d/f"
echo '[{"path":"/w","access":"write"}]' >"$W/write.json"
echo '[{"path":"/w","access":"none"}]' >"$W/none.json"
relay_up "$R" "$W" || missing "serve did not connect"
AUID=$(timeout 30 "$BIN/pistis" exec --agent alice -- id -u 2>&1 | tail -n 1)
like "alice has a uid" "$AUID" '^1[0-9]{4}$'
# /w as `none` leaves it, then given to alice with its modes kept: the apply of `none`
# below has only chowns to make, the first of which strace holds.
"$P" policy apply --rules "$W/none.json" --root "$R" >/dev/null 2>&1
chown -R "$AUID:$AUID" "$R/w"
is "before: alice reads /w/d/f" "$(timeout 30 "$BIN/pistis" exec --agent alice -- cat /w/d/f 2>&1)" \
	secret

# fds of processes in the root that name /w/d/f
holders() {
	local p n=0
	for p in $(root_pids "$R"); do
		ls -l "/proc/$p/fd" 2>/dev/null | grep -q '/w/d/f$' && n=$((n + 1))
	done
	echo "$n"
}

# --- serve: a start while the apply holds /data/pistis ------------------------------------
strace -f -qq -o /dev/null -e trace=fchownat -e inject=fchownat:delay_enter=5000000:when=1 \
	"$P" policy apply --rules "$W/none.json" --root "$R" >"$W/apply.out" 2>&1 &
AP=$!
held=no
for _ in $(seq 200); do
	flock -n -s "$R/data/pistis" true || { held=yes; break; }
	sleep 0.05
done
is "the command line's apply holds /data/pistis" "$held" yes
sleep 0.5 # its stop of the agents' processes is done; its first change waits
# A file operation's helper becomes the agent, then opens the path: the same window.
out=$(timeout 30 "$BIN/pistis" read --agent alice /w/d/f 2>&1)
like "serve refuses a file operation: an apply runs" "$out" 'a policy apply is running in this root'
unlike "... and reads nothing" "$out" secret
ok "... all while the apply was still held" kill -0 "$AP"
timeout 60 "$BIN/pistis" exec --agent alice -- sh -c 'exec 3</w/d/f && echo opened && sleep 30' \
	>"$W/ex.out" 2>&1 &
for _ in $(seq 200); do grep -q . "$W/ex.out" && break; sleep 0.05; done
out=$(cat "$W/ex.out")
like "serve refuses the start: an apply runs" "$out" 'a policy apply is running in this root'
unlike "... nothing opened the file" "$out" opened
wait "$AP"
is "the apply ends (exit 0)" "$?" 0
is "after the apply, no process holds /w/d/f open" "$(holders)" 0
like "after the apply, alice cannot read /w/d/f" \
	"$(timeout 30 "$BIN/pistis" exec --agent alice -- cat /w/d/f 2>&1)" 'Permission denied'
out=$(timeout 30 "$BIN/pistis" exec --agent alice -- echo again 2>&1; echo "exit $?")
like "... and serve starts commands again" "$out" '^again'
[[ $out == again* ]] || tail -n 5 "$W/pd.log" | sed 's/^/# pd.log: /'
like "serve's log names the refusal" "$(cat "$W/pd.log")" 'a policy apply is running in this root'

# --- pistisd run: the same ---------------------------------------------------------------
exec 9<"$R/data/pistis"
flock -x 9
out=$(in_root "$R" pistisd run --agent alice -- echo ran 2>&1 9<&-)
is "pistisd run while an apply holds /data/pistis: exit 111" "$?" 111
flock -u 9
like "... saying why" "$out" 'A policy apply is running in this root \(it holds /data/pistis\); nothing started'
unlike "... and nothing ran" "$out" '^ran'
is "pistisd run with the apply gone: runs" "$(in_root "$R" pistisd run --agent alice -- echo ran 2>&1)" ran

# --- a start holds it until its child has the agent's uid -----------------------------------
# The child keeps pistisd's lock through its first close of pistisd's fds and lets it go
# right after setresuid, which strace holds here 0.5 s (the start may take 2 s): all that
# time an apply's lock waits, though pistisd closed its own copy when the clone returned.
# Before, the apply's stop, which finds the agents' processes by uid, could miss a child
# still root.
strace -f --seccomp-bpf -qq -o /dev/null -e trace=setresuid -e inject=setresuid:delay_enter=500000 \
	env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd run --agent alice -- true >"$W/run.out" 2>&1 9<&- &
RUN=$!
held=no
for _ in $(seq 250); do
	flock -n -x "$R/data/pistis" true 9<&- || { held=yes; break; }
	sleep 0.02
done
still=0
for _ in 1 2 3 4 5; do
	sleep 0.04
	flock -n -x "$R/data/pistis" true 9<&- || still=$((still + 1))
done
is "the run's start takes the lock" "$held" yes
ok "... and holds it while its child waits in setresuid ($still of 5 looks in 0.2 s)" \
	test "$still" -ge 3
wait "$RUN"
is "... and the run ends (exit 0)" "$?" 0 || sed "s/^/# /" "$W/run.out"
ok "... then it is free" flock -n -x "$R/data/pistis" true 9<&-

# --- an apply waits for a start in flight, then goes on -------------------------------------
# A shared hold (a start in flight: about a millisecond) delays the apply's lock, silently.
flock -s 9
(sleep 0.1 && flock -u 9) &
UL=$!
"$P" policy apply --rules "$W/write.json" --root "$R" >"$W/apply2.out" 2>&1 9<&-
is "an apply behind a shared hold of 0.1 s: exit 0" "$?" 0
unlike "... with no 'another apply' line" "$(cat "$W/apply2.out")" 'Another policy apply'
wait "$UL"
exec 9<&-

# --- a file operation's helper holds it until it has the agent's uid ------------------------
# As a command's child: the helper is a fork of serve (root) until its setresuid, which
# strace (attached to serve, following its forks) holds 0.5 s here.
is "with /w writable again, alice reads /w/d/f" \
	"$(timeout 30 "$BIN/pistis" read --agent alice /w/d/f 2>&1)" secret
strace -f -qq -o /dev/null -p "$PD" -e trace=setresuid -e inject=setresuid:delay_enter=500000 &
ST=$!
for _ in $(seq 200); do
	grep -Eq '^TracerPid:[[:space:]]*[1-9]' "/proc/$PD/status" && break
	sleep 0.05
done
# Looked at in /proc/locks, not by trying the lock: a try that held it exclusively at the
# moment the request came would have it refused.
ino=$(stat -c %i "$R/data/pistis")
shared() { grep -Eq "FLOCK +ADVISORY +READ +[0-9]+ +[0-9a-f]+:[0-9a-f]+:$ino " /proc/locks; }
timeout 30 "$BIN/pistis" read --agent alice /w/d/f >"$W/rd.out" 2>&1 &
RD=$!
held=no
for _ in $(seq 250); do
	shared && { held=yes; break; }
	sleep 0.02
done
still=0
for _ in 1 2 3 4 5; do
	sleep 0.04
	shared && still=$((still + 1))
done
is "a file operation's helper takes the lock" "$held" yes
ok "... and holds it while it waits in setresuid ($still of 5 looks in 0.2 s)" test "$still" -ge 3
wait "$RD"
is "... and the read ends with the file's text" "$(cat "$W/rd.out")" secret
kill "$ST" 2>/dev/null
wait "$ST" 2>/dev/null
ok "... then it is free" flock -n -x "$R/data/pistis" true

done_testing
