#!/bin/bash
# Red team, the sweep an attacker runs on first getting a shell as an agent: a local
# privilege-escalation enumeration (tests/sweep-enum.sh, in the spirit of linpeas, deepce
# and CDK, written here) of what the agent can write, run, read and reach, in two
# deployments: (1) a plain machine's root (server-min, `pistisd serve` in a throwaway
# Debian root with the shared trees nosuid and a trusted command, so agents run without
# no_new_privs), (2) the seed page's image under a private dockerd, pistisd-entry as PID 1,
# Docker's defaults and the relay's options. Every class of the sweep is asserted empty,
# and shown able to fail: each is weakened once in the test's own root and must then
# report. Agents' uids 30600-30651. Root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd pistisd-musl pi-env pistisd-entry server-min pistis
[ -x "$TESTBIN/redteam-probe" ] && [ -x "$TESTBIN/probe" ] ||
	missing "redteam-probe or probe not built"
command -v python3 >/dev/null || missing "no python3"
R=$(root_fresh debian) || missing "no debian test root"
W=$(scratch)
SWEEP=$_lib_dir/sweep-enum.sh
RT=/usr/local/lib/pistis-tests/redteam-probe
cleanup() { # the private dockerd and the world-readable config first: serve_test_cleanup
	dockerd_down # ends with root_cleanup, which takes the scratch directories
	[ -n "${PUB:-}" ] && rm -rf "$PUB"
	serve_test_cleanup
}
trap cleanup EXIT
classes="writable setid-writable exec-writable exec-owner secret-list secret-read other-agent proc
	kernel-writable kernel-wrote cgroup socket abstract self device sudo"
# sweep_ok LABEL OUT: every class empty, and each part of the sweep looked at something
sweep_ok() {
	local k=$1 out=$2 cl n
	for cl in $classes; do
		is "$k: sweep finds nothing of class $cl" \
			"$(printf '%s\n' "$out" | awk -v c="$cl" '$1 == "F" && $2 == c' | head -n 5)" ""
	done
	for cl in writable exec secrets proc kernel socket self; do
		n=$(printf '%s\n' "$out" | awk -v c="$cl" '$1 == "C" && $2 == c {print $3}')
		ok "$k: ... and its $cl part ran (${n:-0} looked at)" test "${n:-0}" -gt 0
	done
}
findings() { printf '%s\n' "$1" | awk '$1 == "F"'; }

# --- 1. a plain machine's root ------------------------------------------------------------------
harden_shared "$R"
in_root "$R" pistisd users ensure-base >/dev/null 2>&1
chmod 1777 "$R/workspaces"
SECRET=sec-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
printf '%s\n' "$SECRET" >"$R/data/.secrets/tok"
chown 10002:10002 "$R/data/.secrets/tok" && chmod 0600 "$R/data/.secrets/tok"
# a trusted command that holds the secret while it runs (in its memory, not its env)
printf '#!/bin/sh\nt=$(cat /data/.secrets/tok)\n[ -n "$t" ] && echo have\nsleep "${1:-0}"\n' >"$W/usetok"
chmod 0755 "$W/usetok"
ok "trusted add usetok" "$BIN/pistisd" trusted add usetok "$W/usetok" --root "$R"
SV=sv-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
SERVE_ENV="PI_SERVE_SECRET=$SV" relay_up "$R" "$W" ||
	{ echo "Bail out! pistisd serve did not connect: $(tail -n 3 "$W/pd.log")"; exit 1; }
A=sweep-a B=sweep-b
in_root "$R" pistisd users ensure $A --uid 30600 >/dev/null
in_root "$R" pistisd users ensure $B --uid 30601 >/dev/null
BH=$(in_root "$R" pistisd users show $B | sed -n 's/^home=//p')
BD=$(in_root "$R" pistisd users show $B | sed -n 's/^agent_dir=//p')
install -D -m 0755 "$SWEEP" "$R/usr/local/share/pistis-sweep/sweep-enum.sh"
E() { timeout 120 "$BIN/pistis" exec --sandbox s1 "$@"; }
is "the trusted command reads its secret for B" "$(E --agent $B -- usetok)" have
# What root sees of set-id files: the image's, before any agent ran
base_setid=$(chroot "$R" find / -xdev \( -path /proc -o -path /sys \) -prune -o -type f \
	\( -perm -4000 -o -perm -2000 \) -print 2>/dev/null | sort)
