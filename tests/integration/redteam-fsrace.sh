#!/bin/bash
# Red team, second pass over the file operations (fs.*) as one agent attacks another's (or
# its own) requests: magic links and procfs paths under openat2 and under the per-component
# fallback, devices and sockets named as files, a directory the helper just made or is about
# to empty swapped for a symlink into the victim's home, fs.move's destination through a
# planted symlink, paths at the length and depth bounds, "." components, exec's cwd through
# the same tricks, and whether serve holds more fds or helpers after all of it. server-min + pistisd serve + pistis as real
# processes in a private mount namespace over a throwaway Debian root.
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
serve_pid() { pgrep -n -f "pistisd serve --relay ws://127.0.0.1:$SP --token-file /etc/pistis/token --name s1"; }
SD=$(serve_pid)
home=$(in_root "$R" pistisd users ensure alice | sed -n 's/^home=//p')
auid=$(stat -c %u "$R$home")
bhome=$(in_root "$R" pistisd users ensure bob | sed -n 's/^home=//p')
buid=$(stat -c %u "$R$bhome")
call() { timeout 40 "$BIN/pistis" call "$@" 2>&1; }
code() { grep -o '"code":"[a-z_]*"' | head -n 1 | sed 's/"code":"\(.*\)"/\1/'; }
A() { chroot --userspec="$auid:$auid" "$R" "$@"; }
fds_of() { ls "/proc/$1/fd" | wc -l; }
# the baseline after one command of alice's: serve keeps her session's cgroup open
P exec --agent alice -- /bin/true
fds0=$(fds_of "$SD")

# --- devices and sockets named as files: refused at once, never opened ------------------------
# /dev/zero read would never end short of the piece size, /dev/tty or a FIFO could block, a
# socket cannot be opened at all: the leaf is judged on an O_PATH fd, so none is opened.
A perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $ARGV[0], Listen => 1) or die; sleep 60' \
	"$home/sock" &
AP=$!
for _ in $(seq 50); do [ -S "$R$home/sock" ] && break; sleep 0.1; done
for req in "fs.read /dev/zero" "fs.read /dev/urandom" "fs.read /dev/tty" "fs.read_prompt /dev/zero" \
	"fs.write /dev/null" "fs.write /dev/full" "fs.edit /dev/zero" "fs.read $home/sock" \
	"fs.write $home/sock" "fs.list /dev/null"; do
	op=${req% *} p=${req#* }
	case $op in
	fs.write) extra=',"data":"eA=="' ;;
	fs.edit) extra=',"old":"a","new":"b"' ;;
	*) extra= ;;
	esac
	t0=$(date +%s%N)
	got=$(timeout 10 "$BIN/pistis" call "$op" "{\"agent\":\"alice\",\"path\":\"$p\"$extra}" 2>&1)
	ms=$((($(date +%s%N) - t0) / 1000000))
	is "$op of $p: bad_request" "$(echo "$got" | code)" bad_request
	ok "... at once ($ms ms < 3000)" test "$ms" -lt 3000
done
kill "$AP" 2>/dev/null; wait "$AP" 2>/dev/null; AP=

