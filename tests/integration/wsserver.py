#!/usr/bin/env python3
"""A fake WebSocket SERVER (RFC 6455, standard library only) for tests/integration/wsrx.sh:
it attacks the WebSocket client receive path of the shipped static binaries, i.e. our
patched libwebsockets parser (scripts/patches/libwebsockets/0001: the bulk payload path),
from the server side, on loopback only.

  exec-diff PISTIS SEED COUNT    run `pistis exec` COUNT times (seeds SEED, SEED+1, ...)
                                 against a fake server-min that answers with a random
                                 payload in random protocol frames, WebSocket frames and
                                 TCP segmentations; stdout/stderr/exit code must match
  client-hostile PISTIS SEED     hostile frames to `pistis exec`, before and during a
                                 command's output
  client-cut-frame PISTIS SEED COUNT
                                 the connection closed in the middle of an output
                                 frame, the frame resent whole after the re-attach
                                 (stdout a pipe or a file): the output exact
  client-exit-values PISTIS      exec.exit with out-of-range, fractional, infinite and
                                 mistyped code/signal/last_seq: pistis's exit code
  client-ls-names PISTIS          a sandboxes.list whose names hold ESC, CSI, C1, DEL and
                                 newlines: what `pistis ls` prints
  serve-diff PORT TOKEN SEED COUNT AGENT
                                 listen on PORT for `pistisd serve --relay`; COUNT commands
                                 (cat or sha256sum, seeds SEED, SEED+1, ...) get a random
                                 payload as stdin frames in random WebSocket frames and
                                 TCP segmentations; the output must be the payload
  serve-hostile PORT TOKEN SEED  listen on PORT for `pistisd serve --relay` (token TOKEN)
                                 and send it hostile frames, one connection per case

Splits: the byte stream is cut at random points; a "synchronised" cut waits until the
client has read every byte sent so far (its socket's receive queue is
empty and it has received every byte we sent, asked through sock_diag) before the next byte goes out, so that split is
guaranteed to reach the parser as two reads. Prints `name=value` lines."""
import base64, hashlib, json, os, random, socket, struct, subprocess, sys, tempfile
import threading, time

from wsfake import frame_head

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTO_FRAME_HEADER = 16
PROTO_MAX_FRAME_PAYLOAD = 256 * 1024
PISTIS_CAP = PROTO_FRAME_HEADER + PROTO_MAX_FRAME_PAYLOAD  # pistis's rx_buffer_size
SERVE_CAP = 64 * 1024                                       # pistisd: pt_serv_buf_size


def out(k, v):
    print("%s=%s" % (k, v), flush=True)


def note(s):
    print("# " + s, flush=True)


def pframe(stream, flags, cmd, seq, data=b""):
    return struct.pack(">BBHIQ", 1, stream, flags, cmd, seq) + data


def xor(data, mask):
    n = len(data)
    if not n:
        return b""
    m = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")


def ws_header(op, n, fin=True, rsv=0, mask=None, form=None, length=None):
    """A frame header; `length` lies about the length (hostile), `form` 7|16|64 forces
    the encoding (default: the minimal one)."""
    ln = n if length is None else length
    if form is None:
        form = 7 if ln < 126 else 16 if ln < 65536 else 64
    b0 = (0x80 if fin else 0) | (rsv << 4) | op
    m = 0x80 if mask is not None else 0
    if form == 7:
        h = bytes([b0, m | ln])
    elif form == 16:
        h = bytes([b0, m | 126]) + struct.pack(">H", ln)
    else:
        h = bytes([b0, m | 127]) + struct.pack(">Q", ln)
    return h + (mask or b"")


def ws_frame(op, payload=b"", fin=True, rsv=0, mask=None, form=None):
    if isinstance(payload, str):
        payload = payload.encode()
    h = ws_header(op, len(payload), fin, rsv, mask, form)
    return h, (xor(payload, mask) if mask else payload)


# --- the TCP side: find the peer's socket, wait until it has read everything ----------------

NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY = 4, 20
_nl = None


def diag(lport, rport):
    """(receive queue, inode, bytes received) of the loopback TCP socket lport->rport, or
    None: one exact sock_diag lookup (reading /proc/net/tcp walks the whole table: ms, not
    us). The receive queue is what the socket's process has not read yet; bytes received
    (tcp_info) all that reached it."""
    global _nl
    if _nl is None:
        _nl = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    lo = socket.inet_aton("127.0.0.1") + bytes(12)
    req = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 1 << (2 - 1), 0,
                      0xFFFFFFFF)  # idiag_ext: INET_DIAG_INFO
    req += struct.pack(">HH", lport, rport) + lo + lo + struct.pack("=III", 0, 0xFFFFFFFF,
                                                                   0xFFFFFFFF)
    _nl.send(struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, 1, 1, 0) + req)
    r = _nl.recv(65536)
    ln, typ = struct.unpack_from("=IH", r)
    if typ != SOCK_DIAG_BY_FAMILY:
        return None  # NLMSG_ERROR: no such socket
    rq, _, _, ino = struct.unpack_from("=IIII", r, 16 + 4 + 48 + 4)
    got, o = None, 16 + 72
    while o + 4 <= ln:
        alen, atype = struct.unpack_from("=HH", r, o)
        if alen < 4:
            break
        if atype == 2 and alen >= 4 + 136:  # INET_DIAG_INFO: tcpi_bytes_received
            got = struct.unpack_from("=Q", r, o + 4 + 128)[0]
        o += (alen + 3) & ~3
    return rq, ino, got


def pid_of_peer(sport, cport):
    d = diag(cport, sport)
    if not d:
        return None
    want = "socket:[%d]" % d[1]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == want:
                    return int(pid)
        except OSError:
            continue
    return None


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return int([l for l in f if l.startswith("VmRSS")][0].split()[1])
    except (OSError, IndexError):
        return -1


def shut(c):
    try:
        c.s.shutdown(socket.SHUT_WR)
    except OSError:  # the peer was quicker
        pass


