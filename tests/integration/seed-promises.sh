#!/bin/bash
# The seed pages' promises to users (shared/seeds 004, the agent side; 000, the image and
# what agents meet), each checked end to end as an agent meets it: server-min, `pistisd
# serve` in a throwaway Debian root and the `pistis` client, over loopback. One TAP line per
# promise not checked elsewhere; docs/security.md, "What the seed pages promise", maps every
# promise to this file or to the test that holds it. Agents here have uids 33101-33103.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"
need_bins pistisd server-min pistis
command -v python3 >/dev/null || { echo "Bail out! python3 is needed to run this test"; exit 1; }
R=$(root_fresh debian) || { echo "Bail out! no debian test root"; exit 1; }
W=$(scratch)
trap serve_test_cleanup EXIT

P() { "$BIN/pistis" "$@"; }
SEED=$(head -c 9 /dev/urandom | base64 | tr -d '/+=')
A=seed/alice B=seed/bob C=seed/carol
user_of() { printf 'pi-agent-%s' "$(printf %s "$1" | sha256sum | cut -c1-8)"; }
AU=$(user_of $A) BU=$(user_of $B) CU=$(user_of $C)
XA() { P exec --agent $A -- sh -c "$1"; } # a shell command line as alice, her exit code
XB() { P exec --agent $B -- sh -c "$1"; }

# The trees of the seed's path table as an image leaves them before any apply: root's, open.
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts" # sudo resolves the host name
mkdir -p "$R/workspaces/proj/tools" "$R/workspace/repo" "$R/data/home/.pi" "$R/data/sessions" \
	"$R/data/backups" "$R/certs" "$R/opt/seed" "$R/data/extension-data/browser"
harden_shared "$R" || { echo "Bail out! cannot mount the shared trees nosuid"; exit 1; }
echo "readme" >"$R/workspaces/proj/README"
printf '#!/bin/sh\necho tool-ran\n' >"$R/workspaces/proj/tools/run.sh"
chmod 0700 "$R/workspaces/proj/tools/run.sh"
for f in data/portal.db data/home/.pi/auth.json data/sessions/s1.jsonl data/backups/b.tar certs/key.pem \
	data/extension-data/browser/Cookies; do
	echo "loot-$SEED" >"$R/$f"
done
chmod -R a+rwX "$R/workspaces" "$R/workspace" "$R/data/home" "$R/data/sessions" "$R/data/backups" "$R/certs" \
	"$R/data/extension-data"
chmod 0666 "$R/data/portal.db"
echo "private-$SEED" >"$R/opt/seed/private" && chmod 0600 "$R/opt/seed/private"
echo "open" >"$R/opt/seed/open" && chmod 0666 "$R/opt/seed/open"

# serve's own environment holds what a portal's would: keys that must reach no agent.
SERVE_ENV="OPENAI_API_KEY=sk-$SEED PORTAL_PASSWORD=pw-$SEED PI_PORTAL_SECRET=ps-$SEED LANG=C.UTF-8"
relay_up "$R" "$W" || { echo "Bail out! the relay did not come up"; sed 's/^/# /' "$W/pd.log"; exit 1; }
for a in "$A:33101" "$B:33102"; do
	P call users.ensure "{\"agent\":\"${a%:*}\",\"uid\":${a#*:}}" >/dev/null ||
		{ echo "Bail out! users.ensure ${a%:*}"; exit 1; }
done
# /etc as a container rebuilt from the image has it, carol not made yet.
mkdir "$W/etc0" && cp -a "$R"/etc/passwd "$R"/etc/group "$R"/etc/shadow "$W/etc0/" &&
	{ [ ! -e "$R/etc/gshadow" ] || cp -a "$R/etc/gshadow" "$W/etc0/"; }
AH=/data/sandbox-home/$AU BH=/data/sandbox-home/$BU

# A trusted command and its key, as an operator sets them up (docs/trusted.md).
TOOL=$(printf '#!/bin/sh\necho "as=$(id -un):$(id -u)"\n[ -r /data/.secrets/seedkey ] && echo "key=$(sha256sum </data/.secrets/seedkey | cut -c1-16)"\nexit 0\n' | base64 -w0)
P call trusted.add "{\"name\":\"seedtool\",\"data\":\"$TOOL\"}" | grep -q '"install":{"ok":true' ||
	{ echo "Bail out! trusted.add"; exit 1; }
