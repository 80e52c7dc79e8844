#!/bin/bash
# How a command's end reads, to the client and in serve's audit trail (red team):
# - a program that is there but that execve refuses (no x bit, a directory, no #! line, a
#   bad ELF header, a #! interpreter that is missing) is `cannot_exec` and 126, and the
#   missing interpreter is named as such; only a program that is not there is `not_found`
#   and 127 (before: `internal` and 125, "a relay or protocol failure", and a script with a
#   bad interpreter read "not found", 127). `pistisd run` says the same.
# Runs as root in a private mount namespace over a throwaway Debian root; agent uid 32012.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
need_python_root
trap serve_test_cleanup EXIT

in_root "$R" pistisd users ensure-base >/dev/null || exit 1
in_root "$R" pistisd users ensure a --uid 32012 >/dev/null || exit 1
T=$R/workspaces/t
mkdir -p "$T"
printf '#!/nonexistent/interp\necho hi\n' >"$T/badint"
printf 'echo no-shebang\n' >"$T/nosb"
printf '\177ELF garbage' >"$T/badelf"
printf '#!/bin/sh\necho ok\n' >"$T/noexec"
chmod 755 "$T/badint" "$T/nosb" "$T/badelf"
chmod 644 "$T/noexec"
mkdir -p "$T/dir"

# --- exec failures through `pistisd run` ----------------------------------------------
run() { in_root "$R" pistisd run --agent a -- "$@"; }
rc=0; out=$(run /workspaces/t/badint 2>&1) || rc=$?
is "run: a missing #! interpreter is 126" "$rc" 126
like "run: ... and is named as the interpreter, not the file" "$out" 'the file is there; the interpreter'
rc=0; run /workspaces/t/nope >/dev/null 2>&1 || rc=$?
is "run: a program that is not there is 127" "$rc" 127

# --- exec failures through serve and the client --------------------------------------
relay_up "$R" "$W" || { echo "1..0 # SKIP the sandbox did not connect"; exit 0; }
X() { timeout 25 "$BIN/pistis" exec --sandbox s1 --agent a -- "$@" >"$W/o" 2>"$W/e"; }
for f in badint nosb badelf noexec dir; do
	rc=0; X "/workspaces/t/$f" || rc=$?
	is "exec $f: 126, the program cannot run" "$rc" 126
	like "exec $f: the error is cannot_exec" "$(cat "$W/e")" '^pistis: cannot_exec: cannot start: execve'
done
like "exec badint: the interpreter is named" "$(X /workspaces/t/badint; cat "$W/e")" 'interpreter its #! line'
rc=0; X /workspaces/t/nope || rc=$?
is "exec of a program that is not there: 127" "$rc" 127
like "... not_found" "$(cat "$W/e")" '^pistis: not_found: cannot start: execve: No such file'
rc=0; X nope-on-path || rc=$?
is "exec of a name on no PATH directory: 127" "$rc" 127
is "every failure is on record, not started" "$(grep -c 'audit exec .* end=not-started' "$W/pd.log")" 8

done_testing
