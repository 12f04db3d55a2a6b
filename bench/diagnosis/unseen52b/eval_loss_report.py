import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist


def setup():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def gather_across_ranks(t):
    world = dist.get_world_size()
    if world == 1:
        return t
    parts = [torch.zeros_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=0)


def make_shard(rank, n=256, dim=16):
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(n, dim, generator=g)
    w = torch.linspace(-1, 1, dim)
    y = (x @ w > 0).long()
    return x, y


@torch.no_grad()
def evaluate(model, x, y, batch_size=32):
    model.eval()
    crit = nn.CrossEntropyLoss()
    losses, preds = [], []
    for i in range(0, x.size(0), batch_size):
        logits = model(x[i:i + batch_size])
        losses.append(crit(logits, y[i:i + batch_size]))
        preds.append(logits.argmax(-1))
    mean_loss = torch.stack(losses).mean()
    return mean_loss, torch.cat(preds)


def main():
    rank, world = setup()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    x, y = make_shard(rank)
    loss, preds = evaluate(model, x, y)

    all_preds = gather_across_ranks(preds)
    all_labels = gather_across_ranks(y)
    all_loss = gather_across_ranks(loss)

    if rank == 0:
        acc = (all_preds == all_labels).float().mean().item()
        print(f"eval over {all_preds.numel()} samples: acc={acc:.4f} "
              f"loss={all_loss.mean().item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
