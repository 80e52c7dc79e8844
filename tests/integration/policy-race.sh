#!/bin/bash
# pistisd policy apply while an "agent" races it: a directory inside the walked tree is
# renamed away and replaced by a symlink (to /etc, to /, to the secrets) in a tight loop.
# Many applies, alternating tightening and loosening rules; afterwards /etc, /usr and the
# secrets must be byte-for-byte (stat + ACL + xattr) what they were.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/policy-lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || { echo "1..0 # SKIP $P not built"; exit 0; }
R=$(root_fresh debian) || { echo "1..0 # SKIP no debian root"; exit 0; }
W=$R/workspaces
mkdir -p "$W/a/b" "$R/data/.secrets" "$R/data/pistis"
for i in $(seq 1 300); do echo x >"$W/a/b/f$i"; done
echo s >"$R/data/.secrets/token"; chmod 0600 "$R/data/.secrets/token"
work=$(mktemp -d "${TMPDIR:-/tmp}/pistis-test.$$.XXXXXX")
printf '[{"path":"/workspaces","access":"write"}]\n' >"$work/write.json"
printf '[{"path":"/workspaces","access":"none"}]\n' >"$work/none.json"
printf '[{"path":"/workspaces","access":"read"}]\n' >"$work/read.json"

outside() { snap "$R/etc" "$R/usr" "$R/data" "$R/root"; }
before=$(outside)
shadow_before=$(stat -c '%a %u:%g' "$R/etc/shadow")

# The racer: swap a/b for a symlink and back, as fast as it can.
(
	cd "$W/a" || exit 1
	n=0
	while [ ! -e "$work/stop" ]; do
		case $((n % 3)) in 0) t=/etc ;; 1) t=/ ;; *) t=../../data/.secrets ;; esac
		mv b b.away 2>/dev/null && ln -s "$t" b 2>/dev/null
		rm -f b 2>/dev/null; mv b.away b 2>/dev/null
		n=$((n + 1))
	done
) &
racer=$!

fails=0 runs=0
for i in $(seq 1 40); do
	for r in write none read; do
		"$P" policy apply --root "$R" --rules "$work/$r.json" >/dev/null 2>&1
		rc=$?
		runs=$((runs + 1))
		[ $rc -le 1 ] || fails=$((fails + 1))
	done
done
touch "$work/stop"
wait "$racer"

is "every apply finished (exit 0 or 1) in $runs runs" "$fails" 0
is "/etc, /usr, /data, /root unchanged after $runs racing applies" \
	"$(diff <(echo "$before") <(outside) | head -20)" ""
is "shadow untouched" "$(stat -c '%a %u:%g' "$R/etc/shadow")" "$shadow_before"
# Once the racer stops, the tree converges.
[ -L "$W/a/b" ] && rm -f "$W/a/b"
[ -d "$W/a/b.away" ] && mv "$W/a/b.away" "$W/a/b"
"$P" policy apply --root "$R" --rules "$work/write.json" >/dev/null 2>&1
exits 0 "after the race: conforming" "$P" policy check --root "$R" --rules "$work/write.json"

# --- A file swapped for a hard link between the walk's look and its change -----------------
# Files are changed through an O_PATH fd of the node looked at, never by name: an agent
# (the directory's owner) that swaps its file for a hard link to a root-owned 0666 file
# (which it may link, fs.protected_hardlinks or not) in the middle of the chown, held
# 1.5 s by strace, does not get that file chowned. A change by name would (a session
# tried one in held directories and took it back: docs/policy.md).
rm -rf "$W"
mkdir -p "$W/d"
echo own >"$W/d/f"
chown -R 10100:10100 "$W"
"$P" policy apply --root "$R" --rules "$work/write.json" >/dev/null 2>&1
setfacl -b "$W/d"
chown -R 10100:10100 "$W/d"
chmod 0755 "$W/d"
chmod 0644 "$W/d/f"
mkdir -p "$R/opt"
echo victim >"$R/opt/victim"
chmod 0666 "$R/opt/victim"
# The agent works inside the root (its path from outside passes root-only directories).
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot --userspec=10100:10100 --groups=10100 "$R" \
	/bin/bash -c '
	d=/workspaces/d
	for _ in $(seq 300); do
		if [ "$(stat -c %a "$d" 2>/dev/null)" = 700 ]; then
			sleep 2
			ln /opt/victim "$d/.x" 2>/dev/null && mv -f "$d/.x" "$d/f" 2>/dev/null
			exit
		fi
		sleep 0.02
	done' &
agent=$!
strace -f -qq -o "$work/chown.st" -e trace=fchownat -e inject=fchownat:delay_enter=1500000 \
	"$P" policy apply --threads 1 --root "$R" --rules "$work/write.json" >/dev/null 2>&1
is "a slowed apply over a racing agent: exit 0" "$?" 0
wait "$agent"
is "... the file the agent swapped in is still root's" "$(stat -c '%u:%g' "$R/opt/victim")" "0:0"
[ "$(stat -c %i "$W/d/f")" = "$(stat -c %i "$R/opt/victim")" ] &&
	echo "# the agent's swap went through during the chown (the race was run)"
like "... files chowned through their fd" "$(cat "$work/chown.st")" \
	'fchownat\([0-9]+, "", 10100, 10010, AT_EMPTY_PATH\)'
unlike "... never by name" "$(cat "$work/chown.st")" 'fchownat\([0-9]+, "f",'
done_testing
