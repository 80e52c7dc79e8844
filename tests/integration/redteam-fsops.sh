#!/bin/bash
# Red team: file operations pistisd performs as the agent (fs.*), attacked by the agent
# itself: it runs as the same uid as the helper that does the work, so it can signal that
# helper, race it and plant what it likes where it may write. server-min + pistisd serve +
# pistis as real processes in a private mount namespace over a throwaway Debian root.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
R=$(root_fresh debian) || missing "no debian test root"
W=$(mktemp -d "${TMPDIR:-/tmp}/pistis-test.$$.XXXXXX")
trap 'serve_test_cleanup; rm -rf "$W"' EXIT

relay_up "$R" "$W"
P() { "$BIN/pistis" "$@"; }
like "pistisd is connected" "$(P ls 2>&1)" '^s1 +connected'
SD=$(pgrep -n -f "pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1")
home=$(in_root "$R" pistisd users ensure alice | sed -n 's/^home=//p')
auid=$(stat -c %u "$R$home")
call() { timeout 40 "$BIN/pistis" call "$@" 2>&1; }
# held_write STRACE-ARG... -- PATH TEXT OUT: strace pistisd with those arguments (a delay
# they inject into the fs.write helper), then fs.write TEXT to PATH as alice in the
# background into OUT; returns once the helper runs and half a second has passed, with
# ST (strace) and CALL (the client) set.
# The pid of the agent's fs helper (a child of pistisd running as the agent), once there is
# one (at most 15 s: with every read of pistisd's delayed by 1 s, as below, the agent's
# identity is confirmed (ten reads of the registry and /etc) before the helper is forked);
# 1 when there is none.
helper_pid() {
	local hp
	for _ in $(seq 750); do
		hp=$(pgrep -P "$SD" -u "$auid" | head -1)
		[ -n "$hp" ] && { echo "$hp"; return 0; }
		sleep 0.02
	done
	return 1
}
held_write() {
	local a=()
	while [ "$1" != -- ]; do a+=("$1"); shift; done
	shift
	strace -qq -f -p "$SD" "${a[@]}" &
	ST=$!
	sleep 0.5
	call fs.write "{\"agent\":\"alice\",\"path\":\"$1\",\"data\":\"$(printf '%s' "$2" | base64)\"}" >"$3" &
	CALL=$!
	for _ in $(seq 500); do pgrep -P "$SD" -u "$auid" >/dev/null && break; sleep 0.01; done
	sleep 0.5
}

# --- a helper killed mid-answer --------------------------------------------------------------
# The helper runs as the agent, so the agent may SIGKILL it while it writes a large answer
# into the pipe. Half an answer is not an answer: forwarded, it is bad JSON that the relay
# drops, and the client waits forever. strace holds pistisd's reads so the pipe fills and the
# helper is blocked inside its write when the agent's kill lands.
head -c 131072 /dev/urandom >"$R$home/big"
chown "$auid:$auid" "$R$home/big"
strace -qq -p "$SD" -o /dev/null -e trace=read -e inject=read:delay_enter=1000000 &
ST=$!
sleep 0.5
call fs.read "{\"agent\":\"alice\",\"path\":\"$home/big\"}" >"$W/cut.out" &
CALL=$!
hp=$(helper_pid)
wchan=
for _ in $(seq 200); do
	wchan=$(cat "/proc/${hp:-0}/wchan" 2>/dev/null)
	case "$wchan" in *pipe_write) break ;; esac
	sleep 0.05
done
# (what the helper holds meanwhile, as the agent: its answer pipe, and /dev/null on 0-2, not
# pistisd's stdout and stderr, this test's pd.log, which it held before; red team)
hfds=$(for f in /proc/"${hp:-0}"/fd/*; do printf '%s->%s ' "${f##*/}" "$(readlink "$f")"; done)
[ -n "$hp" ] && setpriv --reuid="$auid" --regid="$auid" --clear-groups kill -KILL "$hp"
kill "$ST"; wait "$ST" 2>/dev/null; ST=
wait "$CALL"
like "the agent killed its helper inside its answer's write" "$wchan" 'pipe_write'
like "the helper holds its answer pipe and /dev/null on 0-2, nothing of pistisd's" "$hfds" \
	'^0->[^ ]*/dev/null 1->[^ ]*/dev/null 2->[^ ]*/dev/null 3->pipe:\[[0-9]+\] $'
like "a helper killed mid-answer: the client gets an error, not silence" "$(head -c 300 "$W/cut.out")" '"ok":false'
like "the next fs.read of the same file answers whole" \
	"$(call fs.read "{\"agent\":\"alice\",\"path\":\"$home/big\"}" | grep -o '"ok":true\|"eof":true' | paste -sd,)" '"ok":true,"eof":true'

# --- the helper is not dumpable whatever fs.suid_dumpable says ---------------------------------
# setresuid sets "dumpable" to fs.suid_dumpable; at 1 (accepted with --allow suid_dumpable)
# the agent could attach to the helper, a copy of the daemon's memory (other agents'
# output and environments), for as long as it runs. The host's sysctl is not ours to change
# here: strace shows the helper making itself non-dumpable after its id change.
strace -qq -f -p "$SD" -o "$W/ids.st" -e trace=setresuid,prctl &
ST=$!
sleep 0.5
call fs.stat "{\"agent\":\"alice\",\"path\":\"$home\"}" >/dev/null
sleep 0.2
kill "$ST"; wait "$ST" 2>/dev/null; ST=
like "the helper says PR_SET_DUMPABLE 0 after it became the agent" \
	"$(grep -E 'setresuid|PR_SET_DUMPABLE' "$W/ids.st" | sed 's/^[0-9]* *//' | cut -c1-40 | paste -sd' ')" \
	"setresuid\\($auid, $auid, $auid\\).*prctl\\(PR_SET_DUMPABLE, (SUID_DUMP_DISABLE|0)"

