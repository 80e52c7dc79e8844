#!/usr/bin/env python3
"""A bare TLS listener for tests/integration/relay.sh: for SECONDS it accepts TLS connections
on 127.0.0.1:PORT with CERT/KEY and appends to OUT a line "handshake" per completed handshake,
then every byte the client sends. It never answers, so a client that sends its WebSocket
upgrade request is caught with the token in it. Standard library only."""
import socket, ssl, sys, time

port, cert, key, out, secs = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(8)
end = time.monotonic() + secs
with open(out, "ab", buffering=0) as f:
    f.write(b"listening\n")
    while time.monotonic() < end:
        ls.settimeout(max(0.05, end - time.monotonic()))
        try:
            c, _ = ls.accept()
        except socket.timeout:
            break
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
