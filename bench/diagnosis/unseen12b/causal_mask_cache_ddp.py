"""Fine-tune a small causal language model with DDP on variable-length token sequences.

Batches are padded only to the longest sequence in the batch (dynamic padding keeps the step cheap). The attention
block caches its causal mask in a buffer and grows the cache when a longer batch arrives.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

VOCAB, DIM, HEADS = 96, 32, 4


class TokenSequences(Dataset):
    """Synthetic corpus: sequences of 8..80 tokens (a counting pattern the model can learn)."""

    def __init__(self, n=512, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.lengths = torch.randint(8, 81, (n,), generator=g).tolist()
        self.starts = torch.randint(0, VOCAB, (n,), generator=g).tolist()

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        return (torch.arange(self.lengths[i] + 1) + self.starts[i]) % VOCAB


def pad_batch(seqs):
    longest = max(len(s) for s in seqs)
    batch = torch.zeros(len(seqs), longest, dtype=torch.long)
    mask = torch.zeros(len(seqs), longest, dtype=torch.bool)
    for row, s in enumerate(seqs):
        batch[row, : len(s)] = s
        mask[row, : len(s)] = True
    return batch, mask


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, cached_len=16):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        # not saved in checkpoints, rebuilt on demand
        self.register_buffer("causal_mask", torch.ones(cached_len, cached_len).tril().bool(), persistent=False)

    def mask_for(self, length):
        if length > self.causal_mask.size(0):
            # grow the cache to the longest sequence seen so far
            self.causal_mask = torch.ones(length, length, device=self.causal_mask.device).tril().bool()
        return self.causal_mask[:length, :length]

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask_for(t))
        return self.out(att.transpose(1, 2).reshape(b, t, d))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.attn = CausalSelfAttention(DIM, HEADS)
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        h = self.embed(tokens)
        h = h + self.attn(h)
        return self.head(self.norm(h))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = TokenSequences()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = DataLoader(data, batch_size=8, sampler=sampler, collate_fn=pad_batch)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (tokens, mask) in enumerate(loader):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1), reduction="none")
            loss = (loss * mask[:, 1:].reshape(-1)).sum() / mask[:, 1:].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 8 == 0:
                print(f"rank {rank} epoch {epoch} step {step} len {tokens.size(1)} loss {loss.item():.3f}", flush=True)
    dist.barrier()
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
