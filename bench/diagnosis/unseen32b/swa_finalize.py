import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.swa_utils import AveragedModel, SWALR


def build_groups(world, tp):
    dp_groups = []
    for t in range(tp):
        ranks = list(range(t, world, tp))
        dp_groups.append((ranks, dist.new_group(ranks)))
    rank = dist.get_rank()
    for ranks, g in dp_groups:
        if rank in ranks:
            return g


def make_data(rank, n=256):
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, :4].sum(1, keepdim=True) > 0).float()
    return x, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    tp = int(os.environ.get("TP_SIZE", "1"))
    dp_group = build_groups(world, tp)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    model = DDP(net, process_group=dp_group)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = make_data(rank)
    loss_fn = nn.BCEWithLogitsLoss()
    epochs, swa_start = 6, 3
    swa_model = AveragedModel(model)
    swa_sched = SWALR(opt, swa_lr=0.02)
    for epoch in range(epochs):
        for i in range(0, len(x), 32):
            opt.zero_grad()
            loss = loss_fn(model(x[i:i + 32]), y[i:i + 32])
            loss.backward()
            opt.step()
        if epoch >= swa_start:
            swa_model.update_parameters(model)
            swa_sched.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    with torch.no_grad():
        acc = ((swa_model(x) > 0).float() == y).float().mean()
    dist.all_reduce(acc, op=dist.ReduceOp.AVG)
    if rank == 0:
        torch.save(swa_model.module.module.state_dict(), "swa_final.pt")
        print(f"swa accuracy {acc.item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
