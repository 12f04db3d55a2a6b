"""RLHF rollout scoring: score responses with a reward model, keep running reward statistics, whiten rewards."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB, HID, RESP_LEN = 50, 24, 10
ROLLOUTS_PER_STEP = 4
STEPS = 4


class RewardModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, HID, mode="mean")
        self.score = nn.Sequential(nn.Linear(HID, HID), nn.ReLU(), nn.Linear(HID, 1))

    def forward(self, ids):
        return self.score(self.emb(ids)).squeeze(-1)


class RunningMoments:
    def __init__(self):
        self.mean, self.var, self.count = 0.0, 1.0, 1e-8

    def update(self, xs):
        n_local = torch.tensor([float(xs.numel())])
        stats = torch.stack([xs.mean() * xs.numel(), xs.var() * xs.numel()])
        dist.all_reduce(n_local)
        dist.all_reduce(stats)
        n = n_local.item()
        batch_mean, batch_var = (stats[0] / n).item(), (stats[1] / n).item()
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean += delta * n / total
        m2 = self.var * self.count + batch_var * n + delta ** 2 * self.count * n / total
        self.var = m2 / total
        self.count = total
        return batch_mean, batch_var ** 0.5


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    rm = RewardModel().eval()
    for p in rm.parameters():
        dist.broadcast(p.data, 0)
    moments = RunningMoments()
    per_rank = ROLLOUTS_PER_STEP // world
    gen = torch.Generator().manual_seed(7 + rank)

    for step in range(STEPS):
        responses = torch.randint(0, VOCAB, (per_rank, RESP_LEN), generator=gen)
        with torch.no_grad():
            scores = rm(responses)
        batch_mean, batch_std = moments.update(scores)
        whitened = (scores - moments.mean) / (moments.var ** 0.5 + 1e-6)
        if not torch.isfinite(whitened).all():
            raise FloatingPointError(
                f"step {step}: non-finite whitened rewards (running mean {moments.mean}, var {moments.var})")
        kl_penalty = 0.05 * torch.rand(per_rank, generator=gen)
        final = whitened - kl_penalty
        summary = torch.tensor([final.sum().item(), float(final.numel())])
        dist.all_reduce(summary)
        if rank == 0:
            print(f"step {step}: batch mean {batch_mean:.4f} std {batch_std:.4f} "
                  f"final reward {summary[0] / summary[1]:.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
