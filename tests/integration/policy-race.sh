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
[ -x "$P" ] || missing "$P not built"
R=$(root_fresh debian) || missing "no debian root"
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

# The owner's last moment: an agent's directory handed to root under a read rule. Until
# the chown the agent still owns it and may set a default ACL or chmod 0777 after the
# walk's tightening; the walk looked at neither again, so the ACL stayed on root's
# directory (every file root made there later was the agent's to write) and the mode kept
# root's directory open to the agent for its subtree walk (red team). strace holds the
# chown for 1.5 s, the agent acts once it sees the tightened mode.
owner_race() { # name what-the-agent-does [more strace options]
	local d=$R/workspaces/$1 name=$1 act=$2
	shift 2
	rm -rf "$d"
	mkdir -p "$d" && echo x >"$d/f" && chown -R 10100:10100 "$d" && chmod 0775 "$d"
	printf '[{"path":"/workspaces/%s","access":"read"}]\n' "$name" >"$work/$name.json"
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot --userspec=10100:10100 --groups=10100 \
		"$R" /bin/bash -c '
		for _ in $(seq 300); do
			[ "$(stat -c %a "$0" 2>/dev/null)" = 705 ] && { eval "$1"; exit; }
			sleep 0.01
		done' "/workspaces/$name" "$act" &
	local agent=$!
	sleep 0.1
	strace -f -qq -o /dev/null -e trace=fchownat,getdents64 \
		-e inject=fchownat:delay_enter=1500000 "$@" \
		"$P" policy apply --threads 1 --root "$R" --rules "$work/$name.json" >/dev/null 2>&1
	is "$name: a slowed apply over the directory's owner: exit 0" "$?" 0
	wait "$agent"
}
owner_race acl '/usr/local/lib/pistis-tests/probe acl-default-self "$0" && echo planted >/tmp/acl.did'
ok "acl: the agent planted its default ACL while it owned the directory" test -e "$R/tmp/acl.did"
is "... the directory is root's, mode 0755" "$(stat -c '%u:%g %a' "$W/acl")" "0:0 755"
is "... with no default ACL left" "$(getfacl -cd "$W/acl" 2>/dev/null)" ""
"$P" policy check --root "$R" --rules "$work/acl.json" >"$work/acl.check" 2>&1
is "... policy check finds nothing to change" "$?" 0
(umask 022; echo hook >"$W/acl/pre-commit")
unlike "... a file root makes there later has no entry for the agent" \
	"$(getfacl -c "$W/acl/pre-commit" 2>/dev/null)" 'user:10100'
# Here the end of the listing is held too (1.5 s): the agent, once the directory is root's,
# tries to add an entry the walk would never see.
owner_race mode 'chmod 0777 "$0" && echo chmodded >/tmp/mode.did
	for _ in $(seq 300); do [ "$(stat -c %u "$0")" = 0 ] && break; sleep 0.01; done
	sleep 0.3; echo agent >"$0/late" 2>/dev/null && echo made >/tmp/mode.late' \
	-e inject=getdents64:delay_exit=1500000:when=2
ok "mode: the agent chmodded 0777 while it owned the directory" test -e "$R/tmp/mode.did"
ok "... and could not add an entry once the directory was root's" test ! -e "$R/tmp/mode.late"
is "... root's directory ends 0755, with only what the walk saw" \
	"$(stat -c '%u:%g %a' "$W/mode") $(ls "$W/mode")" "0:0 755 f"

# A pin's sticky bit at once: p/q is write-level (the agent's, group pi-sandbox 02770)
# when a none rule below it comes; apply pins q (root's, sticky). The sticky bit came only
# with the post-order chmod, so for q's whole subtree walk q was root's, group-writable
# and not sticky, and any agent could rename root's secret out from under the none rule
# (red team). Every getdents64 is held 0.3 s to keep that window open.
mkdir -p "$W/p/q/secret" && echo s >"$W/p/q/secret/key"
chmod 0700 "$W/p/q/secret" && chmod 0600 "$W/p/q/secret/key"
chown 10100:10010 "$W/p" "$W/p/q" && chmod 02770 "$W/p" "$W/p/q"
printf '[{"path":"/workspaces/p","access":"write"},{"path":"/workspaces/p/q/secret","access":"none"}]\n' \
	>"$work/pin.json"
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot --userspec=10100:10100 --groups=10100,10010 \
	"$R" /bin/bash -c '
	for _ in $(seq 500); do [ "$(stat -c %u /workspaces/p/q 2>/dev/null)" = 0 ] && break; sleep 0.01; done
	echo root >/tmp/pin.seen
	mv /workspaces/p/q/secret /workspaces/p/q/loot 2>/dev/null && echo moved >/tmp/pin.moved' &
agent=$!
sleep 0.1
strace -f -qq -o /dev/null -e trace=getdents64 -e inject=getdents64:delay_exit=300000 \
	"$P" policy apply --threads 1 --root "$R" --rules "$work/pin.json" >/dev/null 2>&1
is "pin: a slowed apply while an agent waits for q to be root's: exit 0" "$?" 0
wait "$agent"
ok "... the agent saw q become root's during the walk" test -e "$R/tmp/pin.seen"
ok "... and could not rename root's secret away" test ! -e "$R/tmp/pin.moved"
is "... q ends root's, pi-sandbox, sticky" "$(stat -c '%u:%g %a' "$W/p/q")" "0:10010 3770"
done_testing
