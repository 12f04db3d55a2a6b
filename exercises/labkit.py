"""Small helpers shared by the exercise programs.

The lab puts this folder on PYTHONPATH. Everything here reads the standard
torch.distributed environment (RANK, WORLD_SIZE, MASTER_ADDR, ...) plus a few LAB_*
variables, so the programs also run under plain torchrun on a real cluster.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import socket
import sys
import time

import torch
# torch.optim imports torch._dynamo on first use; imported after init_process_group it keeps the default group
# alive past destroy_process_group, and gloo's threads left running at exit sometimes abort it (SIGABRT).
# Importing it here, before any program calls init(), keeps every exercise clear of that.
import torch._dynamo  # noqa: F401
import torch.distributed as dist


def env_int(name: str, default: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise SystemExit(f"environment variable {name} is not set; launch this program with `lab run`")
        return default
    return int(value)


def node_rank() -> int:
    """NODE_RANK from the lab, GROUP_RANK from torchrun, SLURM_NODEID under srun."""
    return env_int("NODE_RANK", env_int("GROUP_RANK", env_int("SLURM_NODEID", 0)))


def nnodes() -> int:
    return env_int("NNODES", env_int("GROUP_WORLD_SIZE", 1))


def nproc_per_node() -> int:
    return env_int("NPROC_PER_NODE", env_int("LOCAL_WORLD_SIZE", 1))


def pick_backend(local_rank: int = 0) -> str:
    """nccl when this rank has its own CUDA device, gloo otherwise (LAB_BACKEND overrides)."""
    wanted = os.environ.get("LAB_BACKEND", "auto")
    if wanted != "auto":
        return wanted
    if torch.cuda.is_available() and torch.cuda.device_count() > local_rank:
        return "nccl"
    return "gloo"


def device_for(backend: str, local_rank: int) -> torch.device:
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def init(rank: int | None = None, world_size: int | None = None, local_rank: int = 0) -> tuple[str, torch.device]:
    """init_process_group by env:// with a short timeout, so a missing peer fails fast."""
    backend = pick_backend(local_rank)
    timeout = datetime.timedelta(seconds=env_int("LAB_PG_TIMEOUT", 60))
    kwargs = {}
    if rank is not None:
        kwargs = {"rank": rank, "world_size": world_size}
    known_rank = rank if rank is not None else env_int("RANK", -1)
    if known_rank >= 0:
        _event(known_rank, "started", _process_start_time())
        _event(known_rank, "init")
    dist.init_process_group(backend=backend, init_method="env://", timeout=timeout, **kwargs)
    if known_rank < 0:
        _event(dist.get_rank(), "started", _process_start_time())
    _event(dist.get_rank(), "pg_ready")
    return backend, device_for(backend, local_rank)


def finish() -> None:
    """Leave the process group together, then end the process at once. Call it last.

    The barrier keeps any rank from leaving while a peer still talks to it. Then, on gloo, nothing is torn down:
    gloo has no shutdown of its own (ProcessGroupGloo does not override Backend::shutdown), so
    destroy_process_group only drops Python's references and runs gloo's C++ teardown inline: the destructor waits
    for its work queue, joins its worker threads and closes every pair, each close waiting on the transport loop's
    condition variable for a tick (gloo/transport/tcp/loop.cc) while the peer closes its side at the same moment.
    The reliability trials caught a rank hung there (1 run in 100, load 3-15); before os._exit, objects that outlived
    the group were freed in interpreter finalization with gloo's threads running (1 in 20 hung or aborted). A
    process that ends now needs none of it: os._exit skips every destructor and the kernel closes the sockets.
    NCCL is different: its communicators must be aborted, so destroy_process_group stays for it.
    """
    dist.barrier()
    rank = dist.get_rank()
    backend = dist.get_backend()
    _write_last_step(rank)
    if backend != "gloo":
        dist.destroy_process_group()
    _event(rank, "finished")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def log(rank: int, message: str) -> None:
    print(f"[rank {rank}] {message}", flush=True)


def results_dir() -> str:
    path = os.environ.get("LAB_RESULTS_DIR", os.path.join(os.getcwd(), "results"))
    os.makedirs(path, exist_ok=True)
    return path


