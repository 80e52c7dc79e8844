#!/bin/bash
# Red team, promise 3 (SECURITY.md): secrets an agent process must not reach, looked for
# from the agent's side through the real binaries: server-min, `pistisd serve` in a
# throwaway Debian root, the `pistis` client. Root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
R=$(root_fresh debian) || missing "no debian test root"
W=$(scratch)
cleanup() {
	[ -n "${PD:-}" ] && kill "$PD" 2>/dev/null
	[ -n "${SM:-}" ] && kill "$SM" 2>/dev/null
	wait 2>/dev/null
	root_cleanup
}
trap cleanup EXIT

# --- 1. pistisd serve's own environment -----------------------------------------------------
# serve's environment is the container's (docker run -e, a pod's env:, pistisd-entry's): the
# operator's. The env builder passes every PI_* it is handed, so one set there (a URL with a
# password in it is no "secret-looking" name) reached every command of every agent. A
# command's PI_* come from its own exec.start; the locale still comes from serve's.
SV_SECRET=pw-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
SERVE_ENV="PI_DB_URL=postgres://app:$SV_SECRET@db/x PI_SANDBOX_NOTE=n-$SV_SECRET LANG=C.UTF-8" \
	relay_up "$R" "$W" || { echo "Bail out! pistisd serve did not connect: $(tail -n 3 "$W/pd.log")"; exit 1; }
in_root "$R" pistisd users ensure rt-alice --uid 11100 >/dev/null
out=$(timeout 20 "$BIN/pistis" exec --agent rt-alice -- env 2>&1)
like "an agent's command runs (its environment listed)" "$out" '^USER=pi-agent-'
unlike "... with no PI_* of pistisd serve's own environment" "$out" "^PI_(DB_URL|SANDBOX_NOTE)=|$SV_SECRET"
like "... the locale of serve's environment still passes" "$out" '^LANG=C\.UTF-8$'
timeout 20 "$BIN/pistis" call exec.start '{"agent":"rt-alice","argv":["/bin/sh","-c","env >\"$HOME/env.out\""],"env":{"PI_MINE":"own-value"}}' >/dev/null 2>&1
AHOME=$(in_root "$R" pistisd users show rt-alice 2>/dev/null | sed -n 's/^home=//p')
for _ in $(seq 50); do [ -s "$R$AHOME/env.out" ] && break; sleep 0.1; done
like "... a PI_* of the command's own exec.start does" "$(cat "$R$AHOME/env.out" 2>&1)" '^PI_MINE=own-value$'

done_testing
