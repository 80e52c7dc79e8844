#!/bin/bash
# Red team: trusted commands attacked as an agent would (and as a careless image would
# let it): file capabilities that outlive harden-setuid, sudo options around the rule,
# sudoers injection through names, symlinks swapped into the directories pistisd writes,
# FIFOs handed to `add`, agents writing /data/bin or /data/trusted, image rules that grant
# more than the drop-in, interpreters, secure_path, a binary's loader and the libraries it
# maps (RPATH/RUNPATH, DT_NEEDED paths, /etc/ld.so.preload). Debian root with the real sudo; root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] && [ -x "$TESTBIN/redteam-probe" ] ||
	missing "pistisd or redteam-probe not built"
S=$(scratch)
R=$(root_fresh debian) || missing "root_fresh debian failed"
[ -x "$R/usr/bin/sudo" ] && [ -x "$R/usr/bin/setpriv" ] || missing "no sudo/setpriv in the root"

"$P" users ensure-base --root "$R" >/dev/null
AGENT=$("$P" users ensure rt/t --root "$R" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
AUID=$(awk -F: -v u="$AGENT" '$1 == u { print $3 }' "$R/etc/passwd")
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts"

# The agent as the spawn core makes it with allow_setuid (the only mode in which trusted
# commands work): its ids, pi-sandbox, no no_new_privs, and the bounding set
# SPAWN_SETUID_BOUNDING (CAP_SETUID, CAP_SETGID, CAP_AUDIT_WRITE).
agent() {
	chroot "$R" /usr/bin/setpriv --bounding-set -all,+setuid,+setgid,+audit_write \
		--inh-caps -all --reuid "$AUID" --regid "$AUID" --groups 10010 \
		/usr/bin/env -i PATH=/data/bin:/usr/bin:/bin HOME=/tmp "$@"
}
refused() { # desc cmd...: the agent's attempt fails and nothing ran as pi-tools or root
	local d=$1 out rc
	shift
	out=$(agent "$@" </dev/null 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && ! printf '%s' "$out" | grep -q 'user=pi-tools\|uid=0\|uid=10002'; then
		_tap_result 0 "$d"
	else
		_tap_result 1 "$d" "exit $rc: $out"
	fi
}

cat >"$S/hello" <<'EOF'
#!/bin/sh
echo "user=$(id -un) uid=$(id -u)"
EOF
chmod 0755 "$S/hello"
ok "add hello" "$P" trusted add hello "$S/hello" --root "$R"
like "the agent runs it as pi-tools" "$(agent hello 2>&1)" "^user=pi-tools"

# --- 1. file capabilities: setuid without the setuid bit ----------------------------------
# With allow_setuid the bounding set keeps CAP_SETUID and CAP_SETGID, so a file carrying
# the capability cap_setuid+ep (security.capability, which Debian's uidmap, ping and many
# images use instead of the setuid bit) lifts the agent to uid 0 exactly like a setuid-root
# file. harden-setuid must take it away too.
cp "$TESTBIN/redteam-probe" "$R/usr/lib/cap-probe"
cp "$TESTBIN/redteam-probe" "$R/usr/lib/capgid-probe"
setcap_file() { # file cap_bit
	python3 -c 'import os,struct,sys
os.setxattr(sys.argv[1], "security.capability",
	struct.pack("<IIIII", 0x02000001, 1 << int(sys.argv[2]), 0, 0, 0))' "$1" "$2"
}
setcap_file "$R/usr/lib/cap-probe" 7     # CAP_SETUID
setcap_file "$R/usr/lib/capgid-probe" 6  # CAP_SETGID
out=$(agent /usr/lib/cap-probe setuid0 2>&1)
is "before hardening: a cap_setuid+ep file makes the agent uid 0 (the hole)" "$(echo "$out" | sed -n 's/^uid=//p')" "0,0,0"
out=$("$P" trusted harden-setuid --dry-run --root "$R" 2>&1)
like "harden-setuid --dry-run lists the file with capabilities" "$out" "/usr/lib/cap-probe"
"$P" trusted harden-setuid --root "$R" >"$S/harden" 2>&1
is "harden-setuid exits 0" "$?" 0
like "... reports the capability file as cleared" "$(cat "$S/harden")" "^cleared .*/usr/lib/cap-probe"
out=$(agent /usr/lib/cap-probe setuid0 2>&1)
is "after hardening: the file no longer lifts the agent (setresuid(0) refused)" \
	"$(echo "$out" | sed -n 's/^setresuid0=//p')" EPERM
is "... the agent stays itself" "$(echo "$out" | sed -n 's/^uid=//p')" "$AUID,$AUID,$AUID"
python3 -c 'import os,sys
try: os.getxattr(sys.argv[1], "security.capability"); print("present")
except OSError: print("gone")' "$R/usr/lib/capgid-probe" >"$S/capgid"
is "a cap_setgid+ep file loses its capability too" "$(cat "$S/capgid")" gone
setcap_file "$R/usr/lib/cap-probe" 7
"$P" trusted harden-setuid --keep /usr/lib/cap-probe --root "$R" >"$S/harden" 2>&1
like "--keep keeps a capability file by name" "$(cat "$S/harden")" "^kept .*/usr/lib/cap-probe"
like "the trusted command still works after hardening" "$(agent hello 2>&1)" "^user=pi-tools"
rm -f "$R/usr/lib/cap-probe" "$R/usr/lib/capgid-probe"

# --- 2. sudo around the rule ----------------------------------------------------------------
refused "sudo -u#-1 (CVE-2019-14287)" sudo -n -u '#-1' /data/trusted/hello
refused "sudo -u#4294967295" sudo -n -u '#4294967295' /data/trusted/hello
refused "sudo -u root" sudo -n -u root /data/trusted/hello
refused "sudo -g root" sudo -n -u pi-tools -g root /data/trusted/hello
refused "sudo -g pi-sandbox (another group)" sudo -n -u pi-tools -g pi-sandbox /data/trusted/hello
refused "sudoedit of the script" sudo -n -e -u pi-tools /data/trusted/hello
refused "sudoedit of the drop-in" sudoedit -n /etc/sudoers.d/pistis-trusted
refused "sudo -R (chroot)" sudo -n -R / -u pi-tools /data/trusted/hello
refused "sudo -T (timeout option)" sudo -n -T 5 -u pi-tools /data/trusted/hello
refused "sudo -C 7 (keep the caller's fds)" sudo -n -C 7 -u pi-tools /data/trusted/hello
# What sudo hands on from its caller unless the rule's Defaults say otherwise: the
# env_check list (TZ, LANG, LC_*, LANGUAGE, LINGUAS, COLORTERM: they change how a script
# parses and compares), the caller's groups with -P, and fds.
cat >"$S/showenv" <<'EOF'
#!/bin/sh
echo "groups=$(id -G)"
echo "envnames=$(env | sed 's/=.*//' | sort | tr '\n' ,)"
for f in /proc/$$/fd/*; do echo "fd=${f##*/} $(readlink "$f")"; done
EOF
chmod 0755 "$S/showenv"
ok "add showenv" "$P" trusted add showenv "$S/showenv" --root "$R"
out=$(agent env LANG=C.UTF-8 LC_ALL=tr_TR.UTF-8 LC_CTYPE=C LANGUAGE=tr TZ=Europe/Paris \
	COLORTERM=x LINGUAS=tr TERM=xterm sudo -n -u pi-tools /data/trusted/showenv 2>&1)
like "sudo called directly with the caller's locale and TZ runs the script" "$out" '^groups='
unlike "... which gets none of them" "$(echo "$out" | sed -n 's/^envnames=//p')" \
	'(^|,)(LANG|LC_ALL|LC_CTYPE|LANGUAGE|TZ|COLORTERM|LINGUAS),'
is "sudo -P: the script has pi-tools' groups only, not the caller's" \
	"$(agent sudo -n -P -u pi-tools /data/trusted/showenv 2>&1 | sed -n 's/^groups=//p')" 10002
# (sudo matches /data/trusted/./hello and //data/trusted/hello by inode: the same pinned
# file, digest checked; not an escape.)
cp "$R/data/trusted/hello" "$R/tmp/hello" && chmod 0755 "$R/tmp/hello"
refused "a root-owned copy with the same name and digest elsewhere" sudo -n -u pi-tools /tmp/hello
rm -f "$R/tmp/hello"

# --- 3. the agent and the files sudo trusts ----------------------------------------------------
for t in "echo x >/data/bin/hello" "echo x >/data/trusted/hello" "echo x >/data/bin/new" \
	"ln -s /tmp/x /data/bin/evil" "mv /data/bin/hello /data/bin/h2" "echo x >>/etc/sudoers.d/pistis-trusted" \
	"touch /etc/sudoers.d/zz" "ls /data/.secrets"; do
	refused "the agent cannot: $t" /bin/sh -c "$t"
done
is "... the wrapper is unchanged" "$("$P" trusted check --root "$R" >/dev/null 2>&1; echo $?)" 0

# --- 4. names that would be sudoers syntax ------------------------------------------------------
for bad in "$(printf 'x\n%%pi-sandbox ALL=(ALL) NOPASSWD: ALL')" 'x,y' 'x y' ALL 'a#b' 'x\' 'x:y' \
	'x=y' '(x)' "$(printf 'x\ty')" "$(head -c 65 /dev/zero | tr '\0' a)"; do
	"$P" trusted add "$bad" "$S/hello" --root "$R" >/dev/null 2>&1
	rc=$?
	is "add refuses name $(printf %q "$bad" | head -c 60) (usage)" "$rc" 100
done
unlike "the drop-in holds no directive but ours" "$(cat "$R/etc/sudoers.d/pistis-trusted")" \
	'^[[:space:]]*[#@]include|ALL=\(ALL|^[^#C%D[:blank:]]|^[[:blank:]]+[^s[:blank:]]'

# --- 5. symlinks swapped into the directories pistisd writes -------------------------------------
mkdir -p "$S/elsewhere"
mv "$R/data/trusted" "$S/trusted.real"
ln -s "$S/elsewhere" "$R/data/trusted"
"$P" trusted add other "$S/hello" --root "$R" >/dev/null 2>&1
rc=$?
ok "add with /data/trusted a symlink fails (rc=$rc)" test "$rc" -ne 0
is "... nothing was written where the link points" "$(ls -A "$S/elsewhere")" ""
rm "$R/data/trusted" && mv "$S/trusted.real" "$R/data/trusted"
mv "$R/etc/sudoers.d" "$S/sudoers.d.real"
mkdir -p "$S/sd" && ln -s "$S/sd" "$R/etc/sudoers.d"
"$P" trusted install --root "$R" >/dev/null 2>&1
rc=$?
ok "install with /etc/sudoers.d a symlink fails (rc=$rc)" test "$rc" -ne 0
is "... nothing was written where the link points" "$(ls -A "$S/sd")" ""
rm "$R/etc/sudoers.d" && mv "$S/sudoers.d.real" "$R/etc/sudoers.d"
chown "$AUID" "$R/data/bin"
"$P" trusted add other "$S/hello" --root "$R" >/dev/null 2>&1
rc=$?
ok "add refuses a /data/bin the agent owns (rc=$rc)" test "$rc" -ne 0 -a ! -e "$R/data/bin/other"
chown 0 "$R/data/bin" && "$P" trusted remove other --root "$R" --no-install >/dev/null 2>&1

# --- 6. what `add` is handed -------------------------------------------------------------------
mkfifo "$S/fifo"
t=$(date +%s)
out=$(timeout -s KILL 10 "$P" trusted add fifo "$S/fifo" --root "$R" 2>&1)
rc=$?
ok "add of a FIFO fails without hanging (rc=$rc)" test "$rc" -ne 0 -a "$rc" -ne 137
"$P" trusted add zero /dev/zero --root "$R" >/dev/null 2>&1
rc=$?
ok "add of /dev/zero fails (rc=$rc)" test "$rc" -ne 0 -a ! -e "$R/data/trusted/zero"
head -c $((1024 * 1024 + 1)) /dev/zero >"$S/big" && chmod 0755 "$S/big"
"$P" trusted add big "$S/big" --root "$R" >/dev/null 2>&1
ok "add of a script over 1 MiB fails" test ! -e "$R/data/trusted/big"

# --- 7. an image rule that grants more than the drop-in ------------------------------------------
printf '%%pi-sandbox ALL = (pi-tools) NOPASSWD: /usr/bin/env\n' >"$R/etc/sudoers.d/zz-extra"
chmod 0440 "$R/etc/sudoers.d/zz-extra"
out=$("$P" trusted install --root "$R" 2>&1)
is "install fails when the image grants pi-sandbox another command as pi-tools" "$?" 1
like "... and names it" "$out" "/usr/bin/env"
printf '%s ALL = (pi-tools) NOPASSWD: /data/trusted/*\n' "$AGENT" >"$R/etc/sudoers.d/zz-extra"
out=$("$P" trusted install --root "$R" 2>&1)
is "install fails on a per-agent wildcard over /data/trusted" "$?" 1
printf '%%pi-sandbox ALL = (pi-tools) NOPASSWD:SETENV: /data/trusted/hello\n' >"$R/etc/sudoers.d/zz-extra"
out=$("$P" trusted install --root "$R" 2>&1)
is "install fails on a second rule for the same script with SETENV" "$?" 1
# Defaults of the image's that would change how the trusted commands run: the drop-in's
# own Defaults line pins each setting that matters (command Defaults are applied last), and
# install and check refuse any other runas or command Defaults that reach them.
extra() { printf '%s\n' "$1" >"$R/etc/sudoers.d/zz-extra" && chmod 0440 "$R/etc/sudoers.d/zz-extra"; }
for d in 'Defaults!/data/trusted/showenv !env_reset, setenv' 'Defaults>pi-tools env_keep += "FOO"' \
	'Defaults!ALL closefrom_override' 'Defaults>ALL setenv'; do
	extra "$d"
	out=$("$P" trusted install --root "$R" 2>&1)
	is "install fails on the image's '$d'" "$?" 1
	like "... and names it" "$out" "must be the only runas or command Defaults"
	exits 1 "... check fails too" "$P" trusted check --root "$R"
done
# sudo matches a command by inode: a link elsewhere to /data/trusted names the scripts
# though its text does not; so no command Defaults but the drop-in's, whatever they name
mkdir -p "$R/opt" && ln -sfn /data/trusted "$R/opt/tr"
extra 'Defaults!/opt/tr/showenv !env_reset, setenv'
out=$("$P" trusted install --root "$R" 2>&1)
is "install fails on command Defaults through a link to /data/trusted" "$?" 1
exits 1 "... check fails too" "$P" trusted check --root "$R"
rm -f "$R/opt/tr"
extra 'Defaults!/usr/bin/apt env_keep += "FOO"'
exits 1 "install fails on command Defaults for another program too" "$P" trusted install --root "$R"
extra 'Defaults:%pi-sandbox !env_reset, env_keep += "FOO", closefrom=20, preserve_groups, stay_setuid'
ok "install succeeds beside user Defaults the drop-in's line overrides" "$P" trusted install --root "$R"
out=$(agent /bin/sh -c 'exec 7</etc/hostname; FOO=1 exec sudo -n -u pi-tools /data/trusted/showenv' 2>&1)
unlike "... the caller's FOO does not reach the script" "$(echo "$out" | sed -n 's/^envnames=//p')" '(^|,)FOO,'
unlike "... nor its fd 7" "$(echo "$out" | grep '^fd=')" '/etc/hostname'
is "... nor its groups" "$(echo "$out" | sed -n 's/^groups=//p')" 10002
rm -f "$R/etc/sudoers.d/zz-extra"
ok "install again on a clean image" "$P" trusted install --root "$R"

# --- 8. the secret of a running trusted command, from the agent that started it ----------------
# Agents run without no_new_privs where trusted commands exist; the script they start holds
# pi-tools' secret. Nothing the starting agent controls (its environment, its fds, being
# the one that called sudo) may get it the secret or a say in the script's environment.
mkdir -p "$R/data/.secrets" && chown 10002:10002 "$R/data/.secrets" && chmod 0700 "$R/data/.secrets"
echo "s3cret-$$-value" >"$R/data/.secrets/tok" && chown 10002:10002 "$R/data/.secrets/tok" &&
	chmod 0600 "$R/data/.secrets/tok"
cat >"$S/holdsecret" <<'EOF'
#!/bin/sh
echo "pid=$$"
echo "envnames=$(env | sed 's/=.*//' | sort | tr '\n' ,)"
for f in /proc/$$/fd/*; do echo "fd=${f##*/} $(readlink "$f")"; done
PI_TOOLS_TOKEN=$(cat /data/.secrets/tok)
export PI_TOOLS_TOKEN
echo ready
exec sleep 20
EOF
chmod 0755 "$S/holdsecret"
ok "add holdsecret" "$P" trusted add holdsecret "$S/holdsecret" --root "$R"
agent /bin/sh -c 'exec 5</etc/hostname 7</etc/passwd; exec env LD_PRELOAD=/tmp/x.so \
	BASH_ENV=/tmp/e.sh ENV=/tmp/e.sh PI_AGENT_SET=1 SUDO_ASKPASS=/tmp/a holdsecret' >"$S/hs" 2>&1 </dev/null &