class Conn:
    """One accepted client connection: the handshake, a reader thread for what the client
    sends (masked frames; pings are not answered), and paced writes."""

    def __init__(self, lsock, proto, token, timeout=15, answer=True):
        lsock.settimeout(timeout)
        self.s, addr = lsock.accept()
        self.s.settimeout(None)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sport = self.s.getsockname()[1]
        self.cport = addr[1]
        self.msgs = []        # (opcode, payload) of whole messages from the client
        self.cv = threading.Condition()
        self.eof = False
        self.closed_by_client = False
        self.syncs = 0
        self.sync_timeouts = 0
        head = b""
        self.s.settimeout(timeout)
        while b"\r\n\r\n" not in head:
            c = self.s.recv(4096)
            if not c:
                raise ConnectionError("closed during the handshake")
            head += c
        head, rest = head.split(b"\r\n\r\n", 1)
        self.s.settimeout(None)
        lines = head.decode("latin-1").split("\r\n")
        self.request_line = lines[0]
        self.headers = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.auth_ok = self.headers.get("authorization") == "Bearer " + token
        self.proto_ok = self.headers.get("sec-websocket-protocol") == proto
        acc = base64.b64encode(hashlib.sha1(self.headers.get("sec-websocket-key", "").encode()
                                            + GUID).digest()).decode()
        self.response = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n"
                         "Sec-WebSocket-Protocol: %s\r\n\r\n" % (acc, proto)).encode()
        self._buf = rest
        self.t = threading.Thread(target=self._reader, daemon=True)
        self.t.start()
        self.sent = 0
        if answer:
            self.send(self.response)

    # reader -----------------------------------------------------------------------------
    def _need(self, n):
        while len(self._buf) < n:
            c = self.s.recv(1 << 16)
            if not c:
                raise EOFError
            self._buf += c
        o, self._buf = self._buf[:n], self._buf[n:]
        return o

    def _reader(self):
        data, op0 = b"", 0
        try:
            while True:
                b0, n, mask = frame_head(self._need)
                p = self._need(n)
                if mask:
                    p = xor(p, mask)
                op = b0 & 0x0F
                if op == 8:
                    with self.cv:
                        self.closed_by_client = True
                        self.msgs.append((8, p))
                        self.cv.notify_all()
                    continue
                if op == 10:
                    with self.cv:
                        self.msgs.append((10, p))
                        self.cv.notify_all()
                    continue
                if op == 9:
                    continue
                if op:
                    op0 = op
                data += p
                if b0 & 0x80:
                    with self.cv:
                        self._message(op0, data)
                        self.cv.notify_all()
                    data = b""
        except (EOFError, OSError):
            pass
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def _message(self, op, data):
        """A whole data message from the client, with self.cv held: kept in msgs."""
        self.msgs.append((op, data))

    def wait_msg(self, pred, timeout=10):
        """The first client message (opcode, payload) that pred accepts; None on timeout/EOF."""
        end = time.time() + timeout
        seen = 0
        with self.cv:
            while True:
                for m in self.msgs[seen:]:
                    if pred(m):
                        return m
                seen = len(self.msgs)
                left = end - time.time()
                if self.eof or left <= 0:
                    return None
                self.cv.wait(left)

    def json_msgs(self):
        with self.cv:
            ms = list(self.msgs)
        res = []
        for op, p in ms:
            if op == 1:
                try:
                    res.append(json.loads(p))
                except ValueError:
                    pass
        return res

    def wait_json(self, pred, timeout=10):
        def f(m):
            if m[0] != 1:
                return False
            try:
                return pred(json.loads(m[1]))
            except ValueError:
                return False
        m = self.wait_msg(f, timeout)
        return json.loads(m[1]) if m else None

    def probe(self, timeout=8):
        """After what was sent: 'kept' if the client answers a ping sent now (it went on
        parsing), 'dropped' if it closes the connection instead, None if neither."""
        end = time.time() + timeout
        while time.time() < end:
            # again after a while: lws drops a ping while its pong to an earlier one is
            # still unsent
            tag = os.urandom(8).hex().encode()
            h, p = ws_frame(9, tag)
            self.send(h + p)
            if self.wait_msg(lambda m: m[0] == 10 and m[1] == tag, 1):
                return "kept"
            if self.wait_eof(0.01):
                return "dropped"
        return None

    def wait_eof(self, timeout=10):
        end = time.time() + timeout
        with self.cv:
            while not self.eof and time.time() < end:
                self.cv.wait(end - time.time())
            return self.eof

    # writer -----------------------------------------------------------------------------
    def sync(self, timeout=5.0):
        """Wait until the peer has read every byte we sent."""
        self.syncs += 1
        end = time.time() + timeout
        while time.time() < end:
            d = diag(self.cport, self.sport)
            if d is None:  # gone
                return False
            if d[0] == 0 and d[2] == self.sent:
                return True
            time.sleep(0.00005)
        self.sync_timeouts += 1
        return False

    def send(self, data):
        try:
            self.s.sendall(data)
            self.sent += len(data)
            return True
        except OSError:
            return False

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


# --- segmentation ----------------------------------------------------------------------------

