"""BiLSTM CTC acoustic model trained on length-sorted utterances with packed sequences (SortaGrad style)."""
import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

N_FEAT, HIDDEN, VOCAB, BATCH, N_UTTS = 20, 48, 28, 8, 203


def synthetic_utterances(n, seed=7):
    g = torch.Generator().manual_seed(seed)
    utts = []
    for _ in range(n):
        frames = int(torch.randint(20, 160, (1,), generator=g))
        labels = torch.randint(1, VOCAB, (max(1, frames // 10),), generator=g)
        utts.append((torch.randn(frames, N_FEAT, generator=g), labels))
    return utts


def shard_indices(lengths, rank, world):
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    per_rank = math.ceil(len(order) / world)
    mine = order[rank::world]
    mine += order[: per_rank - len(mine)]
    return mine


class AcousticModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(N_FEAT, HIDDEN, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(2 * HIDDEN, VOCAB)

    def forward(self, feats, lengths):
        packed = pack_padded_sequence(feats, lengths, batch_first=True, enforce_sorted=True)
        out, _ = self.lstm(packed)
        out, out_lengths = pad_packed_sequence(out, batch_first=True)
        return self.out(out).log_softmax(-1), out_lengths


def collate(items):
    lengths = torch.tensor([f.shape[0] for f, _ in items])
    feats = torch.zeros(len(items), int(lengths.max()), N_FEAT)
    for i, (f, _) in enumerate(items):
        feats[i, : f.shape[0]] = f
    return feats, lengths, torch.cat([y for _, y in items]), torch.tensor([len(y) for _, y in items])


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    utts = synthetic_utterances(N_UTTS)
    idx = shard_indices([f.shape[0] for f, _ in utts], rank, world)
    model = DDP(AcousticModel())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ctc = nn.CTCLoss(zero_infinity=True)

    total, steps = 0.0, 0
    for start in range(0, len(idx), BATCH):
        feats, lengths, targets, target_lengths = collate([utts[i] for i in idx[start:start + BATCH]])
        log_probs, out_lengths = model(feats, lengths)
        loss = ctc(log_probs.transpose(0, 1), targets, out_lengths, target_lengths)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        total, steps = total + loss.item(), steps + 1

    mean = torch.tensor([total / steps])
    dist.all_reduce(mean)
    if rank == 0:
        print(f"epoch 0 (sorted) done: {steps} steps/rank, mean ctc {mean.item() / world:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
