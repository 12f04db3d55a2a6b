"""Train a bag-of-words intent classifier on 2 nodes (DDP) from a JSONL corpus and its manifest.

The corpus is exported by the data team as `intents/data.jsonl` plus `intents/manifest.json` (record count, label
set). This script makes a synthetic export when none is there, then trains with a DistributedSampler and
DataLoader workers.
"""
import datetime
import json
import os
import random
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

DATA = Path("intents")
VOCAB = 512
MAX_TOKENS = 24
LABELS = ["billing", "cancel", "upgrade", "support", "other"]


def export_corpus(n_records: int = 1000) -> None:
    """What the data team's export looks like: one JSON object per line, some transcripts came out empty."""
    rng = random.Random(7)
    DATA.mkdir(exist_ok=True)
    with open(DATA / "data.jsonl", "w") as out:
        for i in range(n_records):
            label = rng.randrange(len(LABELS))
            n_words = 0 if rng.random() < 0.006 else rng.randint(3, 20)
            words = [f"w{(label * 97 + rng.randint(0, 60)) % VOCAB}" for _ in range(n_words)]
            out.write(json.dumps({"id": i, "text": " ".join(words), "label": LABELS[label]}) + "\n")
    (DATA / "manifest.json").write_text(json.dumps({"num_records": n_records, "labels": LABELS}))


class IntentDataset(Dataset):
    def __init__(self, root: Path) -> None:
        self.manifest = json.loads((root / "manifest.json").read_text())
        self.label_ids = {name: i for i, name in enumerate(self.manifest["labels"])}
        self.records = []
        with open(root / "data.jsonl") as f:
            for line in f:
                rec = json.loads(line)
                if not rec["text"].strip():
                    continue  # empty transcript: nothing to learn from
                self.records.append(rec)

    def __len__(self) -> int:
        return self.manifest["num_records"]

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, int]:
        rec = self.records[idx]
        ids = [int(w[1:]) for w in rec["text"].split()][:MAX_TOKENS]
        tokens = torch.zeros(MAX_TOKENS, dtype=torch.long)
        tokens[: len(ids)] = torch.tensor(ids, dtype=torch.long)
        return tokens, self.label_ids[rec["label"]]


class BagOfWords(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, 64, mode="mean", padding_idx=0)
        self.head = nn.Linear(64, len(LABELS))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens))


def main() -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    if rank == 0 and not (DATA / "manifest.json").exists():
        export_corpus()
    dist.barrier()

    dataset = IntentDataset(DATA)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler, num_workers=2)
    torch.manual_seed(0)
    model = DDP(BagOfWords())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(3):
        sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for tokens, labels in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(tokens), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()
            count += 1
        print(f"rank {rank} epoch {epoch}: {count} batches, mean loss {total / count:.4f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
