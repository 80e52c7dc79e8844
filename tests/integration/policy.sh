#!/bin/bash
# pistisd policy: apply / plan / check / explain / save over a throwaway Debian root full
# of hostile things (symlinks to secrets and /, hardlinks to /etc files, setuid files,
# planted ACLs, FIFOs, sockets, devices, hostile names). Each apply is judged against
# stat+ACL+xattr snapshots of /etc, /usr and the unmanaged part of /data, before and
# after. Runs as root in a private mount namespace; never touches the host.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/policy-lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || missing "$P not built"
command -v setfacl >/dev/null || missing "setfacl missing (scripts/bootstrap.sh check)"
R=$(root_fresh debian) || missing "no debian root"
A=10100 # an agent's uid

# --- the tree -------------------------------------------------------------------------
W=$R/workspaces/proj
mkdir -p "$W/src" "$W/sgid" "$W/acldir" "$R/data/bin" "$R/data/.secrets" "$R/data/home/x" \
	"$R/data/keep/sub" "$R/data/sessions"
echo 'int main(void){}' >"$W/src/main.c"
printf '#!/bin/sh\n' >"$W/build.sh"
chown -R $A:$A "$W"
chmod 0644 "$W/src/main.c"
chmod 04755 "$W/build.sh"
chmod 02777 "$W/sgid"
touch "$W/acl-file" && chown $A:$A "$W/acl-file"
setfacl -m u:12345:rw,g:0:rw "$W/acl-file"
# (control: the count below is 0 also where no ACL could be planted or read)
is "control: the planted access ACL is seen" "$(getfattr --absolute-names -n system.posix_acl_access "$W/acl-file" 2>&1 | grep -c '^system')" 1
setfacl -d -m u:12345:rwx "$W/acldir"
mkfifo -m 0666 "$W/fifo"
python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$W/sock"
mknod -m 0666 "$W/null" c 1 3
touch "$W/new
line" "$W/$(printf '\033[31mred')" "$W/$(printf '\377\376')" "$W/-rf"
chmod 0666 "$W/new
line" "$W/-rf"
ln -s /etc/shadow "$W/link-last"
ln -s / "$W/link-root"
ln -s ../../etc "$W/link-mid"
ln "$R/etc/shadow" "$W/shadow-hard"
ln "$R/etc/passwd" "$W/passwd-hard"
touch "$R/data/bin/tool" "$R/data/.secrets/token" "$R/data/portal.db" "$R/data/keep/f"
chmod 0775 "$R/data/bin/tool" # group root may write: not agents, so put right
chmod 0666 "$R/data/portal.db" "$R/data/keep/f"
setfacl -m u:12345:rwx "$R/data/keep/sub"

outside() { snap "$R/etc" "$R/usr" "$R/data/keep" "$R/root" "$R/bin" "$R/lib"; }
before=$(outside)

# --- apply the defaults ---------------------------------------------------------------
out=$("$P" policy apply --root "$R" 2>&1); rc=$?
is "apply exits 0" "$rc" 0
after=$(outside)
is "/etc, /usr, /data/keep unchanged by apply" "$(diff <(echo "$before") <(echo "$after"))" ""
is "workspace dir: group pi-sandbox, setgid, 2770, owner kept" "$(mode_of "$W")" "2770 $A:10010"
is "file: 660, owner kept" "$(mode_of "$W/src/main.c")" "660 $A:10010"
is "setuid file: bits gone, still runnable" "$(mode_of "$W/build.sh")" "770 $A:10010"
is "setgid dir from scratch" "$(mode_of "$W/sgid")" "2770 $A:10010"
is "planted access ACL removed" "$(getfattr --absolute-names -n system.posix_acl_access "$W/acl-file" 2>&1 | grep -c '^system')" 0
is "planted default ACL replaced by ours" "$(getfacl -p -d "$W/acldir" | grep -v '^#' | grep . | tr '\n' ' ')" \
	"user::rwx group::rwx other::--- "
is "FIFO handled (never opened)" "$(mode_of "$W/fifo")" "660 0:10010"
is "socket handled" "$(mode_of "$W/sock")" "660 0:10010"
is "device node never loosened" "$(mode_of "$W/null")" "666 0:0"
like "device reported" "$out" 'device node under a write rule'
is "hardlinked /etc/shadow unchanged" "$(mode_of "$R/etc/shadow")" "$(mode_of "$W/shadow-hard")"
like "hardlinks reported" "$out" 'passwd-hard: has more than one link'
is "symlinks untouched" "$(readlink "$W/link-last") $(readlink "$W/link-root") $(readlink "$W/link-mid")" \
	"/etc/shadow / ../../etc"
is "name with newline handled" "$(mode_of "$W/new
line")" "660 0:10010"
is "name with leading - handled" "$(mode_of "$W/-rf")" "660 0:10010"
is "/data/bin tool: read = 755 root" "$(mode_of "$R/data/bin/tool")" "755 0:0"
is "/data/.secrets stays pi-tools 700" "$(mode_of "$R/data/.secrets")" "700 10002:10002"
is "secret token 600 pi-tools" "$(mode_of "$R/data/.secrets/token")" "600 10002:10002"
is "portal.db none" "$(mode_of "$R/data/portal.db")" "600 0:0"
is "/data itself not named: unchanged" "$(mode_of "$R/data")" "755 0:0"
like "missing rule path reported" "$out" 'not there yet: /certs'

