#!/bin/bash
# The product page's "Use your own image" Dockerfile as written: the four binaries COPY'd
# --from the pistis image into a musl base (the busybox/musl root with a `node` user of uid
# 1000, standing in for node:24-alpine, which cannot be pulled here), `RUN mkdir -p
# /workspace`, `WORKDIR /workspace`, pistisd-entry as ENTRYPOINT; no VOLUME, no CMD. Run
# by a private dockerd under Docker's defaults, dialling server-min on the host, driven by
# `pistis`: the agents' HOME and TMPDIR, `policy apply` of the defaults, and commands in
# /workspace/repo (where the server puts the repository) that the agents share.
# Agents' uids are pinned to 30500-30509 (`users ensure --uid`).
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd pistisd-musl pi-env pistisd-entry server-min pistis

S=$(scratch)
trap 'kill $SM 2>/dev/null; dockerd_down; lib_cleanup' EXIT
SM=""
dockerd_up_or_bail "$S/dockerd"

# --- the images: pistis/pistisd:dev (what the page copies from), then the page's own -------
ctx=$S/ctx
mkdir -p "$ctx/usr/local/bin"
cp "$BIN/pistisd" "$BIN/pistisd-musl" "$BIN/pi-env" "$BIN/pistisd-entry" "$ctx/usr/local/bin/"
tar -C "$("$_lib_dir/roots.sh" musl)" --exclude='./proc/*' --exclude='./sys/*' -c . |
	DK import - pistis-seed-musl >/dev/null
cat >"$ctx/Dockerfile.alpine" <<'EOF'
FROM pistis-seed-musl
RUN echo 'node:x:1000:1000::/home/node:/bin/sh' >>/etc/passwd && echo 'node:x:1000:' >>/etc/group
EOF
ok "a musl base with a node user (node:24-alpine's stand-in)" \
	DK build --network none -q -f "$ctx/Dockerfile.alpine" -t pistis-seed-alpine "$ctx"
cat >"$ctx/Dockerfile.dist" <<'EOF'
FROM pistis-seed-musl
COPY usr/local/bin/ /usr/local/bin/
EOF
ok "the image the page copies from (pistis/pistisd:dev)" \
	DK build --network none -q -f "$ctx/Dockerfile.dist" -t pistis/pistisd:dev "$ctx"
# The page's Dockerfile, line for line but FROM
cat >"$ctx/Dockerfile" <<'EOF'
FROM pistis-seed-alpine
COPY --from=pistis/pistisd:dev /usr/local/bin/pistisd /usr/local/bin/pistisd-musl /usr/local/bin/pi-env /usr/local/bin/pistisd-entry /usr/local/bin/
RUN mkdir -p /workspace
WORKDIR /workspace
ENTRYPOINT ["/usr/local/bin/pistisd-entry"]
EOF
ok "docker build of the page's Dockerfile" \
	DK build --network none -q -t my-sandbox "$ctx"

# Hard requirements that only the host's sysctls decide (not namespaced), as docker.sh
ALLOW=$("$BIN/pistisd" check --json --no-walk 2>/dev/null | python3 -c 'import json,sys; print(",".join(c["name"] for c in json.load(sys.stdin)["checks"] if c["hard"] and c["status"] in ("fail","missing") and c["name"].startswith(("protected_","suid_dumpable"))))')

# --- the sandbox: the server gives it the relay and a token, nothing else ------------------
volumes_relay_up "$S" seed
mkdir -p "$S/secret" && cp "$S/data-seed/pistis/token" "$S/secret/token"
C=$(DK run -d --network host -v "$S/secret:/run/secrets/pistis:ro" \
	-e PISTIS_RELAY=ws://127.0.0.1:$SP -e PISTIS_TOKEN_FILE=/run/secrets/pistis/token \
	${ALLOW:+-e PISTIS_ALLOW=$ALLOW} my-sandbox)
