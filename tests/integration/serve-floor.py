#!/usr/bin/env python3
"""serve-floor.py PORT TOKEN: a relay of our own for `pistisd serve --max-buffered 8`
(tests/integration/redteam-dos.sh, section 4), on loopback. Agent mallory (uid 33101) starts
one short command after another, each read by a reader of its own that never acknowledges:
each writes 60000 bytes, under the 64 KiB that every command may hold while its agent is over
its bound, and ends. Ended commands do not count against an agent's 32, so they pile up until
the table's 256. Then agent alice (uid 33102) starts a 2 MiB command and acknowledges all it
gets: it must run to its end. Prints what mallory holds, the total, and alice's end. Then
agent trudy (uid 33103) starts 150 short commands and sends each 1 MiB of stdin it never
reads: prints how much pistisd serve grew."""
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wsserver import pframe, relay_for_pistisd, ws_frame  # noqa: E402

MALLORY_CMDS = 200


def serve_rss(port):
    """pistisd serve's resident KiB (the one dialling our port), -1 if not found."""
    for p in os.listdir("/proc"):
        try:
            cl = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
        except OSError:
            continue
        if cl[0].endswith(b"pistisd") and b"serve" in cl and \
                (b"ws://127.0.0.1:%d" % port) in cl:
            for line in open("/proc/%s/status" % p):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    return -1


def main():
    port, token = int(sys.argv[1]), sys.argv[2]
    c = relay_for_pistisd(port, token)
    if not c:
        return

    def send(o):
        h, p = ws_frame(1, json.dumps(o))
        c.send(h + p)

    def req(o, timeout=20):
        send(o)
        return c.wait_json(lambda m: m.get("id") == o["id"] and "ok" in m, timeout)

    send({"id": "hello", "ok": True})
    for agent, uid in (("mallory", 33101), ("alice", 33102), ("trudy", 33103)):
        o = req({"id": "u-" + agent, "op": "users.ensure", "agent": agent, "uid": uid})
        if not o or not o.get("ok"):
            print("ensure_%s=%s" % (agent, json.dumps(o)))
            return
    started = 0
    for i in range(MALLORY_CMDS):
        o = req({"id": "m%d" % i, "op": "exec.start", "agent": "mallory",
                 "reader": "rm%d" % i, "argv": ["head", "-c", "60000", "/dev/zero"]})
        if not o or not o.get("ok"):
            print("# mallory's start %d: %s" % (i, json.dumps(o)))
            break
        started += 1
    print("mallory_started=%d" % started)
    time.sleep(1)
    st = req({"id": "st1", "op": "sandbox.status"}) or {}
    held = sum(x.get("buffered", 0) for x in st.get("commands", [])
               if x.get("agent") == "mallory")
    print("mallory_buffered=%d" % held)
    print("total_buffered=%d" % st.get("buffered", -1))

    o = req({"id": "a1", "op": "exec.start", "agent": "alice", "reader": "ra",
             "argv": ["head", "-c", "2M", "/dev/zero"]})
    if not o or not o.get("ok"):
        print("alice_start=%s" % json.dumps(o))
        return
    cmd = o["cmd"]

    def received():
        with c.cv:
            ms = list(c.msgs)
        seq = total = 0
        for op, p in ms:
            if op == 2:
                _, st, fl, cm, s = struct.unpack(">BBHIQ", p[:16])
                if cm == cmd:
                    seq, total = max(seq, s), total + len(p) - 16
        return seq, total

    end, n, acked = time.time() + 20, 0, 0
    while time.time() < end:
        seq, total = received()
        if seq > acked:
            n += 1
            acked = seq
            send({"id": "ack%d" % n, "op": "exec.ack", "cmd": cmd, "seq": seq})
        if c.wait_json(lambda m: m.get("event") == "exec.exit" and m.get("cmd") == cmd, 0.3):
            break
    seq, total = received()
    print("alice_bytes=%d" % total)
    ended = c.wait_json(lambda m: m.get("event") == "exec.exit" and m.get("cmd") == cmd, 1)
    print("alice_exit=%s" % ("yes" if ended else "no"))

    # trudy's short commands are each sent 1 MiB of stdin they never read, and end: what
    # serve queued for them must go with their stdin, not stay for the 10 minutes they wait
    # for an acknowledgement (ended commands do not count against trudy's 32).
    before, n = serve_rss(port), 0
    for i in range(150):
        o = req({"id": "t%d" % i, "op": "exec.start", "agent": "trudy", "reader": "rt%d" % i,
                 "argv": ["sleep", "0.3"], "stdin": "pipe"})
        if not o or not o.get("ok"):
            time.sleep(0.4)  # its 32 are running: they end soon
            continue
        n += 1
        for s in range(4):
            h, p = ws_frame(2, pframe(0, 0, o["cmd"], s + 1, b"x" * (256 * 1024 - 1)))
            c.send(h + p)
    time.sleep(1.5)
    print("trudy_started=%d" % n)
    print("stdin_rss_growth_kib=%d" % (serve_rss(port) - before))


if __name__ == "__main__":
    main()
