#!/bin/sh
# sweep-enum.sh: the local privilege-escalation enumeration an attacker runs on first getting
# a shell as an agent (in the spirit of linpeas, deepce and CDK, written for this project),
# run as the agent by tests/integration/redteam-sweep.sh in a plain root and in a Docker
# container. POSIX sh with only what busybox has too. It prints one line per fact:
#   F CLASS DETAIL   a finding: the agent can do or see something it must not
#   I CLASS DETAIL   information the test compares with what root sees (set-id files)
#   C CLASS N        how many things of CLASS were looked at (so an empty sweep is caught)
# The test asserts on these lines; the script decides nothing about what is expected beyond
# what pistis documents for an agent (its own home, TMPDIR and agent directory, the sticky
# scratch directories, the write trees named in $SWEEP_WRITE_OK).
#
#   sh sweep-enum.sh PROBE_DIR
# PROBE_DIR holds the static redteam-probe and probe (kernel interfaces, fds).
PD=${1:-/usr/local/lib/pistis-tests}
me=$(id -u)
home=$HOME
f() { printf 'F %s %s\n' "$1" "$2"; }
c() { printf 'C %s %s\n' "$1" "$2"; }

# Where an agent may write by design: its own trees, the sticky scratch directories (their
# contents: others' entries there are protected by the sticky bit and protected_*), and the
# shared write trees of the path rules (SWEEP_WRITE_OK, space-separated prefixes).
own_ok() {
	case $1 in
	"$home" | "$home"/* | /data/agents/"$(id -un)" | /data/agents/"$(id -un)"/*) return 0 ;;
	/tmp | /tmp/* | /var/tmp | /var/tmp/* | /dev/shm | /dev/shm/* | /run/lock | /run/lock/*) return 0 ;;
	/var/lock | /var/lock/*) return 0 ;;
	/dev/null | /dev/zero | /dev/full | /dev/random | /dev/urandom | /dev/tty | /dev/ptmx | /dev/pts/ptmx) return 0 ;;
	/dev/stdin | /dev/stdout | /dev/stderr | /dev/fd) return 0 ;;
	esac
	for w in ${SWEEP_WRITE_OK:-}; do
		case $1 in "$w" | "$w"/*) return 0 ;; esac
	done
	return 1
}

# --- 1. writable files and directories anywhere (not /proc, /sys: below) ---------------------
n=0
find / \( -path /proc -o -path /sys -o -path /dev/pts \) -prune -o -print 2>/dev/null >"$TMPDIR/sweep.all"
while IFS= read -r p; do
	n=$((n + 1))
	[ -L "$p" ] && continue
	[ -w "$p" ] || continue
	own_ok "$p" && continue
	if [ "$p" = /dev/mqueue ]; then
		# 1777 wherever a runtime mounts it; agents make no queue (RLIMIT_MSGQUEUE 0)
		(: >/dev/mqueue/sweep.$$) 2>/dev/null && f writable "/dev/mqueue (made a queue)"
		rm -f /dev/mqueue/sweep.$$ 2>/dev/null
		continue
	fi
	f writable "$p"
done <"$TMPDIR/sweep.all"
c writable "$n"

# --- 2. set-id files (the test compares them with root's list of the image) -----------------
n=0
while IFS= read -r p; do
	[ -f "$p" ] && [ ! -L "$p" ] || continue
	if [ -u "$p" ] || [ -g "$p" ]; then
		n=$((n + 1))
		printf 'I setid %s %s\n' "$p" "$(stat -c '%u:%g:%a' "$p" 2>/dev/null)"
		[ -w "$p" ] && f setid-writable "$p"
	fi
done <"$TMPDIR/sweep.all"
c setid "$n"

# --- 3. what root, pi-tools and the agents execute or load: each path and every directory on
# the way must be root's and not writable by us (PATH of each, sudo's secure_path, the
# loader's configuration and preload, profile scripts, cron, sudoers, pistis's own files, the
# interpreters' module directories) ----------------------------------------------------------
n=0
chain() { # PATH: it and each parent up to /
	q=$1
	while :; do
		printf '%s\n' "$q"
		[ "$q" = / ] && break
		q=$(dirname "$q")
	done
}
{
	for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin /data/bin /data/trusted \
		/data/trusted/* /data/bin/* /etc/ld.so.preload /etc/ld.so.conf /etc/ld.so.conf.d \
		/etc/ld.so.conf.d/* /etc/ld.so.cache /etc/profile /etc/profile.d /etc/profile.d/* \
		/etc/environment /etc/bash.bashrc /etc/shells /etc/passwd /etc/group /etc/shadow \
		/etc/sudoers /etc/sudoers.d /etc/sudoers.d/* /etc/sudo.conf /etc/pam.d /etc/pam.d/* \
		/etc/security /etc/crontab /etc/cron.d /etc/cron.daily /etc/cron.hourly /etc/pistis \
		/etc/pistis/* /etc/nsswitch.conf /etc/hosts /etc/resolv.conf /etc/localtime \
		/lib /lib64 /usr/lib /usr/lib64 /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu \
		/usr/lib/python3 /usr/lib/python3/dist-packages /usr/local/lib /usr/local/lib/python3* \
		/usr/local/lib/python3*/* /usr/share/perl5 /usr/lib/x86_64-linux-gnu/perl5 \
		/usr/lib/x86_64-linux-gnu/perl-base /etc/perl /usr/local/share/perl /usr/local/lib/node_modules \
		/usr/lib/node_modules /root /data /data/pistis /data/.secrets /var/spool/cron \
		/usr/local/bin/pistisd /usr/local/bin/pi-env /usr/local/bin/pistisd-entry /usr/bin/sudo \
		/usr/libexec/sudo /usr/lib/sudo; do
		[ -e "$d" ] || [ -L "$d" ] || continue
		chain "$d"
	done
	# where the interpreters a trusted script may name load their modules from (perl's
	# @INC, python's sys.path, node's lookup from /data/trusted up), and pi-tools' HOME:
	# for pi-tools, not our own home
	{
		command -v perl >/dev/null 2>&1 && perl -e 'print "$_\n" for @INC'
		command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; print("\n".join(sys.path))'
		printf '%s\n' /data/trusted/node_modules /data/node_modules /node_modules /nonexistent
	} 2>/dev/null | while IFS= read -r d; do
		case $d in /*) ;; *) continue ;; esac
		case $d in "$home" | "$home"/*) continue ;; esac
		chain "$d"
	done
} | sort -u >"$TMPDIR/sweep.exec"
while IFS= read -r p; do
	n=$((n + 1))
	[ -L "$p" ] && continue
	[ -w "$p" ] && f exec-writable "$p"
	o=$(stat -c %u "$p" 2>/dev/null)
	case $o in 0 | '') ;; 10002) [ "$p" = /data/.secrets ] || f exec-owner "$p uid=$o" ;; *) f exec-owner "$p uid=$o" ;; esac
done <"$TMPDIR/sweep.exec"
c exec "$n"

# --- 4. secrets and other agents' trees --------------------------------------------------------
n=0
for p in /etc/shadow /etc/shadow- /etc/gshadow /etc/gshadow- /etc/sudoers /etc/pistis/token \
	/etc/pistis/serve.conf /data/pistis /data/pistis/users.registry /data/pistis/users.registry- \
	/data/pistis/mark.key /data/pistis/serve.conf /data/pistis/token /data/.secrets \
	/run/secrets/pistis/token /run/secrets/pistis/serve.conf /root /proc/1/environ /proc/1/root/ /proc/1/cwd/ /proc/1/fd/ \
	/proc/1/mem /proc/kcore /proc/kallsyms /dev/mem /dev/kmem /dev/port; do
	n=$((n + 1))
	[ -e "$p" ] || continue
	if [ -d "$p" ]; then
		ls "$p" >/dev/null 2>&1 && f secret-list "$p"
	else
		head -c 1 "$p" >/dev/null 2>&1 && [ -s "$p" -o "$p" = /proc/1/environ ] &&
			[ "$(head -c 1 "$p" 2>/dev/null | wc -c)" -gt 0 ] && f secret-read "$p"
	fi
done
# server-min's configuration where it runs beside the agents (a plain machine): its tokens
for p in $(find /etc /srv /opt /usr/local/etc /home /root /data /var/lib/pistis -xdev -type f \
	\( -name '*.json' -o -name '*.conf' \) 2>/dev/null); do
	n=$((n + 1))
	grep -qs '"client_token"' "$p" && f secret-read "relay config $p"
done
for d in /data/sandbox-home /data/agents; do
	n=$((n + 1))
	ls "$d" >/dev/null 2>&1 && f other-agent "list $d"
done
for h in ${SWEEP_OTHERS:-}; do
	n=$((n + 1))
	for p in "$h" "$h/tmp" "$h/.profile"; do
		[ -e "$p" ] || continue
		ls "$p" >/dev/null 2>&1 && f other-agent "list $p"
		[ -f "$p" ] && head -c 1 "$p" >/dev/null 2>&1 && f other-agent "read $p"
		[ -w "$p" ] && f other-agent "write $p"
	done
done
c secrets "$n"

# --- 5. other processes through /proc: everything but cmdline and stat ------------------------
n=0
for d in /proc/[0-9]*; do
	pid=${d#/proc/}
	u=$(sed -n 's/^Uid:[[:space:]]*\([0-9]*\).*/\1/p' "$d/status" 2>/dev/null)
	[ -n "$u" ] && [ "$u" != "$me" ] || continue
	# a kernel thread has no memory: nothing to read there
	[ -s "$d/cmdline" ] || [ "$(wc -c <"$d/cmdline" 2>/dev/null)" != 0 ] || continue
	n=$((n + 1))
	for x in environ auxv mem syscall stack; do
		head -c 1 "$d/$x" >/dev/null 2>&1 && [ "$(head -c 1 "$d/$x" 2>/dev/null | wc -c)" -gt 0 ] &&
			f proc "$x of $pid (uid $u)"
	done
	[ "$(cat "$d/maps" 2>/dev/null | wc -l)" -gt 0 ] && f proc "maps of $pid (uid $u)"
	ls "$d/fd" >/dev/null 2>&1 && f proc "fd of $pid (uid $u)"
	ls "$d/map_files" >/dev/null 2>&1 && f proc "map_files of $pid (uid $u)"
	for x in cwd root exe; do
		readlink "$d/$x" >/dev/null 2>&1 && f proc "$x of $pid (uid $u)"
	done
	# 0666 in /proc but checked by the kernel at the write: a write back of what is there
	for x in oom_score_adj coredump_filter timerslack_ns comm attr/current loginuid; do
		[ -w "$d/$x" ] || continue
		v=$(cat "$d/$x" 2>/dev/null) || continue
		(printf '%s' "$v" >"$d/$x") 2>/dev/null && f proc "wrote $x of $pid (uid $u)"
	done
done
c proc "$n"

# --- 6. /proc/sys, /sys and cgroupfs: what is writable (a write back of the same value, so a
# check that only looks at modes cannot pass a knob that takes the write) -------------------
n=0
for p in $(find /proc/sys /sys -type f 2>/dev/null); do
	n=$((n + 1))
	[ -w "$p" ] || continue
	case $p in /proc/sys/kernel/ns_last_pid) ;; *) f kernel-writable "$p"; continue ;; esac
	v=$(cat "$p" 2>/dev/null) && (printf '%s\n' "$v" >"$p") 2>/dev/null && f kernel-wrote "$p"
