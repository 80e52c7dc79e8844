#!/bin/bash
# pistisd trusted: an agent runs a trusted command as pi-tools through sudo and nothing
# else; the script runs with a clean environment in /; a changed script is refused by its
# digest; a drop-in visudo rejects is never installed; harden-setuid leaves sudo as the only
# way up. Debian root (real sudo 1.9.13) and the busybox/musl root (no sudo).
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || missing "$P not built"
S=$(scratch)

# --- musl root: no sudo --------------------------------------------------------------
M=$(root_fresh musl) || { echo "Bail out! no musl root"; exit 1; }
printf '#!/bin/sh\necho hi\n' >"$S/hi.sh"
chmod 0755 "$S/hi.sh"
out=$("$P" trusted add hi "$S/hi.sh" --root "$M" 2>&1)
is "musl root: add exits 1 without sudo" "$?" 1
like "musl root: says trusted commands need sudo" "$out" "trusted commands need sudo"
[ ! -e "$M/data/trusted/hi" ]
is "musl root: nothing copied" "$?" 0
out=$("$P" trusted check --root "$M" 2>&1)
is "musl root: check exits 1" "$?" 1
like "musl root: check says sudo is missing" "$out" "need sudo"

# --- debian root ---------------------------------------------------------------------
R=$(root_fresh debian) || { echo "Bail out! no debian root"; exit 1; }
AGENT=pi-agent-aaaa
# Identities as sandbox-users writes them (pi-tools 10002, pi-sandbox 10010, one agent).
if "$P" users --help >/dev/null 2>&1; then
	"$P" users ensure-base --root "$R" >/dev/null
	AGENT=$("$P" users ensure t1 --root "$R" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
else
	echo 'pi-tools:x:10002:10002:pistis trusted commands:/nonexistent:/usr/sbin/nologin' >>"$R/etc/passwd"
	echo "$AGENT:x:10100:10100::/tmp:/bin/sh" >>"$R/etc/passwd"
	echo 'pi-tools:x:10002:' >>"$R/etc/group"
	echo "pi-sandbox:x:10010:$AGENT" >>"$R/etc/group"
	echo "$AGENT:x:10100:" >>"$R/etc/group"
	echo 'pi-tools:!:19000::::::' >>"$R/etc/shadow"
	echo "$AGENT:!:19000::::::" >>"$R/etc/shadow"
fi
AUID=$(awk -F: -v u="$AGENT" '$1 == u { print $3 }' "$R/etc/passwd")
# sudo resolves the host name (Debian builds it with fqdn); a container's /etc/hosts has it.
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts"

# agent CMD...   CMD as the agent (its uid/gid, pi-sandbox as the only supplementary
# group), no no_new_privs, a clean environment plus whatever `env` arguments come first.
agent() {
	chroot --userspec="$AUID:$AUID" --groups=10010 "$R" /usr/bin/env -i \
		PATH=/data/bin:/usr/bin:/bin HOME=/tmp "$@"
}

cat >"$S/hello" <<'EOF'
#!/bin/sh
echo "user=$(id -un) uid=$(id -u) gid=$(id -g) groups=$(id -G)"
echo "cwd=$(pwd -P) umask=$(umask)"
[ -r /data/.secrets/token ] && echo "secret=readable"
for a in "$@"; do echo "arg=[$a]"; done
env | sort | sed 's/^/env:/'
EOF
chmod 0755 "$S/hello"
ln -s "$S/hello" "$S/hello-link"
cp "$S/hello" "$S/hello-gw" && chmod 0775 "$S/hello-gw"
cp "$S/hello" "$S/hello-user" && chown 1000 "$S/hello-user"

out=$("$P" trusted add hello "$S/hello-link" --root "$R" 2>&1)
is "add refuses a symlink" "$?" 1
like "add says it is a symlink" "$out" "symlink"
out=$("$P" trusted add hello "$S/hello-gw" --root "$R" 2>&1)
is "add refuses a group-writable script" "$?" 1
out=$("$P" trusted add hello "$S/hello-user" --root "$R" 2>&1)
is "add refuses a script owned by another user" "$?" 1
for bad in a.b 'x~' ../x Hello '-x' ''; do
	"$P" trusted add "$bad" "$S/hello" --root "$R" >/dev/null 2>&1
	is "add refuses name '$bad' (usage)" "$?" 100
done
[ ! -e "$R/data/trusted" ] || [ -z "$(ls -A "$R/data/trusted")" ]
is "nothing was copied by the refused adds" "$?" 0

out=$("$P" trusted add hello "$S/hello" --root "$R" 2>&1)
is "add hello exits 0" "$?" 0
like "add confirms sudo -l for the agent" "$out" "confirmed for 1 agent"
# Agents lose no_new_privs: the image's setuid programs and the places agents could leave one
# are named, with the fix.
like "add warns of the setuid programs besides sudo agents may now run" "$out" \
	"[0-9]+ setuid/setgid or capability program\(s\) besides sudo are in the image .*harden-setuid"
like "... and of the directories agents may write without nosuid (/var/tmp)" "$out" \
	"agents may write (is|are) on a mount without nosuid \(.*/var/tmp"
digest=$(sha256sum "$S/hello" | cut -d' ' -f1)
is "script copied root 0755" "$(stat -c '%u %a' "$R/data/trusted/hello")" "0 755"
is "wrapper root 0755" "$(stat -c '%u %a' "$R/data/bin/hello")" "0 755"
is "drop-in root 0440" "$(stat -c '%u %a' "$R/etc/sudoers.d/pistis-trusted")" "0 440"
is "secrets dir pi-tools 0700" "$(stat -c '%u %a' "$R/data/.secrets")" "10002 700"
like "drop-in pins the digest" "$(cat "$R/etc/sudoers.d/pistis-trusted")" "sha256:$digest /data/trusted/hello"
is "wrapper's interpreter is the root's pistisd trusted-exec" "$(head -n 1 "$R/data/bin/hello")" \
	'#!/usr/local/bin/pistisd trusted-exec'
like "wrapper names the sudo it runs" "$(cat "$R/data/bin/hello")" \
	'/usr/bin/sudo -n -u pi-tools -- /data/trusted/hello ARGS'
out=$("$P" trusted list --root "$R")
like "list shows the digest" "$out" "^hello +sha256:$digest"
out=$("$P" trusted list --root "$R" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["commands"][0]["name"], d["commands"][0]["digest"])')
is "list --json" "$out" "hello sha256:$digest"
ok "check passes" "$P" trusted check --root "$R"
# An image from before trusted-exec: its /bin/sh wrapper is rewritten by install.
printf '#!/bin/sh\n# pistis trusted command '"'"'hello'"'"': written by `pistisd trusted add`, do not edit.\nexec /usr/bin/sudo -n -u pi-tools -- /data/trusted/hello "$@"\n' >"$R/data/bin/hello"
exits 1 "check wants the trusted-exec form of an old /bin/sh wrapper" "$P" trusted check --root "$R"
ok "install rewrites it" "$P" trusted install --root "$R"
is "... into the trusted-exec form" "$(head -n 1 "$R/data/bin/hello")" '#!/usr/local/bin/pistisd trusted-exec'
ok "check passes again" "$P" trusted check --root "$R"
# A check that cannot be made (here /data/trusted is no directory): --json's report is still
# one JSON document, saying so, not the '{"problems":[' it had begun.
mv "$R/data/trusted" "$R/data/trusted.x" && touch "$R/data/trusted"
out=$("$P" trusted check --root "$R" --json 2>/dev/null)
is "check --json that cannot list /data/trusted exits 111" "$?" 111
is "... and still prints one JSON document saying why" "$(printf '%s' "$out" | python3 -c \
	'import json,sys; d=json.load(sys.stdin); print(d["ok"], d["error"])' 2>&1)" \
	"False Failed to list /data/trusted: Not a directory"
rm "$R/data/trusted" && mv "$R/data/trusted.x" "$R/data/trusted"

# The secrets' directory holds only pi-tools' and root's: an agent's link planted there (when
# it could write /data and the directory was not there yet, an earlier life of the volume)
# would take a secret written to its name where the agent reads it.
mkdir -p "$R/workspaces/x" && chown "$AUID:10010" "$R/workspaces/x"
ln -s /workspaces/x/loot "$R/data/.secrets/gh-token" && chown -h "$AUID:10010" "$R/data/.secrets/gh-token"
out=$("$P" trusted install --root "$R" 2>&1)
is "install with an agent's link in /data/.secrets: refused (exit 1)" "$?" 1
like "... naming it" "$out" "'/data/.secrets/gh-token' is owned by uid $AUID, not pi-tools or root"
out=$("$P" trusted check --root "$R" 2>&1)
is "check fails on it too" "$?" 1
like "... naming it" "$out" "gh-token' is owned by uid $AUID"
rm "$R/data/.secrets/gh-token"
rmdir "$R/data/.secrets" && mkdir -m 0777 "$R/data/.secrets" && chown "$AUID:10010" "$R/data/.secrets"
out=$("$P" trusted install --root "$R" 2>&1)
is "install with an agent's /data/.secrets: refused (exit 1)" "$?" 1
like "... naming its owner" "$out" "/data/.secrets is owned by uid $AUID, not pi-tools or root"
is "... and it is not handed to pi-tools" "$(stat -c '%u %a' "$R/data/.secrets")" "$AUID 777"
rmdir "$R/data/.secrets"
ok "install makes a new one once it is gone" "$P" trusted install --root "$R"
is "... pi-tools 0700" "$(stat -c '%u %a' "$R/data/.secrets")" "10002 700"

echo "s3cr3t" >"$R/data/.secrets/token"
chown 10002:10002 "$R/data/.secrets/token"
chmod 0600 "$R/data/.secrets/token"

# --- the agent runs it --------------------------------------------------------------
out=$(agent hello 'a b' '$(id)' ';x' 2>&1)
is "agent runs the trusted command" "$?" 0
like "runs as pi-tools, nothing more" "$out" "^user=pi-tools uid=10002 gid=10002 groups=10002$"
like "runs in /" "$out" "^cwd=/ "
like "runs with umask 0077" "$out" "umask=0077$"
like "the script can read the secrets" "$out" "^secret=readable$"
like "arguments arrive verbatim (1)" "$out" '^arg=\[a b\]$'
like "arguments arrive verbatim (2)" "$out" '^arg=\[\$\(id\)\]$'
like "arguments arrive verbatim (3)" "$out" '^arg=\[;x\]$'
like "PATH is the fixed secure path" "$out" "^env:PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin$"
envnames=$(printf '%s\n' "$out" | sed -n 's/^env:\([^=]*\)=.*/\1/p' | tr '\n' ' ')
# TERM is sudo's own (TERM=unknown when the caller has none; checked for / and %). sudo
# 1.9.16 and later (Debian 13) add SUDO_HOME, the caller's home from its passwd line.
is "the environment is sudo's clean set" "${envnames/SUDO_HOME /}" \
	"HOME LOGNAME MAIL PATH PWD SHELL SUDO_COMMAND SUDO_GID SUDO_UID SUDO_USER TERM USER "
case "$envnames" in *SUDO_HOME*)
	like "... and SUDO_HOME is the caller's home" "$out" \
		"^env:SUDO_HOME=$(awk -F: -v u="$AGENT" '$1 == u { print $6 }' "$R/etc/passwd")$" ;;
