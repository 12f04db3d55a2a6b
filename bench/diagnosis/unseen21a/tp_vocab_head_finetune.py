"""Fine-tune a small LM whose output layer is split by vocabulary across ranks (Megatron-style
column-parallel LM head) with a vocabulary-parallel cross-entropy, so no rank builds full logits."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn as nn

VOCAB, DIM, SEQ, BATCH, STEPS = 4096, 96, 32, 8, 5


class Trunk(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.norm = nn.LayerNorm(DIM)

    def forward(self, ids):
        x = self.emb(ids)
        return self.norm(x + self.mix(x))


class VocabParallelHead(nn.Module):
    def __init__(self, full_weight, rank, world):
        super().__init__()
        per_rank = VOCAB // world
        self.vocab_start, self.vocab_end = rank * per_rank, (rank + 1) * per_rank
        self.weight = nn.Parameter(full_weight[self.vocab_start:self.vocab_end].clone())

    def forward(self, h):
        return h @ self.weight.t()


def vocab_parallel_cross_entropy(local_logits, targets, vocab_start, vocab_end):
    logits_max = local_logits.detach().amax(dim=-1)
    dist.all_reduce(logits_max, op=dist.ReduceOp.MAX)
    shifted = local_logits - logits_max.unsqueeze(-1)
    in_shard = (targets >= vocab_start) & (targets < vocab_end)
    local_targets = targets - vocab_start
    picked = shifted.gather(-1, local_targets.unsqueeze(-1)).squeeze(-1)
    picked = picked * in_shard
    picked = dist_nn.all_reduce(picked)
    sum_exp = dist_nn.all_reduce(shifted.exp().sum(dim=-1))
    return (sum_exp.log() - picked).mean()


def synthetic_batch(gen):
    start = torch.randint(0, VOCAB, (BATCH, 1), generator=gen)
    stride = torch.randint(1, 7, (BATCH, 1), generator=gen)
    seq = (start + stride * torch.arange(SEQ + 1)) % VOCAB
    return seq[:, :-1], seq[:, 1:]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    trunk = Trunk()
    head = VocabParallelHead(torch.randn(VOCAB, DIM) * DIM ** -0.5, rank, world)
    opt = torch.optim.AdamW(list(trunk.parameters()) + list(head.parameters()), lr=1e-3)
    gen = torch.Generator().manual_seed(7)
    for step in range(STEPS):
        ids, targets = synthetic_batch(gen)
        local_logits = head(trunk(ids))
        loss = vocab_parallel_cross_entropy(local_logits, targets, head.vocab_start, head.vocab_end)
        opt.zero_grad()
        loss.backward()
        for p in trunk.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(trunk.state_dict(), "trunk.pt")
    torch.save(head.state_dict(), f"lm_head_shard{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