# --- a rule tightened while a helper holds a writable fd --------------------------------------
# Tightening does not revoke open fds, so before_tighten stops what runs as an agent: the
# helpers of file operations too. Here strace holds an fs.write helper right after its
# open (the agent could SIGSTOP it there just as well) while policy.apply makes the file
# read-only; the write must not land after the apply.
mkdir -p "$R/data/tight"
echo before >"$R/data/tight/f"
chmod 0777 "$R/data/tight"
chmod 0666 "$R/data/tight/f"
held_write -o /dev/null -e trace=pwrite64 -e inject=pwrite64:delay_enter=4000000 -- \
	/data/tight/f after "$W/tw.out"
like "policy.apply tightens while the helper holds the file open" \
	"$(call policy.apply '{"rules":"[{\"path\":\"/data/tight\",\"access\":\"read\"}]"}')" '"ok":true.*"complete":true'
wait "$CALL"
kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null; ST=
is "the file is read-only for agents after the apply" "$(stat -c '%U %a' "$R/data/tight/f")" "root 644"
is "the held write did not land after the tightening" "$(cat "$R/data/tight/f")" before
like "the held fs.write got an error" "$(cat "$W/tw.out")" '"ok":false'
like "fs.write as the agent is denied now" \
	"$(call fs.write "{\"agent\":\"alice\",\"path\":\"/data/tight/f\",\"data\":\"eA==\"}")" '"code":"denied"'

# --- a helper killed part-way through a write -----------------------------------------------
# The helper may be killed at any point (the agent, a policy apply's stop, the timeout).
# fs.write truncated the file first and fs.edit too: killed after that, the file was empty,
# its old content gone and the new never written, and the answer said nothing had been done
# (red team). They write over the old bytes first now, then cut what is left over, and the
# answer says the operation may have been partly done. strace holds the helper at its
# first write (after the truncation, in the old order) and the agent kills it.
printf 'old content, long enough\n' >"$R$home/keep"
chown "$auid:$auid" "$R$home/keep"
held_write -o /dev/null -e trace=ftruncate,pwrite64 -e inject=ftruncate:delay_exit=4000000 \
	-e inject=pwrite64:delay_enter=4000000 -- "$home/keep" new "$W/kw.out"
hp=$(pgrep -P "$SD" -u "$auid" | head -1)
[ -n "$hp" ] && setpriv --reuid="$auid" --regid="$auid" --clear-groups kill -KILL "$hp"
wait "$CALL"
kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null; ST=
is "an fs.write killed part-way leaves the file's old content, not an empty file" \
	"$(cat "$R$home/keep")" "old content, long enough"
like "... and its answer says it may have been partly done" "$(cat "$W/kw.out")" \
	'killed by signal 9 before it answered; it may have been partly done'
printf 'a: keep\nb: change me\n' >"$R$home/edit"
chown "$auid:$auid" "$R$home/edit"
strace -qq -f -p "$SD" -o /dev/null -e trace=ftruncate,pwrite64 -e inject=ftruncate:delay_exit=4000000 \
	-e inject=pwrite64:delay_enter=4000000 &
ST=$!
sleep 0.5
call fs.edit "{\"agent\":\"alice\",\"path\":\"$home/edit\",\"old\":\"change me\",\"new\":\"x\"}" >"$W/ke.out" &
CALL=$!
hp=$(helper_pid)
sleep 0.5
[ -n "$hp" ] && setpriv --reuid="$auid" --regid="$auid" --clear-groups kill -KILL "$hp"
wait "$CALL"
kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null; ST=
is "an fs.edit killed part-way leaves the file as it was" "$(cat "$R$home/edit")" "$(printf 'a: keep\nb: change me')"
like "... and says it may have been partly done" "$(cat "$W/ke.out")" 'it may have been partly done'
like "fs.edit of the same file then works" \
	"$(call fs.edit "{\"agent\":\"alice\",\"path\":\"$home/edit\",\"old\":\"change me\",\"new\":\"x\"}")" '"ok": *true'
is "... and leaves what it should" "$(cat "$R$home/edit")" "$(printf 'a: keep\nb: x')"

# --- fs.remove {recursive} and mount points ------------------------------------------------------
# Mount points are not crossed: one was found by a change of st_dev only, so a bind mount of
# the same file system inside the tree was entered and emptied (a file outside the tree named
# went), and a directory named that is itself a mount point was emptied (red team).
mkdir -p "$R$home/victimsrc" "$R$home/tree/sub/bm" "$R$home/vol"
echo precious >"$R$home/victimsrc/precious"
chown -R "$auid:$auid" "$R$home/victimsrc" "$R$home/tree" "$R$home/vol"
mount --bind "$R$home/victimsrc" "$R$home/tree/sub/bm"
out=$(call fs.remove "{\"agent\":\"alice\",\"path\":\"$home/tree\",\"recursive\":true}")
like "fs.remove of a tree with a bind mount (same file system) inside: refused" "$out" 'a mount point inside \(not crossed\)'
ok "... the file behind the bind mount is still there" test -f "$R$home/victimsrc/precious"
umount "$R$home/tree/sub/bm"
mount -t tmpfs -o size=1m,mode=0700 vol "$R$home/vol"
echo kept >"$R$home/vol/f" && chown -R "$auid:$auid" "$R$home/vol"
out=$(call fs.remove "{\"agent\":\"alice\",\"path\":\"$home/vol\",\"recursive\":true}")
like "fs.remove of a directory that is a mount point: refused" "$out" 'the directory is a mount point: nothing removed'
ok "... what is in it is still there" test -f "$R$home/vol/f"
umount "$R$home/vol"
like "fs.remove of the tree with nothing mounted: removed" \
	"$(call fs.remove "{\"agent\":\"alice\",\"path\":\"$home/tree\",\"recursive\":true}")" '"ok": *true'
rm -rf "$R$home/victimsrc" "$R$home/vol"

# --- edges: fs.mkdir over a file, fs.read with limit 0, a path over 4 KiB in the audit line ------
# (red team: mkdir answered ok over a file or symlink; limit 0 answered length 0, eof false,
# which a reader paging on by length asks again for ever; a refused long path was logged as
# path="", naming nothing)
echo f >"$R$home/plain" && chown "$auid:$auid" "$R$home/plain"
ln -sfn /etc "$R$home/lnk"
like "fs.mkdir over a file: exists" \
	"$(call fs.mkdir "{\"agent\":\"alice\",\"path\":\"$home/plain\"}")" '"code":"exists"'
like "fs.mkdir over a symlink: exists" \
	"$(call fs.mkdir "{\"agent\":\"alice\",\"path\":\"$home/lnk\"}")" '"code":"exists"'
mkdir -p "$R$home/adir" && chown "$auid:$auid" "$R$home/adir"
like "fs.mkdir of a directory that is there: ok" \
	"$(call fs.mkdir "{\"agent\":\"alice\",\"path\":\"$home/adir\"}")" '"ok": *true'
like "fs.read with limit 0: bad_request" \
	"$(call fs.read "{\"agent\":\"alice\",\"path\":\"$home/plain\",\"limit\":0}")" '"code":"bad_request"'
long="$home/$(printf 'L%.0s' $(seq 5000))"
call fs.stat "{\"agent\":\"alice\",\"path\":\"$long\"}" >/dev/null
for _ in $(seq 50); do grep -q 'audit fs.stat .*path="/.*LLLL' "$W/pd.log" && break; sleep 0.1; done
like "a refused path over 4 KiB is named in the audit line (cut)" "$(grep 'audit fs.stat' "$W/pd.log" | tail -n 1)" \
	"path=\"$home/LLLL"

# --- a trailing '/' names a directory only -------------------------------------------------
# (red team: open_parent dropped the slash, so "plain/" read, wrote, edited, stat'ed, removed
# and moved the file plain, and a write to "new/" made the file new.) POSIX and the kernel
# say ENOTDIR for a file, a symlink or a FIFO named so; a write makes nothing.
mkfifo "$R$home/fifo" && chown -h "$auid:$auid" "$R$home/fifo"
# fs OP PATH [EXTRA-JSON]: the answer of OP on PATH as alice
fs() { call "fs.$1" "{\"agent\":\"alice\",\"path\":\"$2\"${3:+,$3}}"; }
notdir='"code":"bad_request".*Not a directory'
for op in read read_prompt stat remove; do
	like "fs.$op of \"plain/\" (a file): ENOTDIR" "$(fs $op "$home/plain/")" "$notdir"
done
like "fs.stat of \"fifo/\": ENOTDIR" "$(fs stat "$home/fifo/")" "$notdir"
like "fs.remove of \"lnk/\" (a symlink to a directory): ENOTDIR" "$(fs remove "$home/lnk/")" "$notdir"
like "fs.write to \"plain/\": ENOTDIR" "$(fs write "$home/plain/" '"data":"eHh4"')" "$notdir"
like "fs.edit of \"plain/\": ENOTDIR" "$(fs edit "$home/plain/" '"old":"f","new":"g"')" "$notdir"
like "fs.move of \"plain/\": ENOTDIR" "$(fs move "$home/plain/" "\"to\":\"$home/moved\"")" "$notdir"
like "fs.move of plain to \"moved/\": ENOTDIR" "$(fs move "$home/plain" "\"to\":\"$home/moved/\"")" "$notdir"
# "plain/." and "plain/..": the kernel's lookup fails on plain before it reaches the dot
for leaf in . ..; do
	for op in stat remove read; do
		like "fs.$op of \"plain/$leaf\": ENOTDIR" "$(fs $op "$home/plain/$leaf")" "$notdir"
	done
