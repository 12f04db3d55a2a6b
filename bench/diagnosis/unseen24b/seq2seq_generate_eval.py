"""Batched greedy generation with the byte-level normaliser model over the dev prompts, scored on rank 0."""
import argparse
import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

PAD, BOS, EOS = 0, 1, 2


class ByteSeq2Seq(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.emb = nn.Embedding(256, hidden)
        self.enc = nn.GRU(hidden, hidden, batch_first=True)
        self.dec = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, 256)

    @torch.no_grad()
    def generate(self, src, max_new_tokens):
        _, h = self.enc(self.emb(src))
        h = h[0]
        tok = torch.full((src.size(0),), BOS, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        steps = []
        for _ in range(max_new_tokens):
            h = self.dec(self.emb(tok), h)
            tok = self.out(h).argmax(-1)
            tok = torch.where(done, torch.full_like(tok, PAD), tok)
            steps.append(tok)
            done |= tok == EOS
            if done.all():
                break
        return torch.stack(steps, dim=1)


def make_prompts(n):
    rng = random.Random(7)
    words = ["colour", "organise", "centre", "travelled", "catalogue", "defence", "programme", "analyse"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 6))) for _ in range(n)]


def encode(texts):
    rows = [list(t.encode()) for t in texts]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long)


def gather_padded(t, pad_index=-100):
    world = dist.get_world_size()
    size = torch.tensor([t.size(1)], dtype=torch.long)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    width = max(int(s) for s in sizes)
    if t.size(1) < width:
        t = torch.cat([t, t.new_full((t.size(0), width - t.size(1)), pad_index)], dim=1)
    out = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(out, t)
    return torch.cat(out, dim=0)


def decode(row):
    ids = [int(i) for i in row if int(i) not in (PAD, EOS)]
    return bytes(ids).decode("utf-8", errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = ByteSeq2Seq().eval()

    prompts = sorted(make_prompts(args.num_prompts), key=len)
    per_rank = (len(prompts) + world - 1) // world
    mine = prompts[rank * per_rank:(rank + 1) * per_rank]
    outputs = []
    for i in range(0, len(mine), args.batch_size):
        src = encode(mine[i:i + args.batch_size])
        budget = int(src.size(1) * 1.2) + 4
        outputs.append(model.generate(src, max_new_tokens=budget))
    width = max(o.size(1) for o in outputs)
    local = torch.cat([nn.functional.pad(o, (0, width - o.size(1)), value=PAD) for o in outputs])
    print(f"rank {rank}: generated {local.size(0)} sequences, width {width}", flush=True)

    generated = gather_padded(local)
    if rank == 0:
        texts = [decode(row) for row in generated]
        refs = prompts
        exact = sum(t.strip() == r.replace("our", "or") for t, r in zip(texts, refs)) / len(refs)
        avg_len = sum(len(t) for t in texts) / len(texts)
        print(f"exact match {exact:.3f}, mean output length {avg_len:.1f} over {len(texts)} prompts",
              flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
