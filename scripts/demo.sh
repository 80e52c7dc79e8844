#!/bin/bash
# `make demo`: the sandbox at work, in a throwaway Debian root (an overlay in a private
# mount namespace: nothing on this machine's /etc, /data or sudoers changes).
set -u
cd "$(dirname "$0")/.."
# scripts/in-private-ns: mounts made here never reach the host.
[ "${PISTIS_MNT_NS:-}" = "$(readlink /proc/self/ns/mnt)" ] ||
	exec "$(dirname "$0")/../scripts/in-private-ns" bash "$0" "$@"
. tests/lib.sh

bold=$(printf '\033[1m') off=$(printf '\033[0m')
[ -t 1 ] || bold='' off=''
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$off"; }
say() { printf '%s\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }
R=""
inr() { printf '[sandbox]# %s\n' "$*"; in_root "$R" "$@"; }

step "1. The static binaries (one file serves glibc and musl images)"
for b in pistisd pi-env pistisd-entry; do
	[ -e "$BIN/$b" ] && printf '%-14s %8d bytes  %s\n' "$b" "$(stat -c %s "$BIN/$b")" \
		"$(file -b "$BIN/$b" | cut -d, -f1-5)"
done
show "$BIN/pistisd" --version

step "2. pistisd check on this machine (what the kernel gives, what is missing)"
"$BIN/pistisd" check --no-walk
say "(exit $?: a missing hard requirement is named above; 'pistisd check --allow NAME' opts out)"

step "3. pi-env builds the environment from nothing"
say "A hostile environment goes in:"
hostile=(LD_PRELOAD=/tmp/evil.so BASH_ENV=/tmp/rc 'BASH_FUNC_ls%%=() { evil; }' PYTHONPATH=/tmp
	GIT_CONFIG_GLOBAL=/tmp/gc AWS_SECRET_ACCESS_KEY=hunter2 PISTIS_TOKEN=secret
	PATH=/tmp/evil:/usr/bin LANG=C.UTF-8 'LC_ALL=../../../tmp/x' TERM=xterm-256color
	PI_SESSION=42)
printf '  %s\n' "${hostile[@]}"
say "and this comes out (pi-env --print):"
env -i "${hostile[@]}" "$BIN/pi-env" --agent-user pi-agent-demo \
	--home /data/sandbox-home/pi-agent-demo --tmpdir /data/sandbox-home/pi-agent-demo/tmp \
	--print | sed 's/^/  /'

step "4. A throwaway Debian root with the binaries in /usr/local/bin"
R=$(root_fresh debian) || { say "could not make the test root"; exit 111; }
say "root: $R (overlay over the cached debootstrap minbase; gone when the demo ends)"
harden_shared "$R" || { say "could not mount the shared trees nosuid"; exit 111; }
say "the trees agents share (/data, /workspaces, /tmp, /var/tmp, ...) nosuid,nodev, as pistisd-entry leaves them"

step "5. One stable unprivileged user per agent"
inr pistisd users ensure alice
inr pistisd users ensure bob
inr pistisd users list
alice=$(in_root "$R" pistisd users show alice --json | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p' | head -n1)
bob=$(in_root "$R" pistisd users show bob --json | sed -n 's/.*"name": *"\([^"]*\)".*/\1/p' | head -n1)

step "6. A command as the agent: its own ids, no capabilities, seccomp, a clean env"
inr pistisd run --agent alice -- /bin/sh -c 'id; grep -E "^(Cap(Prm|Eff|Bnd)|NoNewPrivs|Seccomp):" /proc/self/status; env | sort'
say "alice tries bob's home:"
inr pistisd run --agent alice -- ls "/data/sandbox-home/$bob"
say "(exit $?)"
say "alice tries to make a new mount namespace (seccomp says no):"
inr pistisd run --agent alice -- unshare -m true
say "(exit $?)"

step "7. Path rules: applied as owners and permissions"
mkdir -p "$R/workspaces/project" "$R/data/.secrets" "$R/data/bin" "$R/data/sessions"
echo "the board's API token" >"$R/data/.secrets/board-token"
echo "hello from the project" >"$R/workspaces/project/README"
inr pistisd policy plan
inr pistisd policy apply
inr pistisd policy explain /data/.secrets/board-token --agent alice
inr pistisd run --agent alice -- /bin/sh -c 'cat /workspaces/project/README; echo edited >>/workspaces/project/README && echo "alice wrote to the project"; cat /data/.secrets/board-token'
say "(exit $?: the project is writable, the secret is not readable)"

step "8. A trusted command: uses the secret, never shows it"
cat >"$R/root/board" <<'EOS'
#!/usr/local/bin/pistisd trusted-interp /bin/sh -e
# a trusted command: reads the token the agent cannot read, prints only a result; pistisd
# starts /bin/sh for it with no signal ignored and no limit lowered by its caller
token=$(cat /data/.secrets/board-token) || exit 1
echo "board: 3 open cards (authenticated as $(id -un) with a ${#token}-byte token)"
EOS
chmod 0755 "$R/root/board"
grep -q "$(hostname)" "$R/etc/hosts" 2>/dev/null || echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts"
# Agents lose no_new_privs once trusted commands exist: the image keeps sudo as its only
# setuid program (trusted add would otherwise warn of each one left).
inr pistisd trusted harden-setuid
inr pistisd trusted add board /root/board
inr pistisd trusted list
inr pistisd run --agent alice -- board
say "(exit $?)"
inr pistisd run --agent alice -- sudo -n -u pi-tools cat /data/.secrets/board-token
say "(exit $?: anything but the pinned script is refused)"

step "Done"
say "Everything above ran in a private mount namespace over an overlay; it is gone now."
say "Run 'make check' for the test suite; docs/ describes each part."
