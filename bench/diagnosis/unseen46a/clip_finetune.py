import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 1000
CTX = 16
DIM = 64


class TextTower(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(CTX, dim))
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, ids):
        x = self.tok(ids) + self.pos[: ids.shape[1]]
        return self.mlp(x).mean(1)


class VisionTower(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 4, stride=4)
        self.proj = nn.Linear(16 * 8 * 8, dim)

    def forward(self, img):
        return self.proj(self.conv(img).flatten(1))


class CLIP(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = VisionTower(DIM)
        self.text = TextTower(VOCAB, DIM)
        self.logit_scale = nn.Parameter(torch.tensor(2.659))

    def forward(self, img, ids):
        i = F.normalize(self.visual(img), dim=-1)
        t = F.normalize(self.text(ids), dim=-1)
        return i, t, self.logit_scale.exp()


def fetch_pretrained_text_tower():
    g = torch.Generator().manual_seed(1234)
    return {
        "tok.weight": torch.randn(VOCAB + 8, DIM, generator=g) * 0.02,
        "pos": torch.randn(CTX, DIM, generator=g) * 0.01,
    }


def load_pretrained(model):
    sd = fetch_pretrained_text_tower()
    n_ckpt = sd["tok.weight"].shape[0]
    if n_ckpt != model.text.tok.num_embeddings:
        model.text.tok = nn.Embedding(n_ckpt, DIM)
    model.text.load_state_dict(sd, strict=False)
    print(f"loaded pretrained text tower ({n_ckpt} tokens)", flush=True)


def batches(rank, steps, bs):
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        img = torch.randn(bs, 3, 32, 32, generator=g)
        ids = torch.randint(0, VOCAB, (bs, CTX), generator=g)
        yield img, ids


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = CLIP()
    if rank == 0:
        load_pretrained(model)
    model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    for step, (img, ids) in enumerate(batches(rank, 20, 8)):
        i, t, scale = model(img, ids)
        logits = scale * i @ t.t()
        labels = torch.arange(len(logits))
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "clip_ft.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
