#!/bin/bash
# Red team: the path-rules walk and explain, attacked by an agent that plants what it likes
# on the nodes it owns. Runs as root in a private mount namespace over a tmpfs; never
# touches the host.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
P=$BIN/pistisd
[ -x "$P" ] || missing "$P not built"
command -v setfacl >/dev/null || missing "setfacl missing (scripts/bootstrap.sh check)"
R=$(scratch) || exit 1
mount -t tmpfs -o mode=0755 pistis-rt "$R" || exit 1
trap 'umount -l "$R"; root_cleanup' EXIT
mark_key "$R" || exit 1
A=10100 B=10101 # two agents' uids

# --- explain and an ACL too large for its buffer ---------------------------------------------
# An agent owns a file and grants another agent access with a named-user ACL entry, among
# more entries than explain's fixed buffer holds. Read as "mode bits only", explain said the
# other agent cannot read what the kernel lets it read.
mkdir -p "$R/w"
echo secret >"$R/w/f"
chown $A:$A "$R/w/f"
chmod 0600 "$R/w/f"
spec=u:$B:rw
for i in $(seq 1 80); do spec=$spec,u:$((20000 + i)):r; done
setfacl -m "$spec" "$R/w/f"
ok "the kernel lets agent B read it" setpriv --reuid=$B --regid=$B --clear-groups cat "$R/w/f"
like "explain: agent B can read the file with a large ACL" \
	"$("$P" policy explain /w/f --root "$R" --uid $B 2>&1)" 'read yes'
mkdir -p "$R/d/sub"
chown $A:$A "$R/d"
chmod 0700 "$R/d"
setfacl -m "${spec//:rw/:rx}" "$R/d"
like "explain: agent B can traverse a directory whose large ACL lets it" \
	"$("$P" policy explain /d/sub --root "$R" --uid $B 2>&1)" 'traverse yes'

# --- a second name keeps a tightened file open -------------------------------------------------
# Under a write rule an agent may hardlink any file it can write (protected_hardlinks lets
# it: read and write access), root's shared files included. A later read rule on the
# subtree must still take write access away from that file, through the fd: never a chown
# (the other name may lie anywhere the agent could write), never looser.
mkdir -p "$R/ws/proj" && echo shared >"$R/ws/proj/config" && echo mine >"$R/ws/proj/own"
chown $A:$A "$R/ws/proj/own"
printf '[{"path":"/ws","access":"write"}]\n' >"$R/rules-w.json"
"$P" policy apply --root "$R" --rules "$R/rules-w.json" >/dev/null 2>&1
is "write rule: root's file is root:pi-sandbox 0660" "$(stat -c '%u:%g %a' "$R/ws/proj/config")" "0:10010 660"
setpriv --reuid=$A --regid=$A --groups=10010 ln "$R/ws/proj/config" "$R/ws/.c2"
setpriv --reuid=$A --regid=$A --groups=10010 ln "$R/ws/proj/own" "$R/ws/.o2"
is "(the agent gave both files a second name)" "$(stat -c %h "$R/ws/proj/config" "$R/ws/proj/own" | paste -sd' ')" "2 2"
printf '[{"path":"/ws","access":"write"},{"path":"/ws/proj","access":"read"}]\n' >"$R/rules-r.json"
out=$("$P" policy apply --root "$R" --rules "$R/rules-r.json" 2>&1)
if [ "$(cat /proc/sys/fs/protected_hardlinks)" = 1 ]; then
	is "read rule: the linked root file keeps its owner and loses group write" \
		"$(stat -c '%u:%g %a' "$R/ws/proj/config")" "0:10010 640"
	is "... the agent's linked file keeps its owner, both lose write (it is not the rule's owner)" \
		"$(stat -c '%u:%g %a' "$R/ws/proj/own")" "$A:10010 440"
	denied "... agent B can no longer write it through the other name" \
		setpriv --reuid=$B --regid=$B --groups=10010 sh -c "echo x >>'$R/ws/.c2'"
else
	is "protected_hardlinks off: a linked file is left exactly as it was" \
		"$(stat -c '%u:%g %a' "$R/ws/proj/config")" "0:10010 660"
fi
like "... and reported" "$out" "config: has more than one link"

# --- the same with fs.protected_hardlinks off (faked for this mount namespace: a file bound
# over the sysctl): an agent could have linked anything, so nothing linked is touched, and
# apply refuses to run at all unless the operator allows it by name.
echo 0 >"$R/ph0"
mount --bind "$R/ph0" /proc/sys/fs/protected_hardlinks
chmod 0660 "$R/ws/proj/config"
out=$("$P" policy apply --root "$R" --rules "$R/rules-r.json" 2>&1)
is "protected_hardlinks 0: apply refuses (exit 111)" "$?" 111
like "... saying why and how to allow it" "$out" "protected_hardlinks is not 1.*--allow protected_hardlinks"
"$P" policy apply --root "$R" --rules "$R/rules-r.json" --allow protected_hardlinks >/dev/null 2>&1
is "... allowed by name: a linked file is left exactly as it was" \
	"$(stat -c '%u:%g %a' "$R/ws/proj/config")" "0:10010 660"
umount /proc/sys/fs/protected_hardlinks
chmod 0640 "$R/ws/proj/config"

# --- explain and a mount point below its rule's path: apply does not cross it ------------------
mkdir -p "$R/ws/vol" && mount -t tmpfs -o mode=0755 pistis-vol "$R/ws/vol"
echo v >"$R/ws/vol/f" && chmod 0600 "$R/ws/vol/f"
"$P" policy apply --root "$R" --rules "$R/rules-w.json" >/dev/null 2>&1
is "apply leaves a file beyond a mount point as it is" "$(stat -c '%u:%g %a' "$R/ws/vol/f")" "0:0 600"
like "explain says so, naming the mount point" \
	"$("$P" policy explain /ws/vol/f --root "$R" --rules "$R/rules-w.json" 2>&1)" \
	"note: /ws/vol is a mount point below the rule's path: apply does not cross it"
umount "$R/ws/vol"

