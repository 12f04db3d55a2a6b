"""Two-terminal training script: python free_port_per_node.py --rank R --world-size W (MASTER_ADDR from the env)."""
import argparse
import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist


def find_free_port() -> int:
    """Pick a port nobody uses, so two jobs on one machine never clash."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    args = parser.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(find_free_port())
    print(f"rank {args.rank}: rendezvous at {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    t = torch.ones(1) * (args.rank + 1)
    dist.all_reduce(t)
    print(f"rank {args.rank}: sum {t.item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
