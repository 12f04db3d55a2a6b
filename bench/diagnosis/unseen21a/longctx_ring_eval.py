"""Long-context perplexity evaluation with context parallelism: every rank holds one contiguous slice of
each sequence and attention runs as ring attention (key/value blocks travel around the ring)."""
import datetime
import json
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, HEADS, SEQ, BATCH, BATCHES = 256, 64, 4, 64, 2, 8


def ring_pass(t, rank, world):
    if world == 1:
        return t
    t = t.contiguous()
    out = torch.empty_like(t)
    ops = [dist.P2POp(dist.isend, t, (rank + 1) % world),
           dist.P2POp(dist.irecv, out, (rank - 1) % world)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return out


def block_attention(q, k, v, q_pos, k_pos):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    return torch.softmax(scores, dim=-1) @ v, lse


def ring_attention(q, k, v, rank, world, local_len):
    q_pos = torch.arange(rank * local_len, (rank + 1) * local_len)
    out, lse = None, None
    for step in range(world):
        src = (rank - step) % world
        k_pos = torch.arange(src * local_len, (src + 1) * local_len)
        blk_out, blk_lse = block_attention(q, k, v, q_pos, k_pos)
        if out is None:
            out, lse = blk_out, blk_lse
        else:
            new_lse = torch.logaddexp(lse, blk_lse)
            out = torch.exp(lse - new_lse) * out + torch.exp(blk_lse - new_lse) * blk_out
            lse = new_lse
        if step + 1 < world:
            k, v = ring_pass(k, rank, world), ring_pass(v, rank, world)
    return out


class CPBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids, rank, world):
        b, t = ids.shape
        x = self.emb(ids)
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        a = ring_attention(q, k, v, rank, world, t)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, DIM))
        return self.head(self.norm(x))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = CPBlock().eval()
    local = SEQ // world
    gen = torch.Generator().manual_seed(1234)
    totals = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for i in range(BATCHES):
            tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
            ids = tokens[:, rank * local:(rank + 1) * local]
            labels = tokens[:, rank * local + 1:(rank + 1) * local + 1]
            logits = model(ids, rank, world)
            nll = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), reduction="sum")
            batch = torch.tensor([nll.item(), labels.numel()], dtype=torch.float64)
            dist.all_reduce(batch)
            if not torch.isfinite(batch[0]):
                raise FloatingPointError(f"batch {i}: summed NLL is {batch[0].item()}")
            totals += batch
    ppl = math.exp(totals[0].item() / totals[1].item())
    if rank == 0:
        with open("longctx_eval.json", "w") as f:
            json.dump({"seq_len": SEQ, "cp_size": world, "tokens": int(totals[1]), "ppl": ppl}, f)
        print(f"perplexity {ppl:.3f} over {int(totals[1])} tokens", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
