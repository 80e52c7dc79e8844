#!/bin/bash
# pistis beside what a plain machine (not a container) already has: pistisd started in a
# cgroup it cannot use as it wants (a threaded one), pistisd-entry run in the host's PID
# namespace with mount propagation shared with the host (systemd makes / shared), and
# account sources beyond /etc/passwd (nsswitch.conf). The "host" is this test's private
# mount namespace; every cgroup made is beneath this process's own and removed at the end.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
S=$(scratch)
CG=

cleanup() {
	local d
	if [ -n "$CG" ] && [ -d "$CG" ]; then
		# deepest first; each is empty by now (the commands ended)
		find "$CG" -depth -type d -exec rmdir {} + 2>/dev/null
		rmdir "$CG" 2>/dev/null
	fi
	root_cleanup
}
trap cleanup EXIT

# Our own cgroup v2 directory, or nothing.
own_cgroup_dir() {
	local rel mnt
	rel=$(sed -n 's/^0:://p' /proc/self/cgroup)
	[ -n "$rel" ] || return 1
	for mnt in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ "$(stat -f -c %T "$mnt" 2>/dev/null)" = cgroup2fs ] || continue
		[ -d "$mnt$rel" ] && { echo "${mnt}${rel%/}"; return 0; }
	done
	return 1
}

R=$(root_fresh debian) || missing "no debian root"

# --- 1. pistisd in a threaded cgroup ------------------------------------------------------
# A cgroup made beneath a threaded one (or beneath a threaded subtree's root, "domain
# threaded") is "domain invalid": no process may join it. Before, pistisd made its command
# cgroups there all the same and every command failed at "join cgroup: Not supported".
# Now it runs without a cgroup (each command an audit session) and check says why.
base=$(own_cgroup_dir)
if [ -z "$base" ] || ! mkdir "$base/pistis-plain-$$" 2>/dev/null; then
	skip "threaded cgroup" "no writable cgroup v2 here"
else
	CG=$base/pistis-plain-$$
	mkdir "$CG/t" "$CG/t/u"
	echo threaded >"$CG/t/u/cgroup.type"
	for where in t t/u; do
		out=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG/$where" \
			env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd run --json --agent agent/thr \
			-- /bin/echo ran 2>&1)
		rc=$?
		is "pistisd in a $(cat "$CG/$where/cgroup.type") cgroup: the command runs (${out%%$'\n'*})" "$rc" 0
		like "... and says its tree was no cgroup" "$out" '"tree":"(session|pgid)"'
		out=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG/$where" \
			env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd check --no-walk 2>&1)
		like "... check says the cgroup is not a domain" "$out" \
			"cgroup2 +warn .*is (domain threaded|threaded), not a domain"
	done
fi

