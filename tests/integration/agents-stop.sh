#!/bin/bash
# The agents' running processes, stopped where an fd or a uid would outlive a change:
# - pistisd policy apply|save: an fd opened under the old modes outlives a tightening, so
#   before the first change that takes access away the CLI kills every process of an
#   agent's uid that can reach the tree (its root is the tree's root or above it);
# - pistisd users remove: the agent's processes go before its user (with --forget, its uid
#   may go to the next agent, and what still ran would be that agent).
# Only those: the same uid in another sandbox's root, a uid the registry does not hold,
# another agent and root's processes stay. Runs as root in a private mount namespace over
# throwaway Debian roots; never touches the host's /etc or users.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || missing "$P not built"
R=$(root_fresh debian) || missing "no debian root"
R2=$(root_fresh debian) || missing "no second debian root"
work=$(mktemp -d "${TMPDIR:-/tmp}/pistis-test.$$.XXXXXX")
for r in "$R" "$R2"; do
	in_root "$r" pistisd users ensure-base >/dev/null || exit 1
	in_root "$r" pistisd users ensure a >/dev/null || exit 1
done
A=$(in_root "$R" pistisd users show a | sed -n 's/^uid=//p')
is "agent a has the same uid in both roots" "$(in_root "$R2" pistisd users show a | sed -n 's/^uid=//p')" "$A"
mkdir -p "$R/workspaces/proj"
echo secret-to-be >"$R/workspaces/proj/f"
printf '[{"path":"/workspaces","access":"write"}]\n' >"$work/write.json"
printf '[{"path":"/workspaces","access":"none"}]\n' >"$work/none.json"
exits 0 "write rule applied" "$P" policy apply --root "$R" --rules "$work/write.json"

# Background processes started here are waited for by nobody: each is killed at the end.
pids=()
bg() { "$@" >/dev/null 2>&1 & pids+=($!); disown $!; }
trap 'kill -9 "${pids[@]}" 2>/dev/null; lib_cleanup' EXIT
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '$1 == "State:" {print $2}' "/proc/$1/status" 2>/dev/null)" != Z ]; }
# Up to 5 s for a condition (processes start through pistisd run).
wait_for() { local i; for i in $(seq 1 100); do "$@" && return 0; sleep 0.05; done; return 1; }
has_pids() { [ -n "$(root_pids "$1" "$2")" ]; }

# An agent's command holding the file open, as the agent, in the tree's root.
bg in_root "$R" pistisd run --agent a -- /bin/sh -c 'exec 3</workspaces/proj/f; exec sleep 300'
# One that keeps forking: every sweep finds new children until one finds none.
bg in_root "$R" pistisd run --agent a --keep-children -- /bin/sh -c \
	'while :; do sleep 300 & sleep 0.01; done'
# The same uid in another sandbox's root: not this tree's agent, it cannot reach it.
bg in_root "$R2" pistisd run --agent a -- /bin/sleep 300
# The same uid at the machine's root, above the tree: it can reach the tree by path.
bg setpriv --reuid="$A" --regid="$A" --clear-groups sleep 300
host_agent=$!
# A uid the registry does not hold (in the agent range) and root: never touched.
bg setpriv --reuid=$((A + 50)) --regid=$((A + 50)) --clear-groups sleep 300
stranger=$!
bg in_root "$R" /bin/sleep 299
ok "the agent's commands run in the tree's root" wait_for has_pids "$R" "$A"
ok "the agent's command runs in the other root" wait_for has_pids "$R2" "$A"
# The forking command has children by now: waited for, as the agent's first process seen
# above may be any of its commands (after a fixed 0.3 s, on a loaded machine, it was not
# always running yet).
forked_enough() { [ "$(root_pids "$R" "$A" | wc -l)" -ge 3 ]; }
wait_for forked_enough
forked=$(root_pids "$R" "$A" | wc -l)
ok "the forking command has children ($forked agent processes)" [ "$forked" -ge 3 ]
root_sleep=$(for p in $(root_pids "$R" 0); do [ "$(cat "/proc/$p/cmdline" 2>/dev/null | tr '\0' ' ')" = "/bin/sleep 299 " ] && echo "$p"; done)
ok "root's process runs in the tree's root" [ -n "$root_sleep" ]

# plan and check take nothing away: they stop nothing.
"$P" policy plan --root "$R" --rules "$work/none.json" >/dev/null 2>&1
"$P" policy check --root "$R" --rules "$work/none.json" >/dev/null 2>&1
is "plan and check stop no process" "$(root_pids "$R" "$A" | wc -l | awk -v n="$forked" '{print ($1 >= n)}')" 1
exits 100 "--keep-processes belongs to apply and save" "$P" policy plan --root "$R" --keep-processes

