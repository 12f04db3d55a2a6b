"""Run records on disk: list them, load one, and draw training curves into them."""

from __future__ import annotations

import json
from pathlib import Path

from lab import paths
from lab.errors import LabStateError, SpecError


def list_runs() -> list[dict]:
    runs = []
    for record in sorted(paths.runs_dir().glob("*/run.json")) if paths.runs_dir().is_dir() else []:
        if record.parent.is_symlink():
            continue
        try:
            runs.append(json.loads(record.read_text()))
        except (OSError, ValueError):
            runs.append({"run_id": record.parent.name, "status": "unreadable", "path": str(record.parent)})
    return runs


def load_run(run: str) -> dict:
    """A run by id, unique id prefix, exercise name (its newest run), or 'latest'."""
    runs = list_runs()
    if not runs:
        raise SpecError("no runs recorded yet", "run one with `lab run exercise01`")
    if run == "latest":
        return runs[-1]
    matches = [r for r in runs if r["run_id"].startswith(run)] or [r for r in runs if r.get("exercise") == run]
    if not matches:
        raise SpecError(f"no run '{run}'", "see `lab runs` for recorded runs")
    if len({r.get("exercise") for r in matches}) > 1 and not any(r["run_id"] == run for r in matches):
        raise SpecError(f"'{run}' matches {len(matches)} runs", "give more of the run id")
    found = matches[-1]
    if found.get("status") == "unreadable":
        raise LabStateError(f"run record {found['path']}/run.json is corrupted",
                            "its logs and results are still in that folder; remove the folder to drop the run")
    return found


def plot_curves(record_dir: Path) -> Path | None:
    """loss.png from every rank's metrics-rank*.jsonl (step, loss); None when the run logged none."""
    series: dict[str, list[tuple[float, float]]] = {}
    for metrics in sorted(record_dir.glob("results/*/metrics-rank*.jsonl")):
        step_name, rank = metrics.parent.name, metrics.stem.removeprefix("metrics-rank")
        points = []
        for line in metrics.read_text().splitlines():
            try:
                row = json.loads(line)
                points.append((float(row["step"]), float(row["loss"])))
            except (ValueError, KeyError, TypeError):
                continue
        if points:
            series[f"{step_name} rank {rank}"] = points
    if not series:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for label, points in series.items():
        axes.plot([p[0] for p in points], [p[1] for p in points], label=label, linewidth=1.2)
    axes.set_xlabel("step")
    axes.set_ylabel("loss")
    axes.set_title(record_dir.name)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    target = record_dir / "loss.png"
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return target
