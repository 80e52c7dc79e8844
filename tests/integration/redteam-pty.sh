#!/bin/bash
# Red team: pseudo-terminals. `exec.start` with a pty and `pistis exec --tty` through the
# relay (server-min + pistisd serve + pistis as real processes), pistisd started as Docker's
# default capabilities leave it (no CAP_SYS_ADMIN). Who may open a command's terminal, what
# a command may do to the terminal it holds, the pool of ptys, hostile pty fields, and the
# client's own terminal. Root, private mount namespace, a throwaway Debian root, loopback.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
command -v script >/dev/null && command -v setpriv >/dev/null ||
	missing "script(1) or setpriv missing"
[ -x "$TESTBIN/redteam-probe" ] || missing "redteam-probe not built"
R=$(root_fresh debian) || missing "no debian test root"
W=$(mktemp -d "${TMPDIR:-/tmp}/pistis-pty.$$.XXXXXX")
RT=/usr/local/lib/pistis-tests/redteam-probe
PROBE=/usr/local/lib/pistis-tests/probe
cleanup() {
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	root_cleanup
	rm -rf "$W"
}
trap cleanup EXIT

# A devpts instance of the root's own with a small pool (max=), as a container has one.
PTYMAX=24
mkdir -p "$R/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,max=$PTYMAX devpts "$R/dev/pts" &&
	ln -sf pts/ptmx "$R/dev/ptmx" || missing "cannot mount devpts"
ROOT_WRAP=(setpriv --bounding-set -sys_admin)
relay_up "$R" "$W" || { echo "Bail out! the relay did not come up: $(tail -5 "$W/pd.log")"; exit 1; }
P() { "$BIN/pistis" "$@"; }
cap=$(sed -n 's/^CapEff:\t//p' /proc/$PD/status)
is "pistisd serve runs without CAP_SYS_ADMIN" "$(( (0x${cap:-0} >> 21) & 1 ))" 0
# on_pty TEXT: sh -c TEXT on a terminal of script(1)'s; its output without CRs and without the
# ^@ the command's terminal echoes when script(1) passes on the end of our stdin
on_pty() { script -qec "$1" /dev/null </dev/null 2>&1 | tr -d '\r' | sed 's/\^@//g'; }
keyed() { grep -F -- "$1=" | head -n 1 | cut -d= -f2- | tr -d '\r'; } # a key with a '/'
pts() { ptys_in_use "$R/dev/pts"; } # lib.sh; "no devpts at ..." where it cannot count
# uid of an agent: its home's owner, once it ran something
uid_of() { P exec --agent "$1" -- id -u; }
AUID=$(uid_of alice)
BUID=$(uid_of bob)

# start CMD as alice on a pty, no reader (pistis call returns at exec.started)
start_pty() { # agent shell-text
	P call exec.start "{\"agent\":\"$1\",\"shell\":\"$2\",\"pty\":true,\"timeout_ms\":60000}"
}
wait_file() { for _ in $(seq 50); do [ -s "$1" ] && return 0; sleep 0.1; done; return 1; }

# --- whose terminal: the slave is the agent's, 0600; no other agent opens it -----------------
rm -f "$R/tmp/pty-a"
start_pty alice 'tty >/tmp/pty-a; exec sleep 20' >"$W/a.start"
wait_file "$R/tmp/pty-a"
A_TTY=$(cat "$R/tmp/pty-a")
like "a --tty command's terminal is in the root's devpts" "$A_TTY" '^/dev/pts/[0-9]+$'
is "... the agent's, mode 0600" "$(stat -c '%u %a' "$R$A_TTY")" "$AUID 600"
out=$(P exec --agent bob -- $RT tty "$A_TTY" /dev/console /dev/tty0 /dev/tty1 2>&1)
is "another agent cannot open it" "$(echo "$out" | keyed "open.$A_TTY")" EACCES
for dev in /dev/console /dev/tty0 /dev/tty1; do
	like "... nor $dev" "$(echo "$out" | keyed "open.$dev")" '^E'