for _ in $(seq 100); do grep -q '^ready' "$S/hs" 2>/dev/null && break; sleep 0.1; done
HPID=$(sed -n 's/^pid=//p' "$S/hs")
ok "the trusted command runs as pi-tools (pid ${HPID:-?})" test -n "$HPID" -a "$(stat -c %u "/proc/$HPID" 2>/dev/null)" = 10002
envnames=$(sed -n 's/^envnames=//p' "$S/hs")
unlike "... with nothing of the agent's environment (${envnames})" "$envnames" \
	'(^|,)(LD_PRELOAD|BASH_ENV|ENV|PI_AGENT_SET|SUDO_ASKPASS),'
fds=$(sed -n 's/^fd=//p' "$S/hs" | tr '\n' ' ')
ok "... it lists its fds (${fds})" test -n "$fds"
unlike "... none is the agent's (its 5 and 7 were /etc/hostname, /etc/passwd)" "$fds" '/etc/(hostname|passwd)'
out=$(agent /usr/local/lib/pistis-tests/redteam-probe peek "$HPID" 2>&1)
is "the agent cannot kill(2) it (a terminal of its own can: docs/trusted.md)" \
	"$(echo "$out" | sed -n "s/^$HPID.kill0=//p")" EPERM
for f in environ mem fd maps; do
	is "the agent cannot read its /proc/PID/$f" "$(echo "$out" | sed -n "s/^$HPID.$f=//p")" EACCES
