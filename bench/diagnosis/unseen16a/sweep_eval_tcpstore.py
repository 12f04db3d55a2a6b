"""Evaluate a sweep of candidate checkpoints on every node, handing the candidates out through a TCPStore.

    python sweep_eval_tcpstore.py --rank R --world-size W     (MASTER_ADDR / MASTER_PORT from the environment)

No process group is needed: the store is the whole coordination. Rank 0 hosts it; rank r evaluates candidates
r, r + W, r + 2W, ... and publishes each accuracy under acc/<index>; rank 0 writes the leaderboard once every accuracy
is in. Each rank also saves its predictions for error analysis and registers the file in the store.
"""
import argparse
import json
import os
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

DIM, CLASSES = 32, 4
HIDDEN_SIZES = [32, 64, 96, 128, 192, 256, 384, 512]


def eval_set(n=4096, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g)
    teacher = torch.randn(DIM, CLASSES, generator=g)
    return x, (x @ teacher).argmax(1)


def candidate(index):
    """Stands in for loading checkpoint `index` of the sweep: one model per hidden size, fitted briefly."""
    torch.manual_seed(index)
    hidden = HIDDEN_SIZES[index]
    return torch.nn.Sequential(torch.nn.Linear(DIM, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, CLASSES))


def fit(model, x, y, steps=60):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[:1024]), y[:1024]).backward()
        opt.step()
    return model


@torch.no_grad()
def accuracy(model, x, y):
    return (model(x).argmax(1) == y).float().mean().item()


@torch.no_grad()
def save_predictions(models, x, out_dir, rank):
    """Full logits of every candidate this rank evaluated, with test-time noise averaging (slow on purpose: 32 passes)."""
    preds = {}
    for index, model in models.items():
        logits = torch.zeros(x.shape[0], CLASSES)
        for k in range(32):
            noisy = x + 0.01 * torch.randn_like(x)
            logits += model(noisy)
        preds[index] = (logits / 32).softmax(1)
    path = out_dir / f"preds-rank{rank}.pt"
    torch.save(preds, path)
    return path


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    args = parser.parse_args()
    rank, world = args.rank, args.world_size

    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          is_master=rank == 0, timeout=timedelta(seconds=60))
    x, y = eval_set()
    out_dir = Path(os.environ.get("SWEEP_DIR", "sweep-out"))
    out_dir.mkdir(parents=True, exist_ok=True)

    mine = {}
    for index in range(rank, len(HIDDEN_SIZES), world):
        model = fit(candidate(index), x, y)
        acc = accuracy(model, x, y)
        store.set(f"acc/{index}", json.dumps({"hidden": HIDDEN_SIZES[index], "acc": acc, "rank": rank}))
        mine[index] = model
        print(f"rank {rank}: candidate {index} (hidden {HIDDEN_SIZES[index]}) acc {acc:.3f}", flush=True)

    started = time.time()
    path = save_predictions(mine, x, out_dir, rank)
    store.set(f"preds/{rank}", str(path))
    print(f"rank {rank}: predictions saved in {time.time() - started:.1f} s -> {path}", flush=True)

    if rank == 0:
        # every accuracy is in the store once its evaluator set it: get() waits for the slower ranks
        board = [json.loads(store.get(f"acc/{i}")) for i in range(len(HIDDEN_SIZES))]
        board.sort(key=lambda row: -row["acc"])
        (out_dir / "leaderboard.json").write_text(json.dumps(board, indent=1))
        print("best:", board[0], flush=True)


if __name__ == "__main__":
    main()
