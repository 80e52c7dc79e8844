#!/bin/bash
# Red team: real CVEs of the container-runtime, sudo and account-tool families, replayed
# against pistis as variants (another start style, file type, step order or interface than
# the tests that already cover each; the map is docs/security.md, "CVEs replayed"). Debian
# root with the real sudo; agents at uids 32001 and 32003; root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] && [ -x "$TESTBIN/redteam-probe" ] ||
	missing "pistisd or redteam-probe not built"
RT=/usr/local/lib/pistis-tests/redteam-probe
field() { sed -n "s/^$1=//p" | tr -d '\r' | head -n 1; }
R=$(root_fresh debian) || missing "root_fresh debian failed"
[ -x "$R/usr/bin/sudo" ] && [ -x "$R/usr/bin/setpriv" ] || missing "no sudo/setpriv in the root"
S=$(scratch)
kill_ours() {
	local pid
	for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null; done
	for pid in $(root_pids "$R"); do
		kill -CONT "$pid" 2>/dev/null
		kill -9 "$pid" 2>/dev/null
	done
	root_cleanup
}
trap kill_ours EXIT

"$P" users ensure-base --root "$R" >/dev/null
"$P" users ensure cve/a --uid 32001 --root "$R" >/dev/null
"$P" users ensure cve/t --uid 32003 --root "$R" >/dev/null
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts"
run() { in_root "$R" pistisd run "$@"; }
# The agent as the spawn core makes it where trusted commands exist (no no_new_privs,
# CAP_SETUID, CAP_SETGID, CAP_AUDIT_WRITE in the bounding set): sudo is reachable.
agent() {
	chroot "$R" /usr/bin/setpriv --bounding-set -all,+setuid,+setgid,+audit_write \
		--inh-caps -all --reuid 32003 --regid 32003 --groups 10010 \
		/usr/bin/env -i PATH=/data/bin:/usr/bin:/bin HOME=/tmp "$@"
}
printf '#!/usr/local/bin/pistisd trusted-interp /bin/sh\necho "user=$(id -un) uid=$(id -u)"\n' >"$S/hello"
printf '#!/usr/local/bin/pistisd trusted-interp /bin/sh\nsleep "${1:-3}"\n' >"$S/nap"
chmod 0755 "$S/hello" "$S/nap"
ok "add hello and nap (trusted-interp scripts)" \
	sh -c "'$P' trusted add hello '$S/hello' --root '$R' && '$P' trusted add nap '$S/nap' --root '$R'" 2>/dev/null
like "the agent runs hello as pi-tools" "$(agent hello 2>&1)" "^user=pi-tools"

# --- 1. runc CVE-2019-5736 and CVE-2016-9962: the child between its id change and execve ---
# The spawn child runs pistisd's binary, holds the daemon's fds until close_range and has
# the agent's uid from setresuid to execve. The agent stops every such child it can catch
# and tries its /proc/PID/exe (for writing: the runc overwrite; reading; O_PATH), its fds,
# environ and mem. Both start styles; a 600-level working directory, resolved as the
# agent, and three busy loops of the agent's on the two CPUs widen the window.
# (tests/unit/test-spawn.c holds a child at each step.)
HOME_A=$(awk -F: '$3 == 32001 { print $6 }' "$R/etc/passwd")
d=$HOME_A/$(printf 'a/%.0s' $(seq 600))
run --agent cve/a -- /bin/mkdir -p "$d"
is "the deep working directory is the agent's to enter" "$(run --agent cve/a --cwd "$d" -- /bin/pwd)" "${d%/}"
for style in vfork fork; do
	E=()
	[ "$style" = fork ] && E=(PISTIS_NO_VFORK=1)
	run --agent cve/a --timeout 20 -- /bin/sh -c \
		'for i in 1 2 3; do (while :; do :; done) & done; sleep 3.5' >/dev/null 2>&1 &
	run --agent cve/a --timeout 20 -- $RT snoop 3 >"$S/snoop.$style" 2>&1 &
	sleep 0.3
	end=$(($(date +%s) + 3)) n=0
	while [ "$(date +%s)" -lt "$end" ]; do
		timeout -s KILL 10 env -i "${E[@]}" chroot "$R" /usr/local/bin/pistisd run \
			--agent cve/a --cwd "$d" --timeout 1 -- /bin/true >/dev/null 2>&1
		n=$((n + 1))
	done
	wait
	out=$(cat "$S/snoop.$style")
	caught=$(echo "$out" | field caught)
	for k in exe_write exe_read exe_path environ mem fd_list fd_open; do
		is "$style-style start ($n spawns, $caught caught before execve): no $k" \
			"$(echo "$out" | field "$k")" 0
	done