class Plan:
    """A byte stream plus cut points: {offset: synchronised?}."""

    def __init__(self, rng, cap, reads=0):
        self.rng = rng
        self.cap = cap
        self.reads = reads        # the client's socket read size: cuts at its multiples too
        self.parts = []
        self.len = 0
        self.cuts = {}
        self.stats = {"frames": 0, "fragments": 0, "control": 0, "hdr_splits": 0,
                      "sync_cuts": 0, "cuts": 0, "byte_runs": 0, "cap_splits": 0}
        self.hdr_cov = set()      # (header length, offset of the split inside it)
        self.rot = {}             # per header length: next in-header split to use
        self.form_cov = set()     # the length forms used: 7, 16, 64

    def cut(self, off, sync):
        if 0 < off < self.len + 1:
            self.cuts[off] = self.cuts.get(off, False) or sync

    def raw(self, data):
        self.parts.append(data)
        self.len += len(data)

    def frame(self, hdr, payload, control=False):
        rng, o = self.rng, self.len
        h, n = len(hdr), len(payload)
        self.parts.append(hdr)
        self.parts.append(payload)
        self.len += h + n
        self.stats["frames"] += 1
        if control:
            self.stats["control"] += 1
        self.form_cov.add({2: 7, 4: 16, 10: 64, 6: 7, 8: 16, 14: 64}[h])
        # a split inside the header: every offset of every header length in turn
        if rng.random() < 0.6:
            k = self.rot.get(h, rng.randrange(1, h))
            self.rot[h] = k % (h - 1) + 1
            self.cut(o + k, True)
            self.hdr_cov.add((h, k))
            self.stats["hdr_splits"] += 1
        r = rng.random()
        if r < 0.2:
            self.cut(o, True)                 # the frame starts a read
        elif r < 0.4:
            self.cut(o + h, True)             # the payload starts a read
        if not n:
            return
        # 1-byte writes at the start or the end of the payload
        if rng.random() < 0.12:
            self.stats["byte_runs"] += 1
            k = rng.randrange(1, 24)
            base = o + h if rng.random() < 0.5 else o + h + max(0, n - k)
            for j in range(k + 1):
                self.cut(base + j, True)
        # around the receive buffer's size (where lws hands a piece to the callback)
        if n > self.cap and rng.random() < 0.7:
            self.stats["cap_splits"] += 1
            self.cut(o + h + self.cap + rng.choice((-1, 0, 1)), True)
        # around multiples of the client's read size inside a long payload (serve-diff only,
        # so exec-diff's seeds keep their streams)
        if self.reads and n > self.reads and rng.random() < 0.6:
            self.stats["read_splits"] = self.stats.get("read_splits", 0) + 1
            k = rng.randrange(1, n // self.reads + 1)
            self.cut(o + h + k * self.reads + rng.choice((-1, 0, 1)), True)
        # the last payload byte alone, or all but one (where the bulk path stops)
        if rng.random() < 0.2:
            self.cut(o + h + n - 1, True)
        if rng.random() < 0.1 and n > 1:
            self.cut(o + h + 1, True)
        # plain cuts (not synchronised: TCP and the reader decide what coalesces)
        for _ in range(rng.randrange(0, 4)):
            self.cut(o + h + rng.randrange(0, n), False)

    def chunks(self):
        data = b"".join(self.parts)
        pos = 0
        cuts = sorted(self.cuts.items())
        # plus random-size writes in between
        extra = []
        p = 0
        while p < len(data):
            p += self.rng.choice((1, 7, 100, 1400, 4096, 65536, 200000, 1 << 20))
            extra.append((p, False))
        allc = {}
        for o, s in cuts + extra:
            if 0 < o < len(data):
                allc[o] = allc.get(o, False) or s
        for o in sorted(allc):
            yield data[pos:o], allc[o]
            if allc[o]:
                self.stats["sync_cuts"] += 1
            self.stats["cuts"] += 1
            pos = o
        yield data[pos:], False


def message(plan, rng, op, payload, ctl_pool, last=False):
    """One message as 1..k fragments, control frames between them."""
    n = len(payload)
    if rng.random() < 0.35 and n:
        k = rng.randrange(2, 6)
        pts = sorted(rng.randrange(0, n + 1) for _ in range(k - 1))
    else:
        pts = []
    bounds = [0] + pts + [n]
    for i in range(len(bounds) - 1):
        piece = payload[bounds[i]:bounds[i + 1]]
        fin = i == len(bounds) - 2
        plan.frame(*ws_frame(op if i == 0 else 0, piece, fin=fin))
        if len(bounds) > 2:
            plan.stats["fragments"] += 1
        if not fin and rng.random() < 0.5:
            control(plan, rng, ctl_pool)
    if not last and rng.random() < 0.1:  # pistis may be gone after the last one
        control(plan, rng, ctl_pool)


def control(plan, rng, pool):
    op = rng.choice((9, 9, 10))
    n = rng.choice((0, 1, 2, 3, 4, 5, 17, 124, 125))
    plan.frame(*ws_frame(op, bytes(rng.getrandbits(8) for _ in range(n))), control=True)
    pool[0] += 1


def rand_bytes(rng, n):
    return rng.getrandbits(8 * n).to_bytes(n, "little") if n else b""


def piece_size(rng, edges, p_any):
    """A payload size: one of the edges (30 %), any up to the frame maximum (up to p_any),
    or a small one."""
    r = rng.random()
    if r < 0.3:
        return rng.choice(edges)
    if r < p_any:
        return rng.randrange(0, PROTO_MAX_FRAME_PAYLOAD + 1)
    return rng.randrange(0, 4096)


def exec_stream(rng, cmd, reqid, stdout, stderr, code, plan, noise=True):
    """exec.started, the output as protocol frames (random sizes), noise, exec.exit."""
    ctl = [0]
    message(plan, rng, 1, json.dumps({"id": reqid, "ok": True, "event": "exec.started",
                                      "cmd": cmd, "pid": 4242}), ctl)
    seq, oo, eo = 0, 0, 0
    sizes = (0, 1, 2, 15, 16, 17, 109, 110, 111, 125 - 16, 126 - 16, 127 - 16,
             65535 - 16, 65536 - 16, 65537 - 16, PROTO_MAX_FRAME_PAYLOAD - 1,
             PROTO_MAX_FRAME_PAYLOAD)
    while oo < len(stdout) or eo < len(stderr):
        n = piece_size(rng, sizes, 0.7)
        if eo < len(stderr) and (oo >= len(stdout) or rng.random() < 0.1):
            s, d = 2, stderr[eo:eo + n]
            eo += len(d)
        else:
            s, d = 1, stdout[oo:oo + n]
            oo += len(d)
        seq += 1
        message(plan, rng, 2, pframe(s, 0, cmd, seq, d), ctl)
        if noise and rng.random() < 0.04:
            # a text message pistis ignores; sometimes over the receive buffer (a piece
            # at a time to the callback) and up to the 1 MiB message limit
            pad = rng.choice((0, 10, 200000, 300000, 1000000))
            o = {"event": "noise", "id": "zz"}
            for i in range(pad // 250000 + 1):  # a string is at most 256 KiB
                o["pad%d" % i] = "n" * min(250000, pad - 250000 * i)
            message(plan, rng, 1, json.dumps(o), ctl)
    for s in (1, 2):
        seq += 1
        message(plan, rng, 2, pframe(s, 1, cmd, seq), ctl)
    message(plan, rng, 1, json.dumps({"event": "exec.exit", "id": reqid, "cmd": cmd,
                                      "end": "exited", "code": code, "last_seq": seq}), ctl, last=True)
    return seq, ctl[0]


def listen(port=0):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4)
    return ls


def relay_for_pistisd(port, token, conn=None):
    """A relay of a test's own on 127.0.0.1:port: the first `pistisd serve` that dials in
    with token, once it has sent its hello (a Conn, or conn's class), or None (and
    "hello=none" printed)."""
    c = (conn or Conn)(listen(port), "pistis.v1", token, timeout=30)
    if not c.wait_json(lambda o: o.get("op") == "hello", 30):
        print("hello=none")
        return None
    return c


def run_pistis(pistis, port, token, tmp, tag, pipes=False):
    """pistis exec with stdout and stderr into tmp/tag.out and .err: the files themselves,
    or (pipes) pipes copied into them by two threads, so that pistis splices output frames
    (scripts/patches/libwebsockets/0006); wait_copied(p) after p exits."""
    o = open(os.path.join(tmp, tag + ".out"), "wb")
    e = open(os.path.join(tmp, tag + ".err"), "wb")
    env = dict(os.environ, PISTIS_TOKEN=token)
    env.pop("PISTIS_SANDBOX", None)
    p = subprocess.Popen([pistis, "--url", "ws://127.0.0.1:%d/v1/ws" % port, "exec",
                          "--agent", "alice", "--", "payload"],
                         stdout=subprocess.PIPE if pipes else o,
                         stderr=subprocess.PIPE if pipes else e,
                         stdin=subprocess.DEVNULL, env=env)
    p.copiers = []
    if pipes:
        def copy(src, dst):
            while True:
                b = src.read1(65536)
                if not b:
                    break
                dst.write(b)
            dst.close()
        for src, dst in ((p.stdout, o), (p.stderr, e)):
            t = threading.Thread(target=copy, args=(src, dst), daemon=True)
            t.start()
            p.copiers.append(t)
    else:
        o.close()
        e.close()
    return p


def wait_copied(p):
    for t in p.copiers:
        t.join(30)


def read(tmp, name):
    with open(os.path.join(tmp, name), "rb") as f:
        return f.read()


def describe_rc(rc):
    return "signal %d" % -rc if rc is not None and rc < 0 else str(rc)


def case_failed(why, e, p):
    """An exception in a pistis case: say it, and stop pistis if it still runs."""
    why.append("%s: %s" % (type(e).__name__, e))
    if p.poll() is None:
        p.kill()
    p.wait()


# --- exec-diff ---------------------------------------------------------------------------

def one_exec(pistis, seed, tmp, totals):
    rng = random.Random(seed)
    token = "t%016x" % rng.getrandbits(64)
    size = rng.choice((1, 2, 3, 4, 6)) << 20
    size += rng.randrange(0, 70000)
    stdout = rand_bytes(rng, size)
    stderr = rand_bytes(rng, rng.choice((0, 5, 70000, 300000)))
    code = rng.randrange(0, 120)
    cmd = rng.randrange(1, 1 << 31)
    ls = listen()
    port = ls.getsockname()[1]
    pipes = seed % 2 == 1  # odd seeds: output into pipes, spliced
    totals["pipes"] = totals.get("pipes", 0) + pipes
    p = run_pistis(pistis, port, token, tmp, "s%d" % seed, pipes)
    why = []
    c = None
    try:
        merged = rng.random() < 0.5   # the 101 and the first frames in one stream
        c = Conn(ls, "pistis-client.v1", token, answer=not merged)
        if not c.auth_ok:
            why.append("no/wrong Authorization header")
        plan = Plan(rng, PISTIS_CAP)
        if merged:
            plan.raw(c.response)
            plan.cut(len(c.response) - rng.randrange(0, 3), True)
        else:
            req = c.wait_json(lambda o: o.get("op") == "exec.start")
            if not req:
                why.append("no exec.start request")
        last, ctl = exec_stream(rng, cmd, "r1", stdout, stderr, code, plan)
        for data, sync in plan.chunks():
            if data and not c.send(data):
                why.append("send failed (client closed early)")
                break
            if sync:
                c.sync()
        if merged:
            req = c.wait_json(lambda o: o.get("op") == "exec.start", 5)
            if not req:
                why.append("no exec.start request")
        try:
            rc = p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            why.append("pistis did not exit in 60 s")
        wait_copied(p)
        c.wait_eof(5)  # the reader thread has everything pistis sent
        acks = [o.get("seq") for o in c.json_msgs() if o.get("op") == "exec.ack"]
        if not acks or acks[-1] != last:
            why.append("last ack %s, want %d" % (acks[-1:] or None, last))
        if rc != code:
            why.append("exit %s, want %d" % (describe_rc(rc), code))
        got_o, got_e = read(tmp, "s%d.out" % seed), read(tmp, "s%d.err" % seed)
        if got_o != stdout:
            i = next((i for i in range(min(len(got_o), len(stdout)))
                      if got_o[i] != stdout[i]), min(len(got_o), len(stdout)))
            why.append("stdout differs: %d bytes, want %d, first difference at %d"
                       % (len(got_o), len(stdout), i))
        if got_e != stderr:
            why.append("stderr differs: %d bytes, want %d (%r)" % (len(got_e), len(stderr),
                                                                   got_e[:200]))
        if c.sync_timeouts:
            why.append("%d synchronised cuts timed out" % c.sync_timeouts)
        for k, v in plan.stats.items():
            totals[k] = totals.get(k, 0) + v
        totals["bytes"] = totals.get("bytes", 0) + plan.len
        totals.setdefault("hdr_cov", set()).update(plan.hdr_cov)
        totals.setdefault("form_cov", set()).update(plan.form_cov)
        totals["merged"] = totals.get("merged", 0) + merged
    except Exception as e:  # reported with the seed
        case_failed(why, e, p)
    finally:
        if c:
            c.close()
        ls.close()
    for f in ("out", "err"):
        try:
            os.unlink(os.path.join(tmp, "s%d.%s" % (seed, f)))
        except OSError:
            pass
    return why


def exec_diff(pistis, seed, count):
    tmp = tempfile.mkdtemp(prefix="pistis-wsrx.")
    totals, failed = {}, []
    t0 = time.time()
    for s in range(seed, seed + count):
        why = one_exec(pistis, s, tmp, totals)
        if why:
            failed.append(s)
            note("FAILED seed %d (rerun: PISTIS_WSRX_SEED=%d PISTIS_WSRX_SEEDS=1): %s"
                 % (s, s, "; ".join(why)))
    os.rmdir(tmp)
    out("seeds", count)
    out("seeds_failed", len(failed))
    out("failed_seeds", ",".join(map(str, failed)) or "none")
    for k in ("bytes", "frames", "fragments", "control", "hdr_splits", "sync_cuts", "cuts",
              "byte_runs", "cap_splits", "merged"):
        out(k, totals.get(k, 0))
    cov = totals.get("hdr_cov", set())
    want = {(h, k) for h in (2, 4, 10) for k in range(1, h)}
    out("hdr_split_offsets", "%d/%d" % (len(cov & want), len(want)))
    out("length_forms", ",".join(str(f) for f in sorted(totals.get("form_cov", set()))))
    out("pipes", totals.get("pipes", 0))
    out("seconds", "%.1f" % (time.time() - t0))


# --- hostile frames --------------------------------------------------------------------------

def hostile_cases(rng, cap):
    """name -> (bytes that must make the client fail the connection, or None when the
    client may keep it, expect)."""
    def F(*a, **k):
        h, p = ws_frame(*a, **k)
        return h + p
    big = 1 << 40
    cases = [
        ("masked_binary", lambda cmd, seq: F(2, pframe(1, 0, cmd, seq, b"MASKED\n"),
                                             mask=os.urandom(3) + b"\x01"), "drop"),
        ("masked_text", lambda cmd, seq: F(1, '{"event":"noise"}', mask=b"\x11\x22\x33\x44"),
         "drop"),
        ("rsv1", lambda cmd, seq: F(2, pframe(1, 0, cmd, seq, b"RSV1\n"), rsv=4), "drop"),
        ("rsv2", lambda cmd, seq: F(2, pframe(1, 0, cmd, seq, b"RSV2\n"), rsv=2), "drop"),
        ("rsv3", lambda cmd, seq: F(2, pframe(1, 0, cmd, seq, b"RSV3\n"), rsv=1), "drop"),
        ("rsv_on_ping", lambda cmd, seq: F(9, b"p", rsv=4), "drop"),
    ]
    for op in (3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF):
        cases.append(("opcode_%x" % op, (lambda o: lambda cmd, seq: F(o, b"abc"))(op), "drop"))
    cases += [
        ("len64_top_bit", lambda cmd, seq: bytes([0x82, 127]) +
         struct.pack(">Q", (1 << 63) | 20) + pframe(1, 0, cmd, seq, b"TOP\n"), "drop"),
        ("len64_all_ones", lambda cmd, seq: bytes([0x82, 127]) + b"\xff" * 8 + b"x" * 64,
         "drop"),
        ("len_2e40_then_close", lambda cmd, seq: bytes([0x82, 127]) + struct.pack(">Q", big)
         + pframe(1, 0, cmd, seq, b"HUGE") + b"h" * (3 << 20), "drop"),
        ("ping_126", lambda cmd, seq: F(9, b"p" * 126, form=16), "drop"),
        ("ping_len16_small", lambda cmd, seq: F(9, b"p" * 5, form=16), "drop"),
        ("close_len64", lambda cmd, seq: F(8, b"\x03\xe8", form=64), "drop"),
        ("ping_fragmented", lambda cmd, seq: F(9, b"p", fin=False) + F(0, b"q"), "drop"),
        ("pong_fragmented", lambda cmd, seq: F(10, b"p", fin=False), "drop"),
        ("close_fragmented", lambda cmd, seq: F(8, b"\x03\xe8", fin=False), "drop"),
        ("continuation_without_start", lambda cmd, seq: F(0, b"zz"), "drop"),
        ("new_message_while_fragmented", lambda cmd, seq: F(2, b"ab", fin=False) +
         F(2, pframe(1, 0, cmd, seq, b"OWED\n")), "drop"),
        ("truncated_header_then_close", lambda cmd, seq: bytes([0x82, 127, 0, 0]), "drop"),
        ("truncated_payload_then_close", lambda cmd, seq:
         F(2, pframe(1, 0, cmd, seq, b"T" * 1000))[:700], "drop"),
        ("close_then_garbage", lambda cmd, seq: F(8, b"\x03\xe8bye") +
         bytes(rng.getrandbits(8) for _ in range(5000)), "drop"),
        ("close_1byte_then_frame", lambda cmd, seq: F(8, b"\x03") +
         F(2, pframe(1, 0, cmd, seq, b"AFTERCLOSE\n")), "drop"),
        ("close_bad_code_then_frame", lambda cmd, seq: F(8, b"\x00\x05") +
         F(2, pframe(1, 0, cmd, seq, b"AFTERCLOSE\n")), "drop"),
        ("garbage", lambda cmd, seq: bytes(rng.getrandbits(8) | 0x30 for _ in range(4000)),
         "drop"),
        # not a reason to drop: the client may keep the connection, but must not crash
        ("text_invalid_utf8", lambda cmd, seq: F(1, b'{"event":"noise","x":"\xff\xfe\xc0\xaf"}'),
         "any"),
        ("text_invalid_utf8_fragmented", lambda cmd, seq: F(1, b'{"event":"x","y":"\xe2', fin=False)
         + F(9, b"") + F(0, b'\x28\xa1"}'), "any"),
    ]
    return cases


def client_cases(rng):
    """hostile_cases, and what only a client drops: a text message over 1 MiB (pistisd
    answers one too_large and reads on)."""
    return hostile_cases(rng, PISTIS_CAP) + [
        ("text_over_limit", lambda cmd, seq:
         b"".join(ws_frame(1, b'{"event":"noise","x":"' + b"a" * (1 << 20) + b'"}')), "drop"),
    ]


# What pistis must say, besides "Connection to the server failed", when a case drops it
# before the command started (it said only that: a message over its limit read as a
# network failure).
HOSTILE_WHY = {
    "text_over_limit": "the server sent a text message over 1048576 bytes (the protocol's "
                       "limit)",
}


def client_hostile(pistis, seed):
    """Each case twice: before exec.started (pistis must fail with its relay error, exit
    125) and in the middle of the output (pistis must drop the connection, redial and
    re-attach after the last frame it holds; the rest then arrives and the output is
    complete)."""
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="pistis-wsrx-h.")
    token = "t%016x" % rng.getrandbits(64)
    res, res_state = {}, {}
    for name, make, expect in client_cases(rng):
        # -- before the command started
        ls = listen()
        p = run_pistis(pistis, ls.getsockname()[1], token, tmp, "h")
        why = []
        try:
            c = Conn(ls, "pistis-client.v1", token)
            c.wait_json(lambda o: o.get("op") == "exec.start")
            c.send(make(7, 1))
            st = judge(c, name, expect, why)
            code = rng.randrange(0, 100)
            if st == "kept":  # it may go on: then it must still work
                h, pl = ws_frame(1, json.dumps({"id": "r1", "ok": True, "event": "exec.started",
                                                "cmd": 7}))
                h2, pl2 = ws_frame(1, json.dumps({"event": "exec.exit", "id": "r1", "cmd": 7,
                                                  "end": "exited", "code": code,
                                                  "last_seq": 0}))
                c.send(h + pl + h2 + pl2)
            try:
                rc = p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
                why.append("still running 15 s later")
            err = read(tmp, "h.err").decode(errors="replace")
            if rc is not None and rc < 0:
                why.append("killed by signal %d" % -rc)
            elif st == "dropped" and (rc != 125 or "Connection to the server failed" not in err
                                      or HOSTILE_WHY.get(name, "") not in err):
                why.append("exit %s, stderr %r" % (rc, err[-300:]))
            elif st == "kept" and rc != code:
                why.append("exit %s, want %d, stderr %r" % (rc, code, err[-300:]))
            res_state[name] = st
            c.close()
        except Exception as e:
            case_failed(why, e, p)
        ls.close()
        res[name + ".pre"] = why
        # -- in the middle of the output
        res[name + ".mid"] = hostile_mid(pistis, rng, token, tmp, name, make, expect)
    bad = {k: v for k, v in res.items() if v}
    for k, v in sorted(bad.items()):
        note("FAILED %s (seed %d): %s" % (k, seed, "; ".join(v)))
    out("cases", len(res))
    out("cases_failed", len(bad))
    out("failed_cases", ",".join(sorted(bad)) or "none")
    out("kept", ",".join(sorted(k for k, v in res_state.items() if v == "kept")) or "none")
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)