done
is "the agent cannot ptrace it" "$(echo "$out" | sed -n "s/^$HPID.ptrace=//p")" EPERM
is "the agent cannot process_vm_readv it" "$(echo "$out" | sed -n "s/^$HPID.process_vm_readv=//p")" EPERM
unlike "the secret shows nowhere the agent looked" \
	"$out$(agent /bin/sh -c "cat /proc/$HPID/environ /proc/$HPID/cmdline" 2>&1 | tr '\0' ' ')" "s3cret-$$"
[ -n "$HPID" ] && kill "$HPID" 2>/dev/null
wait
ok "remove holdsecret" "$P" trusted remove holdsecret --root "$R"

# --- 9. the script's interpreter: what sudo's digest does not cover --------------------------
# sudo pins the script's bytes, not the program its #! line names: an interpreter an agent
# can write (or swap through a directory it can write, or reach through a relative path
# or `env` and a PATH directory it can write) runs as pi-tools with the secrets.
mkdir -p "$R/workspaces/tools" && chown "$AUID:10010" "$R/workspaces/tools" && chmod 02770 "$R/workspaces/tools"
cp "$R/bin/sh" "$R/workspaces/tools/sh" && chmod 0755 "$R/workspaces/tools/sh"
mkdir -p "$R/opt/shared" && chmod 0777 "$R/opt/shared"
cp "$R/bin/sh" "$R/opt/shared/sh" && chmod 0755 "$R/opt/shared/sh"
mkdir -p "$R/opt/rootonly" && cp "$R/bin/sh" "$R/opt/rootonly/sh" && chmod 0755 "$R/opt/rootonly/sh"
ln -sfn /workspaces/tools/sh "$R/opt/rootonly/via-link"
printf '#!/bin/sh\nexec /opt/rootonly/sh "$@"\n' >"$R/opt/rootonly/nested" && chmod 0755 "$R/opt/rootonly/nested"
printf '#!/workspaces/tools/sh\nexec /opt/rootonly/sh "$@"\n' >"$R/opt/rootonly/nested-bad" && chmod 0755 "$R/opt/rootonly/nested-bad"
add_refused() { # desc name pattern: `add` of $S/name exits 1, adds nothing, says pattern
	out=$("$P" trusted add "$2" "$S/$2" --root "$R" 2>&1)
	rc=$?
	if [ $rc -eq 1 ] && [ ! -e "$R/data/trusted/$2" ] && printf '%s' "$out" | grep -q "$3"; then
		_tap_result 0 "$1"
	else
		_tap_result 1 "$1" "exit $rc: $out"
	fi
}
interp_refused() { # desc name first-line
	printf '%s\necho "user=$(id -un)"\n' "$3" >"$S/$2" && chmod 0755 "$S/$2"
	add_refused "$1" "$2" interpreter
}
interp_refused "add refuses an interpreter the agent owns" ownint '#!/workspaces/tools/sh'
interp_refused "add refuses a root-owned interpreter in a directory others can write" sharedint '#!/opt/shared/sh'
interp_refused "add refuses a relative interpreter (resolved from the cwd)" relint '#!workspaces/tools/sh'
interp_refused "add refuses an interpreter reached through a symlink into an agent's directory" linkint '#!/opt/rootonly/via-link'
interp_refused "add refuses an interpreter whose own #! names an agent's file" nestint '#!/opt/rootonly/nested-bad'
interp_refused "add refuses a CRLF #! line (the interpreter would be 'sh<CR>')" crlfint "$(printf '#!/bin/sh\r')"
interp_refused "add refuses env options (env -S splits, -i/-u/-C change what runs)" envopt '#!/usr/bin/env -S sh -e'
interp_refused "add refuses a missing interpreter" noint '#!/opt/rootonly/nope'
mkdir -p "$R/usr/local/sbin" && chmod 0777 "$R/usr/local/sbin"
interp_refused "add refuses env NAME when a secure_path directory before it is writable" envpath '#!/usr/bin/env sh'
chmod 0755 "$R/usr/local/sbin"
for f in '#!/bin/sh' '#!/usr/bin/env sh' '#! /opt/rootonly/sh -e' '#!/opt/rootonly/nested'; do
	printf '%s\necho "user=$(id -un)"\n' "$f" >"$S/goodint" && chmod 0755 "$S/goodint"
	ok "add accepts a root-only interpreter: $f" "$P" trusted add goodint "$S/goodint" --root "$R"
	like "... and the agent runs it as pi-tools" "$(agent goodint 2>&1)" "^user=pi-tools"
done
printf 'echo "user=$(id -un)"\n' >"$S/noshebang" && chmod 0755 "$S/noshebang"
ok "add accepts a script without #! (no interpreter to check)" "$P" trusted add noshebang "$S/noshebang" --root "$R"
refused "... sudo execs it itself (fexecve): Exec format error, no /bin/sh fallback" noshebang
# Added while the interpreter was root's; the image changed since: install and check refuse.
printf '#!/opt/rootonly/sh\necho "user=$(id -un)"\n' >"$S/later" && chmod 0755 "$S/later"
ok "add later (interpreter root's alone)" "$P" trusted add later "$S/later" --root "$R"
image_changed() { # what check-pattern install-pattern: check and install both refuse
	out=$("$P" trusted check --root "$R" 2>&1)
	is "check fails once $1" "$?" 1
	like "... and names it" "$out" "$2"
	out=$("$P" trusted install --root "$R" 2>&1)
	is "install refuses too" "$?" 1
	like "... and says why" "$out" "$3"
}
chmod 0777 "$R/opt/rootonly"
image_changed "the interpreter's directory is writable by others" "/data/trusted/later.*/opt/rootonly" interpreter
chmod 0755 "$R/opt/rootonly"
# A path with an escape sequence in check's report reaches the operator's terminal escaped.
E=$(printf 'opt/e\033[2Jx')
mkdir -p "$R/$E" && cp "$R/bin/sh" "$R/$E/sh" && chmod 0755 "$R/$E/sh"
printf '#!/%s/sh\necho "user=$(id -un)"\n' "$E" >"$S/escint" && chmod 0755 "$S/escint"
ok "add an interpreter in a directory whose name holds ESC" "$P" trusted add escint "$S/escint" --root "$R"
chmod 0777 "$R/$E"
out=$("$P" trusted check --root "$R" 2>&1)
like "check names that directory ..." "$out" 'FAIL .*opt/e\\(x1b|033|e)\[2Jx'
is "... with no raw ESC byte in its report" "$(printf '%s' "$out" | tr -dc '\033' | wc -c)" 0
chmod 0755 "$R/$E"
"$P" trusted remove escint --no-install --root "$R" >/dev/null
for n in goodint noshebang later; do "$P" trusted remove "$n" --no-install --root "$R" >/dev/null; done
ok "install again" "$P" trusted install --root "$R"