echo "key-$SEED" >"$R/data/.secrets/seedkey"
chown 10002:10002 "$R/data/.secrets/seedkey" && chmod 0600 "$R/data/.secrets/seedkey"
KEYSUM=$(sha256sum <"$R/data/.secrets/seedkey" | cut -c1-16)
# The shipped defaults, applied: the seed's table (docs/policy.md).
P call policy.apply '{}' | grep -q '"ok":true' || { echo "Bail out! policy.apply of the defaults"; exit 1; }

# --- One user per agent ----------------------------------------------------------------
is "one user per agent: pi-agent- and 8 hex of SHA-256 of the id, and its group of that name" \
	"$(XA 'id -un; id -gn' 2>&1 | tr '\n' ' ')" "$AU $AU "
like "one user per agent: every agent's user is in pi-sandbox (10010)" \
	"$(P exec --agent $B -- id -G 2>&1)" '(^| )10010( |$)'
# Made the first time the agent needs them, with the id kept: carol's record exists, the
# rebuilt image's /etc has no line of hers; her first command makes the user again.
P call users.ensure "{\"agent\":\"$C\",\"uid\":33103}" >/dev/null
cp "$W"/etc0/* "$R/etc/"
gone=$(in_root "$R" id -u "$CU" 2>/dev/null || echo none)
is "one user per agent: made when first needed, a rebuilt container gets the same id back" \
	"$gone $(P exec --agent $C -- id -u 2>&1) $(in_root "$R" id -u "$CU" 2>&1)" "none 33103 33103"

# --- What runs in it: the shell, and whatever that command starts -------------------------
XA 'rm -f ~/gc*; (sleep 0.2; id -u >~/gc1) & setsid sh -c "id -u >~/gc2" & nohup sh -c "id -u >~/gc3" >/dev/null 2>&1 & wait; sleep 0.5'
is "the shell: what a command starts (background, setsid, nohup) runs as the agent's user" \
	"$(cat "$R$AH/gc1" "$R$AH/gc2" "$R$AH/gc3" 2>&1 | tr '\n' ' ')" "33101 33101 33101 "

# --- The roundabout ways: each reaches the file and meets the same permissions -----------
printf '#!/bin/sh\nid -u\ncat /data/.secrets/seedkey\n' | P write --agent $A "$AH/peek.sh"
out=$(XA 'chmod +x ~/peek.sh && ~/peek.sh' 2>&1)
like "a script the agent writes and runs: runs as its user, and the secret is refused" "$out" \
	'^33101$'
like "... (refused)" "$out" 'Permission denied'
out=$(XA 'd=/da; e=ta/.sec; f=rets; cat "$d$e$f/seed""key"; cat /workspaces/../data/./.secrets//seedkey' 2>&1)
is "a path put together from pieces, or with .. and //: refused the same" \
	"$(printf '%s\n' "$out" | grep -c 'Permission denied')" 2
out=$(XA 'ln -sf /data/.secrets/seedkey ~/k; ln -sf /data/.secrets ~/kd; cat ~/k; ls ~/kd/' 2>&1)
is "a symlink the agent makes: refused the same, to the file and to its directory" \
	"$(printf '%s\n' "$out" | grep -c 'Permission denied')" 2
out=$(XA 'ln /data/.secrets/seedkey ~/h' 2>&1)
like "a hard link to the secret cannot be made" "$out" 'Permission denied|Operation not permitted'
out=$(XA 'chmod -x ~/peek.sh; sh ~/peek.sh; perl -e "open(F, q{<}, q{/data/.secrets/seedkey}) or die qq{perl: \$!\n}; print <F>"; awk 1 /data/.secrets/seedkey' 2>&1)
is "an interpreter (sh running a script without x, perl, awk) meets the same permissions" \
	"$(printf '%s\n' "$out" | grep -c 'Permission denied')" 3
unlike "... and no way of these printed the key" "$(XA 'sh ~/peek.sh; cat ~/k' 2>&1)$out" "key-$SEED"

# --- pi's file tools do their reading and writing as the agent's user ----------------------
echo "note" | P write --agent $A "$AH/notes/n.txt"
P edit --agent $A "$AH/notes/n.txt" --old note --new edited >/dev/null
is "file tools: write and edit make and keep the agent's own file, not root's" \
	"$(stat -c '%u:%g %a' "$R$AH/notes/n.txt") $(cat "$R$AH/notes/n.txt")" "33101:33101 660 edited"
out=$(P read --agent $A /data/.secrets/seedkey 2>&1); rc=$?
like "file tools: read of a file the agent may not read is refused as cat refuses it (exit $rc)" \
	"$out" 'Permission denied'
unlike "... and says nothing of its content" "$out" "key-$SEED"
like "file tools: ls (fs.list) of a no-access directory is refused" \
	"$(P call fs.list "{\"agent\":\"$A\",\"path\":\"/data/.secrets\"}" 2>&1)" '"code":"denied"'
like "file tools: read through the agent's own symlink to the secret is refused" \
	"$(P read --agent $A "$AH/k" 2>&1)" 'denied|Too many levels|symbolic link'
like "file tools: edit of another agent's file is refused" \
	"$(P edit --agent $B "$AH/notes/n.txt" --old edited --new x 2>&1)" 'denied|Permission denied'

# --- grep and find run whole as the agent's user --------------------------------------------
XB "echo 'needle-$SEED' >~/mine" >/dev/null
out=$(XA "grep -rl 'needle-$SEED\|key-$SEED' /data /workspaces /workspace /tmp 2>/dev/null; echo rc=\$?")
is "grep -r over /data finds nothing in the secrets or another agent's home" "$out" "rc=2"
out=$(XA 'find / -xdev \( -name seedkey -o -name mine -o -name auth.json \) -print 2>/dev/null; find /data/trusted -type f -exec sh -c "id -u" \; | sort -u')
is "find lists nothing it may not list, and what find -exec starts runs as the agent" "$out" 33101

# --- The environment: a short list; env shows nothing worth taking -------------------------
out=$(P exec --agent $A -- env 2>&1)
bad=$(printf '%s\n' "$out" | sed 's/=.*//' |
	grep -Evx 'PATH|HOME|TMPDIR|USER|LOGNAME|SHELL|LANG|LANGUAGE|LC_[A-Z]+|TERM|COLORTERM|COLUMNS|LINES|NO_COLOR|FORCE_COLOR|CLICOLOR|PI_[A-Z0-9_]+')
