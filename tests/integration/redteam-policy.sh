#!/bin/bash
# Red team: the path-rules walk and explain, attacked by an agent that plants what it likes
# on the nodes it owns. Runs as root in a private mount namespace over a tmpfs; never
# touches the host.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
P=$BIN/pistisd
[ -x "$P" ] || { echo "1..0 # SKIP $P not built"; exit 0; }
command -v setfacl >/dev/null || { echo "1..0 # SKIP setfacl missing (scripts/bootstrap.sh check)"; exit 0; }
R=$(scratch) || exit 1
mount -t tmpfs -o mode=0755 pistis-rt "$R" || exit 1
trap 'umount -l "$R"; root_cleanup' EXIT
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

done_testing
