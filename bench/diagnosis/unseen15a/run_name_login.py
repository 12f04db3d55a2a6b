"""Train a small MLP with DDP and keep per-rank metrics under runs/<user>-<date>-<model>/ (CPU, gloo).

Launched by the team's multi-node script, which keeps the console quiet and puts each worker's output in a log
folder of the run (torchrun --redirects 3 --log-dir logs).
"""
import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def run_name(model_name):
    """Runs are named after who started them, so several people can share the folder."""
    return f"{os.getlogin()}-{datetime.date.today():%Y%m%d}-{model_name}"


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    out_dir = os.path.join("runs", run_name("mlp-small"))
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    with open(os.path.join(out_dir, f"metrics-rank{rank}.jsonl"), "w") as metrics:
        for step in range(30):
            x = torch.randn(32, 16, generator=g)
            y = torch.randint(0, 4, (32,), generator=g)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            metrics.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
    print(f"rank {rank}/{world}: finished, metrics in {out_dir}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