done
# After execve the command's own exe is its program; pistisd's binary as the agent
# (trusted-exec) and as pi-tools (trusted-interp) is root's file: no write through exe.
agent nap 3 >/dev/null 2>&1 &
sleep 1
tools=$(for pid in $(root_pids "$R" 10002); do echo "$pid"; done | head -n 3)
ok "a trusted command of the agent's runs as pi-tools (${tools//$'\n'/ })" test -n "$tools"
for pid in $tools; do
	is "the agent cannot open pi-tools' /proc/$pid/exe for writing" \
		"$(agent sh -c "exec 3>>/proc/$pid/exe" 2>&1 | grep -c 'Permission denied')" 1
	is "... nor read it" "$(agent sh -c "exec 3</proc/$pid/exe" 2>&1 | grep -c 'Permission denied')" 1
done
wait
out=$(agent sh -c 'exec 3>>/usr/local/bin/pistisd' 2>&1)
like "the agent cannot open pistisd's binary for writing" "$out" 'Permission denied|Read-only|Text file busy'

# --- 2. CVE-2021-4034 (pkexec): argc 0 and a hostile envp ----------------------------------
# With argc 0 a program that reads argv[1] reads envp[0]; Linux 5.18+ puts "" in argv[0],
# older kernels do not. Either way nothing may run on envp's word.
out=$(agent $RT execv0 /usr/local/bin/pistisd 'trusted-interp /bin/sh' 'trusted-exec' 2>&1)
rc=$?
is "pistisd with argc 0 and envp 'trusted-interp /bin/sh': usage (100)" "$rc" 100
unlike "... and nothing ran" "$out" 'user=|uid=0'
out=$(agent $RT execv0 /usr/local/bin/pi-env 'PATH=/tmp' '--keep=LD_PRELOAD' 'LD_PRELOAD=/tmp/x.so' 2>&1)
is "pi-env with argc 0 and a hostile envp: usage (100)" "$?" 100
out=$(agent $RT execv0 /data/bin/hello 'PATH=/tmp' 'TERM=../../tmp/x' 'LD_PRELOAD=/tmp/x.so' 2>&1)
rc=$?
ok "the /data/bin wrapper (trusted-exec) with argc 0: no crash (exit $rc)" test "$rc" -lt 128
unlike "... nothing as root" "$out" 'uid=0'
out=$(agent $RT execv0 /usr/local/bin/pistisd 'trusted-exec' '/data/bin/hello' 2>&1)
is "trusted-exec named only in envp with argc 0: usage (100)" "$?" 100

# --- 3. the image's sudo against the drop-in (CVE-2021-3156, -2025-32463, -32462, -2023-22809)
# Behaviour, not version strings: each probe is what a vulnerable sudo answers differently.
out=$(agent sudoedit -s / 2>&1)
like "sudoedit -s / (Baron Samedit's probe) is a usage error, not 'not a regular file'" \
	"$out" '^usage: sudoedit'
unlike "... (a vulnerable sudo parses -s for sudoedit)" "$out" 'not a regular file'
out=$(agent sudo -n -R /tmp -u pi-tools /data/trusted/hello 2>&1)
unlike "sudo -R (chroot, CVE-2025-32463) with the pinned script: refused, nothing runs" "$out" 'user='
out=$(agent sudo -n -R /tmp /bin/true 2>&1)
unlike "sudo -R to root: refused" "$out" 'unable to change root|chroot'
out=$(agent sudo -n -h nosuchhost -u pi-tools /data/trusted/hello 2>&1)
unlike "sudo -h HOST (CVE-2025-32462) runs nothing" "$out" 'user='
out=$(agent env 'EDITOR=/bin/cat -- /etc/shadow' sudoedit -n /data/trusted/hello 2>&1)
unlike "sudoedit with EDITOR='cat -- /etc/shadow' (CVE-2023-22809): no shadow line" "$out" '^root:'
out=$(agent sudo -n -u pi-tools -s 2>&1)
unlike "sudo -s as pi-tools: refused" "$out" 'uid=10002'

