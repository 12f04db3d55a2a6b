"""Preemption smoke test for mid-epoch resume: train part of epoch 0, checkpoint (model, optimiser and the data
position), rebuild everything from the checkpoint as a restarted job would, finish the epoch, then check that
every training sample was seen exactly once in the epoch across the restart.
"""
import datetime
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

N_SAMPLES = 4096
BATCH = 32
PREEMPT_AT_STEP = 6
CKPT = Path("ckpt/last.pt")


class Indexed(Dataset):
    def __init__(self, n: int):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 12, generator=g)
        self.y = (self.x[:, 0] > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return i, self.x[i], self.y[i]


class ResumableDistributedSampler(DistributedSampler):
    """DistributedSampler that can start in the middle of an epoch (skips what was already consumed)."""

    def __init__(self, dataset, **kw):
        super().__init__(dataset, **kw)
        self.start_index = 0

    def resume_from(self, consumed_samples: int) -> None:
        self.start_index = consumed_samples

    def __iter__(self):
        indices = list(super().__iter__())
        return iter(indices[self.start_index:])

    def __len__(self):
        return max(self.num_samples - self.start_index, 0)


def build(ds: Dataset):
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sampler = ResumableDistributedSampler(ds, shuffle=True, seed=7)
    return model, opt, sampler, DataLoader(ds, batch_size=BATCH, sampler=sampler)


def train_steps(model, opt, loader, seen: list, state: dict, stop_at: int | None = None) -> None:
    world = dist.get_world_size()
    for idx, x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen.extend(idx.tolist())
        state["step"] += 1
        state["consumed_samples"] += len(idx) * world  # global count, as in the logs and the LR schedule
        if stop_at is not None and state["step"] == stop_at:
            return


def main() -> None:
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    ds = Indexed(N_SAMPLES)
    seen: list[int] = []

    # first attempt: preempted after PREEMPT_AT_STEP steps of epoch 0
    model, opt, sampler, loader = build(ds)
    state = {"epoch": 0, "step": 0, "consumed_samples": 0}
    sampler.set_epoch(0)
    train_steps(model, opt, loader, seen, state, stop_at=PREEMPT_AT_STEP)
    if rank == 0:
        CKPT.parent.mkdir(exist_ok=True)
        torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), **state}, CKPT)
        print(f"preempted at step {state['step']}, consumed_samples {state['consumed_samples']}", flush=True)
    dist.barrier()

    # restarted job: rebuild and resume from the checkpoint
    ckpt = torch.load(CKPT, weights_only=True)
    model, opt, sampler, loader = build(ds)
    model.module.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    state = {k: ckpt[k] for k in ("epoch", "step", "consumed_samples")}
    sampler.set_epoch(state["epoch"])
    sampler.resume_from(state["consumed_samples"])
    print(f"rank {rank}: resumed at step {state['step']}, {len(loader)} batches left in epoch {state['epoch']}",
          flush=True)
    train_steps(model, opt, loader, seen, state)

    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, seen)
    if rank == 0:
        counts = torch.bincount(torch.tensor([i for part in everyone for i in part]), minlength=N_SAMPLES)
        missing, twice = int((counts == 0).sum()), int((counts > 1).sum())
        print(f"epoch 0: {int((counts == 1).sum())} samples seen once, {missing} never, {twice} more than once",
              flush=True)
        if missing or twice:
            raise SystemExit(f"resume check failed: {missing} of {N_SAMPLES} samples never seen and {twice} seen "
                             f"twice in epoch 0 across the restart")
        print("resume check passed", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