esac

# hostile environment for the wrapper: nothing of it reaches the script
mkdir -p "$R/tmp/evil"
printf '#!/bin/sh\necho PWNED-sudo\n' >"$R/tmp/evil/sudo"
printf 'echo PWNED-env\n' >"$R/tmp/evil/rc"
chmod -R a+rX "$R/tmp/evil"
chmod 0755 "$R/tmp/evil/sudo"
out=$(agent PATH=/tmp/evil:/data/bin:/usr/bin:/bin LD_PRELOAD=/tmp/evil/x.so LD_LIBRARY_PATH=/tmp/evil \
	BASH_ENV=/tmp/evil/rc ENV=/tmp/evil/rc SHELLOPTS=xtrace PS4='$(echo PWNED-ps4)' \
	PYTHONPATH=/tmp/evil NODE_OPTIONS=--require=/tmp/evil/x.js GIT_CONFIG_COUNT=1 \
	GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=/tmp/evil/sudo GIT_CONFIG_GLOBAL=/tmp/evil/rc \
	IFS=/ TERM=xterm SUDO_ASKPASS=/tmp/evil/sudo hello 2>&1)
like "hostile env: the trusted command still runs" "$out" "^user=pi-tools"
unlike "hostile env: the wrapper's PATH does not pick sudo" "$out" "PWNED"
for v in LD_PRELOAD LD_LIBRARY_PATH BASH_ENV ENV SHELLOPTS PS4 PYTHONPATH NODE_OPTIONS \
	GIT_CONFIG_COUNT GIT_CONFIG_KEY_0 GIT_CONFIG_VALUE_0 GIT_CONFIG_GLOBAL IFS SUDO_ASKPASS; do
	unlike "hostile env: $v does not reach the script" "$out" "^env:$v="
