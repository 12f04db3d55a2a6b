"""DDP training whose ranks must agree on the run configuration (read from the command line and the environment on
each node): rank 0 publishes the hash of its resolved config on a side store and every other rank refuses to train
with a different one."""
import hashlib
import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def resolved_config():
    cfg = {"lr": float(os.environ.get("LR", "0.05")), "hidden": int(os.environ.get("HIDDEN", "64")),
           "steps": int(os.environ.get("STEPS", "40")), "argv": sys.argv[1:]}
    return cfg, hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg, digest = resolved_config()
    side = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1, world,
                         is_master=rank == 0, timeout=timedelta(seconds=60), wait_for_workers=False)
    if rank == 0:
        side.set("config_sha", digest)
    else:
        side.wait(["config_sha"])
        published = side.get("config_sha")
        if published != digest:
            raise RuntimeError(f"rank {rank}: config {digest} differs from rank 0's {published}; refusing to train")
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, cfg["hidden"]), torch.nn.ReLU(),
                                    torch.nn.Linear(cfg["hidden"], 1)))
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    g = torch.Generator().manual_seed(rank)
    for step in range(cfg["steps"]):
        x = torch.randn(32, 16, generator=g)
        loss = (model(x).squeeze(1) - x[:, :4].sum(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank}: config {digest}, final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