done
for p in /proc/sysrq-trigger /proc/sys/kernel/core_pattern /proc/sys/kernel/modprobe \
	/sys/kernel/uevent_helper /proc/sys/fs/binfmt_misc/register /sys/fs/cgroup/release_agent; do
	n=$((n + 1))
	[ -w "$p" ] && f kernel-writable "$p"
done
for p in $(find /sys/fs/cgroup -maxdepth 8 2>/dev/null); do
	n=$((n + 1))
	[ -w "$p" ] && f cgroup "$p"
done
c kernel "$n"

# --- 7. sockets: every bound path socket we may connect to (write permission), the runtime's
n=0
for s in $(awk 'NR > 1 && $8 ~ /^\// {print $8}' /proc/net/unix 2>/dev/null | sort -u) \
	/var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock /run/crio/crio.sock \
	/var/run/crio/crio.sock /run/podman/podman.sock /run/user/*/docker.sock /run/*.sock \
	/run/*/*.sock /var/run/*.sock /var/run/*/*.sock /tmp/*.sock /data/*.sock /data/pistis/*.sock; do
	n=$((n + 1))
	[ -S "$s" ] || continue
	own_ok "$s" && continue
	[ -w "$s" ] && f socket "$s"
done
c socket "$n"

# --- 8. our own process: fds, capabilities, no_new_privs, a terminal --------------------------
out=$("$PD/probe" 2>&1)
fds=$(printf '%s\n' "$out" | sed -n 's/^fds=//p')
[ "$fds" = "0,1,2" ] || f self "fds $fds"
for k in CapInh CapPrm CapEff CapAmb; do
	v=$(sed -n "s/^$k:[[:space:]]*//p" /proc/self/status)
	[ "$v" = 0000000000000000 ] || f self "$k $v"
