#!/bin/bash
# pistisd check: both verdicts, the opt-outs, both output formats, the setuid inventory and
# sudo presence in throwaway roots. The hard sysctls are faked by bind-mounting files over
# /proc/sys/fs/protected_* inside this test's private mount namespace, so both verdicts
# are exercised whatever the host is set to.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
S=$(scratch)

# field JSONFILE CHECK KEY   one field of one check in a --json report
field() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print([c for c in d["checks"] if c["name"] == sys.argv[2]][0][sys.argv[3]])' "$@"
}
# top JSONFILE KEY
top() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
# suid_paths JSONFILE   one path per line
suid_paths() {
	python3 -c 'import json, sys
for f in json.load(open(sys.argv[1]))["setuid_files"]: print(f["path"], f["mode"], f["uid"], f["gid"])' "$1"
}

# --- usage -------------------------------------------------------------------------
out=$("$P" check --help)
is "--help exits 0" "$?" 0
# the list is wrapped at 80 columns: read it as one line
like "--help names the hard requirements" "$(printf '%s\n' "$out" | tr '\n' ' ')" \
	'Hard requirements: capabilities, seccomp, openat2, close_range, protected_hardlinks, protected_symlinks'
like "--help says kernel checks ignore --root" "$out" 'kernel checks always'
exits 100 "unknown option is a usage error" "$P" check --bogus
exits 100 "unexpected argument is a usage error" "$P" check extra
exits 100 "--allow with an unknown name is a usage error" "$P" check --no-walk --allow nope
# The unknown name quoted, escaped once; a long one cut with a mark, never silently.
long=$(printf "x'%.0s" $(seq 100))
like "... naming it escaped once, cut with a mark" "$("$P" check --no-walk --allow "$long" 2>&1)" \
	"unknown check '(x\\\\'){21}x'\\[cut: 200 bytes\\] in --allow"
like "... serve's --allow the same" "$("$P" serve --allow "$long" 2>&1)" \
	"--allow: unknown check '(x\\\\'){21}x'\\[cut: 200 bytes\\] \\(see"
like "... and serve's PISTIS_ALLOW" "$(PISTIS_ALLOW="$long" "$P" serve --relay ws://127.0.0.1:1 --token-file /nonexistent 2>&1)" \
	"PISTIS_ALLOW: unknown check '(x\\\\'){21}x'\\[cut: 200 bytes\\]"
exits 100 "PISTIS_ALLOW with an unknown name is a usage error" \
	env PISTIS_ALLOW=seccomp,nope "$P" check --no-walk
exits 111 "--root that does not exist is a system error" "$P" check --root "$S/none"

# --- the real host, as it is -------------------------------------------------------
"$P" check --json --no-walk >"$S/host.json" 2>"$S/host.err"
rc=$?
ok "--json output is one valid JSON document" python3 -m json.tool "$S/host.json"
is "--json lists all 43 checks" \
	"$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["checks"]))' "$S/host.json")" 43
ok "every check has name, status, hard, allowed, value, promise, advice" python3 -c '
import json, sys
for c in json.load(open(sys.argv[1]))["checks"]:
    assert set(c) == {"name","status","hard","allowed","value","promise","advice"}, c
    assert c["status"] in ("ok","warn","missing","fail"), c
    assert c["promise"] and c["advice"], c' "$S/host.json"
want=$(cat /proc/sys/fs/protected_symlinks)
like "protected_symlinks reports the host's value" \
	"$(field "$S/host.json" protected_symlinks value)" "^$want "
if [ "$(top "$S/host.json" ok)" = True ]; then
	is "host verdict ok: exit 0" "$rc" 0
else
	is "host verdict fail: exit 1" "$rc" 1
	like "host verdict fail: stderr names the failing requirement" "$(cat "$S/host.err")" \
		"hard requirement '$(top "$S/host.json" failed)' does not hold"
fi
is "kernel probes agree with this machine: seccomp" "$(field "$S/host.json" seccomp status)" ok
is "openat2 works here" "$(field "$S/host.json" openat2 status)" ok
like "cgroup2 found through mountinfo" "$(field "$S/host.json" cgroup2 value)" \
	"at $(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo);"

# --- both verdicts, with the hard sysctls faked ------------------------------------
for n in protected_hardlinks protected_symlinks protected_regular protected_fifos suid_dumpable; do
	echo 1 >"$S/$n"
	mount --bind "$S/$n" "/proc/sys/fs/$n"
done
echo 0 >"$S/suid_dumpable"
is "faked sysctl is what /proc/sys shows in this namespace" \
	"$(cat /proc/sys/fs/protected_hardlinks)" 1

exits 0 "all hard requirements hold: exit 0" "$P" check --no-walk
out=$("$P" check --no-walk 2>&1)
like "text output: aligned header" "$out" '^CHECK +STATUS +HARD +VALUE$'
like "text output: verdict ok" "$out" '^verdict: ok'
like "text output: hard marker on protected_hardlinks" "$out" \
	'^protected_hardlinks +ok +yes +1 \(want >= 1\)$'

echo 0 >"$S/protected_hardlinks"
"$P" check --no-walk >"$S/out" 2>"$S/err"
is "protected_hardlinks=0: exit 1" "$?" 1
like "protected_hardlinks=0: stderr names it" "$(cat "$S/err")" \
	"hard requirement 'protected_hardlinks' does not hold: 0 \(want >= 1\)"
like "protected_hardlinks=0: stderr says what to do" "$(cat "$S/err")" \
	'sysctl fs.protected_hardlinks=1'
like "protected_hardlinks=0: table shows fail" "$(cat "$S/out")" '^protected_hardlinks +fail +yes'
like "protected_hardlinks=0: verdict line" "$(cat "$S/out")" \
	"^verdict: FAIL: hard requirement 'protected_hardlinks'"
"$P" check --json --no-walk >"$S/f.json" 2>/dev/null
is "protected_hardlinks=0: json failed names it" "$(top "$S/f.json" failed)" protected_hardlinks
is "protected_hardlinks=0: json ok false" "$(top "$S/f.json" ok)" False
ok "protected_hardlinks=0: json still valid" python3 -m json.tool "$S/f.json"

echo 0 >"$S/protected_symlinks"
out=$("$P" check --no-walk 2>&1 >/dev/null)
like "both off: the first one is named" "$out" "'protected_hardlinks'"
out=$("$P" check --no-walk --allow protected_hardlinks 2>&1 >/dev/null)
is "--allow one: exit 1 still" "$?" 1
like "--allow one: the next one is named" "$out" "'protected_symlinks'"
exits 0 "--allow both (comma list): exit 0" \
	"$P" check --no-walk --allow protected_hardlinks,protected_symlinks