# --- 2. pistisd-entry in the host's PID namespace, mounts shared with the host --------------
# systemd makes / shared: a bind mount made in the host's namespace, or in one whose mounts
# are peers of the host's, is the host's too. Here our namespace plays the host: the root is
# made rshared, and entry runs in it directly ("same") or in a namespace of peers ("peer",
# unshare --propagation unchanged). Before, entry's bind mounts of /data, /workspaces and
# /var/tmp onto themselves showed up here and stayed after it ended, and in the same
# namespace /tmp and /dev/shm came out nosuid for the whole "host". Now entry hardens in a
# mount namespace of its own (slave): the child sees the trees nosuid,nodev, the host not.
mkdir -p "$R/data" "$R/workspaces" "$R/var/tmp"
mount --make-rshared "$R"
mount -o remount,suid,dev "$R/tmp" # the host's own choice, which entry must leave alone
opts_here() { findmnt -n -o OPTIONS --target "$1"; }
is_mp() { mountpoint -q "$1" && echo mount || echo plain; }
for how in same peer; do
	before_tmp=$(opts_here "$R/tmp")
	pre=
	[ $how = peer ] && pre="unshare -m --propagation unchanged"
	out=$($pre env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd-entry --no-prepare --no-restart \
		-- /bin/sh -c 'for t in /data /workspaces /var/tmp /tmp; do
			echo "$t=$(findmnt -n -o OPTIONS --target $t)"; done' 2>"$S/entry-$how.log")
	is "$how: entry and its child ran (0)" "$?" 0
	like "$how: the child sees /data nosuid,nodev" "$out" '^/data=rw,nosuid,nodev'
	like "$how: ... /workspaces" "$out" '^/workspaces=rw,nosuid,nodev'
	like "$how: ... /tmp" "$out" '^/tmp=rw,nosuid,nodev'
	like "$how: entry says it hardened in its own namespace" "$(cat "$S/entry-$how.log")" \
		"hardening in a mount namespace of entry's own"
	for t in data workspaces var/tmp; do
		is "$how: the host's /$t is no mount point after entry" "$(is_mp "$R/$t")" plain
	done
	is "$how: the host's /tmp keeps its flags" "$(opts_here "$R/tmp")" "$before_tmp"
done

# --- 3. account sources beyond /etc/passwd (nsswitch.conf) ----------------------------------
# pistisd users reads /etc/passwd and /etc/group only: a directory service's user (sss,
# ldap, nis, winbind…) with a uid from 10100 up is invisible to it, and the first agent
# would share its uid (its files, its processes). Before, nothing said so; check's
# nss_sources now names those sources, and systemd's userdb records in the agents' range.
nss() { # CONTENT: nss_sources' status and value for the root with that nsswitch.conf
	if [ "$1" = none ]; then rm -f "$R/etc/nsswitch.conf"; else printf '%b' "$1" >"$R/etc/nsswitch.conf"; fi
	"$P" check --root "$R" --json --no-walk 2>/dev/null | python3 -c 'import json, sys
c = [c for c in json.load(sys.stdin)["checks"] if c["name"] == "nss_sources"]
print(c[0]["status"], c[0]["value"]) if c else print("absent")'
}
like "files only: ok" "$(nss 'passwd: files\ngroup: files\n')" '^ok '
like "no nsswitch.conf: ok" "$(nss none)" '^ok '
like "files systemd (Debian's default): ok, the dynamic ids are outside the range" \
	"$(nss 'passwd:   files systemd\ngroup: files systemd\n')" '^ok .*systemd'
out=$(nss 'passwd: files sss [NOTFOUND=return] ldap # the directory\ngroup: compat winbind\nhosts: files dns\nnetgroup: nis\n')
like "sss, ldap and winbind: warn naming each" "$out" '^warn .*sss, ldap, .*winbind .*10100-59999'
unlike "... and nothing of other databases or actions" "$out" 'dns|nis|NOTFOUND'
# glibc reads no comment inside a line: it tries libnss_the and libnss_directory too
like "... and the words after '#' as glibc reads them" "$out" "directory \(after a '#'\)"
mkdir -p "$R/etc/userdb"
ln -s alice.user "$R/etc/userdb/10100.user"
like "systemd with a userdb record of uid 10100: warn naming it" \
	"$(nss 'passwd: files systemd\ngroup: files systemd\n')" '^warn .*/etc/userdb/10100\.user'
rm -r "$R/etc/userdb"
# proc_hidepid on a plain machine: its advice was "pistisd-entry does it at start-up", which
# entry never does in the host's PID namespace (this test's).
hp=$("$P" check --root "$R" --json --no-walk 2>/dev/null | python3 -c 'import json, sys
c = [c for c in json.load(sys.stdin)["checks"] if c["name"] == "proc_hidepid"][0]
print(c["status"], c["value"])')
case $hp in
ok*) skip "proc_hidepid on the host's /proc" "this host's /proc has hidepid" ;;
*) like "proc_hidepid says this /proc is the host's, which entry leaves alone" "$hp" \
	"^warn .*the host's /proc \(pistisd-entry does not remount it" ;;
esac

# --- 4. the machine's sudoers already grant %pi-sandbox ------------------------------------
# On a plain machine a group named pi-sandbox may be a real one, with a sudoers rule of its
# own; agents keep no_new_privs (which makes it inert) only while no trusted command is
# installed. install's sudo -l sees the rule and fails; before, it left the drop-in in
# place, agents ran without no_new_privs, and `sudo -n id` said uid 0. Now the drop-in goes.
R2=$(root_fresh debian) || missing "no second debian root"
harden_shared "$R2"
in_root "$R2" pistisd users ensure agent/sudo >/dev/null
printf '%%pi-sandbox ALL = (ALL) NOPASSWD: ALL\n' >"$R2/etc/sudoers.d/00-machine"
chmod 0440 "$R2/etc/sudoers.d/00-machine"
printf '#!/bin/sh\necho hello\n' >"$S/hello" && chmod 0755 "$S/hello"
out=$("$P" trusted add hello "$S/hello" --root "$R2" 2>&1)
is "trusted add fails: sudo grants the agents more than the trusted command" "$?" 1
like "... naming the rule" "$out" "sudo grants 'ALL' \(as 'ALL'\)"
like "... and says the drop-in was removed" "$out" "sudoers drop-in removed"
ok "... the drop-in is gone" test ! -e "$R2/etc/sudoers.d/pistis-trusted"
out=$(in_root "$R2" pistisd run --agent agent/sudo -- /bin/sh -c \
	'grep NoNewPrivs /proc/self/status; /usr/bin/sudo -n id -u 2>/dev/null || echo refused' 2>&1)