done
[ "$(sed -n 's/^Seccomp:[[:space:]]*//p' /proc/self/status)" = 2 ] || f self "no seccomp filter"
for t in /dev/console /dev/tty0 /dev/tty1 /dev/tty7 /dev/vcs /dev/vcsa /dev/pts/0 /dev/pts/1 \
	/dev/ttyS0 /dev/kmsg /dev/kvm /dev/fuse /dev/userfaultfd /dev/net/tun /dev/mapper/control; do
	[ -e "$t" ] || continue
	(: <>"$t") 2>/dev/null && f device "$t"
done
(: <>/dev/tty) 2>/dev/null && f self "opens /dev/tty (a controlling terminal)"
c self 1

# --- 9. sudo: the rules we hold and what they let us name --------------------------------------
if command -v sudo >/dev/null 2>&1; then
	l=$(sudo -n -l 2>/dev/null)
	printf '%s\n' "$l" | grep -E '^ +\(' | while IFS= read -r r; do
		case $r in
		*'(pi-tools) CWD=/ NOSETENV: NOPASSWD: sha256:'*' /data/trusted/'*) ;;
		*) f sudo "rule: $r" ;;
		esac
		case $r in *'*'* | *ALL* | *[!O]SETENV:*) f sudo "broad rule: $r" ;; esac
	done
	for a in "-u root true" "-u pi-tools true" "-u pi-tools /bin/sh -c id" "-E /bin/true" \
		"-i true" "-s true" "-g root true" "-u #-1 true" "-u #4294967295 true" "-e /etc/shadow" \
		"-R / true" "-D / true"; do
		# shellcheck disable=SC2086
		sudo -n $a </dev/null >/dev/null 2>&1 && f sudo "sudo -n $a"
	done
	c sudo 1
fi