done
like "fs.stat of \"gone/.\": not_found" "$(fs stat "$home/gone/.")" '"code":"not_found"'
like "fs.remove of \"adir/.\": bad_request, not ENOTDIR" "$(fs remove "$home/adir/.")" \
	'"code":"bad_request".*Invalid argument'
is "... plain, lnk and fifo are all still there, plain as it was" \
	"$(cat "$R$home/plain"; stat -c %F "$R$home/lnk" "$R$home/fifo"; ls "$R$home/moved" 2>/dev/null)" \
	"$(printf 'f\nsymbolic link\nfifo')"
like "fs.write to \"new/\" (nothing there): EISDIR" "$(fs write "$home/new/" '"data":"eHh4"')" \
	'"code":"bad_request".*Is a directory'
like "fs.write to \"nd/sub/\" (parents): not_found" "$(fs write "$home/nd/sub/" '"data":"eHh4"')" \
	'"code":"not_found"'
ok "... neither made new nor nd" test ! -e "$R$home/new" -a ! -e "$R$home/nd"
like "fs.read of \"adir/\": EISDIR" "$(fs read "$home/adir/")" '"code":"bad_request".*Is a directory'
like "fs.stat of \"adir/\": a directory" "$(fs stat "$home/adir/")" '"type": *"dir"'
like "fs.list of \"adir/\": ok" "$(fs list "$home/adir/")" '"ok": *true'
like "fs.mkdir of \"adir/sub/\": ok" "$(fs mkdir "$home/adir/sub/")" '"ok": *true'
like "fs.move of \"adir/\" to \"bdir/\": ok" "$(fs move "$home/adir/" "\"to\":\"$home/bdir/\"")" '"ok": *true'
like "fs.remove of \"bdir/\" (recursive): ok" "$(fs remove "$home/bdir/" '"recursive":true')" '"removed": *2'
rm -rf "$R$home/plain" "$R$home/lnk" "$R$home/adir" "$R$home/fifo"

