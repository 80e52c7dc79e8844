#!/bin/bash
# The top Dockerfile and docs/entry.md's docker lines as an operator pastes them: the
# Debian test root tagged debian:bookworm-slim (no image can be pulled), the Dockerfile as
# it is in the tree, built from a context that holds build/bin/ as the tree does; then
# each line of entry.md's `docker build` ... `docker run --rm` block, read from the page,
# run by a private dockerd under Docker's defaults. Changed for the test only: `docker`
# is the private one, the relay is server-min on the host's loopback (`--network host`
# added, wss://relay.example.com/sandbox becomes its ws:// address), and the hard
# requirements only the host's sysctls decide are allowed, as in docker.sh.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd pistisd-musl pi-env pistisd-entry server-min pistis

SRC=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$SRC/Dockerfile" ] || { echo "Bail out! no source tree (Dockerfile) beside the test"; exit 1; }
S=$(scratch)
trap 'kill $SM 2>/dev/null; dockerd_down; umount -l "$S/nosuid" "$S"/trusted/* 2>/dev/null; lib_cleanup' EXIT
SM=""
dockerd_up_or_bail "$S/dockerd"

tar -C "$("$_lib_dir/roots.sh" debian)" --exclude='./proc/*' --exclude='./sys/*' -c . |
	DK import - debian:bookworm-slim >/dev/null
ok "the Debian test root as debian:bookworm-slim" DK image inspect debian:bookworm-slim

# The build context: the tree's Dockerfile, and build/bin/ with what the build made.
ctx=$S/ctx
mkdir -p "$ctx/build/bin"
cp "$SRC/Dockerfile" "$ctx/"
cp -a "$BIN/." "$ctx/build/bin/"

ALLOW=$("$BIN/pistisd" check --json --no-walk 2>/dev/null | python3 -c 'import json,sys; print(",".join(c["name"] for c in json.load(sys.stdin)["checks"] if c["hard"] and c["status"] in ("fail","missing") and c["name"].startswith(("protected_","suid_dumpable"))))')
volumes_relay_up "$S" box
cp "$S/data-box/pistis/token" "$ctx/box.token"

# entry.md's block: its lines, continuations joined, each as the test runs it.
lines=$(awk '/^```/ { if (on) { if (keep) exit; on = 0; next } on = 1; first = 1; next }
	on && first { first = 0; keep = /^docker build -t sandbox-image/ }
	on && keep { print }' "$SRC/docs/entry.md" |
	sed -e 's/ *#.*$//' | awk '/\\$/ { sub(/\\$/, ""); printf "%s", $0; next } { print }' |
	sed -e 's/  */ /g' -e '/^$/d')
like "entry.md's docker block starts with the build" "$lines" '^docker build -t sandbox-image \.$'
like "... puts the token into the volume before the first start" "$lines" \
	'^docker run --rm -i -v box-data:/data .*/data/pistis/token.*<box\.token$'
run_line() { # LINE: one line of the block, as the test runs it
	local l=${1#docker }
	l=${l//wss:\/\/relay.example.com\/sandbox/ws://127.0.0.1:$SP}
	case $l in
	"run -d "*) l="run -d --network host ${ALLOW:+-e PISTIS_ALLOW=$ALLOW} ${l#run -d }" ;;
	esac
	(cd "$ctx" && eval "DK $l")
}
# Every line, in order; what each must have done is checked right after it.
n=0
while IFS= read -r line; do
	n=$((n + 1))
	out=$(run_line "$line" 2>&1)
	rc=$?
	is "entry.md line $n exits 0: $line" "$rc" 0
	case $line in
	"docker build"*)
		is "... the image's entrypoint is pistisd-entry" \
			"$(DK image inspect -f '{{json .Config.Entrypoint}}' sandbox-image)" \
			'["/usr/local/bin/pistisd-entry"]' ;;
	*"cat >/data/pistis/token"*)
		is "... the token in the volume: root's, 0700 directory, 0600 file" \
			"$(DK run --rm -v box-data:/data --entrypoint stat sandbox-image \
				-c '%u:%g %a' /data/pistis /data/pistis/token | paste -sd' ')" "0:0 700 0:0 600" ;;
	"docker run -d"*)
		ok "... and the sandbox dials server-min" sandbox_connected box
		is "... a command runs as an agent in it" \
			"$("$BIN/pistis" exec --sandbox box --agent agent/a -- id -un)" pi-agent-98bbb11d ;;
	"docker stop"*)
		is "... entry stopped by SIGTERM exits 143" \
			"$(DK inspect -f '{{.State.ExitCode}}' box)" 143 ;;
	"docker run --rm"*)
		like "... the child runs as root" "$out" '^uid=0\(root\) gid=0\(root\)'
		is "... once" "$(grep -c '^uid=' <<<"$out")" 1
		like "... after entry prepared /data (root:root 0755)" "$out" \
			'^drwxr-xr-x [0-9]+ root root [0-9]+ .* /data$' ;;
	esac
done <<<"$lines"
is "entry.md's block has the five lines this test knows" "$n" 5

# Without the token step, the sandbox never connects: what the page warns about.
DK volume create empty-data >/dev/null
C=$(DK run -d --pull never --network host -v empty-data:/data -e PISTIS_RELAY=ws://127.0.0.1:$SP \
	-e PISTIS_TOKEN_FILE=/data/pistis/token ${ALLOW:+-e PISTIS_ALLOW=$ALLOW} sandbox-image \
	--max-restarts 1 --restart-delay 0.1)