# --- 10. what else runs as pi-tools: programs named in the script, a binary's loader -------
# A script runs `id`, `curl`… by name from its PATH, which sudo sets to secure_path: whoever
# can put a file in one of those directories (or create a missing one) decides what runs.
printf '#!/bin/sh\necho "user=$(id -un)"\n' >"$S/byname" && chmod 0755 "$S/byname"
chmod 0777 "$R/usr/local/sbin"
add_refused "add refuses while a secure_path directory is writable by others" byname 'secure_path.*/usr/local/sbin'
chmod 0755 "$R/usr/local/sbin"
chown "$AUID" "$R/usr/sbin"
add_refused "add refuses while a secure_path directory is an agent's" byname 'secure_path.*/usr/sbin'
chown 0 "$R/usr/sbin"
mv "$R/usr/local/sbin" "$R/usr/local/sbin.away" && chmod 0777 "$R/usr/local"
add_refused "add refuses a missing secure_path directory whose parent others can write" byname 'secure_path.*/usr/local'
chmod 0755 "$R/usr/local" && mv "$R/usr/local/sbin.away" "$R/usr/local/sbin"
ok "add accepts it once secure_path is root's alone" "$P" trusted add byname "$S/byname" --root "$R"
like "... and the agent runs it as pi-tools" "$(agent byname 2>&1)" "^user=pi-tools"
chmod 0777 "$R/usr/local/sbin"
image_changed "a secure_path directory is writable by others" "FAIL secure_path.*/usr/local/sbin" secure_path
chmod 0755 "$R/usr/local/sbin"
"$P" trusted remove byname --no-install --root "$R" >/dev/null
# A program the script runs by an absolute path of its own: each word of the script that is
# an absolute path to an executable file is checked like an interpreter.
printf '#!/bin/sh\n# board\n  /opt/shared/sh -c "id -un"\n' >"$S/bypath" && chmod 0755 "$S/bypath"
add_refused "add refuses a script that runs a program from a directory others can write" bypath \
	"bypath (line 3): program .*/opt/shared"
printf '#!/bin/sh\nX=$(/workspaces/tools/sh -c true)\n' >"$S/bypath2" && chmod 0755 "$S/bypath2"
add_refused "... one the agent owns, inside \$( )" bypath2 "bypath2 (line 2): program .*/workspaces/tools"
printf '#!/bin/sh\nexec /opt/rootonly/via-link -c true\n' >"$S/bypath3" && chmod 0755 "$S/bypath3"
add_refused "... one reached through a symlink into an agent's directory" bypath3 "program '/opt/rootonly/via-link'"
printf '#!/bin/sh\n/opt/rootonly/nested-bad -c true\n' >"$S/bypath4" && chmod 0755 "$S/bypath4"
add_refused "... a root-owned one whose own #! names an agent's file" bypath4 "program '/opt/rootonly/nested-bad'.*interpreter"
cp "$R/bin/sh" "$R/opt/rootonly/agentsh" && chown "$AUID" "$R/opt/rootonly/agentsh"
printf '#!/bin/sh\ntrue;/opt/rootonly/agentsh -c true\n' >"$S/bypath5" && chmod 0755 "$S/bypath5"
add_refused "... one the agent owns in a root-owned directory" bypath5 "program '/opt/rootonly/agentsh'"
rm -f "$R/opt/rootonly/agentsh"
echo data >"$R/opt/shared/notes.txt" && chmod 0644 "$R/opt/shared/notes.txt"
printf '#!/bin/sh\n/usr/bin/id -un\ncat /opt/shared/notes.txt >/dev/null\nexec /opt/rootonly/sh -c "echo user=\\$(id -un)" # see http://x/opt/shared/sh, $HOME/opt/shared/sh, a/opt/shared/sh\n' \
	>"$S/bypathok" && chmod 0755 "$S/bypathok"
ok "add accepts root-owned programs by path, data files others can write, URLs, \$HOME/ and relative paths" \
	"$P" trusted add bypathok "$S/bypathok" --root "$R"
like "... and the agent runs it as pi-tools" "$(agent bypathok 2>&1)" "user=pi-tools"
chmod 0755 "$R/opt/shared/notes.txt"
image_changed "a data file it names became executable in a directory others can write" \
	"/data/trusted/bypathok \(line 3\): program '/opt/shared/notes.txt'" "program"
chmod 0644 "$R/opt/shared/notes.txt"
ok "check passes again once it is not" "$P" trusted check --root "$R"
"$P" trusted remove bypathok --no-install --root "$R" >/dev/null
# A binary has no #!, but the kernel maps its loader (PT_INTERP) into it before any of its
# code runs: a loader an agent can replace runs as pi-tools just like an interpreter.
cp "$R/usr/bin/id" "$S/elfid" && chmod 0755 "$S/elfid"
ok "add accepts a dynamic binary whose loader is root's alone" "$P" trusted add elfid "$S/elfid" --root "$R"
like "... and the agent runs it as pi-tools" "$(agent elfid -un 2>&1)" "^pi-tools$"
"$P" trusted remove elfid --no-install --root "$R" >/dev/null
# The same binary with its loader path (same length) pointing into /opt/shared (0777).
loader=$(python3 - "$S/elfid" "$S/elfbad" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
assert b[:4] == b"\x7fELF" and b[4] == 2 and b[5] == 1, "a 64-bit little-endian ELF"
phoff, = struct.unpack_from("<Q", b, 32)
phent, phnum = struct.unpack_from("<HH", b, 54)
for i in range(phnum):
    p = phoff + i * phent
    if struct.unpack_from("<I", b, p)[0] == 3:
        off, = struct.unpack_from("<Q", b, p + 8)
        n, = struct.unpack_from("<Q", b, p + 32)
        old = bytes(b[off:off + n - 1])
        new = (b"/opt/shared/" + b"l" * n)[:n - 1]
        b[off:off + n - 1] = new
        open(sys.argv[2], "wb").write(b)
        print(old.decode(), new.decode())
PY
)
read -r orig_loader bad_loader <<<"$loader"
cp "$R$orig_loader" "$R$bad_loader" 2>/dev/null || cp -L "$R/$(readlink -f "$R$orig_loader" | sed "s|^$R||")" "$R$bad_loader"
chmod 0755 "$S/elfbad" "$R$bad_loader"
add_refused "add refuses a binary whose loader lies in a directory others can write" elfbad "interpreter '$bad_loader'"
rm -f "$R$bad_loader"

# --- 11. what the dynamic loader maps, and from where ----------------------------------------
# sudo runs the command without AT_SECURE, so the loader honours the program's RPATH/RUNPATH
# ($ORIGIN, relative and empty entries) and a DT_NEEDED with a '/': a library directory an
# agent can write gives it code in pi-tools' process. Test ELFs built here with gcc.
if ! command -v gcc >/dev/null 2>&1; then
	untested "the dynamic loader's search paths" "no gcc"
else
D=$S/dyn
mkdir -p "$D/sub" "$D/abs"
printf 'int pwn_value(void) { return 42; }\n' >"$D/pwn.c"
printf '#include <stdio.h>\n#include <unistd.h>\nint pwn_value(void);\nint main(void) { printf("uid=%%d v=%%d\\n", (int)getuid(), pwn_value()); return 0; }\n' >"$D/prog.c"
gcc -shared -fPIC -Wl,-soname,libpwn.so -o "$D/libpwn.so" "$D/pwn.c"
gcc -shared -fPIC -Wl,-soname,libpwn.so -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/../agentlib' \
	-o "$D/libpwn-chain.so" "$D/pwn.c"
