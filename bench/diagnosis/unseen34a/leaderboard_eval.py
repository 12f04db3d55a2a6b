"""Leaderboard evaluation loop: submissions are dealt round-robin to ranks, each rank scores its
submissions on the hidden test set and ranks them; rank 0 merges the ranked lists into the final
leaderboard and writes it as a markdown table."""
import os
import heapq
import datetime

import torch
import torch.distributed as dist

N_TEST = 300

SUBMISSIONS = [
    {"team": "orca", "method": "threshold", "params": {"t": 0.1}},
    {"team": "orca", "method": "threshold", "params": {"t": 0.1}, "resubmission": True},
    {"team": "lynx", "method": "threshold", "params": {"t": 0.4}},
    {"team": "kiwi", "method": "margin", "params": {"m": 0.2}},
    {"team": "yak", "method": "threshold", "params": {"t": -0.3}},
    {"team": "emu", "method": "margin", "params": {"m": 0.6}},
]


def hidden_test_set():
    g = torch.Generator().manual_seed(2024)
    scores = torch.randn(N_TEST, 2, generator=g)
    labels = (scores[:, 0] + 0.3 * torch.randn(N_TEST, generator=g) > 0).long()
    return scores, labels


def predict(sub, scores):
    if sub["method"] == "threshold":
        return (scores[:, 0] > sub["params"]["t"]).long()
    return (scores[:, 0] - sub["params"]["m"] * scores[:, 1] > 0).long()


def score_submissions(mine, scores, labels):
    results = []
    for sub in mine:
        acc = (predict(sub, scores) == labels).float().mean().item()
        results.append((round(acc, 4), sub))
    results.sort(key=lambda r: r[0], reverse=True)
    return results


def write_table(board, path):
    with open(path, "w") as f:
        f.write("| # | team | method | params | accuracy |\n|---|---|---|---|---|\n")
        for i, (acc, sub) in enumerate(board, 1):
            f.write(f"| {i} | {sub['team']} | {sub['method']} | {sub['params']} | {acc:.4f} |\n")


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    scores, labels = hidden_test_set()
    mine = SUBMISSIONS[rank::world]
    ranked = score_submissions(mine, scores, labels)

    if world > 1:
        gathered = [None] * world
        dist.all_gather_object(gathered, ranked)
        board = list(heapq.merge(*gathered, reverse=True))
    else:
        board = ranked

    if rank == 0:
        write_table(board, "leaderboard.md")
        for i, (acc, sub) in enumerate(board, 1):
            print(f"{i:2d}. {sub['team']:6s} {acc:.4f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