done
like "hostile env: the caller's TERM=xterm does not reach the script either (sudo's own)" "$out" \
	"^env:TERM=unknown$"
like "hostile env: PATH is still the secure path" "$out" "^env:PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin$"

# trusted-exec called directly, as the agent may: NAME only from an exact /data/bin path
# that is a root-owned regular file; anything else exits 100 and never reaches sudo (a
# stand-in sudo that would say so is put first on the sudo list for this part).
mv "$R/usr/bin/sudo" "$S/sudo.real"
printf '#!/bin/sh\necho SUDO-RAN "$@"\n' >"$R/usr/bin/sudo"
chmod 0755 "$R/usr/bin/sudo"
like "stand-in sudo: trusted-exec reaches it for a real wrapper" \
	"$(agent /usr/local/bin/pistisd trusted-exec /data/bin/hello x 2>&1)" \
	"^SUDO-RAN -n -u pi-tools -- /data/trusted/hello x$"
# What sudo is started with (its /proc/PID/environ, as execve gave it): TERM alone, and
# TERM=unknown where the caller has none or one too long, never an empty environment:
# Debian 13's sudo 1.9.16p2 dies of that (SIGSEGV) before its policy runs, and every
# trusted command called without a TERM failed with exit 139.
printf '#!/bin/sh\ntr "\\0" "\\n" </proc/$$/environ | sed "s/^/SUDO-ENV /"\n' >"$R/usr/bin/sudo"
is "stand-in sudo: a caller with no TERM starts sudo with TERM=unknown alone" \
	"$(agent /usr/local/bin/pistisd trusted-exec /data/bin/hello 2>&1)" "SUDO-ENV TERM=unknown"
