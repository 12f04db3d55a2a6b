"""Checkpoint round-trip check for a denoising autoencoder trainer.

Mid-run the job snapshots its full training state, loads it back into fresh
objects, and confirms that every replica resumed from an identical state before
it carries on training."""
import datetime
import hashlib
import io
import os
import shutil

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 30
SNAP_AT = 15
SNAP_DIR = "ae_snapshots"


def new_trainer():
    torch.manual_seed(1234)
    net = nn.Sequential(nn.Linear(32, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 32))
    ddp = DDP(net)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS)
    return net, ddp, opt, sched


def training_state(net, opt, sched, step):
    return {"model": net.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
            "step": step, "rng": torch.get_rng_state()}


def fingerprint(state):
    buf = io.BytesIO()
    h = hashlib.sha256()
    for key in sorted(state):
        buf.seek(0)
        buf.truncate()
        torch.save(state[key], buf)
        h.update(key.encode())
        h.update(buf.getvalue())
    return h.hexdigest()[:16]


def train_steps(ddp, opt, sched, data, start, stop):
    for step in range(start, stop):
        clean = data[step % len(data)]
        noisy = clean + 0.3 * torch.randn_like(clean)
        loss = nn.functional.mse_loss(ddp(noisy), clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return loss.item()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:
        shutil.rmtree(SNAP_DIR, ignore_errors=True)
        os.makedirs(SNAP_DIR)
    dist.barrier()

    g = torch.Generator().manual_seed(rank)
    data = torch.randn(8, 16, 32, generator=g)
    net, ddp, opt, sched = new_trainer()
    torch.manual_seed(1234 + rank)
    train_steps(ddp, opt, sched, data, 0, SNAP_AT)
    path = os.path.join(SNAP_DIR, f"state_rank{rank}.pt")
    torch.save(training_state(net, opt, sched, SNAP_AT), path)

    net, ddp, opt, sched = new_trainer()
    state = torch.load(path, weights_only=True)
    net.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    sched.load_state_dict(state["sched"])
    torch.set_rng_state(state["rng"])
    start = state["step"]

    mine = fingerprint(training_state(net, opt, sched, start))
    every = [None] * world
    dist.all_gather_object(every, mine)
    if len(set(every)) != 1:
        raise RuntimeError(f"replicas resumed from different states at step {start}: {every}")
    print(f"[rank {rank}] resume verified at step {start} ({mine})", flush=True)

    final = train_steps(ddp, opt, sched, data, start, STEPS)
    if rank == 0:
        print(f"done, last loss {final:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