is "the environment: only PATH, HOME, TMPDIR, the user's names, language, terminal and PI_*" "$bad" ""
unlike "the environment: serve's keys and passwords, and the client token, are not in env" \
	"$out" "$SEED|$PISTIS_TEST_CT|$(cat "$R/etc/pistis/token")"
like "the environment: PATH has the trusted commands' wrappers first" "$out" '^PATH=/data/bin:'

# --- HOME and TMPDIR of its own under /data/sandbox-home ---------------------------------------
is "HOME and TMPDIR: the agent's own, under /data/sandbox-home" \
	"$(XA 'echo "$HOME $TMPDIR"; stat -c "%u %a" "$HOME" "$TMPDIR"; mktemp' 2>&1 | sed "s|^$AH/tmp/tmp\.[A-Za-z0-9]*$|MKTEMP|" | tr '\n' ' ')" \
	"$AH $AH/tmp 33101 700 33101 700 MKTEMP "
XA 'echo tmp-$$ >"$TMPDIR/t"; mkdir -p ~/.cache && echo c >~/.cache/c' >/dev/null
out=$(XB "cat '$AH/tmp/t' '$AH/.cache/c'; ls '$AH'" 2>&1)
is "HOME and TMPDIR: no cache or temporary file is shared between agents" \
	"$(printf '%s\n' "$out" | grep -c 'Permission denied')" 3

