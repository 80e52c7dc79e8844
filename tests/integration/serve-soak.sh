#!/bin/bash
# Promise 6 (docs/security.md): `pistisd serve` stays up and loses nothing over many
# operations. A relay of our own (serve-soak.py) runs rounds of mixed operations, error
# paths above all; what serve holds after them (fds and what they point at, resident and
# data size, threads, children, zombies) must be within a small bound of what it held after
# a warm-up, every command must have seen only fds 0-2, and nothing may be left in /tmp,
# the agent's TMPDIR or the SysV IPC table. A throwaway Debian root, root, private mount
# namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd
need_python_root
trap serve_test_cleanup EXIT
ROUNDS=${PISTIS_SOAK_ROUNDS:-12}
# A devpts instance of the root's own with a small pool, as a container has one: a pty
# that a path kept would use up the pool within the rounds.
mkdir -p "$R/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,max=8 devpts "$R/dev/pts" &&
	ln -sf pts/ptmx "$R/dev/ptmx" || missing "cannot mount devpts"
serve_setup "$R"
in_root "$R" pistisd users ensure-base >/dev/null
AG=soak1
U=30611
in_root "$R" pistisd users ensure "$AG" --uid $U >/dev/null || echo "# ensure failed"
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts" # sudo resolves its host name
printf '#!/bin/sh\necho trusted\n' >"$W/hi"
chmod 0755 "$W/hi"
"$BIN/pistisd" trusted add hi "$W/hi" --root "$R" >"$W/add.out" 2>&1 || echo "# trusted add failed"
harden_shared "$R"
# The agent's TMPDIR: its home's tmp (docs/users.md, "Homes and modes").
home=$(in_root "$R" getent passwd $U | cut -d: -f6)
TMPD=$R${home:-/no-home-of-uid-$U}/tmp
find "$R/data" | sort >"$W/data0"
fake_relay_run "$R" "$W" "$(dirname "$0")/serve-soak.py" "$AG" "$ROUNDS" hi
val() { sed -n "s/^$1=//p" "$W/out" | head -n 1; }
sed "s/^/# /" "$W/out"; tail -5 "$W/pd.log" | sed "s/^/# pd: /"
grep -c "removed [0-9]* SysV IPC" "$W/pd.log" | sed "s/^/# IPC removals logged: /"
is "no operation went wrong" "$(val bad_count)" 0
ok "$(val requests) requests in $(val seconds) s" test "$(val requests)" -gt $((ROUNDS * 40))
ok "serve holds no more fds than after the warm-up: $(val d_fds)" test "$(val d_fds)" -le 0
ok "its resident size grew by less than 2 MiB: $(val d_rss_kb) KiB" test "$(val d_rss_kb)" -lt 2048
ok "its data size grew by less than 2 MiB: $(val d_data_kb) KiB" test "$(val d_data_kb)" -lt 2048
is "no more threads" "$(val d_threads)" 0
is "no children left" "$(val d_children)" 0
is "no zombies" "$(val d_zombies)" 0
ok "no more command cgroups under the agent's: $(val d_cgroups)" test "$(val d_cgroups)" -le 0
ok "... and no more than its 4 reusable slots: $(val slots)" test "$(val slots)" -le 4
is "no process of the agent left" "$(root_pids "$R" $U | wc -l)" 0
is "nothing of the agent's left in /tmp but its fixtures" \
	"$(find "$R/tmp" -mindepth 1 -user $U ! -path "$R/tmp/soak*" -printf '%P\n' 2>&1 | grep -v "^pistis-$AG" | head -5)" ""
is "nothing new in /data" "$(new_in "$R/data" "$W/data0")" ""
is "no pty left in use" "$(ptys_in_use "$R/dev/pts")" 0
is "its TMPDIR is empty" "$(entries_in "$TMPD")" ""
is "no SysV IPC objects of the agent" "$(ipc_of $U)" 0
is "40 administrative requests, each sent once the previous one is answered: none refused" \
	"$(val admin_limits)" 0
ok "an agent that kills its own processes in a loop: file operations answered ($(val killed_helpers))" \
	test -n "$(val killed_helpers)"
is "... its killed helpers and commands leave no child of serve" "$(val k_children)" 0
is "... nor a command cgroup beside the agent's slots" "$(val k_cgroups)" 0
ok "... nor more fds than its pool of empty command cgroups (16): $(val k_fds)" \
	test "$(val k_fds)" -le 16
# (how many time out before their exec rather than start stopped is up to the scheduler)
n=$(val stopped_starts | grep -o 'timed out before exec' | wc -l)
ok "an agent that stops its own spawn children: 4 starts answered ($n timed out before exec)" \
	test "$(val stopped_starts | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 4
is "... leave no child of serve" "$(val s_children)" 0
is "... nor a command cgroup beside the agent's slots" "$(val s_cgroups)" 0
ok "... nor more fds than its pool of empty command cgroups (16): $(val s_fds)" \
	test "$(val s_fds)" -le 16
is "300 commands whose readers never acknowledge their end all start, one after the other" \
	"$(val abandoned_started)" 300
like "... and the agent's next command still runs in one of its reusable cgroup slots" \
	"$(val after_abandoned_cgroup)" '/cmd-s[0-3]$'
ok "pistisd serve is still running" kill -0 "$PD"
done_testing