# --- magic links and procfs paths, with openat2 and with the per-component fallback ----------------
# The agent's own process, whose /proc/PID/{root,cwd} are magic links back into the root and
# its home, and whose /proc/PID/fd the helper must not reach through. Every operation through
# them is refused and does nothing (a file readable by everyone, /etc/debian_version, is not
# in any answer); the same requests without the detour work.
echo 'moved or not' >"$R$home/mv-src"
echo 'victim text' >"$R$home/victim"
chown "$auid:$auid" "$R$home/mv-src" "$R$home/victim"
dv=$(base64 <"$R/etc/debian_version")
magic_round() { # label
	local l=$1 p req op extra got codes=
	A sh -c "cd '$home' && exec sleep 120" &
	AP=$!
	sleep 0.3
	for req in "fs.read /proc/$AP/root/etc/debian_version" "fs.read /proc/self/root/etc/debian_version" \
		"fs.read /proc/thread-self/root/etc/debian_version" "fs.read /proc/$AP/cwd/victim" \
		"fs.read /dev/fd/0" "fs.read /dev/stdin" "fs.read /proc/$AP/fd/0" \
		"fs.read_prompt /proc/$AP/root/etc/debian_version" \
		"fs.list /proc/$AP/root" "fs.list /proc/$AP/cwd" "fs.stat /proc/$AP/root/etc" \
		"fs.write /proc/$AP/cwd/planted" "fs.edit /proc/$AP/cwd/victim" \
		"fs.mkdir /proc/$AP/cwd/newdir" "fs.remove /proc/$AP/cwd/victim" \
		"fs.move /proc/$AP/cwd/mv-src" "fs.moveto /proc/$AP/cwd/mv-dst"; do
		op=${req% *} p=${req#* }
		case $op in
		fs.write) extra=',"data":"cGxhbnRlZA=="' ;;
		fs.edit) extra=',"old":"victim","new":"edited"' ;;
		fs.move) extra=",\"to\":\"$home/mv-dst\"" ;;
		fs.moveto) op=fs.move extra=",\"to\":\"$p\"" p=$home/mv-src ;;
		*) extra= ;;
		esac
		got=$(call "$op" "{\"agent\":\"alice\",\"path\":\"$p\"$extra}")
		unlike "$l: $op ${req#* }: no content of the file behind the link" "$got" "$dv"
		codes+="$(echo "$got" | code) "
	done
	is "$l: every operation through a magic link or inside a procfs is denied" "$codes" \
		"$(printf 'denied %.0s' $(seq 17))"
	ok "$l: ... nothing was made, moved, edited or removed" test ! -e "$R$home/planted" -a \
		! -e "$R$home/newdir" -a ! -e "$R$home/mv-dst" -a -f "$R$home/mv-src" -a \
		"$(cat "$R$home/victim")" = 'victim text'
	is "$l: the same read without the detour works" \
		"$(call fs.read "{\"agent\":\"alice\",\"path\":\"$home/victim\"}" | grep -o '"eof":true')" '"eof":true'
	kill "$AP" 2>/dev/null; wait "$AP" 2>/dev/null; AP=
}
magic_round openat2

