import os
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class SigLIPHead(nn.Module):
    def __init__(self, dim=40, emb=24):
        super().__init__()
        self.img_proj = nn.Linear(dim, emb)
        self.txt_proj = nn.Linear(dim, emb)
        self.logit_scale = nn.Parameter(torch.log(torch.tensor(10.0)))
        self.logit_bias = nn.Parameter(torch.tensor(-10.0))

    def forward(self, img, txt):
        return F.normalize(self.img_proj(img), dim=-1), F.normalize(self.txt_proj(txt), dim=-1)


def sigmoid_loss(img_f, txt_f, scale, bias):
    logits = scale * img_f @ txt_f.T + bias
    targets = 2 * torch.eye(logits.shape[0]) - 1
    return -F.logsigmoid(targets * logits).sum() / logits.shape[0]


def make_batch(step, rank, n=12, dim=40):
    g = torch.Generator().manual_seed(step * 31 + rank)
    z = torch.randn(n, dim, generator=g)
    return z + 0.05 * torch.randn(n, dim, generator=g), z + 0.05 * torch.randn(n, dim, generator=g)


def setup():
    if "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
        dist.init_process_group("gloo", timeout=timeout)
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def main():
    rank, world = setup()
    torch.manual_seed(0)
    model = SigLIPHead()
    if world > 1:
        model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    for step in range(15):
        img, txt = make_batch(step, rank)
        img_f, txt_f = model(img, txt)
        loss = sigmoid_loss(img_f, txt_f, model.logit_scale.exp(), model.logit_bias)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        print("finetune done", flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