# B holds a secret in its command's environment and one in a running trusted command
BS=bs-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
# (exec: the job is timeout itself, which passes on the kill at the end of part 2; a
# subshell killed there left timeout and pistis running after the test)
(exec timeout 120 "$BIN/pistis" exec --sandbox s1 --agent $B -- sleep 60) >/dev/null 2>&1 &
timeout 20 "$BIN/pistis" call --sandbox s1 exec.start \
	"{\"agent\":\"$B\",\"argv\":[\"sleep\",\"60\"],\"env\":{\"PI_B_SECRET\":\"$BS\"}}" >/dev/null 2>&1
(exec timeout 120 "$BIN/pistis" exec --sandbox s1 --agent $B -- usetok 60) >/dev/null 2>&1 &
# a root daemon's abstract socket on the sandbox's network: with Landlock's scope, no agent's
root_abstract() {
	python3 -c 'import socket,time
s=socket.socket(socket.AF_UNIX); s.bind("\0pistis-sweep-root"); s.listen(8); time.sleep(300)' &
}
root_abstract
for _ in $(seq 50); do
	[ "$(root_pids "$R" 10002 | wc -l)" -gt 0 ] && grep -q '@pistis-sweep-root' /proc/net/unix && break
	sleep 0.1
done
ok "B's trusted command is running (pi-tools)" test "$(root_pids "$R" 10002 | wc -l)" -gt 0
run_sweep() { # AGENT: the sweep as that agent over the relay
	E --agent "$1" -- env SWEEP_WRITE_OK=/workspaces SWEEP_OTHERS="$BH $BD" \
		sh /usr/local/share/pistis-sweep/sweep-enum.sh /usr/local/lib/pistis-tests 2>/dev/null
}
abstract_check() { # AGENT PROBE: every abstract socket name on the network, connected to
	E --agent "$1" -- sh -c 'for a in $(awk '"'"'$8 ~ /^@/ {print substr($8, 2)}'"'"' /proc/net/unix | sort -u | head -n 200); do
		case $a in *.d) continue ;; esac
		r=$("$0" connect "$a" 2>/dev/null | sed -n "s/^connect=//p")
		echo "A $a $r"
		[ "$r" = ok ] && echo "F abstract @$a"
	done; true' "$2"
}
t0=$(date +%s)
out=$(run_sweep $A)
ab=$(abstract_check $A "$RT")
is "plain: the agent is who the sweep thinks" "$(E --agent $A -- id -u)" 30600
sweep_ok plain "$out
$ab"
like "plain: the abstract sockets were tried, root's too" "$ab" '^A pistis-sweep-root (EPERM|ECONNREFUSED)'
is "plain: the set-id files the agent sees are the image's" \
	"$(printf '%s\n' "$out" | awk '$1 == "I" && $2 == "setid" {print $3}' | sort)" "$base_setid"
echo "# plain: the sweep took $(($(date +%s) - t0)) s"
# secrets: every file beneath / and the shared trees, every /proc/PID/{cmdline,environ}
needles=$(printf '%s\n' "$SECRET" "$SV" "$BS" "$(cat "$R/etc/pistis/token")" "$PISTIS_TEST_CT")
hunt=$(printf '%s\n' "$needles" | E -i --agent $A -- $RT hunt / /tmp /dev/shm /run /data /var/tmp /workspaces 2>&1)
is "plain: the hunt read its five needles" "$(printf '%s\n' "$hunt" | sed -n 's/^needles=//p')" 5
unlike "plain: no secret anywhere the agent can read (token, client token, .secrets, serve's and B's env)" \
	"$hunt" '^hit='
# the kernel an agent reaches: namespaces, odd socket families, TIOCSTI/TIOCLINUX, pidfd_getfd
sc=$(E --agent $A -- $RT seccomp 2>&1)
like "plain: the kernel probe ran" "$sc" '^unshare\.NEWUSER='
unlike "plain: no kernel interface of the probe's list is open" "$sc" '=ok$'
# and what sudo -l offers, as the sweep saw it, names the trusted script only
like "plain: the sweep looked at sudo" "$out" '^C sudo 1'

# the relay URL is on serve's command line, which every agent reads without hidepid (as the
# hunt does): a user part, where a platform might put a secret, is refused before any dial
for u in 'ws://tok-secret@127.0.0.1:1/x' 'wss://user:pass@127.0.0.1:1/sandbox'; do
	out=$(timeout 10 env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd serve --relay "$u" --token-file /etc/pistis/token 2>&1)
	like "serve refuses a relay URL with a user part ($u)" "$out" "has a user part: the relay URL is on pistisd serve's command line"
	unlike "the refusal does not log the user part ($u)" "$out" 'secret|pass'
