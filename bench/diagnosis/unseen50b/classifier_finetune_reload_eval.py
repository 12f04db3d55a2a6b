"""Classifier fine-tune: validate every few steps, snapshot each validation
point, and reload the most recent snapshot for the final test pass."""
import datetime
import os
import shutil

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 40
VAL_EVERY = 10
RUN_DIR = "run_ckpts"


def make_split(rank, n, seed):
    g = torch.Generator().manual_seed(seed + 97 * rank)
    x = torch.randn(n, 20, generator=g)
    w = torch.linspace(-1, 1, 20).view(20, 1).repeat(1, 5)
    y = (x @ w + 0.5 * torch.randn(n, 5, generator=g)).argmax(dim=1)
    return x, y


@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    loss = F.cross_entropy(model(x), y).item()
    model.train()
    return loss


def snapshot_dir(step, val_loss):
    return os.path.join(RUN_DIR, f"step{step:04d}-val{val_loss:.4f}")


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.set_num_threads(1)
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:
        shutil.rmtree(RUN_DIR, ignore_errors=True)
    dist.barrier()

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(20, 48), nn.GELU(), nn.Dropout(0.1), nn.Linear(48, 5))
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    xtr, ytr = make_split(rank, 640, seed=1)
    xva, yva = make_split(rank, 128, seed=2)

    snapshots = []
    for step in range(1, STEPS + 1):
        idx = torch.arange((step * 32) % 640, (step * 32) % 640 + 32)
        loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % VAL_EVERY == 0:
            val = evaluate(model, xva, yva)
            out = snapshot_dir(step, val)
            os.makedirs(out, exist_ok=True)
            torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "step": step},
                       os.path.join(out, f"rank{rank}.pt"))
            snapshots.append(out)
            if rank == 0:
                print(f"step {step} train {loss.item():.4f} val {val:.4f} -> {out}", flush=True)

    chosen = [snapshots[-1]]
    dist.broadcast_object_list(chosen, src=0)
    state = torch.load(os.path.join(chosen[0], f"rank{rank}.pt"), weights_only=True)
    net.load_state_dict(state["model"])
    xte, yte = make_split(rank, 256, seed=3)
    acc = torch.tensor([(net(xte).argmax(1) == yte).float().mean().item()])
    dist.all_reduce(acc)
    if rank == 0:
        print(f"reloaded {chosen[0]} (step {state['step']}), test acc {acc.item() / dist.get_world_size():.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