# --- An agent's home: one agent cannot read another's, nor reach it through its processes --
P exec --agent $A --timeout 30 -- sh -c 'cd ~/notes && exec sleep 25' >/dev/null 2>&1 &
SL=$!
pid=
for _ in $(seq 50); do pid=$(pgrep -u 33101 -x sleep | head -n 1); [ -n "$pid" ] && break; sleep 0.1; done
out=$(XB "ls /proc/$pid/cwd/; cat /proc/$pid/cwd/n.txt; tr '\\0' '\\n' </proc/$pid/environ | grep HOME; ls /proc/$pid/root$AH" 2>&1)
is "another agent's processes: its cwd, environment and root lead nowhere (pid ${pid:-none})" \
	"$(printf '%s\n' "$out" | grep -v 'Permission denied' | grep -c .)$(printf '%s\n' "$out" | grep -c 'Permission denied')" 04
ok "... (the process was there to try)" test -n "$pid"
kill -TERM "$SL" 2>/dev/null; wait "$SL" 2>/dev/null
is "homes: each its agent's and its group's, 0700" \
	"$(in_root "$R" stat -c '%U:%G %a' "$AH" "$BH" | tr '\n' ' ')" "$AU:$AU 700 $BU:$BU 700 "
out=$(XA "ls /data/sandbox-home /data/agents >/dev/null 2>&1 && echo listed; cd $AH && cd /data/agents/$AU && echo passed")
is "/data/agents and /data/sandbox-home: passed through, not listed" "$out" passed

# --- Paths: the seed's default table ---------------------------------------------------------
out=$(XA 'for p in /data/portal.db /data/home/.pi/auth.json /data/sessions/s1.jsonl /data/backups/b.tar /certs/key.pem; do cat "$p"; done; ls /data/home /data/sessions /data/backups /certs' 2>&1)
is "defaults: portal.db, home, sessions, backups, certs: no access (not read, listed or passed)" \
	"$(printf '%s\n' "$out" | grep -c 'Permission denied')" 9
out=$(XA 'cat /data/extension-data/browser/Cookies; ls /data/extension-data' 2>&1)
is "defaults: what an extension keeps in /data/extension-data is closed to the agents" \
	"$(printf '%s\n' "$out" | grep -c 'Permission denied')" 2
is "no access: group root, no permissions for group or others" \
	"$(stat -c '%g %a' "$R/data/home" "$R/data/home/.pi/auth.json" "$R/data/portal.db" "$R/certs" | tr '\n' ' ')" \
	"0 700 0 600 0 600 0 700 "
is "defaults: /data/.secrets is no access, and stays pi-tools' own" \
	"$(stat -c '%u:%g %a' "$R/data/.secrets" "$R/data/.secrets/seedkey" | tr '\n' ' ')" "10002:10002 700 10002:10002 600 "
out=$(XA 'echo x >/workspaces/proj/a && echo x >/workspace/repo/a && echo w; echo x >>/data/bin/seedtool; cp /bin/true /data/bin/mine' 2>&1)
like "defaults: /workspaces and /workspace read & write, /data/bin read-only" "$out" '^w$'
is "... (/data/bin: not changed)" "$(printf '%s\n' "$out" | grep -c 'Permission denied')" 2
is "read & write on /workspaces changed the group of the projects' files to pi-sandbox (10010)" \
	"$(stat -c '%u:%g %a' "$R/workspaces/proj/README")" "0:10010 660"

# --- Read & write: new files keep the group; what an agent makes another may edit ------------
XA 'umask 077; echo a >/workspaces/proj/by-shell; mkdir /workspaces/proj/dir-a' >/dev/null
echo b | P write --agent $A /workspaces/proj/by-tool
P call fs.mkdir "{\"agent\":\"$A\",\"path\":\"/workspaces/proj/dir-t\"}" >/dev/null
is "read & write: new files keep pi-sandbox and are writable by it (shell with umask 077, file tools)" \
	"$(stat -c '%u:%g %a' "$R"/workspaces/proj/{by-shell,by-tool,dir-a,dir-t} | tr '\n' ' ')" \
	"33101:10010 660 33101:10010 660 33101:10010 2770 33101:10010 2770 "
out=$(XB 'echo b2 >>/workspaces/proj/by-shell && echo b3 >/workspaces/proj/dir-a/f && echo ok' 2>&1)
P edit --agent $B /workspaces/proj/by-tool --old b --new bob >/dev/null 2>&1
is "read & write: another agent edits what the first made (shell and file tools)" \
	"$out $(cat "$R/workspaces/proj/by-tool")" "ok bob"

