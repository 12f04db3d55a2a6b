import argparse
import os
from dataclasses import asdict, dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass
class TrainConfig:
    lr: float = 1e-3
    batch_size: int = 32
    steps: int = 40
    hidden: int = 64
    weight_decay: float = 0.01
    grad_clip: float = float("nan")
    warmup: int = 5


def parse_config():
    parser = argparse.ArgumentParser()
    for name, default in asdict(TrainConfig()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return TrainConfig(**vars(parser.parse_args()))


def agree_on_config(cfg, rank, world):
    configs = [None] * world
    dist.all_gather_object(configs, asdict(cfg))
    reference = configs[0]
    for r, other in enumerate(configs):
        if other != reference:
            diff = {k: (reference[k], other[k]) for k in reference if reference[k] != other[k]}
            raise SystemExit(f"rank {rank}: config of rank {r} differs from rank 0: {diff}")
    if rank == 0:
        print(f"config agreed on {world} ranks: {reference}", flush=True)


def main():
    cfg = parse_config()
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    agree_on_config(cfg, rank, world)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, cfg.hidden), torch.nn.ReLU(), torch.nn.Linear(cfg.hidden, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / cfg.warmup))
    g = torch.Generator().manual_seed(rank)
    for step in range(cfg.steps):
        x = torch.randn(cfg.batch_size, 20, generator=g)
        y = x.sum(dim=1, keepdim=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        if cfg.grad_clip == cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), cfg.grad_clip)
        opt.step()
        sched.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