# --- re-apply only reads --------------------------------------------------------------
full_before=$(snap "$R/workspaces" "$R/data" "$R/etc")
out=$("$P" policy apply --root "$R" 2>&1); rc=$?
is "re-apply exits 0" "$rc" 0
like "re-apply changes nothing" "$out" ' 0 changed'
is "re-apply leaves every stat/ACL/xattr as it was" \
	"$(diff <(echo "$full_before") <(snap "$R/workspaces" "$R/data" "$R/etc"))" ""
out=$("$P" policy check --root "$R" 2>&1); rc=$?
is "check: hardlinks left not as the rule says, devices looser than it, do not conform" "$rc" 1
is "exactly those are listed (shadow-hard: root:shadow 0640, not the rule's group)" \
	"$(printf '%s\n' "$out" | grep '^violation' | cut -d: -f1 | sort | tr '\n' ' ')" \
	"violation /workspaces/proj/null violation /workspaces/proj/passwd-hard violation /workspaces/proj/shadow-hard "
rm -f "$W/null" "$W/passwd-hard" "$W/shadow-hard"
exits 0 "check: conforming" "$P" policy check --root "$R"

# --- check, plan, escaping ------------------------------------------------------------
chmod 0666 "$W/src/main.c"
touch "$W/$(printf 'x\ny\033')" && chmod 0606 "$W/$(printf 'x\ny\033')"
out=$("$P" policy check --root "$R" 2>&1); rc=$?
is "check: not conforming exits 1" "$rc" 1
like "check lists the violation" "$out" '^violation /workspaces/proj/src/main.c: mode'
like "names are escaped (newline, ESC)" "$out" 'x\\ny\\x1b: '
unlike "no raw escape byte in output" "$out" "$(printf '\033')"
out=$("$P" policy plan --root "$R" --rules "$(printf '/nonexistent/r\n\033[31m.json')" 2>&1)
like "a rules file name in an error: escaped once" "$out" "'/nonexistent/r\\\\n\\\\x1b\\[31m.json'"
exits 100 "explain --agent with an invalid id: a usage error" \
	"$P" policy explain /workspaces --root "$R" --agent "$(printf 'a\nb')"
s1=$(snap "$R/workspaces")
json=$("$P" policy plan --root "$R" --json 2>/dev/null); rc=$?
is "plan exits 0" "$rc" 0
is "plan changes nothing" "$(diff <(echo "$s1") <(snap "$R/workspaces"))" ""
is "plan --json is JSON with the change" "$(printf '%s' "$json" | python3 -c '
import json,sys; d=json.load(sys.stdin)
print(sorted(e["path"] for e in d["events"] if e["kind"]=="change")[0], d["summary"]["changed"])')" \
	"/workspaces/proj/src/main.c 2"
out=$("$P" policy apply --root "$R" 2>&1)
is "apply fixes it" "$(mode_of "$W/src/main.c")" "660 $A:10010"
unlike "apply lists no change without --verbose" "$out" '^changed'
chmod 0666 "$W/src/main.c"
out=$("$P" policy apply --root "$R" --verbose 2>&1)
like "apply --verbose lists the change" "$out" '^changed /workspaces/proj/src/main.c: mode'
is "... and makes it" "$(mode_of "$W/src/main.c")" "660 $A:10010"
# One thread and four threads leave the same tree (a loosened copy of the workspace each).
cp -a "$R/workspaces" "$R/ws1" && cp -a "$R/workspaces" "$R/ws4"
chmod -R g-w,o+w "$R/ws1" "$R/ws4" 2>/dev/null
chown -R $A:$A "$R/ws1" "$R/ws4"
printf '[{"path":"/ws1","access":"write"}]\n' >"$R/.rules-1"
printf '[{"path":"/ws4","access":"write"}]\n' >"$R/.rules-4"
"$P" policy apply --root "$R" --rules "$R/.rules-1" --threads 1 >/dev/null 2>&1
"$P" policy apply --root "$R" --rules "$R/.rules-4" --threads 4 >/dev/null 2>&1
is "--threads 4 leaves what --threads 1 leaves" \
	"$(diff <(cd "$R/ws1" && snap .) <(cd "$R/ws4" && snap .))" ""
is "... both applied" "$(mode_of "$R/ws1/proj/src/main.c") $(mode_of "$R/ws4/proj/src")" \
	"660 $A:10010 2770 $A:10010"
rm -rf "$R/ws1" "$R/ws4" "$R/.rules-1" "$R/.rules-4"