ok "docker run of the image with no options but the relay's" test -n "$C"
X() { DK exec "$C" "$@"; }
is "agent a pinned to uid 30500" "$(X pistisd users ensure agent/a --uid 30500 --json 2>&1 |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["uid"])')" 30500
exits 0 "agent b pinned to uid 30501" X pistisd users ensure agent/b --uid 30501
ok "pistisd-entry starts serve, which dials server-min" sandbox_connected seed
PC=$BIN/pistis
E() { "$PC" exec --sandbox seed "$@"; }

# --- the agent's user, HOME and TMPDIR -----------------------------------------------------
is "a command runs as the agent's own user in pi-sandbox" "$(E --agent agent/a -- id)" \
	"uid=30500(pi-agent-98bbb11d) gid=30500(pi-agent-98bbb11d) groups=10010(pi-sandbox),30500(pi-agent-98bbb11d)"
is "HOME and TMPDIR under /data/sandbox-home, the agent's own, 0700" \
	"$(E --agent agent/a -- sh -c 'echo $HOME $TMPDIR; stat -c "%a %u" "$HOME" "$TMPDIR"' | paste -sd' ')" \
	"/data/sandbox-home/pi-agent-98bbb11d /data/sandbox-home/pi-agent-98bbb11d/tmp 700 30500 700 30500"
E --agent agent/a -- sh -c 'echo note >"$HOME/MEMORY.md"; echo t >"$TMPDIR/t"'
is "a's files are there" "$(X cat /data/sandbox-home/pi-agent-98bbb11d/MEMORY.md)" note
denied "another agent cannot list the homes" E --agent agent/b -- ls /data/sandbox-home
denied "... nor read a's MEMORY.md" E --agent agent/b -- cat /data/sandbox-home/pi-agent-98bbb11d/MEMORY.md
denied "... nor list a's TMPDIR" E --agent agent/b -- ls /data/sandbox-home/pi-agent-98bbb11d/tmp
is "the homes' parent: passed through, not listed (0711)" "$(X stat -c %a /data/sandbox-home)" 711
is "the environment: the allowlist only" \
	"$(E --agent agent/a -- env | sed -n 's/^\([A-Z_]*\)=.*/\1/p' | grep -vx 'PWD\|SHLVL' | sort | paste -sd' ')" \
	"HOME LOGNAME PATH SHELL TMPDIR USER"

# --- /workspace: the page's WORKDIR, where the server puts the repository ------------------
X mkdir -p /workspace/repo
X sh -c 'echo "v1" >/workspace/repo/README'
like "before apply, the agent cannot write the root-owned repository" \
	"$(E --agent agent/a --cwd /workspace/repo -- sh -c 'echo x >>README' 2>&1)" 'denied'
exits 0 "pistisd policy apply (the shipped defaults)" X pistisd policy apply
is "/workspace: group pi-sandbox, setgid, group-writable" "$(X stat -c '%a %u:%g' /workspace/repo)" \
	"2770 0:10010"
is "a command runs in /workspace/repo" "$(E --agent agent/a --cwd /workspace/repo -- pwd)" /workspace/repo
exits 0 "agent a edits the repository" E --agent agent/a --cwd /workspace/repo -- sh -c 'echo a >>README; echo new >a.txt'
exits 0 "agent b edits a's new file (shared through pi-sandbox)" \
	E --agent agent/b --cwd /workspace/repo -- sh -c 'echo b >>a.txt'
is "... and the file keeps the group" "$(X stat -c '%a %g' /workspace/repo/a.txt)" "660 10010"
like "a cwd outside the roots is still refused" "$(E --agent agent/a --cwd /etc -- pwd 2>&1)" \
	'cwd must be'

# --- docker stop / start: /data is the container's own layer here (no VOLUME) ---------------
DK stop -t 10 "$C" >/dev/null
DK start "$C" >/dev/null
ok "docker start: serve dials again" sandbox_connected seed
is "... the agents keep their uids" "$(E --agent agent/a -- id -u) $(E --agent agent/b -- id -u)" \
	"30500 30501"
is "... a's home kept its files" "$(E --agent agent/a -- sh -c 'cat "$HOME/MEMORY.md"')" note
is "... the repository its edits" "$(E --agent agent/b --cwd /workspace/repo -- cat a.txt)" "new
b"
DK rm -f "$C" >/dev/null
done_testing
