import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 512


def parse_args():
    p = argparse.ArgumentParser(description="tiny LM pretraining run sized in tokens")
    p.add_argument("--token-budget", type=int, default=60_000)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-len", type=int, default=128)
    return p.parse_args()


class TinyLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        self.mix = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        h, _ = self.mix(self.emb(ids))
        return self.out(h)


def document_stream(rank, max_len):
    g = torch.Generator().manual_seed(1000 + rank)
    while True:
        n = int(torch.randint(16, max_len + 1, (1,), generator=g))
        yield torch.randint(1, VOCAB, (n,), generator=g)


def batches(rank, batch_size, max_len):
    docs = document_stream(rank, max_len)
    while True:
        seqs = [next(docs) for _ in range(batch_size)]
        longest = max(len(s) for s in seqs)
        ids = torch.zeros(batch_size, longest, dtype=torch.long)
        mask = torch.zeros(batch_size, longest, dtype=torch.bool)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = True
        yield ids, mask


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    tokens_seen = 0
    step = 0
    for ids, mask in batches(rank, args.batch_size, args.max_len):
        logits = model(ids[:, :-1])
        target = ids[:, 1:].masked_fill(~mask[:, 1:], -100)
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        tokens_seen += int(mask.sum())
        if step % 20 == 0:
            print(f"rank {rank} step {step} tokens {tokens_seen} loss {loss.item():.3f}", flush=True)
        if tokens_seen >= args.token_budget:
            break
    print(f"rank {rank} reached the budget after {step} steps", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "tiny_lm_final.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