gcc -shared -fPIC -o "$D/sub/libnoso.so" "$D/pwn.c" # no soname: linked by path, NEEDED is that path
# A soname with a '/' is copied into DT_NEEDED as it is: an absolute path inside the root.
gcc -shared -fPIC -Wl,-soname,/opt/dyn/abs/libnoso.so -o "$D/abs/libnoso.so" "$D/pwn.c"
build() { # out ldflags...: prog.c linked against libpwn.so
	local out=$1
	shift
	gcc -o "$D/$out" "$D/prog.c" -L"$D" -lpwn "$@"
}
build origin-runpath -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/../lib'
build origin-rpath -Wl,--disable-new-dtags -Wl,-rpath,'$ORIGIN/../lib'
build dot -Wl,--enable-new-dtags -Wl,-rpath,.
build empty-tail -Wl,--enable-new-dtags -Wl,-rpath,/opt/dyn/rootlib:
build empty-head -Wl,--disable-new-dtags -Wl,-rpath,:/opt/dyn/rootlib
build dollar-lib -Wl,--enable-new-dtags -Wl,-rpath,'/opt/dyn/$LIB'
build dollar-platform -Wl,--enable-new-dtags -Wl,-rpath,'/opt/dyn/${PLATFORM}'
build rootlib -Wl,--enable-new-dtags -Wl,-rpath,/opt/dyn/rootlib
build filelib -Wl,--enable-new-dtags -Wl,-rpath,/opt/dyn/filelib
(cd "$D" && gcc -o needed-rel prog.c sub/libnoso.so)
gcc -o "$D/needed-abs" "$D/prog.c" "$D/abs/libnoso.so"
is "the test ELFs carry what they should" \
	"$(for f in origin-runpath origin-rpath dot empty-tail needed-rel needed-abs; do
		readelf -d "$D/$f" | grep -E '(RUNPATH|RPATH)|NEEDED.*noso' | sed 's/.*\(([A-Z]*)\).*\[\(.*\)\]/\1 \2/'
	done | tr '\n' '|')" \
	"(RUNPATH) \$ORIGIN/../lib|(RPATH) \$ORIGIN/../lib|(RUNPATH) .|(RUNPATH) /opt/dyn/rootlib:|(NEEDED) sub/libnoso.so|(NEEDED) /opt/dyn/abs/libnoso.so|"
# The image: /opt/dyn/bin root's; /opt/dyn/lib (what $ORIGIN/../lib names) and
# /opt/dyn/agentlib an agent's; /opt/dyn/rootlib root's with a root-owned libpwn.so;
# /opt/dyn/filelib root's, but the libpwn.so in it the agent's.
mkdir -p "$R/opt/dyn/bin" "$R/opt/dyn/lib" "$R/opt/dyn/agentlib" "$R/opt/dyn/rootlib" "$R/opt/dyn/filelib"
chown "$AUID" "$R/opt/dyn/lib" "$R/opt/dyn/agentlib"
cp "$D/libpwn.so" "$R/opt/dyn/rootlib/libpwn.so"
cp "$D/libpwn.so" "$R/opt/dyn/filelib/libpwn.so" && chown "$AUID" "$R/opt/dyn/filelib/libpwn.so"
for f in origin-runpath origin-rpath dot empty-tail empty-head dollar-lib dollar-platform rootlib \
	filelib needed-rel needed-abs; do
	cp "$D/$f" "$R/opt/dyn/bin/$f"
done
# A static program without PIE (ET_EXEC, no PT_DYNAMIC) loads nothing: nothing to refuse
# (it was refused with an empty reason, "not added: ").
printf 'int main(void) { return 0; }\n' >"$D/nopie.c"
gcc -static -no-pie -o "$R/opt/dyn/bin/nopie" "$D/nopie.c"
printf '#!/opt/dyn/bin/nopie\n' >"$S/nopie" && chmod 0755 "$S/nopie"
ok "add accepts a static non-PIE program as the interpreter" "$P" trusted add nopie "$S/nopie" --no-install --root "$R"
"$P" trusted remove nopie --no-install --root "$R" >/dev/null
rm "$R/opt/dyn/bin/nopie"
dyn_refused() { # desc interpreter pattern: a script with #!interpreter is not added, says why
	printf '#!%s\n' "$2" >"$S/dynint" && chmod 0755 "$S/dynint"
	add_refused "$1" dynint "$3"
}
dyn_refused "add refuses an interpreter whose RUNPATH \$ORIGIN/../lib is an agent's" /opt/dyn/bin/origin-runpath \
	"interpreter '/opt/dyn/bin/origin-runpath': RUNPATH entry '\$ORIGIN/../lib' -> '/opt/dyn/bin/../lib': directory '/opt/dyn/lib' is not root's alone (owner $AUID"
dyn_refused "... the same with DT_RPATH (--disable-new-dtags)" /opt/dyn/bin/origin-rpath \
	"RPATH entry '\$ORIGIN/../lib' -> .*directory '/opt/dyn/lib' is not root's alone"
dyn_refused "add refuses a RUNPATH '.' (resolved from the working directory)" /opt/dyn/bin/dot \
	"RUNPATH entry '.' is relative"
dyn_refused "add refuses a RUNPATH with an empty entry at the end ('/opt/dyn/rootlib:')" /opt/dyn/bin/empty-tail \
	"RUNPATH '/opt/dyn/rootlib:' has an empty entry"
dyn_refused "add refuses an RPATH with an empty entry at the start (':/opt/dyn/rootlib')" /opt/dyn/bin/empty-head \
	"RPATH ':/opt/dyn/rootlib' has an empty entry"
dyn_refused "add refuses \$LIB in a RUNPATH" /opt/dyn/bin/dollar-lib '\$LIB is what the loader was built with'
dyn_refused "add refuses \${PLATFORM} in a RUNPATH" /opt/dyn/bin/dollar-platform '\$PLATFORM is the CPU'
dyn_refused "add refuses a library found through RUNPATH that the agent owns" /opt/dyn/bin/filelib \
	"library 'libpwn.so', found in the search directory '/opt/dyn/filelib': .*not root's alone (owner $AUID"
dyn_refused "add refuses a relative DT_NEEDED (a library linked by path)" /opt/dyn/bin/needed-rel \
	"NEEDED 'sub/libnoso.so' is a relative path"
mkdir -p "$R/opt/dyn/abs" && cp "$D/abs/libnoso.so" "$R/opt/dyn/abs/libnoso.so" && chown "$AUID" "$R/opt/dyn/abs"
dyn_refused "add refuses an absolute DT_NEEDED in an agent's directory" /opt/dyn/bin/needed-abs \
	"NEEDED library '/opt/dyn/abs/libnoso.so': directory '/opt/dyn/abs' is not root's alone"
chown 0 "$R/opt/dyn/abs"
printf '#!/opt/dyn/bin/needed-abs\n' >"$S/dynint"
ok "... and accepts it once that directory is root's" "$P" trusted add dynint "$S/dynint" --root "$R" --no-install
"$P" trusted remove dynint --no-install --root "$R" >/dev/null
# A root-owned library found through a clean RUNPATH is checked in turn: its own RUNPATH.
cp "$D/libpwn-chain.so" "$R/opt/dyn/rootlib/libpwn.so"
dyn_refused "add refuses a library whose own RUNPATH is an agent's directory" /opt/dyn/bin/rootlib \
	"library '/opt/dyn/rootlib/libpwn.so': RUNPATH entry '\$ORIGIN/../agentlib' -> .*directory '/opt/dyn/agentlib' is not root's alone"
cp "$D/libpwn.so" "$R/opt/dyn/rootlib/libpwn.so"
# The program itself: an ELF trusted command, $ORIGIN is /data/trusted.
cp "$D/origin-runpath" "$S/elfdyn"
mkdir -p "$R/data/lib" && chown "$AUID" "$R/data/lib"
add_refused "add refuses an ELF trusted command whose \$ORIGIN/../lib (/data/lib) is an agent's" elfdyn \
	"elfdyn: RUNPATH entry '\$ORIGIN/../lib' -> '/data/trusted/../lib': directory '/data/lib' is not root's alone"
rmdir "$R/data/lib"
cp "$D/rootlib" "$S/elfdyn"
ok "add accepts an ELF trusted command whose RUNPATH and library are root's alone" \
	"$P" trusted add elfdyn "$S/elfdyn" --root "$R"
like "... and the agent runs it as pi-tools, with the library from its RUNPATH" "$(agent elfdyn 2>&1)" "^uid=10002 v=42$"
# The image changed after add: check and install refuse.
chown "$AUID" "$R/opt/dyn/rootlib/libpwn.so"
image_changed "the library in the RUNPATH directory is an agent's" \
	"FAIL /data/trusted/elfdyn: library 'libpwn.so', found in the search directory '/opt/dyn/rootlib'" "libpwn.so"