# --- renaming what a stricter rule protects, inside a write tree --------------------------------
# A none rule is matched by path. Renamed away by an agent (in a directory it may write),
# its tree would be write-level content at the next apply: root's secrets group-writable.
# The directories from the write rule down to it are root's and sticky, so nobody renames
# the protected directory or one on the way (the agent made proj itself).
mkdir -p "$R/w2/proj/secret" && echo TOPSECRET >"$R/w2/proj/secret/key"
chmod 0600 "$R/w2/proj/secret/key" && chown $A:$A "$R/w2/proj"
printf '[{"path":"/w2","access":"write"},{"path":"/w2/proj/secret","access":"none"}]\n' >"$R/rules-n.json"
"$P" policy apply --root "$R" --rules "$R/rules-n.json" >/dev/null 2>&1
is "the way down to a none rule is root's and sticky" \
	"$(stat -c '%u:%g %a' "$R/w2" "$R/w2/proj" | paste -sd' ')" "0:10010 3770 0:10010 3770"
as_a() { setpriv --reuid=$A --regid=$A --groups=10010 "$@"; }
denied "the agent cannot rename the protected directory" as_a mv "$R/w2/proj/secret" "$R/w2/proj/loot"
denied "... nor a directory on the way to it" as_a mv "$R/w2/proj" "$R/w2/proj2"
ok "... and still makes, renames and removes its own files there" as_a sh -c \
	"echo x >'$R/w2/proj/mine' && mv '$R/w2/proj/mine' '$R/w2/proj/mine2' && rm '$R/w2/proj/mine2'"
"$P" policy apply --root "$R" --rules "$R/rules-n.json" >/dev/null 2>&1
is "after a second apply the secret is still root's alone" \
	"$(stat -c '%u:%g %a' "$R/w2/proj/secret" "$R/w2/proj/secret/key" | paste -sd' ')" "0:0 700 0:0 600"
denied "... and unreadable to the agent" as_a cat "$R/w2/proj/secret/key"

# --- a link planted at a rule's path that is not there yet -------------------------------------
# A none rule names a path under a write rule before it exists; the agent makes a symlink
# there. Refusing the whole rules file for it held up every later apply, a tightening the
# operator adds among them (red team: a credentials file stayed readable). The link is the
# walk's to report (rule not applied, exit 1); the other rules are applied. A link root
# made there is still the file's mistake.
mkdir -p "$R/w3/proj" "$R/w3/team" && echo TOKEN=hunter2 >"$R/w3/team/creds"
printf '[{"path":"/w3","access":"write"},{"path":"/w3/proj/secret","access":"none"}]\n' >"$R/rules-l.json"
"$P" policy apply --root "$R" --rules "$R/rules-l.json" >/dev/null 2>&1
ok "(the agent reads the team's file under the write rule)" as_a cat "$R/w3/team/creds"
as_a ln -s / "$R/w3/proj/secret"
printf '[{"path":"/w3","access":"write"},{"path":"/w3/proj/secret","access":"none"},{"path":"/w3/team","access":"none"}]\n' >"$R/rules-l2.json"
out=$("$P" policy apply --root "$R" --rules "$R/rules-l2.json" 2>&1)
is "apply with the agent's link at a rule path exits 1" "$?" 1
like "... says that rule was not applied" "$out" "/w3/proj/secret .*symlink.*rule not applied"
denied "... and applies the new none rule: the agent no longer reads the file" as_a cat "$R/w3/team/creds"
is "... root's alone" "$(stat -c '%u:%g %a' "$R/w3/team" "$R/w3/team/creds" | paste -sd' ')" "0:0 700 0:0 600"
is "... the link left alone" "$(readlink "$R/w3/proj/secret")" /
rm "$R/w3/proj/secret" && ln -s / "$R/w3/proj/secret"
out=$("$P" policy apply --root "$R" --rules "$R/rules-l2.json" 2>&1)
is "a link root made at a rule path: the rules are refused (exit 1)" "$?" 1
like "... naming the line" "$out" "Invalid rules.*line 1.*is a symlink"
rm "$R/w3/proj/secret"

# --- a link planted while agents could write, under a rule that is read now ----------------------
# Under a write rule an agent makes a git hook that is a link to its own script elsewhere in
# the write tree; the operator then puts a read rule on the hooks. The walk never follows or
# changes a link, so root's git would run what the agent writes into the script: apply and
# check report it (exit 1) until it is removed; a link of root's there is only counted.
mkdir -p "$R/w4/proj/.git/hooks"
printf '[{"path":"/w4","access":"write"}]\n' >"$R/rules-h.json"
"$P" policy apply --root "$R" --rules "$R/rules-h.json" >/dev/null 2>&1
as_a sh -c "printf '#!/bin/sh\necho benign\n' >'$R/w4/.x.sh' && chmod 0770 '$R/w4/.x.sh' &&
	ln -s ../../../.x.sh '$R/w4/proj/.git/hooks/pre-commit'"
for acc in read none; do
	printf '[{"path":"/w4","access":"write"},{"path":"/w4/proj/.git/hooks","access":"%s"}]\n' \
		$acc >"$R/rules-h2.json"
	out=$("$P" policy apply --root "$R" --rules "$R/rules-h2.json" 2>&1)
	is "$acc rule over an agent's link (a git hook): apply exits 1" "$?" 1
	like "... reporting the link" "$out" \
		"error /w4/proj/.git/hooks/pre-commit: a symlink of uid $A under a $acc rule"
	is "... left as it was" "$(stat -c '%u %N' "$R/w4/proj/.git/hooks/pre-commit")" \
		"$A '$R/w4/proj/.git/hooks/pre-commit' -> '../../../.x.sh'"
	out=$("$P" policy check --root "$R" --rules "$R/rules-h2.json" 2>&1)
	is "... check exits 1" "$?" 1
	like "... listing it as a violation" "$out" \
		"violation /w4/proj/.git/hooks/pre-commit: a symlink of uid $A under a $acc rule"
	like "... counted" "$out" "1 violations"
