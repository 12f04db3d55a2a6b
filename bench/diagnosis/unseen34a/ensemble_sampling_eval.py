"""Ensemble sampling evaluation: every rank hosts one ensemble member (a small LM checkpoint),
logits are averaged across ranks and constrained sampling picks the next tokens for a batch of prompts."""
import os
import json
import datetime

import torch
import torch.nn as nn
import torch.distributed as dist

VOCAB = 64
HIDDEN = 32
BATCH = 8
STEPS = 6
TEMPERATURE = 0.8


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.rnn = nn.GRU(HIDDEN, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids):
        out, _ = self.rnn(self.emb(ids))
        return self.head(out[:, -1])


def build_prompts(n_real):
    g = torch.Generator().manual_seed(7)
    prompts = torch.randint(1, VOCAB, (BATCH, 5), generator=g)
    allowed = torch.zeros(BATCH, VOCAB, dtype=torch.bool)
    for i in range(n_real):
        allowed[i, torch.randperm(VOCAB, generator=g)[:12]] = True
    # rows past n_real are batch filler; their outputs are dropped below
    return prompts, allowed


def ensemble_logits(model, ids, allowed, world):
    logits = model(ids) / TEMPERATURE
    logits = logits.masked_fill(~allowed, torch.finfo(logits.dtype).min)
    if world > 1:
        dist.all_reduce(logits)
        logits = logits / world
    return logits


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(1000 + rank)
    model = TinyLM().eval()

    n_real = 6
    prompts, allowed = build_prompts(n_real)
    sampler = torch.Generator().manual_seed(1234)
    ids = prompts.clone()
    with torch.no_grad():
        for step in range(STEPS):
            logits = ensemble_logits(model, ids, allowed, world)
            probs = torch.softmax(logits, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=sampler)
            ids = torch.cat([ids, nxt], dim=1)

    generated = ids[:n_real, prompts.shape[1]:]
    in_set = allowed[:n_real].gather(1, generated).float().mean().item()
    if rank == 0:
        report = {"members": world, "steps": STEPS, "constraint_rate": in_set,
                  "samples": generated.tolist()}
        with open("ensemble_sampling_report.json", "w") as f:
            json.dump(report, f, indent=2)
        print(f"constraint rate {in_set:.3f} over {n_real} prompts, {world} members")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
