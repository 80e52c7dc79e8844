#!/bin/bash
# Static analysis of the tree's C code (make analyze; docs/building.md, "Static analysis").
# Usage: scripts/analyze.sh BUILD_DIR
#
# 1. gcc -fanalyzer: every .c compiled once with the host build's flags (the Makefile's
#    analyze-objs, as each file's own build sees it), under bear, which records
#    BUILD_DIR/analyze/compile_commands.json for the next two.
# 2. clang-tidy: bugprone-*, cert-*, clang-analyzer-* (clang's static analyser, what
#    scan-build runs), concurrency-*, misc-*, less the checks named in CHECKS below.
# 3. cppcheck --enable=warning,portability,performance.
#
# Findings in the shipped code (everything but tests/ and bench/, which are analysed and
# listed but not gated) are compared, without their line numbers, with scripts/analyze-known:
# the false positives read and explained there. Exit 0: none new; 1: new findings (each
# printed, then the count) or a tool failed; 111: a tool is missing. Logs stay in
# BUILD_DIR/analyze/.
set -u

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 111
[ $# -eq 1 ] || { echo "Usage: scripts/analyze.sh BUILD_DIR" >&2; exit 100; }
build=$1
case "$build" in /*) ;; *) build=$here/$build ;; esac
an=$build/analyze
jobs=${PISTIS_ANALYZE_JOBS:-$(nproc)}
# The clang-tidy checks left out, each for a reason that holds for the whole tree:
#   easily-swappable-parameters, misc-unused-parameters: style
#   suspicious-string-compare: `if (strcmp(a, b))` is the house style
#   implicit-widening-of-multiplication-result, misplaced-widening-cast,
#     narrowing-conversions, integer-division: constant sizes and ratios for display, each
#     read; lws' info.uid/gid take -1 as int
#   branch-clone, not-null-terminated-result (memcpy into LWS_PRE frames, which are not
#     strings): reviewed, intended
#   misc-no-recursion: every recursive walk is bounded by depth (REMOVE_DEPTH_MAX,
#     SECRETS_DEPTH_MAX, CHECK_WALK_MAX_DEPTH, INTERP_DEPTH...)
#   cert-err33-c, cert-err34-c: snprintf into fixed buffers that cut on purpose; sscanf
#     whose count is checked
#   concurrency-mt-unsafe: the binaries are single-threaded but for the policy walk's
#     workers and spawn's spawner thread, which call none of the functions it lists
#   clang-analyzer unix.Malloc, deadcode.DeadStores: it does not see __attribute__((cleanup))
#     free or close (_cleanup_free_, _cleanup_close_, `fd = -1; /* the DIR has it */`)
#   optin.performance.Padding, optin.portability.UnixAPI (malloc(0)),
#     security.insecureAPI.DeprecatedOrUnsafeBufferHandling: not bugs
CHECKS='-*,bugprone-*,cert-*,clang-analyzer-*,concurrency-*,misc-*'
CHECKS+=',-bugprone-easily-swappable-parameters,-misc-unused-parameters'
CHECKS+=',-bugprone-suspicious-string-compare,-bugprone-implicit-widening-of-multiplication-result'
CHECKS+=',-bugprone-misplaced-widening-cast,-bugprone-narrowing-conversions'
CHECKS+=',-bugprone-integer-division,-bugprone-branch-clone,-bugprone-not-null-terminated-result'
CHECKS+=',-misc-no-recursion,-cert-err33-c,-cert-err34-c,-concurrency-mt-unsafe'
CHECKS+=',-clang-analyzer-unix.Malloc,-clang-analyzer-deadcode.DeadStores'
CHECKS+=',-clang-analyzer-optin.performance.Padding,-clang-analyzer-optin.portability.UnixAPI'
CHECKS+=',-clang-analyzer-security.insecureAPI.DeprecatedOrUnsafeBufferHandling'

for tool in bear clang-tidy run-clang-tidy cppcheck python3 gcc; do
	command -v "$tool" >/dev/null ||
		{ echo "analyze: $tool is missing: scripts/bootstrap.sh analyze" >&2; exit 111; }
done
# Everything anew: an object make thinks up to date would be neither analysed nor recorded.
rm -rf "$an" && mkdir -p "$an" || exit 111
export LC_ALL=C # ASCII quotes in gcc's messages, so they compare the same everywhere

t0=$(date +%s)
echo "analyze: gcc -fanalyzer over every C file (log: $an/gcc.log)"
bear --output "$an/compile_commands.bear.json" -- \
	"${MAKE:-make}" --no-print-directory -k -j"$jobs" B="$build" analyze-objs \
	ANALYZE_GCC_FLAGS='-fanalyzer -Wno-error' >"$an/gcc.out" 2>"$an/gcc.log"
gcc_rc=$?
# The clang tools get the commands without gcc's own flags; cppcheck, the version string
# quoted as the shell would have left it (it reads "0.1.0" bare, a syntax error).
python3 - "$an" <<'PY' || exit 111
import json, sys
an = sys.argv[1]
db = json.load(open(an + "/compile_commands.bear.json"))
for e in db:
    e["arguments"] = [a for a in e["arguments"] if a not in ("-fanalyzer", "-Wno-error")]
json.dump(db, open(an + "/compile_commands.json", "w"), indent=1)
for e in db:
    e["arguments"] = [a.replace('"', '\\"') if a.startswith("-DPISTIS_VERSION=") else a
                      for a in e["arguments"]]
json.dump(db, open(an + "/cppcheck.json", "w"), indent=1)
PY
n_files=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' \
	"$an/compile_commands.json")
t1=$(date +%s)
echo "analyze: clang-tidy over the $n_files files' shipped part (log: $an/clang-tidy.log)"
run-clang-tidy -p "$an" -j "$jobs" -quiet -checks="$CHECKS" \
	"^$here/(?!tests/|bench/)" >"$an/clang-tidy.log" 2>"$an/clang-tidy.err"
tidy_rc=$?
t2=$(date +%s)
echo "analyze: cppcheck (log: $an/cppcheck.log)"
# -j2 whatever the machine: cppcheck 2.10's findings differ between -j1 and -j2 (-j2 found
# five more, all read), and the list must not depend on the core count.
cppcheck --project="$an/cppcheck.json" -DCHAR_BIT=8 --std=c11 --quiet -j2 \
	--enable=warning,portability,performance \
	--template='{file}:{line}:{column}: {severity}: {message} [{id}]' \
	2>"$an/cppcheck.log" >/dev/null
cpp_rc=$?
t3=$(date +%s)

python3 - "$here" "$an" "$gcc_rc" "$tidy_rc" "$cpp_rc" <<'PY'
import re, sys
here, an = sys.argv[1], sys.argv[2]
gcc_rc, tidy_rc, cpp_rc = (int(x) for x in sys.argv[3:6])
ansi = re.compile(r"\x1b\[[0-9;]*m")
diag = re.compile(r"^(\S+?):(\d+):(\d+): (warning|error): (.*)$")

def findings(tool, log):
    out = []
    for line in open(log, errors="replace"):
        m = diag.match(ansi.sub("", line.rstrip("\n")))
        if not m:
            continue
        path = m.group(1)
        if path.startswith(here + "/"):
            path = path[len(here) + 1:]
        path = re.sub(r"^(\./)+", "", path)
        out.append((path, "%s %s: %s" % (tool, path, m.group(5).strip())))
    return out

known = set()
for line in open(here + "/scripts/analyze-known"):
    line = line.strip()
    if line and not line.startswith("#"):
        known.add(line)
all_ = (findings("gcc", an + "/gcc.log") + findings("clang-tidy", an + "/clang-tidy.log") +
        findings("cppcheck", an + "/cppcheck.log"))
shipped = [k for p, k in all_ if not p.startswith(("tests/", "bench/", "/"))]
tests = {k for p, k in all_ if p.startswith(("tests/", "bench/"))}
new = sorted(set(k for k in shipped if k not in known))
seen = set(shipped)
stale = sorted(k for k in known if k not in seen)
with open(an + "/tests-findings.txt", "w") as f:
    f.write("".join(k + "\n" for k in sorted(tests)))
for k in new:
    print("new: " + k)
for k in stale:
    print("analyze: no longer found (remove it from scripts/analyze-known): " + k)
fail = False
for tool, rc, log in (("gcc", gcc_rc, "gcc.log"), ("clang-tidy", tidy_rc, "clang-tidy.err"),
                      ("cppcheck", cpp_rc, "cppcheck.log")):
    # make -k: a file that did not compile (its log says why); clang-tidy exits 1 when it
    # printed anything, which the lines above judged
    if rc and not (tool == "clang-tidy" and rc == 1):
        print("analyze: %s failed (exit %d): see %s/%s" % (tool, rc, an, log))
        fail = True
print("analyze: %d findings in the shipped code, %d known false positives, %d new; "
      "%d in tests/ and bench/ (not gated: %s/tests-findings.txt)"
      % (len(set(shipped)), len(set(shipped) & known), len(new), len(tests), an))
sys.exit(1 if new or fail else 0)
PY
rc=$?
echo "analyze: gcc $((t1 - t0)) s, clang-tidy $((t2 - t1)) s, cppcheck $((t3 - t2)) s"
exit $rc
