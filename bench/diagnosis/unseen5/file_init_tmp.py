"""Rendezvous through a shared file instead of a TCP master (as in the docs' file:// example)."""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist

INIT_FILE = "/tmp/ddp_rendezvous"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    args = ap.parse_args()
    dist.init_process_group("gloo", init_method=f"file://{INIT_FILE}", rank=args.rank,
                            world_size=args.world_size,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    t = torch.ones(4) * (args.rank + 1)
    dist.all_reduce(t)
    print(f"rank {args.rank}: {t.tolist()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