done
# nor a query (a token put there) in the start-up line that goes to the log
al=$(timeout 10 env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd check --no-walk 2>/dev/null |
	awk '$3 == "yes" && ($2 == "fail" || $2 == "missing") {print $1}' | paste -sd, -)
out=$(timeout 5 env -i "${_ROOT_ENV[@]}" chroot "$R" pistisd serve --relay 'ws://127.0.0.1:1/x?token=q-secret' \
	--token-file /etc/pistis/token ${al:+--allow $al} 2>&1)
like "serve's start-up line names the relay" "$out" "relay ws://127\\.0\\.0\\.1:1/x\\?\\*\\*\\*"
unlike "serve's log does not show the relay URL's query" "$out" 'q-secret'

# --- 2. the same sweep fails on a weakened root: each class can report --------------------------
cp "$R/bin/true" "$R/usr/sbin/sweep-suid" && chmod 4755 "$R/usr/sbin/sweep-suid"
chmod 0777 "$R/etc/ld.so.conf.d"
mkdir -m 0777 "$R/usr/local/lib/site_perl" # on perl's @INC: a trusted perl script's modules
chmod 0755 "$R/root"
chmod 0666 "$R/data/bin/usetok"
chown 30601 "$R/etc/profile.d"
chmod 0755 "$R$BH"
chmod 0644 "$R/etc/shadow" "$R/etc/gshadow"
python3 -c 'import socket,sys,os,time
s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(1)
time.sleep(300)' "$R/run/sweep.sock" &
for _ in $(seq 50); do [ -S "$R/run/sweep.sock" ] && break; sleep 0.1; done
mknod -m 0666 "$R/dev/fuse" c 10 229
printf '%%pi-sandbox ALL = (ALL) NOPASSWD: ALL\n' >"$R/etc/sudoers.d/zz-sweep" &&
	chmod 0440 "$R/etc/sudoers.d/zz-sweep"
weak=$(run_sweep $A)
rm -f "$R/etc/sudoers.d/zz-sweep" "$R/dev/fuse"
like "weakened: a 0666 /dev/fuse is opened" "$(findings "$weak")" '^F device /dev/fuse$'
like "weakened: a sudoers rule for pi-sandbox is broad" "$(findings "$weak")" '^F sudo broad rule: +\(ALL\) NOPASSWD: ALL$'
like "weakened: ... and sudo -u root runs" "$(findings "$weak")" '^F sudo sudo -n -u root true$'
like "weakened: a new setuid file differs from the image's list" \
	"$(printf '%s\n' "$weak" | awk '$1 == "I" && $2 == "setid" {print $3}')" '^/usr/sbin/sweep-suid$'
like "weakened: a 0777 /etc/ld.so.conf.d is writable" "$(findings "$weak")" '^F writable /etc/ld.so.conf.d$'
like "weakened: ... and on the loader's path" "$(findings "$weak")" '^F exec-writable /etc/ld.so.conf.d$'
like "weakened: a 0755 /root is listed" "$(findings "$weak")" '^F secret-list /root$'
like "weakened: a 0644 /etc/gshadow is read" "$(findings "$weak")" '^F secret-read /etc/gshadow$'
like "weakened: a 0777 directory on perl's @INC" "$(findings "$weak")" '^F exec-writable /usr/local/lib/site_perl$'
like "weakened: a 0666 trusted wrapper is writable" "$(findings "$weak")" '^F exec-writable /data/bin/usetok$'
like "weakened: an agent-owned /etc/profile.d" "$(findings "$weak")" '^F exec-owner /etc/profile.d uid=30601$'
like "weakened: B's home listed" "$(findings "$weak")" "^F other-agent list $BH\$"
like "weakened: a 0644 /etc/shadow read" "$(findings "$weak")" '^F secret-read /etc/shadow$'
like "weakened: a 0666 root socket in /run" "$(findings "$weak")" '^F socket /run/sweep.sock$'
chmod 0640 "$R/etc/shadow" "$R/etc/gshadow"
like "weakened: the hunt finds the secret once /data/.secrets is open" \
	"$(chmod 0755 "$R/data/.secrets"; chmod 0644 "$R/data/.secrets/tok"
	printf '%s\n' "$needles" | E -i --agent $A -- $RT hunt /data 2>&1)" '^hit=/data/\.secrets/tok'
