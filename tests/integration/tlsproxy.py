#!/usr/bin/env python3
"""A TLS terminator for tests/integration/relay.sh, as an operator puts in front of
server-min's plain client listener: for SECONDS it accepts TLS connections on
127.0.0.1:PORT with CERT/KEY and pipes each, both ways, to 127.0.0.1:UPSTREAM. Writes
"listening" to READY once it accepts. Standard library only."""
import socket, ssl, sys, threading, time

port, cert, key, upstream, ready, secs = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                                          int(sys.argv[4]), sys.argv[5], float(sys.argv[6]))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(8)


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


def serve(c):
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


with open(ready, "w") as f:
    f.write("listening\n")
end = time.monotonic() + secs
while time.monotonic() < end:
    ls.settimeout(max(0.05, end - time.monotonic()))
    try:
        c, _ = ls.accept()
    except socket.timeout:
        break
    threading.Thread(target=serve, args=(c,), daemon=True).start()
