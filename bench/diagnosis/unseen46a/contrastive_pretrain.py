import os
import argparse
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import Dataset, DataLoader, DistributedSampler


class PairSet(Dataset):
    def __init__(self, n, vocab=500, ctx=12):
        g = torch.Generator().manual_seed(7)
        self.img = torch.randn(n, 128, generator=g)
        self.txt = torch.randint(1, vocab, (n, ctx), generator=g)

    def __len__(self):
        return len(self.img)

    def __getitem__(self, i):
        return self.img[i], self.txt[i]


class DualEncoder(nn.Module):
    def __init__(self, vocab=500, dim=64):
        super().__init__()
        self.img = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, dim))
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.txt = nn.Linear(dim, dim)
        self.logit_scale = nn.Parameter(torch.tensor(2.659))

    def forward(self, img, ids):
        return (F.normalize(self.img(img), dim=-1),
                F.normalize(self.txt(self.emb(ids)), dim=-1),
                self.logit_scale.exp())


class GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(out, x)
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        g = torch.stack(grads)
        dist.all_reduce(g)
        return g[dist.get_rank()]


def clip_loss(img, txt, scale, rank, batch_size):
    all_img = torch.cat(GatherWithGrad.apply(img))
    all_txt = torch.cat(GatherWithGrad.apply(txt))
    logits_i = scale * img @ all_txt.t()
    logits_t = scale * txt @ all_img.t()
    labels = torch.arange(img.shape[0]) + rank * batch_size
    return (F.cross_entropy(logits_i, labels) + F.cross_entropy(logits_t, labels)) / 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=64, help="global batch size")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=5e-4)
    args = p.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    ds = PairSet(1024)
    sampler = DistributedSampler(ds, shuffle=True, drop_last=True)
    loader = DataLoader(ds, batch_size=args.batch_size // world, sampler=sampler, drop_last=True)
    model = DDP(DualEncoder())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for step, (img, ids) in enumerate(loader):
            i, t, scale = model(img, ids)
            loss = clip_loss(i, t, scale, rank, args.batch_size)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0 and step % 4 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