# --- explain --------------------------------------------------------------------------
chmod 0755 "$R"
out=$("$P" policy explain /workspaces/proj/src/main.c --root "$R" --uid $A 2>&1)
like "explain names the rule and line" "$out" 'rule: "/workspaces" write \(line 2\)'
like "explain: agent reads and writes it" "$out" 'traverse yes, read yes, write yes'
out=$("$P" policy explain /data/bin/tool --root "$R" --uid $A 2>&1)
like "explain: tool readable, not writable" "$out" 'read yes, write no, replace no'
out=$("$P" policy explain /data/.secrets/token --root "$R" --uid $A 2>&1)
like "explain: secrets not traversable" "$out" 'traverse no \(blocked at /data/.secrets\)'
out=$("$P" policy explain /etc/hostname --root "$R" 2>&1)
like "explain: unnamed path keeps its permissions" "$out" 'none covers this path'
out=$("$P" policy explain /workspaces/proj/link-last --root "$R" 2>&1)
like "explain: symlink is said to be one" "$out" 'is a symlink'
json=$("$P" policy explain /workspaces/proj/src/main.c --root "$R" --uid $A --json)
is "explain --json" "$(printf '%s' "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["rule"]["access"], d["agent"]["write"])')" "write True"

# --- save: validated, atomic, then applied --------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/pistis-test.$$.XXXXXX")
printf '[\n  {"path": "/workspaces", "access": "write"},\n  {"path": "rel/x", "access": "read"}\n]\n' >"$work/bad.json"
out=$("$P" policy save --root "$R" --rules "$work/bad.json" 2>&1); rc=$?
is "save of invalid rules exits 1" "$rc" 1
like "the error names line 3" "$out" 'line 3.*not absolute'
ok "nothing installed" test ! -e "$R/data/pistis/rules.json"
printf '[\n {"path":"/workspaces","access":"write"},\n {"path":"/workspaces/proj/link-mid","access":"none"}\n]\n' >"$work/sym.json"
out=$("$P" policy save --root "$R" --rules "$work/sym.json" 2>&1); rc=$?
is "a rule naming a symlink is refused" "$rc" 1
like "with its line" "$out" 'line 3'
cat >"$work/good.json" <<'EOF'
[
  {"path": "/workspaces", "access": "write"},
  {"path": "/workspaces/proj/src", "access": "read"},
  {"path": "/data/.secrets", "access": "none"}
]
EOF
out=$("$P" policy save --root "$R" --rules "$work/good.json" 2>&1); rc=$?
is "save exits 0" "$rc" 0
unlike "save lists only what needs attention, as apply does (no 'violation' per change)" \
	"$out" '^(violation|changed) '
is "rules file installed root 644" "$(mode_of "$R/data/pistis/rules.json")" "644 0:0"
is "installed bytes are the new rules" "$(cmp "$work/good.json" "$R/data/pistis/rules.json" && echo same)" same
is "and applied" "$(mode_of "$W/src")" "755 0:0"
ok "no temp file left" test -z "$(ls -A "$R/data/pistis" | grep -v '^rules.json$')"
out=$("$P" policy explain /workspaces/proj/src --root "$R" --uid $A 2>&1)
unlike "explain: a read rule in a write tree holds (no warning)" "$out" 'warning: .* can replace'
like "... replace no" "$out" 'replace no'
is "... its parent is pinned: root's, sticky" "$(mode_of "$W")" "3770 0:10010"
like "... and explain says why" "$("$P" policy explain /workspaces/proj --root "$R" 2>&1)" "root's and sticky"
mkdir -p "$R/open" && chmod 0777 "$R/open" && echo x >"$R/open/f"
printf '[{"path": "/open/f", "access": "read"}]\n' >"$work/ro-open.json"
out=$("$P" policy explain /open/f --root "$R" --rules "$work/ro-open.json" --uid $A 2>&1)
like "explain: a read rule in a directory anyone may write is not read-only" "$out" 'warning: .* can replace'
rm -rf "$R/open"
chown 1000 "$R/data/pistis/rules.json"
out=$("$P" policy check --root "$R" 2>&1); rc=$?
is "a rules file not owned by root is refused" "$rc" 1
like "saying why" "$out" 'owned by root'
chown 0 "$R/data/pistis/rules.json"
# Its directory too: where others may write it, the file could be swapped, or removed so
# that the built-in defaults would apply instead of the operator's rules.
pm=$(stat -c %a "$R/data/pistis")
chmod 0777 "$R/data/pistis"
out=$("$P" policy check --root "$R" 2>&1); rc=$?
is "a rules directory anyone may write: refused" "$rc" 1
like "... saying why" "$out" "'/data/pistis': must be owned by root and not writable"
mv "$R/data/pistis/rules.json" "$work/rules.kept"
out=$("$P" policy apply --root "$R" 2>&1); rc=$?
is "... and with the file gone from it, no fall back to the defaults" "$rc" 1
mv "$work/rules.kept" "$R/data/pistis/rules.json"
chmod "$pm" "$R/data/pistis"
exits 0 "the directory root's again: check runs" "$P" policy check --root "$R"