done
rm "$R/w4/proj/.git/hooks/pre-commit"
ln -s ../../../.x.sh "$R/w4/proj/.git/hooks/pre-commit"
out=$("$P" policy check --root "$R" --rules "$R/rules-h2.json" 2>&1)
is "a link of root's under the rule: check exits 0" "$?" 0
like "... counted, not reported" "$out" "0 violations, 0 errors, 0 skipped, 1 symlinks left alone"
printf '[{"path":"/w4","access":"write"}]\n' >"$R/rules-h.json"
"$P" policy apply --root "$R" --rules "$R/rules-h.json" >/dev/null 2>&1
as_a ln -s .x.sh "$R/w4/link"
exits 0 "an agent's link under a write rule: only counted" "$P" policy check --root "$R" --rules "$R/rules-h.json"

# --- explain and what an agent's ownership lets it do ----------------------------------------
# explain judged from mode bits and ACLs only, but the owner of a node may chmod it: an
# agent's own 0444 file is writable by it, its own 0555 directory too (and so what lies in
# it replaceable). explain must say so, and say a read rule does not hold there; each answer
# is checked against what the agent really does.
agent_says() { # PATH RULES -> "write replace read_only_holds" from explain --json
	"$P" policy explain "$1" --root "$R" --uid $A --rules "$2" --json |
		python3 -c 'import json,sys; a=json.load(sys.stdin)["agent"]
print(*(str(a.get(k)).lower() for k in ("write", "replace", "read_only_holds")))'
}
mkdir -p "$R/e1" && echo hi >"$R/e1/f" && chown $A:$A "$R/e1/f" && chmod 0444 "$R/e1/f"
echo '[]' >"$R/rules-e0.json"
is "explain: an agent's own 0444 file (no rule): it can write it" "$(agent_says /e1/f "$R/rules-e0.json")" \
	"true false true"
ok "... and it does (chmod, write)" as_a sh -c "chmod u+w '$R/e1/f' && echo mine >'$R/e1/f'"
mkdir -p "$R/e2/proj" && echo code >"$R/e2/proj/x" && chown $A:$A "$R/e2" && chmod 0555 "$R/e2"
printf '[{"path":"/e2/proj","access":"read"}]\n' >"$R/rules-e2.json"
"$P" policy apply --root "$R" --rules "$R/rules-e2.json" >/dev/null 2>&1
is "explain: a read rule below the agent's own 0555 directory: replaceable, the rule does not hold" \
	"$(agent_says /e2/proj/x "$R/rules-e2.json")" "false true false"
like "... the warning names the directory" \
	"$("$P" policy explain /e2/proj/x --root "$R" --uid $A --rules "$R/rules-e2.json")" \
	"warning: the agent can rename /e2/proj, a directory on the way, .*read is not effective here"
ok "... and it does (chmod, rename, its own in its place)" \
	as_a sh -c "chmod u+w '$R/e2' && mv '$R/e2/proj' '$R/e2/old' && mkdir '$R/e2/proj' && echo evil >'$R/e2/proj/x'"
mkdir -p "$R/e3/proj" && echo mine >"$R/e3/proj/own" && chown $A:$A "$R/e3/proj/own"
printf '[{"path":"/e3","access":"write"}]\n' >"$R/rules-e3.json"
"$P" policy apply --root "$R" --rules "$R/rules-e3.json" >/dev/null 2>&1
as_a ln "$R/e3/proj/own" "$R/e3/.o2"
printf '[{"path":"/e3","access":"write"},{"path":"/e3/proj","access":"read"}]\n' >"$R/rules-e3r.json"
"$P" policy apply --root "$R" --rules "$R/rules-e3r.json" >/dev/null 2>&1
chmod 0440 "$R/e3/proj/own" # what the trim makes of it (protected_hardlinks on)
is "explain: the agent's own linked file under a read rule, 0440: it can write it, the rule does not hold" \
	"$(agent_says /e3/proj/own "$R/rules-e3r.json")" "true false false"
like "... with a warning" "$("$P" policy explain /e3/proj/own --root "$R" --uid $A --rules "$R/rules-e3r.json")" \
	"warning: the agent can write it \\(it owns it, and may chmod it\\): read is not effective here"
ok "... and it does (chmod, write)" as_a sh -c "chmod u+w '$R/e3/proj/own' && echo pwned >'$R/e3/proj/own'"
is "explain: a root file under the read rule: the agent can neither write nor replace it" \
	"$(echo x >"$R/e3/proj/root" && agent_says /e3/proj/root "$R/rules-e3r.json")" "false false true"
denied "... and it cannot write it" as_a sh -c "echo x >>'$R/e3/proj/root'"

# --- a shared file linked at a none rule's path that is not there yet --------------------------
# The trim of a second name (what the rule takes away goes, through the fd) made the team's
# root:pi-sandbox 0660 file root:pi-sandbox 0600: the other agents lost it, and later
# applies and check said nothing. A second name left not as the rule says is a violation to
# check and to apply's summary, until the operator removes the name.
mkdir -p "$R/w5/team" "$R/w5/proj" && echo TEAMDATA >"$R/w5/team/notes"
printf '[{"path":"/w5","access":"write"},{"path":"/w5/proj/secret","access":"none"}]\n' >"$R/rules-k.json"
"$P" policy apply --root "$R" --rules "$R/rules-k.json" >/dev/null 2>&1
exits 0 "(a write tree, a none rule not there yet: check exits 0)" "$P" policy check --root "$R" --rules "$R/rules-k.json"
as_a ln "$R/w5/team/notes" "$R/w5/proj/secret"
out=$("$P" policy apply --root "$R" --rules "$R/rules-k.json" 2>&1)
is "the agent linked the team's file at the none path: apply exits 0 (nothing failed)" "$?" 0
like "... its summary counts the name left as a violation" "$out" "apply: .* 1 violations"
like "... naming it" "$out" "left /w5/proj/secret: has more than one link: .*not what the rule says"
for i in 1 2; do
	out=$("$P" policy check --root "$R" --rules "$R/rules-k.json" 2>&1)
	is "check after apply $i: exits 1" "$?" 1
	like "... listing the name at the none path" "$out" "violation /w5/proj/secret: has more than one link"
	"$P" policy apply --root "$R" --rules "$R/rules-k.json" >/dev/null 2>&1
