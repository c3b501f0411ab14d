"""Holds COUNT idle TCP connections to 127.0.0.1:PORT that never send a
byte, opening a new one for each the other end drops, until killed: the
crowd of strangers that test_store_strangers.sh runs beside accel-run.
    python3 idle_connections.py PORT COUNT
"""
import select
import socket
import sys
import time

port, count = int(sys.argv[1]), int(sys.argv[2])
open_sockets = []
while True:
    while len(open_sockets) < count:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        open_sockets.append(s)
    readable, _, failed = select.select(open_sockets, [], open_sockets, 0.05)
    for s in set(readable) | set(failed):
        try:
            data = s.recv(1)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            data = b""
        if not data:  # dropped (or refused before the store listened): reopen
            open_sockets.remove(s)
            s.close()
    time.sleep(0.01)