done
A_CMD=$(sed -n 's/.*"cmd":\([0-9]*\).*/\1/p' "$W/a.start" | head -n 1)
P call exec.signal "{\"cmd\":$A_CMD,\"signal\":9}" >/dev/null 2>&1
for _ in $(seq 50); do [ -e "$R$A_TTY" ] || break; [ "$(stat -c %u "$R$A_TTY" 2>/dev/null)" = 0 ] && break; sleep 0.1; done
ok "after the command, its terminal is gone or root's with mode 0" \
	sh -c "[ ! -e '$R$A_TTY' ] || [ \"\$(stat -c '%u %a' '$R$A_TTY')\" = '0 0' ]"

# --- ioctls on the terminal a command holds ---------------------------------------------------
out=$(on_pty "$BIN/pistis exec --tty --agent alice -- $RT tty")
for k in TIOCSTI TIOCLINUX TIOCCONS TIOCVHANGUP vhangup TIOCSCTTY TIOCSCTTY_steal; do
	is "on its own pty: $k refused" "$(echo "$out" | probe_field $k)" EPERM
done
# what docs/trusted.md counts on: a master of the agent's sends no uncatchable signal
is "TIOCSIG SIGKILL on a master of its own: EINVAL" "$(echo "$out" | probe_field TIOCSIG_KILL)" EINVAL
is "TIOCSIG SIGSTOP on a master of its own: EINVAL" "$(echo "$out" | probe_field TIOCSIG_STOP)" EINVAL

# pistisd's own terminal is never the command's: `pistisd run` started on one gives its
# command no controlling terminal (setsid) and none of its fds.
out=$(on_pty "env -i ${_ROOT_ENV[*]} chroot $R pistisd run --agent agent/t -- $RT tty /dev/tty")
is "pistisd run on a terminal: its command has no controlling terminal" "$(echo "$out" | keyed open./dev/tty)" ENXIO
is "... and its stdin is no terminal" "$(echo "$out" | probe_field TIOCCONS)" ENOTTY

# --- the pool: no pty kept per command; one agent's hoard; recovery --------------------------
base=$(pts)
like "the ptys in use in the root's devpts can be counted" "$base" '^[0-9]+$'
n=0
# (each command's pty given back before the next starts: on a loaded machine a few
# commands' ends could otherwise still be on their way when the pool runs out)
for i in $(seq $((PTYMAX + 6))); do
	P call exec.start '{"agent":"alice","argv":["true"],"pty":true}' >/dev/null 2>&1 && n=$((n + 1))
	for _ in $(seq 50); do [ "$(pts)" -le "$base" ] && break; sleep 0.1; done
done
for _ in $(seq 50); do [ "$(pts)" -le "$base" ] && break; sleep 0.1; done
is "$((PTYMAX + 6)) --tty commands on a pool of $PTYMAX: every one starts" "$n" $((PTYMAX + 6))
is "... and none keeps its pty" "$(pts)" "$base"
n=0
for i in $(seq $((PTYMAX + 6))); do
	P call exec.start '{"agent":"alice","argv":["/nonexistent"],"pty":true}' 2>&1 | grep -q 'cannot start' && n=$((n + 1))
done
for _ in $(seq 50); do [ "$(pts)" -le "$base" ] && break; sleep 0.1; done
is "$((PTYMAX + 6)) --tty commands that cannot exec: each says so" "$n" $((PTYMAX + 6))
is "... and none keeps its pty" "$(pts)" "$base"
# a command whose setsid()'d child holds the slave: the child is stopped with its command
start_pty alice 'setsid sleep 30 </dev/tty >/dev/tty 2>&1 & sleep 0.3; exit 0' >/dev/null
sleep 1
for _ in $(seq 100); do [ "$(pts)" -le "$base" ] && break; sleep 0.1; done
is "a slave a left child held is freed with the command's end" "$(pts)" "$base" ||
	{ ls -l "$R/dev/pts" | sed 's/^/# /'; ps -eo pid,user,stat,args | grep -E '[s]leep 30|[p]istisd' | sed 's/^/# /'; tail -5 "$W/pd.log" | sed 's/^/# /'; }