is "... one with TERM=xterm-256color, with that alone" \
	"$(agent TERM=xterm-256color LANG=C.UTF-8 /usr/local/bin/pistisd trusted-exec /data/bin/hello 2>&1)" \
	"SUDO-ENV TERM=xterm-256color"
is "... one with a TERM over 128 bytes, with TERM=unknown" \
	"$(agent TERM="$(printf 'x%.0s' $(seq 129))" /usr/local/bin/pistisd trusted-exec /data/bin/hello 2>&1)" \
	"SUDO-ENV TERM=unknown"
printf '#!/bin/sh\necho SUDO-RAN "$@"\n' >"$R/usr/bin/sudo"
ln -s /data/bin/hello "$R/tmp/hello-link"
mkdir -p "$R/data/bin/sub" && cp -p "$R/data/bin/hello" "$R/data/bin/sub/hello"
ln -s /data/trusted/hello "$R/data/bin/linked"
ln -s /usr/bin/id "$R/data/bin/idlink"
cp "$R/data/bin/hello" "$R/data/bin/agentown" && chown "$AUID" "$R/data/bin/agentown"
for bad in /tmp/hello-link /data/trusted/hello /data/bin/../bin/hello /data/bin/../trusted/hello \
	/data/bin/sub/hello /data/bin/Hello /data/bin/a.b '/data/bin/$(id)' /data/bin/ //data/bin/hello \
	/data/bin//hello data/bin/hello ./hello /data/bin/linked /data/bin/idlink /data/bin/agentown \
	/data/bin/missing ''; do
	out=$(agent /usr/local/bin/pistisd trusted-exec "$bad" 2>&1)
	rc=$?
	if [ $rc -eq 100 ] && ! printf '%s' "$out" | grep -q 'SUDO-RAN\|user='; then
		_tap_result 0 "trusted-exec '$bad': refused (100), sudo not run"
	else
		_tap_result 1 "trusted-exec '$bad': refused (100), sudo not run" "exit $rc: $out"
	fi
