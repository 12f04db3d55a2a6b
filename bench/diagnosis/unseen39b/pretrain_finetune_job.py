import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


def make_batches(rank, n, dim, seed):
    g = torch.Generator().manual_seed(seed + rank)
    return [(torch.randn(16, dim, generator=g), torch.randn(16, 1, generator=g)) for _ in range(n)]


def run_phase(name, model, opt, batches):
    loss_fn = nn.MSELoss()
    last = 0.0
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        last = loss.item()
    t = torch.tensor([last])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    if dist.get_rank() == 0:
        print(f"[{name}] mean final loss {t.item():.4f}", flush=True)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    model = DDP(net)

    # phase 1: pretraining, compressed gradient exchange to save bandwidth
    model.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    run_phase("pretrain", model, opt, make_batches(rank, 20, 32, 100))

    # phase 2: fine-tuning wants exact full-precision gradients
    model.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    run_phase("finetune", model, opt, make_batches(rank, 10, 32, 200))

    if rank == 0:
        torch.save(net.state_dict(), "finetuned.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
