#!/usr/bin/env python3
"""relay-soak.py SANDBOX-PORT SANDBOX-TOKEN CLIENT-PORT CLIENT-TOKEN SMIN-PID ROUNDS: a fake
sandbox (s1) and many client connections against server-min (tests/integration/
relay-soak.sh): commands that start, stream and end; clients that go away before an answer,
in the middle of a command's output, during the handshake; attaches from another client;
malformed requests; answers and frames for requests and commands nobody has; the sandbox
going away in the middle of requests and redialling. Prints server-min's fds, VmRSS and
VmData after a warm-up and after the rounds."""
import json, os, socket, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wsfake import WS, client, frame, fake_sandbox  # noqa: E402


def status(pid):
    st = {}
    with open("/proc/%d/status" % pid) as f:
        for l in f:
            k, _, v = l.partition(":")
            st[k] = v.split()[0] if v.split() else ""
    return {"fds": len(os.listdir("/proc/%d/fd" % pid)), "rss_kb": int(st["VmRSS"]),
            "data_kb": int(st["VmData"])}


class Sandbox:
    """The fake sandbox: answers exec.start with a command number, then one output frame and
    exec.exit (unless the request's argv says "hold": then only when told); other requests
    are answered ok; after every request it also sends an answer nobody asked for and a frame
    of a command nobody has."""

    def __init__(self, port, token):
        self.port, self.token = port, token
        self.next = 1
        self.held = []
        self.lock = threading.Lock()
        self.sb = None
        self.dial()

    def dial(self):
        self.sb = fake_sandbox(self.port, self.token, "s1")
        self.t = threading.Thread(target=self.serve, args=(self.sb,), daemon=True)
        self.t.start()

    def hangup(self):
        try:
            self.sb.s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sb.s.close()
        self.t.join(5)

    def serve(self, sb):
        try:
            while True:
                b, d = sb.recv()
                if b:
                    continue
                o = json.loads(d)
                self.answer(sb, o)
        except (OSError, ConnectionError, ValueError):
            pass

    def answer(self, sb, o):
        rid, op = o.get("id"), o.get("op")
        with self.lock:
            if op == "exec.start":
                cmd = self.next
                self.next += 1
                sb.send(json.dumps({"id": rid, "ok": True, "event": "exec.started", "cmd": cmd,
                                    "pid": 1, "user": "u", "uid": 30700}))
                if "hold" in o.get("argv", []):
                    self.held.append((rid, cmd))
                else:
                    self.end(sb, rid, cmd)
            elif op == "exec.attach":
                sb.send(json.dumps({"id": rid, "ok": True, "event": "exec.attached",
                                    "cmd": o.get("cmd"), "from": 0, "running": False}))
                self.end(sb, rid, o.get("cmd", 0))
            elif op in ("exec.ack", "sandbox.status"):
                return  # never answered: the client's pending request waits
            else:
                sb.send(json.dumps({"id": rid, "ok": True}))
            sb.send(json.dumps({"id": rid + "x", "ok": True}))
            sb.send(frame(1, 0, 999999, 1, b"nobody's"), binary=True)
            sb.send(json.dumps({"event": "exec.exit", "id": "nobody", "cmd": 888888,
                                "end": "exited", "code": 0, "last_seq": 0}))

    def end(self, sb, rid, cmd):
        sb.send(frame(1, 0, cmd, 1, b"x" * 3000), binary=True)
        sb.send(frame(1, 1, cmd, 2), binary=True)
        sb.send(json.dumps({"event": "exec.exit", "id": rid, "cmd": cmd, "end": "exited",
                            "code": 0, "last_seq": 2}))

    def release(self):
        with self.lock:
            held, self.held = self.held, []
            for rid, cmd in held:
                try:
                    self.end(self.sb, rid, cmd)
                except OSError:
                    pass


def start(c, rid, argv=("true",)):
    c.send(json.dumps({"id": rid, "op": "exec.start", "sandbox": "s1", "agent": "a",
                       "argv": list(argv)}))


def one_round(sp, st, cp, ct, sbx, i):
    # a command that runs to its end, acknowledged
    c = client(cp, ct)
    start(c, "r1")
    a = c.recv_json("r1")
    e = c.recv_json()
    while e.get("event") != "exec.exit":
        e = c.recv_json()
    c.send(json.dumps({"id": "k", "op": "exec.ack", "sandbox": "s1", "cmd": a.get("cmd"),
                       "seq": 2}))
    # requests of every kind, some malformed
    for j, m in enumerate([{"op": "ping", "sandbox": "s1"}, {"op": "exec.list", "sandbox": "s1"},
                           {"op": "ping", "sandbox": "nosuch"}, {"op": "sandboxes.list"},
                           {"op": "ping"}, {"op": "nope", "sandbox": "s1"}]):
        m["id"] = "m%d" % j
        c.send(json.dumps(m))
    c.send("{bad json")
    c.send(json.dumps({"id": "x" * 200, "op": "ping", "sandbox": "s1"}))
    c.send(frame(0, 0, 4242, 1, b"stdin to nobody"), binary=True)
    c.recv_json("m5")
    c.s.close()
    # requests the sandbox never answers, their client gone: 50 a round, so leftover
    # pending entries would fill the sandbox's 4096 within the rounds (then `limit`)
    c = client(cp, ct)
    for j in range(50):
        c.send(json.dumps({"id": "u%d" % j, "op": "sandbox.status", "sandbox": "s1"}))
    c.send(json.dumps({"id": "u", "op": "ping", "sandbox": "s1"}))
    if c.recv_json("u").get("ok") is not True:
        print("unanswered_limit=round %d" % i, flush=True)
    c.s.close()
    # gone before the answer; gone in the middle of a command (held, ended later)
    c = client(cp, ct)
    start(c, "g1", ["hold"])
    c.send(json.dumps({"id": "g2", "op": "ping", "sandbox": "s1"}))
    c.s.close()
    # another client attaches to a command and goes away
    c = client(cp, ct)
    c.send(json.dumps({"id": "at", "op": "exec.attach", "sandbox": "s1", "cmd": 1, "after": 0}))
    c.recv_json("at")
    c.s.close()
    # closed during the handshake; a wrong token
    s = socket.create_connection(("127.0.0.1", cp))
    s.sendall(b"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")
    s.close()
    try:
        WS(cp, "/v1/ws", "pistis-client.v1", "wrong-" + ct).s.close()
    except (ConnectionError, OSError):
        pass
    sbx.release()
    # the sandbox goes away with requests in flight, and comes back
    if i % 10 == 9:
        c = client(cp, ct)
        start(c, "h1", ["hold"])
        c.recv_json("h1")
        sbx.hangup()
        time.sleep(0.05)
        sbx.dial()
        sbx.held = []
        c.s.close()


def main():
    sp, st, cp, ct, pid, rounds = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4],
                                   int(sys.argv[5]), int(sys.argv[6]))
    sbx = Sandbox(sp, st)
    for i in range(20):
        one_round(sp, st, cp, ct, sbx, i)
    time.sleep(0.5)
    m0 = status(pid)
    print("before=%s" % json.dumps(m0), flush=True)
    t0 = time.time()
    for i in range(rounds):
        one_round(sp, st, cp, ct, sbx, i)
        if i % 100 == 99:
            print("# round %d: %s" % (i + 1, json.dumps(status(pid))), flush=True)
    time.sleep(0.5)
    m1 = status(pid)
    print("after=%s" % json.dumps(m1))
    print("seconds=%.1f" % (time.time() - t0))
    for k in m0:
        print("d_%s=%d" % (k, m1[k] - m0[k]))


if __name__ == "__main__":
    main()