# --- Most specific rule wins ------------------------------------------------------------------
mkdir -p "$R/workspaces/proj/ro/rw" "$R/workspaces/proj/closed"
echo "closed-$SEED" >"$R/workspaces/proj/closed/f"
echo ro >"$R/workspaces/proj/ro/f"
RULES='[{"path":"/workspaces","access":"write"},{"path":"/workspaces/proj/ro","access":"read"},{"path":"/workspaces/proj/ro/rw","access":"write"},{"path":"/workspaces/proj/closed","access":"none"},{"path":"/workspaces/proj/tools","access":"read"},{"path":"/data/.secrets","access":"none"}]'
P call policy.apply "{\"rules\":$RULES}" | grep -q '"ok":true' || echo "# policy.apply of the nested rules failed"
out=$(XA 'echo x >/workspaces/proj/ro/rw/mine && echo deep-write; echo x >/workspaces/proj/ro/g; echo x >>/workspaces/proj/ro/f; cat /workspaces/proj/ro/f; cat /workspaces/proj/closed/f; ls /workspaces/proj/closed; cd /workspaces/proj/closed' 2>&1)
is "most specific wins: write under read under write, none beside them" \
	"$(printf '%s\n' "$out" | grep -v "Permission denied\|can't cd" | tr '\n' ' ')$(printf '%s\n' "$out" | grep -c "Permission denied\|can't cd")" \
	"deep-write ro 5"
out=$(XA 'p=/workspaces/proj; cat "$p/ro/rw/../../clo""sed/f"; cd /workspaces/proj/ro/rw && cat ../../closed/f' 2>&1)
is "most specific wins: a none tree reached through pieces and .. is still none" \
	"$(printf '%s\n' "$out" | grep -c 'Permission denied')" 2
out=$(XA '/workspaces/proj/tools/run.sh; cat /workspaces/proj/tools/run.sh | wc -l; echo x >>/workspaces/proj/tools/run.sh; rm -f /workspaces/proj/tools/run.sh; mv /workspaces/proj/tools/run.sh /workspaces/proj/x; chmod 777 /workspaces/proj/tools/run.sh; touch /workspaces/proj/tools/new' 2>&1)
is "read-only: the agent reads and runs what is in it, and cannot change it (write, rm, mv, chmod, create)" \
	"$(printf '%s\n' "$out" | head -n 2 | tr '\n' ' ')$(printf '%s\n' "$out" | grep -c 'Permission denied\|Operation not permitted')" \
	"tool-ran 2 5"
is "read-only: readable and runnable by everyone, writable only by root" \
	"$(stat -c '%u:%g %a' "$R/workspaces/proj/tools" "$R/workspaces/proj/tools/run.sh" "$R/workspaces/proj/ro/f" | tr '\n' ' ')" \
	"0:0 755 0:0 755 0:0 644 "
is "a path no rule names keeps the permissions it has" \
	"$(stat -c '%u %a' "$R/opt/seed/private" "$R/opt/seed/open" | tr '\n' ' ')$(XA 'cat /opt/seed/private' 2>&1 | grep -c 'Permission denied')" \
	"0 600 0 666 1"
like "the agents' homes are not rules: a rule on /data/sandbox-home is refused" \
	"$(P call policy.plan '{"rules":[{"path":"/data/sandbox-home","access":"write"}]}' 2>&1)" '"code":"bad_request"'

# --- Trusted commands -------------------------------------------------------------------------
is "trusted: the agent types the name; the script runs as pi-tools and can use the key" \
	"$(P exec --agent $A -- seedtool 2>&1 | tr '\n' ' ')" "as=pi-tools:10002 key=$KEYSUM "
out=$(XA 'cat /data/.secrets/seedkey; ls /data/.secrets' 2>&1)
is "trusted: pi-tools is the only one that can read /data/.secrets" \
	"$(printf '%s\n' "$out" | grep -c 'Permission denied')" 2
