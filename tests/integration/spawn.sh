#!/bin/bash
# pistisd run / the spawn core on the Debian (glibc) and musl test roots, asserted from
# inside the sandbox by the static probe. Root, private mount namespace, throwaway roots.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] && [ -x "$TESTBIN/probe" ] || missing "pistisd or probe not built"
PROBE=/usr/local/lib/pistis-tests/probe
field() { probe_field "$@"; }

for kind in debian musl; do
	R=$(root_fresh "$kind") || missing "root_fresh $kind failed"
	# a pty needs devpts in the root (the base roots have a minimal /dev)
	mkdir -p "$R/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts" &&
		ln -sf pts/ptmx "$R/dev/ptmx"
	run() { in_root "$R" pistisd run --agent "agent/$kind" "$@"; }

	out=$(run -- $PROBE 2>&1)
	probe_confined "$kind" "$out"
	# A real-time policy, a real-time I/O class and a negative nice value pistisd was
	# started with are not the command's (RLIMIT_RTPRIO 0 only stops taking them anew).
	out2=$(chrt -r 3 ionice -c 1 -n 0 nice -n -5 env -i "${_ROOT_ENV[@]}" chroot "$R" \
		pistisd run --agent "agent/$kind" -- $PROBE 2>&1)
	is "$kind: pistisd under SCHED_RR: the command's policy is SCHED_OTHER" "$(echo "$out2" | field sched_policy)" 0
	unlike "$kind: ... its I/O class is not real-time" "$(echo "$out2" | field ioprio_class)" '^1$'
	is "$kind: ... its nice value not pistisd's -5" "$(echo "$out2" | field nice)" 0
	# pistisd run holds its spawner thread to one CPU (the hand-overs of a start stay on
	# it); the command runs on every CPU its caller may, no fewer and no more.
	cpus() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$@"; }
	is "$kind: the command may run on its caller's CPUs" \
		"$(run -- cat /proc/self/status 2>&1 | cpus)" "$(cpus /proc/self/status)"
	last=$(cpus /proc/self/status | sed 's/.*[-,]//')
	is "$kind: ... a caller held to CPU $last: the command too" \
		"$(taskset -c "$last" env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd run \
			--agent "agent/$kind" -- cat /proc/self/status 2>&1 | cpus)" "$last"
	own=$(cat /proc/self/oom_score_adj)
	is "$kind: oom_score_adj pistisd's + 500 (the OOM killer takes the command first)" \
		"$(echo "$out" | field oom_score_adj)" "$((own + 500 > 1000 ? 1000 : own + 500))"
	like "$kind: cwd is the home" "$(echo "$out" | field cwd)" '^/data/sandbox-home/pi-agent-[0-9a-f]{8}$'
	is "$kind: HOME from the builder" "$(echo "$out" | field env.HOME)" "$(echo "$out" | field cwd)"
	unlike "$kind: nothing of ours leaks into env" "$out" '^env\.(PISTIS|SUDO|LD_)'
	like "$kind: cgroup per command" "$(echo "$out" | field cgroup)" '^/.*pistis/pi-agent-[0-9a-f]{8}/cmd-'
	for sc in unshare mount keyctl ptrace bpf ioctl.TIOCSTI ioctl.TIOCSTI_hi socket.AF_PACKET socket.AF_INET_SCTP socket.AF_NETLINK_ISCSI clone.NEWUSER clone.PARENT; do
		is "$kind: $sc filtered" "$(echo "$out" | field sc.$sc)" EPERM
	done
	is "$kind: io_uring ENOSYS" "$(echo "$out" | field sc.io_uring_setup)" ENOSYS
	is "$kind: clone3 ENOSYS" "$(echo "$out" | field sc.clone3)" ENOSYS
	is "$kind: a number past the table (470) ENOSYS" "$(echo "$out" | field sc.past_table)" ENOSYS
	is "$kind: AF_INET allowed" "$(echo "$out" | field sc.socket.AF_INET)" EINVAL
	is "$kind: TCP allowed" "$(echo "$out" | field sc.socket.AF_INET_TCP)" EINVAL
	is "$kind: x32 killed" "$(run -- $PROBE x32 | field x32)" "killed:31"
	# A kernel without a 32-bit entry (int 0x80 raises #GP, SIGSEGV, with no filter at
	# all) gets the same SIGSEGV in the sandbox; test-spawn checks the filter's i386
	# branch on the program itself.
	int80_outside=$(in_root "$R" $PROBE int80 | field int80)
	case $int80_outside in
	killed:11) echo "# int 0x80 raises SIGSEGV on this kernel without a filter"
		is "$kind: int 0x80 never runs" "$(run -- $PROBE int80 | field int80)" "killed:11" ;;
	*) is "$kind: int 0x80 runs outside the sandbox" "$int80_outside" "exited:11"
		is "$kind: int 0x80 killed" "$(run -- $PROBE int80 | field int80)" "killed:31" ;;
	esac
	is "$kind: fork bomb stops" "$(run --pids-max 16 -- $PROBE forkbomb 500 | field fork_error)" EAGAIN

	exits 7 "$kind: exit code passes through" run -- $PROBE exit 7
	# Numbers are digits only: strtoull took " -5" (wrapped to 2^64 - 5 bytes) and "+5".
	for bad in ' -5' '+5' '0x10' ' 5'; do
		exits 100 "$kind: --max-output '$bad' is a usage error" run --max-output "$bad" -- /bin/true
	done
	# a memory limit in serve's range: below a MiB no command starts
	for bad in 0 512K 1048575 1025T; do
		exits 100 "$kind: --memory-max $bad is a usage error" run --memory-max $bad -- /bin/true
	done
	# a count takes no size suffix (--pids-max 1K was 1024, --uid 10K the uid 10240)
	for o in --uid --pids-max --cpu-weight; do
		exits 100 "$kind: $o 10K is a usage error" run $o 10K -- /bin/true
	done
	like "$kind: --env with a name given twice: says so, before anything is touched" \
		"$(in_root "$R" pistisd run --agent "dup/$kind" --env PI_X=1 --env PI_X=2 -- /bin/true 2>&1)" \
		"--env 'PI_X': name given twice"
	long=$(printf "x'%.0s" $(seq 150))
	like "$kind: --env with a long refused name: escaped once, cut with a mark" \
		"$(in_root "$R" pistisd run --agent "dup/$kind" --env "$long=1" -- /bin/true 2>&1)" \
		"--env '(x\\\\'){66}x'\\[cut: 300 bytes\\]: "
	fails "$kind: ... (no user made for it)" in_root "$R" pistisd users show "dup/$kind"

	# --env NAME: the value from pistisd run's environment, which only root reads, not
	# from its command line, which every user reads where /proc has no hidepid. The
	# command (an agent) reads its parent's, pistisd run's, /proc/PID/cmdline.
	show='echo "got=${DB_PASSWORD-unset}"; tr "\0" " " </proc/$PPID/cmdline; echo'
	out=$(in_root "$R" env DB_PASSWORD=hunter2-env pistisd run --agent "agent/$kind" \
		--env DB_PASSWORD -- sh -c "$show" 2>&1)
	is "$kind: --env NAME: the value from pistisd run's environment reaches the command" \
		"$(echo "$out" | sed -n 's/^got=//p')" hunter2-env
	like "$kind: ... the command reads pistisd run's command line" "$out" \
		'pistisd run --agent [^ ]+ --env DB_PASSWORD -- sh'
	unlike "$kind: ... which does not hold the value" "$out" '--env.*hunter2'
	out=$(in_root "$R" pistisd run --agent "agent/$kind" --env DB_PASSWORD=hunter2-argv \
		-- sh -c "$show" 2>&1)
	is "$kind: --env NAME=VALUE: the value reaches the command" \
		"$(echo "$out" | sed -n 's/^got=//p')" hunter2-argv
	like "$kind: ... and every user reads it in pistisd run's command line" "$out" \
		'--env DB_PASSWORD=hunter2-argv -- sh'
	is "$kind: without --env, DB_PASSWORD in pistisd run's environment is not passed" \
		"$(in_root "$R" env DB_PASSWORD=hunter2-env pistisd run --agent "agent/$kind" \
			-- sh -c "$show" 2>&1 | sed -n 's/^got=//p')" unset
	is "$kind: --env NAME set but empty passes an empty value" \
		"$(in_root "$R" env DB_PASSWORD= pistisd run --agent "agent/$kind" --env DB_PASSWORD \
			-- sh -c 'echo "${DB_PASSWORD+set}:${#DB_PASSWORD}"' 2>&1)" set:0
	exits 100 "$kind: --env NAME not set in pistisd run's environment: a usage error" \
		run --env DB_PASSWORD -- /bin/true
	is "$kind: ... saying which, in one line" \
		"$(run --env DB_PASSWORD -- /bin/true 2>&1)" \
		"pistisd: --env 'DB_PASSWORD': not set in pistisd run's environment (export it; under sudo, add --preserve-env=DB_PASSWORD)"
	refused="pistisd: --env 'LD_PRELOAD': a loader, interpreter, git, ssh, sudo or sanitizer variable"
	is "$kind: --env LD_PRELOAD (unset) refused as --env LD_PRELOAD=VALUE is" \
		"$(in_root "$R" pistisd run --agent "dup/$kind" --env LD_PRELOAD -- /bin/true 2>&1; echo "rc=$?")" \
		"$refused
rc=100"
	is "$kind: ... and set" \
		"$(in_root "$R" env LD_PRELOAD= pistisd run --agent "dup/$kind" --env LD_PRELOAD \
			-- /bin/true 2>&1; echo "rc=$?")" \
		"$refused
rc=100"
	is "$kind: ... the same words as --env LD_PRELOAD=VALUE" \
		"$(in_root "$R" pistisd run --agent "dup/$kind" --env LD_PRELOAD=/x -- /bin/true 2>&1)" \
		"$refused"
	# A value that is refused, or a name given twice: the name is named, never the value.
	out=$(in_root "$R" env "DB_PASSWORD=$(printf 'hunter2\nx')" pistisd run --agent "dup/$kind" \
		--env DB_PASSWORD -- /bin/true 2>&1; echo "rc=$?")
	like "$kind: --env NAME with a newline in its value: refused" "$out" \
		"^pistisd: --env 'DB_PASSWORD': value contains a newline"
	unlike "$kind: ... the value not in the message" "$out" hunter2
	out=$(in_root "$R" env DB_PASSWORD=hunter2 pistisd run --agent "dup/$kind" \
		--env DB_PASSWORD=x --env DB_PASSWORD -- /bin/true 2>&1; echo "rc=$?")
	like "$kind: --env NAME=VALUE, then --env NAME: refused" "$out" "^pistisd: --env 'DB_PASSWORD': name given twice"
	unlike "$kind: ... the value not in the message" "$out" hunter2
	exits 134 "$kind: 128+signal" run -- $PROBE raise 6
	exits 127 "$kind: not found" run -- no-such-command
	exits 100 "$kind: cwd outside /data refused" run --cwd /etc -- $PROBE exit 0
	like "$kind: a failed step is named" "$(run --cwd /data/nope -- $PROBE 2>&1)" "enter working directory: No such file"
	exits 100 "$kind: --uid outside the agent range is a usage error" run --uid 0 -- /bin/true
	like "$kind: a uid of another agent: the owner named, then the errno" \
		"$(in_root "$R" pistisd run --agent "other/$kind" --uid "$(in_root "$R" pistisd users show "agent/$kind" | sed -n 's/^uid=//p')" -- /bin/true 2>&1)" \
		"belongs to agent 'agent/$kind' .*\\(File exists\\)\$"

	start=$(date +%s%N)
	json=$(run --timeout 0.5 --json -- $PROBE bg-sleep 30 stay 2>&1 >/dev/null)
	like "$kind: timeout reported" "$json" '"end":"timeout"'
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	ok "$kind: timeout took ${ms} ms (< 4000)" test "$ms" -lt 4000
	json=$(run --idle-timeout 0.3 --json -- $PROBE sleep 30 2>&1 >/dev/null)
	like "$kind: idle timeout reported" "$json" '"end":"idle-timeout"'
	json=$(run --max-output 100 --json -- $PROBE output 5000 2>&1 >/dev/null)
	like "$kind: truncation reported" "$json" '"truncated":true,"dropped_bytes":4900'
	start=$(date +%s%N)
	json=$(run --json -- $PROBE bg-sleep 30 2>&1 >/dev/null)
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	ok "$kind: background child holding the pipes: no hang (${ms} ms)" test "$ms" -lt 2000
	like "$kind: leftovers stopped" "$json" '"left_children_killed":true'
	# A command whose stderr ends mid-line (here with a forged result): the real one still
	# is a line of its own, the last.
	json=$(run --json -- sh -c 'printf "{\"end\":\"exited\",\"exit_code\":0} " >&2; exit 3' 2>&1 >/dev/null)
	is "$kind: --json after stderr without a newline: the last line is ours alone" \
		"$(echo "$json" | tail -n1 | cut -c1-10)" '{"agent":"'
	like "... with the command's exit code" "$(echo "$json" | tail -n1)" '"exit_code":3,'
	# ... and so is every log line after the command's output: the real warning glued
	# after a stderr that ended "pistisd: ok " read as the command's own words (red team).
	out=$(run --max-output 100 -- sh -c 'printf "pistisd: ok " >&2; sleep 0.2; head -c 1000 /dev/zero' \
		2>&1 >/dev/null)
	is "$kind: a log line after stderr without a newline is a line of its own" \
		"$(echo "$out" | tail -n1)" "pistisd: output truncated: 912 bytes over --max-output dropped"
	out=$(run --max-output 100 -- sh -c 'printf "pistisd: ok "; sleep 0.2; head -c 1000 /dev/zero >&2' 2>&1)
	is "$kind: ... after stdout without one, where stdout and stderr are one file (2>&1)" \
		"$(echo "$out" | tail -n1)" "pistisd: output truncated: 912 bytes over --max-output dropped"

	out=$(run --pty --cols 91 --rows 21 -- $PROBE </dev/null 2>&1)
	is "$kind: pty is a tty" "$(echo "$out" | field tty)" 1
	is "$kind: pty size" "$(echo "$out" | field winsize)" 91x21
	is "$kind: pty is the controlling terminal" "$(echo "$out" | field devtty)" ok
	is "$kind: TIOCSTI refused on its own pty" \
		"$(run --pty -- $PROBE tiocsti </dev/null | field sc.tiocsti)" EPERM

	out=$(PISTIS_NO_OPENAT2=1 in_root "$R" env PISTIS_NO_OPENAT2=1 pistisd run --agent "agent/$kind" -- $PROBE 2>&1)
	like "$kind: per-component fallback enters the home" "$(echo "$out" | field cwd)" '^/data/sandbox-home/'
	mkdir -p "$R/data/agents" && ln -sfn /etc "$R/data/agents/evil"
	like "$kind: symlinked cwd refused, saying why" "$(run --cwd /data/agents/evil -- $PROBE 2>&1)" \
		'enter working directory: (Too many levels|Symbolic link loop).*a symlink: none is followed'

	# Working directories beneath /workspaces (the agents' default write rule) as well.
	mkdir -p "$R/workspaces/proj" && chown 10100:10100 "$R/workspaces/proj"
	is "$kind: --cwd beneath /workspaces" "$(run --cwd /workspaces/proj -- /bin/pwd 2>&1)" /workspaces/proj
	is "$kind: --cwd /workspaces itself" "$(run --cwd /workspaces -- /bin/pwd 2>&1)" /workspaces
	exits 100 "$kind: --cwd /workspacesX refused" run --cwd /workspacesX -- /bin/true
	ok "$kind: --cwd /workspaces/../etc refused" test "$(run --cwd /workspaces/../etc -- /bin/pwd 2>/dev/null)" != /etc
	like "$kind: ... saying why" "$(run --cwd /workspaces/../etc -- /bin/pwd 2>&1)" \
		"enter working directory: .*leaves /workspaces, /workspace or /data, by '..'"
	ln -sfn /etc "$R/workspaces/evil"
	like "$kind: symlink beneath /workspaces refused" "$(run --cwd /workspaces/evil -- /bin/pwd 2>&1)" 'enter working directory'
	umount "$R/dev/pts" 2>/dev/null
done

# --- --stdin: more than a pipe or a pty holds, nothing lost ---------------------------
# The command's stdin is non-blocking on our side: what it has not taken waits, and our
# stdin is read again only once it has (1 MB through a 64 KiB pipe; 12,000 lines through
# a pty's 4 KiB line buffer).
R=$(root_fresh debian) || missing "root_fresh debian failed"
head -c 1000000 /dev/zero >"$R/tmp/in.bin"
out=$(in_root "$R" sh -c 'pistisd run --agent agent/in --stdin --timeout 20 -- wc -c </tmp/in.bin' 2>&1)
is "--stdin: 1,000,000 bytes through a pipe, all of them, then EOF" "$out" 1000000
seq 1 12000 >"$R/tmp/in.txt"
mkdir -p "$R/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts" &&
	ln -sf pts/ptmx "$R/dev/ptmx"
out=$(in_root "$R" sh -c 'pistisd run --agent agent/in --pty --stdin --timeout 20 -- \
	sh -c "stty -echo; head -n 12000 >/tmp/got; echo lines=\$(wc -l </tmp/got)" </tmp/in.txt' 2>&1 |
	tr -d '\r')
like "--pty --stdin: 12,000 lines through the terminal, all of them" "$out" 'lines=12000$'
umount "$R/dev/pts" 2>/dev/null

# --- signals to pistisd run: SIGTERM, SIGHUP or a second SIGINT stop the whole tree -------
# A command that ignores SIGTERM (and a setsid'd grandchild) must neither keep pistisd run
# waiting nor outlive it: the stop sends SIGTERM to the tree, waits the grace (2 s), then
# SIGKILLs it. A first SIGINT goes to the command itself, as a terminal's ^C would.
R=$(root_fresh debian) || missing "root_fresh debian failed"
ua=$(in_root "$R" pistisd run --agent agent/sig -- /usr/bin/id -u)
# sig_stop SIG [SIG...]: start the stubborn command, send the signals a second apart, then
# print pistisd run's exit code, the seconds it took after the last one, and the agent's
# processes left. The command sleeps D seconds (default 30) ignoring TERM, INT and HUP.
sig_stop() {
	local rp t0 rc n=0
	(in_root_exec "$R" pistisd run --agent agent/sig --json -- sh -c \
		"setsid sleep 301 </dev/null >/dev/null 2>&1 & trap '' TERM INT HUP; sleep ${D:-30}" \
		2>"$R/tmp/sig.json") &
	rp=$!
	while [ "$(root_pids "$R" "$ua" | wc -w)" -lt 2 ] && [ $n -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	for s in "$@"; do
		sleep 1
		t0=$EPOCHREALTIME
		kill -"$s" "$rp"
	done
	wait "$rp"
	rc=$?
	echo "$rc $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a }') \
$(root_pids "$R" "$ua" | wc -w)"
}
read -r rc secs left <<<"$(sig_stop TERM)"
ok "SIGTERM to pistisd run: it ends though the command ignores SIGTERM (exit $rc: 137)" \
	test "$rc" = 137
ok "... after the grace, not the command's 30 s ($secs s)" test "$secs" -le 6
is "... and nothing of the tree is left (the setsid'd sleeper included)" "$left" 0
like "... --json says cancelled" "$(cat "$R/tmp/sig.json")" '"end":"cancelled"'
read -r rc secs left <<<"$(sig_stop HUP)"
ok "SIGHUP likewise (exit $rc, $secs s)" test "$rc" = 137 -a "$secs" -le 6
is "... nothing left" "$left" 0
read -r rc secs left <<<"$(D=7 sig_stop INT)"
ok "one SIGINT goes to the command, which ignores it: it runs on to its end (exit $rc, $secs s)" \
	test "$rc" = 0 -a "$secs" -ge 4
read -r rc secs left <<<"$(sig_stop INT INT)"
ok "a second SIGINT stops the tree (exit $rc, $secs s)" test "$rc" = 137 -a "$secs" -le 6
is "... nothing left" "$left" 0

# --- a process whose main thread has exited, its other threads running on -------------------
# /proc shows its leader as a zombie and gives it no root, and cgroup.kill passes it over
# (6.18): every kill must still end it: the command's end, users remove, and a policy apply
# that takes access away from the file it holds open (red team).
gh=$(in_root "$R" pistisd run --agent agent/ghost -- /usr/bin/id -u)
wait_no_tasks() { # uid: up to 3 s for its threads to be gone; prints how many are left
	local i n
	for i in $(seq 30); do
		n=$(uid_tasks "$1")
		[ "$n" = 0 ] && break
		sleep 0.1
	done
	echo "$n"
}
# Twice: with the command cgroups, and without (a tmpfs over the root's /sys/fs/cgroup:
# the audit session holds the tree, and the /proc sweeps find the ghost).
for mode in cgroup session; do
	[ $mode = session ] && mount -t tmpfs -o mode=0755,size=1m no-cgroup "$R/sys/fs/cgroup"
	in_root "$R" pistisd users ensure agent/ghost >/dev/null
	in_root "$R" pistisd run --agent agent/ghost -- sh -c "$PROBE ghost 300 </dev/null >/dev/null 2>&1 & sleep 1"
	is "$mode: a ghost (main thread gone, a thread sleeping on) is killed at its command's end" \
		"$(wait_no_tasks "$gh")" 0
	mkdir -p "$R/workspaces/x" && echo data >"$R/workspaces/x/f" && chmod 0666 "$R/workspaces/x/f"
	in_root "$R" pistisd run --agent agent/ghost --keep-children -- \
		sh -c "$PROBE ghost 300 /workspaces/x/f </dev/null >/dev/null 2>&1 & sleep 1"
	ok "$mode: ... --keep-children keeps it (holding /workspaces/x/f open)" \
		test "$(uid_tasks "$gh")" -ge 1
	printf '[{"path":"/workspaces","access":"write"},{"path":"/workspaces/x","access":"none"}]\n' \
		>"$R/tmp/ghost-rules.json"
	in_root "$R" pistisd policy apply --rules /tmp/ghost-rules.json >/dev/null 2>&1
	is "$mode: a policy apply that takes /workspaces/x away kills it" "$(wait_no_tasks "$gh")" 0
	rm -rf "$R/workspaces/x"
	in_root "$R" pistisd run --agent agent/ghost --keep-children -- \
		sh -c "$PROBE ghost 300 </dev/null >/dev/null 2>&1 & sleep 1"
	ok "$mode: another ghost kept" test "$(uid_tasks "$gh")" -ge 1
	in_root "$R" pistisd users remove agent/ghost >/dev/null 2>&1
	is "$mode: users remove kills it" "$(wait_no_tasks "$gh")" 0
	[ $mode = session ] && umount "$R/sys/fs/cgroup"
done

# --- cgroup limits asked for hold, or nothing runs -----------------------------------------
# --memory-max and --cpu-weight need their controller delegated to pistis's cgroups; where
# it is not (this project's hybrid VMs), the run is refused before anything starts.
# --pids-max always holds as NPROC (with a warning where pids.max cannot be set).
for opt in "--memory-max 64M:memory" "--cpu-weight 50:cpu"; do
	o=${opt%:*} k=${opt#*:}
	out=$(in_root "$R" pistisd run --agent agent/sig --json $o -- /bin/true 2>&1)
	rc=$?
	if [ $rc = 0 ]; then
		like "$o: applied where it runs (--json: \"$k\":true)" "$out" "\"$k\":true"
	else
		is "$o: refused where the $k controller is missing (exit 111)" "$rc" 111
		like "... saying which controller and why" "$out" \
			"Refusing to run: ${o% *} needs the $k controller, which pistis's cgroups do not have here"
	fi
done
out=$(in_root "$R" pistisd run --agent agent/sig --json --pids-max 16 -- /bin/true 2>&1)
is "--pids-max runs everywhere (NPROC)" "$?" 0
like "... and says where pids.max did not hold" "$out" \
	'"pids":true|--pids-max holds as NPROC only'
out=$(in_root "$R" pistisd run --agent agent/sig -- "" 2>&1)
is "an empty command name is a usage error (exit 100)" "$?" 100
like "... saying so" "$out" "the command after '--' is empty"

# --- trusted commands: no_new_privs off exactly when they are configured ---------------
R=$(root_fresh debian) || missing "root_fresh debian failed"
S=$(scratch)
run() { in_root "$R" pistisd run --agent agent/t "$@"; }
out=$(run -- $PROBE 2>&1)
is "no trusted commands: no_new_privs" "$(echo "$out" | field NoNewPrivs)" 1
is "no trusted commands: empty bounding set" "$(echo "$out" | field CapBnd)" 0000000000000000
# sudo resolves the host name (Debian builds it with fqdn); a container's /etc/hosts has it.
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts"
printf '#!/bin/sh\necho "trusted as $(id -un)"\n' >"$S/whoami" && chmod 0755 "$S/whoami"
"$P" trusted add whoami "$S/whoami" --root "$R" >"$S/add" 2>&1
ok "trusted add (rc=$?: $(tail -n 1 "$S/add"))" test -f "$R/etc/sudoers.d/pistis-trusted"
# Without no_new_privs a setuid file one agent leaves in a tree they share runs as that agent
# for another: trusted commands are on only while every shared tree is nosuid.
like "... which warns that they stay off while /data is not nosuid" "$(cat "$S/add")" \
	"stay off for agents while the shared tree '/data' is not mounted nosuid"
is "trusted commands, shared trees not nosuid: no_new_privs stays on" \
	"$(run -- $PROBE 2>&1 | field NoNewPrivs)" 1
like "... so the trusted command fails closed (sudo refuses)" "$(run -- whoami 2>&1)" "no new privileges"
harden_shared "$R"
umount "$R/var/tmp"
is "... one of them (/var/tmp) still suid: no_new_privs stays on" \
	"$(run -- $PROBE 2>&1 | field NoNewPrivs)" 1
mount --bind "$R/var/tmp" "$R/var/tmp" && mount -o remount,bind,nosuid,nodev "$R/var/tmp"
is "the agent runs the trusted command as pi-tools" "$(run -- whoami 2>&1)" "trusted as pi-tools"
# On a terminal too: with Debian's use_pty sudo made a pty for the script and gave it to
# pi-tools (CAP_CHOWN, not in the agent's bounding set), so every trusted command failed
# under --pty. The script runs on the agent's terminal, under the agent's filter: no TIOCSTI.
mkdir -p "$R/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts" &&
	ln -sf pts/ptmx "$R/dev/ptmx"
is "... on a terminal (--pty) as well" "$(run --pty --timeout 20 -- whoami </dev/null 2>&1 | tr -d '\r')" \
	"trusted as pi-tools"
printf '#!/bin/sh
exec %s tiocsti
' "$PROBE" >"$S/ttyprobe" && chmod 0755 "$S/ttyprobe"
"$P" trusted add ttyprobe "$S/ttyprobe" --root "$R" >/dev/null 2>&1
is "... where the script (pi-tools) cannot push input into the agent's terminal" \
	"$(run --pty --timeout 20 -- ttyprobe </dev/null 2>&1 | tr -d '\r' | field sc.tiocsti)" EPERM
"$P" trusted remove ttyprobe --root "$R" >/dev/null 2>&1
umount "$R/dev/pts"
out=$(run -- $PROBE 2>&1)
is "trusted commands: no no_new_privs" "$(echo "$out" | field NoNewPrivs)" 0
is "trusted commands: bounding = SETUID|SETGID|AUDIT_WRITE" "$(echo "$out" | field CapBnd)" 00000000200000c0
is "trusted commands: seccomp still on" "$(echo "$out" | field Seccomp)" 2
is "trusted commands: effective set empty" "$(echo "$out" | field CapEff)" 0000000000000000
# The Landlock scope goes on before the id change on this path (no no_new_privs; still
# root): the trusted command above ran through sudo inside it, and it holds as on the other.
RT=/usr/local/lib/pistis-tests/redteam-probe
if in_root "$R" pistisd check --no-walk 2>/dev/null | grep -Eq '^landlock +ok'; then
	in_root "$R" $RT listen "host-abs-$$" 3 >"$S/habs.out" 2>&1 &
	HABS=$!
	for _ in $(seq 50); do grep -q '^listen=' "$S/habs.out" && break; sleep 0.1; done
	out=$(run --json -- $RT connect "host-abs-$$" 2>&1)
	is "trusted commands: no abstract socket of the host's" "$(echo "$out" | field connect)" EPERM
	like "... run --json says scoped" "$out" '"abstract_sockets":"scoped"'
	out=$(run --json --share-abstract-sockets -- $RT connect "host-abs-$$" 2>&1)
	is "run --share-abstract-sockets: the host's abstract socket is reached" \
		"$(echo "$out" | field connect)" ok
	like "... run --json says shared" "$out" '"abstract_sockets":"shared"'
	wait "$HABS"
	is "... exactly that one connection and datagram arrived" "$(field accepted <"$S/habs.out")" "1 got=1"
else
	skip "abstract sockets scoped under trusted commands" "no Landlock ABI 6 (pistisd check: landlock)"
fi
# A write rule outside the shared trees, on a mount that honours setuid (the root's
# overlay): agent A could leave a setuid file there for agent B. Setuid stays off until
# the tree is nosuid; `pistisd check` and `trusted add` name it.
mkdir -p "$R/srv/proj" "$R/data/pistis"
printf '[{"path": "/srv/proj", "access": "write"}, {"path": "/workspaces", "access": "write"}]\n' \
	>"$R/data/pistis/rules.json" && chmod 0600 "$R/data/pistis/rules.json"
is "a write rule's tree not nosuid: no_new_privs stays on" \
	"$(run -- $PROBE 2>&1 | field NoNewPrivs)" 1
like "... trusted add names it" "$("$P" trusted add whoami "$S/whoami" --root "$R" 2>&1)" \
	"write rule's tree '/srv/proj' is not mounted nosuid"
like "... pistisd check names it" "$(in_root "$R" pistisd check --no-walk 2>&1)" \
	"write rule /srv/proj: without nosuid"
mount --bind "$R/srv/proj" "$R/srv/proj" && mount -o remount,bind,nosuid,nodev "$R/srv/proj"
is "... once nosuid: no no_new_privs again" "$(run -- $PROBE 2>&1 | field NoNewPrivs)" 0
umount "$R/srv/proj"
rm "$R/data/pistis/rules.json"
chmod 0666 "$R/etc/sudoers.d/pistis-trusted"
is "a world-writable drop-in does not count" "$(run -- $PROBE 2>&1 | field NoNewPrivs)" 1
chmod 0440 "$R/etc/sudoers.d/pistis-trusted"
"$P" trusted remove whoami --root "$R" >/dev/null 2>&1
is "trusted commands removed: no_new_privs again" "$(run -- $PROBE 2>&1 | field NoNewPrivs)" 1

# Each command's Landlock domain also carries Landlock's ptrace rule: a later command of the
# same agent may signal what an earlier one left, but not read its environment.
if in_root "$R" pistisd check --no-walk 2>/dev/null | grep -Eq '^landlock +ok'; then
	left=$(run --keep-children -- sh -c 'sleep 30 >/dev/null 2>&1 </dev/null & echo $!')
	peek='cat /proc/$1/environ >/dev/null 2>&1 && echo environ=ok || echo environ=denied; kill -0 $1 && echo signal=ok'
	out=$(run -- sh -c "$peek" sh "$left" 2>&1)
	is "a later command cannot read the environment of an earlier one's leftover" \
		"$(echo "$out" | field environ)" denied
	is "... but may still signal it" "$(echo "$out" | field signal)" ok
	is "... and with --share-abstract-sockets (no domain) reads it" \
		"$(run --share-abstract-sockets -- sh -c "$peek" sh "$left" 2>&1 | field environ)" ok
	kill "$left" 2>/dev/null
else
	skip "a command's Landlock domain and an earlier command's leftover" "no Landlock ABI 6"
fi

# SysV IPC objects a command leaves (no kill reaches them): removed once the agent has no
# process left, as serve does (serve-strays.sh); kept with --keep-children, and while
# another command of the agent's runs. They live in the host's IPC namespace: the trap
# removes what a failed check leaves.
auid=$(run -- $PROBE 2>&1 | field uid | cut -d, -f1)
trap 'ipc_remove "$auid"; lib_cleanup' EXIT
like "the command leaves a segment, a queue and a semaphore set" \
	"$(run -- $PROBE ipc-leave 65536 2>&1)" '^ipc=shm:[0-9]+,msg:[0-9]+,sem:[0-9]+$'
is "... removed when it ends (the agent has no process left)" "$(ipc_of "$auid")" 0
run --keep-children -- $PROBE ipc-leave 65536 >/dev/null 2>&1
is "... kept with --keep-children" "$(ipc_of "$auid")" 3
left=$(run --keep-children -- sh -c 'sleep 30 >/dev/null 2>&1 </dev/null & echo $!')
run -- $PROBE ipc-leave 65536 >/dev/null 2>&1
is "... kept while another process of the agent's runs" "$(ipc_of "$auid")" 6
kill "$left" 2>/dev/null
while kill -0 "$left" 2>/dev/null; do sleep 0.05; done
run -- /bin/true
is "... all removed when the agent's next command ends with nothing left running" "$(ipc_of "$auid")" 0
# As many as the kernel gives (32000 queues, 32000 sets, 4096 segments by default): one
# listing and one child remove them all; rounds of 256 stopped at 65536 and held serve's
# loop for seconds (red team).
out=$(run -- $PROBE ipc-fill 40000 2>&1)
like "an agent that fills the kernel's SysV tables ..." "$out" "filled=[0-9]{5}"
is "... has none left when its command ends" "$(ipc_of "$auid")" 0
# A pod's other container of the same uid, in the IPC namespace we share but another PID
# namespace (Kubernetes' default): its segment, and a queue it sends to, are kept at the
# agent's command end; a queue nobody used is not told apart (it holds nothing) and goes.
# Emulated in an IPC namespace of the test's own (held by a sleeper; the host's would be
# `--ipc host`, where pistis removes nothing), with pistisd run in a PID namespace of its
# own and the other side in ours, which pistisd's cannot number (cpid, lspid 0).
unshare --ipc sleep 600 &
ipc_holder=$!
sleep 0.2
in_ipc() { nsenter -t "$ipc_holder" --ipc "$@"; }
ipc_count() { in_ipc awk -v u="$auid" 'FNR > 1 && ($8 == u || $10 == u)' /proc/sysvipc/shm /proc/sysvipc/msg | wc -l; }
as_auid() { in_ipc setpriv --reuid="$auid" --regid="$auid" --clear-groups "$@"; }
f_shm=$(as_auid ipcmk -M 4096 | awk '{print $NF}')
f_msg=$(as_auid ipcmk -Q | awk '{print $NF}')
f_idle=$(as_auid ipcmk -Q | awk '{print $NF}')
as_auid /usr/bin/python3 -c '
import ctypes, sys
class M(ctypes.Structure): _fields_ = [("t", ctypes.c_long), ("b", ctypes.c_char * 8)]
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(libc.msgsnd(int(sys.argv[1]), ctypes.byref(M(1, b"theirs")), 6, 0) != 0)' "$f_msg"
is "another PID namespace's segment, used queue and idle queue of the agent's uid" "$(ipc_count)" 3
out=$( (ROOT_WRAP=(nsenter -t "$ipc_holder" --ipc unshare --pid --fork --kill-child); in_root_exec "$R" pistisd run --agent agent/t -- $PROBE ipc-leave 65536) 2>&1)
like "... beside which the agent's command leaves its own three" "$out" '^ipc=shm:[0-9]+,msg:[0-9]+,sem:[0-9]+'
is "... its command's end removes the agent's own segment and queue, and the idle queue" "$(ipc_count)" 2
ok "... and keeps the other container's segment" sh -c "nsenter -t $ipc_holder --ipc cat /proc/sysvipc/shm | grep -qE '^ *-?[0-9]+ +$f_shm '"
ok "... and the queue it sends to, with its message" \
	sh -c "nsenter -t $ipc_holder --ipc cat /proc/sysvipc/msg | awk -v q=$f_msg 'NR > 1 && \$2 == q && \$5 == 1' | grep -q ."
kill "$ipc_holder"

# /data/bin is first on every agent's PATH: a program there that is not root's alone (an
# agent's, left in an earlier life of the volume) would run as whoever types its name.
other=$(in_root "$R" pistisd users ensure agent/other-bin --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["uid"])')
mkdir -p "$R/data/bin"
printf '#!/bin/sh\necho "planted ran as $(id -u)"\n' >"$R/data/bin/ls" && chmod 0755 "$R/data/bin/ls"
chown "$other:$other" "$R/data/bin/ls"
out=$(run -- ls / 2>&1)
is "pistisd run refuses while /data/bin holds another agent's program" "$?" 111
like "... says which and why" "$out" "Refusing to run: 1 file.* in /data/bin, on every agent's PATH, not root's alone: 'ls' \(owner $other"
unlike "... and nothing ran" "$out" "planted ran"
rm "$R/data/bin/ls"
like "with it gone, ls is ls again" "$(run -- ls / 2>&1)" "^bin"
done_testing