like "the agent keeps no_new_privs" "$out" 'NoNewPrivs:[[:space:]]+1'
unlike "... and sudo does not make it root" "$out" '^0$'
out=$("$P" trusted install --root "$R2" 2>&1)
is "install again: still refused (1)" "$?" 1
ok "... and no drop-in" test ! -e "$R2/etc/sudoers.d/pistis-trusted"
rm "$R2/etc/sudoers.d/00-machine"
exits 0 "the rule gone, install succeeds" "$P" trusted install --root "$R2"
ok "... and the drop-in is there" test -e "$R2/etc/sudoers.d/pistis-trusted"

# ... and where no agent exists yet at install (an install at start-up, or agents made again
# after a rebuild), install has no one to ask: an agent made later got the rule live. Now
# every agent `users ensure` writes is asked (sudo -l -U) at once, before it runs anything.
R3=$(root_fresh debian) || missing "no third debian root"
harden_shared "$R3"
printf '%%pi-sandbox ALL = (ALL) NOPASSWD: ALL\n' >"$R3/etc/sudoers.d/00-machine"
chmod 0440 "$R3/etc/sudoers.d/00-machine"
out=$("$P" trusted add hello "$S/hello" --root "$R3" 2>&1)
is "no agent yet: trusted add succeeds (no one to ask)" "$?" 0
ok "... the drop-in is there" test -e "$R3/etc/sudoers.d/pistis-trusted"
out=$("$P" users ensure later/one --root "$R3" 2>&1 >/dev/null)
is "users ensure of a new agent: exit 0" "$?" 0
like "... says sudo grants it more and the drop-in was removed" "$out" \
	"sudo -l -U pi-agent-.*ALL.*sudoers drop-in removed"
ok "... the drop-in is gone" test ! -e "$R3/etc/sudoers.d/pistis-trusted"
out=$(in_root "$R3" pistisd run --agent later/one -- /bin/sh -c \
	'grep NoNewPrivs /proc/self/status; /usr/bin/sudo -n id -u 2>/dev/null || echo refused' 2>&1)
like "... the agent keeps no_new_privs" "$out" 'NoNewPrivs:[[:space:]]+1'
unlike "... and sudo does not make it root" "$out" '^0$'
# The rule added after a good install, and an agent made by pistisd run's own ensure.
rm "$R3/etc/sudoers.d/00-machine"
exits 0 "the rule gone, install succeeds" "$P" trusted install --root "$R3"
printf '%%pi-sandbox ALL = (ALL) NOPASSWD: ALL\n' >"$R3/etc/sudoers.d/00-machine"
chmod 0440 "$R3/etc/sudoers.d/00-machine"
out=$(in_root "$R3" pistisd run --agent later/two -- /bin/sh -c \
	'grep NoNewPrivs /proc/self/status; /usr/bin/sudo -n id -u 2>/dev/null || echo refused' 2>&1)
like "pistis run of a new agent: the drop-in is withdrawn first" "$out" "sudoers drop-in removed"
like "... the agent keeps no_new_privs" "$out" 'NoNewPrivs:[[:space:]]+1'
unlike "... and sudo does not make it root" "$out" '^0$'
ok "... the drop-in is gone" test ! -e "$R3/etc/sudoers.d/pistis-trusted"
rm "$R3/etc/sudoers.d/00-machine"
exits 0 "the rule gone, install succeeds again" "$P" trusted install --root "$R3"
out=$(in_root "$R3" pistisd run --agent later/three -- /usr/bin/sudo -n -l 2>&1)
unlike "a new agent where sudo grants only the trusted commands: nothing withdrawn" "$out" "withdrawn|drop-in removed"
ok "... the drop-in stays" test -e "$R3/etc/sudoers.d/pistis-trusted"

done_testing
