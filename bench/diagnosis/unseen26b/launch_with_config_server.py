import datetime
import json
import os
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
import torch.distributed as dist
import torch.nn as nn

CONFIG_PORT = int(os.environ.get("CONFIG_PORT", "29536"))
RUN_CONFIG = {"pg_timeout_s": int(os.environ.get("PG_TIMEOUT", "60")), "lr": 0.05,
              "hidden": 64, "steps": 30, "batch_size": 32}


class ConfigHandler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(RUN_CONFIG).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve_config():
    server = ThreadingHTTPServer(("0.0.0.0", CONFIG_PORT), ConfigHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def fetch_config(host, attempts=6, base_delay=0.5):
    url = f"http://{host}:{CONFIG_PORT}/config"
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return json.loads(r.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            delay = base_delay * 2 ** attempt
            print(f"config server not reachable ({e}); retry {attempt + 1}/{attempts} in {delay:.1f}s", flush=True)
            time.sleep(delay)
    raise RuntimeError(f"could not fetch the run config from {url} after {attempts} attempts")


def main():
    rank = int(os.environ["RANK"])
    if rank == 0:
        cfg = dict(RUN_CONFIG)
    else:
        cfg = fetch_config(os.environ["MASTER_ADDR"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=cfg["pg_timeout_s"]))
    server = serve_config() if rank == 0 else None
    world = dist.get_world_size()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, cfg["hidden"]), nn.ReLU(), nn.Linear(cfg["hidden"], 2))
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    g = torch.Generator().manual_seed(rank)
    for step in range(cfg["steps"]):
        x = torch.randn(cfg["batch_size"], 20, generator=g)
        y = (x[:, 0] > 0).long()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    if server is not None:
        server.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