# save reads NEW once and installs the very bytes it validated: the file is swapped right
# after save read it (strace holds the close of NEW's fd for 3 s) for one with /data/home
# writable; what is installed and applied must be the first file, not the swapped one.
if command -v strace >/dev/null && strace -qq -o /dev/null true 2>/dev/null; then
	printf '[\n {"path": "/workspaces", "access": "write"},\n {"path": "/data/home", "access": "none"}\n]\n' >"$work/race.json"
	cp "$work/race.json" "$work/race.validated"
	printf '[\n {"path": "/workspaces", "access": "write"},\n {"path": "/data/home", "access": "write"}\n]\n' \
		>"$work/race-swap.json"
	: >"$work/strace.log"
	strace -f -qq -e signal=none -o "$work/strace.log" -P "$work/race.json" -e trace=close \
		-e inject=close:delay_enter=3000000:when=1 \
		"$P" policy save --root "$R" --rules "$work/race.json" >"$work/race.out" 2>&1 &
	spid=$!
	for i in $(seq 1 100); do grep -q 'close(' "$work/strace.log" && break; sleep 0.1; done
	mv "$work/race-swap.json" "$work/race.json" # the close waits in strace meanwhile
	wait "$spid"; rc=$?
	is "save: NEW swapped after it was read: saved all the same" "$rc" 0
	is "... the bytes validated are the ones installed" \
		"$(cmp "$work/race.validated" "$R/data/pistis/rules.json" && echo same)" same
	is "... and the rules validated are the ones applied (/data/home none)" \
		"$(mode_of "$R/data/home")" "700 0:0"
	cp "$work/good.json" "$work/restore.json"
	exits 0 "... the earlier rules saved again" "$P" policy save --root "$R" --rules "$work/restore.json"
else
	untested "save: NEW swapped after it was read" "strace missing or not allowed"
fi

# The directory's fsync failing after the rename (strace fails the second fsync, the
# directory's): the new file is in place and what every reader gets, so save says so, as
# a warning, and applies it; "nothing replaced" would be false.
if command -v strace >/dev/null && strace -qq -o /dev/null true 2>/dev/null; then
	printf '[\n {"path": "/workspaces", "access": "write"},\n {"path": "/data/home", "access": "none"}\n]\n' >"$work/sync.json"
	out=$(strace -f -qq -o /dev/null -e trace=fsync -e inject=fsync:error=EIO:when=2 \
		"$P" policy save --root "$R" --rules "$work/sync.json" 2>&1); rc=$?
	is "save: the directory's fsync fails after the rename: exit 0" "$rc" 0
	like "... a warning that says the file is saved, and why it may not last" "$out" \
		"Saved /data/pistis/rules.json, but syncing its directory failed: [^;]*; applying"
	unlike "... never 'nothing replaced'" "$out" "nothing replaced"
	is "... the new rules in place" "$(cmp "$work/sync.json" "$R/data/pistis/rules.json" && echo same)" same
	like "... and applied" "$out" "saved /data/pistis/rules.json \\(2 rules\\); applying"
	exits 0 "... the earlier rules saved again" "$P" policy save --root "$R" --rules "$work/restore.json"
else
	untested "save: the directory's fsync fails after the rename" "strace missing or not allowed"
fi

# --- the openat2 fallback --------------------------------------------------------------
before=$(outside)
chmod 0666 "$W/src/main.c"
out=$(PISTIS_NO_OPENAT2=1 "$P" policy apply --root "$R" 2>&1); rc=$?
is "apply with the per-component resolver" "$rc" 0
is "fallback: outside unchanged" "$(diff <(echo "$before") <(outside))" ""
is "fallback: applied" "$(mode_of "$W/src/main.c")" "644 0:0"

# --- a tree deeper than the walk's bound (fails closed) ----------------------------------
# An agent's tree 20,000 levels deep (its own, 0777). The walk stops at its depth bound;
# the directory there is made root:root 0700 whatever the rule, so nothing deeper is
# reachable, and apply, plan and check say so and exit 1.
mkdeep() {
	python3 - "$1" "$A" <<'EOF'
import os, sys
top, uid = sys.argv[1], int(sys.argv[2])
os.mkdir(top)
fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
for i in range(20000):
    os.fchown(fd, uid, uid); os.fchmod(fd, 0o777)
    os.mkdir("x", dir_fd=fd)
    n = os.open("x", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    os.close(fd); fd = n
os.fchown(fd, uid, uid); os.fchmod(fd, 0o777)
os.close(fd)
EOF
}
# deep_at DIR LEVEL -> "MODE UID:GID" of the directory LEVEL levels below DIR (by fds:
# the path is longer than PATH_MAX)
deep_at() {
	python3 - "$1" "$2" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_PATH | os.O_DIRECTORY)
for i in range(int(sys.argv[2])):
    n = os.open("x", os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    os.close(fd); fd = n
st = os.fstat(fd)
print("%o %d:%d" % (st.st_mode & 0o7777, st.st_uid, st.st_gid))
EOF
}
deep_path() { python3 -c 'import sys; print("/deep" + "/x" * int(sys.argv[1]))' "$1"; }
for access in read write; do
	case $access in read) above="755 0:0" ;; write) above="2770 $A:10010" ;; esac
	mkdeep "$R/deep"
	printf '[{"path":"/deep","access":"%s"}]\n' "$access" >"$work/deep.json"
	out=$("$P" policy plan --root "$R" --rules "$work/deep.json" 2>&1); rc=$?
	n=$(printf '%s\n' "$out" | sed -n 's/^would close .*(\([0-9]*\) levels).*/\1/p')
	is "deep tree, $access: plan exits 1" "$rc" 1
	ok "... names the bound (about 4096 levels: $n)" test "${n:-0}" -ge 900 -a "${n:-0}" -le 4096
	is "... as the directory it would close" \
		"$(printf '%s\n' "$out" | grep '^would close ' | sed 's/: deeper.*//')" \
		"would close $(deep_path "$n")"
	is "... and changes nothing" "$(deep_at "$R/deep" "$n") $(deep_at "$R/deep" 0)" \
		"777 $A:$A 777 $A:$A"
	out=$("$P" policy apply --root "$R" --rules "$work/deep.json" 2>&1); rc=$?
	is "deep tree, $access: apply exits 1" "$rc" 1
	line=$(printf '%s\n' "$out" | grep '^closed ')
	is "... the message names the bound directory" "${line%%: deeper*}" "closed $(deep_path "$n")"
	like "... and says why" "$line" ": deeper than the walk's bound \\($n levels\\); what lies below was not walked"
	like "... the summary counts it as an error" "$out" "^apply: .* 1 errors"
	is "... and --json says the apply is not complete" "$("$P" policy apply --root "$R" \
		--rules "$work/deep.json" --json 2>/dev/null | python3 -c '
