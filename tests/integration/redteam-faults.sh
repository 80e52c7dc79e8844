#!/bin/bash
# Red team: systematic fault injection into every write of persistent state. strace fails the
# Nth call of one system call (EIO) or kills pistisd there (SIGKILL), for every N of the calls
# that write or decide (openat, mkdirat, writev, fchown, fdatasync, fsync, renameat2 ...), in
# `users ensure` (a new agent beside others), `users remove` and `remove --forget`, `policy
# apply` and `save`, and `trusted add` and `remove`. After each fault the files must still
# agree (no user in /etc without its registry record, no uid twice, nothing staged left,
# sudoers parses), a failure must say why in one line, naming the file, and the same command
# run again without a fault must leave exactly what a clean run leaves.
# Debian root; root, private mount namespace.
. "$(dirname "$0")/../lib.sh"
need_root
need_mount_ns "$@"

P=$BIN/pistisd
[ -x "$P" ] || missing "pistisd not built"
command -v strace >/dev/null || missing "strace missing"
R=$(root_fresh debian) || missing "no debian root"
S=$(scratch)

# The state a run may leave, restored before each fault: the passwd family (backups, lock)
# and all of /data.
save() {
	rm -rf "$S/snap" && mkdir -p "$S/snap/etc" &&
		cp -a "$R"/etc/passwd* "$R"/etc/group* "$R"/etc/shadow* "$R"/etc/gshadow* \
			"$R/etc/.pwd.lock" "$S/snap/etc/" && cp -a "$R/data" "$S/snap/data"
}
load() {
	rm -f "$R"/etc/passwd* "$R"/etc/group* "$R"/etc/shadow* "$R"/etc/gshadow* "$R/etc/.pwd.lock"
	rm -rf "$R/data"
	cp -a "$S/snap/etc/." "$R/etc/" && cp -a "$S/snap/data" "$R/data"
}
# What a run leaves: the files with owner and mode, and every directory and file in /data.
state() {
	local f
	for f in etc/passwd etc/group etc/shadow etc/gshadow data/pistis/users.registry; do
		echo "$f $(stat -c '%u:%g %a' "$R/$f") $(sha256sum <"$R/$f" | cut -c1-16)"
	done
	(cd "$R/data" && find . -path ./pistis -prune -o -printf '%p %u:%g %m %y\n' | sort)
}
# What must hold after any fault: every file parses (list, no warning), nothing staged is left,
# and every agent line in /etc has its record with the same id (a record without lines is a
# rebuilt container's state, which the next ensure completes).
agree() {
	local out f
	out=$("$P" users list --root "$R" 2>&1 >/dev/null) || echo "list fails: $out"
	[ -n "$out" ] && echo "list warns: $out"
	for f in etc/passwd etc/group etc/shadow etc/gshadow data/pistis/users.registry; do
		[ -e "$R/$f+" ] && echo "$f+ left"
	done
	awk -F: -v reg="$R/data/pistis/users.registry" '
	BEGIN { while ((getline l < reg) > 0) if (split(l, a, ":") >= 4) id[a[2]] = a[1] }
	FILENAME ~ /(passwd|\/group)$/ && $1 ~ /^pi-agent-/ {
		if (!($1 in id)) print FILENAME ": " $1 " has no registry record"
		else if (id[$1] != $3) print FILENAME ": " $1 " has id " $3 ", not " id[$1]
		if (FILENAME ~ /passwd$/ && ($3 in uid)) print "uid " $3 " twice"
		uid[$3] = 1 }
	FILENAME ~ /shadow$/ && $1 ~ /^pi-agent-/ && !($1 in id) {
		print FILENAME ": " $1 " has no registry record" }
	' "$R/etc/passwd" "$R/etc/group" "$R/etc/shadow" "$R/etc/gshadow"
}

# calls SC CMD...: how many SC system calls `pistisd CMD...` makes, run without a fault.
calls() {
	local sc=$1
	shift
	strace -qq -o "$S/trace" -e trace="$sc" "$P" "$@" >/dev/null 2>&1
	grep -c "^$sc(" "$S/trace"
}
# inject SC FAULT N CMD...: `pistisd CMD...` with its Nth SC call failed (FAULT EIO) or
# killed there (SIGKILL); its stderr on stdout, its exit code ours.
inject() {
	local sc=$1 inj=error=EIO n=$3
	[ "$2" = SIGKILL ] && inj=signal=SIGKILL
	shift 3
	strace -qq -o /dev/null -e trace="$sc" -e inject="$sc:$inj:when=$n" "$P" "$@" 2>&1 >/dev/null
}

