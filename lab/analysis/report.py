"""One run as one self-contained HTML page (`report.html` in its record): the verdict, why it failed, a row per rank
(how it ended, the collective it reached), the checks, the steps, the timeline, the loss curves, the stacks of a hung
run and every node's log.

Self-contained: the CSS is inline, the pictures are base64 data URIs and nothing is fetched, so the file can be
mailed, attached to an issue or opened offline. Everything the run wrote is escaped.
"""

from __future__ import annotations

import base64
from datetime import datetime
from html import escape
from pathlib import Path

from lab.analysis.diagnosis.logs import exit_text
from lab.analysis.ranks import RankLine, failed_steps, rank_lines
from lab.analysis.record import RunRecord
from lab.analysis.timeline import draw_timeline, timeline_path

REPORT_FILE = "report.html"
LOG_TAIL_LINES = 5000  # a log longer than this is shown from its end; the full file stays in the record

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1150px; color: #222; padding: 0 16px; }
h1 { font-size: 20px; margin-bottom: 4px; } h2 { font-size: 16px; margin-top: 28px; border-bottom: 1px solid #ddd; }
.meta { color: #666; }
.verdict { padding: 12px 16px; border-radius: 6px; font-size: 18px; font-weight: 600; margin: 16px 0; }
.verdict.passed { background: #e6f4e3; color: #1e5e1a; border: 1px solid #9fd49a; }
.verdict.failed, .verdict.error, .verdict.interrupted {
  background: #fbe9e9; color: #8b1a1a; border: 1px solid #e3a3a3; }
.finding { border-left: 4px solid #c62828; background: #fff7f7; padding: 8px 14px; margin: 10px 0; }
.finding.top { border-left-width: 6px; }
.finding .title { font-weight: 600; } .finding .label { color: #666; display: inline-block; width: 72px; }
table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: 4px 8px; vertical-align: top; }
tr:nth-child(even) { background: #f6f6f6; }
tr.behind td { background: #fff1d6; }
.pass { color: #1e7a1e; font-weight: 600; } .fail { color: #c62828; font-weight: 600; }
img { max-width: 100%; border: 1px solid #e4e4e4; }
pre { background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 12px; white-space: pre-wrap; }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: 600; }
"""


FORECAST_PICTURE = "forecast.png"  # `lab forecast RUN` draws it into the record


def report_path(record: RunRecord) -> Path:
    return record.path / REPORT_FILE


def write_report(record: RunRecord) -> Path:
    """report.html in the record's folder, with the timeline drawn afresh from the record."""
    draw_timeline(record)
    target = report_path(record)
    target.write_text(render(record), encoding="utf-8")
    return target


def render(record: RunRecord) -> str:
    sections = [_header(record), _verdict(record), _findings(record), _ranks(record), _checks(record), _steps(record),
                _picture("Timeline", timeline_path(record), "who ran when: one row per node and per rank"),
                _picture("Loss", record.path / "loss.png", "training loss per rank"),
                _picture("Forecast", record.path / FORECAST_PICTURE,
                         "how the job scales: step time, exposed communication and efficiency per size (lab forecast)"),
                _stacks(record), _logs(record)]
    body = "\n".join(section for section in sections if section)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>lab report: {escape(record.run_id)}</title><style>{STYLE}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")


def _header(record: RunRecord) -> str:
    return (f"<h1>{escape(record.exercise)} on lab '{escape(record.lab)}'</h1>\n"
            f"<div class=\"meta\">run {escape(record.run_id)}, {record.seconds:.1f} s; record: "
            f"{escape(str(record.path))}; report written {datetime.now().strftime('%Y-%m-%d %H:%M:%S')}</div>")


def _verdict(record: RunRecord) -> str:
    failed = [check for check in record.checks if not check.passed]
    if record.passed:
        text = f"PASSED: all {len(record.checks)} checks passed"
    elif record.status in ("failed", "passed"):
        text = f"FAILED: {len(failed)} of {len(record.checks)} checks failed"
    else:
        text = f"{record.status.upper()}" + (f": {record.error}" if record.error else "")
    return f"<div class=\"verdict {escape(record.status)}\" id=\"verdict\">{escape(text)}</div>"


def _findings(record: RunRecord) -> str:
    if not record.diagnosis:
        return ""
    blocks = []
    for index, finding in enumerate(record.diagnosis):
        where = ", ".join(part for part in (
            f"node{finding['node']}" if finding.get("node") is not None else "",
            f"rank {finding['rank']}" if finding.get("rank") is not None else "",
            f"step {finding['step']}" if finding.get("step") else "") if part)
        title = escape(str(finding.get("title", ""))) + (f" ({escape(where)})" if where else "")
        blocks.append(
            f"<div class=\"finding{' top' if index == 0 else ''}\">"
            f"<div class=\"title\">{title}</div>"
            f"<div><span class=\"label\">evidence</span><code>{escape(str(finding.get('evidence', '')))}</code></div>"
            f"<div><span class=\"label\">fix</span>{escape(str(finding.get('fix', '')))}</div></div>")
    more = (f"<details><summary>{len(blocks) - 1} more finding(s)</summary>{''.join(blocks[1:])}</details>"
            if len(blocks) > 1 else "")
    return f"<h2>Why</h2>\n<div id=\"top-finding\">{blocks[0]}</div>\n{more}"


BEHIND = ' class="behind"'


def _ranks(record: RunRecord) -> str:
    """A row per rank of each step that did not end well: the rank behind (or late to) the others stands out."""
    tables = []
    for step in failed_steps(record):
        lines = rank_lines(record, step)
        if not lines:
            continue
        rows = "".join(
            f"<tr{BEHIND if line.behind or line.late else ''}><td>{line.rank}</td><td>node{line.node}</td>"
            f"<td>{escape(line.ended)}</td><td>{escape(line.waiting or line.call or '')}</td>"
            f"<td>{escape(_collective_cell(line))}</td>"
            f"<td>{line.behind or ''}</td><td><code>{escape(line.last_output or '')}</code></td></tr>" for line in lines)
        caption = f" (step {escape(step.name)})" if len(record.steps) > 1 else ""
        tables.append(f"<h2>Ranks{caption}</h2>\n<table class=\"ranks\"><tr><th>rank</th><th>node</th><th>ended</th>"
                      "<th>where it waits (stack) or its call (hooks)</th><th>last collective (Flight Recorder)</th><th>behind</th><th>last output</th>"
                      f"</tr>{rows}</table>")
    return "\n".join(tables)


def _collective_cell(line: RankLine) -> str:
    return ("in " if line.still_in else "") + (line.collective or "") + (f", entered {line.late}" if line.late else "")


def _checks(record: RunRecord) -> str:
    if not record.checks:
        return ""
    rows = "".join(f"<tr><td class=\"{'pass' if check.passed else 'fail'}\">{'PASS' if check.passed else 'FAIL'}</td>"
                   f"<td>{escape(check.name)}</td><td>{escape(check.detail)}</td></tr>" for check in record.checks)
    return f"<h2>Checks</h2>\n<table id=\"checks\"><tr><th>result</th><th>check</th><th>detail</th></tr>{rows}</table>"


def _steps(record: RunRecord) -> str:
    if not record.steps:
        return ""
    rows = []
    for step in record.steps:
        codes = ", ".join(f"node{node}: {'exit 0' if code == 0 else exit_text(code)}"
                          for node, code in sorted(step.exit_codes.items()))
        notes = [note for note in (
            "timed out" if step.timed_out else "",
            f"OOM-killed on node(s) {', '.join(map(str, step.oom_killed))}" if step.oom_killed else "",
            f"fault {step.fault.get('action')} on node{step.fault.get('node')}" if step.fault and step.fault_injected
            else "", step.problem or "") if note]
        command = f"<br><code>{escape(' '.join(step.command))}</code>" if step.command else ""
        rows.append(f"<tr><td>{escape(step.name)}{command}</td><td>{escape(step.expect or '-')}</td>"
                    f"<td>{escape(codes)}</td><td>{step.seconds:.1f} s</td><td>{escape('; '.join(notes))}</td></tr>")
    return ("<h2>Steps</h2>\n<table><tr><th>step</th><th>expect</th><th>exit</th><th>time</th><th>notes</th></tr>"
            + "".join(rows) + "</table>")


def _picture(title: str, path: Path | None, alt: str) -> str:
    if path is None or not path.is_file():
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f"<h2>{escape(title)}</h2>\n<img alt=\"{escape(alt)}\" src=\"data:image/png;base64,{data}\">"


def _stacks(record: RunRecord) -> str:
    summaries = sorted(record.stacks_dir.rglob("summary.txt")) if record.stacks_dir.is_dir() else []
    if not summaries:
        return ""
    blocks = "".join(f"<pre>{escape(path.read_text(errors='replace'))}</pre>" for path in summaries)
    return f"<h2>Where each process waited when the lab stopped the run</h2>\n{blocks}"


def _logs(record: RunRecord) -> str:
    """Every node's logs, one collapsible block per node (open for nodes that failed), each step in order."""
    logs_dir = record.path / "logs"
    if not logs_dir.is_dir():
        return ""
    failed_nodes = {node for step in record.steps for node, code in step.exit_codes.items() if code != 0}
    step_order = {step.name: index for index, step in enumerate(record.steps)}
    by_node: dict[int, list[tuple[str, Path]]] = {}
    for path in logs_dir.glob("node*-*.log"):
        node_text, _, step = path.stem.partition("-")
        if node_text[4:].isdigit():
            by_node.setdefault(int(node_text[4:]), []).append((step, path))
    blocks = []
    for node in sorted(by_node):
        parts = []
        for step, path in sorted(by_node[node], key=lambda item: step_order.get(item[0], len(step_order))):
            lines = path.read_text(errors="replace").rstrip("\n").splitlines()
            cut = f"(first {len(lines) - LOG_TAIL_LINES} lines left out; the whole log: {path})\n" \
                if len(lines) > LOG_TAIL_LINES else ""
            parts.append(f"<h4>step {escape(step)} ({len(lines)} lines)</h4>"
                         f"<pre>{escape(cut + chr(10).join(lines[-LOG_TAIL_LINES:]))}</pre>")
        blocks.append(f"<details{' open' if node in failed_nodes else ''}><summary>node{node}</summary>"
                      f"{''.join(parts)}</details>")
    return "<h2>Logs by node</h2>\n" + "\n".join(blocks)
