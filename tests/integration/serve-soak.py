#!/usr/bin/env python3
"""serve-soak.py PORT TOKEN AGENT ROUNDS: a relay of our own for `pistisd serve`
(tests/integration/serve-soak.sh), on loopback. It runs ROUNDS rounds of mixed operations
(commands that succeed, fail to start, time out, are killed, overrun their output, detach and
are re-attached, pty commands with resizes, stdin to ended commands, file operations that
succeed and fail, hostile messages and frames, a relay redial in the middle of a command),
after one warm-up round, and prints what serve holds (fds and what they point at, VmRSS,
VmData, threads, children, zombies) after the warm-up and after the rounds, and every fd
list a command saw of its own."""
import base64, json, os, re, socket, struct, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wsserver import Conn, listen, pid_of_peer, ws_frame, pframe  # noqa: E402


def out(k, v):
    print("%s=%s" % (k, v), flush=True)


class Relay(Conn):
    """A Conn that files what pistisd sends by kind instead of keeping every message
    (_message): answers by id, exec.exit events by cmd, output bytes and the last sequence
    by cmd."""

    def __init__(self, ls, token):
        self.answers, self.exits, self.outb, self.seq = {}, {}, {}, {}
        super().__init__(ls, "pistis.v1", token, timeout=30)

    def _message(self, op, data):
        if op == 2:
            if len(data) < 16:
                return
            _, stream, _, cmd, seq = struct.unpack(">BBHIQ", data[:16])
            self.seq[cmd] = max(self.seq.get(cmd, 0), seq)
            b = self.outb.setdefault(cmd, bytearray())
            if len(b) < 65536:
                b += data[16:]
            return
        try:
            o = json.loads(data)
        except ValueError:
            return
        if o.get("op") == "hello":
            self.answers["hello"] = o
        elif o.get("event") == "exec.exit":
            self.exits[o.get("cmd")] = o
        elif "ok" in o:
            self.answers[o.get("id")] = o

    def wait(self, f, timeout=10):
        end = time.time() + timeout
        with self.cv:
            while True:
                v = f()
                if v is not None:
                    return v
                left = end - time.time()
                if self.eof or left <= 0:
                    return None
                self.cv.wait(left)


