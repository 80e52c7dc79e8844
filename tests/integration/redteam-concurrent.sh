#!/bin/bash
# Red team: pistisd racing itself. Privileged operations run at once on one root (an
# operator's `docker exec … pistisd trusted add` beside serve's trusted.add, two operators,
# parallel batches): the drop-in must always grant exactly the scripts /data/trusted holds,
# and a lock that is held, or is not a regular file, must give a bounded wait or a clear
# refusal. Debian root with the real sudo; root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || missing "pistisd not built"
S=$(scratch)
R=$(root_fresh debian) || missing "root_fresh debian failed"
[ -x "$R/usr/bin/sudo" ] || missing "no sudo in the root"

"$P" users ensure-base --root "$R" >/dev/null
"$P" users ensure conc/a --root "$R" >/dev/null
for i in $(seq 1 8); do
	printf '#!/bin/sh\necho t%s\n' "$i" >"$S/t$i"
	chmod 0755 "$S/t$i"
done
granted() { # the scripts the drop-in names, sorted, one line
	grep -o '/data/trusted/[a-z0-9_-]*' "$R/etc/sudoers.d/pistis-trusted" 2>/dev/null |
		sed 's|.*/||' | sort | tr '\n' ' '
}
listed() { ls "$R/data/trusted" 2>/dev/null | sort | tr '\n' ' '; }
wrappers() { ls "$R/data/bin" 2>/dev/null | sort | tr '\n' ' '; }

# --- trusted add/remove at once: each rendered the drop-in from what /data/trusted held
# when it read it, so whichever installed last won (before the lock, 8 adds at once left
# 1-2 scripts out of sudo while each said "added", and 4 removes at once left 1-3 removed
# scripts granted).
for round in 1 2 3; do
	for i in $(seq 1 8); do
		"$P" trusted add "t$i" "$S/t$i" --root "$R" >"$S/add-$round-$i.out" 2>&1 &
	done
	wait
	is "round $round: 8 adds at once: /data/trusted holds all 8" "$(listed)" "t1 t2 t3 t4 t5 t6 t7 t8 "
	is "round $round: ... the drop-in grants exactly those" "$(granted)" "$(listed)"
	is "round $round: ... a wrapper for each" "$(wrappers)" "$(listed)"
	is "round $round: ... every add said 'added'" \
		"$(cat "$S"/add-"$round"-*.out | grep -c '^added t[1-8] sha256:')" 8
	ok "round $round: ... visudo -c passes" chroot "$R" visudo -c
	for i in 1 2 3 4; do
		"$P" trusted remove "t$i" --root "$R" >"$S/rm-$round-$i.out" 2>&1 &
	done
	# an add of a new name and an install at the same time as the removes
	"$P" trusted add "t$((round + 4))x" "$S/t1" --root "$R" >"$S/addx-$round.out" 2>&1 &
	"$P" trusted install --root "$R" >"$S/inst-$round.out" 2>&1 &
	wait
	is "round $round: 4 removes, an add and an install at once: the drop-in grants what is listed" \
		"$(granted)" "$(listed)"
	is "round $round: ... and holds t5-t8 and the new one" "$(listed)" \
		"$(printf 't%s\n' 5 6 7 8 "$((round + 4))x" | sort | tr '\n' ' ')"
	is "round $round: ... wrappers agree" "$(wrappers)" "$(listed)"
	is "round $round: ... every remove said 'removed'" \
		"$(cat "$S"/rm-"$round"-*.out | grep -c '^removed t[1-4]')" 4
	for f in "$S"/rm-"$round"-*.out "$S"/addx-"$round".out "$S"/inst-"$round".out; do
		grep -q '^\(removed\|added\|sudoers drop-in\)' "$f" || sed "s|^|# ${f##*/}: |" "$f"
	done
	for n in $(listed); do "$P" trusted remove "$n" --root "$R" >/dev/null 2>&1; done
	is "round $round: all removed one by one: no drop-in" "$(ls "$R/etc/sudoers.d")" README
done

