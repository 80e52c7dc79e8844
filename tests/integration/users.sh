#!/bin/bash
# pistisd users: identities on the glibc (Debian) and musl test roots, the rebuild story,
# concurrency, corrupt files, a full disk, planted links. Runs as root in a private mount
# namespace over throwaway roots; never touches the host's /etc or /data.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || missing "$P not built"
work=$(mktemp -d "${TMPDIR:-/tmp}/pistis-test.$$.XXXXXX")

field() { sed -n "s/^$1=//p"; } # key=value output of ensure/show

# --- the rebuild story on both roots, running the static binary inside them ----------
for kind in debian musl; do
	R=$(root_fresh "$kind") || missing "root_fresh $kind failed"
	mkdir -p "$work/$kind-image"
	for f in passwd group shadow gshadow; do
		[ -e "$R/etc/$f" ] && cp -a "$R/etc/$f" "$work/$kind-image/$f"
	done
	ok "$kind: ensure-base" in_root "$R" pistisd users ensure-base
	declare -A uid=() name=()
	for a in alice bob carol; do
		out=$(in_root "$R" pistisd users ensure "agent/$a")
		uid[$a]=$(printf '%s\n' "$out" | field uid)
		name[$a]=$(printf '%s\n' "$out" | field name)
	done
	is "$kind: first uid is 10100" "${uid[alice]}" 10100
	like "$kind: name is pi-agent-<8 hex>" "${name[alice]}" '^pi-agent-[0-9a-f]{8}$'
	is "$kind: uids in order" "${uid[bob]} ${uid[carol]}" "10101 10102"
	like "$kind: pi-sandbox holds the agents" "$(grep '^pi-sandbox:' "$R/etc/group")" \
		"^pi-sandbox:[^:]*:10010:.*${name[bob]}"
	like "$kind: pi-tools has no login shell" "$(grep '^pi-tools:' "$R/etc/passwd")" \
		'^pi-tools:[x!]:10002:10002:[^:]*:[^:]*:(/usr/sbin/nologin|/sbin/nologin|/bin/false)$'
	is "$kind: id -u inside the root sees the agent" \
		"$(in_root "$R" id -u "${name[carol]}" 2>&1)" "${uid[carol]}"
	if [ -e "$work/$kind-image/shadow" ]; then
		is "$kind: shadow keeps its mode and group" "$(stat -c '%a %U:%G' "$R/etc/shadow")" \
			"$(stat -c '%a %U:%G' "$work/$kind-image/shadow")"
		like "$kind: agent locked in shadow" "$(grep "^${name[bob]}:" "$R/etc/shadow")" \
			"^${name[bob]}:!:"
	fi
	is "$kind: passwd- is the previous passwd" "$(tail -n 1 "$R/etc/passwd-" | cut -d: -f1)" \
		"${name[bob]}"

	# Rebuild: the image's /etc comes back, /data (and the registry) stays.
	for f in passwd group shadow gshadow; do
		rm -f "$R/etc/$f" "$R/etc/$f-"
		[ -e "$work/$kind-image/$f" ] && cp -a "$work/$kind-image/$f" "$R/etc/$f"
	done
	fails "$kind: after rebuild the user is gone" in_root "$R" id -u "${name[bob]}"
	for a in carol alice bob; do
		out=$(in_root "$R" pistisd users ensure "agent/$a")
		is "$kind: $a keeps uid after rebuild" "$(printf '%s\n' "$out" | field uid)" "${uid[$a]}"
		is "$kind: $a keeps name after rebuild" "$(printf '%s\n' "$out" | field name)" "${name[$a]}"
	done
	is "$kind: a new agent gets the next free uid" \
		"$(in_root "$R" pistisd users ensure agent/dave | field uid)" 10103
	like "$kind: list --json" "$(in_root "$R" pistisd users list --json)" \
		'^\[\{"agent_id":"agent/alice","name":"pi-agent-[0-9a-f]{8}","uid":10100,"state":"active"\},'
	unset uid name
done

# --- a hand-made root for the rest (copies of the host's files, never the files) -----
mkroot() { # dir
	mkdir -p "$1/etc"
	cp -a /etc/passwd /etc/group /etc/shadow /etc/gshadow "$1/etc/"
}

