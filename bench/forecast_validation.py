"""`lab bench --only forecast`: the forecast checked against the lab's own bigger runs, side by side in one run.

Per link rate and workload: rehearse on 2 nodes (`lab torchrun --profile`), forecast 4 and 8 nodes from that record
alone, then run the same job on 4 and 8 nodes with the same per-node CPU limit and link, and compare step time and
communication's share. Nothing measured at 4 or 8 nodes feeds the fit: the forecast is made from the 2-node record
before those runs are read. A change of link alone: the rehearsal on one rate forecast on the other, against the run
on the other rate at the same size.

Workloads: bench/forecast_workload.py (an 8-layer MLP under DDP whose 8.4 MB of gradients go in 8 buckets of
1 MiB), and exercise04's minGPT (`train.py --epochs 2`, one small bucket). Every node gets FORECAST_CPUS of a CPU, so
8 nodes ask 8 x that of this machine's 2 cores (shared with other work: the load is printed beside each run).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from lab.analysis.record import load as load_record  # noqa: E402
from lab.forecast.forecast import TargetCluster, forecast  # noqa: E402
from lab.forecast.rehearsal import PROFILE_FOLDER, load_rehearsal  # noqa: E402
from lab.jobs import adhoc, targets  # noqa: E402
from lab.model.spec import EXERCISES_MOUNT  # noqa: E402

FORECAST_CPUS = 0.2
FORECAST_LINKS = ("100mbit", "400mbit")
FORECAST_SIZES = (2, 4, 8)
WORKLOADS = {
    "ddp-mlp (8 buckets)": (BENCH / "forecast_workload.py", ["--steps", "18"], {}),
    "exercise04 minGPT": (REPO / "exercises" / "exercise04_mingpt" / "train.py", ["--epochs", "2"],
                          {"PYTHONPATH": EXERCISES_MOUNT}),
}
TARGETS = {4: 0.10, 8: 0.15}  # step-time error allowed by nodes
SHARE_POINTS = 0.05
LINK_TARGET = 0.10


def _load() -> str:
    return "%.1f" % os.getloadavg()[0]


class _Quiet:
    def line(self, node: int, text: str) -> None:
        pass

    def event(self, text: str) -> None:
        pass


def profiled_run(name: str, workload: str, calibrate: bool) -> dict:
    """`lab torchrun --profile` through the library (a run only measured skips the link's calibration)."""
    script, args, env = WORKLOADS[workload]
    before = _load()
    started = time.monotonic()
    record = adhoc.run_torchrun(targets.resolve(None, name), 1, "static", script, args, env, 900, _Quiet(),
                                profile=True, calibrate=calibrate)
    if not record.passed:
        raise SystemExit(f"{workload} on {name} failed: see {record.path}")
    return {"run": record.run_id, "seconds": round(time.monotonic() - started, 1), "load": f"{before}->{_load()}"}


def measured(run_id: str) -> dict:
    """What a run measured: its step time and communication share, and (to tell the model's parts apart) the
    computation of a step and the time the link was busy with collectives (their union: gloo runs two at once)."""
    record = load_record(run_id)
    rehearsal = load_rehearsal(record.path / PROFILE_FOLDER, run_id, calibrated=False)
    compute = statistics.median(statistics.median(step.compute for step in rank.window) for rank in rehearsal.ranks)
    busy = statistics.median(statistics.median(_union(step) for step in rank.window) for rank in rehearsal.ranks)
    return {"step_ms": rehearsal.step_seconds * 1000, "comm_share": rehearsal.comm_share, "compute_ms": compute * 1000,
            "comm_ms": busy * 1000}


def _union(step) -> float:
    total, reach = 0.0, None
    for start, end in sorted((c.started, c.ended) for c in step.collectives):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def predicted(run_id: str, nodes: tuple[int, ...], link: str | None = None) -> dict[int, dict]:
    record = load_record(run_id)
    result = forecast(load_rehearsal(record.path / PROFILE_FOLDER, run_id), TargetCluster(nodes, link=link))
    return {row.nodes: {"step_ms": row.step_ms, "comm_share": row.comm_share, "compute_ms": row.compute_ms,
                        "comm_ms": row.comm_ms} for row in result.rows}


def bench_forecast(cli, name: str, results_dir: Path, table) -> dict:
    runs: dict[str, dict] = {}
    started_load = _load()
    for link in FORECAST_LINKS:
        for nodes in FORECAST_SIZES:
            cli("up", "--nodes", str(nodes), "--name", name, "--recreate", "--cpus", str(FORECAST_CPUS), "--link", link,
                "--nproc-per-node", "1", timeout=600)
            time.sleep(3)
            for workload in WORKLOADS:
                key = f"{workload}|{link}|{nodes}"
                runs[key] = profiled_run(name, workload, calibrate=nodes == 2)
                print(f"  {key}: run {runs[key]['run']} in {runs[key]['seconds']} s, load {runs[key]['load']}",
                      flush=True)
    result = compare(runs)
    print_tables(result, table, f"{started_load} -> {_load()}")
    return result


def compare(runs: dict[str, dict]) -> dict:
    """Forecast against measured for every workload and link, from the runs' records alone (so the comparison can be
    made again from a results file, with the model as it is now)."""
    rows, link_rows = [], []
    for workload in WORKLOADS:
        for link in FORECAST_LINKS:
            rehearsal = runs[f"{workload}|{link}|2"]["run"]
            forecasts = predicted(rehearsal, tuple(n for n in FORECAST_SIZES if n != 2))  # the 2-node record only
            for nodes, guess in forecasts.items():
                seen = measured(runs[f"{workload}|{link}|{nodes}"]["run"])
                rows.append(_compare(workload, link, nodes, guess, seen, runs[f"{workload}|{link}|{nodes}"]["load"]))
            other = next(rate for rate in FORECAST_LINKS if rate != link)
            for nodes, guess in predicted(rehearsal, FORECAST_SIZES, other).items():
                seen = measured(runs[f"{workload}|{other}|{nodes}"]["run"])
                link_rows.append(_compare(workload, f"{link} -> {other}", nodes, guess, seen,
                                          runs[f"{workload}|{other}|{nodes}"]["load"]))
    return {"cpus_per_node": FORECAST_CPUS, "runs": runs, "rows": rows, "link_rows": link_rows}


def print_tables(result: dict, table, load: str) -> None:
    headers = ["workload", "link", "nodes", "forecast step (ms)", "measured step (ms)", "error", "forecast comm",
               "measured comm", "points", "compute (ms) forecast / measured", "link busy (ms) forecast / measured",
               "load"]
    print(f"\n## forecast vs measured: rehearsed on 2 nodes, {FORECAST_CPUS} CPU per node ({load})")
    print(table(headers, [_cells(row) for row in result["rows"]]))
    print("\n## a change of link alone: rehearsed on one rate, forecast on the other (2-node rows: the link alone)")
    print(table(headers, [_cells(row) for row in result["link_rows"]]))


def _compare(workload: str, link: str, nodes: int, guess: dict, seen: dict, load: str) -> dict:
    return {"workload": workload, "link": link, "nodes": nodes, "forecast_ms": round(guess["step_ms"], 1),
            "measured_ms": round(seen["step_ms"], 1), "error": round(guess["step_ms"] / seen["step_ms"] - 1, 4),
            "forecast_share": round(guess["comm_share"], 3), "measured_share": round(seen["comm_share"], 3),
            "points": round((guess["comm_share"] - seen["comm_share"]) * 100, 1), "load": load,
            "forecast_compute_ms": round(guess["compute_ms"], 1), "measured_compute_ms": round(seen["compute_ms"], 1),
            "forecast_comm_ms": round(guess["comm_ms"], 1), "measured_comm_ms": round(seen["comm_ms"], 1)}


def _cells(row: dict) -> list:
    return [row["workload"], row["link"], row["nodes"], row["forecast_ms"], row["measured_ms"], f"{row['error']:+.1%}",
            f"{row['forecast_share']:.0%}", f"{row['measured_share']:.0%}", f"{row['points']:+.1f}",
            f"{row['forecast_compute_ms']:.0f} / {row['measured_compute_ms']:.0f}",
            f"{row['forecast_comm_ms']:.0f} / {row['measured_comm_ms']:.0f}", row["load"]]


def verdicts(result: dict) -> list[list]:
    out = []
    for nodes, allowed in TARGETS.items():
        errors = [abs(row["error"]) for row in result["rows"] if row["nodes"] == nodes]
        if errors:
            out.append([f"forecast step-time error at {nodes} nodes (worst of {len(errors)})", f"<= {allowed:.0%}",
                        f"{max(errors):.1%} (median {statistics.median(errors):.1%})", max(errors) <= allowed])
    points = [abs(row["points"]) for row in result["rows"]]
    if points:
        out.append(["forecast comm share (worst)", f"<= {SHARE_POINTS * 100:.0f} points", f"{max(points):.1f} points",
                    max(points) <= SHARE_POINTS * 100])
    link_errors = [abs(row["error"]) for row in result["link_rows"] if row["nodes"] == 2]
    if link_errors:
        out.append(["forecast of a change of link alone (2 nodes, worst)", f"<= {LINK_TARGET:.0%}",
                    f"{max(link_errors):.1%}", max(link_errors) <= LINK_TARGET])
    return out


TRIVIAL = "import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.barrier()\ndist.destroy_process_group()\n"
COST_ROUNDS = 2


def recording_cost(name: str, table) -> dict:
    """What --profile costs, side by side on one lab, rounds alternating: the job itself (its launch to its end) with
    and without it, for a trivial job (init, barrier: no optimizer, nothing profiled) and exercise04 (one epoch:
    6 steps profiled); and the link calibration --profile adds after the job."""
    trivial = Path(tempfile.mkdtemp()) / "trivial.py"
    trivial.write_text(TRIVIAL)
    jobs = {"trivial": (trivial, [], {}),
            "exercise04 (1 epoch)": (WORKLOADS["exercise04 minGPT"][0], ["--epochs", "1"], WORKLOADS["exercise04 minGPT"][2])}
    seconds: dict[tuple[str, bool], list[float]] = {}
    calibration: list[float] = []
    started_load = _load()
    target = targets.resolve(None, name)
    for _ in range(COST_ROUNDS):
        for job, (script, args, env) in jobs.items():
            for profile in (False, True):
                began = time.monotonic()
                record = adhoc.run_torchrun(target, 1, "static", script, args, env, 900, _Quiet(), profile=profile)
                if not record.passed:
                    raise SystemExit(f"{job} failed: see {record.path}")
                seconds.setdefault((job, profile), []).append(record.steps[0].seconds)
                if profile:
                    calibration.append(time.monotonic() - began - record.steps[0].seconds)
    rows = []
    for job in jobs:
        plain, profiled = min(seconds[(job, False)]), min(seconds[(job, True)])
        rows.append([job, round(plain, 2), round(profiled, 2), f"{profiled / plain:.3f}",
                     ", ".join(f"{s:.1f}" for s in seconds[(job, False)]), ", ".join(f"{s:.1f}" for s in seconds[(job, True)])])
    print(f"\n## what --profile costs, best of {COST_ROUNDS} ({started_load} -> {_load()})")
    print(table(["job", "plain (s)", "--profile (s)", "ratio", "plain rounds", "--profile rounds"], rows))
    print(f"link calibration after a --profile run: {min(calibration):.1f} s at best "
          f"({', '.join(f'{s:.1f}' for s in calibration)})")
    return {"rows": rows, "calibration_seconds": calibration}


if __name__ == "__main__":
    import argparse
    import json

    from run import table as markdown_table

    parser = argparse.ArgumentParser(description="Compare again the runs of a results file (lab bench --only "
                                                 "forecast), with the model as it is now; or time what --profile costs.")
    parser.add_argument("--results", type=Path, help="a latest.json holding a forecast part")
    parser.add_argument("--cost", metavar="LAB", help="time --profile on this 2-node lab instead")
    parser.add_argument("--repeat", metavar="LAB", help="one more round of the comm-bound case alone (the MLP on "
                                                        f"{FORECAST_LINKS[0]}, 2, 4 and 8 nodes) on a lab of this name")
    options = parser.parse_args()
    if options.cost:
        print(json.dumps(recording_cost(options.cost, markdown_table)))
    elif options.repeat:
        from run import cli

        workload, link, runs = next(iter(WORKLOADS)), FORECAST_LINKS[0], {}
        for nodes in FORECAST_SIZES:
            cli("up", "--nodes", str(nodes), "--name", options.repeat, "--recreate", "--cpus", str(FORECAST_CPUS),
                "--link", link, "--nproc-per-node", "1", timeout=600)
            runs[f"{workload}|{link}|{nodes}"] = profiled_run(options.repeat, workload, calibrate=nodes == 2)
        cli("down", "--name", options.repeat)
        rehearsal = runs[f"{workload}|{link}|2"]["run"]
        rows = [_compare(workload, link, nodes, guess, measured(runs[f"{workload}|{link}|{nodes}"]["run"]),
                         runs[f"{workload}|{link}|{nodes}"]["load"])
                for nodes, guess in predicted(rehearsal, FORECAST_SIZES).items()]
        print_tables({"rows": rows, "link_rows": []}, markdown_table, "one more round")
        print(json.dumps({"runs": runs, "rows": rows}))
    else:
        again = compare(json.loads(options.results.read_text())["forecast"]["runs"])
        print_tables(again, markdown_table, "loads as measured then")
        print(markdown_table(["what", "target", "measured", "met"], verdicts(again)))
        print(json.dumps(again))
