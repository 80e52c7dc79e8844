#!/bin/bash
# Red team: `pistisd users` against planted files: a symlinked /etc/passwd, /etc/.pwd.lock
# as a symlink or a FIFO, /data/pistis planted by an agent uid with a forged registry, a
# home that is a bind mount of a root directory, an agent's TMPDIR swapped for a symlink or,
# mid-ensure, for another agent's directory, a world-readable /etc/.pwd.lock, an agent
# writing the registry, default ACLs an earlier life left on the homes' parents. Debian
# root; root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || missing "pistisd not built"
S=$(scratch)
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
fresh() { R=$(root_fresh debian) || { echo "Bail out! no debian root"; exit 1; }; }
u() { "$P" users "$@" --root "$R"; }
snap() { stat -c '%u:%g %a' "$@"; }

# --- 1. /etc/passwd a symlink ---------------------------------------------------------------
fresh
echo "target" >"$S/passwd.target"
mv "$R/etc/passwd" "$S/passwd.real" && ln -s "$S/passwd.target" "$R/etc/passwd"
u ensure rt/a >/dev/null 2>&1
rc=$?
ok "ensure with /etc/passwd a symlink fails (rc=$rc)" test "$rc" -ne 0
is "... the link's target is untouched" "$(cat "$S/passwd.target")" target
ok "... the link is still a link" test -L "$R/etc/passwd"
# The refusal says what is wrong (it said "cannot read /etc/passwd (Symbolic link loop)", and
# for a FIFO or a directory "(File descriptor in bad state)"), as the registry's does.
like "... saying it is a symlink, nothing written" "$(u ensure rt/a 2>&1)" \
	"/etc/passwd is a symlink \(refused: .*\); nothing written"
rm "$R/etc/passwd" && mkfifo -m 0644 "$R/etc/passwd"
like "ensure with /etc/passwd a FIFO: says it is not a regular file, nothing written" \
	"$(u ensure rt/a 2>&1)" "/etc/passwd is not a regular file \(a FIFO, .*\); nothing written"
rm "$R/etc/passwd" && mv "$S/passwd.real" "$R/etc/passwd"

# --- 2. /etc/.pwd.lock a symlink, then a FIFO --------------------------------------------------
rm -f "$R/etc/.pwd.lock"
ln -s "$S/lock.target" "$R/etc/.pwd.lock"
u ensure rt/a >/dev/null 2>&1
rc=$?
ok "ensure with /etc/.pwd.lock a symlink fails (rc=$rc)" test "$rc" -ne 0
ok "... nothing was created where it points" test ! -e "$S/lock.target"
rm -f "$R/etc/.pwd.lock" && mkfifo -m 0600 "$R/etc/.pwd.lock"
t=$(date +%s%N)
timeout -s KILL 8 "$P" users ensure rt/b --root "$R" >"$S/out" 2>&1
rc=$?
ms=$(ms_since "$t")
ok "ensure with /etc/.pwd.lock a FIFO does not hang (rc=$rc, ${ms} ms; 137 = killed after 8 s)" \
	test "$rc" -ne 137
ok "... and fails closed, saying why (rc=$rc: $(head -c 200 "$S/out"))" test "$rc" -ne 0 -a "$rc" -ne 137
rm -f "$R/etc/.pwd.lock"

# --- 3. /data/pistis planted by an agent uid ------------------------------------------------------
fresh
mkdir -p "$R/data/pistis"
name=pi-agent-$(printf %s rt/victim | sha256sum | cut -c1-8)
printf 'pistis-users-registry 1\n10150:%s:active:rt/victim\n' "$name" >"$R/data/pistis/users.registry"
chown -R 10150:10150 "$R/data/pistis"
out=$(u ensure rt/victim 2>&1)
rc=$?
ok "ensure refuses an agent-owned /data/pistis (rc=$rc)" test "$rc" -ne 0
out=$(u show rt/victim 2>&1)
rc=$?
ok "show does not trust a registry in an agent-owned /data/pistis (rc=$rc: $(echo "$out" | head -n1))" \
	test "$rc" -ne 0
