import os
import json
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

NUM_CLASSES = 4


def reduce_metrics(metrics):
    world = dist.get_world_size()
    if world < 2:
        return metrics
    with torch.no_grad():
        names = sorted(metrics.keys())
        values = torch.tensor([float(metrics[k]) for k in names], dtype=torch.float64)
        dist.all_reduce(values)
        values /= world
    return {k: v.item() for k, v in zip(names, values)}


def compute_metrics(logits, labels, loss):
    pred = logits.argmax(-1)
    out = {"loss": loss.item(), "acc": (pred == labels).float().mean().item()}
    for c in range(NUM_CLASSES):
        mask = labels == c
        out[c] = (pred[mask] == c).float().mean().item() if mask.any() else 0.0
    return out


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Linear(8, NUM_CLASSES)
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(rank)
    log_path = "metrics.jsonl"
    for step in range(1, 41):
        x = torch.randn(64, 8, generator=g)
        labels = (x[:, :NUM_CLASSES]).argmax(-1)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        opt.step()
        if step % 10 == 0:
            metrics = reduce_metrics(compute_metrics(logits.detach(), labels, loss.detach()))
            if rank == 0:
                record = {"step": step}
                record.update({f"recall_c{k}" if isinstance(k, int) else k: v
                               for k, v in metrics.items()})
                with open(log_path, "a") as f:
                    f.write(json.dumps(record) + "\n")
                print(record, flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
