#!/usr/bin/env python3
"""serve-unread.py PORT TOKEN AGENT...: a relay of our own for `pistisd serve`
(tests/integration/serve-unread.sh), on loopback. It answers pistisd's hello, starts 32
sleeping commands per agent (tags of 64 bytes, so a sandbox.status answer is tens of KiB),
then sends 6000 sandbox.status requests and reads nothing more for 10 s. Prints pistisd's
largest resident size meanwhile (MiB), and how many requests were answered after it reads
again for 10 s."""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wsserver import Conn, relay_for_pistisd, pid_of_peer, rss_kb, ws_frame  # noqa: E402


class PausedConn(Conn):
    """A Conn whose reader thread can be held: while `pause` is set, nothing more is read
    (the socket's receive buffer fills and the peer's sends block, as with a relay that
    does not read)."""
    pause = False

    def _need(self, n):
        while self.pause:
            time.sleep(0.01)
        return super()._need(n)


def main():
    port, token, agents = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    c = relay_for_pistisd(port, token, PausedConn)
    if not c:
        return
    pid = pid_of_peer(c.sport, c.cport)

    def send(o):
        h, p = ws_frame(1, json.dumps(o))
        return c.send(h + p)

    send({"id": "hello", "ok": True})
    n = 0
    for a in agents:
        for i in range(32):
            n += 1
            send({"id": "s%d" % n, "op": "exec.start", "agent": a, "argv": ["/bin/sleep", "60"],
                  "tag": ("t%d-" % n).ljust(64, "x")})
    started = 0
    for i in range(1, n + 1):
        o = c.wait_json(lambda m, i=i: m.get("id") == "s%d" % i, 30)
        started += bool(o and o.get("ok"))
    print("started=%d" % started)
    send({"id": "st", "op": "sandbox.status"})
    o = c.wait_json(lambda m: m.get("id") == "st", 10)
    print("status_bytes=%d" % len(json.dumps(o)))
    # From here on nothing is read (the reader thread is held before its next read).
    c.pause = True
    reqs = b"".join(b"".join(ws_frame(1, json.dumps({"id": "q%d" % i, "op": "sandbox.status"})))
                    for i in range(6000))
    sent, peak, end = 0, 0, time.time() + 10
    while time.time() < end:
        if sent < len(reqs):
            try:
                sent += c.s.send(reqs[sent:sent + 65536], socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
        peak = max(peak, rss_kb(pid) if pid else -1)
        time.sleep(0.02)
    print("sent_all=%s" % ("yes" if sent == len(reqs) else "no (%d of %d)" % (sent, len(reqs))))
    print("peak_rss_mib=%d" % (peak // 1024))
    c.pause = False
    # read again for 10 s (pongs meanwhile: this relay answers no WebSocket ping, and
    # pistisd hangs up on a relay it has heard no pong from in 30 s): pistisd must have
    # read requests again, past the ~16 MiB of answers it queued before it stopped
    end = time.time() + 10
    while time.time() < end:
        h, p = ws_frame(10, b"")
        c.send(h + p)
        time.sleep(1)
    print("answered=%d" % sum(1 for m in c.json_msgs() if str(m.get("id", "")).startswith("q")))

if __name__ == "__main__":
    main()