exits 0 "--allow twice: exit 0" \
	"$P" check --no-walk --allow protected_hardlinks --allow protected_symlinks
exits 0 "PISTIS_ALLOW opt-out: exit 0" \
	env PISTIS_ALLOW=protected_symlinks,protected_hardlinks "$P" check --no-walk
exits 1 "PISTIS_ALLOW covering only one: exit 1" \
	env PISTIS_ALLOW=protected_symlinks "$P" check --no-walk
"$P" check --json --no-walk --allow protected_hardlinks,protected_symlinks >"$S/a.json"
is "allowed: json ok true" "$(top "$S/a.json" ok)" True
is "allowed: json marks it allowed" "$(field "$S/a.json" protected_hardlinks allowed)" True
is "allowed: status still fail" "$(field "$S/a.json" protected_hardlinks status)" fail
out=$("$P" check --no-walk --allow protected_hardlinks,protected_symlinks)
like "allowed: table shows 'off' in HARD" "$out" '^protected_hardlinks +fail +off'

echo garbage >"$S/protected_hardlinks"
echo 1 >"$S/protected_symlinks"
out=$("$P" check --no-walk 2>&1 >/dev/null)
like "unparsable sysctl fails the hard requirement" "$out" \
	"'protected_hardlinks' does not hold: /proc/sys/fs/protected_hardlinks unreadable \(EINVAL\)"
echo 1 >"$S/protected_hardlinks"

# --- fs.protected_regular and protected_fifos: hard at 1 (/tmp), 2 wanted ---------------
# At 0 an agent's file or FIFO planted in /tmp under a name another agent's tool opens
# O_CREAT is written into (redteam-cross.sh); 1 covers world-writable sticky directories.
for n in protected_regular protected_fifos; do
	echo 0 >"$S/$n"
	"$P" check --no-walk --json >"$S/pr.json" 2>"$S/err"
	is "$n=0: exit 1" "$?" 1
	is "$n=0: status fail" "$(field "$S/pr.json" $n status)" fail
	like "$n=0: stderr names it and what to do" "$(cat "$S/err")" \
		"'$n' does not hold: 0 \(need >= 1, want >= 2\); sysctl fs.$n=2 on the host \(1 covers /tmp\), or --allow $n"
	exits 0 "$n=0 with --allow $n: exit 0" "$P" check --no-walk --allow "$n"
	echo 1 >"$S/$n"
	"$P" check --no-walk --json >"$S/pr.json" 2>/dev/null
	is "$n=1: exit 0, status warn (2 also covers group-writable sticky directories)" \
		"$?,$(field "$S/pr.json" $n status)" 0,warn
	echo 2 >"$S/$n"
	"$P" check --no-walk --json >"$S/pr.json" 2>/dev/null
	is "$n=2: ok" "$(field "$S/pr.json" $n status)" ok
done

# --- fs.suid_dumpable: hard, 2 tolerated ---------------------------------------------
echo 1 >"$S/suid_dumpable"
"$P" check --no-walk --json >"$S/sd.json" 2>"$S/err"
is "suid_dumpable=1: exit 1" "$?" 1
is "suid_dumpable=1: status fail" "$(field "$S/sd.json" suid_dumpable status)" fail
like "suid_dumpable=1: stderr names it and what to do" "$(cat "$S/err")" \
	"'suid_dumpable' does not hold: 1 \(want 0\); sysctl fs.suid_dumpable=0"
like "suid_dumpable: the promise it backs is in the report" \
	"$(field "$S/sd.json" suid_dumpable promise)" 'not dumpable'
exits 0 "suid_dumpable=1 with --allow suid_dumpable: exit 0" \
	"$P" check --no-walk --allow suid_dumpable
echo 2 >"$S/suid_dumpable"
"$P" check --no-walk --json >"$S/sd.json" 2>/dev/null
is "suid_dumpable=2: exit 0 (root-only dumps hold, with a warning)" "$?" 0
is "suid_dumpable=2: status warn" "$(field "$S/sd.json" suid_dumpable status)" warn
echo 0 >"$S/suid_dumpable"
"$P" check --no-walk --json >"$S/sd.json" 2>/dev/null
is "suid_dumpable=0: ok" "$(field "$S/sd.json" suid_dumpable status)" ok

# --- kernel.core_pattern: a pipe runs its handler as root for agents' crashes -------------
printf '|/usr/share/apport/apport -p%%p -s%%s -c%%c\n' >"$S/core_pattern"
mount --bind "$S/core_pattern" /proc/sys/kernel/core_pattern
"$P" check --no-walk --json >"$S/cp.json" 2>/dev/null
is "core_pattern pipe: exit 0 (not a hard requirement)" "$?" 0
is "core_pattern pipe: warn" "$(field "$S/cp.json" core_pattern status)" warn
is "... naming the handler" "$(field "$S/cp.json" core_pattern value)" \
	"a pipe to /usr/share/apport/apport: every agent's crash runs it as root on the host"
# A handler's name with a control byte: escaped, once, in the table as in JSON.
printf '|/tmp/x\033q -p%%p\n' >"$S/core_pattern"
like "... its name escaped once in the table" "$("$P" check --no-walk 2>/dev/null)" \
	'^core_pattern +warn +- +a pipe to /tmp/x\\x1bq: every agent'"'"'s crash'
"$P" check --no-walk --json >"$S/cp.json" 2>/dev/null
is "... and in JSON" "$(field "$S/cp.json" core_pattern value)" \
	"a pipe to /tmp/x\\x1bq: every agent's crash runs it as root on the host"
printf 'core\n' >"$S/core_pattern"
"$P" check --no-walk --json >"$S/cp.json" 2>/dev/null
is "core_pattern file: ok" "$(field "$S/cp.json" core_pattern status)" ok
umount /proc/sys/kernel/core_pattern

# --- throwaway roots: sudo and the setuid inventory -------------------------------
D=$(root_fresh debian) || { echo "Bail out! no debian root"; exit 1; }
M=$(root_fresh musl) || { echo "Bail out! no musl root"; exit 1; }

"$P" check --json --root "$D" >"$S/d.json" 2>/dev/null
is "--root debian: report names the root" "$(top "$S/d.json" root)" "$D"
is "debian root: sudo ok" "$(field "$S/d.json" sudo status)" ok
like "debian root: sudo path, setuid and version" "$(field "$S/d.json" sudo value)" \
	'^/usr/bin/sudo, setuid root, Sudo version 1\.9'