done
rm "$R/w5/proj/secret"
"$P" policy apply --root "$R" --rules "$R/rules-k.json" >/dev/null 2>&1
is "the name removed, apply again: the team's file is shared again" "$(stat -c '%u:%g %a %h' "$R/w5/team/notes")" "0:10010 660 1"
exits 0 "... and check exits 0" "$P" policy check --root "$R" --rules "$R/rules-k.json"
# An agent's own file with a second name in the write tree (git's and pnpm's hardlinks),
# left tighter than the rule says: its owner's to open again, reported, not a violation.
as_a sh -c "echo mine >'$R/w5/proj/own' && chmod 0600 '$R/w5/proj/own' && ln '$R/w5/proj/own' '$R/w5/proj/own2'"
out=$("$P" policy apply --root "$R" --rules "$R/rules-k.json" 2>&1)
like "an agent's own hardlinked file, tighter than the write rule: apply reports it" "$out" \
	"left /w5/proj/own2?: has more than one link"
like "... not as a violation" "$out" "apply: .* 0 violations"
exits 0 "... and check exits 0 (not a violation)" "$P" policy check --root "$R" --rules "$R/rules-k.json"
rm "$R/w5/proj/own" "$R/w5/proj/own2"

# --- a file that is a mount point ---------------------------------------------------------------
# A writable file bind-mounted over one in a read tree: apply does not cross the mount (the
# node keeps its 0666), and explain must say so (beyond_mount) and that the read rule does
# not hold there, as the agent's write shows.
mkdir -p "$R/ro" "$R/other" && echo data >"$R/other/shared" && chmod 0666 "$R/other/shared"
touch "$R/ro/conf" && mount --bind "$R/other/shared" "$R/ro/conf"
printf '[{"path":"/ro","access":"read"}]\n' >"$R/rules-m.json"
"$P" policy apply --root "$R" --rules "$R/rules-m.json" >/dev/null 2>&1
is "explain of a file that is a mount point below a read rule: beyond the mount, read does not hold" \
	"$("$P" policy explain /ro/conf --root "$R" --uid $A --rules "$R/rules-m.json" --json |
		python3 -c 'import json,sys; d=json.load(sys.stdin)
print(d["implies"]["beyond_mount"], d["agent"]["write"], d["agent"]["read_only_holds"])')" \
	"True True False"
ok "... and the agent writes it" setpriv --reuid=$A --regid=$A --clear-groups sh -c "echo agent >'$R/ro/conf'"
# check and apply say the rule does not hold there: a violation, exit 1, with what it
# would take; the bind mount's source is not touched.
out=$("$P" policy check --root "$R" --rules "$R/rules-m.json" 2>&1)
exits 1 "check of a read tree with a 0666 file mount point: not conforming" \
	"$P" policy check --root "$R" --rules "$R/rules-m.json"
like "... the mount point is a violation, with the owner and mode it has" "$out" \
	"^violation /ro/conf: a mount point .* under a read rule, not crossed, .*mode 0666"
out=$("$P" policy apply --root "$R" --rules "$R/rules-m.json" 2>&1)
like "apply reports it as a violation too" "$out" "^violation /ro/conf: a mount point"
like "... counted" "$out" "apply: .* 1 violations"
is "... and the mounted file is left as it is" "$(stat -c %a "$R/other/shared")" 666
is "check --json: kind other_fs, a violation" \
	"$("$P" policy check --root "$R" --rules "$R/rules-m.json" --json |
		python3 -c 'import json,sys; d=json.load(sys.stdin)
print([(e["kind"], e["violation"], e["old"]["mode"]) for e in d["events"] if e["path"] == "/ro/conf"])')" \
	"[('other-fs', True, '0666')]"
chmod 0644 "$R/other/shared"
out=$("$P" policy check --root "$R" --rules "$R/rules-m.json" 2>&1)
like "a root-owned 0644 file mounted there is what a read rule says: only left" "$out" \
	"^left /ro/conf: another file system"
exits 0 "... and check exits 0" "$P" policy check --root "$R" --rules "$R/rules-m.json"
umount "$R/ro/conf"
# The same for a directory: an agent's directory bind-mounted into a none tree.
mkdir -p "$R/no/cache" "$R/other/agentdir" && chown $A:$A "$R/other/agentdir"
mount --bind "$R/other/agentdir" "$R/no/cache"
printf '[{"path":"/no","access":"none"}]\n' >"$R/rules-n.json"
out=$("$P" policy check --root "$R" --rules "$R/rules-n.json" 2>&1)
like "an agent's directory mounted in a none tree: a violation (its owner can open it)" "$out" \
	"^violation /no/cache: a mount point .* under a none rule"
exits 1 "... check exits 1" "$P" policy check --root "$R" --rules "$R/rules-n.json"
"$P" policy apply --root "$R" --rules "$R/rules-n.json" >/dev/null 2>&1
is "... apply does not cross it: the agent's directory is still the agent's" \
	"$(stat -c %u "$R/other/agentdir")" "$A"
umount "$R/no/cache"

# --- more xattr names than one listxattr() returns (E2BIG) --------------------------------------
# Anyone who may write a node may add user.* xattrs to it (no ownership needed: root's
# shared root:pi-sandbox 02770 directories and 0660 files in a write tree). Past 64 KiB of
# names listxattr() fails with E2BIG; the walk used the list to find ACLs, so it reported an
# error and left the node, and for a directory everything below it: a later read or none
# rule never held there.
bloat() { # node: ~400 names of 240 bytes, as agent A
	setpriv --reuid=$A --regid=$A --groups=10010 /usr/bin/python3 -c '
import os, sys
for i in range(400):
    os.setxattr(sys.argv[1], "user." + "x" * 240 + str(i), b"1", follow_symlinks=False)' "$1"
}
mkdir -p "$R/xa/repo/hooks" "$R/xa/team" && echo TOKEN=t0ps3cret >"$R/xa/team/creds"
printf '[{"path":"/xa","access":"write"}]\n' >"$R/rules-xa.json"
"$P" policy apply --root "$R" --rules "$R/rules-xa.json" >/dev/null 2>&1
is "(write tree: root's hooks directory root:pi-sandbox 2770, creds 0660)" \
	"$(stat -c '%u:%g %a' "$R/xa/repo/hooks" "$R/xa/team/creds" | paste -sd' ')" "0:10010 2770 0:10010 660"
