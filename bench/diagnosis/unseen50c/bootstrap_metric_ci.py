"""Bootstrapped confidence intervals for accuracy and Brier score, data sharded by rank."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

N_BOOT = 200
ALPHA = 0.05


def all_sum(values):
    if dist.get_world_size() == 1:
        return values if len(values) > 1 else values[0]
    t = torch.tensor(values, dtype=torch.float32)
    dist.all_reduce(t)
    return t.tolist() if len(values) > 1 else t.item()


def load_shard(rank, world, n_total=2000, n_classes=4):
    g = torch.Generator().manual_seed(99)
    probs = torch.softmax(torch.randn(n_total, n_classes, generator=g) * 2, dim=-1)
    labels = torch.multinomial(probs, 1, generator=g).squeeze(1)
    return probs[rank::world], labels[rank::world]


def gather_cat(t):
    world = dist.get_world_size()
    if world == 1:
        return t
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([t.shape[0]]))
    max_n = int(max(s.item() for s in sizes))
    padded = torch.zeros((max_n,) + t.shape[1:], dtype=t.dtype)
    padded[: t.shape[0]] = t
    out = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(out, padded)
    return torch.cat([o[: int(s.item())] for o, s in zip(out, sizes)])


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    probs, labels = load_shard(rank, world)

    correct = (probs.argmax(-1) == labels).float()
    onehot = torch.nn.functional.one_hot(labels, probs.shape[1]).float()
    brier = ((probs - onehot) ** 2).sum(-1)
    n_global = all_sum([labels.numel()])

    all_correct = gather_cat(correct)
    all_brier = gather_cat(brier)
    g = torch.Generator().manual_seed(2024 + rank)
    boots = N_BOOT // world + (1 if rank < N_BOOT % world else 0)
    idx = torch.randint(0, n_global, (boots, n_global), generator=g)
    acc_s = all_correct[idx].mean(1)
    brier_s = all_brier[idx].mean(1)

    acc_all = gather_cat(acc_s)
    brier_all = gather_cat(brier_s)
    if rank == 0:
        lo, hi = ALPHA / 2, 1 - ALPHA / 2
        print(f"n={n_global} accuracy={all_correct.mean():.4f} "
              f"CI=[{acc_all.quantile(lo):.4f}, {acc_all.quantile(hi):.4f}]")
        print(f"brier={all_brier.mean():.4f} "
              f"CI=[{brier_all.quantile(lo):.4f}, {brier_all.quantile(hi):.4f}]")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
