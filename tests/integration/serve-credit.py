#!/usr/bin/env python3
"""serve-credit.py PORT TOKEN: a relay of our own for `pistisd serve` (tests/integration/
serve-credit.sh), on loopback. It answers pistisd's hello, then: two readers start two
commands each that write 40 MiB and never acknowledge anything (each reader stops at its
quarter of the 64 MiB bound, together half of it); then a third reader starts a 30 MiB
command and acknowledges all it gets. Prints what the third reader received and whether
its command ended."""
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wsserver import relay_for_pistisd, ws_frame  # noqa: E402


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
    for i, (agent, reader) in enumerate([("bob", "r2"), ("bob", "r2"),
                                         ("carol", "r3"), ("carol", "r3")]):
        o = req({"id": "s%d" % i, "op": "exec.start", "agent": agent, "reader": reader,
                 "argv": ["head", "-c", "40M", "/dev/zero"]})
        if not o or not o.get("ok"):
            print("stalled_start=%s" % json.dumps(o))
            return
    time.sleep(2)  # they fill their readers' quarters and pause
    o = req({"id": "a1", "op": "exec.start", "agent": "alice", "reader": "r1",
             "argv": ["head", "-c", "30M", "/dev/zero"]})
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

    end, n = time.time() + 20, 0
    while time.time() < end:
        seq, total = received()
        if seq:
            n += 1
            send({"id": "ack%d" % n, "op": "exec.ack", "cmd": cmd, "seq": seq})  # no answer
        if c.wait_json(lambda m: m.get("event") == "exec.exit" and m.get("cmd") == cmd, 0.3):
            break
    seq, total = received()
    print("alice_bytes=%d" % total)
    ended = c.wait_json(lambda m: m.get("event") == "exec.exit" and m.get("cmd") == cmd, 1)
    print("alice_exit=%s" % ("yes" if ended else "no"))

    # dave's own stalled reader (a client killed mid-command) takes dave to its quarter
    # while all commands hold more than half the bound: dave is over its agent bound. Its
    # next command, from another client, must still run to its end.
    for i in range(2):
        o = req({"id": "d%d" % i, "op": "exec.start", "agent": "dave", "reader": "r4",
                 "argv": ["head", "-c", "40M", "/dev/zero"]})
        if not o or not o.get("ok"):
            print("dave_start=%s" % json.dumps(o))
            return
    time.sleep(2)
    st = req({"id": "st", "op": "sandbox.status"})
    print("total_over_half=%s" % ("yes" if st and st.get("buffered", 0) >= 32 << 20 else
                                  json.dumps(st)))
    o = req({"id": "d9", "op": "exec.start", "agent": "dave", "reader": "r5",
             "argv": ["echo", "dave-still-runs"]})
    dcmd = o["cmd"] if o and o.get("ok") else -1
    ended = c.wait_json(lambda m: m.get("event") == "exec.exit" and m.get("cmd") == dcmd, 10)
    print("dave_echo_exit=%s" % ("yes" if ended else "no"))


if __name__ == "__main__":
    main()
