import os
import json
import datetime

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 350
SEQ = 18
RAW_TOPICS = ["sports", "politics", "tech", "health", "finance", "travel", "science", "music"]


def read_shard(rank, world, n_total=256, seed=5):
    g = torch.Generator().manual_seed(seed)
    topic_ids = torch.randint(0, len(RAW_TOPICS), (n_total,), generator=g)
    x = torch.randint(0, VOCAB, (n_total, SEQ), generator=g)
    x[:, :2] = topic_ids[:, None] * 40 + torch.randint(0, 40, (n_total, 2), generator=g)
    names = [RAW_TOPICS[i] for i in topic_ids.tolist()]
    return x[rank::world], names[rank::world]


def agree_on_labels(local_names):
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, sorted(set(local_names)))
    merged = sorted(set().union(*gathered))
    box = [merged if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def save_label_map(labels, path):
    if "<unk>" not in labels:
        labels.append("<unk>")
    id2label = {i: name for i, name in enumerate(labels)}
    with open(path, "w") as f:
        json.dump({"id2label": id2label, "label2id": {v: k for k, v in id2label.items()}}, f, indent=1)


class TopicClassifier(nn.Module):
    def __init__(self, n_labels, dim=40):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, dim)
        self.drop = nn.Dropout(0.1)
        self.classifier = nn.Linear(dim, n_labels)

    def forward(self, x):
        return self.classifier(self.drop(self.emb(x)))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)

    x, names = read_shard(rank, dist.get_world_size())
    labels = agree_on_labels(names)
    label2id = {name: i for i, name in enumerate(labels)}
    y = torch.tensor([label2id[n] for n in names])

    if rank == 0:
        os.makedirs("outputs", exist_ok=True)
        save_label_map(labels, os.path.join("outputs", "label_map.json"))

    model = DDP(TopicClassifier(n_labels=len(labels)))
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(3):
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        for i in range(0, len(perm) - 15, 16):
            b = perm[i:i + 16]
            loss = loss_fn(model(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        stat = torch.tensor([loss.item(), 1.0], dtype=torch.float64)
        dist.all_reduce(stat)
        if rank == 0:
            print(f"epoch {epoch}: mean last-batch loss {stat[0] / stat[1]:.4f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join("outputs", "topic_classifier.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
