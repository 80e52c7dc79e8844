#!/bin/bash
# Red team: the spawn core and `pistisd run` attacked the way SECURITY.md says an agent
# would (hostile, hostile to other agents, racing pistisd), from inside the Debian test
# root with the static redteam-probe. A failing check here is a finding, not a flake:
# each one names what an agent gets. Root, private mount namespace, throwaway root.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] && [ -x "$TESTBIN/redteam-probe" ] && [ -x "$TESTBIN/probe" ] ||
	missing "pistisd, probe or redteam-probe not built"
RT=/usr/local/lib/pistis-tests/redteam-probe
PROBE=/usr/local/lib/pistis-tests/probe
field() { sed -n "s/^$1=//p" | tr -d '\r' | head -n 1; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

R=$(root_fresh debian) || missing "root_fresh debian failed"
S=$(scratch)
# Processes of this test: those whose root is our throwaway root (never by name or uid:
# other tests on this machine use the same agent uids).
ours() { # [uid] -> "pid args" of processes in $R
	local pid
	for pid in $(root_pids "$R" "${1:-}"); do
		echo "$pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
	done
}
# The agent processes this test leaves behind on failure must not outlive it.
kill_agents() {
	local pid
	for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null; done
	for pid in $(ours | awk '{ print $1 }'); do
		kill -CONT "$pid" 2>/dev/null
		kill -9 "$pid" 2>/dev/null
	done
	root_cleanup
}
trap kill_agents EXIT
run() { in_root "$R" pistisd run "$@"; }
# pistisd run with an environment of our choosing (in_root gives a clean one).
run_env() { chroot "$R" /usr/bin/env "$@"; }

run --agent rt/a -- /bin/true && run --agent rt/b -- /bin/true
UA=$(chroot "$R" id -u "$(run --agent rt/a -- /usr/bin/id -un)")
UB=$(chroot "$R" id -u "$(run --agent rt/b -- /usr/bin/id -un)")
UIDS="$UA $UB"
ok "two agents with distinct uids ($UA, $UB)" test -n "$UA" -a -n "$UB" -a "$UA" != "$UB"

# --- 1. fds of pistisd's caller -------------------------------------------------------
# The caller of `pistisd run` (a shell, a supervisor) may hold fds on secrets; none may
# reach the agent (runc CVE-2024-21626).
echo "caller-secret" >"$R/root/secret" && chmod 0600 "$R/root/secret"
out=$(chroot "$R" /bin/sh -c "exec 5</root/secret 7</root; exec env -i /usr/local/bin/pistisd run --agent rt/a -- $RT readfd 5" 2>&1)
is "fd 5 of the caller is not open in the agent" "$(echo "$out" | field fd.read)" EBADF
is "... nor reachable through /proc/self/fd/5" "$(echo "$out" | field fd.reopen)" ENOENT
unlike "... and the secret never shows" "$out" "caller-secret"
out=$(chroot "$R" /bin/sh -c "exec 5</root/secret 9</root; exec env -i /usr/local/bin/pistisd run --agent rt/a -- $PROBE" 2>&1)
is "only fds 0-2 with caller fds 5 and 9 open" "$(echo "$out" | field fds)" "0,1,2"

# --- 2. pistisd's own environment --------------------------------------------------------
out=$(run_env -i PATH=/usr/bin:/bin PISTIS_TOKEN_FILE=/x PISTIS_RELAY=wss://u:pw@h \
	PI_RELAY_TOKEN=tok1 PI_API_KEY=k2 PI_SERVER_SECRET=s3 PI_OK=fine LD_PRELOAD=/tmp/x.so \
	LD_LIBRARY_PATH=/tmp 'BASH_FUNC_ls%%=() { id; }' GCONV_PATH=/tmp GLIBC_TUNABLES=x \
	SSH_AUTH_SOCK=/tmp/s GITHUB_TOKEN=gh AWS_SECRET_ACCESS_KEY=aws HOME=/root \
	/usr/local/bin/pistisd run --agent rt/a -- $PROBE 2>&1)
unlike "no PISTIS_*, LD_*, BASH_FUNC_*, GCONV, TUNABLES, SSH, tokens reach the agent" "$out" \
	'^env\.(PISTIS_|LD_|BASH_FUNC|GCONV|GLIBC_|SSH_|GITHUB|AWS|PI_RELAY_TOKEN|PI_API_KEY|PI_SERVER_SECRET)'
unlike "... no secret value anywhere in what the agent sees" "$out" 'tok1|=k2|=s3|u:pw|/tmp/x\.so'
is "... an ordinary PI_* does" "$(echo "$out" | field env.PI_OK)" fine
is "... HOME is the agent's, not ours" "$(echo "$out" | field env.HOME)" "$(echo "$out" | field cwd)"
out=$(run_env -i PATH=/tmp PATH=/usr/bin:/bin /usr/local/bin/pistisd run --agent rt/a -- $PROBE 2>&1)
is "a duplicated PATH in our env does not pick the agent's PATH" \
	"$(echo "$out" | field env.PATH)" "/data/bin:/usr/local/bin:/usr/bin:/bin"
exits 100 "--env with a newline is refused" run --agent rt/a --env "$(printf 'PI_X=a\nLD_PRELOAD=/x')" -- /bin/true
exits 100 "--env LD_PRELOAD is refused" run --agent rt/a --env LD_PRELOAD=/tmp/x.so -- /bin/true
exits 100 "--env PATH is refused" run --agent rt/a --env PATH=/tmp -- /bin/true
exits 100 "--env of a 5000-byte value is refused" run --agent rt/a --env "PI_BIG=$(head -c 5000 /dev/zero | tr '\0' a)" -- /bin/true

# --- 3. stalling pistisd from inside the sandbox ----------------------------------------
# The spawn child shares pistisd's memory (CLONE_VM|CLONE_VFORK) and pistisd sleeps until
# it execs. From its setresuid to its execve it is a process of the agent's uid, so the
# agent may signal it: a SIGSTOP there suspends pistisd itself (the daemon serves every
# agent from one loop). Agent A runs a SIGSTOP loop; A's next commands must still start,
# or fail, promptly.
run --agent rt/a --timeout 20 -- $RT stall 6 >"$S/stall" 2>&1 &
sleep 0.5
max=0 n=0 stuck=0
end=$(($(date +%s) + 4))
while [ "$(date +%s)" -lt "$end" ]; do
	t=$(date +%s%N)
	timeout -s KILL 10 chroot "$R" /usr/bin/env -i /usr/local/bin/pistisd run --agent rt/a \
		--timeout 0.5 -- /bin/true >/dev/null 2>&1
	ms=$(ms_since "$t")
	n=$((n + 1))
	[ "$ms" -gt "$max" ] && max=$ms
	[ "$ms" -gt 3000 ] && stuck=$((stuck + 1)) && break
done
wait
caught=$(field caught <"$S/stall")
ok "an agent cannot stall pistisd by stopping the spawn child (slowest of $n runs: ${max} ms; spawn children caught stopped before execve: ${caught:-?})" \
	test "$max" -lt 3000
is "... no pistisd run hung" "$stuck" 0

# --- 4. agents against each other and against pistisd ------------------------------------
run --agent rt/b --timeout 30 -- $RT pause >"$S/b" 2>&1 &
for _ in $(seq 50); do grep -q '^pid=' "$S/b" && break; sleep 0.1; done
BPID=$(field pid <"$S/b")
PRUN=$(ours 0 | awk '/pistisd run --agent rt\/b/ { print $1; exit }')
ok "agent B's process is running (pid ${BPID:-?}, its pistisd run ${PRUN:-?})" test -n "$BPID" -a -n "$PRUN"
out=$(run --agent rt/a -- $RT peek "$BPID" "$PRUN" 2>&1)
for who in "$BPID" "$PRUN"; do
	what="agent B's process"
	[ "$who" = "$PRUN" ] && what="pistisd run (root)"
	is "A cannot signal $what" "$(echo "$out" | field "$who.kill0")" EPERM
	is "A cannot read the environment of $what" "$(echo "$out" | field "$who.environ")" EACCES
	is "A cannot list the fds of $what" "$(echo "$out" | field "$who.fd")" EACCES
	is "A cannot open the memory of $what" "$(echo "$out" | field "$who.mem")" EACCES
	is "A cannot read the maps of $what" "$(echo "$out" | field "$who.maps")" EACCES
	is "A cannot enter the cwd of $what" "$(echo "$out" | field "$who.cwd")" EACCES
	is "A cannot ptrace $what" "$(echo "$out" | field "$who.ptrace")" EPERM
	is "A cannot process_vm_readv $what" "$(echo "$out" | field "$who.process_vm_readv")" EPERM
done
kill "$PRUN" 2>/dev/null
wait

# --- 5. seccomp corners ------------------------------------------------------------------
out=$(run --agent rt/a -- $RT seccomp 2>&1)
for f in AF_PACKET AF_VSOCK AF_ALG AF_KEY AF_XDP AF_CAN AF_BLUETOOTH AF_TIPC AF_RDS AF_LLC \
	AF_PPPOX AF_APPLETALK AF_X25 AF_AX25 AF_IPX AF_NFC AF_SMC AF_QIPCRTR AF_MCTP AF_KCM; do
	is "socket($f) filtered" "$(echo "$out" | field "socket.$f")" EPERM
	is "socket($f with junk in the upper 32 bits) filtered" "$(echo "$out" | field "socket.${f}_hi")" EPERM
done
is "socketpair(AF_PACKET) filtered" "$(echo "$out" | field socketpair.AF_PACKET)" EPERM
is "socketpair(AF_VSOCK, upper bits) filtered" "$(echo "$out" | field socketpair.AF_VSOCK_hi)" EPERM
is "ioctl TIOCSTI with upper bits filtered" "$(echo "$out" | field ioctl.TIOCSTI_hi)" EPERM
is "ioctl TIOCLINUX with upper bits filtered" "$(echo "$out" | field ioctl.TIOCLINUX_hi)" EPERM
is "ioctl TIOCSETD with upper bits filtered" "$(echo "$out" | field ioctl.TIOCSETD_hi)" EPERM
is "clone(CLONE_NEWUSER | upper bits) filtered" "$(echo "$out" | field clone.NEWUSER_hi)" EPERM
is "unshare(CLONE_NEWUSER) filtered" "$(echo "$out" | field unshare.NEWUSER)" EPERM
is "pidfd_getfd filtered" "$(echo "$out" | field pidfd_getfd)" EPERM
# Calls newer than the build's libseccomp (by raw number) and pidfd/fanotify neighbours of
# the listed ones, through `pistisd run` as the agent.
out=$(run --agent rt/a -- $PROBE syscalls 2>&1)
for c in open_tree_attr statmount listmount process_madvise process_mrelease fanotify_init uselib modify_ldt; do
	is "$c filtered for the agent" "$(echo "$out" | field "sc.$c")" EPERM
done
# personality: only Docker's personas (the kernel lets any user set the others).
for p in ADDR_NO_RANDOMIZE READ_IMPLIES_EXEC MMAP_PAGE_ZERO LINUX_hi; do
	is "personality($p) filtered for the agent" "$(echo "$out" | field "sc.personality.$p")" EPERM
done
is "personality(0xffffffff) (the query) allowed" "$(echo "$out" | field sc.personality.query)" ok
is "personality(PER_LINUX32) allowed" "$(echo "$out" | field sc.personality.LINUX32)" ok
if [ -e /dev/userfaultfd ]; then
	touch "$R/dev/userfaultfd" && mount --bind /dev/userfaultfd "$R/dev/userfaultfd"
	out=$(run --agent rt/a -- $RT seccomp 2>&1)
	is "/dev/userfaultfd (outside seccomp) cannot be opened" "$(echo "$out" | field dev.userfaultfd)" EACCES
	umount "$R/dev/userfaultfd"
else
	skip "/dev/userfaultfd cannot be opened" "no /dev/userfaultfd on this host"
fi
mkdir -p "$R/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts" &&
	ln -sf pts/ptmx "$R/dev/ptmx"
out=$(run --agent rt/a --pty -- $RT seccomp </dev/null 2>&1)
is "TIOCSTI with upper bits on its own pty filtered" "$(echo "$out" | field ioctl.TIOCSTI_hi)" EPERM
is "TIOCLINUX with upper bits on its own pty filtered" "$(echo "$out" | field ioctl.TIOCLINUX_hi)" EPERM
is "TIOCSETD with upper bits on its own pty filtered" "$(echo "$out" | field ioctl.TIOCSETD_hi)" EPERM

# --- 6. working directory escapes ---------------------------------------------------------
HOME_A=$(run --agent rt/a -- /bin/pwd)
for cwd in /data/../etc /data//etc /data/./../etc "$HOME_A/../../../etc" "/data/sandbox-home/../../etc"; do
	out=$(run --agent rt/a --cwd "$cwd" -- /bin/pwd 2>&1)
	rc=$?
	ok "--cwd $cwd does not leave /data (rc=$rc, $(echo "$out" | head -n1))" \
		test "$rc" -ne 0 -a "$out" != /etc
done
run --agent rt/a -- /bin/sh -c 'ln -s /proc/self/root/etc magic && ln -s / root && mkdir -p d && ln -s ../../../../etc d/up'
for l in magic root d/up; do
	out=$(run --agent rt/a --cwd "$HOME_A/$l" -- /bin/pwd 2>&1)
	rc=$?
	ok "--cwd through the agent's symlink $l refused (rc=$rc)" test "$rc" -ne 0
	out=$(PISTIS_NO_OPENAT2=1 run_env -i PISTIS_NO_OPENAT2=1 /usr/local/bin/pistisd run --agent rt/a --cwd "$HOME_A/$l" -- /bin/pwd 2>&1)
	rc=$?
	ok "... also by the per-component fallback (rc=$rc)" test "$rc" -ne 0
done
mkdir -p "$R/data/agents/bm" && mount --bind "$R/etc" "$R/data/agents/bm"
out=$(run --agent rt/a --cwd /data/agents/bm -- /bin/pwd 2>&1)
rc=$?
ok "--cwd onto a bind mount of /etc refused (rc=$rc: $out)" test "$rc" -ne 0
umount "$R/data/agents/bm"
# Another agent's home: resolved as the agent, so B's 0700 home is closed to A.
HOME_B=$(run --agent rt/b -- /bin/pwd)
out=$(run --agent rt/a --cwd "$HOME_B" -- /bin/pwd 2>&1)
like "--cwd into another agent's home: permission denied" "$out" "Permission denied"

# --- 7. outliving the command ------------------------------------------------------------
t=$(date +%s%N)
run --agent rt/a --timeout 0.5 -- $RT escape 30 >/dev/null 2>&1
sleep 0.3
left=$(ours "$UA" | grep -c 'redteam-probe escape')
is "double fork + setsid + setpgid: nothing of the command outlives it" "$left" 0
t=$(date +%s%N)
run --agent rt/a --timeout 1 -- $RT closeout 30 >/dev/null 2>&1
ms=$(ms_since "$t")
ok "a command that closes stdout and stderr still times out (${ms} ms)" test "$ms" -lt 5000
left=$(ours "$UA" | grep -c 'redteam-probe closeout')
is "... and is gone" "$left" 0

# --- 8. identities pistisd must refuse -----------------------------------------------------
for u in 0 4294967295 4294967294 65534 10099 60000 10002 10010; do
	out=$(run --agent "rt/uid$u" --uid "$u" -- /usr/bin/id -u 2>&1)
	rc=$?
	ok "--uid $u refused (rc=$rc)" test "$rc" -ne 0
	unlike "... and nothing ran as uid $u" "$out" "^$u\$"
done
for id in "$(printf 'a\nb')" 'a:b' 'a,b' '-a' '.a' 'a b' "$(printf 'a\033[2Jb')" ''; do
	out=$(run --agent "$id" -- /usr/bin/id -un 2>&1)
	rc=$?
	ok "agent id $(printf %q "$id") refused (rc=$rc)" test "$rc" -ne 0
	like "... with a clear reason" "$out" "invalid agent id"
done
unlike "no passwd line was forged by an id" "$(cat "$R/etc/passwd")" '^(b:|a:b)'
# docs: exit 100 is usage; a malformed --agent is bad input, not a system error.
exits 100 "an invalid agent id is a usage error (exit 100)" run --agent 'a:b' -- /bin/true

# --- 9. huge argv ----------------------------------------------------------------------------
big=$(head -c 120000 /dev/zero | tr '\0' a)
out=$(run --agent rt/a -- /bin/sh -c 'echo ${#1}' sh "$big" 2>&1)
is "a 120 KB argument reaches the command intact" "$out" 120000
out=$(run --agent rt/a -- /bin/true $(seq 1 20000) 2>&1)
is "20,000 arguments run" "$?" 0

# --- 10. leaving or killing cgroups ------------------------------------------------------
# The command's cgroup is what stops and kills its whole tree, and every agent's commands
# sit side by side under pistis/: an agent must not move itself out (into its agent's or
# pistisd's cgroup), kill or freeze a parent (other commands, other agents, pistisd) or
# another agent's command, nor loosen its own limits.
tree=$(run --agent rt/a --json -- /bin/true 2>&1 >/dev/null | sed -n 's/.*"tree":"\([a-z]*\)".*/\1/p')
if [ "$tree" = cgroup ]; then
	run --agent rt/b --timeout 30 -- $RT pause >"$S/b2" 2>&1 &
	for _ in $(seq 50); do grep -q '^pid=' "$S/b2" && break; sleep 0.1; done
	BPID=$(field pid <"$S/b2")
	BCG=$(sed -n 's/^0:://p' "/proc/$BPID/cgroup" 2>/dev/null)
	BDIR=""
	for m in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ -n "$BCG" ] && [ -e "$m$BCG/cgroup.procs" ] && BDIR=$m$BCG && break
	done
	ok "agent B's command runs in a cgroup of its own (${BDIR:-?})" test -n "$BDIR"
	out=$(run --agent rt/a -- $RT cgroup "$BDIR" "${BDIR%/*}" 2>&1)
	self=$(echo "$out" | field cg.self)
	is "A's command found its cgroup" "$(echo "$out" | field cg.found)" yes
	levels=$(echo "$out" | field cg.levels)
	ok "... and has parents to attack (${levels:-0} levels)" test "${levels:-0}" -ge 2
	is "A cannot make a sub-cgroup" "$(echo "$out" | field cg.mkdir)" EACCES
	for f in pids_max memory_max subtree_control; do
		v=$(echo "$out" | field "cg.self.$f")
		ok "A cannot write its own cgroup's $f ($v)" test "$v" = EACCES -o "$v" = ENOENT
	done
	for l in $(seq 1 "${levels:-0}"); do
		for f in procs threads kill freeze; do
			v=$(echo "$out" | field "cg.up$l.$f")
			ok "A cannot write cgroup.$f $l level(s) up ($v)" test "$v" = EACCES -o "$v" = ENOENT
		done
	done
	for o in 1 2; do
		for f in procs kill freeze; do
			is "A cannot write cgroup.$f of agent B's cgroups ($o)" "$(echo "$out" | field "cg.other$o.$f")" EACCES
		done
	done
	is "A's command is still in the cgroup pistisd made" "$(echo "$out" | field cg.after)" "$self"
	ok "agent B's command still runs" kill -0 "$BPID"
	kill "$(ours 0 | awk '/pistisd run --agent rt\/b/ { print $1; exit }')" 2>/dev/null
	wait
else
	skip "cgroup escapes" "tree control is '${tree:-?}', not cgroup"
fi

done_testing
