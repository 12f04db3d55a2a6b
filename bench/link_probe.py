"""Throughput and round trip of the link between two nodes, over one plain TCP connection.

Launched on both nodes by `lab exec` (rank 0 listens on MASTER_PORT, rank 1 connects):
  lab exec --copy bench/link_probe.py -- python link_probe.py --rank {rank}
Rank 1 sends as fast as TCP goes for --seconds; rank 0 counts what arrives after the first --warmup seconds
(slow start and the token bucket's first burst left out). Then --pings one-byte round trips. Rank 0 prints
one line `LINK {"bits_per_second": ..., "rtt_us_median": ...}`.
"""

import argparse
import json
import os
import socket
import statistics
import time

CHUNK = 1024 * 1024

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int, required=True)
parser.add_argument("--seconds", type=float, default=3.0)
parser.add_argument("--warmup", type=float, default=0.5)
parser.add_argument("--pings", type=int, default=200)
args = parser.parse_args()
port = int(os.environ["MASTER_PORT"])


def receive_exactly(conn: socket.socket, size: int) -> None:
    while size:
        size -= len(conn.recv(size))


if args.rank == 0:
    with socket.create_server(("", port)) as server:
        conn, _ = server.accept()
    with conn:
        received, counted_from, started = 0, None, time.perf_counter()
        while True:
            data = conn.recv(CHUNK)
            ended = data.endswith(b"\0")  # the sender's end-of-stream byte (its payload has none)
            if len(data) > ended:
                last_data = time.perf_counter()
                if counted_from is None and last_data - started >= args.warmup:
                    counted_from, received = last_data, 0
                received += len(data) - ended
            if ended:
                break
        seconds = last_data - counted_from
        conn.sendall(b"\1")
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rtts = []
        for _ in range(args.pings):
            sent = time.perf_counter()
            conn.sendall(b"p")
            receive_exactly(conn, 1)
            rtts.append((time.perf_counter() - sent) * 1e6)
        print("LINK " + json.dumps({"bits_per_second": received * 8 / seconds, "seconds": seconds,
                                    "rtt_us_median": statistics.median(rtts)}), flush=True)
else:
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = socket.create_connection((os.environ["MASTER_ADDR"], port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    with conn:
        payload = b"x" * CHUNK
        stop = time.perf_counter() + args.seconds
        while time.perf_counter() < stop:
            conn.sendall(payload)
        conn.sendall(b"\0")
        receive_exactly(conn, 1)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(args.pings):
            receive_exactly(conn, 1)
            conn.sendall(b"p")
