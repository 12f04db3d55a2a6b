"""Fine-tune a classifier with DDP, resuming from the newest checkpoint in the output directory when there is one."""
import argparse
import contextlib
import datetime
import logging
import os
import re

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

logger = logging.getLogger("finetune")


@contextlib.contextmanager
def main_process_first(is_main):
    if not is_main:
        dist.barrier()
    yield
    if is_main:
        dist.barrier()


def last_checkpoint(output_dir, overwrite):
    if not os.path.isdir(output_dir) or overwrite:
        return None
    steps = [int(m.group(1)) for d in os.listdir(output_dir) if (m := re.fullmatch(r"checkpoint-(\d+)", d))]
    if steps:
        return os.path.join(output_dir, f"checkpoint-{max(steps)}")
    if os.listdir(output_dir):
        raise ValueError(f"Output directory ({output_dir}) already exists and is not empty. "
                         "Use --overwrite_output_dir to overcome.")
    return None


def setup_logging(output_dir, is_main):
    logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO if is_main else logging.WARN)
    if is_main:
        os.makedirs(output_dir, exist_ok=True)
        logger.addHandler(logging.FileHandler(os.path.join(output_dir, "train.log")))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", default="out/classifier")
    parser.add_argument("--overwrite_output_dir", action="store_true")
    parser.add_argument("--max_steps", type=int, default=60)
    parser.add_argument("--save_steps", type=int, default=20)
    args = parser.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0

    with main_process_first(is_main):
        resume_from = last_checkpoint(args.output_dir, args.overwrite_output_dir)
        setup_logging(args.output_dir, is_main)
    logger.info("world size %d, resume from %s", world, resume_from)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 48), nn.ReLU(), nn.Linear(48, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    if resume_from:
        state = torch.load(os.path.join(resume_from, "state.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        start = state["step"]
    ddp = DDP(model)

    g = torch.Generator().manual_seed(11)
    x = torch.randn(3000, 24, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    x, y = x[rank::world], y[rank::world]
    for step in range(start, args.max_steps):
        i = (step * 32) % len(x)
        loss = nn.functional.cross_entropy(ddp(x[i:i + 32]), y[i:i + 32])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % args.save_steps == 0:
            logger.info("step %d loss %.4f", step + 1, loss.item())
            if is_main:
                ckpt = os.path.join(args.output_dir, f"checkpoint-{step + 1}")
                os.makedirs(ckpt, exist_ok=True)
                torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step + 1},
                           os.path.join(ckpt, "state.pt"))
            dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
