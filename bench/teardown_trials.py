"""Does a 2-rank gloo job end? exercise01's last moves (all_reduce, barrier, destroy_process_group, exit), repeated.

  python bench/teardown_trials.py --trials 200 --pairs 2            # labkit.finish as the exercises end
  python bench/teardown_trials.py --ending destroy-then-exit        # torch's documented ending, interpreter exit

Two processes on this host (loopback, a TCPStore on a free port) per trial, `--pairs` trials at once so that
they load each other; a trial that runs past `--timeout` s counts as a hang, and every hung process's stacks,
Python and native (`py-spy dump --native`), are printed before it is killed. What each ending does after the
all_reduce is in ENDINGS; `--ending` picks one (the default is the one exercises/labkit.py uses).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

EXERCISES = Path(__file__).resolve().parent.parent / "exercises"
# One rank's program: the ending's name is argv[1].
WORKER = """
import os, sys, datetime
sys.path.insert(0, os.environ["LAB_EXERCISES"])
import torch, torch.distributed as dist
import labkit
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
total = torch.tensor([rank + 1])
dist.all_reduce(total)
ending = sys.argv[1]
if ending == "labkit":
    labkit.finish()
elif ending == "destroy-then-exit":
    dist.barrier()
    dist.destroy_process_group()
elif ending == "barrier-destroy-os-exit":
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)
"""
ENDINGS = ("labkit", "destroy-then-exit", "barrier-destroy-os-exit")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stacks(pid: int) -> str:
    spy = Path(sys.executable).parent / "py-spy"
    result = subprocess.run([str(spy), "dump", "--native", "--pid", str(pid)], capture_output=True, text=True, timeout=60)
    return result.stdout + result.stderr


def trial(ending: str, timeout: float) -> tuple[str, float, str]:
    """('ok' | 'hang' | 'exit N', seconds, stacks of a hang)."""
    port = free_port()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        processes = []
        for rank in range(2):
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                   "MASTER_PORT": str(port), "LAB_EXERCISES": str(EXERCISES), "OMP_NUM_THREADS": "1"}
            env.pop("LAB_RESULTS_DIR", None)
            processes.append(subprocess.Popen([sys.executable, "-c", WORKER, ending], env=env, cwd=folder,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        deadline = started + timeout
        for process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        hung = [p for p in processes if p.poll() is None]
        dumps = "".join(f"--- rank {processes.index(p)} (pid {p.pid}) ---\n{stacks(p.pid)}" for p in hung)
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
        seconds = time.monotonic() - started
        if hung:
            return "hang", seconds, dumps
        codes = [p.returncode for p in processes]
        if any(codes):
            errors = " | ".join((p.stderr.read() or "").strip().splitlines()[-1:][0] if p.stderr else "" for p in processes
                                if p.returncode)
            return f"exit {codes}", seconds, errors[-400:]
        return "ok", seconds, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=2, help="trials run at once")
    parser.add_argument("--timeout", type=float, default=150, help="seconds before a trial counts as hung")
    parser.add_argument("--ending", choices=ENDINGS, default="labkit")
    args = parser.parse_args()
    print(f"{args.trials} trials of '{args.ending}', {args.pairs} at once; load {os.getloadavg()}", flush=True)
    counts: dict[str, int] = {}
    with ThreadPoolExecutor(args.pairs) as pool:
        for index, (outcome, seconds, detail) in enumerate(pool.map(lambda _: trial(args.ending, args.timeout),
                                                                    range(args.trials))):
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome != "ok":
                print(f"trial {index + 1}: {outcome} after {seconds:.1f} s\n{detail}", flush=True)
            elif (index + 1) % 10 == 0:
                print(f"trial {index + 1}: {counts}; load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"done: {counts}; load {os.getloadavg()}")
    sys.exit(1 if set(counts) - {"ok"} else 0)


if __name__ == "__main__":
    main()