def work_dir() -> str:
    """Folder shared by all nodes for this run (snapshots, data); survives restarts."""
    path = os.environ.get("LAB_WORK_DIR", os.path.join(os.getcwd(), "work"))
    os.makedirs(path, exist_ok=True)
    return path


def write_result(rank: int, **payload) -> None:
    """Write this rank's result as JSON; the checker reads one file per rank."""
    record = {
        "rank": rank,
        "hostname": socket.gethostname(),
        "node_rank": node_rank(),
        "pid": os.getpid(),
        **payload,
    }
    path = os.path.join(results_dir(), f"rank{rank}.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(record, handle, indent=1, default=_json_default)
    os.replace(path + ".tmp", path)
    _write_last_step(rank)
    _event(rank, "result")


def append_metric(rank: int, **values) -> None:
    """Append one line of metrics (step, loss, ...) for training curves; it also marks a step on the timeline."""
    path = os.path.join(results_dir(), f"metrics-rank{rank}.jsonl")
    with open(path, "a") as handle:
        handle.write(json.dumps(values, default=_json_default) + "\n")
    mark_step(rank, values.get("step"))


# The rank's timeline (`events-rank<r>.jsonl` in the results folder, drawn by the lab as timeline.png): one line
# per moment, wall-clock seconds: started (the process), init (init_process_group called), pg_ready, step (the
# first, then at most one every STEP_EVENT_SECONDS, and the last at finish), result, finished.
STEP_EVENT_SECONDS = 2.0
_last_step: tuple[object, float] | None = None  # (step, when) of the latest step not yet written
_step_written_at: float | None = None


def mark_step(rank: int, step: object = None) -> None:
    """Note that `rank` finished a training step, for the first/last step markers of the timeline."""
    global _last_step, _step_written_at
    now = time.time()
    if _step_written_at is None or now - _step_written_at >= STEP_EVENT_SECONDS:
        _event(rank, "step", now, step=step)
        _step_written_at, _last_step = now, None
    else:
        _last_step = (step, now)


def _write_last_step(rank: int) -> None:
    """The latest step, if the throttle held it back: the timeline's last-step marker must be the real last one."""
    global _last_step
    if _last_step is not None:
        _event(rank, "step", _last_step[1], step=_last_step[0])
        _last_step = None


def _event(rank: int, name: str, when: float | None = None, **extra) -> None:
    """Append one event to the rank's events file; one short line per write, so restarts of a rank append.

    Only when a launcher asked for results in a folder (LAB_RESULTS_DIR): a program run by hand writes no timeline.
    """
    if "LAB_RESULTS_DIR" not in os.environ:
        return
    line = {"event": name, "time": round(time.time() if when is None else when, 3), "rank": rank,
            "node_rank": node_rank(), "hostname": socket.gethostname(), "pid": os.getpid(), **extra}
    with open(os.path.join(results_dir(), f"events-rank{rank}.jsonl"), "a") as handle:
        handle.write(json.dumps(line, default=_json_default) + "\n")


def _process_start_time() -> float:
    """When this process started (wall clock), so the timeline includes its imports; now where /proc cannot say.

    /proc/self/stat gives the start in clock ticks since boot; the boot clock read now turns it into wall clock
    (/proc/stat's btime is whole seconds only).
    """
    try:
        with open("/proc/self/stat") as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()


def parameters_hash(module: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in module.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _json_default(value):
    if isinstance(value, torch.Tensor):
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def fail(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(1)


def torchrun_env() -> dict[str, int]:
    """The identity torchrun gives each worker, read from its environment."""
    return {
        "rank": env_int("RANK"),
        "local_rank": env_int("LOCAL_RANK"),
        "world_size": env_int("WORLD_SIZE"),
        "group_rank": env_int("GROUP_RANK"),
        "local_world_size": env_int("LOCAL_WORLD_SIZE"),
    }


def wrap_ddp(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """DDP around `model` on `device`: one GPU per process (device_ids) with NCCL, no device_ids on CPU."""
    from torch.nn.parallel import DistributedDataParallel

    model = model.to(device)
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def global_mean(value: float, device: torch.device) -> float:
    """Mean of a per-rank number over all ranks (every rank gets the same answer)."""
    total = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return total.item() / dist.get_world_size()