# One agent may take the pool (docs/security.md, "Pseudo-terminals are one pool"): the
# other's --tty command fails with a clear error, pistisd stays up, and the pool is back once
# the hoarder's command ends.
P exec --agent alice --timeout 30 -- $RT ptys 1000 4 >"$W/hoard" 2>&1 &
HP=$!
for _ in $(seq 50); do grep -q '^ptys=' "$W/hoard" && break; sleep 0.1; done
is "an agent's hoard stops at the pool's end" "$(probe_field stop <"$W/hoard")" ENOSPC
out=$(P call exec.start '{"agent":"bob","argv":["true"],"pty":true}' 2>&1)
like "... another agent's --tty command then fails, saying why" "$out" 'cannot start: open a pty'
like "... a pipes command still starts" "$(P exec --agent bob -- echo fine 2>&1)" '^fine$'
wait "$HP"
for _ in $(seq 50); do [ "$(pts)" -le "$base" ] && break; sleep 0.1; done
like "... and its --tty command again once the hoard ended" \
	"$(P call exec.start '{"agent":"bob","argv":["true"],"pty":true}' 2>&1)" 'exec.started'

# --- hostile pty fields -------------------------------------------------------------------
for bad in '"rows":-1' '"rows":1.5' '"rows":4097' '"cols":65536' '"cols":1e9' '"rows":"24"' '"rows":true'; do
	out=$(P call exec.start "{\"agent\":\"alice\",\"argv\":[\"true\"],\"pty\":true,$bad}" 2>&1); rc=$?
	is "exec.start with $bad is refused" "$rc" 1
	like "... as a bad request naming the field" "$out" 'bad_request.*(rows|cols)'
done
for bad in '"yes"' '1' '[]'; do
	out=$(P call exec.start "{\"agent\":\"alice\",\"argv\":[\"true\"],\"pty\":$bad}" 2>&1)
	like "exec.start with pty $bad is a bad request" "$out" 'bad_request.*pty'
done
out=$(P call exec.start '{"agent":"alice","argv":["sh","-c","stty size"],"pty":true,"rows":0,"cols":0}' 2>&1)
like "rows and cols 0: the default size" "$out" 'exec.started'
out=$(P call exec.start '{"agent":"alice","argv":["sleep","5"]}' 2>&1)
cmd=$(echo "$out" | sed -n 's/.*"cmd":\([0-9]*\).*/\1/p' | head -n 1)
out=$(P call exec.resize "{\"cmd\":$cmd,\"rows\":10,\"cols\":10}" 2>&1)
like "exec.resize of a command without a pty is an error" "$out" '"ok":false'
out=$(P call exec.start '{"agent":"alice","argv":["sleep","5"],"pty":true}' 2>&1)
cmd=$(echo "$out" | sed -n 's/.*"cmd":\([0-9]*\).*/\1/p' | head -n 1)
for bad in '"rows":0,"cols":10' '"rows":10,"cols":4097' '"rows":-3,"cols":10' '"rows":10'; do
	like "exec.resize with $bad is a bad request" "$(P call exec.resize "{\"cmd\":$cmd,$bad}" 2>&1)" 'bad_request'
done
P call exec.start '{"agent":"alice","argv":["true"],"pty":true}' >"$W/ended" 2>&1
ended=$(sed -n 's/.*"cmd":\([0-9]*\).*/\1/p' "$W/ended" | head -n 1)
sleep 0.5
like "exec.resize of a pty command that has ended is an error" \
	"$(P call exec.resize "{\"cmd\":$ended,\"rows\":10,\"cols\":10}" 2>&1)" '"ok":false'
like "exec.resize 4096x4096 is taken" "$(P call exec.resize "{\"cmd\":$cmd,\"rows\":4096,\"cols\":4096}" 2>&1)" '"ok":true'
like "pistisd serves on after all of it" "$(P exec --agent bob -- echo alive 2>&1)" '^alive$'

# The client's own size past the protocol's 4096: every --tty command was a bad_request
# (exit 125), and a resize past it an error; now both are clamped.
out=$(on_pty "stty rows 30 cols 5000; $BIN/pistis exec --tty --agent alice -- stty size; echo rc=\$?")
like "a terminal 5000 columns wide: pistis exec --tty runs, at 4096 columns" "$out" '^30 4096$'
like "... and exits 0" "$out" 'rc=0'
out=$(on_pty "sh -c '$BIN/pistis exec --tty --agent alice -- sh -c \"sleep 3; stty size\" </dev/tty & p=\$!; \
	sleep 1.5; stty rows 40 cols 6000 </dev/tty; wait \$p; echo rc=\$?'")