done
out=$(agent /usr/local/bin/pistisd trusted-exec 2>&1)
is "trusted-exec with no path: usage (100)" "$?" 100
out=$(cd "$R/tmp" && agent sh -c 'exec /tmp/hello-link' 2>&1)
is "a symlink to the wrapper is refused (100)" "$?" 100
unlike "... and ran no sudo" "$out" "SUDO-RAN"
rm -rf "$R/tmp/hello-link" "$R/data/bin/sub" "$R/data/bin/linked" "$R/data/bin/idlink" "$R/data/bin/agentown"
mv "$S/sudo.real" "$R/usr/bin/sudo"
ok "the real sudo is back (setuid root)" test -u "$R/usr/bin/sudo" -a "$(stat -c %u "$R/usr/bin/sudo")" = 0
like "trusted-exec --help" "$(agent /usr/local/bin/pistisd trusted-exec --help)" "Usage: pistisd trusted-exec"

# --- what the agent cannot do ---------------------------------------------------------
fails "agent cannot list /data/.secrets" agent ls /data/.secrets
fails "agent cannot read a secret" agent cat /data/.secrets/token
fails "agent cannot write the script" agent sh -c 'echo x >>/data/trusted/hello'
fails "agent cannot create in /data/trusted" agent sh -c 'echo x >/data/trusted/new'
fails "agent cannot replace the wrapper" agent sh -c 'echo x >/data/bin/hello'
fails "agent cannot create in /data/bin" agent sh -c 'echo x >/data/bin/new'
fails "agent cannot write the drop-in" agent sh -c 'echo x >>/etc/sudoers.d/pistis-trusted'
fails "agent cannot read the drop-in" agent cat /etc/sudoers.d/pistis-trusted

# try_sudo DESC ARGS...   the agent's sudo must refuse and run nothing
try_sudo() {
	local d=$1
	shift
	out=$(agent "$@" </dev/null 2>&1)
	local rc=$?
	if [ $rc -ne 0 ] && ! printf '%s' "$out" | grep -q '^user=\|uid=0\|uid=10002'; then
		_tap_result 0 "$d"
	else
		_tap_result 1 "$d" "exit $rc: $out"
	fi
}
try_sudo "no shell as pi-tools" sudo -n -u pi-tools sh -c id
try_sudo "no /bin/sh as pi-tools" sudo -n -u pi-tools /bin/sh -c id
try_sudo "no other command as pi-tools" sudo -n -u pi-tools /usr/bin/id
try_sudo "no sudoedit" sudoedit -n -u pi-tools /data/trusted/hello
try_sudo "no sudo -e" sudo -n -e -u pi-tools /etc/shadow
try_sudo "not as root" sudo -n -u root /data/trusted/hello
try_sudo "not as root by default" sudo -n /data/trusted/hello
try_sudo "not -u#-1" sudo -n -u#-1 /data/trusted/hello
try_sudo "not -u#0" sudo -n -u#0 /data/trusted/hello
try_sudo "not -g root" sudo -n -u pi-tools -g root /data/trusted/hello
try_sudo "not -E" sudo -n -E -u pi-tools /data/trusted/hello
try_sudo "not --preserve-env" sudo -n --preserve-env=PATH -u pi-tools /data/trusted/hello
try_sudo "not VAR=value" sudo -n -u pi-tools LD_PRELOAD=/tmp/x /data/trusted/hello
try_sudo "not -i" sudo -n -i -u pi-tools
try_sudo "not -s" sudo -n -s -u pi-tools
try_sudo "not -D (cwd)" sudo -n -D /tmp -u pi-tools /data/trusted/hello
try_sudo "not -C (keep fds)" sudo -n -C 9 -u pi-tools /data/trusted/hello
try_sudo "not through a symlink elsewhere" sh -c 'ln -s /data/trusted/hello /tmp/h && sudo -n -u pi-tools /tmp/h'
try_sudo "not a copy elsewhere" sh -c 'cp /data/trusted/hello /tmp/h2 && sudo -n -u pi-tools /tmp/h2'

