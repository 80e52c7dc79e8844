#!/usr/bin/env python3
"""Read one file of a sandbox-users root over and over, the way a lock-free reader (NSS,
nscd, pistisd's own fast path) does, while ensures rewrite it; report every read that is
not a whole version of the file.

    torn-reader.py FILE FIELDS STOPFILE [linger]

FIELDS: the number of ':'-separated fields of every line (passwd 7, group 4, shadow 9,
gshadow 4, the registry: 0 = do not count). A whole version ends with a newline and each
line has FIELDS fields. Versions only grow here (agents are only added), so the lines
whose name starts with "pi-agent-" never become fewer from one read to the next. With
'linger' the reader holds the file open 0-30 ms before reading it, long enough for
several commits to go by. A file must never change while a reader has it open
(mtime and size, before and after the read): a commit writes a new file or an inode no
one has open. Prints "reads=N bad=M" and exits 1 when M > 0."""
import os
import random
import sys
import time

path, fields, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
linger = len(sys.argv) > 4 and sys.argv[4] == "linger"
reads = bad = 0
last_agents = 0
while not os.path.exists(stop):
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        time.sleep(0.001)
        continue
    try:
        before = os.fstat(fd)
        if linger:
            time.sleep(random.random() * 0.03)
        chunks = []
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            chunks.append(b)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    reads += 1
    why = None
    if (before.st_mtime_ns, before.st_size) != (after.st_mtime_ns, after.st_size):
        why = "rewritten while this reader had it open"
    elif not data.endswith(b"\n"):
        why = "no newline at the end"
    else:
        lines = data[:-1].split(b"\n")
        if fields and any(l.count(b":") != fields - 1 for l in lines if l and not l.startswith(b"#")):
            why = "a line with the wrong number of fields"
        agents = sum(1 for l in lines if l.startswith(b"pi-agent-"))
        if why is None and not path.endswith("-") and agents < last_agents:
            why = "fewer agents than the read before (%d < %d)" % (agents, last_agents)
        if not path.endswith("-"):
            last_agents = max(last_agents, agents)
    if why:
        bad += 1
        if bad <= 3:
            print("# %s: read %d: %s (%d bytes)" % (path, reads, why, len(data)))
print("reads=%d bad=%d" % (reads, bad))
sys.exit(1 if bad else 0)