like "... grown to 6000 columns while it runs: resized to 4096" "$out" '^40 4096$'
like "... and exits 0" "$out" 'rc=0'

# --- signals through the terminal -------------------------------------------------------------
out=$( (sleep 3; printf '\003'; sleep 4) | script -qec "$BIN/pistis exec --tty --agent alice -- \
	sh -c 'trap \"echo got-int; exit 3\" INT; echo ready; while :; do sleep 1; done'" /dev/null 2>&1 | tr -d '\r')
like "^C typed into pistis exec --tty reaches the command's process group" "$out" 'got-int'

# --- the client's terminal ------------------------------------------------------------------
# pistis exec --tty makes its terminal raw; a signal that ends it (kill, timeout(1)) left it
# raw, the caller's shell without echo or line editing (red team). (SIGINT and SIGQUIT: a
# shell's background job ignores them, and so does pistis then.)
for sig in TERM HUP; do
	out=$(on_pty "sh -c '$BIN/pistis exec --tty --agent alice -- sleep 20 </dev/tty & p=\$!; sleep 3; \
		kill -$sig \$p; wait \$p; echo rc=\$?; stty -a </dev/tty'")
	like "pistis exec --tty ended by SIG$sig: exits by it" "$out" "rc=$((128 + $(kill -l $sig)))"
	like "... its terminal is back to canonical mode with echo" "$out" '(^| )icanon( |$).*' 
	unlike "... not raw" "$out" '(^| )-(icanon|echo|isig)( |$)'
done

# A signal passed on to the command (it traps SIGTERM and takes 2 s to end) leaves the
# terminal raw while the command may still write to it and read keys; it is put back at
# the end. It was made cooked at the signal, 5 s before pistis might end.
cat >"$W/tty-term.sh" <<EOF
$BIN/pistis exec --tty --agent alice -- sh -c 'trap "sleep 2; exit 7" TERM; while :; do sleep 1; done' </dev/tty &
p=\$!
sleep 3; kill -TERM \$p; sleep 0.8
echo "during: \$(stty -a </dev/tty | grep -o -e '-*icanon' | head -n 1)"
wait \$p; echo rc=\$?
echo "after: \$(stty -a </dev/tty | grep -o -e '-*icanon' | head -n 1)"
EOF
out=$(on_pty "sh $W/tty-term.sh")
like "a SIGTERM passed on to a --tty command: the terminal stays raw while it ends" "$out" '^during: -icanon$'
like "... pistis exits with the command's status" "$out" '^rc=7$'
like "... and the terminal is canonical again after" "$out" '^after: icanon$'

# --- trusted commands on a terminal (pistisd run, with its capabilities) -------------------
kill "$PD" 2>/dev/null; wait "$PD" 2>/dev/null; PD=
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts" # sudo resolves the host name
harden_shared "$R"
printf '#!/bin/sh\necho "trusted as $(id -un) on $(tty)"\n' >"$W/whoami" && chmod 0755 "$W/whoami"
"$BIN/pistisd" trusted add whoami "$W/whoami" --root "$R" >"$W/add" 2>&1
run_t() { in_root "$R" pistisd run --agent agent/t --timeout 20 "$@" </dev/null 2>&1 | tr -d '\r'; }
like "a trusted command on a terminal runs as pi-tools, on the agent's terminal (!use_pty)" \
	"$(run_t --pty -- whoami)" '^trusted as pi-tools on /dev/pts/[0-9]+$'
# An image whose sudoers logs I/O: sudo then makes a pty of its own, as with use_pty, which
# pi-tools cannot have (CAP_CHOWN). pistis leaves the operator's auditing on: the command
# fails closed on a terminal, saying why, and runs without one.
echo 'Defaults log_output' >>"$R/etc/sudoers"
like "... with the image's sudo logging output: refused on a terminal, saying why" \
	"$(run_t --pty -- whoami)" 'sudo: unable to allocate pty'
like "... and run without one" "$(run_t -- whoami)" '^trusted as pi-tools on not a tty$'

done_testing