# no_new_privs (what the spawn core sets by default) makes sudo useless: the conflict.
out=$(chroot --userspec="$AUID:$AUID" --groups=10010 "$R" /usr/bin/setpriv --no-new-privs \
	/usr/bin/env -i PATH=/data/bin:/usr/bin:/bin hello 2>&1)
is "with no_new_privs the trusted command cannot run" "$?" 1
like "... and sudo says why" "$out" "no new privileges"

# The spawn core's allow_setuid keeps only CAP_SETUID, CAP_SETGID and CAP_AUDIT_WRITE in
# the bounding set (SPAWN_SETUID_BOUNDING): enough for sudo, and an empty set is not.
# (Run through setpriv until `pistisd run --agent` can take this test over.)
out=$(chroot "$R" /usr/bin/setpriv --bounding-set -all,+setuid,+setgid,+audit_write \
	--reuid "$AUID" --regid "$AUID" --groups 10010 /usr/bin/env -i PATH=/data/bin:/usr/bin:/bin hello 2>&1)
like "with the spawn core's setuid bounding set the command runs" "$out" "^user=pi-tools uid=10002"
out=$(chroot "$R" /usr/bin/setpriv --bounding-set -all \
	--reuid "$AUID" --regid "$AUID" --groups 10010 /usr/bin/env -i PATH=/data/bin:/usr/bin:/bin hello 2>&1)
unlike "with an empty bounding set it cannot" "$out" "^user=pi-tools"

# --- the digest ----------------------------------------------------------------------
cp -p "$R/data/trusted/hello" "$S/orig"
echo 'echo tampered' >>"$R/data/trusted/hello"
out=$(agent hello 2>&1)
is "a changed script is refused by sudo" "$?" 1
unlike "... and did not run" "$out" "user=pi-tools|tampered"
out=$("$P" trusted check --root "$R" 2>&1)
is "check notices the changed script" "$?" 1
like "... and says what to do" "$out" "pistisd trusted install"
cp -p "$S/orig" "$R/data/trusted/hello"
ok "the original content runs again" agent hello

# --- installs that must not happen ------------------------------------------------------
cp -p "$R/etc/sudoers.d/pistis-trusted" "$S/dropin.before"
cp "$S/hello" "$S/world"
# 1. visudo -cf rejects the file: a stand-in visudo (root 0755) that rejects everything.
mv "$R/usr/sbin/visudo" "$S/visudo.real"
# Its second line holds a backslash, a quote and ESC: the message escapes each once.
printf '#!/bin/sh\necho "%s: syntax error near line 2 <<<" >&2\nprintf %s >&2\nexit 1\n' \
	'$2' "'back\\\\slash it'\\''s \\033[31m\\n'" >"$R/usr/sbin/visudo"
chmod 0755 "$R/usr/sbin/visudo"
out=$("$P" trusted add world "$S/world" --root "$R" 2>&1)
is "rejected by visudo -cf: exit 1" "$?" 1
like "... prints visudo's message" "$out" "visudo -cf rejected.*syntax error near line 2"
like "... on one line, each byte of it escaped once" "$out" \
	"near line 2 <<<\\\\nback\\\\\\\\slash it's \\\\x1b\\[31m$"