# A failure to list the agents fails closed: nothing tightened, nothing killed.
cp -a "$R/data/pistis/users.registry" "$work/registry"
printf 'garbage\n' >>"$R/data/pistis/users.registry"
before=$(stat -c '%a %U %G' "$R/workspaces/proj/f")
out=$("$P" policy apply --root "$R" --rules "$work/none.json" 2>&1); rc=$?
is "a corrupt registry: apply exits 1" "$rc" 1
like "... saying why, naming the registry" "$out" 'registry.*nothing was tightened'
is "... and the file keeps its modes" "$(stat -c '%a %U %G' "$R/workspaces/proj/f")" "$before"
ok "... and the agent's command still runs" has_pids "$R" "$A"
cp -a "$work/registry" "$R/data/pistis/users.registry"

# The tightening apply.
out=$("$P" policy apply --root "$R" --rules "$work/none.json" 2>&1); rc=$?
is "tightening apply exits 0" "$rc" 0
like "it says it killed the agents' processes first" "$out" 'killed [0-9]+ agent process\(es\) that can reach'
is "no process of the agent is left in the tree's root" "$(root_pids "$R" "$A")" ""
ok "the agent at the machine's root, above the tree, is gone" wait_for eval "! alive $host_agent"
ok "the agent's process in the other root still runs" has_pids "$R2" "$A"
ok "a uid the registry does not hold still runs" alive "$stranger"
ok "root's process in the tree's root still runs" alive "$root_sleep"
is "the file is now root's, none" "$(stat -c '%a %u:%g' "$R/workspaces/proj/f")" "600 0:0"

# Loosening takes nothing away: nothing is stopped.
bg in_root "$R" pistisd run --agent a -- /bin/sleep 300
ok "a new agent command runs" wait_for has_pids "$R" "$A"
out=$("$P" policy apply --root "$R" --rules "$work/write.json" 2>&1)
unlike "a loosening apply kills nothing" "$out" 'killed'
ok "... and the command still runs" has_pids "$R" "$A"
# --keep-processes: the operator's choice; the process outlives the tightening.
out=$("$P" policy apply --root "$R" --rules "$work/none.json" --keep-processes 2>&1); rc=$?
is "apply --keep-processes exits 0" "$rc" 0
ok "--keep-processes: the command still runs" has_pids "$R" "$A"
is "... and the tree is tightened" "$(stat -c '%a %u:%g' "$R/workspaces/proj/f")" "600 0:0"
# save is apply after installing the rules: the same stop.
"$P" policy apply --root "$R" --rules "$work/write.json" >/dev/null 2>&1
out=$("$P" policy save --root "$R" --rules "$work/none.json" 2>&1); rc=$?
is "save of a tightening rule exits 0" "$rc" 0
like "save kills the agents' processes first" "$out" 'killed 1 agent process'
is "... none left in the tree's root" "$(root_pids "$R" "$A")" ""
ok "... the other root's untouched" has_pids "$R2" "$A"
# --- users remove --------------------------------------------------------------------
for r in "$R" "$R2"; do in_root "$r" pistisd users ensure b >/dev/null || exit 1; done
Bu=$(in_root "$R" pistisd users show b | sed -n 's/^uid=//p')
is "agent b has the same uid in both roots" "$(in_root "$R2" pistisd users show b | sed -n 's/^uid=//p')" "$Bu"
bg in_root "$R" pistisd run --agent b -- /bin/sleep 300
bg in_root "$R2" pistisd run --agent b -- /bin/sleep 300
bg in_root "$R" pistisd run --agent a -- /bin/sleep 300
ok "agent b runs in the tree's root" wait_for has_pids "$R" "$Bu"
ok "agent b runs in the other root" wait_for has_pids "$R2" "$Bu"
ok "agent a runs in the tree's root" wait_for has_pids "$R" "$A"
exits 100 "remove --forget --keep-processes refused" \
	"$P" users remove b --forget --keep-processes --root "$R"
exits 100 "--keep-processes belongs to remove" "$P" users show b --keep-processes --root "$R"
ok "... b still runs" has_pids "$R" "$Bu"
out=$("$P" users remove b --forget --root "$R" 2>&1); rc=$?
is "remove --forget exits 0" "$rc" 0
like "it says it killed the agent's process first" "$out" "killed 1 process\\(es\\) of agent 'b' first"
is "no process of b is left in the tree's root" "$(root_pids "$R" "$Bu")" ""
ok "b in the other root still runs" has_pids "$R2" "$Bu"
ok "agent a still runs" has_pids "$R" "$A"
# The uid is free again: the next agent gets it, with nothing of b running as it.
is "the next agent gets b's uid" "$(in_root "$R" pistisd users ensure c | sed -n 's/^uid=//p')" "$Bu"
is "... and nothing runs as it" "$(root_pids "$R" "$Bu")" ""
# Without --forget, --keep-processes is the operator's to choose.
bg in_root "$R" pistisd run --agent c -- /bin/sleep 300
ok "agent c runs" wait_for has_pids "$R" "$Bu"
out=$("$P" users remove c --keep-processes --root "$R" 2>&1); rc=$?
is "remove --keep-processes exits 0" "$rc" 0
unlike "... kills nothing" "$out" killed
ok "... c still runs" has_pids "$R" "$Bu"
exits 1 "remove of an unknown agent: refused" "$P" users remove nobody-here --root "$R"
ok "... and agent a still runs" has_pids "$R" "$A"
done_testing