# --- trusted install beside users remove/ensure: install confirms the drop-in with sudo -l
# for each member of pi-sandbox it read first; an agent removed (or half made) meanwhile
# made sudo say "unknown user" or grant nothing, and a good install exited 1 (9 of 25).
for i in $(seq 1 6); do "$P" users ensure "churn-$i" --root "$R" >/dev/null; done
"$P" trusted add t1 "$S/t1" --root "$R" >/dev/null 2>&1
(for k in $(seq 1 40); do
	for i in $(seq 1 6); do
		"$P" users remove "churn-$i" --root "$R" >/dev/null 2>&1
		"$P" users ensure "churn-$i" --root "$R" >/dev/null 2>&1
	done
done) &
churn=$!
fails=0
for k in $(seq 1 20); do
	"$P" trusted install --root "$R" >"$S/churn.out" 2>&1 || {
		fails=$((fails + 1))
		sed 's/^/# /' "$S/churn.out" | head -n 2
	}
done
kill "$churn" 2>/dev/null
wait "$churn" 2>/dev/null
is "20 installs while agents are removed and made: each confirmed" "$fails" 0
ok "... and a check after says all is well" "$P" trusted check --root "$R"
"$P" trusted remove t1 --root "$R" >/dev/null 2>&1

# --- the trusted lock: held by another (bounded wait, clear line), or not a lock file ----
L=$R/data/pistis/trusted.lock
python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(4)' "$L" "$S/held" &
holder=$!
for _ in $(seq 1 100); do [ -e "$S/held" ] && break; sleep 0.05; done
start=$(date +%s)
out=$("$P" trusted add t1 "$S/t1" --root "$R" 2>&1)
rc=$?
is "an add while another holds the lock waits for it, then succeeds" "$rc" 0
like "... and says it waits" "$out" 'Another trusted add, remove, adopt or install is running in this root \(it holds /data/pistis/trusted.lock\); waiting for it'
ok "... for as long as the other held it" test $(($(date +%s) - start)) -ge 2
wait "$holder"
"$P" trusted remove t1 --root "$R" >/dev/null 2>&1
for kind in dir fifo symlink hardlink other-owner; do
	rm -rf "$L"
	case $kind in
	dir) mkdir "$L" ;;
	fifo) mkfifo "$L" ;;
	symlink) ln -s /etc/shadow "$L" ;;
	hardlink) install -m 0600 /dev/null "$L" && ln "$L" "$R/data/pistis/lk2" ;;
	other-owner) install -m 0600 -o 10100 /dev/null "$L" ;;
	esac
	out=$(timeout 20 "$P" trusted add t1 "$S/t1" --root "$R" 2>&1)
	rc=$?
	is "a lock file that is a $kind: refused at once (exit 111)" "$rc" 111
	like "... naming it, nothing done" "$out" 'ot lock /data/pistis/trusted.lock: .*nothing done'
	is "... nothing added" "$(listed)" ""
	rm -rf "$L" "$R/data/pistis/lk2"
done
is "the symlink's target was not touched" "$(stat -c '%U %a' "$R/etc/shadow")" "root 640"
ok "with the lock file gone, add works again" "$P" trusted add t1 "$S/t1" --root "$R"
is "... and made it root's 0600" "$(stat -c '%U %a %h' "$L")" "root 600 1"

# --- two policy applies in a root without /data/pistis (an image's build, a root prepared
# before its first start): the lock was on /data/pistis, and with none there was no lock,
# so the two walks left a mix of both rule sets (25 directories 2770 and 6 0755 after one
# round of a write and a read apply of /w).
PR=$S/proot
mkdir -p "$PR/etc" "$PR/w"
cp -a /etc/passwd /etc/group /etc/shadow /etc/gshadow "$PR/etc/"
"$P" users ensure-base --root "$PR" >/dev/null
for d in $(seq 1 30); do
	mkdir "$PR/w/d$d"
	for f in $(seq 1 40); do echo x >"$PR/w/d$d/f$f"; done
