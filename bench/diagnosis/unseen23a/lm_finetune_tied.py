import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, DIM, LAYERS, HEADS, CTX = 512, 64, 2, 4, 32


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, DIM)
        self.pos_emb = nn.Embedding(CTX, DIM)
        layer = nn.TransformerEncoderLayer(DIM, HEADS, 4 * DIM, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.tok_emb.weight

    def forward(self, ids):
        t = ids.shape[1]
        h = self.tok_emb(ids) + self.pos_emb(torch.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.blocks(h, mask=mask, is_causal=True)
        return self.lm_head(self.norm(h))


def fetch_pretrained():
    g = torch.Generator().manual_seed(2024)
    ref = TinyLM()
    return {k: torch.randn(v.shape, generator=g) * (1.0 / math.sqrt(v.shape[-1]))
            if v.dim() > 1 else v.clone() for k, v in ref.state_dict().items()}


def build_model(rank):
    if rank == 0:
        model = TinyLM()
        model.load_state_dict(fetch_pretrained())
    else:
        with torch.device("meta"):
            model = TinyLM()
        model.to_empty(device="cpu")
    return model


def batches(rank, n_steps, bsz=8):
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(n_steps):
        start = torch.randint(0, VOCAB, (bsz, 1), generator=g)
        ids = (start + torch.arange(CTX + 1) * 3) % VOCAB
        yield ids[:, :-1], ids[:, 1:]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()

    model = build_model(rank)
    model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    for step, (x, y) in enumerate(batches(rank, 20)):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), "finetuned_lm.pt")
        print("saved finetuned_lm.pt", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