import json, sys; d = json.load(sys.stdin); e = [x for x in d["events"] if x["kind"] == "too-deep"]
print(d["summary"]["complete"], d["summary"]["errors"], len(e), e[0]["depth_max"], e[0]["new"])')" \
		"False 1 1 $n {'uid': 0, 'gid': 0, 'mode': '0700'}"
	is "... the bound directory is root:root 0700" "$(deep_at "$R/deep" "$n")" "700 0:0"
	is "... the directories above it get the rule" \
		"$(deep_at "$R/deep" 0)|$(deep_at "$R/deep" 1)|$(deep_at "$R/deep" $((n - 1)))" \
		"$above|$above|$above"
	is "... what lies below is left as it was (unreachable now)" \
		"$(deep_at "$R/deep" $((n + 1)))" "777 $A:$A"
	out=$("$P" policy check --root "$R" --rules "$work/deep.json" 2>&1); rc=$?
	is "deep tree, $access: check exits 1" "$rc" 1
	is "... the bound is the one violation" \
		"$(printf '%s\n' "$out" | grep '^violation' | sed 's/: deeper.*//')" \
		"violation $(deep_path "$n")"
	rm -rf "$R/deep"
done

# --- pistis's own trees: no rule changes them -------------------------------------------
# The agents' homes (each its own agent's, 0700) and pistis's state (registry, rules, relay
# token) under a rule for /data or /: walked around, never made group-writable; a rule naming
# one is refused; the write directory above them is pinned (root's, sticky), so no agent
# renames one away and puts its own in its place.
mkdir -p "$R/data/pistis" "$R/data/sandbox-home/pi-agent-0a0a0a0a/tmp" "$R/data/agents/pi-agent-0a0a0a0a"
chmod 0700 "$R/data/pistis" && echo tok >"$R/data/pistis/token" && chmod 0600 "$R/data/pistis/token"
chmod 0711 "$R/data/sandbox-home" "$R/data/agents"
echo memory >"$R/data/agents/pi-agent-0a0a0a0a/MEMORY.md"
chown -R $A:$A "$R/data/sandbox-home/pi-agent-0a0a0a0a" "$R/data/agents/pi-agent-0a0a0a0a"
chmod 0700 "$R/data/sandbox-home/pi-agent-0a0a0a0a" "$R/data/sandbox-home/pi-agent-0a0a0a0a/tmp" \
	"$R/data/agents/pi-agent-0a0a0a0a"
own=$(snap "$R/data/pistis" "$R/data/sandbox-home" "$R/data/agents")
printf '[{"path":"/data","access":"write"}]\n' >"$work/data.json"
out=$("$P" policy apply --root "$R" --rules "$work/data.json" --keep-processes 2>&1); rc=$?
is "a write rule on /data: apply exits 0" "$rc" 0
is "... pistis's state and the agents' homes are untouched" \
	"$(diff <(echo "$own") <(snap "$R/data/pistis" "$R/data/sandbox-home" "$R/data/agents"))" ""
is "... what else is in /data got the rule" "$(mode_of "$R/data/keep/f")" "660 0:10010"
is "... /data itself is pinned: root's, sticky" "$(mode_of "$R/data")" "3770 0:10010"
# The trees trusted commands rest on, not named by the rules: implied rules keep them
is "... the secrets stay pi-tools' (an implied none rule)" "$(mode_of "$R/data/.secrets")" "700 10002:10002"
is "... the wrappers on every agent's PATH stay read-only (implied read)" "$(mode_of "$R/data/bin/tool")" "755 0:0"
like "explain says the rule is implied" \
	"$("$P" policy explain /data/bin/tool --root "$R" --rules "$work/data.json" 2>&1)" \
	'rule: "/data/bin" read \(implied\)'
# An agent (it may write /data now) put a link where an implied rule points: the rules still
# load and apply; the link is reported, never followed.
mv "$R/data/bin" "$R/data/bin.real" && ln -s /etc "$R/data/bin"
before=$(outside)
chmod 0666 "$R/data/keep/f"
out=$("$P" policy apply --root "$R" --rules "$work/data.json" --keep-processes 2>&1); rc=$?
like "a link at /data/bin: reported, the implied rule not applied" "$out" \
	'/data/bin \(rule implied\) is a symlink'
