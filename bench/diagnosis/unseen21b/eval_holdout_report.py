"""Distributed evaluation on a held-out split; every rank scores a shard and rank 0 appends the report."""
import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def parse_args():
    p = argparse.ArgumentParser(description="evaluate a classifier on the held-out split")
    p.add_argument("--split", default=os.environ.get("EVAL_SPLIT", "holdout"))
    p.add_argument("--num-samples", type=int, default=int(os.environ.get("EVAL_SAMPLES", "2048")))
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--tag", default=None, help="report tag; resolved once for the whole job")
    p.add_argument("--report", type=argparse.FileType("a"), default="eval_report.jsonl",
                   help="JSON-lines file the summary is appended to")
    return p.parse_args()


def resolve(args):
    if args.tag is None:
        args.tag = f"{args.split}-{time.strftime('%Y%m%d-%H%M%S')}"
    return args


def synchronize_args(args, rank):
    box = [vars(args) if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return argparse.Namespace(**box[0])


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))


def shard(num_samples, rank, world):
    g = torch.Generator().manual_seed(2024)
    x = torch.randn(num_samples, 12, generator=g)
    y = (x[:, :3].sum(dim=1) > 0).float()
    return x[rank::world], y[rank::world]


@torch.no_grad()
def evaluate(model, x, y, args):
    correct = torch.zeros(1)
    seen = torch.zeros(1)
    for i in range(0, x.shape[0], args.batch_size):
        prob = torch.sigmoid(model(x[i:i + args.batch_size]).squeeze(1))
        correct += ((prob > args.threshold).float() == y[i:i + args.batch_size]).sum()
        seen += prob.numel()
    return correct, seen


def main():
    args = resolve(parse_args())
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world > 1:
        args = synchronize_args(args, rank)

    model = make_model().eval()
    x, y = shard(args.num_samples, rank, world)
    correct, seen = evaluate(model, x, y, args)
    totals = torch.cat([correct, seen])
    dist.all_reduce(totals)

    if rank == 0:
        summary = {"tag": args.tag, "split": args.split, "world_size": world,
                   "accuracy": round(totals[0].item() / totals[1].item(), 4),
                   "samples": int(totals[1].item())}
        args.report.write(json.dumps(summary) + "\n")
        args.report.flush()
        print(json.dumps(summary), flush=True)
    args.report.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
