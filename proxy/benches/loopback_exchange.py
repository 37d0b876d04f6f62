"""The kernel's share of one HTTP exchange on loopback, with no HTTP at all: a client writes
600 bytes and reads 900 (TCP_NODELAY, one connection, like the proxy's inline HTTP/1
connection to its runtime), 20,000 times, and prints its own user and system CPU per exchange.

Run: python3 proxy/benches/loopback_exchange.py

This is the floor of what forwarding a task over HTTP adds to the floor worker's CPU, whatever
the proxy's code does (see "Cost per task" in docs/performance.md).
"""

import multiprocessing
import os
import socket
import time

EXCHANGES = 20_000


def server(ports):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    ports.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    response = b"x" * 900
    for _ in range(EXCHANGES):
        conn.recv(4096)
        conn.sendall(response)


def main():
    ports = multiprocessing.Queue()
    peer = multiprocessing.Process(target=server, args=(ports,))
    peer.start()
    client = socket.create_connection(("127.0.0.1", ports.get()))
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = b"y" * 600
    before, started = os.times(), time.time()
    for _ in range(EXCHANGES):
        client.sendall(request)
        client.recv(4096)
    after, ended = os.times(), time.time()
    per = 1e6 / EXCHANGES
    print(
        f"client CPU per exchange: user {(after.user - before.user) * per:.1f} µs, "
        f"system {(after.system - before.system) * per:.1f} µs; "
        f"wall {(ended - started) * per:.1f} µs"
    )
    peer.join()


if __name__ == "__main__":
    main()
