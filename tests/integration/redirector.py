#!/usr/bin/env python3
"""A peer that answers every WebSocket handshake with a redirect, for relay-unix.sh: does
pistisd serve (on a unix socket) or pistis (on TCP) follow it? Listens at LISTEN (a unix
socket's path, or a loopback port), answers STATUS with Location TARGET_URL, and listens on
loopback port TARGET_PORT too, appending a line to SEEN for every connection made there.
Usage: redirector.py LISTEN STATUS TARGET_PORT TARGET_PATH SEEN"""
import socket, sys, threading

listen, status, tport, tpath, seen = sys.argv[1:6]
tport = int(tport)


def tcp_listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(8)
    return s


def target(s):
    while True:
        c, _ = s.accept()
        c.settimeout(2)
        try:
            data = c.recv(4096)
        except OSError:
            data = b""
        with open(seen, "ab") as f:
            f.write(b"dialled: " + data.split(b"\r\n")[0] + b"\n")
        c.close()


t = tcp_listener(tport)
threading.Thread(target=target, args=(t,), daemon=True).start()
if listen.startswith("/"):
    a = socket.socket(socket.AF_UNIX)
    a.bind(listen)
    a.listen(8)
else:
    a = tcp_listener(int(listen))
reason = {"301": "Moved Permanently", "302": "Found", "307": "Temporary Redirect"}
answer = (f"HTTP/1.1 {status} {reason.get(status, 'Redirect')}\r\n"
          f"Location: ws://127.0.0.1:{tport}{tpath}\r\nContent-Length: 0\r\n\r\n").encode()
print("ready", flush=True)
while True:
    c, _ = a.accept()
    c.settimeout(2)
    try:
        c.recv(4096)
    except OSError:
        pass
    c.sendall(answer)
    c.close()