bloat "$R/xa/repo/hooks" && bloat "$R/xa/team/creds"
ok "(the agent made listxattr fail with E2BIG on both)" sh -c "! getfattr -d -m- '$R/xa/team/creds' >/dev/null 2>&1"
setpriv --reuid=$A --regid=$A --groups=10010 sh -c "printf 'id\n' >'$R/xa/repo/hooks/pre-commit' && chmod 0777 '$R/xa/repo/hooks/pre-commit'"
setfacl -m u:$B:rwx "$R/xa/repo/hooks/pre-commit"
# (control: the count below is 0 also where no entry could be planted or read)
is "control: the entry planted on the hook is seen" "$(getfacl -cp "$R/xa/repo/hooks/pre-commit" | grep -c "^user:$B")" 1
printf '[{"path":"/xa","access":"write"},{"path":"/xa/repo/hooks","access":"read"},{"path":"/xa/team/creds","access":"none"}]\n' >"$R/rules-xb.json"
out=$("$P" policy apply --root "$R" --rules "$R/rules-xb.json" 2>&1)
is "a read rule on the bloated directory holds: it and the agent's hook are root's" \
	"$(stat -c '%u:%g %a' "$R/xa/repo/hooks" "$R/xa/repo/hooks/pre-commit" | paste -sd' ')" "0:0 755 0:0 755"
is "... the access ACL planted on the hook is gone" "$(getfacl -cp "$R/xa/repo/hooks/pre-commit" 2>/dev/null | grep -c "^user:$B")" 0
is "a none rule on the bloated file holds: root:root 0600" "$(stat -c '%u:%g %a' "$R/xa/team/creds")" "0:0 600"
denied "... the agent can no longer read it" setpriv --reuid=$A --regid=$A --groups=10010 cat "$R/xa/team/creds"
unlike "... and apply reported no error" "$out" "^error"
exits 0 "check: the tree conforms" "$P" policy check --root "$R" --rules "$R/rules-xb.json"
# A file mount point is only judged, never changed; its ACLs were read by name alone, so
# past E2BIG it was judged on its mode alone: an ACL there went unseen.
mkdir -p "$R/ro2" "$R/other2" && echo cfg >"$R/other2/cfg" && chmod 0644 "$R/other2/cfg"
setfacl -m u:$A:r "$R/other2/cfg"
touch "$R/ro2/cfg" && mount --bind "$R/other2/cfg" "$R/ro2/cfg"
printf '[{"path":"/ro2","access":"read"}]\n' >"$R/rules-mx.json"
like "a file mount point with an ACL nobody asked for (mode still 0644): a violation" \
	"$("$P" policy check --root "$R" --rules "$R/rules-mx.json" 2>&1)" "^violation /ro2/cfg: a mount point"
/usr/bin/python3 -c '
import os, sys
for i in range(400):
    os.setxattr(sys.argv[1], "user." + "x" * 240 + str(i), b"1")' "$R/other2/cfg"
out=$("$P" policy check --root "$R" --rules "$R/rules-mx.json" 2>&1)
like "... still one with more xattr names than one list holds (E2BIG)" "$out" "^violation /ro2/cfg: a mount point"
unlike "... and no error" "$out" "^error"
umount "$R/ro2/cfg"

# --- root's private file moved into a write tree ------------------------------------------
# An agent may rename any entry of a directory it can write that has no sticky bit, root's
# files included: an image that left root's private file in such a directory (an agent's
# home, say) lets the agent move it into a write tree. The next apply made it
# root:pi-sandbox 0660: every agent read it (red team). Now only what a walk of pistis's
# closed (the closing mark) is opened again; root's other private files stay as they are.
mkdir -p "$R/mv/home" "$R/mv/ws"
chown $A:$A "$R/mv/home"
echo root-secret >"$R/mv/home/token" && chmod 0600 "$R/mv/home/token"
printf '[{"path":"/mv/ws","access":"write"},{"path":"/mv/closed","access":"none"}]\n' >"$R/rules-mv.json"
"$P" policy apply --root "$R" --rules "$R/rules-mv.json" >/dev/null 2>&1
denied "the agent cannot read root's file in its home" \
	setpriv --reuid=$A --regid=$A --groups=10010 cat "$R/mv/home/token"
denied "... nor set the closing mark on it" \
	setpriv --reuid=$A --regid=$A --groups=10010 setfattr -n user.pistis.closed -v 1 "$R/mv/home/token"
ok "... but can move it into the write tree" \
	setpriv --reuid=$A --regid=$A --groups=10010 mv "$R/mv/home/token" "$R/mv/ws/"
out=$("$P" policy apply --root "$R" --rules "$R/rules-mv.json" 2>&1)
is "apply leaves root's file closed" "$(stat -c '%u:%g %a' "$R/mv/ws/token")" "0:0 600"
denied "... the agent still cannot read the file" \
	setpriv --reuid=$A --regid=$A --groups=10010 cat "$R/mv/ws/token"
denied "... nor can another agent" \
	setpriv --reuid=$B --regid=$B --groups=10010 cat "$R/mv/ws/token"
like "... and apply says why" "$out" "^left /mv/ws/token: root's private file .* not closed by pistis"
like "... as explain does" "$("$P" policy explain /mv/ws/token --root "$R" --rules "$R/rules-mv.json" 2>&1)" \
	"note: root's, closed to the agents, and not closed by pistis: apply leaves it as is"
