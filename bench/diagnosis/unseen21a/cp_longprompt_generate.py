"""Greedy generation for long prompts with the KV cache split across ranks (context parallel decode):
each rank keeps the keys/values of its slice of the sequence, every decode step merges the partial
attention of all ranks with two all-reduces."""
import datetime
import json
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB, DIM, HEADS, PROMPT, MAX_NEW, BATCH = 1000, 64, 4, 96, 48, 2
HEAD_DIM = DIM // HEADS


class ShardedKVCache:
    def __init__(self, capacity):
        self.k = torch.zeros(BATCH, HEADS, capacity, HEAD_DIM)
        self.v = torch.zeros(BATCH, HEADS, capacity, HEAD_DIM)
        self.length = 0

    def append(self, k, v):
        n = k.shape[2]
        self.k.narrow(2, self.length, n).copy_(k)
        self.v.narrow(2, self.length, n).copy_(v)
        self.length += n

    def view(self):
        return self.k[:, :, :self.length], self.v[:, :, :self.length]


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(PROMPT + MAX_NEW, DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.out = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def project(self, ids, positions):
        x = self.tok(ids) + self.pos(positions)
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        return x, q, k, v


def distributed_decode_attention(q, cache):
    k, v = cache.view()
    scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)
    m = scores.amax(dim=-1, keepdim=True)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    p = torch.exp(scores - m)
    num_den = torch.cat([p @ v, p.sum(dim=-1, keepdim=True)], dim=-1)
    dist.all_reduce(num_den)
    return num_den[..., :-1] / num_den[..., -1:]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyLM().eval()
    prompt = torch.randint(0, VOCAB, (BATCH, PROMPT), generator=torch.Generator().manual_seed(3))
    local = PROMPT // world
    cache = ShardedKVCache(capacity=(PROMPT + MAX_NEW) // world)
    owner_of_tail = world - 1
    generated = []
    with torch.no_grad():
        positions = torch.arange(rank * local, (rank + 1) * local)
        _, _, k, v = model.project(prompt[:, positions], positions)
        cache.append(k, v)
        token, pos = prompt[:, -1:], PROMPT - 1
        for step in range(MAX_NEW):
            x, q, k, v = model.project(token, torch.tensor([pos]))
            if step > 0 and rank == owner_of_tail:
                cache.append(k, v)
            attn = distributed_decode_attention(q, cache)
            h = x + model.out(attn.transpose(1, 2).reshape(BATCH, 1, DIM))
            token = model.head(h).argmax(dim=-1)
            generated.append(token)
            pos += 1
    out = torch.cat(generated, dim=1)
    if rank == 0:
        with open("generations.jsonl", "w") as f:
            for row in out.tolist():
                f.write(json.dumps({"prompt_len": PROMPT, "tokens": row}) + "\n")
        print(f"generated {out.shape[1]} tokens for {BATCH} prompts with cp={world}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