# --- a FIFO swapped in between fs.write's look at the leaf and its open --------------------------
# Nothing is at the path when the helper looks; the agent makes a FIFO there and reads it
# before the helper's O_CREAT open. That open must not open the FIFO (its reader would see
# a writer come and go): creating is O_EXCL. strace holds the helper before that open.
rm -f "$R$home/race"
strace -qq -f -p "$SD" -o /dev/null -e trace=openat -e inject=openat:delay_enter=2000000 &
ST=$!
sleep 0.5
call fs.write "{\"agent\":\"alice\",\"path\":\"$home/race\",\"data\":\"eA==\"}" >"$W/race.out" &
CALL=$!
for _ in $(seq 100); do pgrep -P "$SD" -u "$auid" >/dev/null && break; sleep 0.05; done
chroot --userspec="$auid:$auid" "$R" mkfifo "$home/race"
chroot --userspec="$auid:$auid" "$R" timeout 6 cat "$home/race" >/dev/null
rc=$?
wait "$CALL"
kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null; ST=
is "the FIFO's reader never saw the helper open it (timed out)" "$rc" 124
ok "the FIFO is still a FIFO" test -p "$R$home/race"

# --- fs.read of a file that changes while it is read ---------------------------------------------
# eof used to come from the size taken before the read: a log appended between the helper's
# look and its read answered eof with bytes left (pistis read stopped early, no error), and
# a file cut short answered the old size and eof false. strace holds the helper inside its
# pread (after every look at the file) while the file grows or shrinks.
case $(uname -m) in
x86_64) NR_PREAD=17 NR_FSTAT=5 NR_FSTATAT=262 ;;
aarch64) NR_PREAD=67 NR_FSTAT=80 NR_FSTATAT=79 ;;
*) NR_PREAD= ;;
esac
# held_in PID "NR..." [PATH...]: PID is stopped (strace holds it) in one of the syscalls NR,
# whose first argument is an fd open on one of PATH (any fd when no PATH is given)
held_in() {
	local pid=$1 nrs=$2 s nr a p
	shift 2
	for _ in $(seq 250); do
		s=$(cat "/proc/$pid/syscall" 2>/dev/null) || return 1
		nr=${s%% *}
		case " $nrs " in *" $nr "*)
			[ $# = 0 ] && return 0
			a=$(echo "$s" | cut -d' ' -f2)
			for p in "$@"; do
				[ "$(readlink "/proc/$pid/fd/$((a))" 2>/dev/null)" = "$p" ] && return 0
			done ;;
		esac
		sleep 0.02
	done
	return 1
}
if [ -z "$NR_PREAD" ]; then
	skip "fs.read of a file that grows or shrinks while read" "syscall numbers of $(uname -m) unknown here"
else
	head -c 100 /dev/urandom >"$R$home/grow"
	head -c 307200 /dev/urandom >"$R$home/shrink"
	chown "$auid:$auid" "$R$home/grow" "$R$home/shrink"
	strace -qq -f -p "$SD" -o /dev/null -e trace=pread64 -e inject=pread64:delay_enter=1500000 &
	ST=$!
	sleep 0.5
	timeout 30 "$BIN/pistis" read --agent alice "$home/grow" >"$W/grow.out" 2>&1 &
	CALL=$!
	hp=$(helper_pid)
	ok "the fs.read helper is held inside its read" held_in "${hp:-0}" "$NR_PREAD"
	head -c 204800 /dev/urandom >>"$R$home/grow"
	wait "$CALL"
	is "a file that grew during the read: pistis read gets all of it" \
		"$(wc -c <"$W/grow.out") $(sha256sum <"$W/grow.out")" "204900 $(sha256sum <"$R$home/grow")"
	call fs.read "{\"agent\":\"alice\",\"path\":\"$home/shrink\"}" >"$W/shrink.out" &
	CALL=$!
	hp=$(helper_pid)
	ok "the fs.read helper is held inside its read" held_in "${hp:-0}" "$NR_PREAD"
	truncate -s 51200 "$R$home/shrink"
	wait "$CALL"
	kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null; ST=
	is "a file cut short during the read: size, length and eof as after the read" \
		"$(grep -o '"size":[0-9]*\|"length":[0-9]*\|"eof":[a-z]*' "$W/shrink.out" | sort | paste -sd,)" \
		'"eof":true,"length":51200,"size":51200'
fi

