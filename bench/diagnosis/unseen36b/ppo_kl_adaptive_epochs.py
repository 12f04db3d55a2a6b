"""PPO-for-LM update phase with an adaptive KL controller against a frozen reference policy."""
import copy
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, HID, SEQ = 40, 32, 12
MINIBATCH = 8
TARGET_KL, HORIZON = 0.02, 1000


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, HID)
        self.mlp = nn.Sequential(nn.Linear(HID, HID), nn.GELU(), nn.Linear(HID, VOCAB))

    def forward(self, ids):
        return self.mlp(self.emb(ids))


class AdaptiveKL:
    def __init__(self, init=0.1):
        self.value = init

    def update(self, kl, n_steps):
        err = max(min(kl / TARGET_KL - 1, 0.2), -0.2)
        self.value *= 1 + err * n_steps / HORIZON


def token_logp(logits, ids):
    return torch.log_softmax(logits, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    base = LM()
    ref = copy.deepcopy(base).eval().requires_grad_(False)
    policy = DDP(base)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    kl_ctl = AdaptiveKL()
    gen = torch.Generator().manual_seed(31 + rank)

    n_kept = 16 + 8 * rank
    seqs = torch.randint(0, VOCAB, (n_kept, SEQ + 1), generator=gen)
    with torch.no_grad():
        old_logp = token_logp(base(seqs[:, :-1]), seqs[:, 1:])
        ref_logp = token_logp(ref(seqs[:, :-1]), seqs[:, 1:])
    scores = torch.randn(n_kept, generator=gen)
    rewards = scores.unsqueeze(1) - kl_ctl.value * (old_logp - ref_logp)
    adv = (rewards - rewards.mean()) / (rewards.std() + 1e-6)

    kl_sum, n_mb = 0.0, 0
    with policy.join():
        for start in range(0, n_kept, MINIBATCH):
            mb = slice(start, start + MINIBATCH)
            logp = token_logp(policy(seqs[mb, :-1]), seqs[mb, 1:])
            ratio = torch.exp(logp - old_logp[mb])
            loss = -torch.min(ratio * adv[mb], ratio.clamp(0.8, 1.2) * adv[mb]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            approx_kl = (logp.detach() - ref_logp[mb]).mean().reshape(1)
            dist.all_reduce(approx_kl, op=dist.ReduceOp.AVG)
            kl_sum += approx_kl.item()
            n_mb += 1

    mean_kl = torch.tensor([kl_sum / max(n_mb, 1)])
    dist.all_reduce(mean_kl, op=dist.ReduceOp.AVG)
    kl_ctl.update(mean_kl.item(), n_steps=n_kept)
    if rank == 0:
        print(f"mean kl {mean_kl.item():.5f} -> kl coef {kl_ctl.value:.5f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