chmod 0700 "$R/data/.secrets"; chmod 0600 "$R/data/.secrets/tok"
rm -f "$R/usr/sbin/sweep-suid" "$R/run/sweep.sock"
rmdir "$R/usr/local/lib/site_perl"
chmod 0755 "$R/etc/ld.so.conf.d"; chmod 0700 "$R/root"; chmod 0755 "$R/data/bin/usetok"
chown 0 "$R/etc/profile.d"; chmod 0700 "$R$BH"
# the abstract scope off (pistisd run --share-abstract-sockets): root's socket answers
ab=$(E() { shift 3; in_root "$R" pistisd run --share-abstract-sockets --agent $A -- "$@"; }
	abstract_check $A "$RT")
like "weakened: without the scope the agent reaches root's abstract socket" "$ab" '^F abstract @pistis-sweep-root$'
# server-min beside the agents (a plain machine, everything on one host): its config holds
# the client token, with which an agent runs commands as any other agent, and the sandbox
# tokens, with which it connects as the sandbox and gets the clients' requests. Before,
# server-min took such a config readable by every user ("who may read it is the operator's
# choice"), while pistis and pistisd serve refuse a token file others may read.
printf '{\n  "client_token": "client-%s",\n  "sandboxes": [{"name": "s1", "token": "%s"}]\n}\n' \
	"$(head -c 12 /dev/urandom | base64 | tr -d '/+=')" "$(cat "$R/etc/pistis/token")" >"$R/etc/pistis/server.json"
chmod 0644 "$R/etc/pistis/server.json"
like "weakened: a 0644 relay config with tokens in it is read by the agent" \
	"$(findings "$(run_sweep $A)")" '^F secret-read relay config /etc/pistis/server\.json$'
PUB=$(mktemp -d /tmp/pistis-sweep-pub.$$.XXXXXX) && chmod 0755 "$PUB"
cp "$R/etc/pistis/server.json" "$PUB/server.json" && chmod 0644 "$PUB/server.json"
out=$("$BIN/server-min" --config "$PUB/server.json" --check 2>&1)
is "server-min refuses a config with tokens in it that every user may read" "$?" 1
like "... saying who may read it and what to do" "$out" \
	'server\.json \(the config, with tokens written in it\) may be read by every user \(mode 0644.*chmod o-r'
chmod 0640 "$PUB/server.json"
ok "... takes it once others cannot read it (0640)" "$BIN/server-min" --config "$PUB/server.json" --check
chmod 0644 "$PUB/server.json" && chmod 0700 "$PUB"
ok "... or cannot reach it (a 0700 directory on the way)" "$BIN/server-min" --config "$PUB/server.json" --check
chmod 0755 "$PUB"
sed -i 's/"client-[^"]*"/"${PISTIS_TEST_CT}"/; s/"token": "[^"]*"/"token": "${SWEEP_TOK}"/' "$PUB/server.json"
SWEEP_TOK=$(cat "$R/etc/pistis/token") ok "... or takes its tokens from the environment" \
	"$BIN/server-min" --config "$PUB/server.json" --check
: >"$PUB/k.pem" && chmod 0644 "$PUB/k.pem"
sed -i "s|^{|{\\n  \"tls\": {\"cert\": \"$PUB/c.pem\", \"key\": \"$PUB/k.pem\"},|" "$PUB/server.json"
out=$(SWEEP_TOK=$(cat "$R/etc/pistis/token") "$BIN/server-min" --config "$PUB/server.json" --check 2>&1)
like "... and a TLS key every user may read" "$out" 'k\.pem \(the TLS key\) may be read by every user'
chmod 0600 "$PUB/k.pem"
SWEEP_TOK=$(cat "$R/etc/pistis/token") ok "... taken at 0600" \
	"$BIN/server-min" --config "$PUB/server.json" --check
rm -rf "$PUB" "$R/etc/pistis/server.json"
for pid in $(jobs -p); do kill "$pid" 2>/dev/null; done
kill "$PD" "$SM" 2>/dev/null
wait 2>/dev/null
PD="" SM=""

# --- 3. the seed page's image under Docker's defaults (docker-seed.sh's image) -------------------
dockerd_up_or_bail "$W/dockerd"
ctx=$W/ctx
mkdir -p "$ctx/usr/local/bin" "$ctx/sweep"
cp "$BIN/pistisd" "$BIN/pistisd-musl" "$BIN/pi-env" "$BIN/pistisd-entry" "$ctx/usr/local/bin/"
cp "$TESTBIN/probe" "$TESTBIN/redteam-probe" "$SWEEP" "$ctx/sweep/"
tar -C "$("$_lib_dir/roots.sh" musl)" --exclude='./proc/*' --exclude='./sys/*' -c . |
	DK import - pistis-sweep-musl >/dev/null