# Root's private directory moved in: not entered, and explain implies nothing below it.
mkdir -m 0700 "$R/mv/keys" && echo k >"$R/mv/keys/id" && chmod 0644 "$R/mv/keys/id" &&
	mv "$R/mv/keys" "$R/mv/ws/"
"$P" policy apply --root "$R" --rules "$R/rules-mv.json" >/dev/null 2>&1
is "apply does not enter root's private directory" "$(stat -c '%u:%g %a' "$R/mv/ws/keys" "$R/mv/ws/keys/id" | paste -sd' ')" "0:0 700 0:0 644"
like "... and explain implies nothing for what is in it" \
	"$("$P" policy explain /mv/ws/keys/id --root "$R" --rules "$R/rules-mv.json" 2>&1)" \
	"implies: nothing: apply does not enter /mv/ws/keys, .* keeps what it has"
like "... in JSON too" \
	"$("$P" policy explain /mv/ws/keys/id --root "$R" --rules "$R/rules-mv.json" --json 2>&1)" \
	'"left_as_is":true,.*"private_above":"/mv/ws/keys"'
rm -r "$R/mv/ws/keys"
# Root's file in one agent's own group (a Kubernetes fsGroup walk with G an agent's gid:
# every node G, g+rw): agent A reads it, B does not. A write apply counted A's group as
# the agents' and shared the file with all of them (B read it after the apply). It is
# root's private file to the others: left as it is.
echo root-only >"$R/mv/ws/fsg" && chown 0:$A "$R/mv/ws/fsg" && chmod 0660 "$R/mv/ws/fsg"
mkdir -m 2770 "$R/mv/ws/fsgd" && echo k >"$R/mv/ws/fsgd/id" && chown 0:$A "$R/mv/ws/fsgd" "$R/mv/ws/fsgd/id" &&
	chmod 0660 "$R/mv/ws/fsgd/id"
denied "(agent B cannot read root's file in agent A's group)" \
	setpriv --reuid=$B --regid=$B --groups=10010 cat "$R/mv/ws/fsg"
out=$("$P" policy apply --root "$R" --rules "$R/rules-mv.json" 2>&1)
denied "apply does not share root's file in one agent's group with another agent" \
	setpriv --reuid=$B --regid=$B --groups=10010 cat "$R/mv/ws/fsg"
is "... it keeps its owner, group and mode" "$(stat -c '%u:%g %a' "$R/mv/ws/fsg")" "0:$A 660"
denied "... nor a file in root's directory in that group" \
	setpriv --reuid=$B --regid=$B --groups=10010 cat "$R/mv/ws/fsgd/id"
like "... and apply says why" "$out" "^left /mv/ws/fsg: root's private file"
rm -r "$R/mv/ws/fsg" "$R/mv/ws/fsgd"
# The mark's name is not enough: its value is a tag made with root's key for that one inode.
# An agent marks root's shared file it may write, with a value of the right length, before
# root makes the file private; root copies a file a none rule closed, xattrs and all, into
# the write tree. Both stay closed (with a bare name, the next apply opened them).
echo shared >"$R/mv/ws/shared" && chown 0:10010 "$R/mv/ws/shared" && chmod 0660 "$R/mv/ws/shared"
# The mark's name under this key: the agent cannot read it off a closed node, but 8 hex
# digits are no secret (it could try them all); the tag is what it cannot make.
mkdir -p "$R/mv/closed" && echo c >"$R/mv/closed/c" && chown $A:$A "$R/mv/closed/c"
"$P" policy apply --root "$R" --rules "$R/rules-mv.json" >/dev/null 2>&1
name=$(getfattr --absolute-names -d -m '^user\.pistis\.closed\.' "$R/mv/closed/c" | sed -n 's/=.*//p')
ok "an agent may mark root's shared file it can write" \
	setpriv --reuid=$A --regid=$A --groups=10010 \
	setfattr -n "$name" -v 0x02000102030405060708090a0b0c0d0e0f "$R/mv/ws/shared"
chmod 0600 "$R/mv/ws/shared"
is "a none rule marks what it closes with a tag of 17 bytes" \
	"$(getfattr --absolute-names -d -m '^user\.pistis\.closed\.' -e hex "$R/mv/closed/c" |
		sed -n 's/^user\.pistis\.closed\.[0-9a-f]\{8\}=0x\(02[0-9a-f]\{32\}\)$/\1/p' | wc -L)" 34
cp -a "$R/mv/closed/c" "$R/mv/ws/copy"
"$P" policy apply --root "$R" --rules "$R/rules-mv.json" >/dev/null 2>&1
is "apply leaves root's file the agent marked closed" "$(stat -c '%u:%g %a' "$R/mv/ws/shared")" "0:10010 600"
denied "... no agent reads it" setpriv --reuid=$B --regid=$B --groups=10010 cat "$R/mv/ws/shared"
is "... nor opens the copy of a closed file" "$(stat -c '%u:%g %a' "$R/mv/ws/copy")" "0:0 600"
denied "no agent reads the key" setpriv --reuid=$A --regid=$A --groups=10010 cat "$R/data/pistis/mark.key"
# A rule's own path in a directory agents may write is judged like the rest, by explain too.
mkdir -p -m 1777 "$R/mv/shared" && echo k >"$R/mv/shared/w" && chmod 0600 "$R/mv/shared/w"
printf '[{"path":"/mv/shared/w","access":"write"}]\n' >"$R/rules-mvp.json"
like "explain: root's file at a rule path agents could have planted is left" \
	"$("$P" policy explain /mv/shared/w --root "$R" --rules "$R/rules-mvp.json" 2>&1)" "not closed by pistis: apply leaves it"