# --- paths at the bounds: longest, deepest, a name over 255 bytes, "." components ------------------
# A path of 4096 bytes made of 2-byte components, the deepest a request can name, made with
# parents: well inside the helper's 30 s. The directories were made one walk from "/" each,
# 2,000 walks of up to 2,000 opens under the per-component fallback: 19 s (red team). Then
# the same path with a leaf name over 255 bytes, refused after the directories were made:
# they are all removed again, as quickly.
n=$(((4096 - ${#home}) / 2))
deep=$home$(printf '/d%.0s' $(seq "$n"))
long=$(printf 'n%.0s' $(seq 256))
n2=$(((4096 - ${#home} - 257) / 2))
deep2=$home$(printf '/d%.0s' $(seq "$n2"))/$long
deep_round() { # label
	local l=$1 t0 ms got
	t0=$(date +%s%N)
	got=$(call fs.write "{\"agent\":\"alice\",\"path\":\"$deep\",\"data\":\"ZGVlcA==\"}")
	ms=$((($(date +%s%N) - t0) / 1000000))
	like "$l: fs.write of a ${#deep} byte, $n deep path with parents: written" "$got" '"ok": *true'
	ok "$l: ... in $ms ms (< 5000)" test "$ms" -lt 5000
	is "$l: ... and read back" "$(P read --agent alice "$deep" 2>&1)" deep
	rm -rf "$R$home/d"
	t0=$(date +%s%N)
	got=$(call fs.write "{\"agent\":\"alice\",\"path\":\"$deep2\",\"data\":\"ZGVlcA==\"}")
	ms=$((($(date +%s%N) - t0) / 1000000))
	is "$l: a ${#deep2} byte path, $n2 deep, its leaf 256 bytes: too_large" "$(echo "$got" | code)" too_large
	ok "$l: ... the directories made for it are removed" test ! -e "$R$home/d"
	ok "$l: ... in $ms ms (< 5000)" test "$ms" -lt 5000
	rm -rf "$R$home/d"
	# "." and empty components are passed over, as the kernel does; ".." is refused
	like "$l: a \".\" component in a path fs.write makes directories for: written" \
		"$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/./dot//./f\",\"data\":\"ZG90\"}")" '"ok": *true'
	is "$l: ... where the path says" "$(cat "$R$home/dot/f" 2>&1)" dot
	like "$l: fs.mkdir of a path with \".\" components: made" \
		"$(call fs.mkdir "{\"agent\":\"alice\",\"path\":\"$home/./dot2/./sub\"}")" '"ok": *true'
	ok "$l: ... where the path says" test -d "$R$home/dot2/sub"
	is "$l: a \"..\" component where directories are made: denied" \
		"$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/dot3/../f\",\"data\":\"eA==\"}" | code)" denied
	ok "$l: ... nothing made" test ! -e "$R$home/dot3" -a ! -e "$R$home/f"
	is "$l: a refused write after \".\" components removes what it made" \
		"$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/dot4/./e/$long\",\"data\":\"eA==\"}" | code)" too_large
	ok "$l: ... nothing left" test ! -e "$R$home/dot4"
	rm -rf "$R$home/dot" "$R$home/dot2"
}
deep_round openat2
like "a path of 4097 bytes: too_large" \
	"$(call fs.read "{\"agent\":\"alice\",\"path\":\"${deep}x\"}" | code)" too_large
is "a 256-byte name in the middle of a path: too_large" \
	"$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/$long/f\",\"data\":\"eA==\"}" | code)" too_large
is "a 256-byte leaf: too_large" \
	"$(call fs.write "{\"agent\":\"alice\",\"path\":\"$home/$long\",\"data\":\"eA==\"}" | code)" too_large
ok "... neither made anything" test -z "$(ls "$R$home" | grep nnnn)"

# --- exec's cwd: the same resolution, as the agent, entered by fd -----------------------------------
# A cwd that climbs out of /data with "..", goes through a magic link or the agent's own
# symlink to B's home, or names a FIFO or a file: refused, the command never runs.
mkfifo "$R$home/fifo" && ln -s "$bhome" "$R$home/tob" && ln -s /proc/self/root "$R$home/toroot"
: >"$R$home/plainfile"
chown -h "$auid:$auid" "$R$home/fifo" "$R$home/tob" "$R$home/toroot" "$R$home/plainfile"
cwd_round() { # label
	local l=$1 c out
	for c in "/data/../proc/self/root" "$home/../../../proc/self/cwd" "$home/tob" "$home/toroot/etc" \
		"$home/fifo" "$home/plainfile" "$home/./tob/." "/data/sandbox-home/../../etc"; do
		out=$(timeout 40 "$BIN/pistis" exec --agent alice --cwd "$c" -- /bin/echo RAN 2>&1)
		unlike "$l: exec with cwd $c does not run" "$out" '^RAN$'
	done
	is "$l: exec with cwd the home itself through \".\" runs there" \
		"$(timeout 40 "$BIN/pistis" exec --agent alice --cwd "$home/./" -- /bin/pwd 2>&1)" "$home"
}
cwd_round openat2

# the same pistisd, with openat2 taken away (PISTIS_NO_OPENAT2=1: the per-component walk)
kill "$PD" 2>/dev/null; wait "$PD" 2>/dev/null
(in_root_exec "$R" PISTIS_NO_OPENAT2=1 pistisd serve --relay "ws://127.0.0.1:$SP" \
	--token-file /etc/pistis/token --name s1 ${ALLOW:+--allow $ALLOW}) >"$W/pd2.log" 2>&1 &
PD=$!
for _ in $(seq 100); do P ls 2>/dev/null | grep -q "s1 *connected" && break; sleep 0.1; done
SD=$(serve_pid)
P exec --agent alice -- /bin/true
fds0=$(fds_of "$SD")
magic_round fallback
deep_round fallback
cwd_round fallback

# --- B's fs.move to a path through a symlink A planted ---------------------------------------------
# A owns a shared directory B writes in and points a name there at A's own open directory:
# B moving his secret "there" must not put it where A reads it.
mkdir -p "$R/tmp/shared" "$R/tmp/aopen"
chown "$auid:$auid" "$R/tmp/shared" "$R/tmp/aopen"
chmod 0777 "$R/tmp/shared" "$R/tmp/aopen"
echo 'B-SECRET' >"$R$bhome/secret" && chown "$buid:$buid" "$R$bhome/secret" && chmod 0600 "$R$bhome/secret"
A ln -s /tmp/aopen /tmp/shared/out
is "B's fs.move to a path through A's symlink: denied" \
	"$(call fs.move "{\"agent\":\"bob\",\"path\":\"$bhome/secret\",\"to\":\"/tmp/shared/out/stolen\"}" | code)" denied
ok "... B's secret stays, nothing in A's directory" test -f "$R$bhome/secret" -a ! -e "$R/tmp/aopen/stolen"

# --- a directory the helper just made, swapped for a symlink to the victim's home ------------------
# B writes /tmp/shared/x/planted (parents: x is made by B's helper). A owns /tmp/shared (not
# sticky) so A may rename B's x away and put a symlink to B's home in its place between the
# mkdir and the open of x for the leaf: B's own helper could then write B's home, at a name
# A chose. strace holds the helper after its mkdir of x.
strace -qq -f -p "$SD" -o "$W/mk.st" -e trace=mkdirat -P x -e inject=mkdirat:delay_exit=3000000 &
ST=$!
sleep 0.5
call fs.write "{\"agent\":\"bob\",\"path\":\"/tmp/shared/x/planted\",\"data\":\"cGxhbnRlZA==\"}" >"$W/mk.out" &
CALL=$!
for _ in $(seq 100); do [ -d "$R/tmp/shared/x" ] && break; sleep 0.02; done
A sh -c 'mv /tmp/shared/x /tmp/shared/x.old && ln -s "$1" /tmp/shared/x' sh "$bhome"
wait "$CALL"
kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null; ST=
like "the helper was held after making x" "$(cat "$W/mk.st")" 'mkdirat\([0-9]+, "x", 0777\) += 0 \(DELAYED\)'
is "B's write through the swapped directory: denied" "$(code <"$W/mk.out")" denied
ok "... nothing landed in B's home" test ! -e "$R$bhome/planted"
rm -rf "$R/tmp/shared/x" "$R/tmp/shared/x.old"

# --- a tree about to be emptied, swapped for a symlink to the victim's home ------------------------
# B removes his tree /tmp/shared/t recursively; between the helper's look at t and its open,
# A (who owns /tmp/shared) swaps t for a symlink to B's home: B's own helper must not empty it.
mkdir -p "$R/tmp/shared/t/a" && echo x >"$R/tmp/shared/t/a/f"
chown -R "$buid:$buid" "$R/tmp/shared/t"
strace -qq -f -p "$SD" -o "$W/rm.st" -e trace=statx -P t -e inject=statx:delay_exit=3000000 &
ST=$!
sleep 0.5
call fs.remove '{"agent":"bob","path":"/tmp/shared/t","recursive":true}' >"$W/rm.out" &
CALL=$!
for _ in $(seq 150); do grep -q 'statx(.*"t"' "$W/rm.st" 2>/dev/null && break; sleep 0.02; done
sleep 0.3
A sh -c 'mv /tmp/shared/t /tmp/shared/t.old && ln -s "$1" /tmp/shared/t' sh "$bhome"
wait "$CALL"
kill "$ST" 2>/dev/null; wait "$ST" 2>/dev/null; ST=
like "the helper was held after its look at t" "$(cat "$W/rm.st")" 'statx\([0-9]+, "t", [A-Z_|]*AT_SYMLINK_NOFOLLOW.* += 0 \(DELAYED\)'
is "B's recursive remove of the swapped tree: bad_request (not a directory now)" "$(code <"$W/rm.out")" bad_request
ok "... B's home is untouched" test -f "$R$bhome/secret"
ok "... and so is the tree A moved away" test -f "$R/tmp/shared/t.old/a/f"

# --- serve after all of it ---------------------------------------------------------------------------
sleep 0.5
ok "no helper is left" test -z "$(pgrep -P "$SD" -u "$auid,$buid")"
is "pistisd holds as many fds as before the attacks" "$(fds_of "$SD")" "$fds0"
like "pistisd still answers" "$(P ls 2>&1)" '^s1 +connected'

done_testing