out=$(XA 'cat /data/trusted/seedtool | sha256sum | cut -c1-64; test -x /data/trusted/seedtool && echo runnable; echo x >>/data/trusted/seedtool; rm -f /data/trusted/seedtool; mv /data/trusted/seedtool /data/trusted/x; cp /bin/sh /data/trusted/seedtool2' 2>&1)
is "trusted: the agent can read and run the script in /data/trusted, not change it" \
	"$(printf '%s\n' "$out" | head -n 2 | tr '\n' ' ')$(printf '%s\n' "$out" | grep -c 'Permission denied')" \
	"$(sha256sum <"$R/data/trusted/seedtool" | cut -c1-64) runnable 4"
out=$(XA 'cp /data/trusted/seedtool ~/t && echo "cat /data/.secrets/seedkey" >>~/t && chmod +x ~/t
	for c in "/bin/sh -c id" "/bin/cat /data/.secrets/seedkey" "$HOME/t"; do
		sudo -n -u pi-tools $c 2>/dev/null && echo "ran: $c"
	done
	sudo -n /data/trusted/seedtool 2>/dev/null && echo "ran as root"; echo done' 2>&1)
is "trusted: the agent cannot run anything else as pi-tools (or root) through sudo" "$out" done
unlike "... nor a changed copy of the script" "$out" "key-$SEED"

# A script already in /data/bin under a command's name is moved into /data/trusted when the
# command is named (trusted.add without a script), never replaced by another's wrapper.
printf '#!/bin/sh\necho "old as $(id -un)"\n' >"$R/data/bin/oldtool" && chmod 0755 "$R/data/bin/oldtool"
cp "$R/data/bin/oldtool" "$W/oldtool"
out=$(P call trusted.add "{\"name\":\"oldtool\",\"data\":\"$TOOL\"}" 2>&1)
is "trusted: naming a command whose script is in /data/bin does not replace that script by another" \
	"$(printf '%s' "$out" | grep -o '"code":"[a-z_]*"') $(cmp -s "$W/oldtool" "$R/data/bin/oldtool" && echo kept)" \
	'"code":"exists" kept'
like "trusted: a script already in /data/bin is moved into /data/trusted when the command is named" \
	"$(P call trusted.add '{"name":"oldtool"}' 2>&1)" '"ok":true.*"adopted":true'
is "... and runs as pi-tools, by its name, from there" \
	"$(P exec --agent $A -- oldtool 2>&1) $(cmp -s "$W/oldtool" "$R/data/trusted/oldtool" && echo moved)" \
	"old as pi-tools moved"

# --- What goes into the agent's prompt: a link is left out, wherever it leads ----------------
XA 'echo "my memory" >~/MEMORY.md; ln -sf /workspaces/proj/README ~/SOUL.md; ln -sf /data/home/.pi/auth.json ~/TEAM.md; ln -sf '"$BH"'/mine ~/AGENTS.md' >/dev/null
rp() { P call fs.read_prompt "{\"agent\":\"$A\",\"path\":\"$AH/$1\"}" 2>&1 | grep -o '"ok":true\|"code":"[a-z_]*"'; }
is "prompt files: the agent's own MEMORY.md is read; a link in its place is left out, wherever it leads" \
	"$(for f in MEMORY.md SOUL.md TEAM.md AGENTS.md; do rp $f; done | tr '\n' ' ')" \
	'"ok":true "code":"denied" "code":"denied" "code":"denied" '
like "prompt files: one the agent could not read itself is left out" \
	"$(P call fs.read_prompt "{\"agent\":\"$A\",\"path\":\"$BH/mine\"}" 2>&1)" '"code":"denied"'
like "a rule for a path not there yet is said to be not there yet and does nothing" \
	"$(P call policy.plan '{"rules":[{"path":"/data/browser-profile","access":"none"}]}' 2>&1 | tr '\n' ' ')" \
	'"kind":"missing","path":"/data/browser-profile".*"ok":true.*"changed":0,'

# --- The image and what reaches in --------------------------------------------------------
# (server-min's listeners seen in the same list: the look itself works)
socks=$(ss -lntupH 2>&1)
is "the sandbox dials out: pistisd serve listens on no TCP or UDP port" \
	"$(printf '%s\n' "$socks" | grep -c "pid=$PD,") $(printf '%s\n' "$socks" | grep -c "pid=$SM,")" "0 2"
done_testing