out=$(u list 2>&1)
rc=$?
unlike "list does not report the forged record (rc=$rc)" "$out" "rt/victim"
rm -rf "$R/data/pistis"

# --- 4. a home that is a bind mount of a root-owned directory -------------------------------------
fresh
u ensure rt/a >/dev/null 2>&1 || true
home=$(u show rt/a --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["home"])')
AUID=$(u show rt/a --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["uid"])')
mkdir -p "$S/rootdir/sub" && echo keep >"$S/rootdir/file"
chmod 0755 "$S/rootdir"
mount --bind "$S/rootdir" "$R$home"
before=$(snap "$S/rootdir")
u ensure rt/a >/dev/null 2>&1
is "ensure does not hand a mounted root-owned directory to the agent" "$(snap "$S/rootdir")" "$before"
umount "$R$home"

# --- 5. the agent swaps its TMPDIR, or its home, for a symlink ------------------------------------
fresh
u ensure rt/a >/dev/null 2>&1
home=$(u show rt/a --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["home"])')
AUID=$(stat -c %u "$R$home")
before=$(snap "$R/etc" "$R/etc/shadow")
rm -rf "$R$home/tmp" && ln -s /etc "$R$home/tmp" && chown -h "$AUID:$AUID" "$R$home/tmp"
u ensure rt/a >/dev/null 2>&1
is "an agent's tmp -> /etc symlink: /etc keeps owner and mode" "$(snap "$R/etc" "$R/etc/shadow")" "$before"
ok "... tmp is a directory again" test -d "$R$home/tmp" -a ! -L "$R$home/tmp"
is "... owned by the agent" "$(stat -c %u "$R$home/tmp")" "$AUID"
# The agent cannot write the registry or /etc through its own process.
out=$(in_root "$R" pistisd run --agent rt/a -- /bin/sh -c \
	'echo "10100:x:active:y" >>/data/pistis/users.registry; echo r=$?; echo x >>/etc/passwd; echo p=$?' 2>&1)
like "the agent cannot append to the registry" "$out" "r=[1-9]"
like "the agent cannot append to /etc/passwd" "$out" "p=[1-9]"
unlike "... no forged line" "$(cat "$R/etc/passwd")" '^x$'

# --- 6. the agent swaps a directory of another's in for its new TMPDIR, mid-ensure -------------
# ensure makes the agent's tmp root-owned 0700, then opens it by name and hands it over. The
# home is the agent's: in between, it can rename the new directory away and move in one it
# may write but does not own (another agent's, in a pi-sandbox tree on the same volume).
# strace holds every mkdirat's return for 0.4 s, which makes the window wide enough to hit.
fresh
u ensure rt/a >"$S/a.id" 2>&1 && u ensure rt/b >"$S/b.id" 2>&1
AUID=$(sed -n 's/^uid=//p' "$S/a.id")
BUID=$(sed -n 's/^uid=//p' "$S/b.id")
home=$(sed -n 's/^home=//p' "$S/a.id")
mkdir -p "$R/data/shared/bdir"
echo secret >"$R/data/shared/bdir/f"
chown 0:10010 "$R/data/shared" && chmod 02770 "$R/data/shared"
chown "$BUID:10010" "$R/data/shared/bdir" && chmod 02770 "$R/data/shared/bdir"
chown "$BUID:$BUID" "$R/data/shared/bdir/f" && chmod 0600 "$R/data/shared/bdir/f"
rmdir "$R$home/tmp"
in_root "$R" setpriv --reuid="$AUID" --regid="$AUID" --groups=10010 /bin/bash -c \
	"cd '$home' || exit 1; for i in \$(seq 1 4000); do
		mv tmp tmp.pistis 2>/dev/null && mv /data/shared/bdir tmp && exit 0
	done; exit 1" &
atk=$!
strace -qq -f -o /dev/null -e trace=mkdirat -e inject=mkdirat:delay_exit=400000 \
	"$P" users ensure rt/a --root "$R" >"$S/swap.out" 2>&1
