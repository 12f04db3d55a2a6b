"""Two-terminal trainer (one process per machine: --rank/--world-size, MASTER_ADDR/PORT from the environment)
with a small built-in run tracker that collects every rank's metrics on the main process."""
import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def is_main_process():
    return int(os.environ.get("RANK", "0")) == 0


class RunTracker:
    def __init__(self, name, every=10):
        self.name, self.every, self.main = name, every, is_main_process()
        self.pending = {"loss": [], "grad_norm": []}
        self.rows = []
        self.started = time.time()

    def log(self, step, **metrics):
        for key, value in metrics.items():
            self.pending[key].append(float(value))
        if step % self.every == 0:
            self._flush(step)

    def _flush(self, step):
        local = torch.tensor([sum(v) / max(len(v), 1) for v in self.pending.values()])
        self.pending = {k: [] for k in self.pending}
        if not self.main:
            dist.send(local, dst=0)
            return
        per_rank = [local]
        for src in range(1, dist.get_world_size()):
            buf = torch.empty_like(local)
            dist.recv(buf, src=src)
            per_rank.append(buf)
        stacked = torch.stack(per_rank)
        row = {"step": step, "elapsed": round(time.time() - self.started, 2)}
        row.update({k: stacked[:, i].mean().item() for i, k in enumerate(self.pending)})
        self.rows.append(row)
        print(json.dumps(row), flush=True)

    def finish(self):
        if self.main:
            with open(f"{self.name}_metrics.json", "w") as f:
                json.dump(self.rows, f)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size, timeout=timeout)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    tracker = RunTracker("regression")
    gen = torch.Generator().manual_seed(100 + args.rank)

    for step in range(1, args.steps + 1):
        x = torch.randn(32, 16, generator=gen)
        y = x[:, :4].sum(dim=1, keepdim=True)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= args.world_size
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tracker.log(step, loss=loss.item(), grad_norm=norm.item())

    tracker.finish()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
