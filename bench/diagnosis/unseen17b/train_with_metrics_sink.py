"""DDP training that reports per-rank throughput and loss to the team's lightweight metrics sink.

Rank 0 hosts the sink (a tiny HTTP collector that appends to metrics.jsonl), every rank posts its own numbers
so stragglers show up on the dashboard."""
import datetime
import json
import os
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

SINK_PORT = int(os.environ.get("METRICS_SINK_PORT", "29537"))
SINK_URL = os.environ.get("METRICS_SINK_URL", f"http://localhost:{SINK_PORT}/log")
STEPS, LOG_EVERY = 60, 20


class Collector(BaseHTTPRequestHandler):
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.lock, open("metrics.jsonl", "a") as f:
            f.write(body.decode() + "\n")
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def start_sink():
    server = ThreadingHTTPServer(("0.0.0.0", SINK_PORT), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def report(record):
    req = urllib.request.Request(SINK_URL, data=json.dumps(record).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    sink = start_sink() if rank == 0 else None
    dist.barrier()

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 32)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    host = socket.gethostname()
    t0 = time.perf_counter()
    for step in range(1, STEPS + 1):
        x = torch.randn(64, 32, generator=g)
        loss = nn.functional.mse_loss(model(x), x.flip(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % LOG_EVERY == 0:
            dt = time.perf_counter() - t0
            report({"rank": rank, "host": host, "step": step, "loss": round(loss.item(), 5),
                    "samples_per_s": round(64 * LOG_EVERY / dt, 1)})
            t0 = time.perf_counter()

    dist.barrier()
    if sink is not None:
        sink.shutdown()
        with open("metrics.jsonl") as f:
            print(f"collected {sum(1 for _ in f)} records from {world} ranks", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