rc=$?
wait "$atk"
arc=$?
ok "(the agent swapped the new tmp for B's directory mid-ensure: attacker rc=$arc)" test "$arc" = 0
is "B's directory keeps its owner, group and mode" "$(snap "$R$home/tmp")" "$BUID:10010 2770"
is "... and B's file inside it too" "$(snap "$R$home/tmp/f")" "$BUID:$BUID 600"
ok "... ensure fails closed, naming the directory (rc=$rc: $(head -c 200 "$S/swap.out"))" \
	test "$rc" -ne 0 -a -n "$(grep -F "$home/tmp" "$S/swap.out")"

# --- 7. an image's /etc/.pwd.lock that others may read -----------------------------------------
# Whoever can open the lock file can hold a read lock on it, and lckpwdf's write lock waits
# for every reader: an agent could stall every user change. ensure makes it 0600.
fresh
rm -f "$R/etc/.pwd.lock" && touch "$R/etc/.pwd.lock" && chmod 0644 "$R/etc/.pwd.lock"
exits 0 "ensure with a 0644 /etc/.pwd.lock" u ensure rt/a
is "... which is now root's alone" "$(snap "$R/etc/.pwd.lock")" "0:0 600"
AUID=$(u show rt/a | sed -n 's/^uid=//p')
out=$(in_root "$R" setpriv --reuid="$AUID" --regid="$AUID" --clear-groups /bin/bash -c \
	'exec 3</etc/.pwd.lock && echo opened || echo refused' 2>/dev/null)
is "... so the agent cannot open it to hold a read lock" "$out" refused

# --- An image that already names the agent (names are derived from ids): on a rebuild its
# recorded name may come with a password or another group's membership; both are refused,
# by the lock-free fast path (the agent complete in /etc) and by the locked path.
fresh
u ensure rt/img >"$S/id" 2>&1
name=$(sed -n 's/^name=//p' "$S/id")
cp "$R/etc/shadow" "$S/shadow.ok"
sed -i "s/^$name:!:/$name::/" "$R/etc/shadow"
like "(planted) the agent's shadow line has an empty password" "$(grep "^$name:" "$R/etc/shadow")" "^$name::"
out=$(u ensure rt/img 2>&1)
is "complete identity with an empty shadow password: ensure refuses (exit 1)" "$?" 1
like "... and says why" "$out" "has a password in /etc/shadow"
cp "$S/shadow.ok" "$R/etc/shadow"
sed -i "s/^$name:x:/$name::/" "$R/etc/passwd"
out=$(u ensure rt/img 2>&1)
is "an empty passwd password field: ensure refuses (exit 1)" "$?" 1
like "... and says why" "$out" "has a password in /etc/passwd"
sed -i "s/^$name::/$name:x:/" "$R/etc/passwd"
exits 0 "restored: ensure confirms it again" u ensure rt/img
sed -i "/^$name:/d" "$R/etc/passwd"
sed -i "s/^\(shadow:x:[0-9]*:.*\)$/\1,$name/; s/^shadow:x:\([0-9]*\):,/shadow:x:\1:/" "$R/etc/group"
like "(planted) the agent is a member of group shadow" "$(grep '^shadow:' "$R/etc/group")" "$name"
out=$(u ensure rt/img 2>&1)
is "rebuilt /etc listing the agent in group shadow: ensure refuses (exit 1)" "$?" 1
like "... naming the group" "$out" "member of group 'shadow' in /etc/group"
unlike "... and the user is not re-created" "$(cat "$R/etc/passwd")" "^$name:"

# The same with the identity complete in /etc (the lock-free fast path of every command's
# ensure): a membership elsewhere, a group password, another member in its own group.
# refused FILE SED-EXPR WHAT MESSAGE: SED-EXPR planted in /etc/FILE, ensure must exit 1
# saying MESSAGE; FILE is put back as it was.
refused() {
	cp "$R/etc/$1" "$S/$1.ok"
	sed -i "$2" "$R/etc/$1"
	out=$(u ensure rt/img 2>&1)
	is "complete identity, $3: ensure refuses (exit 1)" "$?" 1
	like "... saying so" "$out" "$4"
	cp "$S/$1.ok" "$R/etc/$1"
}
fresh
u ensure rt/img >"$S/id" 2>&1
name=$(sed -n 's/^name=//p' "$S/id")
refused group "s/^\(shadow:x:[0-9]*:\)\(.*\)$/\1$name/" "also a member of group shadow" \
	"member of group 'shadow' in /etc/group"