json=$("$P" trusted add world "$S/world" --root "$R" --json 2>/dev/null)
is "... --json: the message is that text" "$(printf '%s' "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["message"].split("<<<")[1])')" \
	"\\nback\\\\slash it's \\x1b[31m"
like "... visudo checked the temporary name" "$out" "/etc/sudoers.d/\.pistis-trusted\.[0-9a-f]+: syntax"
ok "... the installed drop-in is untouched" cmp "$S/dropin.before" "$R/etc/sudoers.d/pistis-trusted"
is "... no temporary file left" "$(ls -A "$R/etc/sudoers.d" | tr '\n' ' ')" "README pistis-trusted "
mv "$S/visudo.real" "$R/usr/sbin/visudo"
"$P" trusted remove world --root "$R" --no-install >/dev/null 2>&1
# 2. the whole configuration fails with it in place: the previous drop-in comes back.
printf 'Cmnd_Alias PISTIS_TRUSTED = /bin/true\n' >"$R/etc/sudoers.d/zz-conflict"
chmod 0440 "$R/etc/sudoers.d/zz-conflict"
"$P" trusted add world "$S/world" --root "$R" >"$S/out" 2>&1
is "full visudo -c failure: exit 1" "$?" 1
like "... says it restored the previous drop-in" "$(cat "$S/out")" "restored the previous one"
ok "... the previous drop-in is back" cmp "$S/dropin.before" "$R/etc/sudoers.d/pistis-trusted"
rm "$R/etc/sudoers.d/zz-conflict"
"$P" trusted remove world --root "$R" --no-install >/dev/null 2>&1
# 3. /etc/sudoers without the includedir line is reported, clearly.
cp -p "$R/etc/sudoers" "$S/sudoers"
sed -i '/includedir/d' "$R/etc/sudoers"
out=$("$P" trusted install --root "$R" 2>&1)
is "no includedir: exit 1" "$?" 1
like "... says so" "$out" "does not include /etc/sudoers.d"
cp -p "$S/sudoers" "$R/etc/sudoers"
ok "install again" "$P" trusted install --root "$R"
unlike "final names never have '.' or '~'" "$(ls -A "$R/etc/sudoers.d")" '^(pistis|\.pistis).*[.~]'

# --- adopt: a script the operator put in /data/bin ---------------------------------------
printf '#!/bin/sh\necho "tool as $(id -un)"\n' >"$R/data/bin/tool"
chmod 0755 "$R/data/bin/tool"
printf '#!/bin/sh\necho planted\n' >"$R/data/bin/planted"
chown "$AUID" "$R/data/bin/planted"
out=$("$P" trusted adopt planted --root "$R" 2>&1)
is "adopt refuses a file the agent owns" "$?" 1
like "... saying why" "$out" "/data/bin/planted is not root's file, writable by root alone, with one link: not adopted"
out=$("$P" trusted adopt nosuch --root "$R" 2>&1)
is "adopt of a missing /data/bin/NAME: exit 1" "$?" 1
like "... saying so" "$out" "there is no /data/bin/nosuch to adopt$"
# add with another script does not replace the operator's: it was lost without a word
cp -p "$R/data/bin/tool" "$S/tool.orig"
out=$("$P" trusted add tool "$S/hello" --root "$R" 2>&1)
is "add over an operator's /data/bin/NAME: refused (exit 1)" "$?" 1
like "... saying what to do" "$out" "/data/bin/tool is there and is not a trusted command's wrapper: not replaced. .pistisd trusted adopt tool."
ok "... and the operator's script is kept, nothing added" sh -c "cmp -s '$S/tool.orig' '$R/data/bin/tool' && test ! -e '$R/data/trusted/tool'"
ok "adopt tool" "$P" trusted adopt tool --root "$R"
is "adopted script is in /data/trusted" "$(stat -c '%u %a' "$R/data/trusted/tool")" "0 755"
like "the agent runs the adopted tool as pi-tools" "$(agent tool 2>&1)" "^tool as pi-tools$"
out=$("$P" trusted adopt tool --root "$R" 2>&1)
is "adopt again: unchanged" "$?" 0

# --- setuid inventory ------------------------------------------------------------------
install -m 4755 -o 0 "$R/usr/bin/id" "$R/usr/lib/suid-id"
like "before hardening a planted setuid file raises the agent" "$(agent /usr/lib/suid-id 2>&1)" "euid=0"
out=$("$P" trusted harden-setuid --dry-run --root "$R")
like "dry run lists the setuid files" "$out" "/usr/lib/suid-id"
is "dry run changes nothing" "$(stat -c %a "$R/usr/lib/suid-id")" 4755
out=$("$P" trusted harden-setuid --keep /bin/passwd --root "$R")
is "harden-setuid exits 0" "$?" 0
like "it reports sudo as kept" "$out" "^kept .* /usr/bin/sudo$"
like "it reports a cleared file" "$out" "^cleared .* /usr/lib/suid-id$"
left=$(cd "$R" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./data -o -path ./tmp \) -prune -o -type f -perm /6000 -print | sort | tr '\n' ' ')
is "only sudo and the kept file keep setuid/setgid" "$left" "./usr/bin/passwd ./usr/bin/sudo "
unlike "after hardening the planted file does not raise the agent" "$(agent /usr/lib/suid-id 2>&1)" "euid=0"
like "the trusted command still works after hardening" "$(agent hello 2>&1)" "^user=pi-tools"
out=$("$P" trusted install --root "$R" 2>&1)
like "install after hardening names only the program kept" "$out" \
	"1 setuid/setgid or capability program\(s\) besides sudo are in the image \('/usr/bin/passwd'\)"
