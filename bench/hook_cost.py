"""What the jobs' sitecustomize (exercises/jobhooks/) costs a process: per torch.distributed call, and per snapshot.

  python bench/hook_cost.py [--calls 5000] [--rounds 5]

One gloo process (world size 1, a FileStore) makes CALLS all_reduce calls of a 4-float tensor, timed in the process;
the same script runs with the hook (PYTHONPATH and LAB_FLIGHT_DIR as the lab sets them) and without it, rounds
alternated so that load from other work hits both; best and median of each, side by side. With the hook, it then
times the wrapped all_reduce beside the one it wraps (`__wrapped__`) in blocks alternated within that process, and
the dump the watcher writes when a call has been pending for a second (a full Flight Recorder, as the hook sizes it,
plus the calls).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HOOKS = Path(__file__).resolve().parent.parent / "exercises" / "jobhooks"

WORKER = """import json, sys, time, torch, torch.distributed as dist
BLOCKS, BLOCK = 40, 100
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
tensor = torch.ones(4)
for _ in range(200):
    dist.all_reduce(tensor)
calls = int(sys.argv[2])
started = time.perf_counter()
for _ in range(calls):
    dist.all_reduce(tensor)
result = {"us_per_call": (time.perf_counter() - started) / calls * 1e6}
hook = sys.modules.get("sitecustomize")
if hasattr(hook, "write_dump"):  # the wrapped call beside the call it wraps, in blocks alternated in this process
    blocks = {"wrapped": [], "original": []}
    for _ in range(BLOCKS):
        for name, call in (("wrapped", dist.all_reduce), ("original", dist.all_reduce.__wrapped__)):
            started = time.perf_counter()
            for _ in range(BLOCK):
                call(tensor)
            blocks[name].append((time.perf_counter() - started) / BLOCK * 1e6)
    result["blocks_us"] = blocks
    started = time.perf_counter()
    for _ in range(20):
        hook.write_dump("pending")
    result["ms_per_snapshot"] = (time.perf_counter() - started) / 20 * 1e3
    result["snapshot_bytes"] = sum(path.stat().st_size for path in __import__("pathlib").Path(
        __import__("os").environ["LAB_FLIGHT_DIR"]).glob("pending-*.json"))
dist.destroy_process_group()
print(json.dumps(result))
"""


def run(folder: Path, calls: int, hooked: bool, index: int) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "LAB_FLIGHT_DIR")}
    if hooked:
        env.update(PYTHONPATH=str(HOOKS), LAB_FLIGHT_DIR=str(folder / f"flight{index}"), LAB_NODE="0")
    script = folder / "worker.py"
    script.write_text(WORKER)
    out = subprocess.run([sys.executable, str(script), str(folder / f"store{index}"), str(calls)], env=env,
                         capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    plain, hooked = [], []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(args.rounds):
            plain.append(run(Path(folder), args.calls, False, index))
            hooked.append(run(Path(folder), args.calls, True, index))
    per_call = {name: sorted(result["us_per_call"] for result in results)
                for name, results in (("without", plain), ("with", hooked))}
    snapshot = sorted(result["ms_per_snapshot"] for result in hooked)
    blocks = {name: sorted(value for result in hooked for value in result["blocks_us"][name])
              for name in ("wrapped", "original")}
    print(f"all_reduce of float32[4], world size 1, gloo, {args.calls} calls x {args.rounds} rounds "
          f"(load {load_before:.1f} -> {os.getloadavg()[0]:.1f})")
    print("| | best us/call | median us/call |\n|---|---|---|")
    for name, values in per_call.items():
        print(f"| {name} the hook | {values[0]:.1f} | {statistics.median(values):.1f} |")
    print(f"| added by the hook | {per_call['with'][0] - per_call['without'][0]:.1f} | "
          f"{statistics.median(per_call['with']) - statistics.median(per_call['without']):.1f} |")
    print("\nIn one hooked process, blocks of 100 calls alternated (40 blocks a round):")
    print("| | best us/call | median us/call |\n|---|---|---|")
    for name, values in blocks.items():
        print(f"| {name} all_reduce | {values[0]:.1f} | {statistics.median(values):.1f} |")
    print(f"| added by the wrapper | {blocks['wrapped'][0] - blocks['original'][0]:.1f} | "
          f"{statistics.median(blocks['wrapped']) - statistics.median(blocks['original']):.1f} |")
    print(f"\npending snapshot (Flight Recorder full, calls kept): best {snapshot[0]:.2f} ms, median "
          f"{statistics.median(snapshot):.2f} ms, {hooked[0]['snapshot_bytes']} bytes")
    print(json.dumps({"per_call_us": per_call, "blocks_us": blocks, "snapshot_ms": snapshot}))


if __name__ == "__main__":
    main()
