import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class TwoTower(nn.Module):
    def __init__(self, img_dim=48, txt_dim=32, emb=16):
        super().__init__()
        self.visual = nn.Sequential(nn.Linear(img_dim, 64), nn.GELU(), nn.Linear(64, emb))
        self.text = nn.Sequential(nn.Linear(txt_dim, 64), nn.GELU(), nn.Linear(64, emb))
        self.logit_scale = nn.Parameter(torch.tensor(2.659))

    def forward(self, img, txt):
        return (F.normalize(self.visual(img), dim=-1),
                F.normalize(self.text(txt), dim=-1),
                self.logit_scale.exp())


def gather_features(feats):
    world = dist.get_world_size()
    out = [torch.zeros_like(feats) for _ in range(world)]
    dist.all_gather(out, feats.detach())
    out[dist.get_rank()] = feats
    return torch.cat(out, dim=0)


class ClipLoss(nn.Module):
    def forward(self, img_f, txt_f, scale):
        rank = dist.get_rank()
        all_img = gather_features(img_f)
        logits_per_text = scale * txt_f @ all_img.T
        logits_per_image = scale * img_f @ txt_f.T
        n = img_f.shape[0]
        labels = torch.arange(n) + n * rank
        return 0.5 * (F.cross_entropy(logits_per_image, labels)
                      + F.cross_entropy(logits_per_text, labels))


def synthetic_pairs(step, rank, batch):
    g = torch.Generator().manual_seed(1000 * step + rank)
    latent = torch.randn(batch, 8, generator=g)
    img = torch.cat([latent, torch.randn(batch, 40, generator=g) * 0.1], 1)
    txt = torch.cat([latent, torch.randn(batch, 24, generator=g) * 0.1], 1)
    return img, txt


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TwoTower())
    loss_fn = ClipLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    batch = 8
    for step in range(20):
        img, txt = synthetic_pairs(step, rank, batch)
        img_f, txt_f, scale = model(img, txt)
        loss = loss_fn(img_f, txt_f, scale)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.module.logit_scale.clamp_(0, 4.6052)
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f} scale {scale.item():.2f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "clip_tiny.pt")
        print("saved clip_tiny.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