# --- a regular file swapped for a FIFO between the look at the leaf and its open ----------------
# fs.read, fs.write and fs.edit looked at the leaf (no follow), then opened it by name: a FIFO
# put there in between was opened (as the agent, O_NONBLOCK) before being refused, and its
# other end saw an opener come and go. The leaf is now opened O_PATH, judged on that fd and
# reopened through the helper's own /proc/thread-self/fd/N: only the inode judged is opened.
# strace holds the helper as it returns from its look at the leaf (a stat of the leaf
# through its directory, or of an fd open on it).
swap_test() { # op request-fields end-of-the-agent (the FIFO's other end: read or write)
	local op=$1 fields=$2 other=$3 hp rc
	rm -f "$R$home/swap"
	echo "old text" >"$R$home/swap"
	chown "$auid:$auid" "$R$home/swap"
	strace -qq -f -p "$SD" -o /dev/null -e trace=fstat,newfstatat \
		-e inject=fstat,newfstatat:delay_exit=3000000 &
	ST=$!
	sleep 0.5
	call "$op" "{\"agent\":\"alice\",\"path\":\"$home/swap\"$fields}" >"$W/swap.out" &
	CALL=$!
	hp=$(helper_pid)
	ok "$op: the helper is held at its look at the leaf" \
		held_in "${hp:-0}" "$NR_FSTAT $NR_FSTATAT" "$R$home" "$R$home/swap"
	chroot --userspec="$auid:$auid" "$R" sh -c "mkfifo $home/swap.f && mv -f $home/swap.f $home/swap"
	if [ "$other" = write ]; then
		chroot --userspec="$auid:$auid" "$R" timeout 6 sh -c ": >$home/swap"
	else
		chroot --userspec="$auid:$auid" "$R" timeout 6 cat "$home/swap" >/dev/null
	fi
	rc=$?
	wait "$CALL"
	kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null; ST=
	is "$op: the FIFO's other end never saw the helper open it (timed out)" "$rc" 124
	ok "$op: the FIFO is still a FIFO" test -p "$R$home/swap"
}
if [ -n "$NR_PREAD" ]; then
	swap_test fs.read "" write
	swap_test fs.write ",\"data\":\"eA==\"" read
	swap_test fs.edit ",\"old\":\"old\",\"new\":\"new\"" read
fi

# --- names that drive or rearrange a terminal, printed by pistis ---------------------------------
# An agent names files with a UTF-8 CSI (U+009B), NEL (U+0085), RLO (U+202E) and U+2028; they
# are valid UTF-8, so fs.list carries them as they are, and `pistis call` printed them raw
# to the operator's terminal. Now they are \uXXXX escapes: the same JSON string.
mkdir -p "$R$home/names" && chown "$auid:$auid" "$R$home/names"
for n in "$(printf 'csi\302\2332Jx')" "$(printf 'nel\302\205x')" "$(printf 'rlo\342\200\256txt.exe')" \
	"$(printf 'ls\342\200\250x')" "$(printf 'caf\303\251')"; do
	touch "$R$home/names/$n" && chown "$auid:$auid" "$R$home/names/$n"
done
call fs.list "{\"agent\":\"alice\",\"path\":\"$home/names\"}" >"$W/names.out"
is "pistis call prints no raw C1, RLO or U+2028 byte sequence" \
	"$(LC_ALL=C grep -c "$(printf '\302[\200-\237]\\|\342\200[\250\256]')" "$W/names.out")" 0
like "... they are \\u escapes" "$(cat "$W/names.out")" 'csi\\u009b2Jx'
like "... all of them" "$(grep -o 'nel\\u0085x\|rlo\\u202etxt\|ls\\u2028x' "$W/names.out" | sort | paste -sd' ')" '^ls.u2028x nel.u0085x rlo.u202etxt$'
is "... and decode to the names on disk (an ordinary é stays as it is)" \
	"$(python3 -c 'import json,sys; d=json.loads(sys.stdin.read().splitlines()[-1]); print(" ".join(sorted(e["name"].encode().hex() for e in d["entries"])))' <"$W/names.out")" \
	"$(ls "$R$home/names" | while IFS= read -r f; do printf '%s' "$f" | od -An -tx1 | tr -d ' \n'; echo; done | sort | paste -sd' ')"

# --- where the reopen goes, and without a procfs at /proc ----------------------------------------
# The helper has the agent's commands' file-size limit (16 GiB, RLIMIT_FSIZE): a write past
# it is answered too_large (EFBIG, the signal ignored), one up to it is written (sparse).
is "fs.write at 16 GiB, past the agent's file-size limit: too_large" \
	"$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/huge\",\"data\":\"QQ==\",\"offset\":17179869184}" | grep -o '"code":"[a-z_]*"')" '"code":"too_large"'
is "fs.write of the last byte below it: written" \
	"$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/huge\",\"data\":\"QQ==\",\"offset\":17179869183}" | grep -o '"ok":true')" '"ok":true'
is "... the file is 16 GiB" "$(stat -c %s "$R$home/huge")" 17179869184
rm -f "$R$home/huge"