like "debian root: visudo found (resolved inside the root)" \
	"$(field "$S/d.json" visudo value)" '^/usr/sbin/visudo, visudo version 1\.9'
like "debian root: the stock setuid programs are listed" "$(suid_paths "$S/d.json")" \
	'^/usr/bin/sudo 04755 0 0$'
unlike "debian root: /usr/local/bin (another filesystem) not walked" \
	"$(suid_paths "$S/d.json")" '/usr/local/'

"$P" check --json --root "$M" >"$S/m.json" 2>/dev/null
is "musl root: sudo missing" "$(field "$S/m.json" sudo status)" missing
like "musl root: says where it looked" "$(field "$S/m.json" sudo value)" \
	"^not found in /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin of $M"
is "musl root: visudo missing" "$(field "$S/m.json" visudo status)" missing
is "musl root: no setuid files, status ok" "$(field "$S/m.json" setuid_files status)" ok
is "musl root: count 0" "$(top "$S/m.json" setuid_count)" 0
out=$(in_root "$M" pistisd check --no-walk 2>&1)
like "musl root, run inside: sudo missing reported in the table" "$out" '^sudo +missing +- +not found'
like "musl root, run inside: says what to do" "$out" 'install sudo in the image'

# --- oom_floor: commands at pistisd's oom_score_adj + 500; a floor only with CAP_SYS_RESOURCE ---
own=$(cat /proc/self/oom_score_adj)
want=$((own + 500 > 1000 ? 1000 : own + 500))
if (($((16#$(awk '/^CapEff/ {print $2}' /proc/self/status))) >> 24 & 1)); then
	is "oom_floor: CAP_SYS_RESOURCE held: ok" "$(field "$S/d.json" oom_floor status)" ok
	like "... naming the commands' score" "$(field "$S/d.json" oom_floor value)" "at oom_score_adj $want, their floor"
else
	is "oom_floor: no CAP_SYS_RESOURCE (this machine's root lacks it): warn" "$(field "$S/d.json" oom_floor status)" warn
	like "... saying what an agent may do" "$(field "$S/d.json" oom_floor value)" \
		"at oom_score_adj $want, but no CAP_SYS_RESOURCE: an agent may lower"
fi
is "... a soft check" "$(field "$S/d.json" oom_floor hard)" False

# --- orchestrator_secrets: what an orchestrator mounts under /run/secrets, as an agent sees it ---
is "orchestrator_secrets: none mounted: ok" "$(field "$S/d.json" orchestrator_secrets status)" ok
is "... a soft check" "$(field "$S/d.json" orchestrator_secrets hard)" False
# Docker's secrets (0444) and Kubernetes' service-account token (0644, links into a
# timestamped directory, /var/run a link to /run as on Debian), and one made 0400.
mkdir -p "$D/run/secrets/kubernetes.io/serviceaccount/..2026_12_02_10_00_00.1"
K=$D/run/secrets/kubernetes.io/serviceaccount
echo tok >"$K/..2026_12_02_10_00_00.1/token" && chmod 0644 "$K/..2026_12_02_10_00_00.1/token"
ln -s ..2026_12_02_10_00_00.1 "$K/..data" && ln -s ..data/token "$K/token"
echo pw >"$D/run/secrets/db_password" && chmod 0444 "$D/run/secrets/db_password"
echo key >"$D/run/secrets/tls_key" && chmod 0400 "$D/run/secrets/tls_key"
"$P" check --root "$D" --json --no-walk >"$S/sec.json" 2>/dev/null
is "orchestrator_secrets: files agents can read: warn" "$(field "$S/sec.json" orchestrator_secrets status)" warn
v=$(field "$S/sec.json" orchestrator_secrets value)
like "... naming them (Docker's secret, the service-account token)" "$v" \
	'agents can read 3 of 5 file\(s\): .*run/secrets/(db_password|kubernetes.io)'
unlike "... but not the 0400 one" "$v" 'tls_key'
chmod 0700 "$D/run/secrets"
"$P" check --root "$D" --json --no-walk >"$S/sec.json" 2>/dev/null
is "orchestrator_secrets: /run/secrets closed to agents (a none rule's mode): ok" \
	"$(field "$S/sec.json" orchestrator_secrets status)" ok
rm -rf "$D/run/secrets"

# --- dev_nodes: device nodes in the agents' /dev that every user may open ----------------
# The filter allows ioctl on any fd: a world-openable /dev/kvm, render node or disk gives
# agents that driver (red team). The test root's /dev holds only the common nodes.
is "dev_nodes: the common nodes only: ok" "$(field "$S/d.json" dev_nodes status)" ok
is "... a soft check" "$(field "$S/d.json" dev_nodes hard)" False
mkdir -p "$D/dev/dri"
mknod -m 0666 "$D/dev/kvm" c 10 232 && mknod -m 0666 "$D/dev/dri/renderD128" c 226 128 &&
	mknod -m 0644 "$D/dev/sdz" b 8 240 && mknod -m 0660 "$D/dev/vhost-net" c 10 238
"$P" check --root "$D" --json --no-walk >"$S/dev.json" 2>/dev/null
is "dev_nodes: kvm, a render node and a disk open to every user: warn" \
	"$(field "$S/dev.json" dev_nodes status)" warn
v=$(field "$S/dev.json" dev_nodes value)
like "... naming them" "$v" "^3 device node\(s\) every user may open: .*'/dev/kvm' \(c 10:232 0666\)"
like "... the render node in its directory" "$v" "'/dev/dri/renderD128' \(c 226:128 0666\)"
like "... the disk readable by all" "$v" "'/dev/sdz' \(b 8:240 0644\)"
unlike "... not a node for its group alone" "$v" 'vhost-net'
rm -rf "$D/dev/kvm" "$D/dev/dri" "$D/dev/sdz" "$D/dev/vhost-net"

# --- account_files: /etc and its passwd family root's, writable by root only ---------------
is "debian root: account files ok" "$(field "$S/d.json" account_files status)" ok
like "... naming what it looked at" "$(field "$S/d.json" account_files value)" \
	'/etc passwd group shadow gshadow$'
is "... a hard check" "$(field "$S/d.json" account_files hard)" True
is "musl root (no shadow, no gshadow): account files ok" "$(field "$S/m.json" account_files status)" ok
acct() { # ROOT: status and value of account_files, and the exit code
	"$P" check --json --no-walk --root "$1" >"$S/a.json" 2>"$S/a.err"
	echo "$? $(field "$S/a.json" account_files status) $(field "$S/a.json" account_files value)"
}
A="$S/acct" && mkdir -p "$A/etc" && cp -a "$M/etc/passwd" "$M/etc/group" "$A/etc/"
echo 'root:*:1::::::' >"$A/etc/shadow" && chmod 0640 "$A/etc/shadow"
chmod 0755 "$A/etc" && chown 0:0 "$A/etc" "$A/etc/passwd" "$A/etc/group" "$A/etc/shadow"
allow_rest=$(python3 -c 'import json,sys
print(",".join(c["name"] for c in json.load(open(sys.argv[1]))["checks"] if c["hard"] and c["status"] != "ok" and c["name"] != "account_files"))' "$S/m.json")
export PISTIS_ALLOW=$allow_rest # only account_files decides the exit code below
like "a root's copy: ok, exit 0" "$(acct "$A")" '^0 ok '
chmod 0666 "$A/etc/passwd"
like "passwd world-writable: fail, exit 1, naming file, owner and mode" "$(acct "$A")" \
	'^1 fail /etc/passwd is 0:0 0666$'
like "... stderr names the check" "$(cat "$S/a.err")" "hard requirement 'account_files'"
exits 0 "... --allow account_files accepts it" "$P" check --no-walk --root "$A" --allow account_files
chmod 0664 "$A/etc/passwd"
like "passwd group-writable by root's group (g=u images): ok" "$(acct "$A")" '^0 ok '
setfacl -m u:10100:rw "$A/etc/passwd"
like "passwd 0664 whose ACL lets an agent uid write: fail" "$(acct "$A")" '^1 fail /etc/passwd is 0:0 0664$'
setfacl -b "$A/etc/passwd"
chgrp 10010 "$A/etc/passwd"
like "passwd group-writable by pi-sandbox: fail" "$(acct "$A")" '^1 fail /etc/passwd is 0:10010 0664$'
chgrp 0 "$A/etc/passwd" && chmod 0644 "$A/etc/passwd"
chown 10100 "$A/etc/group"
like "group owned by an agent uid: fail" "$(acct "$A")" '^1 fail /etc/group is 10100:0 0644$'
chown 0 "$A/etc/group"
chmod 0646 "$A/etc/shadow"
like "shadow other-writable: fail" "$(acct "$A")" '^1 fail /etc/shadow is '
chmod 0640 "$A/etc/shadow"
echo 'x:*::' >"$A/gs" && chmod 0666 "$A/gs" && ln -s ../gs "$A/etc/gshadow"
like "gshadow a symlink (to a world-writable file): fail, not followed" "$(acct "$A")" \
	'^1 fail /etc/gshadow is not a regular file \(a symlink\)$'
rm "$A/etc/gshadow"
mv "$A/etc/group" "$A/group.away"
like "group missing: fail" "$(acct "$A")" '^1 fail /etc/group: No such file'
mv "$A/group.away" "$A/etc/group"
chmod 1777 "$A/etc"
like "/etc itself world-writable: fail" "$(acct "$A")" '^1 fail /etc is 0:0 1777$'
chmod 0755 "$A/etc" && mv "$A/etc" "$A/etc.real" && ln -s etc.real "$A/etc"
like "/etc a symlink: fail" "$(acct "$A")" '^1 fail /etc: '
rm "$A/etc" && mv "$A/etc.real" "$A/etc"
like "and back to a root's copy: ok" "$(acct "$A")" '^0 ok '

# --- data_bin: /data/bin, first on every agent's PATH, holds only root's alone ---------------
# An agent's program left there in an earlier life of the volume runs as every agent that
# types its name (red team: a hostile volume). Names and owners only.
dbin() { # ROOT: exit code, status and value of data_bin
	"$P" check --json --no-walk --root "$1" >"$S/b.json" 2>"$S/b.err"
	echo "$? $(field "$S/b.json" data_bin status) $(field "$S/b.json" data_bin value)"
}
is "debian root: data_bin a hard check" "$(field "$S/d.json" data_bin hard)" True
like "no /data/bin: ok" "$(dbin "$A")" '^0 ok no /data/bin$'
mkdir -p "$A/data/bin/sub" && chmod 0755 "$A/data" "$A/data/bin"
printf '#!/bin/sh\n' >"$A/data/bin/tool" && chmod 0755 "$A/data/bin/tool"
ln -s /usr/bin/env "$A/data/bin/env"
chown 10100 "$A/data/bin/sub" # a subdirectory is not on PATH
like "root's files and a root's link: ok, counted" "$(dbin "$A")" "^0 ok 3 entries, each root's alone$"
cp "$A/data/bin/tool" "$A/data/bin/ls" && chown 10100:10100 "$A/data/bin/ls"
like "an agent's program: fail, exit 1, naming it, its owner and mode" "$(dbin "$A")" \
	"^1 fail 1 file\(s\) in /data/bin, on every agent's PATH, not root's alone: 'ls' \(owner 10100, mode 0755\)$"
like "... stderr names the check" "$(cat "$S/b.err")" "hard requirement 'data_bin'"
exits 0 "... --allow data_bin accepts it" "$P" check --no-walk --root "$A" --allow "$allow_rest,data_bin"
rm "$A/data/bin/ls"
# A name an agent chose: quoted and escaped once (its quote too, so it cannot end the '...'),
# in the value, in the table and in the log line; never a raw byte.
hostile=$(printf "x' is fine; 'etc\n\033[31m")
cp "$A/data/bin/tool" "$A/data/bin/$hostile" && chown 11600:11600 "$A/data/bin/$hostile"
like "a hostile name: the value quotes it escaped once" "$(dbin "$A")" \
	"not root's alone: 'x\\\\' is fine; \\\\'etc\\\\n\\\\x1b\\[31m' \(owner 11600, mode 0755\)$"
like "... so does the log line" "$(cat "$S/b.err")" \
	"alone: 'x\\\\' is fine; \\\\'etc\\\\n\\\\x1b\\[31m' \(owner 11600"
out=$("$P" check --no-walk --root "$A" 2>&1)
like "... and the table" "$out" "^data_bin .*: 'x\\\\' is fine; \\\\'etc\\\\n\\\\x1b\\[31m' \(owner 11600"
unlike "... no raw ESC anywhere" "$out" "$(printf '\033')"
rm "$A/data/bin/$hostile"
chmod 0775 "$A/data/bin/tool"
like "a root's program others may write (group bit): fail" "$(dbin "$A")" "^1 fail .*'tool' \(owner 0, mode 0775\)"
chmod 0755 "$A/data/bin/tool"
ln -s /usr/bin/id "$A/data/bin/id" && chown -h 10100 "$A/data/bin/id"
like "an agent's symlink: fail" "$(dbin "$A")" "^1 fail .*: 'id' \(owner 10100, mode 0777\)"
rm "$A/data/bin/id"
chmod 0777 "$A/data/bin"
like "/data/bin itself others may write: fail" "$(dbin "$A")" "^1 fail /data/bin is 0:0 0777, not root's alone$"
chmod 0755 "$A/data/bin" && mv "$A/data/bin" "$A/data/bin.real" && ln -s bin.real "$A/data/bin"
like "/data/bin a symlink: fail, not followed" "$(dbin "$A")" '^1 fail /data/bin: .*\(or a symlink\)$'
rm "$A/data/bin" && mv "$A/data/bin.real" "$A/data/bin"
like "and back: ok" "$(dbin "$A")" '^0 ok '
# Past its bound (65,536 entries) the check cannot tell: it fails, whatever order the
# directory lists them in (red team: an agent's file first, 65,540 root's after, passed).
(cd "$A/data/bin" && seq -f 'f%.0f' 1 65537 | xargs touch)
like "more than 65,536 entries: fail, cannot tell" "$(dbin "$A")" "^1 fail more than 65536 entries in /data/bin: not all looked at"
rm -rf "$A/data/bin" && mkdir -m 0755 "$A/data/bin"

# --- data_state: pistis' own state in /data, as a Kubernetes fsGroup walk leaves it ------
# The kubelet gives every node of the volume group G, files g+rw, directories g+rwxs, at
# every pod start (docs/entry.md, "Volume ownership: fsGroup"). Before, nothing named it:
# data_bin blamed agents, and only users' refusals said /data/pistis was 2770.
dstate() { # ROOT: exit code, status and value of data_state
	"$P" check --json --no-walk --root "$1" >"$S/s.json" 2>"$S/s.err"
	echo "$? $(field "$S/s.json" data_state status) $(field "$S/s.json" data_state value)"
}
fsgroup_walk() { # DIR G, as the kubelet does it
	find "$1" -exec chgrp -h "$2" {} + && find "$1" -type f -exec chmod g+rw {} + &&
		find "$1" -type d -exec chmod g+rwxs {} +
}
is "debian root: data_state a hard check" "$(field "$S/d.json" data_state hard)" True
export PISTIS_ALLOW=$allow_rest,data_bin # the walk trips data_bin too: data_state decides
mkdir -p -m 0700 "$A/data/pistis" "$A/data/.secrets" && head -c 32 /dev/urandom >"$A/data/pistis/mark.key" &&
	chmod 0600 "$A/data/pistis/mark.key" && echo s >"$A/data/.secrets/tok" &&
	chmod 0600 "$A/data/.secrets/tok" && chown -R 10002:10002 "$A/data/.secrets" &&
	mkdir -p -m 0711 "$A/data/sandbox-home" && mkdir -p -m 0700 "$A/data/sandbox-home/pi-agent-x/tmp" &&
	chown -R 10100:10100 "$A/data/sandbox-home/pi-agent-x" &&
	echo r >"$A/data/.secrets/root-kept" && chown 0:10002 "$A/data/.secrets/root-kept" &&
	chmod 0640 "$A/data/.secrets/root-kept" # how root lets pi-tools read a secret
like "pistis' state its owners' (a root's secret pi-tools may read included): ok" "$(dstate "$A")" "^0 ok each node its owner's"
cp -a "$A/data" "$S/data.clean"
fsgroup_walk "$A/data" 10010
like "walked with pi-sandbox's gid: fail, exit 1, naming nodes, owners and modes" "$(dstate "$A")" \
	"^1 fail 9 nodes in a group not its owner's, 7 of them root's or pi-tools' in a group agents hold: /data/pistis 0:10010 2770, /data/pistis/mark.key 0:10010 0660, /data/bin 0:10010 2775, \\.\\.\\.$"
like "... stderr names the check (before data_bin's, which blames agents)" "$(env PISTIS_ALLOW="$allow_rest" "$P" check --no-walk --root "$A" 2>&1 >/dev/null)" \
	"hard requirement 'data_state'"
like "... and the table says what to do" "$("$P" check --no-walk --root "$A" 2>&1)" "fsGroup"
exits 0 "... --allow data_state accepts it" "$P" check --no-walk --root "$A" --allow data_state
rm -rf "$A/data" && cp -a "$S/data.clean" "$A/data" && fsgroup_walk "$A/data" 2000
like "walked with a group no agent holds: warn, exit 0" "$(dstate "$A")" \
	"^0 warn 9 nodes in a group not its owner's, 0 of them root's or pi-tools' in a group agents hold: "
rm -rf "$A/data" && cp -a "$S/data.clean" "$A/data"
# A write rule on /data makes /data itself root:pi-sandbox 3770: the rules' choice, not a
# walk's (it failed serve's start-up check, so that configuration could not run).
chgrp 10010 "$A/data" && chmod 3770 "$A/data"
like "/data itself root:pi-sandbox 3770 (a write rule on it): ok" "$(dstate "$A")" "^0 ok "
chgrp 0 "$A/data" && chmod 0755 "$A/data"
chgrp 10010 "$A/data/sandbox-home/pi-agent-x" && chmod 0770 "$A/data/sandbox-home/pi-agent-x"
like "an agent sharing its own home with pi-sandbox: warn, not fail (serve must start)" \
	"$(dstate "$A")" "^0 warn 1 node in a group not its owner's, 0 of them"
rm -rf "$A/data/pistis" "$A/data/.secrets" "$A/data/sandbox-home" "$S/data.clean"

# Plant setuid/setgid files in the musl root, plus things that must not be listed.
mkdir -p "$M/opt/deep/er"
cp "$M/bin/busybox" "$M/opt/planted" && chmod 4755 "$M/opt/planted"
cp "$M/bin/busybox" "$M/opt/deep/er/sgid" && chown 0:12 "$M/opt/deep/er/sgid" &&
	chmod 2711 "$M/opt/deep/er/sgid"
nl_name="$M/opt/evil
name"
cp "$M/bin/busybox" "$nl_name" && chmod 4700 "$nl_name"
ln -s /opt/planted "$M/opt/link-to-planted"
# A file with capabilities lifts an agent like a setuid bit (cap_setuid+ep): listed too.
if command -v setcap >/dev/null; then
	cp "$M/bin/busybox" "$M/opt/capped" && setcap cap_setuid+ep "$M/opt/capped"
else
	untested "a file with capabilities is listed" "no setcap (libcap2-bin: scripts/bootstrap.sh check)"
fi
mkdir -m 2775 "$M/opt/sgid-dir"              # a setgid directory is not a program
mkdir -p "$M/mnt/other" && mount -t tmpfs other "$M/mnt/other"
cp "$M/bin/busybox" "$M/mnt/other/elsewhere" && chmod 4755 "$M/mnt/other/elsewhere"

"$P" check --json --root "$M" >"$S/p.json" 2>/dev/null
paths=$(suid_paths "$S/p.json")
like "planted setuid file listed with mode and owner" "$paths" '^/opt/planted 04755 0 0$'
like "nested setgid file listed with its group" "$paths" '^/opt/deep/er/sgid 02711 0 12$'
is "status warn when any are found" "$(field "$S/p.json" setuid_files status)" warn
if [ -e "$M/opt/capped" ]; then
	is "count: exactly the five planted files" "$(top "$S/p.json" setuid_count)" 5
	ok "the file with capabilities is listed, marked caps" python3 -c '
import json, sys
f = [f for f in json.load(open(sys.argv[1]))["setuid_files"] if f["path"] == "/opt/capped"]
assert f and f[0]["caps"] is True and f[0]["mode"] == "00755", f' "$S/p.json"
	like "... in the text output too" "$("$P" check --root "$M" 2>/dev/null)" '/opt/capped caps$'
else
	is "count: exactly the four planted files" "$(top "$S/p.json" setuid_count)" 4
fi
unlike "symlink to a setuid file not listed" "$paths" 'link-to-planted'
unlike "setgid directory not listed" "$paths" 'sgid-dir'
# Another file system that honours setuid is walked too: its setuid file runs for agents
# as one on the root's does (it was passed over: "one filesystem").
like "a setuid file on another mount without nosuid listed too" "$paths" '^/mnt/other/elsewhere 04755 0 0$'
ok "newline in a name is escaped in JSON" grep -q '"/opt/evil\\nname"' "$S/p.json"
out=$("$P" check --root "$M" 2>/dev/null)
like "text output lists the planted file" "$out" '^  04755 +0:0 +/opt/planted$'
like "text output escapes the newline" "$out" '/opt/evil\\nname$'
out=$(in_root "$M" pistisd check --json 2>/dev/null)
like "run inside the root, the walk finds the planted file" "$out" '"path": "/opt/planted"'
unlike "run inside the root, /proc is skipped" "$out" '"path": "/proc/'

# Directories agents may write on a mount that honours setuid: one agent's setuid file
# there runs as it for another once trusted commands take no_new_privs away. The musl
# root's /var/tmp (1777, on the overlay) is one; /tmp is a nosuid tmpfs and is not.
mkdir -m 1777 "$M/opt/drop"
mkdir "$M/opt/agent-own" && chown 10107:0 "$M/opt/agent-own" && chmod 0500 "$M/opt/agent-own"
mkdir -m 0775 "$M/opt/team" && chgrp 10010 "$M/opt/team"
mkdir -m 0755 "$M/opt/team-ro" && chgrp 10010 "$M/opt/team-ro"
mkdir -m 0773 "$M/opt/staff" && chgrp 50 "$M/opt/staff" # others may write, whatever the group
mkdir -m 0777 "$M/mnt/other/wide"                        # on another (suid) tmpfs: walked into
chmod 1777 "$M/mnt/other"                                # (red team: only its root was judged)
"$P" check --json --root "$M" >"$S/w.json" 2>/dev/null
w=$(field "$S/w.json" agent_writable value)
is "agent-writable directories without nosuid, no trusted commands: warn" \
	"$(field "$S/w.json" agent_writable status)" warn
like "... counted: /var/tmp, drop, agent-own, team, staff, /mnt/other, /mnt/other/wide" "$w" '^7 without nosuid: '
like "... the first named" "$w" '/var/tmp'
is "... hard (where trusted commands are configured)" "$(field "$S/w.json" agent_writable hard)" True
mount --bind "$M/opt" "$M/opt" && mount -o remount,bind,nosuid "$M/opt"
for d in var/tmp mnt/other; do mount -o remount,nosuid "$M/$d" 2>/dev/null ||
	{ mount --bind "$M/$d" "$M/$d" && mount -o remount,bind,nosuid "$M/$d"; }; done
"$P" check --json --root "$M" >"$S/w.json" 2>/dev/null
is "... all of them nosuid: ok" "$(field "$S/w.json" agent_writable status)" ok
# A volume whose root is root's 0755, with an uploads directory everyone may write inside:
# only the mount's root was judged, and agent B ran agent A's setuid file from there.
mkdir -p "$M/mnt/vol" && mount -t tmpfs -o mode=0755 vol "$M/mnt/vol" && mkdir -m 1777 "$M/mnt/vol/uploads"
"$P" check --json --root "$M" >"$S/w.json" 2>/dev/null
like "a 1777 directory inside another mount that honours setuid: found" \
	"$(field "$S/w.json" agent_writable value)" "^1 without nosuid: '/mnt/vol/uploads'"
mount -o remount,nosuid "$M/mnt/vol"
"$P" check --json --root "$M" >"$S/w.json" 2>/dev/null
is "... that mount nosuid: ok" "$(field "$S/w.json" agent_writable status)" ok
umount "$M/mnt/vol"
# A name an agent may choose, listed quoted and escaped once: "x', 'etc" is one entry.
hostile=$(printf "x', 'etc\n\033[31m")
mkdir -m 0777 "$M/$hostile" && chmod 0777 "$M/$hostile"
"$P" check --json --root "$M" >"$S/w.json" 2>/dev/null
like "a hostile directory name: one entry, quoted, escaped once" \
	"$(field "$S/w.json" agent_writable value)" \
	"^1 without nosuid: '/x\\\\', \\\\'etc\\\\n\\\\x1b\\[31m' \\(no trusted"
out=$("$P" check --root "$M" 2>/dev/null)
like "... in the table too, not escaped twice" "$out" \
	"^agent_writable .* 1 without nosuid: '/x\\\\', \\\\'etc\\\\n\\\\x1b\\[31m' \\(no trusted"
rmdir "$M/$hostile"
umount "$M/opt"
mkdir -p "$M/etc/sudoers.d" && echo '# test' >"$M/etc/sudoers.d/pistis-trusted"
in_root "$M" pistisd check --json >"$S/w.json" 2>/dev/null
is "trusted commands configured, /opt/drop without nosuid: fail" \
	"$(field "$S/w.json" agent_writable status)" fail
like "... naming it" "$(field "$S/w.json" agent_writable value)" '/opt/drop'
# A tree deeper than the walk's bound, or any tree in an agent's own directory, ends that
# branch, never the walk: an agent's `mkdir d && cd d` 70 times in /tmp turned the hard fail
# above into a warn (red team: the walk stopped, /opt/drop was never seen).
mkdir "$M/opt/drop/aaa" && chown 10107 "$M/opt/drop/aaa"
(cd "$M/opt/drop/aaa" && for i in $(seq 70); do mkdir d && cd d; done)
chown -R 10107 "$M/opt/drop/aaa"
(cd "$M/opt" && mkdir -p deeproot && cd deeproot && for i in $(seq 70); do mkdir d && cd d; done)
in_root "$M" pistisd check --json >"$S/w.json" 2>/dev/null
is "an agent's 70-deep tree and a root's one: agent_writable still fails" \
	"$(field "$S/w.json" agent_writable status)" fail
like "... still naming /opt/drop" "$(field "$S/w.json" agent_writable value)" '/opt/drop'
like "... the agent's directories judged, not entered; the deep branch skipped, counted" \
	"$(field "$S/w.json" setuid_files value)" "[1-9][0-9]* agents' own director(y|ies) not entered; 1 branch deeper than 64 not entered"
is "... and the walk was not cut short" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["setuid_walk_truncated"])' "$S/w.json")" False
rm -rf "$M/opt/drop/aaa"
mkdir "$S/opt-away" && mv "$M/opt/drop" "$M/opt/agent-own" "$M/opt/team" "$M/opt/staff" "$S/opt-away/"
in_root "$M" pistisd check --json >"$S/w.json" 2>/dev/null
is "with nothing else agents may write, a root's branch too deep to walk: cannot tell, fail" \
	"$(field "$S/w.json" agent_writable status)" fail
like "... saying so" "$(field "$S/w.json" agent_writable value)" "none found, but 1 branch deeper than 64 not walked: cannot tell"
rm -rf "$M/opt/deeproot"
in_root "$M" pistisd check --json >"$S/w.json" 2>/dev/null
is "... and without it: ok" "$(field "$S/w.json" agent_writable status)" ok
mv "$S/opt-away"/* "$M/opt/"
unlike "... a group-pi-sandbox directory without group write is not" \
	"$(field "$S/w.json" agent_writable value)" 'team-ro'
in_root "$M" pistisd check --no-walk --json >"$S/w.json" 2>/dev/null
is "--no-walk: not walked, warn" "$(field "$S/w.json" agent_writable status)" warn
rm "$M/etc/sudoers.d/pistis-trusted"

# --- /proc hidepid and nosuid /data, /workspaces, run inside the debian root -------------
# The root has a proc instance of its own (root_fresh mounts one); a new proc mount is a new
# instance (Linux >= 5.8), so options set here change nothing outside this namespace.
in_root "$D" pistisd check --no-walk --json >"$S/h.json" 2>/dev/null
is "proc without hidepid: warn" "$(field "$S/h.json" proc_hidepid status)" warn
like "…says every process is visible" "$(field "$S/h.json" proc_hidepid value)" '^no hidepid'
is "proc_hidepid is not hard" "$(field "$S/h.json" proc_hidepid hard)" False
mount -t proc -o nosuid,nodev,noexec,hidepid=invisible proc "$D/proc"
in_root "$D" pistisd check --no-walk --json >"$S/h.json" 2>/dev/null
is "proc with hidepid=invisible: ok" "$(field "$S/h.json" proc_hidepid status)" ok
is "…value" "$(field "$S/h.json" proc_hidepid value)" "hidepid=invisible"
umount "$D/proc"
mount -t proc -o nosuid,nodev,noexec,hidepid=noaccess proc "$D/proc"
in_root "$D" pistisd check --no-walk --json >"$S/h.json" 2>/dev/null
is "proc with hidepid=noaccess (pids still listed): warn" \
	"$(field "$S/h.json" proc_hidepid status)" warn
umount "$D/proc"

# Everything else hard is allowed, so the exit code is nosuid_data's alone.
ALLOW=seccomp,openat2,close_range,protected_hardlinks,protected_symlinks,protected_regular,protected_fifos,suid_dumpable
ALLOW=$ALLOW,nosuid_workspaces,nosuid_shared
inside_check() { in_root "$D" env PISTIS_ALLOW=$ALLOW pistisd check --no-walk --json "$@"; }
inside_check >"$S/n.json" 2>/dev/null
is "no /data: nosuid_data ok" "$(field "$S/n.json" nosuid_data status)" ok
like "…saying it does not exist" "$(field "$S/n.json" nosuid_data value)" 'does not exist'
mkdir -p "$D/data" "$D/workspaces"
mount --bind "$D/data" "$D/data"
mount --bind "$D/workspaces" "$D/workspaces"
mount -o remount,bind,nosuid,nodev "$D/data"
mount -o remount,bind,nosuid "$D/workspaces"
inside_check >"$S/n.json" 2>/dev/null
is "/data nosuid,nodev: ok" "$(field "$S/n.json" nosuid_data status)" ok
is "/workspaces nosuid without nodev: warn" "$(field "$S/n.json" nosuid_workspaces status)" warn
mount -o remount,bind,suid,dev "$D/data"
inside_check >"$S/n.json" 2>/dev/null
is "/data suid, no trusted commands: exit 0" "$?" 0
is "/data suid, no trusted commands: warn" "$(field "$S/n.json" nosuid_data status)" warn
like "…saying agents keep no_new_privs" "$(field "$S/n.json" nosuid_data value)" \
	'^/data: without nosuid,nodev \(no trusted commands'
mkdir -p "$D/etc/sudoers.d"
echo '# test' >"$D/etc/sudoers.d/pistis-trusted"
inside_check >"$S/n.json" 2>"$S/err"
is "/data suid with trusted commands configured: exit 1" "$?" 1
is "…status fail" "$(field "$S/n.json" nosuid_data status)" fail
like "…stderr names nosuid_data and the fix" "$(cat "$S/err")" \
	"'nosuid_data' does not hold: .*mount /data nosuid,nodev"
is "/workspaces nosuid (nodev missing only) with trusted commands: still warn" \
	"$(field "$S/n.json" nosuid_workspaces status)" warn
exits 0 "…--allow nosuid_data: exit 0" \
	in_root "$D" env PISTIS_ALLOW=$ALLOW,nosuid_data pistisd check --no-walk
# The other shared trees: /tmp and /dev/shm are nosuid tmpfs in the test root, /var/tmp is
# on the root's overlay.
is "/var/tmp suid with trusted commands: nosuid_shared fails" \
	"$(field "$S/n.json" nosuid_shared status)" fail
like "…naming /var/tmp" "$(field "$S/n.json" nosuid_shared value)" '^/var/tmp: without nosuid'
for d in var/tmp run/lock; do
	[ -d "$D/$d" ] && mount --bind "$D/$d" "$D/$d" && mount -o remount,bind,nosuid,nodev "$D/$d"
done
inside_check >"$S/n.json" 2>/dev/null
is "…every shared tree nosuid: ok" "$(field "$S/n.json" nosuid_shared status)" ok
like "…listing them" "$(field "$S/n.json" nosuid_shared value)" '/tmp, /dev/shm, /var/tmp'
mount -o remount,bind,nosuid,nodev "$D/data"
exits 0 "/data nosuid,nodev with trusted commands: exit 0" inside_check
# The agents' homes on a mount of their own beneath a nosuid /data (red team, identity
# reuse: after --forget a setuid file of the old agent's would be the next holder's).
mkdir -p "$D/data/sandbox-home"
mount -t tmpfs -o mode=0711 homes "$D/data/sandbox-home"
inside_check >"$S/n.json" 2>/dev/null
is "/data nosuid, /data/sandbox-home a suid mount, trusted commands: nosuid_data fails" \
	"$(field "$S/n.json" nosuid_data status)" fail
like "…naming the homes' mount" "$(field "$S/n.json" nosuid_data value)" \
	'^/data/sandbox-home: without nosuid,nodev'
mount -o remount,nosuid,nodev "$D/data/sandbox-home"
inside_check >"$S/n.json" 2>/dev/null
is "…made nosuid,nodev: ok" "$(field "$S/n.json" nosuid_data status)" ok
umount "$D/data/sandbox-home"
rm "$D/etc/sudoers.d/pistis-trusted"
umount "$D/data" "$D/workspaces"

exits 0 "--no-walk skips the inventory" "$P" check --no-walk --root "$M"
out=$("$P" check --json --no-walk --root "$M")
is "--no-walk: setuid_files says so" "$(echo "$out" | python3 -c 'import json,sys
print([c for c in json.load(sys.stdin)["checks"] if c["name"]=="setuid_files"][0]["value"])')" \
	"not walked (--no-walk)"

# --- /etc/passwd a FIFO, a directory, or a link to a FIFO: named at once ---------------------
# sudo and visudo run inside the root to be asked, and read /etc/passwd first (sudo even for
# -V): a FIFO there held each of their three runs for its 5 s, check answered after 15 s and
# serve's start-up waited as long. Now they are not run, and the rows say which file and why.
cp -a "$D/etc/passwd" "$S/passwd.keep"
for kind in fifo directory link; do
	rm -rf "$D/etc/passwd" "$D/etc/passwd.fifo"
	case $kind in
	fifo) mkfifo "$D/etc/passwd" && acct_want='a FIFO' run_want='a FIFO' ;;
	directory) mkdir "$D/etc/passwd" && acct_want='a directory' run_want='a directory' ;;
	link) mkfifo "$D/etc/passwd.fifo" && ln -s /etc/passwd.fifo "$D/etc/passwd" &&
		acct_want='a symlink' run_want='a FIFO' ;;
	esac
	t0=$(date +%s%N)
	timeout 60 "$P" check --json --no-walk --root "$D" >"$S/pw.json" 2>/dev/null
	ms=$((($(date +%s%N) - t0) / 1000000))
	ok "/etc/passwd $kind: check answers in under 2 s ($ms ms)" test "$ms" -lt 2000
	is "... account_files fails, naming the file and what it is" \
		"$(field "$S/pw.json" account_files status) $(field "$S/pw.json" account_files value)" \
		"fail /etc/passwd is not a regular file ($acct_want)"
	is "... sudo found, not run, saying why" "$(field "$S/pw.json" sudo value)" \
		"/usr/bin/sudo, setuid root, version unknown (not run: /etc/passwd is $run_want, not a regular file)"
	is "... sudo_cves not probed, saying why" \
		"$(field "$S/pw.json" sudo_cves status) $(field "$S/pw.json" sudo_cves value)" \
		"warn /usr/bin/sudo not probed: not run: /etc/passwd is $run_want, not a regular file"
	like "... visudo not run either" "$(field "$S/pw.json" visudo value)" \
		"version unknown \(not run: /etc/passwd is $run_want, not a regular file\)$"
done
rm -rf "$D/etc/passwd" "$D/etc/passwd.fifo" && cp -a "$S/passwd.keep" "$D/etc/passwd"
"$P" check --json --no-walk --root "$D" >"$S/pw.json" 2>/dev/null
like "/etc/passwd back: sudo is asked again" "$(field "$S/pw.json" sudo value)" \
	'^/usr/bin/sudo, setuid root, Sudo version 1\.9'

# --- /proc/sys not there (not mounted, masked by the runtime): no sysctl is known, and the
# report must say so instead of "absent" (which reads as "this kernel lacks it"), and no
# check may come out ok on a value it never read.
mkdir -p "$S/nosys"
mount -t tmpfs nosys "$S/nosys"
mount --bind "$S/nosys" /proc/sys
"$P" check --json --no-walk >"$S/ns.json" 2>"$S/err"
is "/proc/sys missing: exit 1" "$?" 1
for n in userns perf_event_paranoid dmesg_restrict protected_hardlinks protected_symlinks protected_regular \
	protected_fifos yama_ptrace_scope legacy_tiocsti unprivileged_userfaultfd suid_dumpable; do
	unlike "/proc/sys missing: $n is not ok" "$(field "$S/ns.json" $n status)" '^ok$'
	like "/proc/sys missing: $n says /proc/sys could not be read" \
		"$(field "$S/ns.json" $n value)" '/proc/sys is not readable'
done
unlike "/proc/sys missing: no claim about the kernel version" "$(cat "$S/ns.json")" 'Linux < '
like "/proc/sys missing: stderr names the first hard check and why" "$(cat "$S/err")" \
	"'protected_hardlinks' does not hold: /proc/sys is not readable"
umount /proc/sys "$S/nosys"
"$P" check --json --no-walk >"$S/back.json" 2>/dev/null
unlike "/proc/sys back: the sysctls are read again" \
	"$(field "$S/back.json" protected_symlinks value)" 'not readable'
# syslog(2) is refused by the spawn filter; /dev/kmsg reads the same log, shut only by
# kernel.dmesg_restrict (red team): reported, ok at 1 and above, warn at 0.
want=ok
[ "$(cat /proc/sys/kernel/dmesg_restrict 2>/dev/null || echo 0)" -ge 1 ] || want=warn
is "dmesg_restrict follows kernel.dmesg_restrict" "$(field "$S/back.json" dmesg_restrict status)" "$want"
like "... with the value read" "$(field "$S/back.json" dmesg_restrict value)" '^[0-9]+ \(want >= 1\)$'

done_testing
