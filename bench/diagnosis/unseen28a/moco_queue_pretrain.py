import os
import copy
import datetime
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

QUEUE_SIZE = 96
BATCH = 16
DIM = 32
TEMP = 0.07
MOMENTUM = 0.99


def encoder():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, DIM))


@torch.no_grad()
def concat_all_gather(t):
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t.contiguous())
    return torch.cat(out, dim=0)


class MoCo(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder_q = encoder()
        self.encoder_k = copy.deepcopy(self.encoder_q)
        for p in self.encoder_k.parameters():
            p.requires_grad = False
        self.register_buffer("queue", F.normalize(torch.randn(DIM, QUEUE_SIZE), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def momentum_update(self):
        for q, k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            k.mul_(MOMENTUM).add_(q.detach(), alpha=1 - MOMENTUM)

    @torch.no_grad()
    def enqueue(self, keys):
        keys = concat_all_gather(keys)
        n = keys.shape[0]
        ptr = int(self.queue_ptr)
        self.queue[:, ptr:ptr + n] = keys.T
        self.queue_ptr[0] = (ptr + n) % QUEUE_SIZE

    def forward(self, x_q, x_k):
        q = F.normalize(self.encoder_q(x_q), dim=1)
        with torch.no_grad():
            self.momentum_update()
            k = F.normalize(self.encoder_k(x_k), dim=1)
        l_pos = (q * k).sum(1, keepdim=True)
        l_neg = q @ self.queue.clone().detach()
        logits = torch.cat([l_pos, l_neg], dim=1) / TEMP
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self.enqueue(k)
        return logits, labels


def augment(x, g):
    return x + 0.1 * torch.randn(x.shape, generator=g)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(MoCo(), broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
    g = torch.Generator().manual_seed(rank)
    if rank == 0:
        print(f"world {world} batch/rank {BATCH} queue {QUEUE_SIZE}", flush=True)
    for step in range(30):
        x = torch.randn(BATCH, 64, generator=g)
        logits, labels = model(augment(x, g), augment(x, g))
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(model.module.encoder_q.state_dict(), "moco_encoder_q.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