# Raw JSON text, not json.dumps: 1e999 (an infinity to strtod), -1 and 2.5 are valid JSON
# numbers that a cast to an integer would turn into anything.
EXIT_VALUES = [
    ('"code": 3', 3), ('"code": 0', 0), ('"signal": 9', 137), ('"signal": 0, "code": 4', 4),
    ('"code": 1e999', 125), ('"code": -1e999', 125), ('"code": -1', 125),
    ('"code": 2.5', 125), ('"code": 256', 125), ('"code": 4294967296', 125),
    ('"code": "3"', 125), ('"signal": 1e999', 125), ('"signal": 65', 125),
    ('"signal": -9', 125),
]
# Each with the last_seq pistisd always sends (0: no output frame came), so that the code
# or signal is what decides; then last_seq itself: missing, null, not a number, another.
EXIT_VALUES = [(f + ', "last_seq": 0', want) for f, want in EXIT_VALUES] + [
    ('"code": 1, "last_seq": 1e999', 125), ('"code": 1, "last_seq": "0"', 125),
    ('"code": 1, "last_seq": null', 125), ('"code": 1, "last_seq": 1', 125),
    ('"code": 0', 125), ('"code": 2, "last_seq": 0', 2),
]


def client_ls_names(pistis):
    """`pistis ls` against a server whose sandbox names carry terminal controls: its text
    output must be printable ASCII plus newlines (printed as hex for the test)."""
    ls = listen()
    env = dict(os.environ, PISTIS_TOKEN="tx")
    env.pop("PISTIS_SANDBOX", None)
    p = subprocess.Popen([pistis, "--url", "ws://127.0.0.1:%d/v1/ws" % ls.getsockname()[1],
                          "ls"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL, env=env)
    c = Conn(ls, "pistis-client.v1", "tx")
    o = c.wait_json(lambda o: o.get("op") == "sandboxes.list")
    names = ["ok", "a\x1b]0;pwned\x07b", "c\x1b[2Jd", "e\nf  connected", "g\u009bh",
             "i\x7fj"]
    body = json.dumps({"id": o.get("id"), "ok": True,
                       "sandboxes": [{"name": n, "connected": False} for n in names]})
    h, pl = ws_frame(1, body.encode())
    c.send(h + pl)
    try:
        got, _ = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        got, _ = p.communicate()
    c.close()
    ls.close()
    out("ls_rc", p.returncode)
    out("ls_lines", got.count(b"\n"))
    out("ls_first", got.split(b"\n")[0].decode("ascii", "replace"))
    out("ls_clean", "yes" if all(0x20 <= b < 0x7f or b == 0x0a for b in got) else "no")


def client_exit_values(pistis):
    """exec.exit from the server with each value of EXIT_VALUES: pistis's exit code must
    be the one listed (a shell's 128+signal, the code, or 125 for anything out of range)."""
    tmp = tempfile.mkdtemp(prefix="pistis-wsrx-x.")
    token = "tx"
    bad = []
    for i, (fields, want) in enumerate(EXIT_VALUES):
        ls = listen()
        p = run_pistis(pistis, ls.getsockname()[1], token, tmp, "x")
        try:
            c = Conn(ls, "pistis-client.v1", token)
            c.wait_json(lambda o: o.get("op") == "exec.start")
            msgs = ['{"id": "r1", "ok": true, "event": "exec.started", "cmd": 7,'
                    ' "stdin_window": 1e999}',
                    '{"event": "exec.exit", "id": "r1", "cmd": 7, "end": "exited", %s}'
                    % fields]
            for m in msgs:
                h, pl = ws_frame(1, m.encode())
                c.send(h + pl)
            try:
                rc = p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "still running 10 s later"
            if rc != want:
                bad.append("%s: exit %s, want %d" % (fields, rc, want))
            c.close()
        except Exception as e:
            bad.append("%s: %s: %s" % (fields, type(e).__name__, e))
            if p.poll() is None:
                p.kill()
            p.wait()
        ls.close()
    for b in bad:
        note("FAILED exit value %s" % b)
    out("exit_cases", len(EXIT_VALUES))
    out("exit_failed", len(bad))
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)