# An agent may make its own file setuid and name it: quoted and escaped once, so a name like
# "x', 'su" is one program, not two.
hostile=$(printf "x', 'su\033[31m")
: >"$R/opt/$hostile" && chown 11600 "$R/opt/$hostile" && chmod 4755 "$R/opt/$hostile"
out=$("$P" trusted install --root "$R" 2>&1)
like "... a hostile setuid name is one entry, escaped once" "$out" \
	"2 setuid/setgid or capability program\(s\) besides sudo are in the image \(.*'/opt/x\\\\', \\\\'su\\\\x1b\\[31m'"
rm "$R/opt/$hostile"
# A tree deeper than the walk's bound (256): that branch is not walked and said so (exit 1),
# never the rest: it used to end the walk with "Symbolic link loop" (exit 111).
(mkdir -p "$R/opt/deep" && cd "$R/opt/deep" && for i in $(seq 300); do mkdir d && cd d; done)
install -m 4755 -o 0 "$R/usr/bin/id" "$R/usr/lib/suid-id2"
out=$("$P" trusted harden-setuid --keep /bin/passwd --root "$R" 2>&1)
is "harden-setuid over a 300-deep tree exits 1" "$?" 1
like "... saying which branch it did not walk" "$out" "1 directory deeper than 256 levels not walked \(the first: '/opt/deep/d/d/"
like "... and still clears the rest" "$out" "^cleared .* /usr/lib/suid-id2$"
is "... the planted file is 0755 now" "$(stat -c %a "$R/usr/lib/suid-id2")" 755
rm -rf "$R/opt/deep" "$R/usr/lib/suid-id2"
ok "without it: exit 0" "$P" trusted harden-setuid --keep /bin/passwd --root "$R"

# --- remove -------------------------------------------------------------------------------
ok "remove hello" "$P" trusted remove hello --root "$R"
[ ! -e "$R/data/trusted/hello" ] && [ ! -e "$R/data/bin/hello" ]
is "script and wrapper are gone" "$?" 0
try_sudo "removed command no longer runs" sudo -n -u pi-tools /data/trusted/hello
ok "remove tool" "$P" trusted remove tool --root "$R"
[ ! -e "$R/etc/sudoers.d/pistis-trusted" ]
is "no command left: the drop-in is removed" "$?" 0
exits 1 "remove an unknown command" "$P" trusted remove nope --root "$R"

done_testing