R=$work/r1
mkroot "$R"
exits 100 "newline in agent id is a usage error" "$P" users ensure "$(printf 'a\nb')" --root "$R"
exits 100 "':' in agent id is a usage error" "$P" users ensure 'a:b' --root "$R"
exits 100 "257-byte agent id is a usage error" "$P" users ensure "$(head -c 257 /dev/zero | tr '\0' a)" --root "$R"
exits 100 "--uid outside the agent range" "$P" users ensure a --uid 1000 --root "$R"
exits 100 "unknown option" "$P" users ensure a --frobnicate --root "$R"
ok "--help" "$P" users --help
is "--uid honoured when free" "$("$P" users ensure srv-1 --uid 20000 --root "$R" | field uid)" 20000
out=$("$P" users ensure srv-2 --uid 20000 --root "$R" 2>&1); rc=$?
is "--uid of another agent: exit 1" "$rc" 1
like "--uid of another agent: clear error" "$out" "uid 20000 belongs to agent 'srv-1'"
out=$("$P" users ensure srv-1 --uid 20001 --root "$R" 2>&1); rc=$?
is "--uid for an agent that has another: exit 1" "$rc" 1
like "... says which uid it has" "$out" "already has uid 20000"
ok "show" "$P" users show srv-1 --root "$R"
exits 1 "show of an unknown agent: exit 1" "$P" users show nobody-here --root "$R"
ok "remove" "$P" users remove srv-1 --root "$R"
unlike "removed agent gone from passwd" "$(cat "$R/etc/passwd")" ':20000:20000:'
like "registry keeps its uid reserved" "$("$P" users list --root "$R")" '^20000	pi-agent-[0-9a-f]+	reserved	srv-1$'
is "ensure gives it back" "$("$P" users ensure srv-1 --root "$R" | field uid)" 20000
ok "remove --forget" "$P" users remove srv-1 --forget --root "$R"
unlike "forgotten" "$("$P" users list --root "$R")" 'srv-1'
# A name from the image's /etc that a refusal quotes may hold a quote, a backslash, invalid
# UTF-8: the log line escapes each once, its quote too, so it cannot end the '...'.
cp -p "$R/etc/passwd" "$work/passwd.r1"
printf "x'in'/etc\\\\n\\377:x:11600:11600::/:/bin/sh\\n" >>"$R/etc/passwd"
out=$("$P" users ensure srv-3 --uid 11600 --root "$R" 2>&1); rc=$?
is "a hostile user name on the uid: exit 1" "$rc" 1
like "... the log names it escaped once" "$out" \
	"uid 11600 belongs to user 'x\\\\'in\\\\'/etc\\\\\\\\n\\\\xff' in /etc/passwd"
cp -p "$work/passwd.r1" "$R/etc/passwd"

# --- 20 processes at once: 10 ids, and 10 callers on one id -----------------------
R=$work/r2
mkroot "$R"
for i in $(seq 1 10); do
	"$P" users ensure "par-$i" --root "$R" >"$work/par-$i.out" 2>&1 &
	"$P" users ensure same-agent --root "$R" >"$work/same-$i.out" 2>&1 &
done
wait
is "all 20 succeeded" "$(cat "$work"/par-*.out "$work"/same-*.out | grep -c '^uid=')" 20
for f in "$work"/par-*.out "$work"/same-*.out; do # say why one failed
	grep -q '^uid=' "$f" || sed "s|^|# ${f##*/}: |" "$f"
done
is "same id: one answer for every caller" "$(cat "$work"/same-*.out | sort -u | wc -l)" 7
is "passwd: 11 agents" "$(grep -c '^pi-agent-' "$R/etc/passwd")" 11
is "no duplicate uid in passwd" "$(cut -d: -f3 "$R/etc/passwd" | sort | uniq -d)" ""
is "no duplicate gid in group" "$(cut -d: -f3 "$R/etc/group" | sort | uniq -d)" ""
is "registry: 11 records" "$(grep -c ':active:' "$R/data/pistis/users.registry")" 11
is "shadow: 11 agents" "$(grep -c '^pi-agent-' "$R/etc/shadow")" 11
is "pi-sandbox lists 11" "$(grep '^pi-sandbox:' "$R/etc/group" | cut -d: -f4 | tr , '\n' | grep -c .)" 11
is "foreign lines byte for byte" "$(head -n "$(wc -l </etc/passwd)" "$R/etc/passwd" | sha256sum)" \
	"$(sha256sum </etc/passwd)"
# 20 callers for an agent whose /etc entries are complete but whose home is gone (the
# lock-free path): each makes or confirms the home, none sees another's half-made tmp.
n=$(sed -n 's/^name=//p' "$work/same-1.out")
rm -rf "$R/data/sandbox-home/$n" "$R/data/agents/$n"
for i in $(seq 1 20); do
	"$P" users ensure same-agent --root "$R" >"$work/home-$i.out" 2>&1 &
done
wait
is "20 callers remake one home: all succeeded" "$(cat "$work"/home-*.out | grep -c '^uid=')" 20
for f in "$work"/home-*.out; do grep -q '^uid=' "$f" || sed "s|^|# ${f##*/}: |" "$f"; done
is "... tmp is the agent's, 0700" "$(stat -c '%u %a' "$R/data/sandbox-home/$n/tmp")" \
	"$(sed -n 's/^uid=//p' "$work/same-1.out") 700"

