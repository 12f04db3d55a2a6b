"""DDP training that pushes its metrics to the team's metrics gateway (Prometheus pushgateway style) every
few steps, with retries so that a flaky network does not lose points."""
import datetime
import json
import os
import time
import urllib.error
import urllib.request

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

GATEWAY = os.environ.get("METRICS_GATEWAY", "http://metrics-gw.internal:9091")
PUSH_EVERY = 10
STEPS = 60


def push_metrics(job, step, metrics, retries=8, backoff=2.0):
    body = json.dumps({"job": job, "step": step, **metrics}).encode()
    url = f"{GATEWAY}/metrics/job/{job}"
    delay = 1.0
    for attempt in range(1, retries + 1):
        try:
            req = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status
        except (urllib.error.URLError, OSError) as exc:
            print(f"metrics push failed (attempt {attempt}/{retries}): {exc}", flush=True)
            time.sleep(delay)
            delay *= backoff
    return None


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(24, 96), nn.SiLU(), nn.Linear(96, 96), nn.SiLU(), nn.Linear(96, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(Regressor())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    g = torch.Generator().manual_seed(1000 + rank)
    w_true = torch.linspace(-1, 1, 24)
    job = f"reg-{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}"
    t0 = time.time()
    for step in range(1, STEPS + 1):
        x = torch.randn(128, 24, generator=g)
        y = x @ w_true + 0.1 * torch.randn(128, generator=g)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % PUSH_EVERY == 0:
            avg = loss.detach().clone()
            dist.all_reduce(avg)
            avg /= world
            if rank == 0:
                status = push_metrics(job, step, {"loss": avg.item(), "elapsed_s": time.time() - t0})
                print(f"step {step} loss {avg.item():.4f} push={status}", flush=True)
    dist.barrier()
    if rank == 0:
        print(f"training done in {time.time() - t0:.1f}s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
