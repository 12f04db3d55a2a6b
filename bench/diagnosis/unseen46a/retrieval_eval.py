import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist

N_PAIRS = 512
DIM = 48


class Encoders(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.img = nn.Sequential(nn.Linear(96, 96), nn.Tanh(), nn.Linear(96, DIM))
        self.txt = nn.Sequential(nn.Linear(32, 96), nn.Tanh(), nn.Linear(96, DIM))


def make_eval_split():
    g = torch.Generator().manual_seed(3)
    latent = torch.randn(N_PAIRS, 16, generator=g)
    img = torch.cat([latent, torch.randn(N_PAIRS, 80, generator=g) * 0.1], 1)
    txt = torch.cat([latent, torch.randn(N_PAIRS, 16, generator=g) * 0.1], 1)
    return img, txt


def gather_embeddings(x):
    world = dist.get_world_size()
    if world == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x)
    return torch.stack(parts, dim=1).flatten(1)


def recall_at_k(sim, ks=(1, 5, 10)):
    order = sim.argsort(dim=1, descending=True)
    gt = torch.arange(sim.shape[0]).unsqueeze(1)
    pos = (order == gt).float().argmax(dim=1)
    return {f"R@{k}": (pos < k).float().mean().item() * 100 for k in ks}


@torch.no_grad()
def encode_shard(model, img, txt, rank, world, bs=32):
    idx = torch.arange(rank, len(img), world)
    ie, te = [], []
    for s in range(0, len(idx), bs):
        b = idx[s:s + bs]
        ie.append(F.normalize(model.img(img[b]), dim=-1))
        te.append(F.normalize(model.txt(txt[b]), dim=-1))
    return torch.cat(ie), torch.cat(te)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = Encoders().eval()
    img, txt = make_eval_split()
    ie, te = encode_shard(model, img, txt, rank, world)
    all_img = gather_embeddings(ie)
    all_txt = gather_embeddings(te)
    sim = te @ all_img.t()
    i2t = recall_at_k(all_img @ all_txt.t())
    t2i = recall_at_k(all_txt @ all_img.t())
    if rank == 0:
        print("local text->image block", tuple(sim.shape), flush=True)
        print("image->text", {k: round(v, 2) for k, v in i2t.items()}, flush=True)
        print("text->image", {k: round(v, 2) for k, v in t2i.items()}, flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
