#!/usr/bin/env python3
"""A bare TLS listener for tests/integration/relay.sh: for SECONDS it accepts TLS connections
on 127.0.0.1:PORT with CERT/KEY and appends to OUT a line "listening" once it accepts.

    tlscapture.py PORT CERT KEY OUT SECONDS            capture
    tlscapture.py PORT CERT KEY OUT SECONDS UPSTREAM   proxy

Capture: a line "handshake" per completed handshake, then every byte the client sends. It
never answers, so a client that sends its WebSocket upgrade request is caught with the
token in it. Proxy: a TLS terminator, as an operator puts in front of server-min's plain
client listener; each connection is piped, both ways, to 127.0.0.1:UPSTREAM (one thread
per direction). Standard library only."""
import socket, ssl, sys, threading, time

port, cert, key, out, secs = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
upstream = int(sys.argv[6]) if len(sys.argv) > 6 else None
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(8)


def capture(c, f):
    try:
        c.settimeout(2)
        s = ctx.wrap_socket(c, server_side=True)
        f.write(b"handshake\n")
        while True:
            d = s.recv(4096)
            if not d:
                break
            f.write(d)
    except (ssl.SSLError, OSError):
        pass
    finally:
        c.close()


def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def proxy(c):
    try:
        c.settimeout(5)
        s = ctx.wrap_socket(c, server_side=True)
        s.settimeout(None)
        u = socket.create_connection(("127.0.0.1", upstream))
    except (ssl.SSLError, OSError):
        c.close()
        return
    threading.Thread(target=pump, args=(u, s), daemon=True).start()
    pump(s, u)


end = time.monotonic() + secs
with open(out, "ab", buffering=0) as f:
    f.write(b"listening\n")
    while time.monotonic() < end:
        ls.settimeout(max(0.05, end - time.monotonic()))
        try:
            c, _ = ls.accept()
        except socket.timeout:
            break
        if upstream is None:
            capture(c, f)
        else:
            threading.Thread(target=proxy, args=(c,), daemon=True).start()
