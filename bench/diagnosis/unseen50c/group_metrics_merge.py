"""Per-group (fairness slice) evaluation: every rank scores its shard, rank 0 merges the reports."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

GROUPS = ["a", "b", "c", "d"]


class GroupReport:
    def __init__(self, name):
        self.name = name
        self.n = 0
        self.tp = self.fp = self.fn = 0
        self._scores = []
        self._labels = []

    def update(self, scores, labels, threshold=0.5):
        pred = scores >= threshold
        self.n += int(labels.numel())
        self.tp += int((pred & (labels == 1)).sum())
        self.fp += int((pred & (labels == 0)).sum())
        self.fn += int((~pred & (labels == 1)).sum())
        self._scores.append(scores)
        self._labels.append(labels)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_scores")
        state.pop("_labels")
        return state

    def merge(self, other):
        self.n += other.n
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self._scores.extend(other._scores)
        self._labels.extend(other._labels)
        return self

    def summary(self):
        s = torch.cat(self._scores)
        y = torch.cat(self._labels).float()
        prec = self.tp / max(self.tp + self.fp, 1)
        rec = self.tp / max(self.tp + self.fn, 1)
        brier = float(((s - y) ** 2).mean())
        return {"n": self.n, "precision": round(prec, 4), "recall": round(rec, 4), "brier": round(brier, 4)}


def all_gather_reports(obj):
    world = dist.get_world_size()
    if world == 1:
        return [obj]
    out = [None] * world
    dist.all_gather_object(out, obj)
    return out


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(5 + rank)
    reports = {name: GroupReport(name) for name in GROUPS}
    for _ in range(8):
        scores = torch.rand(256, generator=g)
        labels = (torch.rand(256, generator=g) < scores).long()
        groups = torch.randint(0, len(GROUPS), (256,), generator=g)
        for i, name in enumerate(GROUPS):
            m = groups == i
            reports[name].update(scores[m], labels[m])

    gathered = all_gather_reports(reports)
    if rank == 0:
        merged = {name: GroupReport(name) for name in GROUPS}
        for part in gathered:
            for name in GROUPS:
                merged[name].merge(part[name])
        for name in GROUPS:
            print(name, merged[name].summary())
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