def judge(c, name, expect, why):
    """After a hostile case went out on c: close our side too for a *_then_close case, then
    see whether the peer kept the connection (answers a ping) or dropped it; note in why
    what was wrong. Returns "kept", "dropped" or None."""
    if name.endswith("_then_close"):
        shut(c)
    st = c.probe()
    if st is None:
        why.append("neither answered a ping nor closed")
    if expect == "drop" and st != "dropped":
        why.append("the connection was kept")
    return st


def hostile_mid(pistis, rng, token, tmp, name, make, expect):
    ls = listen()
    p = run_pistis(pistis, ls.getsockname()[1], token, tmp, "m", pipes=rng.random() < 0.5)
    why = []
    cmd, code = 77, rng.randrange(0, 100)
    first = rand_bytes(rng, rng.randrange(1, 300000))
    rest = rand_bytes(rng, rng.randrange(1, 300000))

    def frames(data, seq0):
        b, seq, o = b"", seq0, 0
        while o < len(data):
            n = rng.randrange(1, 70000)
            seq += 1
            h, pl = ws_frame(2, pframe(1, 0, cmd, seq, data[o:o + n]))
            b += h + pl
            o += n
        return b, seq
    try:
        c = Conn(ls, "pistis-client.v1", token)
        c.wait_json(lambda o: o.get("op") == "exec.start")
        h, pl = ws_frame(1, json.dumps({"id": "r1", "ok": True, "event": "exec.started",
                                        "cmd": cmd}))
        b, seq = frames(first, 0)
        c.send(h + pl + b)
        c.sync()
        c.send(make(cmd, seq + 1))
        st = judge(c, name, expect, why)
        dropped = st == "dropped"
        if dropped:
            c.close()
            c = Conn(ls, "pistis-client.v1", token)
            att = c.wait_json(lambda o: o.get("op") == "exec.attach")
            if not att or att.get("cmd") != cmd:
                why.append("no exec.attach after the redial: %r" % att)
                raise RuntimeError("stop")
            after = att.get("after")
            if after != seq:
                why.append("re-attached after %s, want %d" % (after, seq))
            h, pl = ws_frame(1, json.dumps({"id": att["id"], "ok": True,
                                            "event": "exec.attached", "cmd": cmd,
                                            "from": after, "running": True}))
            c.send(h + pl)
        b, seq = frames(rest, seq)
        h, pl = ws_frame(1, json.dumps({"event": "exec.exit", "id": "r1", "cmd": cmd,
                                        "end": "exited", "code": code, "last_seq": seq}))
        c.send(b + h + pl)
        try:
            rc = p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            why.append("still running 20 s later")
        wait_copied(p)
        if rc is not None and rc < 0:
            why.append("killed by signal %d" % -rc)
        elif rc != code:
            why.append("exit %s, want %d; stderr %r" % (rc, code,
                                                       read(tmp, "m.err")[-300:]))
        got = read(tmp, "m.out")
        if got != first + rest:
            why.append("output %d bytes, want %d%s" % (len(got), len(first) + len(rest),
                                                       " (hostile bytes in it)" if len(got) > len(first) + len(rest) else ""))
        c.close()
    except Exception as e:
        if str(e) != "stop":
            why.append("%s: %s" % (type(e).__name__, e))
    if p.poll() is None:
        p.kill()
    p.wait()
    ls.close()
    return why