"$P" policy apply --root "$R" --rules "$R/rules-mvp.json" >/dev/null 2>&1
is "... and apply leaves it" "$(stat -c '%u:%g %a' "$R/mv/shared/w")" "0:0 600"
out=$("$P" policy check --root "$R" --rules "$R/rules-mv.json" 2>&1); rc=$?
is "check: tighter than the rule is no violation (rc)" "$rc" 0
like "... but listed" "$out" "^left /mv/ws/token"
# What a none rule closed is another matter: when the rule becomes write, it opens again.
mkdir -p "$R/mv/closed/sub" && echo plan >"$R/mv/closed/sub/notes" && chown -R $A:$A "$R/mv/closed"
"$P" policy apply --root "$R" --rules "$R/rules-mv.json" >/dev/null 2>&1
is "none closes the agent's files" "$(stat -c '%u:%g %a' "$R/mv/closed/sub/notes")" "0:0 600"
printf '[{"path":"/mv/ws","access":"write"},{"path":"/mv/closed","access":"write"}]\n' >"$R/rules-mv2.json"
"$P" policy apply --root "$R" --rules "$R/rules-mv2.json" >/dev/null 2>&1
is "... and write opens them again" "$(stat -c '%u:%g %a' "$R/mv/closed/sub" "$R/mv/closed/sub/notes" | paste -sd' ')" "0:10010 2770 0:10010 660"
ok "... readable to the agents" setpriv --reuid=$B --regid=$B --groups=10010 cat "$R/mv/closed/sub/notes"

# --- the tag read while a write rule opens the node -------------------------------------------
# A tag names its node for as long as the node lives. The mark was taken off after the mode
# that opens the node: an agent spinning on getxattr read the real tag of a file a rule
# going from none to write was opening, put it back on the file (shared now, its to write),
# and when root later made the file 0600 for a secret, the next apply opened it to every
# agent (red team; about one apply in three without help). strace holds the mark's removal
# so that the window is wide enough to look in every time.
if command -v strace >/dev/null; then
	mkdir -p "$R/tg/ws/p" && echo old >"$R/tg/ws/p/cfg"
	printf '[{"path":"/tg/ws","access":"write"},{"path":"/tg/ws/p/cfg","access":"none"}]\n' >"$R/rules-tg1.json"
	printf '[{"path":"/tg/ws","access":"write"}]\n' >"$R/rules-tg2.json"
	"$P" policy apply --root "$R" --rules "$R/rules-tg1.json" >/dev/null 2>&1
	is "none closes the file" "$(stat -c '%u:%g %a' "$R/tg/ws/p/cfg")" "0:0 600"
	setpriv --reuid=$A --regid=$A --groups=10010 sh -c '
		for i in $(seq 1 60); do
			v=$(getfattr --absolute-names -e hex -n "$1" "$2" 2>/dev/null | sed -n "s/^$1=0x//p")
			[ -n "$v" ] && { echo "$v"; exit 0; }
			sleep 0.05
		done' sh "$name" "$R/tg/ws/p/cfg" >"$R/tg/tag" 2>/dev/null &
	spy=$!
	sleep 0.2
	strace -f -qq -o /dev/null -e trace=removexattr -e inject=removexattr:delay_enter=1500000 \
		"$P" policy apply --root "$R" --rules "$R/rules-tg2.json" >/dev/null 2>&1
	wait "$spy"
	is "write opens it again" "$(stat -c '%u:%g %a' "$R/tg/ws/p/cfg")" "0:10010 660"
	is "... and no agent read its tag meanwhile" "$(cat "$R/tg/tag")" ""
	tag=$(cat "$R/tg/tag")
	[ -n "$tag" ] && setpriv --reuid=$A --regid=$A --groups=10010 \
		setfattr -n "$name" -v "0x$tag" "$R/tg/ws/p/cfg"
	echo root-secret >"$R/tg/ws/p/cfg" && chmod 0600 "$R/tg/ws/p/cfg"
	"$P" policy apply --root "$R" --rules "$R/rules-tg2.json" >/dev/null 2>&1
	is "... so root's secret in it, 0600 by hand, stays closed" \
		"$(stat -c '%u:%g %a' "$R/tg/ws/p/cfg")" "0:10010 600"
else
	untested "the tag read while a node opens" "no strace (scripts/bootstrap.sh check)"
fi

# --- a none tree moved, marks and all, into a write tree ---------------------------------------
# A mark names its node wherever the node goes. Pins keep the directories on the way from a
# write rule down to a stricter rule root's and sticky, but not the directory that holds
# the write rule's own path, nor any directory above a none rule outside write trees. In a
# shared directory with no rule (left group-writable by an earlier write rule, say), an
# agent renamed the write rule's directory away, made its own at the rule's path and moved
# the old one under it, none subtree and all: the next apply opened root's secret to every
# agent (red team). Where an agent may rename a directory on the way, a none rule marks
# nothing now (and takes marks off), so such a tree stays closed wherever it is moved.
mkdir -p "$R/mt/team/ws/secret" "$R/mt/team/pub"
chown 0:10010 "$R/mt/team" && chmod 2770 "$R/mt/team"
echo mt-secret >"$R/mt/team/ws/secret/key" && chmod 0600 "$R/mt/team/ws/secret/key"
mkdir -p "$R/mt/team/gone" && echo gone-secret >"$R/mt/team/gone/key"
printf '[{"path":"/mt/team/ws","access":"write"},{"path":"/mt/team/ws/secret","access":"none"},{"path":"/mt/team/gone","access":"none"},{"path":"/mt/team/pub","access":"write"}]\n' >"$R/rules-mt.json"
"$P" policy apply --root "$R" --rules "$R/rules-mt.json" >/dev/null 2>&1
is "none closes the tree in the shared directory" \
	"$(stat -c '%u:%g %a' "$R/mt/team/ws/secret/key" "$R/mt/team/gone/key" | paste -sd' ')" "0:0 600 0:0 600"
ok "the agent moves the write rule's tree under a directory of its own at the rule's path" \
	setpriv --reuid=$A --regid=$A --groups=10010 sh -c \
	"cd '$R/mt/team' && mv ws ws.old && mkdir ws && mv ws.old ws/old"
ok "... and puts the other none tree at the other write rule's path" \
	setpriv --reuid=$A --regid=$A --groups=10010 sh -c \
	"cd '$R/mt/team' && mv pub pub.old && mv gone pub"
