"""DDP regression trainer that exposes live training metrics over HTTP (one exporter per node).

Launch: torchrun --nnodes 2 --nproc-per-node N train_with_metrics_exporter.py
The exporter on each node serves JSON at http://<host>:<METRICS_PORT>/metrics for the dashboard.
"""
import json
import os
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 30
METRICS = {"step": 0, "loss": None, "samples_per_s": None}
_lock = threading.Lock()


class MetricsHandler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/metrics":
            self.send_error(404)
            return
        with _lock:
            body = json.dumps(METRICS).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def start_exporter():
    host = os.environ.get("MASTER_ADDR", "0.0.0.0")
    port = int(os.environ.get("METRICS_PORT", int(os.environ["MASTER_PORT"]) + 3))
    server = ThreadingHTTPServer((host, port), MetricsHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"metrics exporter on http://{host}:{port}/metrics", flush=True)
    return server


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])

    exporter = start_exporter() if local_rank == 0 else None

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(rank)
    w_true = torch.linspace(-1, 1, 20)

    t0 = time.time()
    for step in range(1, STEPS + 1):
        x = torch.randn(64, 20, generator=gen)
        y = (x @ w_true).unsqueeze(1) + 0.1 * torch.randn(64, 1, generator=gen)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if exporter is not None:
            with _lock:
                METRICS.update(step=step, loss=round(loss.item(), 5),
                               samples_per_s=round(64 * step / (time.time() - t0), 1))

    final = loss.detach().clone()
    dist.all_reduce(final, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"final loss {final.item():.4f} across {world} ranks", flush=True)
    if exporter is not None:
        exporter.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
