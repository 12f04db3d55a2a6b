"""Sequence-parallel fine-tuning of a rotary-position decoder layer: each rank embeds and projects its
own slice of every sequence, keys/values are all-gathered for attention, gradients are averaged."""
import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, HEADS, SEQ, BATCH, STEPS = 512, 64, 4, 128, 4, 4
HEAD_DIM = DIM // HEADS


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim), persistent=False)
        self.cached_len = 0

    def _build(self, seq_len):
        t = torch.arange(seq_len, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos_cached, self.sin_cached = emb.cos(), emb.sin()
        self.cached_len = seq_len

    def forward(self, x, position_ids):
        seq_len = x.shape[-2]
        if seq_len > self.cached_len:
            self._build(seq_len)
        return self.cos_cached[position_ids], self.sin_cached[position_ids]


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.out = nn.Linear(DIM, DIM, bias=False)
        self.rope = RotaryEmbedding(HEAD_DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids, position_ids):
        b, t = ids.shape
        x = self.emb(ids)
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        cos, sin = self.rope(q, position_ids)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k_full = torch.cat(dist_nn.all_gather(k.contiguous()), dim=2)
        v_full = torch.cat(dist_nn.all_gather(v.contiguous()), dim=2)
        k_pos = torch.arange(k_full.shape[2])
        mask = k_pos[None, :] <= position_ids[:, None]
        scores = (q @ k_full.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
        attn = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v_full
        x = x + self.out(attn.transpose(1, 2).reshape(b, t, DIM))
        return self.head(x)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DecoderLayer()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    local = SEQ // world
    position_ids = torch.arange(rank * local, (rank + 1) * local)
    gen = torch.Generator().manual_seed(11)
    for step in range(STEPS):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
        ids = tokens[:, rank * local:(rank + 1) * local]
        labels = tokens[:, rank * local + 1:(rank + 1) * local + 1]
        logits = model(ids, position_ids)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        dist.all_reduce(loss.detach(), op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(model.state_dict(), "rope_layer.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