# With /proc mounted the leaf is reopened through the helper's own fd link; a path the agent
# names inside /proc stays denied. Without a procfs at /proc the helper opens the leaf by
# name again (O_NOFOLLOW, checked on the fd): fs.read, fs.write and fs.edit still work.
strace -qq -f -p "$SD" -o "$W/reopen.st" -e trace=openat &
ST=$!
sleep 0.5
echo old >"$R$home/viaproc"
chown "$auid:$auid" "$R$home/viaproc"
is "fs.write with /proc: written" "$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/viaproc\",\"data\":\"$(printf 'one two' | base64)\"}" | grep -o '"ok":true')" '"ok":true'
sleep 0.2
kill "$ST"; wait "$ST" 2>/dev/null; ST=
like "the helper reopened the leaf through its own fd link" \
	"$(grep -o 'openat([0-9]*, "[^"]*", O_[A-Z]*' "$W/reopen.st" | sed 's/openat([0-9]*, //' | paste -sd' ')" \
	'"viaproc", O_RDONLY "thread-self/fd", O_RDONLY "[0-9]+", O_WRONLY'
like "fs.read of the helper's own fd links by path is denied" \
	"$(call fs.read "{\"agent\":\"alice\",\"path\":\"/proc/thread-self/fd/3\"}")" '"ok":false'
like "fs.read beneath /proc/PID/fd is denied" \
	"$(call fs.read "{\"agent\":\"alice\",\"path\":\"/proc/$SD/fd/0\"}")" '"code":"denied"'
# A recursive fs.remove past its depth bound (256) says so, not "Symbolic link loop".
P exec --agent alice -- sh -c 'cd /tmp && mkdir deeprm && cd deeprm && i=0; while [ $i -lt 300 ]; do mkdir d && cd d; i=$((i+1)); done'
out=$(call fs.remove '{"agent":"alice","path":"/tmp/deeprm","recursive":true}')
like "fs.remove -r of a 300-deep tree: refused, naming the bound" "$out" \
	'"code":"denied".*deeper than 256 levels'
unlike "... not as a symbolic link loop" "$out" "Symbolic link loop"
P exec --agent alice -- rm -rf /tmp/deeprm
# /proc named as the leaf of a recursive fs.remove: its parent, /, is no procfs, but nothing
# inside the procfs is listed, stat'ed or unlinked (it used to be walked until an unlinkat
# failed, which answered "denied" too: the helper's system calls tell)
strace -qq -f -p "$SD" -o "$W/rmproc.st" -e trace=getdents64,unlinkat &
ST=$!
sleep 0.5
like "fs.remove -r of /proc is denied" \
	"$(call fs.remove '{"agent":"alice","path":"/proc","recursive":true}')" '"code":"denied"'
sleep 0.2
kill "$ST"; wait "$ST" 2>/dev/null; ST=
is "... without listing or unlinking anything in it" "$(grep -c 'getdents64\|unlinkat' "$W/rmproc.st")" 0
if umount -l "$R/proc"; then
	is "no /proc: fs.write works" "$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/noproc\",\"data\":\"$(printf 'red fish' | base64)\"}" | grep -o '"ok":true')" '"ok":true'
	strace -qq -f -p "$SD" -o "$W/noproc.st" -e trace=openat &
	ST=$!
	sleep 0.5
	is "no /proc: fs.write over an existing file works" "$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/noproc\",\"data\":\"$(printf 'one fish' | base64)\"}" | grep -o '"ok":true')" '"ok":true'
	sleep 0.2
	kill "$ST"; wait "$ST" 2>/dev/null; ST=
	is "no /proc: the leaf is opened O_PATH, then by name" \
		"$(grep -o 'openat([0-9]*, "[^"]*", O_[A-Z]*' "$W/noproc.st" | sed 's/openat([0-9]*, //' | paste -sd' ')" \
		'"noproc", O_RDONLY "noproc", O_WRONLY'
	# The swap the by-name reopen must notice: strace holds the helper right after its
	# O_PATH open of "swapme" (delay_exit on the first openat of that name), the agent
	# renames its other file over the name meanwhile, and only then is the name reopened.
	printf 'judged\n' >"$R$home/swapme" && printf 'decoy\n' >"$R$home/decoy"
	chown "$auid:$auid" "$R$home/swapme" "$R$home/decoy"
	# (the helper opens the name within milliseconds of being forked, then is held 2 s)
	held_write -o "$W/swap.st" -e trace=openat -P swapme \
		-e inject=openat:delay_exit=2000000:when=1 -- "$home/swapme" mine "$W/swap.out"
	setpriv --reuid="$auid" --regid="$auid" --clear-groups mv -f "$R$home/decoy" "$R$home/swapme" 2>/dev/null ||
		mv -f "$R$home/decoy" "$R$home/swapme"
	wait "$CALL"
	kill "$ST"; wait "$ST" 2>/dev/null; ST=
	like "no /proc: the helper was held after its O_PATH open of the name" "$(cat "$W/swap.st")" '"swapme", O_RDONLY[A-Z_|]*O_PATH\) = [0-9]+ \(DELAYED\)'
	is "no /proc: a file renamed over the name before the reopen is left as it was" "$(cat "$R$home/swapme")" decoy
	like "... and the write fails (the file judged is no longer there)" "$(cat "$W/swap.out")" '"code":"not_found"'
	is "no /proc: fs.edit works" "$(P edit --agent alice "$home/noproc" --old one --new two 2>&1 && cat "$R$home/noproc")" "two fish"
	is "no /proc: fs.read works" "$(P read --agent alice "$home/noproc" 2>&1)" "two fish"
	like "no /proc: fs.read of a FIFO is refused" \
		"$(call fs.read "{\"agent\":\"alice\",\"path\":\"$home/swap\"}")" '"code":"bad_request"'
	mount -t proc proc "$R/proc"
else
	skip "no /proc: fs.* by name" "cannot unmount the test root's /proc"
fi

# --- a home an agent planted in an earlier life: the refusal names what is wrong -------------
# TMPDIR a mount point: ensure refuses it (exit 111 from the CLI, naming the path). Through
# serve the answer was strerror alone ("agent \"…\": Not a directory", with a FIFO there,
# which is replaced since redteam-lifecycle.sh), naming nothing (red team).
phome=$(in_root "$R" pistisd users ensure rt/planted --uid 11150 | sed -n 's/^home=//p')
mount -t tmpfs -o size=1m pistis-rt "$R$phome/tmp"
out=$(call fs.read "{\"agent\":\"rt/planted\",\"path\":\"$phome/x\"}")
like "a mount point as an agent's TMPDIR: fs.* refuses, naming it" "$out" "$phome/tmp is a mount point"
out=$(timeout 40 "$BIN/pistis" exec --sandbox s1 --agent rt/planted -- true 2>&1)
like "... and so does exec" "$out" "$phome/tmp is a mount point"
ok "... the mount is left as it was" mountpoint -q "$R$phome/tmp"
umount "$R$phome/tmp"

# --- a file another agent planted in a sticky shared directory ----------------------------------
# fs.write and fs.edit write to an existing file through a reopen of its O_PATH fd, without
# O_CREAT, which fs.protected_regular does not check: bob's fs.write wrote into a 0666
# /tmp/drop alice planted, where bob's own `>` is refused (red team). pistisd applies the
# rule itself, at the sysctl's level, faked here (this host may run with 0): in a sticky
# directory, a file of neither the writer nor the directory's owner is refused when the
# directory is world-writable, or group-writable at level 2.
bhome=$(in_root "$R" pistisd users ensure bob | sed -n 's/^home=//p')
buid=$(stat -c %u "$R$bhome")
printf 'x\n' >"$R/tmp/drop" && chown "$auid:$auid" "$R/tmp/drop" && chmod 0666 "$R/tmp/drop"
printf 'b\n' >"$R/tmp/bobs" && chown "$buid:$buid" "$R/tmp/bobs"
mkdir -p "$R/tmp/grp" && chown 0:10010 "$R/tmp/grp" && chmod 1770 "$R/tmp/grp"
printf 'x\n' >"$R/tmp/grp/drop" && chown "$auid:10010" "$R/tmp/grp/drop" && chmod 0666 "$R/tmp/grp/drop"
secret=$(printf 'BOB-SECRET' | base64)
wr() { call fs.write "{\"agent\":\"bob\",\"path\":\"$1\",\"data\":\"$secret\"}"; }
for level in 2 1 0; do
	echo "$level" >"$W/protected_regular.$level"
	mount --bind "$W/protected_regular.$level" "$R/proc/sys/fs/protected_regular"
	is "protected_regular faked at $level" "$(cat "$R/proc/sys/fs/protected_regular")" "$level"
	out=$(wr /tmp/drop)
	if [ "$level" = 0 ]; then
		like "level 0: bob's fs.write into alice's /tmp/drop goes through, as bob's own > would" \
			"$out" '"ok": *true'
	else
		like "level $level: bob's fs.write into alice's /tmp/drop is refused" "$out" denied
		is "... alice's file is untouched" "$(cat "$R/tmp/drop")" x
		like "... and so is bob's fs.edit of it" \
			"$(call fs.edit '{"agent":"bob","path":"/tmp/drop","old":"x","new":"y"}')" denied
		is "... still untouched" "$(cat "$R/tmp/drop")" x
	fi
	like "level $level: bob's fs.write to his own /tmp/bobs goes through" "$(wr /tmp/bobs)" '"ok": *true'
	out=$(call fs.read '{"agent":"alice","path":"/tmp/drop"}')
	like "level $level: alice's own fs.read of her file goes through" "$out" '"ok": *true'
	out=$(wr /tmp/grp/drop)
	if [ "$level" = 2 ]; then
		like "level 2: a group-writable sticky directory is covered too" "$out" denied
	else
		like "level $level: a group-writable sticky directory is not (as in the kernel)" \
			"$out" '"ok": *true'
	fi
	umount "$R/proc/sys/fs/protected_regular"
done
rm -rf "$R/tmp/drop" "$R/tmp/bobs" "$R/tmp/grp"

# --- the sweep at an agent's last command waits for its file operations -----------------------
# When an agent's last command ends, serve removes the SysV IPC objects the agent left (and,
# without cgroups, kills its setsid leftovers), but not while a file operation of the agent
# runs (its helper is a process of the agent's). That sweep was skipped, not put off: an
# fs.* in flight at the command's end (one the agent stops lasts 30 s) left the objects in
# place for good (red team). strace holds the helper's ftruncate so the fs.write is still
# running when the command ends.
IU=11160
in_root "$R" pistisd users ensure rt/ipcfs --uid $IU >/dev/null
ihome=$(in_root "$R" pistisd users show rt/ipcfs | sed -n 's/^home=//p')
ipc_remove $IU
strace -qq -f -p "$SD" -o /dev/null -e trace=ftruncate -e inject=ftruncate:delay_enter=4000000 &
ST=$!
sleep 0.5
call fs.write "{\"agent\":\"rt/ipcfs\",\"path\":\"$ihome/f\",\"data\":\"eA==\"}" >"$W/ipcfs.out" &
CALL=$!
for _ in $(seq 500); do pgrep -P "$SD" -u $IU >/dev/null && break; sleep 0.01; done
ok "the agent's fs.write is running" pgrep -P "$SD" -u $IU
timeout 60 "$BIN/pistis" exec --sandbox s1 --agent rt/ipcfs -- \
	/usr/local/lib/pistis-tests/probe ipc-leave 4096 >/dev/null 2>&1
is "its command ended and left 3 SysV objects; the sweep waits for the fs.write" "$(ipc_of $IU)" 3
wait "$CALL"
like "... which then ends" "$(cat "$W/ipcfs.out")" '"ok": *true'
for _ in $(seq 100); do [ "$(ipc_of $IU)" = 0 ] && break; sleep 0.05; done
is "... and the objects are removed once it has" "$(ipc_of $IU)" 0
kill "$ST"; wait "$ST" 2>/dev/null; ST=
ipc_remove $IU

# --- a full file system: a write or an edit that cannot grow the file leaves it as it was ----------
# Any agent can fill a tree others write (/workspaces, a volume). The helper wrote the new bytes
# over the old ones, and pwrite failed with ENOSPC only where the file had to grow: the file
# was left with the old bytes overwritten by a prefix of the new ones, its tail gone, and the
# answer said only "No space left on device" (red team). Space is now reserved first
# (fallocate, FALLOC_FL_KEEP_SIZE), so a full file system refuses before a byte is written.
mkdir -p "$R/workspaces/full"
mount -t tmpfs -o size=64k,mode=0777 pistis-full "$R/workspaces/full"
{ printf 'HEAD\n'; head -c 12000 /dev/zero | tr '\0' a; printf '\nTAIL\n'; } >"$R/workspaces/full/f"
chown "$auid:$auid" "$R/workspaces/full/f"
sum0=$(sha256sum <"$R/workspaces/full/f")
chroot --userspec="$auid:$auid" "$R" dd if=/dev/zero of=/workspaces/full/fill bs=4k >/dev/null 2>&1
ok "another agent filled the file system" test "$(df --output=avail "$R/workspaces/full" | tail -1)" -eq 0
grow=$(head -c 8000 /dev/zero | tr '\0' X)
out=$(call fs.edit "{\"agent\":\"alice\",\"path\":\"/workspaces/full/f\",\"old\":\"HEAD\",\"new\":\"$grow\"}")
like "an fs.edit that grows the file fails: limit" "$out" '"limit"'
like "... saying the file is as it was" "$out" 'No space left on device.*nothing written'
is "... and it is" "$(sha256sum <"$R/workspaces/full/f")" "$sum0"
out=$(call fs.write "{\"agent\":\"alice\",\"path\":\"/workspaces/full/f\",\"data\":\"$(head -c 20000 /dev/zero | tr '\0' Y | base64 -w0)\"}")
like "an fs.write that replaces it with more bytes fails the same way" "$out" 'No space left on device.*nothing written'
is "... and the file is as it was" "$(sha256sum <"$R/workspaces/full/f")" "$sum0"
out=$(call fs.write "{\"agent\":\"alice\",\"path\":\"/workspaces/full/f\",\"offset\":12011,\"data\":\"$(head -c 8000 /dev/zero | tr '\0' Z | base64 -w0)\"}")
like "an fs.write of a piece past the end fails the same way" "$out" 'No space left on device.*nothing written'
is "... and the file is as it was" "$(sha256sum <"$R/workspaces/full/f")" "$sum0"
out=$(call fs.write "{\"agent\":\"alice\",\"path\":\"/workspaces/full/new\",\"data\":\"$(head -c 8000 /dev/zero | tr '\0' N | base64 -w0)\"}")
like "an fs.write of a new file fails the same way" "$out" 'No space left on device.*nothing written'
ok "... and leaves no empty file behind" test ! -e "$R/workspaces/full/new"
# nor the directories it made for it ("parents", the default): a directory there before stays
mkdir "$R/workspaces/full/keep" && chown "$auid:$auid" "$R/workspaces/full/keep"
out=$(call fs.write "{\"agent\":\"alice\",\"path\":\"/workspaces/full/keep/a/b/new\",\"data\":\"$(head -c 8000 /dev/zero | tr '\0' N | base64 -w0)\"}")
like "an fs.write beneath directories it must make fails the same way" "$out" 'No space left on device.*nothing written'
ok "... and leaves none of the directories it made" test ! -e "$R/workspaces/full/keep/a"
ok "... but the one that was there before" test -d "$R/workspaces/full/keep"
out=$(call fs.edit '{"agent":"alice","path":"/workspaces/full/f","old":"TAIL","new":"END"}')
like "an edit that needs no new space still goes through" "$out" '"ok": *true'
is "... and did its change" "$(tail -n 1 "$R/workspaces/full/f")" END
rm -f "$R/workspaces/full/fill"
out=$(call fs.write "{\"agent\":\"alice\",\"path\":\"/workspaces/full/f\",\"offset\":$(((16 << 30) - 4)),\"data\":\"$(printf 12345678 | base64)\"}")
like "a piece that would cross the 16 GiB file size bound: too_large" "$out" '"too_large"'
is "... nothing written below the bound" "$(stat -c %s "$R/workspaces/full/f")" 12010
umount "$R/workspaces/full"

# --- a helper the agent stopped does not outlive pistisd ------------------------------------------
# The helper is a copy of the daemon's memory running as the agent: the agent can SIGSTOP it,
# and only pistisd's 30 s timeout ended it. With pistisd killed (its timeout gone with it),
# the parent-death signal does. (strace holds pistisd's reads, so the helper is still there,
# blocked writing its answer, when the agent stops it.)
strace -qq -p "$SD" -o /dev/null -e trace=read -e inject=read:delay_enter=1000000 &
ST=$!
sleep 0.5
call fs.read "{\"agent\":\"alice\",\"path\":\"$home/big\"}" >/dev/null 2>&1 &
CALL=$!
hp=$(helper_pid)
[ -n "$hp" ] && setpriv --reuid="$auid" --regid="$auid" --clear-groups kill -STOP "$hp"
ok "the agent stopped its helper (pid ${hp:-none})" test -n "$hp" -a -d "/proc/${hp:-0}"
kill "$ST"; wait "$ST" 2>/dev/null; ST=
kill -KILL "$SD"
for _ in $(seq 100); do [ -d "/proc/$hp" ] || break; sleep 0.05; done
ok "... pistisd killed: the stopped helper is gone too" test ! -d "/proc/$hp"
wait "$CALL" 2>/dev/null

done_testing
