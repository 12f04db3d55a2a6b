import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

NUM_CLASSES = 6


def make_shard(rank, n):
    gen = torch.Generator().manual_seed(31 + rank)
    x = torch.randn(n, 20, generator=gen)
    y = (x[:, :NUM_CLASSES].argmax(dim=1) + (torch.rand(n, generator=gen) < 0.2).long()) % NUM_CLASSES
    return x, y


def confusion(pred, target):
    idx = target * NUM_CLASSES + pred
    return torch.bincount(idx, minlength=NUM_CLASSES * NUM_CLASSES).reshape(NUM_CLASSES, NUM_CLASSES)


def report(cm):
    tp = cm.diag().double()
    precision = tp / cm.sum(dim=0).clamp(min=1)
    recall = tp / cm.sum(dim=1).clamp(min=1)
    f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-9)
    print(f"accuracy {tp.sum().item() / cm.sum().item():.4f}  macro-F1 {f1.mean().item():.4f}", flush=True)
    for c in range(NUM_CLASSES):
        print(f"  class {c}: P={precision[c]:.3f} R={recall[c]:.3f} support={int(cm[c].sum())}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples-per-rank", type=int, default=2000)
    args = p.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, NUM_CLASSES)).eval()
    x, y = make_shard(rank, args.samples_per_rank)
    with torch.no_grad():
        pred = model(x).argmax(dim=1)
    local_cm = confusion(pred, y)

    per_rank = [torch.zeros_like(local_cm) for _ in range(world)]
    dist.gather(local_cm, gather_list=per_rank, dst=0)

    if rank == 0:
        for r, cm in enumerate(per_rank):
            print(f"rank {r}: {int(cm.sum())} samples, accuracy {cm.diag().sum().item() / cm.sum().item():.4f}",
                  flush=True)
        report(torch.stack(per_rank).sum(dim=0))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