def client_cut_frame(pistis, seed, count):
    """The connection closed by the server in the middle of an output frame, at a random
    place (inside the WebSocket header, the frame header or the payload), after pistis has
    read all of the frame sent so far; then the redial, exec.attach after the last whole
    frame, and the resend of that frame whole with the rest. Odd cases have stdout in a pipe
    (pistis splices the payload into a staging pipe and has part of it there when the cut
    comes: none of it may reach the output, and the resent frame must), even ones a file.
    The output must be exact."""
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="pistis-wsrx-c.")
    token = "tc"
    bad, cuts_in = [], {}
    for i in range(count):
        pipes = i % 2 == 1
        ls = listen()
        p = run_pistis(pistis, ls.getsockname()[1], token, tmp, "c", pipes)
        why = []
        cmd, code = 5, rng.randrange(0, 100)
        chunks = [rand_bytes(rng, rng.choice((1, 1000, 65536, 200000, 262144)))
                  for _ in range(rng.randrange(2, 6))]
        cut_at = rng.randrange(1, len(chunks))  # frame seq cut_at + 1 is cut
        wire = []
        for k, d in enumerate(chunks):
            h, pl = ws_frame(2, pframe(1, 0, cmd, k + 1, d))
            wire.append(h + pl)
        frame = wire[cut_at]
        off = rng.choice((1, len(frame) - len(chunks[cut_at]) - 3,
                          len(frame) - len(chunks[cut_at]),
                          rng.randrange(1, len(frame)), len(frame) - 1))
        off = max(1, min(off, len(frame) - 1))
        where = ("ws header" if off < len(frame) - len(chunks[cut_at]) - PROTO_FRAME_HEADER
                 else "frame header" if off < len(frame) - len(chunks[cut_at])
                 else "payload")
        cuts_in[where] = cuts_in.get(where, 0) + 1
        try:
            c = Conn(ls, "pistis-client.v1", token)
            c.wait_json(lambda o: o.get("op") == "exec.start")
            h, pl = ws_frame(1, json.dumps({"id": "r1", "ok": True, "event": "exec.started",
                                            "cmd": cmd}))
            # the cut frame starts a send of its own, after pistis has read all before it:
            # a read of pistis starts with it (where pipes, it is spliced from the start)
            c.send(h + pl + b"".join(wire[:cut_at]))
            c.sync()
            c.send(frame[:off])
            c.sync()
            try:  # a FIN now (close alone waits for the reader thread's recv)
                c.s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
            c = Conn(ls, "pistis-client.v1", token)
            att = c.wait_json(lambda o: o.get("op") == "exec.attach")
            if not att or att.get("after") != cut_at:
                why.append("attach %r, want after %d" % (att, cut_at))
            else:
                h, pl = ws_frame(1, json.dumps({"id": att["id"], "ok": True,
                                                "event": "exec.attached", "cmd": cmd,
                                                "from": cut_at, "running": True}))
                h2, pl2 = ws_frame(1, json.dumps({"event": "exec.exit", "id": "r1",
                                                  "cmd": cmd, "end": "exited", "code": code,
                                                  "last_seq": len(chunks)}))
                if i % 4 >= 2:  # the resent frame, too, at the start of a read
                    c.send(h + pl)
                    c.sync()
                    h, pl = b"", b""
                c.send(h + pl + b"".join(wire[cut_at:]) + h2 + pl2)
            try:
                rc = p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
            wait_copied(p)
            if rc != code:
                why.append("exit %s, want %d; stderr %r" % (describe_rc(rc), code,
                                                           read(tmp, "c.err")[-300:]))
            got, want = read(tmp, "c.out"), b"".join(chunks)
            if got != want:
                why.append("output %d bytes, want %d" % (len(got), len(want)))
            c.close()
        except Exception as e:
            case_failed(why, e, p)
        ls.close()
        if why:
            bad.append("case %d (%s, cut in the %s at %d of %d): %s"
                       % (i, "pipe" if pipes else "file", where, off, len(frame),
                          "; ".join(why)))
    for b in bad:
        note("FAILED %s" % b)
    out("cut_cases", count)
    out("cut_failed", len(bad))
    out("cut_in", ",".join("%s:%d" % kv for kv in sorted(cuts_in.items())))
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)


# --- pistisd serve -----------------------------------------------------------------------

def serve_hostile(port, token, seed):
    """pistisd dials us once per case: hello, the hostile bytes, then it must either drop
    the connection and dial again (still alive, RSS small), or keep it and still answer a
    ping."""
    rng = random.Random(seed)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4)
    res, pid, rss0, rss_max, kept = {}, None, None, 0, []

    def connect():
        c = Conn(ls, "pistis.v1", token, timeout=30)
        hello = c.wait_json(lambda o: o.get("op") == "hello")
        if not hello:
            raise RuntimeError("no hello")
        h, p = ws_frame(1, json.dumps({"id": "hello", "ok": True}))
        c.send(h + p)
        return c

    def ping(c, n):
        h, p = ws_frame(1, json.dumps({"id": "probe%d" % n, "op": "ping"}))
        c.send(h + p)
        return c.wait_json(lambda o: o.get("id") == "probe%d" % n, 5)

    def redial(c, n, after, why):
        """c closed; the connection pistisd dials next, which must answer ping n."""
        c.close()
        try:
            c = connect()
            if not ping(c, n):
                why.append("no answer to a ping after %s" % after)
        except Exception as e:
            why.append("no redial after %s: %s" % (after, e))
        return c
    c = connect()
    pid = pid_of_peer(c.sport, c.cport)
    out("serve_pid", pid or "?")
    out("auth", "ok" if c.auth_ok else "wrong")
    rss0 = rss_kb(pid) if pid else -1
    n = 0
    for name, make, expect in hostile_cases(rng, SERVE_CAP):
        why = []
        n += 1
        try:
            if not c.send(make(7, 1)):
                why.append("send failed")
            st = judge(c, name, expect, why)
            dropped = st == "dropped"
            if st == "kept":
                kept.append(name)
            if dropped:
                c.close()
                c = connect()
            if not ping(c, n):
                why.append("no answer to a ping afterwards")
            if pid and not os.path.exists("/proc/%d" % pid):
                why.append("pistisd is gone")
        except Exception as e:
            why.append("%s: %s" % (type(e).__name__, e))
            try:
                c.close()
                c = connect()
            except Exception:
                pass
        res[name] = why
    # a 2^40-byte binary message, streamed for a few seconds: pistisd drops what is over
    # its message limit without keeping it; its memory must stay small
    why = []
    h = bytes([0x82, 127]) + struct.pack(">Q", 1 << 40)
    before = len(c.json_msgs())
    c.send(h + pframe(0, 0, 1, 1))
    chunk = b"\xaa" * (1 << 20)
    sent, end = 0, time.time() + 4
    while time.time() < end:
        if not c.send(chunk):
            why.append("connection dropped after %d MiB" % (sent >> 20))
            break
        sent += len(chunk)
        if (sent >> 20) % 64 == 0 and pid:
            rss_max = max(rss_max, rss_kb(pid))
    if pid:
        rss_max = max(rss_max, rss_kb(pid))
    time.sleep(0.2)
    errs = [(o.get("error") or {}).get("code") for o in c.json_msgs()[before:]
            if o.get("error")]
    out("huge_error", ",".join(e for e in errs if e) or "none")
    out("huge_sent_mib", sent >> 20)
    out("rss_before_kb", rss0)
    out("rss_max_kb", rss_max)
    c = redial(c, 999, "the huge frame", why)
    res["len_2e40_stream"] = why
    # a close frame with a status and a reason holding control bytes: pistisd's log line
    # names both (escaped), then it dials again
    why = []
    h, p = ws_frame(8, struct.pack(">H", 1008) + b"bye \x1b[31mred\nnext 'q'")
    c.send(h + p)
    c.wait_eof(5)
    c = redial(c, 1000, "the close frame", why)
    res["close_with_reason"] = why
    bad = {k: v for k, v in res.items() if v}
    for k, v in sorted(bad.items()):
        note("FAILED %s (seed %d): %s" % (k, seed, "; ".join(v)))
    out("cases", len(res))
    out("cases_failed", len(bad))
    out("failed_cases", ",".join(sorted(bad)) or "none")
    out("kept", ",".join(sorted(kept)) or "none")
    c.close()


