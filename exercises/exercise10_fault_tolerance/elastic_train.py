"""Exercise 10: training that survives a killed worker, and a lost node, by restarting from a snapshot.

torchrun restarts the workers of every node when one fails (up to --max-restarts times);
a restarted worker knows nothing, so everything it needs to continue lives in a snapshot
on the folder all nodes share: weights, optimizer state, epochs done, and the history of
the worlds that trained it. Rank 0 writes it after every epoch; after the first one it
also writes <tag>.first-snapshot, the file the lab waits for before it injects the fault.
With --nnodes MIN:MAX the survivors of a lost node form a smaller world and finish alone.
"""

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import labkit

DATASET_SIZE = 512
FEATURES = 8


def synthetic_dataset() -> TensorDataset:
    """The same data on every rank from a fixed seed: y = tanh(x . w)."""
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(DATASET_SIZE, FEATURES, generator=generator)
    targets = torch.tanh(inputs @ torch.randn(FEATURES, generator=generator))
    return TensorDataset(inputs, targets.unsqueeze(1))


def save_snapshot(path: str, state: dict) -> None:
    """Write to a temporary name, then rename: a worker killed mid-save never leaves half a snapshot."""
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tag", required=True, help="names this step's snapshot <tag>.pt and <tag>.first-snapshot")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--epoch-seconds", type=float, default=0.5,
                        help="pause per epoch of the first launch: stands in for a long epoch, so the fault lands "
                             "mid-training (a launch that resumes from a snapshot has no fault coming: no pause)")
    args = parser.parse_args()

    ids = labkit.torchrun_env()
    rank = ids.pop("rank")
    restart_count = labkit.env_int("TORCHELASTIC_RESTART_COUNT", 0)
    backend, device = labkit.init(local_rank=ids["local_rank"])
    world = dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    snapshot_path = os.path.join(labkit.work_dir(), f"{args.tag}.pt")
    marker_path = os.path.join(labkit.work_dir(), f"{args.tag}.first-snapshot")
    start_epoch, history = 0, []
    if os.path.exists(snapshot_path):
        snapshot = torch.load(snapshot_path, map_location=device)
        model.load_state_dict(snapshot["model"])
        optimizer.load_state_dict(snapshot["optimizer"])
        start_epoch, history = snapshot["epochs_run"], snapshot["history"]
    # One entry per launch of the workers: who trained, from which epoch, after how many restarts.
    history = history + [{"world_size": world, "nodes": labkit.env_int("GROUP_WORLD_SIZE"),
                          "start_epoch": start_epoch, "restart_count": restart_count}]
    labkit.log(rank, f"restart {restart_count}: world of {world}, starting at epoch {start_epoch}")

    ddp_model = labkit.wrap_ddp(model, device)
    sampler = DistributedSampler(synthetic_dataset(), shuffle=True, seed=0)
    loader = DataLoader(sampler.dataset, batch_size=32, sampler=sampler)
    epoch_loss = math.nan
    epochs_trained = []
    pause = args.epoch_seconds if start_epoch == 0 else 0.0
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        losses = []
        for inputs, targets in loader:
            loss = torch.nn.functional.mse_loss(ddp_model(inputs.to(device)), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        time.sleep(pause)
        epoch_loss = labkit.global_mean(sum(losses) / len(losses), device)
        labkit.append_metric(rank, step=epoch, loss=epoch_loss, restart_count=restart_count)
        epochs_trained.append(epoch)
        if rank == 0:
            save_snapshot(snapshot_path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                          "epochs_run": epoch + 1, "history": history})
            if not os.path.exists(marker_path):
                open(marker_path, "w").close()
            labkit.log(rank, f"epoch {epoch}: loss {epoch_loss:.4f}, snapshot saved")

    labkit.write_result(rank, **ids, backend=backend, pg_world_size=world, restart_count=restart_count,
                        start_epoch=start_epoch, epochs_total=args.epochs, epochs_trained=epochs_trained,
                        history=history, dataset_size=DATASET_SIZE, samples=len(sampler), final_loss=epoch_loss,
                        params_hash=labkit.parameters_hash(model))
    labkit.finish()


if __name__ == "__main__":
    main()