refused gshadow "s/^\(shadow:[^:]*:\)[^:]*:/\1$name:/" "an administrator of shadow in /etc/gshadow" \
	"administrator of group 'shadow' in /etc/gshadow"
refused group "s/^$name:x:/$name:\$6\$salt\$hash:/" "a password on its own group in /etc/group" \
	"group '$name' has a password in /etc/group"
refused gshadow "s/^$name:!:/$name:\$6\$salt\$hash:/" "a password on its own group in /etc/gshadow" \
	"group '$name' has a password in /etc/gshadow"
refused group "s/^\($name:x:[0-9]*:\)$/\1daemon/" "another user a member of its group" \
	"group '$name' lists members or administrators other than its agent in /etc/group \(line [0-9]+\)"
# pi-tools in it: ensure-base's check (every ensure implies it) refuses it first.
refused group "s/^\($name:x:[0-9]*:\)$/\1pi-tools/" "pi-tools a member of its group" \
	"user 'pi-tools' is a member of group '$name' in /etc/group \(line [0-9]+\)"
exits 0 "restored: ensure confirms it again" u ensure rt/img

# One uid for two agents, the registry and /etc edited to match (a corrupt volume, an
# operator's slip): the fast path must not confirm either; the full parse names the line.
u ensure rt/two >"$S/id2" 2>&1
uid1=$(sed -n 's/^uid=//p' "$S/id")
uid2=$(sed -n 's/^uid=//p' "$S/id2")
name2=$(sed -n 's/^name=//p' "$S/id2")
sed -i "s/^$uid2:$name2:/$uid1:$name2:/" "$R/data/pistis/users.registry"
sed -i "s/^$name2:x:$uid2:$uid2:/$name2:x:$uid1:$uid1:/" "$R/etc/passwd"
sed -i "s/^$name2:x:$uid2:/$name2:x:$uid1:/" "$R/etc/group"
for id in rt/img rt/two; do
	out=$(u ensure "$id" 2>&1)
	is "two agents on uid $uid1: ensure $id refuses (exit 1)" "$?" 1
	like "... naming the registry line" "$out" "users.registry:3: duplicate uid"
done

