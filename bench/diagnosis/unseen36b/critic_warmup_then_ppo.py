"""RLHF critic warm-up: fit the value head on frozen-policy rollouts for a few updates, then run joint PPO."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, HID, SEQ, BATCH = 48, 32, 10, 8
WARMUP_UPDATES, PPO_UPDATES = 3, 3


class PolicyWithValueHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, HID)
        self.body = nn.Sequential(nn.Linear(HID, HID), nn.Tanh())
        self.lm_head = nn.Linear(HID, VOCAB)
        self.value_head = nn.Linear(HID, 1)

    def forward(self, ids):
        h = self.body(self.emb(ids))
        return self.lm_head(h), self.value_head(h).squeeze(-1)


def make_batch(gen):
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
    returns = (ids[:, 1:] % 5 == 0).float().flip(1).cumsum(1).flip(1) * 0.1
    return ids, returns


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(PolicyWithValueHead())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    value_params = list(model.module.value_head.parameters())
    gen = torch.Generator().manual_seed(5 + rank)

    for step in range(WARMUP_UPDATES + PPO_UPDATES):
        ids, returns = make_batch(gen)
        logits, values = model(ids[:, :-1])
        value_loss = 0.5 * (values - returns).pow(2).mean()
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        adv = (returns - values).detach()
        policy_loss = -(adv * logp).mean()
        opt.zero_grad()
        if step < WARMUP_UPDATES:
            value_loss.backward(inputs=value_params)
        else:
            (policy_loss + value_loss).backward()
        opt.step()
        stats = torch.tensor([value_loss.item(), policy_loss.item()])
        dist.all_reduce(stats, op=dist.ReduceOp.AVG)
        if rank == 0:
            phase = "warmup" if step < WARMUP_UPDATES else "ppo"
            print(f"{phase} step {step}: value {stats[0]:.4f} policy {stats[1]:.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