is "... the rest applied" "$(mode_of "$R/data/keep/f")" "660 0:10010"
is "... /etc unchanged" "$(diff <(echo "$before") <(outside) | grep -c '/etc')" 0
rm "$R/data/bin" && mv "$R/data/bin.real" "$R/data/bin"
# It was write-level content as /data/bin.real meanwhile (root:pi-sandbox 0770: any agent
# could have rewritten tool), and now it is back on every agent's PATH: never made
# root's 0755 as it is, reported until the operator has looked at it.
out=$("$P" policy apply --root "$R" --rules "$work/data.json" --keep-processes 2>&1); rc=$?
is "the link gone, apply again: exits 1" "$rc" 1
like "... a file agents could write, moved back into /data/bin, is reported" "$out" \
	"error /data/bin/tool: agents could write it \(owner 0, group 10010, mode 0770, or an access ACL\)"
is "... and left as it was" "$(mode_of "$R/data/bin/tool")" "770 0:10010"
chmod 0755 "$R/data/bin/tool" && chgrp 0 "$R/data/bin/tool" # the operator has looked
exits 0 "... looked at and closed by the operator: apply again" "$P" policy apply --root "$R" --rules "$work/data.json" --keep-processes
exits 0 "... and check finds the tree conforming" "$P" policy check --root "$R" --rules "$work/data.json"
# A root file anyone may write, in /data/trusted (trusted install pins every root 0755
# script there): its bytes may be an agent's
mkdir -p "$R/data/trusted" && install -m 0757 /dev/null "$R/data/trusted/rotate"
out=$("$P" policy check --root "$R" --rules "$work/data.json" 2>&1); rc=$?
is "a root file others may write in /data/trusted: check exits 1" "$rc" 1
like "... naming it" "$out" "violation /data/trusted/rotate: agents could write it \(owner 0, group [0-9]+, mode 0757"
rm "$R/data/trusted/rotate"
# An agent's file in the secrets' directory (left from an earlier life of the volume): the
# implied none rule would make it pi-tools', and trusted commands would take it as a secret
install -o $A -g $A -m 0666 /dev/null "$R/data/.secrets/gh-token"
out=$("$P" policy check --root "$R" --rules "$work/data.json" 2>&1); rc=$?
is "an agent's file in /data/.secrets: check exits 1" "$rc" 1
like "... naming it, never to be made pi-tools'" "$out" \
	"violation /data/.secrets/gh-token: owned by agent uid $A .*never made pi-tools'"
"$P" policy apply --root "$R" --rules "$work/data.json" --keep-processes >/dev/null 2>&1
is "... apply leaves it the agent's, as it was" "$(mode_of "$R/data/.secrets/gh-token")" "666 $A:$A"
rm "$R/data/.secrets/gh-token"
# An agent's link on every agent's PATH (B would run A's git as B): reported, left
ln -s /workspaces/a/git "$R/data/bin/git" && chown -h $A:$A "$R/data/bin/git"
out=$("$P" policy check --root "$R" --rules "$work/data.json" 2>&1); rc=$?
is "an agent's link in /data/bin: check exits 1" "$rc" 1
like "... naming it" "$out" "violation /data/bin/git: a symlink of agent uid $A in a trusted commands' tree"
rm "$R/data/bin/git"
exits 0 "... removed: the tree conforms again" "$P" policy check --root "$R" --rules "$work/data.json"
out=$("$P" policy explain /data/sandbox-home/pi-agent-0a0a0a0a/tmp --root "$R" --rules "$work/data.json" 2>&1)
like "explain: a home is pistis's own, no rule applies" "$out" \
	'rule: none applies: /data/sandbox-home is pistis.s own'
is "explain --json names the reserved tree" \
	"$("$P" policy explain /data/pistis/token --root "$R" --rules "$work/data.json" --json |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["rule"], d["reserved"])')" \
	"None /data/pistis"
for p in /data/pistis /data/sandbox-home/pi-agent-0a0a0a0a /data/agents; do
	printf '[{"path":"%s","access":"read"}]\n' "$p" >"$work/own.json"
	out=$("$P" policy apply --root "$R" --rules "$work/own.json" 2>&1); rc=$?
	is "a rule naming $p is refused (exit 1)" "$rc" 1
	like "... saying why" "$out" "is pistis's own"