# --- pistisd serve: the stdin differential -------------------------------------------------

# session.c STDIN_MAX: the stdin pistisd queues for one command while the pipe is full. It
# has no flow control: a frame over it is refused ("internal", ENOBUFS) and lost while the
# next ones are taken. So a cat's stdin is paced by its output: at most this much of it is
# sent and not yet back; sha256sum's input fits in it.
STDIN_QUEUE = 1 << 20
SERVE_READ = SERVE_CAP - 16    # lws reads the socket pt_serv_buf_size - LWS_PRE at a time
SERVE_PIECE = PISTIS_CAP       # pistisd's rx_buffer_size: a longer message reaches its
                               # callback in pieces of this size (text up to 1 MiB)
STDIN_BATCH = 384 << 10        # stdin written between two looks at the output
STDIN_SIZES = (0, 1, 2, 15, 16, 17, 125 - 16, 126 - 16, 127 - 16, 65535 - 16, 65536 - 16,
               65537 - 16, SERVE_READ - 17, SERVE_READ - 16, SERVE_READ - 15,
               SERVE_PIECE - 17, PROTO_MAX_FRAME_PAYLOAD - 1, PROTO_MAX_FRAME_PAYLOAD)


class OutTrack:
    """What pistisd sent on the connection since the tracker started: one command's output
    frames (in order, without gaps), its exec.exit, answers by id, errors, pongs."""

    def __init__(self, c):
        self.c, self.cmd, self.i = c, None, len(c.msgs)
        self.out, self.err, self.nbytes, self.seq = [], [], 0, 0
        self.eof, self.bad, self.exit, self.answers, self.errors = set(), [], None, {}, []
        self.pongs = 0

    def update(self):
        with self.c.cv:
            ms = self.c.msgs[self.i:]
            self.i += len(ms)
        for op, p in ms:
            if op == 10:
                self.pongs += 1
            elif op == 2:
                if len(p) < 16:
                    self.bad.append("frame of %d bytes" % len(p))
                    continue
                _, stream, flags, cmd, seq = struct.unpack_from(">BBHIQ", p)
                if cmd != self.cmd:
                    self.bad.append("a frame for command %d" % cmd)
                    continue
                if seq != self.seq + 1:
                    self.bad.append("frame %d after %d" % (seq, self.seq))
                self.seq = seq
                if stream in self.eof:
                    self.bad.append("stream %d frame %d after its EOF" % (stream, seq))
                if stream == 1:
                    self.out.append(p[16:])
                    self.nbytes += len(p) - 16
                elif stream == 2:
                    self.err.append(p[16:])
                else:
                    self.bad.append("frame on stream %d" % stream)
                if flags & 1:
                    self.eof.add(stream)
            elif op == 1:
                try:
                    o = json.loads(p)
                except ValueError:
                    self.bad.append("text that is not JSON: %r" % p[:100])
                    continue
                if o.get("error"):
                    self.errors.append(o)
                if o.get("event") == "exec.exit" and o.get("cmd") == self.cmd:
                    self.exit = o
                elif "ok" in o and o.get("id") is not None:
                    self.answers[o["id"]] = o

    def wait(self, pred, timeout):
        end = time.time() + timeout
        while True:
            self.update()
            if pred():
                return True
            with self.c.cv:
                if len(self.c.msgs) > self.i:
                    continue
                left = end - time.time()
                if self.c.eof or left <= 0:
                    break
                self.c.cv.wait(min(left, 0.5))
        self.update()
        return pred()


def send_plan(c, plan, totals):
    for data, sync in plan.chunks():
        if data and not c.send(data):
            return False
        if sync:
            c.sync()
    for k, v in plan.stats.items():
        totals[k] = totals.get(k, 0) + v
    totals["ws_bytes"] = totals.get("ws_bytes", 0) + plan.len
    totals.setdefault("hdr_cov", set()).update(plan.hdr_cov)
    totals.setdefault("form_cov", set()).update(plan.form_cov)
    return True


