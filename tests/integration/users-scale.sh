#!/bin/bash
# pistisd users with many agents: 10,000 in the Debian (glibc) and musl/busybox test roots.
# `users list` (and show) grow linearly, and the tools of each image still resolve users
# and groups with pi-sandbox's member line at 180 KB; the end of the uid range. Runs as root in a private mount
# namespace over throwaway roots; never touches the host's /etc or /data.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || missing "$P not built"
N=10000

ms() { echo $(($(date +%s%N) / 1000000)); }

for kind in debian musl; do
	R=$(root_fresh "$kind") || missing "root_fresh $kind failed"
	ok "$kind: ensure-base" in_root "$R" pistisd users ensure-base
	made=0 t0=$(ms)
	for ((i = 0; i < N; i += 1000)); do
		in_root "$R" pistisd users ensure $(seq -f "agent-%g" "$i" $((i + 999))) \
			>/dev/null || break
		made=$((i + 1000))
	done
	is "$kind: $N agents made in batches of 1,000" "$made" "$N"
	echo "# $kind: $N agents in $(($(ms) - t0)) ms"
	len=$(grep '^pi-sandbox:' "$R/etc/group" | wc -c)
	ok "$kind: pi-sandbox's line is long ($len bytes)" test "$len" -gt $((N * 17))

	# Each agent's check in list walked every line of group and gshadow and pi-sandbox's
	# member list: N² (5,000 agents 3.2 s, 10,000 ~13 s). Now ~0.1 s; 5 s is slack for
	# a slow machine, not the measure.
	t0=$(ms)
	n=$(in_root "$R" pistisd users list 2>"$R/tmp/list.err" | wc -l)
	t=$(($(ms) - t0))
	echo "# $kind: users list of $N agents: $t ms"
	is "$kind: list names every agent" "$n" "$N"
	ok "$kind: list in under 5 s ($t ms)" test "$t" -lt 5000
	is "$kind: list warns of nothing" "$(cat "$R/tmp/list.err")" ""
	t0=$(ms)
	out=$(in_root "$R" pistisd users ensure agent-9999 | sed -n 's/^name=//p')
	echo "# $kind: an existing agent among $N: $(($(ms) - t0)) ms"
	like "$kind: the last agent is confirmed" "$out" '^pi-agent-[0-9a-f]{8,}$'

	# What the image's own tools make of it (glibc or busybox): the agent, its groups, a
	# file's group by number, the listing of pi-sandbox.
	touch "$R/tmp/f" && in_root "$R" chown "$out:pi-sandbox" /tmp/f
	like "$kind: id names the agent and pi-sandbox" "$(in_root "$R" id "$out")" \
		"uid=[0-9]+\\($out\\) gid=[0-9]+\\($out\\) groups=.*10010\\(pi-sandbox\\)"
	like "$kind: ls -l names owner and group" "$(in_root "$R" ls -l /tmp/f)" \
		"${out:0:8}[^ ]* +pi-sandb"
	like "$kind: su runs as the agent with pi-sandbox" \
		"$(in_root "$R" su -s /bin/sh "$out" -c id 2>&1)" "groups=.*10010\\(pi-sandbox\\)"
	if [ "$kind" = debian ]; then
		is "$kind: getent lists every member" \
			"$(in_root "$R" getent group pi-sandbox | cut -d: -f4 | tr , '\n' | wc -l)" "$N"
		# The trusted-command rule's form (docs/trusted.md), in this throwaway root.
		echo '%pi-sandbox ALL = (pi-tools) NOPASSWD: /bin/true' >"$R/etc/sudoers.d/scale"
		chmod 0440 "$R/etc/sudoers.d/scale"
		like "$kind: sudo -l -U finds the %pi-sandbox rule" \
			"$(in_root "$R" sudo -l -U "$out" 2>&1)" '\(pi-tools\) NOPASSWD: /bin/true'
	fi
done

# The end of the uid range (the freed uid is 35000: a test uid of this suite's own range): 49,899 records written here (uids 10100-59998, reserved), the
# last uid, then a clear refusal (exit 1), never a uid outside 10100-59999. It said "no free
# uid left in 10100..59999 (No space left on device)", exit 111: a full disk to a reader.
R=$(root_fresh musl) || missing "root_fresh musl failed"
ok "full range: ensure-base" in_root "$R" pistisd users ensure-base
python3 - "$R/data/pistis/users.registry" <<'PY2'
import hashlib, sys
out = ["pistis-users-registry 1"]
for uid in range(10100, 59999):
    aid = "full-%d" % uid
    name = "pi-agent-" + hashlib.sha256(aid.encode()).hexdigest()[:8]
    out.append("%d:%s:reserved:%s" % (uid, name, aid))
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY2
chmod 0600 "$R/data/pistis/users.registry"
is "full range: the last uid is 59999" \
	"$(in_root "$R" pistisd users ensure last-one | sed -n 's/^uid=//p')" 59999
out=$(in_root "$R" pistisd users ensure one-more 2>&1)
is "full range: the next is refused (exit 1)" "$?" 1
like "full range: says who holds the uids and what frees one" "$out" \
	"no free uid left in 10100\\.\\.59999: the registry holds 49900 agents \\(1 active, 49899 reserved .*--forget"
unlike "full range: no disk error in the message" "$out" "space left|No error information"
is "full range: a batch is refused too (exit 1)" \
	"$(in_root "$R" pistisd users ensure b-1 b-2 >/dev/null 2>&1; echo $?)" 1
ok "full range: remove --forget of a reserved agent" \
	in_root "$R" pistisd users remove full-35000 --forget
is "full range: its uid goes to the next agent" \
	"$(in_root "$R" pistisd users ensure one-more | sed -n 's/^uid=//p')" 35000
done_testing
