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
        # While nothing listens on PORT, a connect whose own ephemeral port is
        # PORT connects to itself (TCP's simultaneous open) and holds the port:
        # the store could not bind it. Such a socket is dropped at once.
        if s.getsockname()[1] == port:
            s.close()
            continue
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
    # Refused connections are reopened every 0.1 s, not as fast as they fail.
    time.sleep(0.1 if len(open_sockets) < count else 0.01)