def one_serve(c, seed, agent, totals):
    """One command: exec.start of cat (or sha256sum) with stdin "pipe", a random payload as
    stdin frames in random WebSocket frames and segmentations, with acks, pings and JSON
    requests between them, stdin closed one of the three ways; the output must be the
    payload (its sha256), in order, and the command must exit 0."""
    rng = random.Random(seed)
    why = []
    tool = "sha256sum" if rng.random() < 0.25 else "cat"
    if tool == "cat":
        size = (rng.choice((1, 2, 3, 4, 6)) << 20) + rng.randrange(0, 70000)
    else:  # no output to pace on: the whole input fits pistisd's stdin queue
        size = rng.choice((0, 1, rng.randrange(0, STDIN_QUEUE - 65536)))
    data = rand_bytes(rng, size)
    close = rng.choice(("flag", "frame", "json"))
    rid = "d%d" % seed
    syncs0 = c.sync_timeouts
    trk = OutTrack(c)
    ctl, asked = [0], []

    def request(plan, o):
        asked.append(o["id"])
        message(plan, rng, 1, json.dumps(o), ctl)

    plan = Plan(rng, SERVE_PIECE, SERVE_READ)
    request(plan, {"id": rid, "op": "exec.start", "agent": agent, "stdin": "pipe",
                   "argv": ["/usr/bin/" + tool]})
    send_plan(c, plan, totals)
    if not trk.wait(lambda: rid in trk.answers, 20):
        return ["no answer to exec.start"]
    st = trk.answers[rid]
    if not st.get("ok") or not isinstance(st.get("cmd"), int):
        return ["exec.start: %r" % st]
    cmd = trk.cmd = st["cmd"]
    seq = off = sent = acked = nreq = 0
    eof_sent = False
    while not eof_sent:
        if tool == "cat" and not trk.wait(
                lambda: sent - trk.nbytes <= STDIN_QUEUE - STDIN_BATCH - PROTO_MAX_FRAME_PAYLOAD,
                20):
            why.append("output stalled: %d stdin bytes sent, %d came back" % (sent, trk.nbytes))
            break
        plan = Plan(rng, SERVE_PIECE, SERVE_READ)
        if rng.random() < 0.7:
            # what has come back by now depends on timing: the message's length must not,
            # or a seed would not replay the same stream
            acked = max(acked, trk.seq)
            nreq += 1
            message(plan, rng, 1, json.dumps({"id": "a%d.%d" % (seed, nreq), "op": "exec.ack",
                                              "cmd": cmd, "seq": acked, "agent": agent,
                                              "pad": "x" * (12 - len(str(acked)))}), ctl)
        batch = 0
        while off < size and batch < STDIN_BATCH:
            n = piece_size(rng, STDIN_SIZES, 0.75)
            d = data[off:off + n]
            off += len(d)
            seq += 1
            last = off >= size and close == "flag"
            message(plan, rng, 2, pframe(0, 1 if last else 0, cmd, seq, d), ctl)
            eof_sent = eof_sent or last
            batch += len(d)
            if rng.random() < 0.04:
                # a request pistisd answers; over its receive buffer it reaches the callback
                # in pieces (one string is at most 256 KiB, a message 1 MiB)
                nreq += 1
                pad = rng.choice((0, 10, 70000, SERVE_PIECE - 60, SERVE_PIECE + 1000, 600000,
                                  1000000))
                o = {"id": "n%d.%d" % (seed, nreq), "op": "ping"}
                for i in range(pad // 250000 + 1):
                    o["pad%d" % i] = "n" * min(250000, pad - 250000 * i)
                request(plan, o)
        if off >= size and not eof_sent:
            if close == "json":
                request(plan, {"id": "c%d" % seed, "op": "exec.close_stdin", "cmd": cmd,
                               "agent": agent})
            else:
                seq += 1
                message(plan, rng, 2, pframe(0, 1, cmd, seq), ctl)
            eof_sent = True
        if not send_plan(c, plan, totals):
            why.append("send failed: pistisd closed the connection")
            break
        sent += batch
    if not trk.wait(lambda: trk.exit and all(i in trk.answers for i in asked), 30):
        why.append("no exec.exit" if not trk.exit else "unanswered requests: %s" %
                   ",".join(i for i in asked if i not in trk.answers)[:200])
    # the final ack lets pistisd forget the command
    h, p = ws_frame(1, json.dumps({"id": "f%d" % seed, "op": "exec.ack", "cmd": cmd,
                                   "seq": trk.seq, "agent": agent}))
    c.send(h + p)
    got = b"".join(trk.out)
    want = data if tool == "cat" else (hashlib.sha256(data).hexdigest() + "  -\n").encode()
    if got != want:
        i = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                 min(len(got), len(want)))
        why.append("stdout differs: %d bytes, want %d, first difference at %d"
                   % (len(got), len(want), i))
    if b"".join(trk.err):
        why.append("stderr: %r" % b"".join(trk.err)[:200])
    ex = trk.exit or {}
    if trk.exit and (ex.get("end") != "exited" or ex.get("code") != 0):
        why.append("exec.exit %r" % ex)
    if trk.exit and (ex.get("last_seq") != trk.seq or ex.get("stdout_bytes") != len(got)):
        why.append("exec.exit says last_seq %s/stdout_bytes %s, got %d/%d" % (
            ex.get("last_seq"), ex.get("stdout_bytes"), trk.seq, len(got)))
    if trk.eof != {1, 2}:
        why.append("EOF frames on streams %s" % sorted(trk.eof))
    why += trk.bad[:5]
    for o in trk.errors[:5]:
        why.append("error %s" % json.dumps(o)[:300])
    for i in asked:
        if i in trk.answers and not trk.answers[i].get("ok"):
            why.append("%s answered %s" % (i, json.dumps(trk.answers[i])[:200]))
    if c.sync_timeouts > syncs0:
        why.append("%d synchronised cuts timed out" % (c.sync_timeouts - syncs0))
    totals["bytes"] = totals.get("bytes", 0) + size
    totals["stdin_frames"] = totals.get("stdin_frames", 0) + seq
    totals["requests"] = totals.get("requests", 0) + nreq
    totals["pongs"] = totals.get("pongs", 0) + trk.pongs
    totals[tool] = totals.get(tool, 0) + 1
    totals["close_" + close] = totals.get("close_" + close, 0) + 1
    return why


def serve_diff(port, token, seed, count, agent):
    """pistisd serve dials us once; COUNT commands one after the other on that connection."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4)

    def connect():
        c = Conn(ls, "pistis.v1", token, timeout=30)
        if not c.wait_json(lambda o: o.get("op") == "hello"):
            raise RuntimeError("no hello")
        h, p = ws_frame(1, json.dumps({"id": "hello", "ok": True}))
        c.send(h + p)
        return c
    c = connect()
    pid = pid_of_peer(c.sport, c.cport)
    out("auth", "ok" if c.auth_ok else "wrong")
    totals, failed = {}, []
    t0 = time.time()
    for s in range(seed, seed + count):
        with c.cv:
            del c.msgs[:]  # the previous command's output
        try:
            why = one_serve(c, s, agent, totals)
        except Exception as e:
            why = ["%s: %s" % (type(e).__name__, e)]
        if c.eof:
            why.append("pistisd dropped the connection")
        if why:
            failed.append(s)
            note("FAILED serve seed %d (rerun: PISTIS_WSRX_SEED=%d PISTIS_WSRX_SERVE_SEEDS=1): %s"
                 % (s, s, "; ".join(why)))
        if len(failed) >= 5 and s < seed + count - 1:
            note("stopped after 5 failed seeds")  # each can wait 20-30 s for pistisd
            break
        if c.eof:
            c.close()
            c = connect()
    # every command acknowledged to its end: pistisd forgot them all
    h, p = ws_frame(1, json.dumps({"id": "st", "op": "sandbox.status"}))
    c.send(h + p)
    st = c.wait_json(lambda o: o.get("id") == "st", 10) or {}
    out("left_commands", len(st.get("commands", [None])))
    out("left_buffered", st.get("buffered"))
    out("serve_alive", "yes" if pid and os.path.exists("/proc/%d" % pid) else "no")
    out("seeds", count)
    out("seeds_failed", len(failed))
    out("failed_seeds", ",".join(map(str, failed)) or "none")
    for k in ("bytes", "ws_bytes", "stdin_frames", "frames", "fragments", "control", "requests",
              "pongs", "hdr_splits", "sync_cuts", "cuts", "byte_runs", "cap_splits",
              "read_splits", "cat", "sha256sum", "close_flag", "close_frame", "close_json"):
        out(k, totals.get(k, 0))
    cov = totals.get("hdr_cov", set())
    want = {(h, k) for h in (2, 4, 10) for k in range(1, h)}
    out("hdr_split_offsets", "%d/%d" % (len(cov & want), len(want)))
    out("length_forms", ",".join(str(f) for f in sorted(totals.get("form_cov", set()))))
    out("pipes", totals.get("pipes", 0))
    out("seconds", "%.1f" % (time.time() - t0))
    c.close()


if __name__ == "__main__":
    mode = sys.argv[1]
    try:
        if mode == "exec-diff":
            exec_diff(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        elif mode == "client-hostile":
            client_hostile(sys.argv[2], int(sys.argv[3]))
        elif mode == "client-cut-frame":
            client_cut_frame(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        elif mode == "client-exit-values":
            client_exit_values(sys.argv[2])
        elif mode == "client-ls-names":
            client_ls_names(sys.argv[2])
        elif mode == "serve-diff":
            serve_diff(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
                       sys.argv[6])
        elif mode == "serve-hostile":
            serve_hostile(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
        else:
            sys.exit(100)
    except Exception as e:
        print("exception=%s: %s" % (type(e).__name__, e), flush=True)
        sys.exit(1)