done
is "... nothing changed" "$(diff <(echo "$own") <(snap "$R/data/pistis" "$R/data/sandbox-home" "$R/data/agents"))" ""
# The same trees under another name: /data bind-mounted elsewhere and a rule naming that
# place would walk the homes, the registry and the secrets with the rule's access (the walk
# knows pistis's trees by path). A rule must name them by their own path.
mkdir -p "$R/srv/alias" "$R/srv/bin-alias"
mount --bind "$R/data" "$R/srv/alias"
mount --bind "$R/data/bin" "$R/srv/bin-alias"
for a in "/srv/alias:/data" "/srv/bin-alias:/data/bin"; do
	printf '[{"path":"%s","access":"write"}]\n' "${a%%:*}" >"$work/alias.json"
	out=$("$P" policy apply --root "$R" --rules "$work/alias.json" 2>&1); rc=$?
	is "a rule naming ${a%%:*} ($(echo "${a#*:}") under another name) is refused (exit 1)" "$rc" 1
	like "... saying why" "$out" "is ${a#*:} under another name"
done
is "... nothing changed" "$(diff <(echo "$own") <(snap "$R/data/pistis" "$R/data/sandbox-home" "$R/data/agents"))" ""
# ... nor a path beneath one: a write rule on another agent's home, the secrets or the
# registry, reached through an alias (the node or the nearest directory on the way that is
# there); the highest tree on the way is named
mkdir -p "$R/data/.secrets/gh" "$R/srv/agents-alias"
mount --bind "$R/data/agents" "$R/srv/agents-alias"
secrets=$(snap "$R/data/.secrets")
for a in /srv/alias/agents/pi-agent-0a0a0a0a:/data:/srv/alias \
	/srv/alias/.secrets/gh:/data:/srv/alias /srv/alias/pistis/sub:/data:/srv/alias \
	/srv/alias/sandbox-home/x/y:/data:/srv/alias /srv/bin-alias/sub:/data/bin:/srv/bin-alias \
	/srv/agents-alias/pi-agent-0a0a0a0a:/data/agents:/srv/agents-alias; do
	IFS=: read -r rp tree alias <<<"$a"
	printf '[{"path":"/workspaces","access":"read"},{"path":"%s","access":"write"}]\n' \
		"$rp" >"$work/alias.json"
	for cmd in plan apply check; do
		out=$("$P" policy $cmd --root "$R" --rules "$work/alias.json" 2>&1); rc=$?
		is "$cmd: a rule on $rp (beneath $tree under another name) is refused (exit 1)" "$rc" 1
		like "... naming the line, the tree and its other name" "$out" \
			"line 1: '$rp': lies beneath $tree under another name \\('$alias',"
	done
done
is "... nothing changed" "$(diff <(echo "$own") <(snap "$R/data/pistis" "$R/data/sandbox-home" "$R/data/agents"))" ""
is "... the secrets neither" "$(diff <(echo "$secrets") <(snap "$R/data/.secrets"))" ""
umount "$R/srv/agents-alias"
umount "$R/srv/bin-alias" "$R/srv/alias"
# ... nor a bind mount of a directory INSIDE one (it shares no inode with the tree, only
# the file system): an agent's home, a secret's directory, mounted elsewhere; the mount's
# root on that file system says where it comes from.
mkdir -p "$R/data/agents/pi-agent-0b0b0b0b/notes" "$R/srv/home-alias" "$R/srv/gh-alias"
mount --bind "$R/data/agents/pi-agent-0b0b0b0b" "$R/srv/home-alias"
mount --bind "$R/data/.secrets/gh" "$R/srv/gh-alias"
own=$(snap "$R/data/pistis" "$R/data/sandbox-home" "$R/data/agents")
secrets=$(snap "$R/data/.secrets")
for a in /srv/home-alias:/data/agents /srv/home-alias/notes:/data/agents \
	/srv/gh-alias:/data/.secrets; do
	IFS=: read -r rp tree <<<"$a"
	printf '[{"path":"%s","access":"write"}]\n' "$rp" >"$work/alias.json"
	out=$("$P" policy apply --root "$R" --rules "$work/alias.json" 2>&1); rc=$?
	is "a rule on $rp (a bind mount of a directory inside $tree) is refused (exit 1)" "$rc" 1
	like "... naming the tree" "$out" "line 1: '$rp': lies beneath $tree under another name"
done
is "... nothing changed" "$(diff <(echo "$own") <(snap "$R/data/pistis" "$R/data/sandbox-home" "$R/data/agents"))" ""
is "... the secrets neither" "$(diff <(echo "$secrets") <(snap "$R/data/.secrets"))" ""
umount "$R/srv/home-alias" "$R/srv/gh-alias"
# A bind mount of a directory that is none of pistis's: a rule beneath it applies
mkdir -p "$R/srv/keep-alias"
mount --bind "$R/data/keep" "$R/srv/keep-alias"
printf '[{"path":"/srv/keep-alias/sub","access":"read"}]\n' >"$work/alias.json"
exits 0 "a rule beneath a bind mount of a tree of no one's applies" \
	"$P" policy apply --root "$R" --rules "$work/alias.json" --keep-processes
is "... as the rule says" "$(mode_of "$R/data/keep/sub")" "755 0:0"
umount "$R/srv/keep-alias"

# --- one apply or save at a time in a root ------------------------------------------------
# The CLI beside serve's policy.apply (or two operators) with different rules would leave
# each node as whichever walk came last made it: a mix of both rule sets. Apply and save
# hold a flock on /data/pistis itself (no lock file: nothing outside the trees changes).
mkdir -p "$R/lk" && chmod 0755 "$R/lk"
printf '[{"path":"/lk","access":"none"}]\n' >"$work/lk.json"
flock "$R/data/pistis" sleep 4 &
holder=$!
sleep 0.5
out=$("$P" policy apply --root "$R" --rules "$work/lk.json" --keep-processes --timeout 1 2>&1); rc=$?
is "apply while another holds the lock: gives up at --timeout (exit 111)" "$rc" 111
like "... saying why" "$out" "Another policy apply or save still runs in this root after 1 s"
is "... and changes nothing" "$(mode_of "$R/lk")" "755 0:0"
t0=$EPOCHREALTIME
out=$("$P" policy apply --root "$R" --rules "$work/lk.json" --keep-processes 2>&1); rc=$?
t1=$EPOCHREALTIME
is "apply waits for the other one, then applies (exit 0)" "$rc" 0
like "... saying it waits" "$out" "Another policy apply or save is running in this root .*; waiting for it"
ok "... until the lock is free (>= 1 s)" awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a >= 1) }'
is "... and applies" "$(mode_of "$R/lk")" "700 0:0"
wait "$holder"
# Without the closing-mark key (this root never had ensure-base) a none rule closes all
# the same, unmarked, and says so; ensure-base makes the key, and the next apply marks.
mkdir "$R/lk/sub"
out=$("$P" policy apply --root "$R" --rules "$work/lk.json" --keep-processes 2>&1); rc=$?
is "apply without a mark key: exit 0" "$rc" 0
like "... saying what that means" "$out" "No closing-mark key \(/data/pistis/mark.key; .pistisd users ensure-base. makes it\)"
is "... and closes" "$(mode_of "$R/lk/sub")" "700 0:0"
is "... without a mark" "$(getfattr --absolute-names -d -m '^user\.pistis' "$R/lk/sub" 2>/dev/null)" ""
"$P" users ensure-base --root "$R" >/dev/null || echo "# ensure-base failed" >&2
out=$("$P" policy apply --root "$R" --rules "$work/lk.json" --keep-processes 2>&1)
unlike "with the key back: no such line" "$out" "No closing-mark key"
like "... and the node gets its mark" "$(getfattr --absolute-names -d -m '^user\.pistis' "$R/lk/sub")" "user\.pistis\.closed\.[0-9a-f]{8}="
# A key others may read is not used, and every walk says why in one line (not just the
# errno of its error event); the file is left for root to remove.
chmod 0644 "$R/data/pistis/mark.key"
out=$("$P" policy check --root "$R" --rules "$work/lk.json" 2>&1)
like "a key others may read: check says why it is not used" "$out" "Closing-mark key /data/pistis/mark.key is not root's 0600 regular file of 32 bytes: it is not used"
out=$("$P" policy apply --root "$R" --rules "$work/lk.json" --keep-processes 2>&1); rc=$?
like "... and so does apply" "$out" "Closing-mark key /data/pistis/mark.key is not root's 0600 .*remove it and run .pistisd users ensure-base."
is "... which reports the walk's error (exit 1)" "$rc" 1
is "... and leaves the key as it is" "$(stat -c %a "$R/data/pistis/mark.key")" 644
chmod 0600 "$R/data/pistis/mark.key"