# --- 4. shadow-utils CVE-2023-29383: control characters in account fields ----------------
before=$(sha256sum "$R/etc/passwd" "$R/etc/group")
for id in $'x\nroot:x:0:0::/:/bin/sh' $'x\rroot' 'x:0:0' $'\033[2Jx' $'x\tb'; do
	exits 100 "users ensure $(printf %q "$id"): refused" "$P" users ensure "$id" --uid 32004 --root "$R"
done
is "... /etc/passwd and /etc/group untouched" "$(sha256sum "$R/etc/passwd" "$R/etc/group")" "$before"
is "the agents' passwd lines carry no control character" \
	"$(grep '^pi-agent' "$R/etc/passwd" | LC_ALL=C grep -c '[[:cntrl:]]')" 0

# --- 5. runc CVE-2025-31133: /dev/null that is not the null device -------------------------
# pistisd opens /dev/null as root once, for every command's stdin. A /dev/null that an
# image, a volume or an earlier stage left as a symlink (to a root-only file), a plain file
# or a FIFO handed each agent what it names (the secret, as stdin) or hung the start; and
# where pistisd had a closed stdin, stdout or stderr to fill, its log went into that file.
echo "devnull-secret" >"$R/root/secret" && chmod 0600 "$R/root/secret"
umount "$R/dev/null" && rm -f "$R/dev/null"
ln -s /root/secret "$R/dev/null"
out=$(timeout 20 chroot "$R" /usr/bin/env -i /usr/local/bin/pistisd run --agent cve/a -- /bin/cat 2>&1)
rc=$?
unlike "/dev/null a symlink to a root-only file: the agent's stdin is not that file" "$out" 'devnull-secret'
is "... the start is refused (111), naming /dev/null" "$rc/$(echo "$out" | grep -c '/dev/null')" "111/1"
like "... the step that failed and why" "$out" 'spawn core: /dev/null \(a symbolic link; it must be the null device'
# with stderr closed, pistisd opened /dev/null (as root, read-write, following the link) for
# its fd 2 and wrote its log line over the root-only file the link named
timeout 20 chroot "$R" /usr/bin/env -i /usr/local/bin/pistisd run --agent cve/a -- /bin/true 2>&-
is "... with stderr closed: refused (111)" "$?" 111
is "... and the file the link names is not written (pistisd's log over it before)" \
	"$(cat "$R/root/secret")" devnull-secret
rm -f "$R/dev/null" && cp "$R/root/secret" "$R/dev/null"
out=$(timeout 20 chroot "$R" /usr/bin/env -i /usr/local/bin/pistisd run --agent cve/a -- /bin/cat 2>&1)
is "/dev/null a regular file: refused (111), nothing read" "$?/$(echo "$out" | grep -c devnull-secret)" "111/0"
like "... saying it is not the null device" "$out" 'spawn core: /dev/null \(not the null device, character device 1:3\)'
rm -f "$R/dev/null" && mkfifo -m 0666 "$R/dev/null"
timeout 20 chroot "$R" /usr/bin/env -i /usr/local/bin/pistisd run --agent cve/a -- /bin/true >/dev/null 2>&1
is "/dev/null a FIFO: refused (111), not hung" "$?" 111
rm -f "$R/dev/null" && touch "$R/dev/null" && mount --bind /dev/null "$R/dev/null"
is "the null device again: commands run" "$(run --agent cve/a -- /bin/echo ran 2>&1)" ran

