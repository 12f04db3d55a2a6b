"""GRPO step: sample G completions per prompt, score them, compute group-relative advantages, update the policy."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, HID, PROMPT_LEN, GEN_LEN = 64, 32, 6, 8
PROMPTS_PER_STEP = 3
NUM_GENERATIONS = 4
STEPS = 3


class TinyPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, HID)
        self.rnn = nn.GRU(HID, HID, batch_first=True)
        self.head = nn.Linear(HID, VOCAB)

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.head(h)


@torch.no_grad()
def sample(policy, prompts):
    ids = prompts
    for _ in range(GEN_LEN):
        logits = policy(ids)[:, -1]
        nxt = torch.multinomial(F.softmax(logits, -1), 1)
        ids = torch.cat([ids, nxt], 1)
    return ids


def reward_fn(seqs):
    completion = seqs[:, PROMPT_LEN:]
    return (completion % 7 == 0).float().mean(1) + 0.1 * (completion[:, -1] > VOCAB // 2).float()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    policy = DDP(TinyPolicy())
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)

    gen = torch.Generator().manual_seed(1234)
    for step in range(STEPS):
        prompts = torch.randint(0, VOCAB, (PROMPTS_PER_STEP, PROMPT_LEN), generator=gen)
        expanded = prompts.repeat_interleave(NUM_GENERATIONS, dim=0)
        per_rank = expanded.size(0) // world
        local_prompts = expanded[rank * per_rank:(rank + 1) * per_rank]

        torch.manual_seed(1000 * step + rank)
        seqs = sample(policy.module, local_prompts)
        rewards = reward_fn(seqs)

        grouped = rewards.view(-1, NUM_GENERATIONS)
        mean = grouped.mean(1, keepdim=True)
        std = grouped.std(1, keepdim=True)
        advantages = ((grouped - mean) / (std + 1e-4)).view(-1)

        logits = policy(seqs[:, :-1])[:, PROMPT_LEN - 1:]
        logp = torch.log_softmax(logits, -1).gather(-1, seqs[:, PROMPT_LEN:].unsqueeze(-1)).squeeze(-1)
        loss = -(advantages.unsqueeze(1) * logp).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

        stats = torch.tensor([rewards.sum().item(), float(rewards.numel())])
        dist.all_reduce(stats)
        if rank == 0:
            print(f"step {step}: mean reward {stats[0] / stats[1]:.3f} loss {loss.item():.4f}", flush=True)

    dist.barrier()
    if rank == 0:
        print("grpo run finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
