"""The forecast as a picture: step time per size split into computation and exposed communication, efficiency on a
second axis, the rehearsal's measured step for reference."""

from __future__ import annotations

from pathlib import Path

from lab.forecast.forecast import Forecast


def draw_forecast(result: Forecast, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [result.rehearsal_row] + [row for row in result.rows if row.nodes != result.rehearsal_row.nodes]
    rows.sort(key=lambda row: row.nodes)
    labels = [f"{row.nodes}" + (" (rehearsal)" if row is result.rehearsal_row else "") for row in rows]
    positions = range(len(rows))
    compute = [row.step_ms - row.comm_exposed_ms for row in rows]
    exposed = [row.comm_exposed_ms for row in rows]
    figure, axes = plt.subplots(figsize=(8, 4.8))
    axes.bar(positions, compute, color="#4c72b0", label="computation (incl. hidden communication)")
    axes.bar(positions, exposed, bottom=compute, color="#dd8452", label="exposed communication")
    axes.axhline(result.measured_step_ms, color="gray", linestyle=":", label=f"rehearsal measured: "
                 f"{result.measured_step_ms:.0f} ms")
    for position, row in zip(positions, rows):
        axes.text(position, row.step_ms, f"{row.step_ms:.0f} ms\n{row.comm_share:.0%} comm", ha="center",
                  va="bottom", fontsize=8)
    axes.set_xticks(list(positions), labels)
    axes.set_xlabel(f"nodes (x {rows[0].nproc_per_node} process(es) each)")
    axes.set_ylabel("step time (ms)")
    axes.set_ylim(0, max(row.step_ms for row in rows) * 1.25)
    efficiency = axes.twinx()
    efficiency.plot(list(positions), [row.efficiency for row in rows], "o-", color="black", label="scaling efficiency")
    efficiency.set_ylim(0, 1.1)
    efficiency.set_ylabel("scaling efficiency (rehearsal step / step)")
    handles, names = axes.get_legend_handles_labels()
    more, more_names = efficiency.get_legend_handles_labels()
    axes.legend(handles + more, names + more_names, loc="upper left", fontsize=8)
    axes.set_title(title + (" — WHAT-IF (--compute-ms), not validated" if result.what_if else ""), fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