# --- a batch where one agent's home cannot be made ------------------------------------------------
# A mount point at agent a's tmp (mounted by root; what an agent puts there itself, a
# FIFO or a file, is replaced since redteam-lifecycle.sh). A batch with a in the middle
# used to stop at a: the agents after it were recorded but left without homes. Now every
# other home is made and a's failure is reported after them, naming it.
fresh
u ensure rt/ba >/dev/null
H=$(u show rt/ba | sed -n 's/^home=//p')
mount -t tmpfs -o size=1m pistis-rt "$R$H/tmp"
out=$(u ensure rt/bb rt/ba rt/bc 2>&1)
is "a batch with a mount point at an agent's tmp fails (exit 111)" "$?" 111
like "... naming that agent" "$out" "agent #2, pi-agent-"
for id in rt/bb rt/bc; do
	h=$(u show "$id" | sed -n 's/^home=//p')
	nu=$(u show "$id" | sed -n 's/^uid=//p')
	is "... $id's home, tmp and agent dir made, its own" \
		"$(snap "$R$h" "$R$h/tmp" "$R/data/agents/${h##*/}" | paste -sd' ')" "$nu:$nu 700 $nu:$nu 700 $nu:$nu 700"
done
ok "... the mount left alone" mountpoint -q "$R$H/tmp"
umount "$R$H/tmp"

# --- NIS compat lines ('+'/'-') in the image's /etc -------------------------------------------
# glibc's initgroups and musl's getgrouplist honour the member lists of "+group" and
# "-group" lines, and musl's getpwuid the uid of a "+user" line: a membership there put the
# agent in shadow's group for anything that calls initgroups (runuser, su, cron), and the
# uid of such a line was handed out as free.
fresh
name=$(u ensure rt/nis0 | sed -n 's/^name=//p')
u remove rt/nis0 --forget >/dev/null
cp -a "$R/etc/group" "$S/group.nis"
echo "+shadow:x:42:$name" >>"$R/etc/group"
out=$(u ensure rt/nis0 2>&1)
is "a '+shadow' group line listing the agent: ensure refuses (exit 1)" "$?" 1
like "... naming the group" "$out" "is a member of group '\+shadow' in /etc/group"
ok "... and no line is written for it" sh -c "! grep -q '^$name:' '$R/etc/passwd'"
cp -a "$S/group.nis" "$R/etc/group"
nu=$(u ensure rt/nis0 | sed -n 's/^uid=//p')
echo "-root2:x:0:$name" >>"$R/etc/group"
exits 1 "an existing agent (the lock-free path) named on a '-' group line: refused" u ensure rt/nis0
cp -a "$S/group.nis" "$R/etc/group"
free=$((nu + 1))
echo "+svc:x:$free:$free::/nonexistent:/bin/sh" >>"$R/etc/passwd"
out=$(u ensure rt/nis1 --uid "$free" 2>&1)
like "the uid of a '+svc' passwd line is taken: --uid refused" "$out" "uid $free belongs to user '\+svc'"
is "... and the next agent is not given it" "$(u ensure rt/nis2 | sed -n 's/^uid=//p')" "$((free + 1))"
echo "+svc:x:123" >>"$R/etc/passwd"
out=$(u ensure rt/nis3 2>&1)
like "a '+' line with too few fields is an error naming the line, as any other" "$out" \
	"/etc/passwd:[0-9]+: too few fields"

# --- A second line under one of pistis's names ---------------------------------------------------
# NSS resolves a name by its first line, but initgroups (su, runuser, sudo -u, cron) reads every
# group line: "pi-sandbox:x:0:AGENT" or "AGENT:x:27:AGENT" after the real one gave the agent
# group 0 or sudo, while ensure looked only at the first (red team). Refused, for a new agent
# and for an existing one (the lock-free path must not confirm it; the locked path names it).
fresh
u ensure-base >/dev/null
name=pi-agent-$(printf %s rt/dup | sha256sum | cut -c1-8)
cp -a "$R/etc/group" "$S/group.dup"
echo "pi-sandbox:x:0:$name" >>"$R/etc/group"
out=$(u ensure rt/dup --uid 40001 2>&1)
is "a second 'pi-sandbox' line, gid 0, listing a new agent: ensure refuses (exit 1)" "$?" 1
like "... naming the file and the line" "$out" \
	"group 'pi-sandbox' has a second line in /etc/group \(line [0-9]+, gid 0\)"
ok "... and writes no line for the agent" sh -c "! grep -q '^$name:' '$R/etc/passwd'"
cp -a "$S/group.dup" "$R/etc/group"
exits 0 "without it, the agent is made" u ensure rt/dup --uid 40001
for plant in "group:pi-sandbox:x:0:$name" "group:$name:x:27:$name" "gshadow:$name:!::daemon" \
	"passwd:$name:x:0:0::/root:/bin/sh" "shadow:$name::19000:0:99999:7:::"; do
	f=${plant%%:*} line=${plant#*:}
	cp -a "$R/etc/$f" "$S/$f.dup"
	echo "$line" >>"$R/etc/$f"
	out=$(u ensure rt/dup 2>&1)
	is "the existing agent, '$line' appended to /etc/$f: ensure refuses (exit 1)" "$?" 1
	like "... naming the line" "$out" "has a second line in /etc/$f \(line [0-9]+"
	cp -a "$S/$f.dup" "$R/etc/$f"
done
exits 0 "restored: ensure confirms it again" u ensure rt/dup

# --- ids written with a leading zero ------------------------------------------------------------
# The C libraries (and our parsers) read "040001" as 40001; the lock-free path looked for
# another holder of the agent's uid by its text (":40001:", "\n40001:") and missed it, so
# one uid was confirmed for two agents. The registry refuses a leading zero; a passwd or
# group id that may have one sends the call to the locked path, which compares numbers.
fresh
u ensure rt/a --uid 40001 >/dev/null && u ensure rt/c --uid 40003 >/dev/null
c=pi-agent-$(printf %s rt/c | sha256sum | cut -c1-8)
cp -a "$R/etc/passwd" "$S/passwd.zero" && cp -a "$R/etc/group" "$S/group.zero"
sed -i "s/^$c:x:40003:40003:/$c:x:040001:040001:/" "$R/etc/passwd"
out=$(u ensure rt/a 2>&1)
is "another user on the agent's uid, spelled 040001 in /etc/passwd: ensure refuses (exit 1)" "$?" 1
like "... naming it" "$out" "user '$c' in /etc/passwd shares id 40001"
cp -a "$S/passwd.zero" "$R/etc/passwd"
sed -i "s/^$c:x:40003:/$c:x:040001:/" "$R/etc/group"
out=$(u ensure rt/a 2>&1)
is "another group on the agent's gid, spelled 040001 in /etc/group: ensure refuses (exit 1)" "$?" 1
like "... naming it" "$out" "group '$c' in /etc/group shares gid 40001"
cp -a "$S/group.zero" "$R/etc/group"
echo "svc:x:01234:01234::/nonexistent:/usr/sbin/nologin" >>"$R/etc/passwd"
exits 0 "an unrelated user with a leading zero: the image's own, ensure goes on" u ensure rt/a
cp -a "$S/passwd.zero" "$R/etc/passwd"
sed -i "s/^40003:/040001:/" "$R/data/pistis/users.registry"
out=$(u ensure rt/a 2>&1)
is "rt/c's record alone on 040001: ensure rt/a refuses (exit 1)" "$?" 1
like "... naming the registry line" "$out" "users.registry:3: invalid uid \(a leading zero\)"
# The whole slip (red team): rt/c's record, user and group all on 040001.
sed -i "s/^$c:x:40003:40003:/$c:x:040001:040001:/" "$R/etc/passwd"
sed -i "s/^$c:x:40003:/$c:x:040001:/" "$R/etc/group"
for id in rt/a rt/c; do
	out=$(u ensure "$id" 2>&1)
	is "rt/c's record on 040001: ensure $id refuses (exit 1)" "$?" 1
	like "... naming the registry line" "$out" "users.registry:3: invalid uid \(a leading zero\)"
done

# --- pi-tools' groups ---------------------------------------------------------------------------
# Trusted commands run as pi-tools through sudo, which gives them every group initgroups finds
# for it: pi-tools in root's group, sudo, docker, pi-sandbox or an agent's group would run an
# agent's arguments with that group; an agent in pi-tools' group would read what trusted
# commands share with it. ensure-base (and so every ensure, the lock-free confirmation of an
# existing agent too) refuses each, naming the file and the line, and writes nothing.
fresh
u ensure rt/tools >"$S/id" 2>&1
name=$(sed -n 's/^name=//p' "$S/id")
# tools_refused FILE SED-EXPR WHAT MESSAGE
tools_refused() {
	cp -a "$R/etc/$1" "$S/$1.tools"
	sed -i "$2" "$R/etc/$1"
	local sum
	sum=$(cat "$R"/etc/{passwd,group,shadow,gshadow} "$R/data/pistis/users.registry" | sha256sum)
	out=$(u ensure-base 2>&1)
	is "$3: ensure-base refuses (exit 1)" "$?" 1
	like "... naming the file and the line" "$out" "$4"
	out=$(u ensure rt/tools 2>&1)
	is "... and so does the existing agent's ensure (exit 1)" "$?" 1
	like "... saying the same" "$out" "$4"
	is "... nothing written" \
		"$(cat "$R"/etc/{passwd,group,shadow,gshadow} "$R/data/pistis/users.registry" | sha256sum)" "$sum"
	cp -a "$S/$1.tools" "$R/etc/$1"
}
cp -a "$R/etc/group" "$S/group.g0"
sed -i 's/^root:x:0:$/root:x:0:pi-tools/' "$R/etc/group"
like "(why) pi-tools listed in root's group line has group 0 for initgroups" \
	"$(in_root "$R" id -G pi-tools 2>&1)" "(^| )0( |$)"
cp -a "$S/group.g0" "$R/etc/group"
tools_refused group 's/^root:x:0:$/root:x:0:pi-tools/' "pi-tools a member of group 0" \
	"user 'pi-tools' is a member of group 'root' in /etc/group \(line 1\)"
tools_refused group 's/^\(pi-sandbox:x:10010:.*\)$/\1,pi-tools/' "pi-tools a member of pi-sandbox" \
	"user 'pi-tools' is a member of group 'pi-sandbox' in /etc/group \(line [0-9]+\)"
tools_refused group "s/^\($name:x:[0-9]*:\)$/\1pi-tools/" "pi-tools a member of the agent's group" \
	"user 'pi-tools' is a member of group '$name' in /etc/group"
tools_refused group 's/^\(staff:x:[0-9]*:\)$/\1 pi-tools/' "pi-tools a member of staff (behind a space)" \
	"user 'pi-tools' is a member of group 'staff' in /etc/group"
tools_refused gshadow 's/^\(shadow:[^:]*:\)[^:]*:/\1pi-tools:/' "pi-tools an administrator of shadow" \
	"user 'pi-tools' is an administrator of group 'shadow' in /etc/gshadow \(line [0-9]+\)"
tools_refused group "s/^\(pi-tools:x:10002:\)$/\1$name/" "the agent a member of pi-tools' group" \
	"group 'pi-tools' lists members or administrators other than pi-tools in /etc/group \(line [0-9]+\)"
tools_refused gshadow "s/^\(pi-tools:!:\):$/\1$name:/" "the agent an administrator of pi-tools' group" \
	"group 'pi-tools' lists members or administrators other than pi-tools in /etc/gshadow"
tools_refused gshadow "s/^pi-tools:!:/pi-tools:\$6\$salt\$hash:/" "a gshadow password on pi-tools' group" \
	"group 'pi-tools' has a password in /etc/gshadow \(line [0-9]+\)"
tools_refused group '$a tools2:x:10002:' "another group on pi-tools' gid" \
	"group 'tools2' in /etc/group shares gid 10002 \(line [0-9]+\) with user 'pi-tools'"
exits 0 "restored: ensure-base passes" u ensure-base
exits 0 "... and the agent is confirmed" u ensure rt/tools


# --- default ACLs inherited from an earlier life of the volume -------------------------------
# /data was an agent's (an image's, an operator's chown) and it set a default ACL naming
# itself there; the homes' parents pistisd made then inherited it. pistisd-entry strips
# /data's ACLs at the next start, not those its directories inherited: every new home,
# its tmp and every file made there (umask ignored) named that agent, hidden by the 0700
# mask until the home's owner opened its group bits (red team). Now the root-owned
# directories ensure makes or keeps lose their ACLs.
# The parents as the earlier life left them (what mkdir inherited, then chmod 0711).
fresh
u ensure rt/acl-a --uid 10900 >/dev/null 2>&1
for d in sandbox-home agents; do
	setfacl -m u:10900:rwx -d -m u:10900:rwx "$R/data/$d" && chmod 0711 "$R/data/$d"
done
u ensure rt/acl-b --uid 10901 >/dev/null 2>&1
bh=$(u show rt/acl-b | sed -n 's/^home=//p') ba=$(u show rt/acl-b | sed -n 's/^agent_dir=//p')
unlike "a new home, its tmp, its agent dir and their parents name no one else" \
	"$(getfacl -p "$R$bh" "$R$bh/tmp" "$R$ba" "$R/data/sandbox-home" "$R/data/agents" 2>&1)" \
	"user:10900"
in_root "$R" pistisd run --agent rt/acl-b -- /bin/sh -c \
	'umask 077; echo secret >"$HOME/f"; chmod 750 "$HOME"' >/dev/null 2>&1
is "... whose owner made a file there (0600)" "$(cat "$R$bh/f")" secret
out=$(in_root "$R" pistisd run --agent rt/acl-a -- /bin/cat "$bh/f" 2>&1)
like "... which the earlier agent cannot read" "$out" 'Permission denied'
unlike "... nor is any of it shown" "$out" secret

done_testing