# --- lock-free readers while agents are created: never a torn or changing file -------
# A commit rewrites the previous backup's inode when no one has it open (docs/users.md,
# "The backup's inode, reused"): readers that hold the current file across several
# commits, readers of the backup itself and plain readers must each see one whole
# version, never a file that changes under them.
R=$work/r-readers
mkroot "$R"
"$P" users ensure-base --root "$R" >/dev/null
"$P" users ensure reader-0 --root "$R" >/dev/null
ino0=$(stat -c %i "$R/etc/passwd")
"$P" users ensure reader-1 --root "$R" >/dev/null
"$P" users ensure reader-2 --root "$R" >/dev/null
is "a commit reuses the backup's inode (A, B, A)" "$(stat -c %i "$R/etc/passwd")" "$ino0"
TR="$(dirname "$0")/torn-reader.py"
stop=$work/readers.stop
readers=("etc/passwd 7 linger" "etc/passwd 7" "etc/group 4 linger" "etc/passwd- 7"
	"data/pistis/users.registry 0 linger")
pids=()
for n in 1 2 3 4 5; do
	read -r file fields how <<<"${readers[n - 1]}"
	"$TR" "$R/$file" "$fields" "$stop" $how >"$work/rd-$n.out" 2>&1 &
	pids+=($!)
done
fails=0
for i in $(seq 1 150); do
	"$P" users ensure "reader-agent-$i" --root "$R" >/dev/null 2>&1 || fails=$((fails + 1))
done
touch "$stop"
for n in 1 2 3 4 5; do
	wait "${pids[n - 1]}"
	echo "rc=$?" >>"$work/rd-$n.out"
done
is "150 creations beside five readers: all succeeded" "$fails" 0
for n in 1 2 3 4 5; do
	out=$(cat "$work/rd-$n.out")
	printf '%s\n' "$out" | grep '^#' || true
	like "reader $n: read whole versions only" "$out" 'bad=0'
	reads=$(printf '%s\n' "$out" | sed -n 's/^reads=\([0-9]*\).*/\1/p')
	[ "${reads:-0}" -ge 5 ] && ok "reader $n: read during the creations ($reads reads)" true ||
		ok "reader $n: read during the creations (${reads:-0} reads)" false
done
is "passwd: 153 agents after the readers' run" "$(grep -c '^pi-agent-' "$R/etc/passwd")" 153