# faults LABEL SYSCALLS -- CMD...: for each system call and each N of its calls in a clean
# run of CMD, from the saved state: fail the Nth with EIO, then kill pistisd there; check
# agree, run CMD again (when the faulted one failed) and compare with the clean run's state.
# One test line per system call and fault; the first bad N is shown.
faults() {
	local label=$1 calls=$2 sc f n i rc err rc2 err2 bad first want
	shift 3
	load
	"$P" "$@" >/dev/null 2>&1 || { _tap_result 1 "$label: a clean run" "$("$P" "$@" 2>&1)"; return; }
	want=$(state)
	for sc in $calls; do
		load
		n=$(calls "$sc" "$@")
		for f in EIO SIGKILL; do
			first=
			for i in $(seq 1 "$n"); do
				load
				err=$(inject "$sc" "$f" "$i" "$@")
				rc=$?
				bad=$(agree)
				if [ "$f" = EIO ] && [ $rc -ne 0 ] &&
					! printf '%s\n' "$err" | grep -qE "^pistisd: .*(^|[ '(])/[a-z]"; then
					bad="$bad
message does not say what and why: $err"
				fi
				[ "$(printf '%s\n' "$err" | wc -l)" -gt 1 ] && bad="$bad
more than one line: $err"
				# Run again after a failure; a remove that went through before the fault
				# (its second kill sweep) is done, and says so: what is left decides.
				err2= rc2=0
				if [ $rc -ne 0 ]; then
					err2=$("$P" "$@" 2>&1 >/dev/null)
					rc2=$?
					bad="$bad$(agree | sed 's/^/after the run again: /')"
				fi
				[ -z "$bad" ] && [ "$(state)" != "$want" ] && bad="not what a clean run leaves (the run again: exit $rc2${err2:+, $err2}):
$(diff <(echo "$want") <(state) | grep '^[<>]')"
				[ -n "$bad" ] && [ -z "$first" ] && first="$sc #$i of $n ($f, exit $rc: ${err:-no message})
$bad"
			done
			_tap_result "$([ -z "$first" ] && echo 0 || echo 1)" \
				"$label: $f at each of the $n $sc calls: files agree, the run again leaves a clean run's state" \
				"$first"
		done
	done
}

u() { "$P" users "$@" --root "$R" >/dev/null; }
u ensure a/1 && u ensure a/2 || { echo "Bail out! cannot make the agents"; exit 1; }
save

# --- 1. ensure of a new agent (the Nth) --------------------------------------------------------
# A kill or an error between the mkdirat of the new agent's tmp and its chown left a root 0700
# tmp in the agent's home, and every later ensure refused it ("cannot make …/tmp: it exists
# with another owner"): the agent could run nothing until an operator removed it.
faults "ensure a/3" "openat mkdirat fchown writev fdatasync renameat2 fsync" -- \
	users ensure a/3 --root "$R"

# --- 2. remove --forget, and remove --------------------------------------------------------
# --forget wrote the registry without the record first, then /etc: a fault between left the
# user in /etc with no record, which no later remove could find ("agent 'a/2' is not in the
# registry") and which a new ensure of the id could not take back (another name).
faults "remove --forget a/2" "renameat2 fdatasync fsync" -- users remove a/2 --forget --root "$R"
faults "remove a/2" "renameat2 fdatasync fsync" -- users remove a/2 --keep-processes --root "$R"

