"""One trial of a hyper-parameter sweep: each trial gets its own output folder (config, per-rank logs, final
weights) named after its settings, and a trial never overwrites the folder of an earlier one."""
import argparse
import datetime
import json
import logging
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="sweep_outputs")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--hidden", type=int, default=96)
    p.add_argument("--steps", type=int, default=80)
    return p.parse_args()


def trial_dir(args):
    name = f"mlp-h{args.hidden}-lr{args.lr:g}-bs{args.batch_size}"
    path = os.path.join(args.out, name)
    os.makedirs(path)
    return path


def setup_logging(path, rank):
    log = logging.getLogger("trial")
    log.setLevel(logging.INFO)
    fmt = logging.Formatter(f"%(asctime)s rank{rank} %(message)s")
    fh = logging.FileHandler(os.path.join(path, f"train_rank{rank}.log"))
    fh.setFormatter(fmt)
    log.addHandler(fh)
    if rank == 0:
        sh = logging.StreamHandler(sys.stdout)
        sh.setFormatter(fmt)
        log.addHandler(sh)
    return log


def main():
    args = parse_args()
    rank = int(os.environ["RANK"])
    out_dir = trial_dir(args)
    log = setup_logging(out_dir, rank)

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    world = dist.get_world_size()
    if rank == 0:
        with open(os.path.join(out_dir, "config.json"), "w") as f:
            json.dump(vars(args) | {"world_size": world}, f, indent=2)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, args.hidden), nn.SiLU(), nn.Linear(args.hidden, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(1000 + rank)
    w_true = torch.linspace(-2, 2, 16)
    for step in range(1, args.steps + 1):
        x = torch.randn(args.batch_size, 16, generator=g)
        y = (x @ w_true).sin().unsqueeze(1)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 0:
            log.info("step %d loss %.4f", step, loss.item())

    final = loss.detach().clone()
    dist.all_reduce(final)
    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join(out_dir, "model.pt"))
        log.info("final mean loss %.4f -> %s", final.item() / world, out_dir)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