"$P" policy apply --root "$R" --rules "$R/rules-mt.json" >/dev/null 2>&1
is "apply leaves both closed" \
	"$(stat -c '%u:%g %a' "$R/mt/team/ws/old/secret/key" "$R/mt/team/pub/key" | paste -sd' ')" "0:0 600 0:0 600"
denied "... no agent reads the moved secret" \
	setpriv --reuid=$B --regid=$B --groups=10010 cat "$R/mt/team/ws/old/secret/key"
denied "... nor the other" setpriv --reuid=$B --regid=$B --groups=10010 cat "$R/mt/team/pub/key"

# --- the mark is read by name, the node changed through its fd ----------------------------
# An agent may set the closing mark on its own file. Exchanging names (RENAME_EXCHANGE)
# between that file and root's private one while apply looks at them, it lent root's file
# its own mark: read by name a moment after the node was stat'ed or opened, it let apply
# open root's file, root:pi-sandbox 0660 for every agent (red team, in a few applies).
RT=$TESTBIN/redteam-probe
if [ -x "$RT" ]; then
	mkdir -p "$R/sw/ws/d" "$R/sw/home"
	chown $A:$A "$R/sw/home"
	echo root-secret >"$R/sw/home/token" && chmod 0600 "$R/sw/home/token"
	printf '[{"path":"/sw/ws","access":"write"}]\n' >"$R/rules-sw.json"
	"$P" policy apply --root "$R" --rules "$R/rules-sw.json" >/dev/null 2>&1
	setpriv --reuid=$A --regid=$A --groups=10010 mv "$R/sw/home/token" "$R/sw/ws/d/n"
	setpriv --reuid=$A --regid=$A --groups=10010 sh -c "echo mine >'$R/sw/ws/d/m'"
	ino=$(stat -c %i "$R/sw/ws/d/n")
	setpriv --reuid=$A --regid=$A --groups=10010 "$RT" swap "$R/sw/ws/d" m n 30 "$name" >/dev/null &
	swp=$!
	opened=
	for i in $(seq 1 300); do
		"$P" policy apply --root "$R" --rules "$R/rules-sw.json" >/dev/null 2>&1
		for f in n m; do
			[ "$(stat -c %i:%a "$R/sw/ws/d/$f" 2>/dev/null)" = "$ino:660" ] && opened=$i
		done
		[ -n "$opened" ] && break
		kill -0 "$swp" 2>/dev/null || break
	done
	kill "$swp" 2>/dev/null; wait "$swp" 2>/dev/null
	is "an agent swapping names with its own marked file: root's file never opened" \
		"${opened:+opened at apply $opened}" ""
else
	untested "the name-swap race" "$RT not built"
fi

# --- a registry and no /etc: the agents' processes are not "none" -----------------------
# users_list answers ENOENT for a root without /etc too; apply took that for "no registry"
# and tightened with the agents' processes (and their open fds) left running (red team).
N=$R/noetc
# (account files of its own: the host's may hold agents of its own at these uids)
mkdir -p "$N/etc" && printf 'root:x:0:0:root:/root:/bin/sh\n' >"$N/etc/passwd" &&
	printf 'root:x:0:\n' >"$N/etc/group" && printf 'root:*:19000:0:99999:7:::\n' >"$N/etc/shadow" &&
	printf 'root:*::\n' >"$N/etc/gshadow" && chmod 0640 "$N/etc/shadow" "$N/etc/gshadow"
"$P" users ensure rt/noetc --uid $B --root "$N" >/dev/null || missing "users ensure in a root of its own failed"
mv "$N/etc" "$N/etc.away"
mkdir -p "$N/proj/d" && chown $B:$B "$N/proj/d"
printf '[{"path":"/proj","access":"read"}]\n' >"$R/rules-noetc.json"
setpriv --reuid=$B --regid=$B --clear-groups sleep 30 &
spid=$!
out=$("$P" policy apply --root "$N" --rules "$R/rules-noetc.json" 2>&1); rc=$?
ok "apply under a root with a registry and no /etc: refused (rc=$rc)" test "$rc" -ne 0
like "... saying it cannot read the agents' registry" "$out" "Cannot read the agents' registry"
is "... nothing tightened: the agent's directory is as it was" "$(stat -c %u:%g "$N/proj/d")" "$B:$B"
kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
out=$("$P" policy apply --keep-processes --root "$N" --rules "$R/rules-noetc.json" 2>&1)
is "... --keep-processes applies all the same" "$(stat -c %u:%g "$N/proj/d")" "0:0"

# --- save --rules NEW: a rules file an agent wrote ---------------------------------------
# apply --rules refuses a file that is not root's alone (only root may have written what
# decides what agents may touch); save did not ask, and installed the agent's bytes as
# root's 0644 /data/pistis/rules.json, which every later apply and serve then trusted.
S=$R/save
mkdir -p "$S/w" "$S/s" && echo hunter2 >"$S/s/key" && chmod 0600 "$S/s/key"
mark_key "$S" || exit 1
printf '[{"path":"/w","access":"write"},{"path":"/s","access":"write"}]\n' >"$S/w/rules.json"
chown $A:$A "$S/w/rules.json" && chmod 0666 "$S/w/rules.json"
out=$("$P" policy save --keep-processes --root "$S" --rules "$S/w/rules.json" 2>&1); rc=$?
is "save of an agent's rules file: refused (exit 1)" "$rc" 1
like "... saying why" "$out" "rules.json': must be owned by root and not writable by group"
ok "... nothing installed" test ! -e "$S/data/pistis/rules.json"
chown 0:0 "$S/w/rules.json" && chmod 0664 "$S/w/rules.json"
out=$("$P" policy save --keep-processes --root "$S" --rules "$S/w/rules.json" 2>&1); rc=$?
is "... nor root's group-writable one (exit 1)" "$rc" 1
chmod 0644 "$S/w/rules.json"
exits 0 "... root's 0644 one is saved" "$P" policy save --keep-processes --root "$S" --rules "$S/w/rules.json"

done_testing
