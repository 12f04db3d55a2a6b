"""Train a small MLP on 2 nodes with DDP, write a distributed checkpoint (torch.distributed.checkpoint), then
evaluate the checkpoint the way the serving job will: a fresh model that loads it back.

The checkpoint goes to `ckpt/` in the run folder, which every node shares.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CKPT = "ckpt/final"
STEPS = 30


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))


def batches(rank: int, n: int):
    gen = torch.Generator().manual_seed(10 + rank)
    w = torch.randn(20, 3, generator=torch.Generator().manual_seed(3))
    for _ in range(n):
        x = torch.randn(64, 20, generator=gen)
        yield x, (x @ w).argmax(dim=1)


def evaluate(model: nn.Module) -> float:
    correct = total = 0
    with torch.no_grad():
        for x, y in batches(99, 5):
            correct += (model(x).argmax(dim=1) == y).sum().item()
            total += y.numel()
    return correct / total


def main() -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()

    torch.manual_seed(0)
    model = DDP(build_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for step, (x, y) in enumerate(batches(rank, STEPS)):
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()
    trained_acc = evaluate(model.module)
    if rank == 0:
        print(f"trained: accuracy {trained_acc:.3f}", flush=True)

    dcp.save({"model": model.module.state_dict(), "step": STEPS}, checkpoint_id=CKPT)
    if rank == 0:
        print(f"saved distributed checkpoint to {CKPT}", flush=True)

    # --- what the serving job does: fresh model, load the checkpoint, same accuracy expected ---
    restored = build_model()
    state = {}
    dcp.load(state, checkpoint_id=CKPT)
    restored.load_state_dict(state["model"])
    restored_acc = evaluate(restored)
    if rank == 0:
        print(f"restored: accuracy {restored_acc:.3f} (step {state['step']})", flush=True)
    if abs(restored_acc - trained_acc) > 1e-6:
        raise SystemExit(f"restored accuracy {restored_acc:.3f} != trained {trained_acc:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