# --- 3. policy apply of a write rule ------------------------------------------------------------
# A root's directory in a write tree is closed (0700) before its subtree is walked and opened
# (02770) after it. A walk cut short in between (a kill, an I/O error) left it closed with no
# closing mark: every later apply took it for root's private directory, exited 0 with "left
# /workspaces/p: root's private directory …", and never opened it or anything below.
rm -rf "$R/workspaces" && mkdir -p "$R/workspaces/p/sub/deep"
for f in a b; do echo $f >"$R/workspaces/p/$f" && echo $f >"$R/workspaces/p/sub/$f"; done
echo c >"$R/workspaces/p/sub/deep/c"
printf '[{"path":"/workspaces","access":"write"}]\n' >"$S/w.json" && chmod 0644 "$S/w.json"
cp -a "$R/workspaces" "$S/ws"
wsload() { rm -rf "$R/workspaces" && cp -a "$S/ws" "$R/workspaces"; }
ws() { stat -c '%n %a %u:%g' $(find "$R/workspaces" | sort); }
apply_args=(policy apply --rules "$S/w.json" --threads 1 --keep-processes --root "$R")
apply() { "$P" "${apply_args[@]}"; }
wsload && apply >/dev/null 2>&1
want=$(ws)
# openat: anywhere in the subtree; fchmod: the directories' own closing and opening chmods;
# fremovexattr: the mark's removal before the opening chmod.
for sc in openat fchmod fremovexattr; do
	for f in EIO SIGKILL; do
		wsload
		n=$(calls "$sc" "${apply_args[@]}")
		first=
		for i in $(seq 1 "$n"); do
			wsload
			: "$(inject "$sc" "$f" "$i" "${apply_args[@]}")"
			out=$(apply 2>&1)
			[ "$(ws)" = "$want" ] || { first="$sc #$i: the apply again: $out
$(diff <(echo "$want") <(ws) | grep '^[<>]')"; break; }
		done
		_tap_result "$([ -z "$first" ] && echo 0 || echo 1)" \
			"policy apply: $f at each of the $n $sc calls, then apply again: what a clean apply leaves" "$first"
	done
done

# --- 4. policy save ----------------------------------------------------------------------------
# rules.json is the old or the new bytes, never a mix, never missing; no temp file is left
# where a later save trips.
mkdir -p "$R/workspaces/p"
printf '[{"path":"/workspaces","access":"write"}]\n' >"$S/old.json"
printf '[{"path":"/workspaces","access":"read"}]\n' >"$S/new.json"
chmod 0644 "$S/old.json" "$S/new.json"
"$P" policy save --rules "$S/old.json" --threads 1 --keep-processes --root "$R" >/dev/null 2>&1
save_args=(policy save --rules "$S/new.json" --threads 1 --keep-processes --root "$R")
for sc in openat write fsync renameat; do
	for f in EIO SIGKILL; do
		n=$(calls "$sc" "${save_args[@]}")
		first=
		for i in $(seq 1 "$n"); do
			cp "$S/old.json" "$R/data/pistis/rules.json"
			: "$(inject "$sc" "$f" "$i" "${save_args[@]}")"
			got=$(cat "$R/data/pistis/rules.json" 2>&1)
			if [ "$got" != "$(cat "$S/old.json")" ] && [ "$got" != "$(cat "$S/new.json")" ]; then
				first="#$i: rules.json is $got"
				break
			fi
			"$P" "${save_args[@]}" >/dev/null 2>&1 || { first="#$i: the save again fails"; break; }
		done
		rm -f "$R"/data/pistis/.rules.json.*.tmp
		_tap_result "$([ -z "$first" ] && echo 0 || echo 1)" \
			"policy save: $f at each of the $n $sc calls: rules.json old or new, the save again works" "$first"
	done
done

# --- 5. trusted add ------------------------------------------------------------------------------
# The script goes to /data/trusted, its wrapper to /data/bin, then the drop-in is installed.
# Whatever fails, sudo's configuration still parses, the drop-in never grants a script that
# is not there, the message names the file, and adding it again works. A failed write of
# the script or the wrapper said only "Failed to add the trusted command: I/O error".
echo "127.0.1.1 $(hostname)" >>"$R/etc/hosts"
printf '#!/bin/sh\necho hi\n' >"$S/hi" && printf '#!/bin/sh\necho two\n' >"$S/two"
chmod 0755 "$S/hi" "$S/two"
"$P" trusted add hi "$S/hi" --root "$R" >/dev/null 2>&1
rm -rf "$S/tsnap" && mkdir "$S/tsnap" && cp -a "$R/etc/sudoers.d" "$R/data" "$S/tsnap/"
tload() {
	rm -rf "$R/etc/sudoers.d" "$R/data" && cp -a "$S/tsnap/sudoers.d" "$R/etc/" &&
		cp -a "$S/tsnap/data" "$R/data"
}
# What add leaves (temp files a kill leaves, dot names sudo skips, aside).
tstate() {
	(cd "$R" && find etc/sudoers.d data/bin data/trusted ! -name '.*' -printf '%p %u:%g %m\n' |
		sort && sha256sum etc/sudoers.d/pistis-trusted)
}
tadd() { "$P" trusted add two "$S/two" --root "$R"; }
tload && tadd >/dev/null 2>&1
want=$(tstate)
for sc in write fsync renameat; do
	for f in EIO SIGKILL; do
		tload
		n=$(calls "$sc" trusted add two "$S/two" --root "$R")
		first=
		for i in $(seq 1 "$n"); do
			tload
			err=$(inject "$sc" "$f" "$i" trusted add two "$S/two" --root "$R")
			rc=$?
			bad=
			v=$(in_root "$R" visudo -c 2>&1) || bad="visudo -c fails: $v"
			grep -q /data/trusted/two "$R/etc/sudoers.d/pistis-trusted" &&
				! cmp -s "$S/two" "$R/data/trusted/two" && bad="$bad
the drop-in grants /data/trusted/two, which is not the script"
			[ "$f" = EIO ] && [ $rc -ne 0 ] && ! printf '%s\n' "$err" | grep -qE "[ '(]/[a-z]" &&
				bad="$bad
the message names no file: $err"
			tadd >/dev/null 2>&1 || bad="$bad
adding it again fails"
			[ -z "$bad" ] && [ "$(tstate)" != "$want" ] && bad="not what a clean add leaves:
$(diff <(echo "$want") <(tstate) | grep '^[<>]')"
			[ -n "$bad" ] && { first="$sc #$i ($f, exit $rc: ${err:-no message}): $bad"; break; }
		done
		_tap_result "$([ -z "$first" ] && echo 0 || echo 1)" \
			"trusted add: $f at each of the $n $sc calls: sudoers parses, never grants what is not there, the add again works" "$first"
	done
done

# --- 6. trusted remove ---------------------------------------------------------------------------
# The script goes, then the wrapper, then the drop-in is installed again. A remove cut short
# after the script (a kill, an I/O error) left the wrapper, and the drop-in still naming the
# script: its retry said "no trusted command 'hi'" (exit 1) for good.
tload && tadd >/dev/null 2>&1
rm -rf "$S/tsnap" && mkdir "$S/tsnap" && cp -a "$R/etc/sudoers.d" "$R/data" "$S/tsnap/"
trm() { "$P" trusted remove hi --root "$R"; }
tload && trm >/dev/null 2>&1
want=$(tstate)
for sc in unlinkat renameat; do
	for f in EIO SIGKILL; do
		tload
		n=$(calls "$sc" trusted remove hi --root "$R")
		first=
		for i in $(seq 1 "$n"); do
			tload
			err=$(inject "$sc" "$f" "$i" trusted remove hi --root "$R")
			rc=$?
			bad=
			v=$(in_root "$R" visudo -c 2>&1) || bad="visudo -c fails: $v"
			# (it said only "Failed to remove the trusted command: I/O error")
			[ "$f" = EIO ] && [ $rc -ne 0 ] && ! printf '%s\n' "$err" | grep -qE "[ '(]/[a-z]" &&
				bad="$bad
the message names no file: $err"
			if [ $rc -ne 0 ]; then
				err2=$(trm 2>&1 >/dev/null) || bad="$bad
removing it again fails: $err2"
			fi
			[ -z "$bad" ] && [ "$(tstate)" != "$want" ] && bad="not what a clean remove leaves:
$(diff <(echo "$want") <(tstate) | grep '^[<>]')"
			[ -n "$bad" ] && { first="$sc #$i ($f, exit $rc: ${err:-no message}): $bad"; break; }
		done
		_tap_result "$([ -z "$first" ] && echo 0 || echo 1)" \
			"trusted remove: $f at each of the $n $sc calls: sudoers parses, the remove again finishes it" "$first"
	done
done

# --- 6. ensure-base on a /data without bin, trusted and .secrets -----------------------------
# /data/bin and /data/trusted are kept as they are when they exist (a none rule closes them),
# and a kill between their mkdirat (root's 0700) and their chmod left them closed for good:
# every agent's PATH then led nowhere, and no run of ensure-base put them right.
rm -rf "$R/data/bin" "$R/data/trusted" "$R/data/.secrets"
save
faults "ensure-base" "mkdirat fchmod fchown renameat2" -- users ensure-base --root "$R"

done_testing