# --- 6. pistisd check asks the image's sudo how it behaves (sudo_cves) ----------------------
# The version string says nothing where a distribution backports a fix; the check asks sudo,
# as uid 65534, the first step of each bug. The real Debian sudo: ok. fake-sudo, setuid
# root, takes those first steps (sudoedit -s; the chroot to -R DIR and its nsswitch.conf
# read before any policy): named, and a hard failure inside the root, where the drop-in
# says trusted commands are configured.
cv() { sed -n 's/^sudo_cves  *//p'; }
is "the real sudo: sudo_cves ok" "$("$P" check --root "$R" --no-walk 2>/dev/null | cv | awk '{print $1}')" ok
if [ -x "$TESTBIN/fake-sudo" ]; then
	mv "$R/usr/bin/sudo" "$R/usr/bin/sudo.real"
	cp "$TESTBIN/fake-sudo" "$R/usr/bin/sudo" && chmod 4755 "$R/usr/bin/sudo"
	out=$(in_root "$R" pistisd check --no-walk 2>/dev/null | cv)
	like "a sudo that takes sudoedit -s and follows -R first: fail, hard (trusted configured)" \
		"$out" '^fail +yes .*CVE-2021-3156 \(sudoedit -s\), CVE-2025-32463 \(-R\)'
	out=$(in_root "$R" pistisd check --no-walk --json 2>/dev/null)
	like "... and --json says so" "$out" '"name": "sudo_cves", "status": "fail", "hard": true, "allowed": false'
	# Asking -R of a sudo without that bug is logged (user NOT in sudoers, mailed where
	# the image has a mailer) at every start: a sudo whose version is outside the bug's
	# 1.9.14-1.9.17 is not asked; one inside it (a fix may be backported) is.
	for v in 1.9.13p3:no 1.9.14:yes 1.9.16p2:yes 1.9.17:yes 1.9.17p1:no 1.10.0:no; do
		echo "${v%:*}" >"$R/etc/fake-sudo-version"
		out=$(in_root "$R" pistisd check --no-walk 2>/dev/null | cv)
		like "a sudo that says ${v%:*}: sudoedit -s asked" "$out" '^fail +yes .*CVE-2021-3156 \(sudoedit -s\)'
		is "... -R asked: ${v#*:}" "$(echo "$out" | grep -q 'CVE-2025-32463' && echo yes || echo no)" "${v#*:}"
	done
	rm -f "$R/etc/fake-sudo-version"
	mv "$R/etc/sudoers.d/pistis-trusted" "$S/dropin"
	out=$(in_root "$R" pistisd check --no-walk 2>/dev/null | cv)
	like "... without trusted commands (agents keep no_new_privs): a warning" "$out" '^warn +yes .*CVE-2021-3156'
	mv "$S/dropin" "$R/etc/sudoers.d/pistis-trusted"
	mv "$R/usr/bin/sudo.real" "$R/usr/bin/sudo"
else
	untested "sudo_cves against a vulnerable sudo" "fake-sudo not built"
fi
is "... the probe's directory is gone from the image's /tmp" "$(ls "$R/tmp" | grep -c pistis-sudo-probe)" 0

# --- 7. runc CVE-2025-31133 family, across a restart: a volume's mount target replaced -------
# An agent cannot mount, but the runtime mounts each volume again at every start, following
# links on its way down: an agent that renames the parent of a nested volume's mount point
# (the mount does not stop that) and leaves a link to /usr/local/bin in its place has that
# volume, and the files it wrote there, over the image's binaries next time. pistis cannot
# stop a mount made before it runs; `pistisd check` names such mounts (mount_points).
mp() { in_root "$R" pistisd check --no-walk 2>/dev/null | sed -n 's/^mount_points  *//p'; }
like "no nested volume: mount_points ok" "$(mp)" '^ok '
# /workspaces as a write rule leaves it (root:pi-sandbox 3770); proj is the agent's.
mkdir -p "$R/workspaces/proj/nm" && chown 0:10010 "$R/workspaces" && chmod 3770 "$R/workspaces"
chown 32001:32001 "$R/workspaces/proj"
mount -t tmpfs -o size=1m nm "$R/workspaces/proj/nm"
chown 32001:32001 "$R/workspaces/proj/nm"
like "a volume mounted beneath a directory an agent owns: mount_points warns, naming both" \
	"$(mp)" '^warn .* first /workspaces/proj/nm beneath /workspaces/proj: '
ok "the agent moves the mounted volume's parent away and leaves a link in its place" \
	chroot "$R" /usr/bin/setpriv --reuid 32001 --regid 32001 --groups 10010 /bin/sh -c \
	'mv /workspaces/proj /workspaces/old && mkdir /workspaces/proj && ln -s /usr/local/bin /workspaces/proj/nm'
like "... after the move too (the link waits for the next start)" "$(mp)" \
	'^warn .* first /workspaces/old/nm beneath /workspaces/old: '
umount "$R/workspaces/old/nm"
like "... and with none left: ok" "$(mp)" '^ok '

done_testing
