import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, DIM, CTX = 50, 32, 48


class CharLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.attn = nn.MultiheadAttention(DIM, 4, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))
        self.out = nn.Linear(DIM, VOCAB)
        self.register_buffer("causal", torch.triu(torch.ones(CTX, CTX, dtype=torch.bool), 1))

    def forward(self, x):
        T = x.size(1)
        h = self.emb(x)
        a, _ = self.attn(h, h, h, attn_mask=self.causal[:T, :T], need_weights=False)
        h = h + a
        h = h + self.ff(h)
        return self.out(h)


@torch.no_grad()
def sample(model, prompt, n_new=20):
    seq = prompt.clone()
    for _ in range(n_new):
        logits = model(seq[:, -CTX:])[:, -1]
        nxt = torch.argmax(logits, dim=-1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
    return seq


def curriculum_length(step):
    return min(CTX, 16 + 8 * (step // 4))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(CharLM())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(12):
        T = curriculum_length(step)
        seq = torch.randint(0, VOCAB, (8, T + 1), generator=g)
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 4 == 3 and rank == 0:
            model.eval()
            out = sample(model, torch.tensor([[1, 2, 3]]))
            model.train()
            print(f"step {step} loss {loss.item():.3f} sample {out[0].tolist()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