# --- usage ----------------------------------------------------------------------------
exits 0 "--help" "$P" policy --help
exits 100 "unknown command" "$P" policy frobnicate
for bad in ' -5' '+5' 4294967296 ''; do
	exits 100 "--timeout '$bad': a usage error" "$P" policy check --root "$R" --timeout "$bad"
done
exits 100 "--threads 65: a usage error" "$P" policy check --root "$R" --threads 65
# above the walk's bound: refused, not silently cut to 8
exits 100 "--threads 9: a usage error" "$P" policy check --root "$R" --threads 9
like "... naming the bound" "$("$P" policy check --root "$R" --threads 9 2>&1)" "from 0 \\(one per CPU\\) to 8"
"$P" policy check --root "$R" --threads 8 >/dev/null 2>&1
ok "--threads 8 is taken (the check runs: no usage error)" test $? != 100
exits 100 "--uid ' 10100': a usage error" "$P" policy explain /x --root "$R" --uid ' 10100'
exits 100 "explain without PATH" "$P" policy explain --root "$R"
exits 100 "explain of a relative path" "$P" policy explain rel --root "$R"
exits 100 "explain --uid of a uid no agent has (root)" "$P" policy explain /workspaces --uid 0 --root "$R"
exits 100 "... nor one above the agent range" "$P" policy explain /workspaces --uid 60000 --root "$R"
exits 100 "--threads wants a number" "$P" policy check --threads many --root "$R"
exits 111 "missing root" "$P" policy check --root /nonexistent-root
exits 111 "--rules naming a missing file: a system error, like a missing root" \
	"$P" policy check --root "$R" --rules "$work/nonexistent.json"
# Rule errors are escaped once (the log's escaping), not twice.
printf '[{"path":"/a","path":"/b","access":"read"}]\n' >"$work/dup.json"
printf '[{"path":"/a\\u0000b","access":"read"}]\n' >"$work/nul.json"
is "a duplicate key: the message quotes it once" "$("$P" policy check --root "$R" --rules "$work/dup.json" 2>&1)" \
	"pistisd: Invalid rules in '$work/dup.json', line 1: duplicate key 'path'"
is "\\u0000 in a string: the message says so without a doubled backslash" \
	"$("$P" policy check --root "$R" --rules "$work/nul.json" 2>&1)" \
	"pistisd: Invalid rules in '$work/nul.json', line 1: an escaped NUL (U+0000) in a string"
done_testing