# --- corrupt files: clear error naming file and line, nothing written -------------
R=$work/r3
mkroot "$R"
"$P" users ensure c-1 --root "$R" >/dev/null
printf 'broken line\n' >>"$R/etc/passwd"
sum=$(cd "$R" && sha256sum etc/* data/pistis/users.registry)
out=$("$P" users ensure c-2 --root "$R" 2>&1); rc=$?
is "corrupt passwd: exit 1" "$rc" 1
like "corrupt passwd: names file and line" "$out" "/etc/passwd:$(wc -l <"$R/etc/passwd"): too few fields"
is "corrupt passwd: nothing written" "$(cd "$R" && sha256sum etc/* data/pistis/users.registry)" "$sum"
sed -i '$d' "$R/etc/passwd"
# A line whose syntax is wrong is refused whoever it belongs to.
cp -a "$R/data/pistis/users.registry" "$work/registry.good"
printf '10998:pi-agent-zz:active:y\n' >>"$R/data/pistis/users.registry"
sum=$(cd "$R" && sha256sum etc/* data/pistis/users.registry)
out=$("$P" users ensure c-2 --root "$R" 2>&1); rc=$?
is "corrupt registry line: exit 1" "$rc" 1
like "corrupt registry line: names file and line" "$out" "/data/pistis/users.registry:3: invalid user name"
is "corrupt registry line: nothing written" "$(cd "$R" && sha256sum etc/* data/pistis/users.registry)" "$sum"
# A name not derived from its id is found when that record is used (the SHA-256 of the
# records nobody uses is not recomputed on every call).
cp -a "$work/registry.good" "$R/data/pistis/users.registry"
printf '10999:pi-agent-00000000:active:x\n' >>"$R/data/pistis/users.registry"
sum=$(cd "$R" && sha256sum etc/* data/pistis/users.registry)
out=$("$P" users ensure x --root "$R" 2>&1); rc=$?
is "corrupt registry record: exit 1" "$rc" 1
like "corrupt registry record: names file and line" "$out" "/data/pistis/users.registry:3: user name is not derived"
is "corrupt registry record: nothing written" "$(cd "$R" && sha256sum etc/* data/pistis/users.registry)" "$sum"
exits 1 "corrupt registry record: show refuses it" "$P" users show x --root "$R"
exits 1 "corrupt registry record: list refuses it" "$P" users list --root "$R"

# --- /etc or its files writable by someone else: not trusted, nothing written ---------
R=$work/r-modes
mkroot "$R"
"$P" users ensure m-1 --root "$R" >/dev/null
for f in passwd group shadow gshadow; do
	chmod o+w "$R/etc/$f"
	sum=$(cd "$R" && sha256sum etc/* data/pistis/users.registry)
	out=$("$P" users ensure m-2 --root "$R" 2>&1); rc=$?
	is "/etc/$f writable by others: refused (111)" "$rc" 111
	like "... saying why" "$out" "/etc/$f is owned by 0:[0-9]+ with mode 0[0-7]+: it must be root's"
	is "... nothing written" "$(cd "$R" && sha256sum etc/* data/pistis/users.registry)" "$sum"
	# An existing agent too: the lock-free path hands an untrusted file to the locked one.
	exits 111 "... nor an existing agent confirmed over it" "$P" users ensure m-1 --root "$R"
	chmod o-w "$R/etc/$f"
done
chown 10100 "$R/etc/passwd"
exits 111 "/etc/passwd owned by an agent's uid: refused" "$P" users ensure m-2 --root "$R"
chown 0 "$R/etc/passwd"
chgrp 10010 "$R/etc/group" && chmod g+w "$R/etc/group"
exits 111 "/etc/group writable by pi-sandbox: refused" "$P" users ensure m-2 --root "$R"
chgrp 0 "$R/etc/group" && chmod g-w "$R/etc/group"
chmod 1777 "$R/etc"
like "/etc writable by others: refused" "$("$P" users ensure m-2 --root "$R" 2>&1)" \
	"/etc is owned by 0:0 with mode 1777"
chmod 0755 "$R/etc"
chmod g+w "$R/etc/passwd" # root:root 0664, as images made for arbitrary uids have it
ok "/etc/passwd writable by root's group only: accepted" "$P" users ensure m-2 --root "$R"
is "... and rewritten with its mode" "$(stat -c '%a %u:%g' "$R/etc/passwd")" "664 0:0"
# ... unless the group bits are an ACL's mask: a named entry then writes, an agent's too
"$P" users ensure m-3 --root "$R" >/dev/null
setfacl -m u:10100:rw "$R/etc/passwd"
exits 111 "/etc/passwd 0664 whose ACL lets an agent uid write: refused" "$P" users ensure m-4 --root "$R"
exits 111 "... and an existing agent is not confirmed (the lock-free path)" "$P" users ensure m-3 --root "$R"
setfacl -b "$R/etc/passwd" && chmod 0755 "$R/etc" && setfacl -m u:10100:rwx "$R/etc"
like "/etc 0775 through an ACL naming an agent uid: refused" "$("$P" users ensure m-4 --root "$R" 2>&1)" \
	"/etc is owned by 0:0 with mode 0775"
setfacl -b "$R/etc" && chmod 0755 "$R/etc"
ok "the ACLs gone: accepted" "$P" users ensure m-4 --root "$R"

# --- a full file system during the write: the old files intact ------------------------
for where in etc data; do
	R=$work/full-$where
	mkdir -p "$R"
	mkroot "$R"
	"$P" users ensure f-1 --root "$R" >/dev/null
	mkdir "$work/save-$where" && cp -a "$R/$where/." "$work/save-$where/"
	mount -t tmpfs -o size=256k "full-$where" "$R/$where"
	cp -a "$work/save-$where/." "$R/$where/"
	# The backups ("-") are emptied: rewriting one in place (docs/users.md) then needs
	# new blocks too, and fails half-way like a new file would.
	for f in "$R/$where"/*- "$R/$where"/pistis/*-; do [ -f "$f" ] && : >"$f"; done
	dd if=/dev/zero of="$R/$where/filler" bs=4k 2>/dev/null
	sum=$(cd "$R" && sha256sum etc/passwd etc/group etc/shadow etc/gshadow data/pistis/users.registry)
	homes=$(ls -a "$R/data/sandbox-home" "$R/data/agents")
	out=$("$P" users ensure f-2 --root "$R" 2>&1); rc=$?
	is "full /$where: exit 111" "$rc" 111
	like "full /$where: says so" "$out" "No space left on device"
	is "full /$where: every file intact" \
		"$(cd "$R" && sha256sum etc/passwd etc/group etc/shadow etc/gshadow data/pistis/users.registry)" "$sum"
	is "full /$where: no temp file left" "$(ls -a "$R/etc" "$R/data/pistis" | grep -c '+$')" 0
	# The homes' directories are made while the staged files are written out; a failed
	# write leaves none of them behind.
	is "full /$where: no home directory left" "$(ls -a "$R/data/sandbox-home" "$R/data/agents")" "$homes"
	torn=0
	for f in "$R/$where"/*- "$R/$where"/pistis/*-; do
		[ -f "$f" ] || continue
		[ -s "$f" ] || continue # still empty: never touched
		cmp -s "$f" "${f%-}" || { torn=1; echo "# $f differs from ${f%-}"; }
	done
	is "full /$where: a backup written half-way is the current file again" "$torn" 0
	rm -f "$R/$where/filler"
	is "after space is freed ensure works" "$("$P" users ensure f-2 --root "$R" | field uid)" 10101
	umount "$R/$where"
done

# --- a link planted at the home path in an earlier life of the volume -------------------
R=$work/r4
mkroot "$R"
out=$("$P" users ensure old-agent --root "$R")
name=$(printf '%s\n' "$out" | field name)
auid=$(printf '%s\n' "$out" | field uid)
mkdir -m 0755 "$R/victim"
rm -rf "$R/data/sandbox-home/$name" "$R/data/agents/$name"
ln -s ../../victim "$R/data/sandbox-home/$name"
ln -s /etc "$R/data/agents/$name"
ok "ensure with planted links" "$P" users ensure old-agent --root "$R"
is "victim untouched" "$(stat -c '%a %u' "$R/victim")" "755 0"
is "host /etc untouched" "$(stat -c '%a %u' /etc)" "755 0"
is "home is now the agent's own dir" "$(stat -c '%F %a %u:%g' "$R/data/sandbox-home/$name")" \
	"directory 700 $auid:$auid"
is "agent dir too" "$(stat -c '%F %a %u:%g' "$R/data/agents/$name")" "directory 700 $auid:$auid"
is "tmp too" "$(stat -c '%F %a %u:%g' "$R/data/sandbox-home/$name/tmp")" "directory 700 $auid:$auid"
is "parents 0711 root" "$(stat -c '%a %u' "$R/data/sandbox-home" "$R/data/agents" | sort -u)" "711 0"
rm -rf "$R/data"
ln -s /tmp "$R/data"
exits 111 "a /data that is a link is refused" "$P" users ensure old-agent --root "$R"

# --- planted lock files, an untrusted registry, a mounted TMPDIR ----------------------
R=$work/r5
mkroot "$R"
"$P" users ensure lk --root "$R" >/dev/null
rm -f "$R/data/pistis/users.registry.lock"
mkfifo -m 0600 "$R/data/pistis/users.registry.lock"
out=$(timeout -s KILL 8 "$P" users ensure lk-2 --root "$R" 2>&1)
rc=$?
is "a FIFO as the registry lock: refused at once (rc=$rc)" "$rc" 111
like "... naming the file" "$out" "users.registry.lock: not a regular file"
rm -f "$R/data/pistis/users.registry.lock"
touch "$R/etc/.pwd.lock" && chown 10150 "$R/etc/.pwd.lock"
exits 111 "a /etc/.pwd.lock another uid owns is refused" "$P" users ensure lk-2 --root "$R"
rm -f "$R/etc/.pwd.lock"
ok "... and ensure goes on once it is gone" "$P" users ensure lk-2 --root "$R"
chmod 0666 "$R/data/pistis/users.registry"
out=$("$P" users show lk --root "$R" 2>&1)
rc=$?
is "a group/other-writable registry is not believed by show (rc=$rc)" "$rc" 111
like "... saying why" "$out" "not trusted"
exits 111 "... nor by the lock-free ensure of an existing agent" "$P" users ensure lk --root "$R"
chmod 0600 "$R/data/pistis/users.registry"
out=$("$P" users ensure lk --root "$R")
home=$(printf '%s\n' "$out" | field home)
auid=$(printf '%s\n' "$out" | field uid)
mkdir -m 0755 "$work/mnt-src"
mount --bind "$work/mnt-src" "$R$home/tmp"
out=$("$P" users ensure lk --root "$R" 2>&1)
rc=$?
is "a mount point at the TMPDIR is refused (rc=$rc)" "$rc" 111
like "... saying so" "$out" "is a mount point"
is "... and not handed over" "$(stat -c '%a %u' "$work/mnt-src")" "755 0"
umount "$R$home/tmp"
ok "... ensure completes once it is unmounted" "$P" users ensure lk --root "$R"
is "... tmp is the agent's" "$(stat -c '%u' "$R$home/tmp")" "$auid"

# --- ensure-base makes the trusted commands' directories, root's ---------------------------
# /data/bin is on every agent's PATH: where agents may write /data (a write rule on it), the
# first to make it would choose what the others run. ensure-base (entry and serve run it at
# start-up) makes both root's 0755 and refuses one someone else made.
R=$work/r-trusted-dirs
mkroot "$R"
ok "ensure-base" "$P" users ensure-base --root "$R"
is "... made /data/bin and /data/trusted root's 0755" \
	"$(stat -c '%u:%g %a' "$R/data/bin" "$R/data/trusted" | paste -sd' ')" "0:0 755 0:0 755"
chmod 0750 "$R/data/trusted"
ok "ensure-base again" "$P" users ensure-base --root "$R"
is "... keeps an existing root's one as it is" "$(stat -c '%a' "$R/data/trusted")" 750
rmdir "$R/data/bin" && mkdir "$R/data/bin" && chown 10100:10100 "$R/data/bin"
out=$("$P" users ensure-base --root "$R" 2>&1)
ok "an agent's /data/bin: ensure-base fails" test $? -ne 0
like "... saying so" "$out" "/data/bin is not root's"
is "... and does not adopt it" "$(stat -c '%u' "$R/data/bin")" 10100
rmdir "$R/data/bin" && ln -s /tmp "$R/data/bin"
out=$("$P" users ensure-base --root "$R" 2>&1)
ok "a symlink at /data/bin: ensure-base fails" test $? -ne 0
like "... saying so" "$out" "/data/bin is a symbolic link"
ok "... left a link, never followed" test -L "$R/data/bin"
rm "$R/data/bin" && mkdir -m 0755 "$R/data/bin"
# A root's one agents could write (an old write rule's root:pi-sandbox 2770): what is in it
# may be an agent's, so it is not taken as it is
chgrp 10010 "$R/data/bin" && chmod 2770 "$R/data/bin"
out=$("$P" users ensure-base --root "$R" 2>&1)
ok "a root's /data/bin agents could write: ensure-base fails" test $? -ne 0
like "... saying why and what to do" "$out" \
	"/data/bin is root's but agents could write it \(group 10010, mode 2770\), and every agent has it on its PATH: look at what is in it"
is "... and changes nothing" "$(stat -c '%u:%g %a' "$R/data/bin")" "0:10010 2770"
chgrp 0 "$R/data/bin" && chmod 0775 "$R/data/bin"
ok "... group root with write: kept" "$P" users ensure-base --root "$R"
chmod 0755 "$R/data/bin" && setfacl -d -m g::rwx "$R/data/trusted"
out=$("$P" users ensure-base --root "$R" 2>&1)
ok "a root's /data/trusted with a default ACL: ensure-base fails" test $? -ne 0
like "... saying so" "$out" "/data/trusted is root's but agents could write it \(group 0, mode 0750, an ACL\), and trusted commands run"
setfacl -b "$R/data/trusted"
ok "... once the ACL is gone: ensure-base passes" "$P" users ensure-base --root "$R"

# The secrets' directory too, pi-tools' 0700: where agents may write /data and it is not
# there yet, an agent could make it, with links and its own inodes inside, and a later
# "none" rule would hand it to pi-tools as it is (a trusted command then writes its secret
# where the agent reads).
is "... made /data/.secrets pi-tools' 0700" "$(stat -c '%u:%g %a' "$R/data/.secrets")" "10002:10002 700"
rmdir "$R/data/.secrets" && mkdir -m 0755 "$R/data/.secrets"
ok "a root's /data/.secrets (an operator's): ensure-base takes it over" "$P" users ensure-base --root "$R"
is "... pi-tools' 0700" "$(stat -c '%u:%g %a' "$R/data/.secrets")" "10002:10002 700"
rmdir "$R/data/.secrets" && mkdir "$R/data/.secrets" && ln -s /workspaces/loot "$R/data/.secrets/gh-token"
chown -h 10100:10010 "$R/data/.secrets" "$R/data/.secrets/gh-token" && chmod 0777 "$R/data/.secrets"
out=$("$P" users ensure-base --root "$R" 2>&1)
ok "an agent's /data/.secrets: ensure-base fails" test $? -ne 0
like "... saying so" "$out" "/data/.secrets is not pi-tools' or root's"
is "... and does not hand it to pi-tools" "$(stat -c '%u %a' "$R/data/.secrets")" "10100 777"
rm -r "$R/data/.secrets" && ln -s /tmp "$R/data/.secrets"
out=$("$P" users ensure-base --root "$R" 2>&1)
ok "a symlink at /data/.secrets: ensure-base fails" test $? -ne 0
like "... saying so" "$out" "/data/.secrets is a symbolic link"

# --- ensure-base makes the policy walk's closing-mark key, root's alone ------------------
# A policy walk only reads it (docs/policy.md, "What the mark's value is"): made once, kept
# across runs, and one that is not root's 0600 file of 32 bytes is refused, never replaced
# or used (a key others can read would let them make marks that open root's files).
R=$work/r-mark-key
mkroot "$R"
ok "ensure-base makes the mark key" "$P" users ensure-base --root "$R"
is "... root's 0600, 32 bytes, in root's /data/pistis" \
	"$(stat -c '%u:%g %a %s' "$R/data/pistis/mark.key")" "0:0 600 32"
is "... no temporary file left" "$(ls -A "$R/data/pistis" | grep -c '\.tmp$')" 0
sum=$(sha256sum <"$R/data/pistis/mark.key")
ok "ensure-base again" "$P" users ensure-base --root "$R"
is "... keeps the key" "$(sha256sum <"$R/data/pistis/mark.key")" "$sum"
chmod 0640 "$R/data/pistis/mark.key"
out=$("$P" users ensure-base --root "$R" 2>&1)
ok "a key others may read: ensure-base fails" test $? -ne 0
like "... saying so" "$out" "/data/pistis/mark.key is not root's 0600 file of 32 bytes: it is not used; remove it"
is "... and leaves it as it is" "$(stat -c '%a' "$R/data/pistis/mark.key"; sha256sum <"$R/data/pistis/mark.key")" "640
$sum"
rm "$R/data/pistis/mark.key" && ln -s /etc/hostname "$R/data/pistis/mark.key"
out=$("$P" users ensure-base --root "$R" 2>&1)
ok "a symlink at the key: ensure-base fails" test $? -ne 0
ok "... left a link, never followed" test -L "$R/data/pistis/mark.key"
rm "$R/data/pistis/mark.key" && head -c 31 /dev/urandom >"$R/data/pistis/mark.key" && chmod 0600 "$R/data/pistis/mark.key"
out=$("$P" users ensure-base --root "$R" 2>&1)
ok "a key of 31 bytes: ensure-base fails" test $? -ne 0
rm "$R/data/pistis/mark.key"
ok "... removed: ensure-base makes a new one" "$P" users ensure-base --root "$R"
ok "... another key" test "$(sha256sum <"$R/data/pistis/mark.key")" != "$sum"
# ensure (the path every first command of an agent takes) makes it too: a root with
# agents has a key even where only `pistisd run` was used.
R=$work/r-mark-key-ensure
mkroot "$R"
ok "ensure in a fresh root" "$P" users ensure agent/key --root "$R"
is "... made the mark key, root's 0600, 32 bytes" \
	"$(stat -c '%u:%g %a %s' "$R/data/pistis/mark.key")" "0:0 600 32"

# --- remove without --root: the default root "/" (as inside a container) ----------
R=$(root_fresh debian)
in_root "$R" pistisd users ensure agent/a >/dev/null
out=$(in_root "$R" pistisd users remove agent/a 2>&1); rc=$?
is "remove without --root: exit 0" "$rc" 0
like "... the agent reserved" "$(in_root "$R" pistisd users list)" '	reserved	agent/a$'
out=$(in_root "$R" pistisd users remove agent/a --forget 2>&1); rc=$?
is "remove --forget without --root: exit 0" "$rc" 0
is "... the agent forgotten" "$(in_root "$R" pistisd users list)" ""

# --- an image's gshadow line for a name whose group line is missing: checked too ----
R=$(root_fresh debian)
in_root "$R" pistisd users ensure-base >/dev/null
name=pi-agent-$(printf %s agent/gs | sha256sum | cut -c1-8)
echo "$name:\$6\$salt\$hash:daemon:daemon" >>"$R/etc/gshadow"
cp -a "$R/etc/group" "$work/group.before"
out=$(in_root "$R" pistisd users ensure agent/gs 2>&1); rc=$?
is "new agent, image's gshadow line with a password and no group line: refused" "$rc" 1
like "... saying so" "$out" "group '$name' has a password in /etc/gshadow"
ok "... nothing written" cmp -s "$R/etc/group" "$work/group.before"
sed -i "/^$name:/d" "$R/etc/gshadow"
in_root "$R" pistisd users ensure agent/gs >/dev/null
sed -i "/^$name:/d" "$R/etc/group"
sed -i "s/^$name:.*/$name:!:daemon:/" "$R/etc/gshadow"
out=$(in_root "$R" pistisd users ensure agent/gs 2>&1); rc=$?
is "rebuilt image: recorded agent, group line missing, gshadow admin: refused" "$rc" 1
like "... saying so" "$out" "group '$name' lists members or administrators other than its agent in /etc/gshadow"

# --- a CRLF /etc/group: glibc must see the new agents in pi-sandbox -----------------
R=$(root_fresh debian)
in_root "$R" pistisd users ensure-base >/dev/null
sed -i 's/$/\r/' "$R/etc/group"
n1=$(in_root "$R" pistisd users ensure agent/one | field name)
n2=$(in_root "$R" pistisd users ensure agent/two | field name)
like "CRLF group: agent/one in pi-sandbox (glibc)" "$(in_root "$R" id -Gn "$n1")" '(^| )pi-sandbox( |$)'
like "CRLF group: agent/two in pi-sandbox (glibc)" "$(in_root "$R" id -Gn "$n2")" '(^| )pi-sandbox( |$)'
like "... root's line kept byte for byte" "$(od -c "$R/etc/group" | head -2)" 'r   o   o   t   :   x   :   0   :  \\r  \\n'
ok "... confirmed" in_root "$R" pistisd users ensure agent/two

# --- show and list warn about what ensure would refuse in /etc, and still answer ------------
# They read the registry only; a second line of an agent's name (or pi-tools in another
# group) stops that agent's next ensure, and the operator looking at it should hear so.
R=$(root_fresh debian)
"$P" users ensure agent/w1 --root "$R" >/dev/null
"$P" users ensure agent/w2 --root "$R" >/dev/null
w1=$("$P" users show agent/w1 --root "$R" | field name)
out=$("$P" users show agent/w1 --root "$R" --json 2>&1)
unlike "show --json of a sound identity: no warning" "$out" '"warning"'
cp -a "$R/etc/group" "$work/group.warn"
echo "$w1:x:0:" >>"$R/etc/group"
sum=$(cat "$R"/etc/{passwd,group,shadow,gshadow} "$R/data/pistis/users.registry" | sha256sum)
"$P" users show agent/w1 --root "$R" >"$work/out" 2>"$work/err"
is "a second group line of the agent's name: show still answers (exit 0)" "$?" 0
is "... the identity on stdout as before" "$(cut -d= -f1 "$work/out" | paste -sd' ')" \
	"agent_id name uid gid home tmpdir agent_dir"
like "... and warns on stderr, naming the line" "$(cat "$work/err")" \
	"ensure would refuse agent 'agent/w1': group '$w1' has a second line in /etc/group \(line [0-9]+, gid 0\)"
like "show --json carries it as a warning" "$("$P" users show agent/w1 --root "$R" --json 2>/dev/null)" \
	"\"warning\":\"ensure would refuse: group '$w1' has a second line in /etc/group"
out=$("$P" users list --root "$R" --json 2>/dev/null)
is "list --json: exit 0, a warning on that agent only" \
	"$(printf '%s\n' "$out" | python3 -c 'import json,sys; print(" ".join(e["agent_id"] for e in json.load(sys.stdin) if "warning" in e))')" \
	agent/w1
"$P" users list --root "$R" >"$work/out" 2>"$work/err"
is "list text: exit 0, its lines unchanged" "$?:$(wc -l <"$work/out")" "0:2"
like "... the warning on stderr" "$(cat "$work/err")" "ensure would refuse agent 'agent/w1'"
is "... nothing written" "$(cat "$R"/etc/{passwd,group,shadow,gshadow} "$R/data/pistis/users.registry" | sha256sum)" "$sum"
cp -a "$work/group.warn" "$R/etc/group"
sed -i 's/^\(staff:x:[0-9]*:\)$/\1pi-tools/' "$R/etc/group"
out=$("$P" users list --root "$R" --json 2>/dev/null)
is "pi-tools in staff: list --json warns on every active agent" \
	"$(printf '%s\n' "$out" | python3 -c 'import json,sys; print(sum("pi-tools" in e.get("warning", "") for e in json.load(sys.stdin)))')" 2
cp -a "$work/group.warn" "$R/etc/group"
unlike "restored: list warns no more" "$("$P" users list --root "$R" 2>&1)" "would refuse"

# --- a creation's process sets up no heap -------------------------------------------------
# Everything a creation allocates comes from its one arena mapping: no brk, no other mmap,
# no munmap. In a fresh process a first malloc (brk, a guard, a group mapped and unmapped)
# and its fresh pages cost more than parsing a file on a VM where each fault is slow
# (docs/users.md, "Process start and exit").
R=$(root_fresh debian)
"$P" users ensure agent/h0 --root "$R" >/dev/null
strace -f -qq -e trace=brk,mmap,munmap -o "$work/heap.trace" \
	"$P" users ensure agent/h1 --root "$R" >"$work/out"
is "a creation's process: one mapping (its arena), no brk, no munmap" \
	"$(grep -cE '(brk|mmap|munmap)\(' "$work/heap.trace")" 1
like "... and it was a creation" "$(cat "$work/out")" 'uid=10101'
# Its code and constants mapped in one call per read-only segment, not a fault per window
# as each part first runs (docs/users.md, "Process start and exit").
strace -qq -e trace=madvise -o "$work/code.trace" "$P" users ensure agent/h2 --root "$R" >/dev/null
ro_loads=$(readelf -lW "$P" | awk '$1 == "LOAD" && $7 !~ /W/' | wc -l)
ok "the binary has read-only segments ($ro_loads)" test "$ro_loads" -ge 1
is "a users process maps the binary's read-only segments up front, one call each" \
	"$(grep -c 'MADV_POPULATE_READ) = 0' "$work/code.trace")" "$ro_loads"
# The operands go into a static array of USERS_BATCH_MAX (1,024): the 1,025th is refused
# before anything is read or written.
sum=$(cat "$R"/etc/{passwd,group} "$R/data/pistis/users.registry" | sha256sum)
"$P" users ensure $(seq -f 'agent/b%g' 1 1025) --root "$R" >/dev/null 2>"$work/err"
is "1,025 agent ids: usage error" "$?" 100
like "... saying the limit" "$(cat "$work/err")" "unexpected argument 'agent/b1025' \(at most 1024 agent ids\)"
is "... nothing written" "$(cat "$R"/etc/{passwd,group} "$R/data/pistis/users.registry" | sha256sum)" "$sum"

done_testing