class Soak:
    def __init__(self, ls, token, agent, trusted=None):
        self.trusted = trusted
        self.ls, self.token, self.agent = ls, token, agent
        self.n = 0
        self.codes = {}
        self.fdlists = []
        self.bad = []
        self.c = None
        self.pid = None
        self.dial()

    def hangup(self):
        try:
            self.c.s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.c.close()

    def dial(self):
        self.c = Relay(self.ls, self.token)
        if self.c.wait(lambda: self.c.answers.get("hello"), 30) is None:
            raise SystemExit("hello=none")
        self.send({"id": "hello", "ok": True})
        self.pid = pid_of_peer(self.c.sport, self.c.cport) or self.pid

    def send(self, o):
        h, p = ws_frame(1, json.dumps(o) if not isinstance(o, (bytes, str)) else o)
        self.c.send(h + p)

    def req(self, o, timeout=15):
        self.n += 1
        o["id"] = "q%d" % self.n
        self.send(o)
        a = self.c.wait(lambda: self.c.answers.pop(o["id"], None), timeout)
        if a is None:
            self.bad.append("no answer to %s" % json.dumps(o)[:200])
            return {}
        k = "%s:%s" % (o["op"], "ok" if a.get("ok") else (a.get("error") or {}).get("code"))
        self.codes[k] = self.codes.get(k, 0) + 1
        return a

    def ack_done(self, cmd, timeout=15):
        e = self.c.wait(lambda: self.c.exits.pop(cmd, None), timeout)
        if e is None:
            self.bad.append("no exec.exit for %s" % cmd)
            return None
        self.send({"id": "a%d" % cmd, "op": "exec.ack", "cmd": cmd, "seq": e.get("last_seq", 0)})
        self.c.outb.pop(cmd, None)
        self.c.seq.pop(cmd, None)
        return e

    def start(self, **kw):
        o = {"op": "exec.start", "agent": self.agent}
        o.update(kw)
        a = self.req(o)
        return a.get("cmd") if a.get("ok") else None

    def run(self, argv, **kw):
        cmd = self.start(argv=argv, **kw)
        if cmd is None:
            self.bad.append("did not start: %s" % argv)
            return None, None
        e = self.ack_done(cmd)
        return e, cmd

    def fdcheck(self, why):
        """A command that prints the fds it holds: only 0, 1, 2 (one on a pty, with its
        stdin a pipe, or plain, in turn)."""
        self.probes = getattr(self, "probes", 0) + 1
        kw = [{}, {"pty": True}, {"stdin": "pipe"}][self.probes % 3]
        o = {"op": "exec.start", "agent": self.agent, "shell": "ls /proc/$$/fd"}
        o.update(kw)
        a = self.req(o)
        cmd = a.get("cmd") if a.get("ok") else None
        if cmd is None:
            self.bad.append("fd probe %s did not start (%s): %s" % (kw, why, json.dumps(a)))
            return
        self.c.wait(lambda: self.c.exits.get(cmd), 10)
        fds = bytes(self.c.outb.get(cmd, b"")).decode(errors="replace").split()
        fds = " ".join(fds)
        self.ack_done(cmd)
        self.fdlists.append(fds)
        if fds != "0 1 2":
            self.bad.append("after %s a command held fds: %s" % (why, fds))

    def round(self, i):
        A = self.agent
        # commands that succeed
        self.run(["/bin/true"])
        self.run(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
        # fail to start: missing program, not executable, unreadable cwd, bad arguments
        self.req({"op": "exec.start", "agent": A, "argv": ["/nonexistent/prog"]})
        self.req({"op": "exec.start", "agent": A, "argv": ["/etc/passwd"]})
        self.req({"op": "exec.start", "agent": A, "argv": ["/bin/true"], "cwd": "/data/nope%d" % i})
        self.req({"op": "exec.start", "agent": A, "argv": ["/bin/true"], "cwd": "/etc"})
        self.req({"op": "exec.start", "agent": A, "argv": ["/bin/true"], "cwd": "/data/pistis"})
        self.req({"op": "exec.start", "agent": A, "argv": []})
        self.req({"op": "exec.start", "agent": A, "argv": ["/bin/true"], "pty": True, "rows": 99999})
        self.req({"op": "exec.start", "agent": A, "argv": ["/bin/true"], "env": {"LD_PRELOAD": "x"}})
        self.req({"op": "exec.start", "agent": "no such agent!", "argv": ["/bin/true"]})
        self.req({"op": "exec.start", "agent": A, "argv": ["/nonexistent"], "pty": True})
        self.req({"op": "exec.start", "agent": A, "argv": ["/nonexistent"], "stdin": "pipe"})
        self.req({"op": "exec.start", "agent": A, "argv": ["/bin/true"], "pty": True, "cwd": "/data/nope"})
        self.req({"op": "exec.start", "agent": A, "argv": ["/bin/true"], "stdin": "pipe", "cwd": "/etc"})
        self.fdcheck("failed starts")
        # timeout, kill, signal to an ended command
        self.run(["/bin/sleep", "10"], timeout_ms=150)
        cmd = self.start(argv=["/bin/sleep", "30"])
        if cmd:
            self.req({"op": "exec.signal", "cmd": cmd, "signal": 9})
            self.ack_done(cmd)
            self.req({"op": "exec.signal", "cmd": cmd, "signal": 15})
        # SysV IPC objects left behind (removed with the agent's last command)
        e, _ = self.run(["/bin/sh", "-c", "ipcmk -M 4096 && ipcmk -Q && ipcmk -S 1"])
        if not e or e.get("code") != 0:
            self.bad.append("ipcmk did not make its objects: %s" % json.dumps(e))
        # a background child that keeps the pipes (drain, left_children_killed)
        self.run(["/bin/sh", "-c", "sleep 20 & echo bg"])
        # output over the window (acked at the end only), and an output_cap
        self.run(["/bin/sh", "-c", "head -c 3000000 /dev/zero"])
        self.run(["/bin/sh", "-c", "head -c 300000 /dev/zero"], output_cap=1000)
        # stdin: JSON and frames, to a live and an ended command
        cmd = self.start(argv=["/bin/cat"], stdin="pipe")
        if cmd:
            self.req({"op": "exec.stdin", "cmd": cmd, "data": base64.b64encode(b"abc").decode()})
            h, p = ws_frame(2, pframe(0, 1, cmd, 1, b"def"))
            self.c.send(h + p)
            self.ack_done(cmd)
            self.req({"op": "exec.stdin", "cmd": cmd, "data": "eHl6"})
            h, p = ws_frame(2, pframe(0, 0, cmd, 2, b"late"))
            self.c.send(h + p)
            self.req({"op": "exec.close_stdin", "cmd": cmd})
        # pty with resizes and input
        cmd = self.start(argv=["/bin/sh"], pty=True, rows=30, cols=100)
        if cmd is None:
            self.bad.append("a pty command did not start")
        else:
            for r in (10, 50, 4096):
                self.req({"op": "exec.resize", "cmd": cmd, "rows": r, "cols": r})
            self.req({"op": "exec.stdin", "cmd": cmd,
                      "data": base64.b64encode(b"stty size; exit 0\n").decode()})
            self.ack_done(cmd)
            self.req({"op": "exec.resize", "cmd": cmd, "rows": 5, "cols": 5})
        # a detached reader: a new reader attaches, acks everything
        cmd = self.start(argv=["/bin/sh", "-c", "echo detached; sleep 0.2"], reader="r-old")
        if cmd:
            self.c.wait(lambda: self.c.exits.get(cmd), 10)
            self.req({"op": "exec.attach", "cmd": cmd, "after": 0, "reader": "r-new"})
            self.ack_done(cmd)
        self.req({"op": "exec.attach", "cmd": 999999, "after": 0})
        self.req({"op": "exec.list"})
        self.req({"op": "sandbox.status"})
        self.fdcheck("exec paths")
        # file operations, as the agent
        d = "/tmp/soak"
        self.req({"op": "fs.mkdir", "agent": A, "path": d})
        self.req({"op": "fs.write", "agent": A, "path": d + "/f",
                  "data": base64.b64encode(b"x" * 5000).decode()})
        self.req({"op": "fs.read", "agent": A, "path": d + "/f"})
        self.req({"op": "fs.edit", "agent": A, "path": d + "/f", "old": "x", "new": "y"})
        self.req({"op": "fs.edit", "agent": A, "path": d + "/f", "old": "zz", "new": "y"})
        self.req({"op": "fs.stat", "agent": A, "path": d + "/f"})
        self.req({"op": "fs.list", "agent": A, "path": d})
        self.req({"op": "fs.read", "agent": A, "path": d + "/missing"})
        self.req({"op": "fs.read", "agent": A, "path": "/etc/shadow"})
        self.req({"op": "fs.write", "agent": A, "path": "/etc/soak", "data": "eA=="})
        self.req({"op": "fs.read", "agent": A, "path": d + "/fifo"})
        self.req({"op": "fs.write", "agent": A, "path": d + "/fifo", "data": "eA=="})
        self.req({"op": "fs.read", "agent": A, "path": d + "/loop/x"})
        self.req({"op": "fs.list", "agent": A, "path": "/proc/self/fd"})
        self.req({"op": "fs.read", "agent": A, "path": d + "/f", "offset": 1 << 52})
        self.req({"op": "fs.write", "agent": A, "path": d + "/big", "data": "eA==", "offset": 1 << 40})
        self.req({"op": "fs.move", "agent": A, "path": d + "/f", "to": d + "/g"})
        self.req({"op": "fs.remove", "agent": A, "path": d + "/g"})
        self.req({"op": "fs.remove", "agent": A, "path": d + "/g"})
        self.req({"op": "fs.mkdir", "agent": A, "path": d + "/t/u/v", "parents": True})
        self.req({"op": "fs.remove", "agent": A, "path": d + "/t", "recursive": True})
        self.req({"op": "users.ensure", "agent": A})
        self.req({"op": "fs.read", "agent": A, "path": d + "/f", "limit": 0})
        self.req({"op": "fs.write", "agent": A, "path": d + "/h", "data": "not base64!"})
        self.req({"op": "fs.read_prompt", "agent": A, "path": d + "/loop"})
        self.req({"op": "fs.list", "agent": A, "path": d + "/missing"})
        self.req({"op": "fs.stat", "agent": "no such agent!", "path": d})
        # administrative helpers: answered, failed
        self.req({"op": "policy.explain", "path": d, "agent": A})
        self.req({"op": "policy.check", "rules": "not a rule line"})
        self.req({"op": "trusted.list"})
        self.req({"op": "trusted.remove", "name": "nosuch"})
        self.req({"op": "trusted.add", "name": "../x", "data": "eA=="})
        if self.trusted:
            self.run(["/data/bin/" + self.trusted])
        self.fdcheck("file operations")
        # hostile messages and frames
        self.send("{not json")
        self.send('{"id":"x","op":"nope"}')
        self.send('{"id":"y","op":"exec.ack","cmd":"str"}')
        h, p = ws_frame(2, b"\x01\x00")
        self.c.send(h + p)
        h, p = ws_frame(2, pframe(0, 0, 123456, 1, b"zz"))
        self.c.send(h + p)
        h, p = ws_frame(2, pframe(9, 0, 1, 0, b""))
        self.c.send(h + p)
        self.req({"op": "ping"})
        # every 5th round: the relay goes away in the middle of a command and is redialled
        if i % 5 == 4:
            cmd = self.start(argv=["/bin/sh", "-c", "sleep 0.5; echo after"])
            self.hangup()
            self.dial()
            if cmd:
                self.req({"op": "exec.attach", "cmd": cmd, "after": 0})
                self.ack_done(cmd)
            # output past the 8 MiB window: paused until acknowledged, then resumed
            cmd = self.start(argv=["/bin/sh", "-c", "head -c 12000000 /dev/zero"])
            end = time.time() + 30
            k = 0
            while cmd and time.time() < end and cmd not in self.c.exits:
                time.sleep(0.3)
                # a fresh id each: serve refuses one among the connection's last 256
                k += 1
                self.send({"id": "w%d.%d" % (cmd, k), "op": "exec.ack", "cmd": cmd,
                           "seq": self.c.seq.get(cmd, 0)})
            if cmd:
                e = self.ack_done(cmd)
                if not e or e.get("stdout_bytes") != 12000000:
                    self.bad.append("12 MB through the window: %s" % json.dumps(e))
            # and again with output on its way, unacknowledged: re-attached from 0
            cmd = self.start(argv=["/bin/sh", "-c", "head -c 3000000 /dev/zero; sleep 0.3"])
            time.sleep(0.1)
            self.hangup()
            self.dial()
            if cmd:
                self.req({"op": "exec.attach", "cmd": cmd, "after": 0})
                self.ack_done(cmd)
            self.fdcheck("a redial")

    def measure(self):
        pid = self.pid
        st = {}
        with open("/proc/%d/status" % pid) as f:
            for l in f:
                k, _, v = l.partition(":")
                st[k] = v.split()[0] if v.split() else ""
        fds, fds_targets = {}, []
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            fds_targets.append(t)
            k = t.split(":[")[0] if ":[" in t else t
            fds[k] = fds.get(k, 0) + 1
        # the command cgroups under the agent's: the reusable slots (cmd-s0..3, made as
        # commands overlap and kept, with or without an fd: pistisd/cgroup.h) apart, since a
        # second slot made in the rounds counted as a leak once in CI
        cgroups = slots = 0
        for t in fds_targets:
            m = re.match(r"(.*/pi-agent-[^/]+)", t)
            if m:
                for e in os.scandir(m.group(1)):
                    if e.is_dir() and re.fullmatch(r"cmd-s[0-9]+", e.name):
                        slots += 1
                    elif e.is_dir():
                        cgroups += 1
                break
        kids, zombies = 0, 0
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                for k in f.read().split():
                    kids += 1
                    try:
                        with open("/proc/%s/stat" % k) as g:
                            if g.read().rsplit(")", 1)[1].split()[0] == "Z":
                                zombies += 1
                    except OSError:
                        pass
        return {"fds": sum(fds.values()), "fd_kinds": fds, "rss_kb": int(st["VmRSS"]),
                "data_kb": int(st["VmData"]), "threads": int(st["Threads"]),
                "children": kids, "zombies": zombies, "cgroups": cgroups, "slots": slots}

    def settle(self):
        """Wait until serve has no commands left (listed), its children are gone, and so
        are the agent's command cgroups but its slots (a killed one goes once its processes
        are torn down)."""
        end = time.time() + 20
        while time.time() < end:
            a = self.req({"op": "exec.list"})
            m = self.measure()
            if not a.get("commands") and m["children"] == 0 and m["cgroups"] == 0:
                return m
            time.sleep(0.2)
        return self.measure()


def main():
    port, token, agent, rounds = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    ls = listen(port)
    s = Soak(ls, token, agent, sys.argv[5] if len(sys.argv) > 5 else None)
    # the fixtures: a FIFO and a symlink loop in the agent's directory
    s.run(["/bin/sh", "-c", "mkdir -p /tmp/soak && cd /tmp/soak && "
           "mkfifo fifo && ln -s loop loop"])
    s.round(0)
    s.round(1)
    m0 = s.settle()
    out("before", json.dumps(m0, sort_keys=True))
    t0 = time.time()
    for i in range(2, rounds + 2):
        s.round(i)
        if i % 10 == 0:
            m = s.measure()
            print("# round %d: fds %d rss %d data %d children %d cgroups %d" %
                  (i, m["fds"], m["rss_kb"], m["data_kb"], m["children"], m["cgroups"]),
                  flush=True)
    m1 = s.settle()
    out("after", json.dumps(m1, sort_keys=True))
    out("requests", s.n)
    out("seconds", "%.1f" % (time.time() - t0))
    out("fdlists", len(s.fdlists))
    nr = int(os.environ.get("PISTIS_SOAK_REDIALS", "0"))
    if nr:
        for i in range(nr):
            s.hangup()
            s.dial()
            s.req({"op": "ping"})
            if i == 9:
                r0 = s.measure()
        r1 = s.measure()
        out("redials", "%d: fds %d -> %d, rss %d -> %d, data %d -> %d" % (
            nr, r0["fds"], r1["fds"], r0["rss_kb"], r1["rss_kb"], r0["data_kb"], r1["data_kb"]))
    # administrative requests one after the other, each sent as soon as the previous one is
    # answered: none is refused as "another policy/trusted operation is running"
    lim = 0
    for i in range(40):
        a = s.req({"op": ["trusted.list", "policy.explain"][i % 2], "path": "/tmp"})
        lim += (a.get("error") or {}).get("code") == "limit"
    out("admin_limits", lim)
    # an agent that kills its own processes: file operation helpers (the agent after their
    # id change) and commands killed at any step
    killer = s.start(shell="while :; do kill -9 -1; done")
    kres = {}
    for i in range(20):
        a = s.req({"op": ["fs.read", "fs.write", "fs.list", "fs.stat"][i % 4], "agent": agent,
                   "path": "/tmp/soak/k", "data": "eA=="})
        e = "ok" if a.get("ok") else (a.get("error") or {}).get("code", "?")
        kres[e] = kres.get(e, 0) + 1
        a = s.req({"op": "exec.start", "agent": agent, "argv": ["/bin/true"]})
        if a.get("ok"):
            s.ack_done(a["cmd"])
    if killer:
        s.req({"op": "exec.signal", "cmd": killer, "signal": 9})
        s.ack_done(killer)
    out("killed_helpers", json.dumps(kres, sort_keys=True))
    m3 = s.settle()
    for k in ("fds", "children", "cgroups"):
        out("k_" + k, m3[k] - m0[k])
    s.fdcheck("helpers and commands killed by their agent")
    # an agent that stops its own processes (spawn children after their id change, before
    # their exec, included): commands that start stopped or time out before exec
    stopper = s.start(shell="while :; do kill -STOP -1; done")
    res = []
    for i in range(4):
        a = s.req({"op": "exec.start", "agent": agent, "argv": ["/bin/true"], "timeout_ms": 1000})
        res.append(a.get("cmd") if a.get("ok") else (a.get("error") or {}).get("message", "?"))
    if stopper:
        s.req({"op": "exec.signal", "cmd": stopper, "signal": 9})
        s.ack_done(stopper)
    for r in res:
        if isinstance(r, int):
            s.req({"op": "exec.signal", "cmd": r, "signal": 9})
            s.ack_done(r)
    out("stopped_starts", json.dumps(res))
    m2 = s.settle()
    out("after_stopped", json.dumps(m2, sort_keys=True))
    for k in ("fds", "children", "cgroups"):
        out("s_" + k, m2[k] - m0[k])
    s.fdcheck("starts stopped before their exec")
    # readers that never come back: ended commands kept for their final ack fill the table;
    # the agent's own next command must still start
    n = 0
    for i in range(300):
        cmd = s.start(argv=["/bin/true"], reader="gone%d" % i)
        if cmd is None:
            break
        s.c.wait(lambda: s.c.exits.get(cmd), 10)
        n += 1
    out("abandoned_started", n)
    # their ends wait up to 10 minutes for an ack, but not in the agent's cgroup slots: the
    # next command runs in one (cmd-s0..3), not in a cgroup made for it alone
    cmd = s.start(argv=["/bin/cat", "/proc/self/cgroup"])
    cg = "none"
    if cmd is not None:
        s.c.wait(lambda: s.c.exits.get(cmd), 10)
        text = bytes(s.c.outb.get(cmd, b"")).decode(errors="replace")
        cg = " ".join(l for l in text.split("\n") if l.startswith("0::")) or text.strip()
        s.ack_done(cmd)
    out("after_abandoned_cgroup", cg)
    out("codes", json.dumps(s.codes, sort_keys=True))
    for b in s.bad[:20]:
        out("bad", b)
    out("bad_count", len(s.bad))
    for k in ("fds", "rss_kb", "data_kb", "threads", "children", "zombies", "cgroups"):
        out("d_" + k, m1[k] - m0[k])
    out("slots", max(m0["slots"], m1["slots"], m2["slots"], m3["slots"]))


if __name__ == "__main__":
    main()
