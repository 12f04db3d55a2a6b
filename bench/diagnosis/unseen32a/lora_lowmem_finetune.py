import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, DIM, LAYERS, RANK_R = 512, 128, 4, 8


class LoRALinear(nn.Module):
    def __init__(self, base, r=RANK_R, alpha=16):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(r, base.in_features) * 0.01)
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, r))
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.t() @ self.lora_b.t()) * self.scale


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(nn.Linear(DIM, DIM, bias=False) for _ in range(LAYERS))
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids):
        h = self.emb(ids)
        for blk in self.blocks:
            h = h + torch.tanh(blk(h))
        return self.head(h)


def load_base_model(rank):
    if rank == 0:
        torch.manual_seed(1234)
        model = TinyLM()
    else:
        with torch.device("meta"):
            model = TinyLM()
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    return model


def add_adapters(model):
    for p in model.parameters():
        p.requires_grad_(False)
    for i, blk in enumerate(model.blocks):
        model.blocks[i] = LoRALinear(blk)
    return model


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = add_adapters(load_base_model(rank))
    torch.manual_seed(0)
    for m in model.modules():
        if isinstance(m, LoRALinear):
            nn.init.normal_(m.lora_a, std=0.01)
    ddp = DDP(model)
    opt = torch.optim.AdamW([p for p in ddp.parameters() if p.requires_grad], lr=1e-3)
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(20):
        ids = torch.randint(0, VOCAB, (8, 33), generator=g)
        logits = ddp(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            print(f"rank {rank}/{world} step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save({k: v for k, v in model.state_dict().items() if "lora_" in k}, "adapter.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