chown 0 "$R/opt/dyn/rootlib/libpwn.so"
# /etc/ld.so.preload: glibc's loader maps what it lists into every dynamic program.
printf '/opt/dyn/rootlib/libpwn.so\n' >"$R/etc/ld.so.preload" && chmod 0666 "$R/etc/ld.so.preload"
image_changed "/etc/ld.so.preload is writable by others" "/etc/ld.so.preload .every dynamic program loads what it lists.: .* is not root's alone .owner 0, mode 0666" "ld.so.preload"
chmod 0644 "$R/etc/ld.so.preload"
printf '# a comment\nlibpwn.so\n' >"$R/etc/ld.so.preload"
image_changed "/etc/ld.so.preload lists a name, not a path" "/etc/ld.so.preload entry 'libpwn.so': not an absolute path" "ld.so.preload"
printf '/opt/dyn/rootlib/libpwn.so /opt/dyn/filelib/libpwn.so\n' >"$R/etc/ld.so.preload"
image_changed "/etc/ld.so.preload lists a library the agent owns" "/etc/ld.so.preload library '/opt/dyn/filelib/libpwn.so'.*not root's alone" "ld.so.preload"
printf '/opt/dyn/rootlib/libpwn.so\n' >"$R/etc/ld.so.preload"
ok "check passes with an /etc/ld.so.preload that is root's alone and lists root's library" "$P" trusted check --root "$R"
rm -f "$R/etc/ld.so.preload"
"$P" trusted remove elfdyn --root "$R" >/dev/null
rm -rf "$R/opt/dyn"
fi

# --- the caller's ignored signals and lowered soft limits ---------------------------------
# sudo restores its caller's signal dispositions and keeps its rlimits: with SIGXFSZ ignored
# and `ulimit -f 0`, a script's writes fail and it goes on (reproduced: a rotated secret
# left empty). The wrapper puts ignored signals back to their defaults and soft limits up to
# the hard ones; sudo called directly, around it, still hands them on (docs/trusted.md).
# 34 is one of the signals musl keeps for itself (32-34), whose sigaction refuses them: an
# SIG_IGN on it survived the wrapper (CI's caller had 32 and 33 ignored).
cat >"$S/callerstate" <<'EOF'
#!/bin/sh
echo "ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status) fsize=$(ulimit -f) nofile=$(ulimit -n)"
EOF
chmod 0755 "$S/callerstate"
ok "add callerstate" "$P" trusted add callerstate "$S/callerstate" --root "$R"
hard_n=$(agent sh -c 'ulimit -H -n')
out=$(agent sh -c 'trap "" HUP PIPE XFSZ 34; ulimit -S -f 0; ulimit -S -n 64; exec callerstate' 2>&1)
is "through the wrapper: no ignored signal reaches the script" "$(echo "$out" | sed -n 's/.*ign=\([0-9a-f]*\).*/\1/p')" 0000000000000000
# (this sudo puts a lowered soft file-size limit back itself: a property, both ways)
like "... the file-size limit back to the hard one" "$out" "fsize=$(agent sh -c 'ulimit -H -f')( |$)"
like "... and the open-files limit" "$out" "nofile=$hard_n( |$)"
out=$(agent sh -c 'trap "" HUP PIPE XFSZ; ulimit -S -n 64; exec sudo -n -u pi-tools -- /data/trusted/callerstate' 2>&1)
unlike "sudo called around the wrapper still hands them on (the script must check its writes)" \
	"$out" 'ign=0000000000000000'
"$P" trusted remove callerstate --root "$R" >/dev/null 2>&1

# --- a clean start: #!PISTISD trusted-interp INTERP [ARG] ----------------------------------
# A script that names `pistisd trusted-interp` as its interpreter gets neither the ignored
# signals nor the lowered soft limits, whoever calls it, sudo directly included. SIGCHLD
# ignored is the sharp one: Python's subprocess then reports 0 for every child.
{
	echo '#!/usr/local/bin/pistisd trusted-interp /bin/sh -e'
	tail -n +2 "$S/callerstate"
	echo 'echo "args=$#:$1:$2"; false; echo "-e was not passed"'
} >"$S/clean"
chmod 0755 "$S/clean"
ok "add a clean-start script (trusted-interp /bin/sh -e)" "$P" trusted add clean "$S/clean" --root "$R"
ok "check passes with it" "$P" trusted check --root "$R"
like "list marks it as starting clean" "$("$P" trusted list --root "$R" | grep '^clean ')" "  clean start"
unlike "... and not the others" "$("$P" trusted list --root "$R" | grep '^hello ')" "clean start"
is "... and says so in JSON" "$("$P" trusted list --root "$R" --json | python3 -c 'import json,sys; print(sorted((c["name"], c["clean_start"]) for c in json.load(sys.stdin)["commands"] if c["name"] in ("clean", "hello")))')" "[('clean', True), ('hello', False)]"
out=$(agent sh -c 'trap "" HUP PIPE XFSZ CHLD 34; ulimit -S -n 64; exec sudo -n -u pi-tools -- /data/trusted/clean "a b" c' 2>&1)
is "sudo called directly: no ignored signal reaches a clean-start script" "$(echo "$out" | sed -n 's/.*ign=\([0-9a-f]*\).*/\1/p')" 0000000000000000
like "... the open-files limit back to the hard one" "$out" "nofile=$hard_n( |$)"
like "... the arguments as given" "$out" "^args=2:a b:c$"
unlike "... and the #! line's ARG reached the interpreter (sh -e stops at false)" "$out" "was not passed"
like "through the wrapper too" "$(agent sh -c 'trap "" CHLD; exec clean x' 2>&1)" "ign=0000000000000000"
"$P" trusted remove clean --no-install --root "$R" >/dev/null
# An interval timer outlives execve (not fork: sudo, which forks the command, keeps a timer
# its caller armed to itself). Whatever runs a clean-start script, trusted-interp disarms
# the timers it was handed: run here without sudo, a plain script is ended by SIGALRM at
# the moment the caller chose, the clean one is not.
printf '#!/bin/sh\nsleep 1\necho finished\n' >"$S/slow" && chmod 0755 "$S/slow"
{ echo '#!/usr/local/bin/pistisd trusted-interp /bin/sh'; tail -n +2 "$S/slow"; } >"$S/slowclean"
chmod 0755 "$S/slowclean"
"$P" trusted add slow "$S/slow" --no-install --root "$R" >/dev/null
ok "add slowclean" "$P" trusted add slowclean "$S/slowclean" --root "$R"
PR=/usr/local/lib/pistis-tests/probe
out=$(agent $PR itimer-exec 300 /data/trusted/slow 2>&1)
is "a timer armed before exec ends a plain script (SIGALRM: 142)" "$?" 142
unlike "... before it finished" "$out" finished
like "... not one that starts clean" "$(agent $PR itimer-exec 300 /data/trusted/slowclean 2>&1)" finished
like "... and through sudo, which forks it, both finish" \
	"$(agent $PR itimer-exec 300 /usr/bin/sudo -n -u pi-tools -- /data/trusted/slow 2>&1)" finished
"$P" trusted remove slow --no-install --root "$R" >/dev/null
"$P" trusted remove slowclean --root "$R" >/dev/null
# The persona: an agent calling with PER_LINUX32|UNAME26 makes uname lie to a plain script;
# a clean start sets PER_LINUX back. And trusted-interp is pistisd's alone: env or sh would
# take "trusted-interp /bin/sh" as a file name looked up from the working directory.
printf '#!/bin/sh\necho "m=$(uname -m) r=$(uname -r)"\n' >"$S/persona" && chmod 0755 "$S/persona"
{ echo '#!/usr/local/bin/pistisd trusted-interp /bin/sh'; tail -n +2 "$S/persona"; } >"$S/personaclean"
chmod 0755 "$S/personaclean"
"$P" trusted add persona "$S/persona" --no-install --root "$R" >/dev/null
ok "add personaclean" "$P" trusted add personaclean "$S/personaclean" --root "$R"
like "a persona the caller chose reaches a plain script through sudo (uname says i686)" \
	"$(agent setarch linux32 --uname-2.6 /usr/bin/sudo -n -u pi-tools -- /data/trusted/persona 2>&1)" "m=i686 r=2\.6"
like "... not one that starts clean" \
	"$(agent setarch linux32 --uname-2.6 /usr/bin/sudo -n -u pi-tools -- /data/trusted/personaclean 2>&1)" "m=$(uname -m) r=$(uname -r)"