cat >"$ctx/Dockerfile" <<'EOF'
FROM pistis-sweep-musl
RUN echo 'node:x:1000:1000::/home/node:/bin/sh' >>/etc/passwd && echo 'node:x:1000:' >>/etc/group
COPY usr/local/bin/ /usr/local/bin/
COPY sweep/ /usr/local/lib/pistis-sweep/
RUN mkdir -p /workspace
WORKDIR /workspace
ENTRYPOINT ["/usr/local/bin/pistisd-entry"]
EOF
ok "docker build of the seed page's image (with the sweep)" DK build --network none -q -t pistis-sweep "$ctx"
ALLOW=$("$BIN/pistisd" check --json --no-walk 2>/dev/null | python3 -c 'import json,sys; print(",".join(c["name"] for c in json.load(sys.stdin)["checks"] if c["hard"] and c["status"] in ("fail","missing") and c["name"].startswith(("protected_","suid_dumpable"))))')
volumes_relay_up "$W" seed
root_abstract
mkdir -p "$W/secret" && cp "$W/data-seed/pistis/token" "$W/secret/token"
C=$(DK run -d --network host -v "$W/secret:/run/secrets/pistis:ro" \
	-e PISTIS_RELAY=ws://127.0.0.1:$SP -e PISTIS_TOKEN_FILE=/run/secrets/pistis/token \
	-e PISTIS_SEED_SECRET=$SV ${ALLOW:+-e PISTIS_ALLOW=$ALLOW} pistis-sweep)
ok "docker run of the image with the relay's options only" test -n "$C"
X() { DK exec "$C" "$@"; }
X pistisd users ensure $A --uid 30650 >/dev/null
X pistisd users ensure $B --uid 30651 >/dev/null
sandbox_connected seed || echo "# not connected: $(tail -n 3 "$W/smin.log"; DK logs "$C" 2>&1 | tail -n 3)"
ok "pistisd-entry's serve dials server-min" sandbox_connected seed
X pistisd policy apply >/dev/null 2>&1
BH=$(X pistisd users show $B | sed -n 's/^home=//p')
BD=$(X pistisd users show $B | sed -n 's/^agent_dir=//p')
D() { timeout 120 "$BIN/pistis" exec --sandbox seed "$@"; }
D --agent $B -- sh -c 'echo b-private >"$HOME/notes"' >/dev/null
timeout 20 "$BIN/pistis" call --sandbox seed exec.start \
	"{\"agent\":\"$B\",\"argv\":[\"sleep\",\"60\"],\"env\":{\"PI_B_SECRET\":\"$BS\"}}" >/dev/null 2>&1
base_setid=$(X find / -xdev \( -path /proc -o -path /sys \) -prune -o -type f \
	\( -perm -4000 -o -perm -2000 \) -print 2>/dev/null | sort)
out=$(D --agent $A -- env SWEEP_WRITE_OK="/workspace" SWEEP_OTHERS="$BH $BD" \
	sh /usr/local/lib/pistis-sweep/sweep-enum.sh /usr/local/lib/pistis-sweep 2>/dev/null)
ab=$(E() { D "$@"; }; abstract_check $A /usr/local/lib/pistis-sweep/redteam-probe)
is "docker: the agent is who the sweep thinks" "$(D --agent $A -- id -u)" 30650
sweep_ok docker "$out
$ab"
like "docker: the host's abstract socket was tried (--network host)" "$ab" '^A pistis-sweep-root (EPERM|ECONNREFUSED)'
is "docker: the set-id files the agent sees are the image's" \
	"$(printf '%s\n' "$out" | awk '$1 == "I" && $2 == "setid" {print $3}' | sort)" "$base_setid"
needles=$(printf '%s\n' "$SV" "$BS" "$(cat "$W/secret/token")" "$PISTIS_TEST_CT")
hunt=$(printf '%s\n' "$needles" | D -i --agent $A -- /usr/local/lib/pistis-sweep/redteam-probe \
	hunt / /tmp /dev/shm /run /data /var/tmp /workspace 2>&1)
is "docker: the hunt read its four needles" "$(printf '%s\n' "$hunt" | sed -n 's/^needles=//p')" 4
unlike "docker: no secret anywhere the agent reads (token, client token, entry's and B's env)" \
	"$hunt" '^hit='
sc=$(D --agent $A -- /usr/local/lib/pistis-sweep/redteam-probe seccomp 2>&1)
like "docker: the kernel probe ran" "$sc" '^unshare\.NEWUSER='
unlike "docker: no kernel interface of the probe's list is open" "$sc" '=ok$'
DK rm -f "$C" >/dev/null
done_testing