DK wait "$C" >/dev/null
like "without the token step, serve says it cannot read the token file" \
	"$(DK logs "$C" 2>&1)" "Cannot read token file '/data/pistis/token'"
DK rm -f "$C" >/dev/null

# The product page's image: pistis/pistisd:dev built as entry.md says, then the page's
# Dockerfile with only its FROM changed (node:24-alpine cannot be pulled; docker-seed.sh
# runs it on a musl base).
line=$(awk '/^```/ { if (on) { if (keep) exit; on = 0; next } on = 1; first = 1; next }
	on && first { first = 0; keep = /^docker build -t pistis\/pistisd:dev/ }
	on && keep { print }' "$SRC/docs/entry.md")
is "entry.md says how to build pistis/pistisd:dev" "$line" "docker build -t pistis/pistisd:dev ."
exits 0 "... which builds from the tree" run_line "$line"
mkdir -p "$S/page"
awk '/^```/ { if (on) { if (keep) exit; on = 0; next } on = 1; first = 1; next }
	on && first { first = 0; keep = /^FROM node:24-alpine$/ }
	on && keep { print }' "$SRC/docs/entry.md" |
	sed 's/^FROM node:24-alpine$/FROM debian:bookworm-slim/' >"$S/page/Dockerfile"
like "entry.md has the page's Dockerfile" "$(cat "$S/page/Dockerfile")" '^COPY --from=pistis/pistisd:dev '
exits 0 "... which builds FROM it" DK build --network none -q -t page-image "$S/page"
is "... with the binaries pistis/pistisd:dev holds" \
	"$(DK run --rm --pull never --network none --entrypoint /usr/local/bin/pistisd page-image \
		--version | head -n 1 | cut -d' ' -f1)" pistisd

# docs/trusted.md's lines from nothing to an agent's call, as root in a container that
# can have trusted commands (CAP_SYS_ADMIN, the shared trees nosuid from outside: entry.md).
T=$S/trusted
for d in data ws; do
	mkdir -p "$T/$d" && mount --bind "$T/$d" "$T/$d" && mount -o remount,bind,nosuid,nodev "$T/$d"
done
C=$(DK run -d --pull never --network none --hostname box --add-host box:127.0.1.1 \
	-v "$T/data:/data" -v "$T/ws:/workspaces" --tmpfs /tmp:rw,nosuid,nodev \
	--tmpfs /var/tmp:rw,nosuid,nodev --tmpfs /run/lock:rw,nosuid,nodev --cap-add SYS_ADMIN \
	${ALLOW:+-e PISTIS_ALLOW=$ALLOW} sandbox-image --no-harden-mounts --no-restart -- sleep 600)
for _ in $(seq 100); do DK logs "$C" 2>&1 | grep -q "started '" && break; sleep 0.1; done
printf '#!/bin/sh\necho "ci: ok as $(id -un), with a token of $(wc -c </data/.secrets/ci-token) bytes"\n' |
	DK exec -i "$C" sh -c 'cat >/root/ci-status.sh'
printf 'ci-token-0123456789abcdef' | DK exec -i "$C" sh -c 'cat >/root/ci.token'
recipe=$(awk '/^```/ { if (on) { if (keep) exit; on = 0; next } on = 1; first = 1; next }
	on && first { first = 0; keep = /^install -m 0755 ci-status.sh/ }
	on && keep { print }' "$SRC/docs/trusted.md" | sed 's/ *#.*$//')
like "trusted.md has the lines from nothing to an agent's call" "$recipe" '^pistisd trusted add '
while IFS= read -r line; do
	exits 0 "trusted.md, as root in the sandbox: $line" DK exec -w /root "$C" sh -c "$line"
done <<<"$recipe"
is "... an agent runs the trusted command by its name, as pi-tools, with the secret" \
	"$(DK exec "$C" pistisd run --agent agent/t -- ci-status 2>&1)" \
	"ci: ok as pi-tools, with a token of 25 bytes"
denied "... and cannot read the secret itself" DK exec "$C" pistisd run --agent agent/t -- \
	cat /data/.secrets/ci-token
DK rm -f "$C" >/dev/null

# docs/security.md and docs/entry.md: a volume made with o=bind,nosuid,nodev is not nosuid
# (what security.md advised before), a host directory that is a nosuid,nodev mount is.
mkdir -p "$S/vol" "$S/nosuid"
DK volume create --opt type=none --opt o=bind,nosuid,nodev --opt device="$S/vol" bindvol >/dev/null
flags() { DK run --rm --pull never --network none "$@" --entrypoint awk sandbox-image \
	'$5 == "/data" { print $6 }' /proc/self/mountinfo; }
unlike "a docker volume created with o=bind,nosuid,nodev: /data is not nosuid" \
	"$(flags -v bindvol:/data)" 'nosuid'
mount --bind "$S/nosuid" "$S/nosuid" && mount -o remount,bind,nosuid,nodev "$S/nosuid"
like "a host directory mounted nosuid,nodev, then -v DIR:/data: /data is nosuid,nodev" \
	"$(flags -v "$S/nosuid:/data")" 'nosuid,nodev'

done_testing
