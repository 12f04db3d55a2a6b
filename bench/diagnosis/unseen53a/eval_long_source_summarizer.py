import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

VOCAB, DIM, HEADS, PAD = 60, 32, 4, 0
SRC_LEN, TGT_LEN, BATCH = 24, 6, 3


def gather_along_time(x):
    world = dist.get_world_size()
    if world == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=1)


class Summarizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM, padding_idx=PAD)
        self.enc = nn.GRU(DIM, DIM, batch_first=True)
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, src_chunk, tgt):
        memory, _ = self.enc(self.emb(src_chunk))
        memory = gather_along_time(memory)
        pad_mask = src_chunk.eq(PAD)
        query = self.emb(tgt)
        ctx, _ = self.attn(query, memory, memory, key_padding_mask=pad_mask)
        return self.out(ctx)


def make_batch():
    g = torch.Generator().manual_seed(7)
    src = torch.randint(1, VOCAB, (BATCH, SRC_LEN), generator=g)
    src[:, SRC_LEN - 5:] = PAD
    tgt = torch.randint(1, VOCAB, (BATCH, TGT_LEN), generator=g)
    return src, tgt


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = Summarizer().eval()
    src, tgt = make_batch()
    src_chunk = src.chunk(world, dim=1)[rank]
    with torch.no_grad():
        logits = model(src_chunk, tgt)
        tokens = logits.argmax(-1)
        agree = (tokens == tgt).float().mean().reshape(1)
    dist.all_reduce(agree)
    if rank == 0:
        print(f"token agreement {agree.item() / world:.3f} shape {tuple(logits.shape)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