done
echo '[{"path":"/w","access":"write"}]' >"$S/write.json"
echo '[{"path":"/w","access":"read"}]' >"$S/read.json"
for how in no-state no-data; do
	mixed=0
	for round in 1 2 3 4 5; do
		rm -rf "$PR/data/pistis"
		[ $how = no-data ] && rm -rf "$PR/data"
		"$P" policy apply --rules "$S/write.json" --root "$PR" --keep-processes >/dev/null 2>&1 &
		"$P" policy apply --rules "$S/read.json" --root "$PR" --keep-processes >/dev/null 2>&1 &
		wait
		modes=$(find "$PR/w" -printf '%m\n' | sort -u | tr '\n' ' ')
		[ "$modes" = "2770 660 " ] || [ "$modes" = "644 755 " ] || {
			mixed=$((mixed + 1))
			echo "# $how round $round: modes $modes"
		}
	done
	is "$how: two applies at once, 5 rounds: each ends as one whole apply left it" "$mixed" 0
done
ok "in a root without /data, the lock makes none" test ! -e "$PR/data"
mkdir "$PR/data"
"$P" policy apply --rules "$S/read.json" --root "$PR" --keep-processes >/dev/null 2>&1
is "where /data is, the lock makes /data/pistis root's 0700" "$(stat -c '%U %a' "$PR/data/pistis" 2>&1)" "root 700"

# --- serve beside an operator's `pistisd run` of the same agent ---------------------------
# Without a cgroup or an audit session (the process-group fallback) serve kills every
# process of an agent's uid when the agent's last command of its own ends, and removes the
# agent's SysV IPC objects: a `pistisd run` of the same agent (an operator's docker exec, a
# second serve on the same /data) lost its command (exit 137) to serve's next command's
# end, and the objects it used.
if [ -x "$BIN/server-min" ] && [ -x "$BIN/pistis" ]; then
	R2=$(root_fresh debian)
	W=$(scratch)
	PROBE=/usr/local/lib/pistis-tests/probe
	serve_down() {
		[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
		[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
		wait 2>/dev/null
		for p in $(root_pids "$R2"); do kill -9 "$p" 2>/dev/null; done
		ipc_remove ${AUID2:-}
		root_cleanup
	}
	trap serve_down EXIT
	mount -t tmpfs -o mode=0755,size=1m no-cgroup "$R2/sys/fs/cgroup"
	SERVE_ENV=PISTIS_NO_AUDIT_SESSION=1 relay_up "$R2" "$W"
	AUID2=$(timeout 30 "$BIN/pistis" exec --agent alice -- id -u 2>&1 | tail -n 1)
	like "serve runs alice's command (uid $AUID2)" "$AUID2" '^1[0-9]{4}$'
	(in_root_exec "$R2" PISTIS_NO_AUDIT_SESSION=1 pistisd run --agent alice -- \
		sh -c "$PROBE ipc-leave 65536 && sleep 6 && echo survived") >"$W/run.out" 2>&1 &
	RUN=$!
	for _ in $(seq 1 400); do [ "$(ipc_of "$AUID2")" = 3 ] && break; sleep 0.05; done
	is "the run's command made its objects" "$(ipc_of "$AUID2")" 3
	like "serve's next command of alice ends" \
		"$(timeout 30 "$BIN/pistis" exec --agent alice -- echo serve-cmd 2>&1)" '^serve-cmd'
	sleep 0.3
	is "... the run's objects are kept" "$(ipc_of "$AUID2")" 3
	wait "$RUN"
	is "... the operator's pistisd run of alice was not killed (exit 0)" "$?" 0
	like "... and ran to its end" "$(cat "$W/run.out")" 'survived'
	like "serve says what it left and why" "$(cat "$W/pd.log")" \
		'agent="alice": what runs as the agent, and its SysV IPC objects, are left: another pistisd \(pid [0-9]+\) runs a command of it'
	# With the run gone, serve's next command's end sweeps again.
	timeout 30 "$BIN/pistis" exec --agent alice -- true >/dev/null 2>&1
	sleep 0.3
	is "with no other pistisd's command, serve's sweep removes them again" "$(ipc_of "$AUID2")" 0
else
	untested "serve beside pistisd run" "server-min or pistis not built"
fi

done_testing