"$P" trusted remove persona --no-install --root "$R" >/dev/null
"$P" trusted remove personaclean --root "$R" >/dev/null
interp_refused "add refuses trusted-interp behind env (env would run a file of that name)" cleanviaenv '#!/usr/bin/env trusted-interp /bin/sh'
interp_refused "add refuses trusted-interp behind sh (a file name to sh)" cleanviash '#!/bin/sh trusted-interp /bin/sh'
interp_refused "add refuses trusted-interp with a relative interpreter" cleanrel '#!/usr/local/bin/pistisd trusted-interp sh'
interp_refused "add refuses trusted-interp naming no interpreter" cleannone '#!/usr/local/bin/pistisd trusted-interp'
interp_refused "add refuses trusted-interp with an interpreter the agent owns" cleanown '#!/usr/local/bin/pistisd trusted-interp /workspaces/tools/sh'
interp_refused "add refuses trusted-interp with an interpreter in a directory others can write" cleanshared '#!/usr/local/bin/pistisd trusted-interp /opt/shared/sh -e'
interp_refused "add refuses trusted-interp through env with options" cleanenv '#!/usr/local/bin/pistisd trusted-interp /usr/bin/env -S sh -e'
out=$(agent /usr/local/bin/pistisd 'trusted-interp sh' /dev/null 2>&1)
is "pistisd trusted-interp refuses a relative interpreter at run time (exit 100)" "$?" 100
like "... and says so" "$out" "interpreter 'sh' is not an absolute path"
"$P" trusted install --root "$R" >/dev/null 2>&1

# --- 12. a mount beneath a shared or write tree, without nosuid --------------------------
# Agents lose no_new_privs only while every tree they share or may write is nosuid: a
# setuid file agent A leaves there runs as A for agent B. A volume mounted inside
# /workspaces, or a tmpfs inside /tmp, is such a tree as much as the one it is in; the
# per-command check looked at the top mount alone (fstatfs), and B ran A's file as A.
PROBE=/usr/local/lib/pistis-tests/probe
arun() { local a=$1; shift; in_root "$R" pistisd run --agent "rt/$a" "$@"; }
harden_shared "$R"
is "every shared tree nosuid: agents run without no_new_privs (trusted commands on)" \
	"$(arun a -- $PROBE 2>&1 | probe_field NoNewPrivs)" 0
for t in workspaces/proj tmp/sub; do
	mkdir -p "$R/$t" && mount -t tmpfs -o mode=1777 rt-sub "$R/$t"
	is "a mount beneath /${t%%/*} without nosuid: no_new_privs stays on" \
		"$(arun a -- $PROBE 2>&1 | probe_field NoNewPrivs)" 1
	arun a -- /bin/sh -c "cp /usr/bin/id /$t/id-a && chmod 4755 /$t/id-a"
	ok "... agent A made a setuid file there" test -u "$R/$t/id-a"
	out=$(arun b -- /$t/id-a 2>&1)
	like "... which agent B runs" "$out" '^uid=[0-9]+'
	unlike "... but not as A" "$out" "euid="
	like "... pistisd check names it" "$(in_root "$R" pistisd check --no-walk 2>&1)" \
		"/$t: a mount beneath it without nosuid"
	umount "$R/$t"
done
mkdir -p "$R/srv/proj/vol" "$R/data/pistis"
printf '[{"path": "/srv/proj", "access": "write"}]\n' >"$R/data/pistis/rules.json" &&
	chmod 0600 "$R/data/pistis/rules.json"
mount --bind "$R/srv/proj" "$R/srv/proj" && mount -o remount,bind,nosuid,nodev "$R/srv/proj"
mount -t tmpfs -o mode=1777 rt-sub "$R/srv/proj/vol"
is "a mount beneath a write rule's tree without nosuid: no_new_privs stays on" \
	"$(arun a -- $PROBE 2>&1 | probe_field NoNewPrivs)" 1
umount "$R/srv/proj/vol"
is "... nosuid all the way down: no no_new_privs again" \
	"$(arun a -- $PROBE 2>&1 | probe_field NoNewPrivs)" 0
umount "$R/srv/proj"
rm "$R/data/pistis/rules.json"

# --- 13. pi-tools' home: the HOME every trusted command runs with --------------------------
# sudo sets HOME from pi-tools' /etc/passwd line; git, curl, ssh, Python (usercustomize.py in
# its user site) read their dotfiles there. An image that made pi-tools itself with its home
# in /tmp: the script ran with HOME=/tmp/pi-tools and read what an agent had put there.
cp "$R/etc/passwd" "$S/passwd.saved"
sed -i 's|^\(pi-tools:[^:]*:10002:10002:[^:]*:\)[^:]*:|\1/tmp/pi-tools:|' "$R/etc/passwd"
agent /bin/sh -c 'mkdir -p /tmp/pi-tools && echo planted >/tmp/pi-tools/.toolrc && chmod 0755 /tmp/pi-tools'
printf '#!/bin/sh\necho "home=$HOME"; cat "$HOME/.toolrc"\n' >"$S/toolrc" && chmod 0755 "$S/toolrc"
out=$("$P" trusted add toolrc "$S/toolrc" --root "$R" 2>&1)
is "add refuses while pi-tools' home is where agents write (exit 1)" "$?" 1
like "... saying why" "$out" "pi-tools' home .*'/tmp/pi-tools': directory '/tmp' is not root's alone"
unlike "... and the agent's file is not read as pi-tools" "$(agent /bin/sh -c 'toolrc' 2>&1)" "planted"
"$P" trusted add toolrc "$S/toolrc" --no-install --root "$R" >/dev/null 2>&1
like "check fails on an image changed after add" "$("$P" trusted check --root "$R" 2>&1)" \
	"pi-tools' home .*'/tmp/pi-tools'"
mkdir -p "$R/opt/pt-home" && chmod 0755 "$R/opt/pt-home"
sed -i 's|^\(pi-tools:[^:]*:10002:10002:[^:]*:\)[^:]*:|\1/opt/pt-home:|' "$R/etc/passwd"
ok "... a home root's alone is fine" "$P" trusted check --root "$R"
sed -i 's|^\(pi-tools:[^:]*:10002:10002:[^:]*:[^:]*:\).*|\1/tmp/pi-tools/sh|' "$R/etc/passwd"
agent /bin/sh -c 'cp /bin/sh /tmp/pi-tools/sh'
like "... and check fails on a shell (SHELL) an agent wrote" "$("$P" trusted check --root "$R" 2>&1)" \
	"pi-tools' shell .*'/tmp/pi-tools/sh': directory '/tmp' is not root's alone"
cp "$S/passwd.saved" "$R/etc/passwd"
"$P" trusted remove toolrc --root "$R" >/dev/null 2>&1

# --- 14. the caller's arguments: the interpreter's, or the script's? ----------------------
# The kernel runs `INTERP ARG SCRIPT ARGS...`, ARGS the caller's. A shell or python hands
# them to the script; sed, awk, jq, make or expect behind `-f` read them as their own options
# and input files, and `sh -s` or `perl -p` read the caller's stdin or files: the agent ran
# its own sed command (`-e '1e id'`) as pi-tools and had a secret printed (reproduced). And
# `sh -x` traces the script's commands, a secret's value in them, to the caller's stderr.
echo "a5g-$$-secret" >"$R/data/.secrets/argtok" && chown 10002:10002 "$R/data/.secrets/argtok" &&
	chmod 0600 "$R/data/.secrets/argtok"
args_refused() { # desc name first-line body pattern cmd...: add refuses; the agent learns nothing
	local d=$1 n=$2 pat=$5 out rc
	printf '%s\n%s\n' "$3" "$4" >"$S/$n" && chmod 0755 "$S/$n"
	shift 5
	out=$("$P" trusted add "$n" "$S/$n" --root "$R" 2>&1)
	rc=$?
	if [ $rc -eq 1 ] && [ ! -e "$R/data/trusted/$n" ] && printf '%s' "$out" | grep -q -- "$pat"; then
		_tap_result 0 "add refuses $d"
	else
		_tap_result 1 "add refuses $d" "exit $rc: $out"
	fi
	out=$(printf 'cat /data/.secrets/argtok\nid\n' | agent sudo -n -u pi-tools -- "/data/trusted/$n" "$@" 2>&1)
	unlike "... so the agent's call '$*' reads no secret and runs nothing as pi-tools" "$out" \
		"a5g-$$-secret|uid=10002"
	"$P" trusted remove "$n" --no-install --root "$R" >/dev/null 2>&1
}
args_refused "'#!/bin/sed -f' (the caller's -e runs, its files are read)" sedf '#!/bin/sed -f' \
	's/^/line: /' "the script follows the option '-f', and sed is no interpreter" \
	-e '1e id' /data/.secrets/argtok
args_refused "'#!/usr/bin/awk -f' (the caller's files are read)" awkf '#!/usr/bin/awk -f' \
	'{ print "line: " $0 }' "option '-f'" /data/.secrets/argtok
# without any option: GNU getopt takes the caller's -e after SCRIPT all the same
args_refused "'#!/bin/sed' with no option (the caller's -e runs, its files are read)" sedbare \
	'#!/bin/sed' 's/^/line: /' "sed reads the caller's arguments as its own options" \
	-e '1e id' /data/.secrets/argtok
args_refused "'#!/usr/bin/env sed' (the same through env)" sedenv '#!/usr/bin/env sed' \
	's/^/line: /' "sed reads the caller's arguments as its own options" \
	-e '1e id' /data/.secrets/argtok
args_refused "'#!/bin/sh -s' (commands from the caller's stdin)" shs '#!/bin/sh -s' \
	'echo "user=$(id -un)"' "option '-s' to sh"
args_refused "'#!/usr/bin/perl -p' (the caller's files printed)" perlp '#!/usr/bin/perl -p' \
	's/^/line: /' "option '-p' to perl" /data/.secrets/argtok
args_refused "'#!/bin/sh -x' (every command traced, values expanded, to the caller's stderr)" \
	shx '#!/bin/sh -x' 'T=$(cat /data/.secrets/argtok); : "$T"' "traces every command"
# `sh -v` prints every line the shell reads to the caller's stderr, those of a file the
# script sources too: a secrets file read with '.' (TOKEN=…) reached the agent.
echo "TOKEN=a5g-$$-secret" >"$R/data/.secrets/argenv" && chown 10002:10002 "$R/data/.secrets/argenv" &&
	chmod 0600 "$R/data/.secrets/argenv"
args_refused "'#!/bin/sh -v' (every line read, a sourced secrets file's too, to the caller's stderr)" \
	shv '#!/bin/sh -v' '. /data/.secrets/argenv; echo "token read"' "prints every line the shell reads"
args_refused "'#!/bin/bash --verbose' (the same)" bashverbose '#!/bin/bash --verbose' \
	'. /data/.secrets/argenv; echo "token read"' "option '--verbose' to bash prints every line"
args_refused "'#!/bin/sh /opt/other' (a script other than the pinned one)" shother '#!/bin/sh /tmp/other' \
	'echo pinned' "'/tmp/other' is not an option"
# Perl's warnings print the values they are about: a script that reads its key and uses it
# as a number printed 'Argument "a5g-…-secret" isn't numeric' to the agent (reproduced).
args_refused "'#!/usr/bin/perl -w' (warnings print the values they are about)" perlwarn \
	'#!/usr/bin/perl -w' 'open my $f, "<", "/data/.secrets/argtok"; my $t = <$f>; chomp $t; my $n = $t + 0;' \
	"option '-w' to perl turns on warnings, which print the values they are about"
args_refused "'#!/usr/bin/perl -Tw' (the same in a letter group)" perlwarn2 \
	'#!/usr/bin/perl -Tw' 'open my $f, "<", "/data/.secrets/argtok"; my $t = <$f>; chomp $t; my $n = $t + 0;' \
	"option '-Tw' to perl turns on warnings"
printf '#!/usr/bin/perl -T\nprint "args=@ARGV\\n";\n' >"$S/perlw" && chmod 0755 "$S/perlw"
ok "add still accepts plain flags ('#!/usr/bin/perl -T')" "$P" trusted add perlw "$S/perlw" --root "$R"
is "... and the caller's arguments reach that script as its own" \
	"$(agent sudo -n -u pi-tools -- /data/trusted/perlw -e /data/.secrets/argtok 2>&1)" \
	"args=-e /data/.secrets/argtok"
# Added before this check (an older pistisd): install and check refuse it now.
printf '#!/bin/sed -f\ns/^/x/\n' >"$R/data/trusted/oldsed" && chmod 0755 "$R/data/trusted/oldsed"
like "check names a script added before, whose interpreter reads the caller's arguments" \
	"$("$P" trusted check --root "$R" 2>&1)" "oldsed: interpreter '/bin/sed -f'"
rm -f "$R/data/trusted/oldsed"
"$P" trusted remove perlw --root "$R" >/dev/null 2>&1
# A debugger on the #! line: node's inspector (`--inspect=HOST:PORT`) passed as a
# "--NAME=VALUE" flag, and listens on TCP in the network namespace every agent shares; any
# agent that connects runs code in the script as pi-tools (reproduced outside the root with
# `node inspect` reading a file through a script's inspector). The root has no node: a
# stand-in of that name, which the interpreter's checks pass as they would node's.
cp "$R/bin/dash" "$R/usr/bin/node"
for a in --inspect=127.0.0.1:9229 --inspect_brk=9229; do
	printf '#!/usr/bin/node %s\nconsole.log("hi")\n' "$a" >"$S/nodeinsp" && chmod 0755 "$S/nodeinsp"
	out=$("$P" trusted add nodeinsp "$S/nodeinsp" --root "$R" 2>&1)
	rc=$?
	is "add refuses '#!/usr/bin/node $a' (a debugger every agent reaches): exit 1, nothing added" \
		"$rc:$(test -e "$R/data/trusted/nodeinsp" && echo added)" "1:"
	like "... saying why" "$out" "option '$a' to node starts a debugger on the network that every agent shares"
done
printf '#!/usr/bin/node --max-old-space-size=64\nconsole.log("hi")\n' >"$S/nodeok" && chmod 0755 "$S/nodeok"
ok "... and still adds '#!/usr/bin/node --max-old-space-size=64'" "$P" trusted add nodeok "$S/nodeok" --root "$R" --no-install
"$P" trusted remove nodeok --root "$R" --no-install >/dev/null 2>&1
printf '#!/usr/local/bin/pistisd trusted-interp /usr/bin/node --inspect=9229\n1\n' >"$R/data/trusted/oldinsp" &&
	chmod 0755 "$R/data/trusted/oldinsp"
like "check names a script added before with the inspector on a clean start's line" \
	"$("$P" trusted check --root "$R" 2>&1)" "oldinsp: .*option '--inspect=9229' to node starts a debugger"
rm -f "$R/data/trusted/oldinsp"
# Options that load code the #! line does not pin, or print or write what the script holds,
# passed as "--NAME=VALUE" too: `--require=./x.js` ran the caller's working directory's
# x.js first, `--report-uncaught-exception` wrote the environment to a 0644 report.*.json
# there, `--trace-warnings` is one of V8's and node's hundreds of --trace-… (reproduced
# outside the root with node 20; the root has none: the stand-in above).
# refuses_option INTERP NAME OPTION WHY: `add` of a script whose #! line is INTERP OPTION
# exits 1, adds nothing and says WHY (an extended regex) about OPTION to NAME
refuses_option() {
	printf '#!%s %s\n' "$1" "$3" >"$S/opt" && chmod 0755 "$S/opt"
	out=$("$P" trusted add opt "$S/opt" --root "$R" --no-install 2>&1)
	rc=$?
	is "add refuses '#!$1 $3': exit 1, nothing added" \
		"$rc:$(test -e "$R/data/trusted/opt" && echo added)" "1:"
	like "... saying why" "$out" "option '$3' to $2 ($4)"
	"$P" trusted remove opt --root "$R" --no-install >/dev/null 2>&1
}
for a in --require=./x.js --env_file=.env --report-uncaught-exception --trace-warnings; do
	refuses_option /usr/bin/node node "$a" \
		'loads code the #! line does not pin|prints or writes what the script holds'
done
rm -f "$R/usr/bin/node"
# Python's warnings beyond the default (-Wdefault, -X dev) printed the line of a secrets
# module that warned (`TOKEN = "…\d"`, an invalid escape), -v each module and its file
# (reproduced outside the root with python 3.11; the root has none: a stand-in likewise).
cp "$R/bin/dash" "$R/usr/bin/python3"
for a in -Wdefault -Xdev -v -Ximporttime -Wignore::x.Warning; do
	refuses_option /usr/bin/python3 python3 "$a" 'turns on warnings|prints every module|loads code'
done
printf '#!/usr/bin/python3 -Wignore\nprint("hi")\n' >"$S/pyok" && chmod 0755 "$S/pyok"
ok "... and still adds '#!/usr/bin/python3 -Wignore'" "$P" trusted add pyok "$S/pyok" --root "$R" --no-install
"$P" trusted remove pyok --root "$R" --no-install >/dev/null 2>&1
rm -f "$R/usr/bin/python3"

done_testing
