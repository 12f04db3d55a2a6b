"""The nodes' processes ran under different settings: interpreter flags (-O strips asserts, UTF-8 mode, the user's
site-packages), resource limits (ulimit -v, -n, -f, -u) and the packages they imported (version and folder).
Warning options and the output encoding have rules of their own that name the warning or the text (crashes.py).
The jobs' hooks note each process's settings as it ends (the `calls` of its dump); where one node's differ from the
others' and that node's ranks failed or ended apart, the difference is the cause, whatever the message it led to.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

from lab.analysis.calls import CallLog
from lab.analysis.diagnosis.context import Context, echoes_a_peer
from lab.analysis.diagnosis.findings import Finding

LIMIT_NAMES = {  # soft limit -> what it limits, the shell's command, docker's option, what fails past it
    "as": ("address space", "ulimit -v", "--ulimit as=-1", "an allocation"),
    "nofile": ("open files", "ulimit -n", "--ulimit nofile=...", "one more file or socket"),
    "fsize": ("file size", "ulimit -f", "--ulimit fsize=-1", "a write past the size"),
    "nproc": ("processes", "ulimit -u", "--ulimit nproc=...", "a new thread or process"),
}


ENDED_APART_SECONDS = 0.2  # a node that ended this long before the next one ended first (a peer's crash takes less)


@dataclass(frozen=True)
class Setting:
    """One setting a process ran under: how to read it from a dump, show it, and make the nodes agree."""

    name: str
    read: Callable[[CallLog], object]
    shown: Callable[[object], str]
    effect: str  # what the odd value does, after "on {nodes}"
    fix: str  # how to give the odd nodes the others' value; {nodes}: the odd nodes
    changes_code: bool = False  # the odd value changes what the same code runs, whichever node failed
    lower_is_odd: bool = False  # for a limit, the node with the lower one (else the fewest nodes) is the odd one


def _limit_shown(value: object) -> str:
    if not isinstance(value, int) or value < 0:
        return "unlimited"
    return f"{value / (1 << 30):.1f} GiB" if value >= 1 << 30 else f"{value / (1 << 20):.1f} MiB" \
        if value >= 1 << 20 else str(value)


def _limit(key: str) -> Setting:
    what, command, docker, fails = LIMIT_NAMES[key]
    in_bytes = key in ("as", "fsize")
    return Setting(
        f"the {what} limit ({command})", lambda calls: calls.limits.get(key),
        lambda value: _limit_shown(value) if in_bytes or not isinstance(value, int) or value < 0 else str(value),
        f"{fails} fails there first",
        f"lift the {what} limit on {{nodes}} as on the others: drop the `{command}` from its launch script or shell "
        f"profile ({command} unlimited), or the container's or scheduler's limit (docker run {docker})",
        lower_is_odd=True)


SETTINGS = (
    Setting("Python's optimize flag (-O, PYTHONOPTIMIZE)", lambda calls: calls.flags.get("optimize"),
            lambda value: {0: "off", 1: "-O", 2: "-OO"}.get(value, str(value)),
            "`assert` statements and `if __debug__:` blocks are skipped there, so whatever an assert calls (a "
            "collective, a step, a check) runs on the other nodes only",
            "run every node's Python alike: unset PYTHONOPTIMIZE (or drop -O) on {nodes} (its launch script, shell "
            "profile or image), and keep work with effects out of assert statements (`ok = check(); assert ok`), so "
            "that -O cannot change what runs",
            changes_code=True),
    *(_limit(key) for key in LIMIT_NAMES),
    Setting("the locale (LC_ALL, LC_CTYPE, LANG)",
            lambda calls: " ".join(f"{name}={value}" for name, value in sorted(calls.locale.items())) or None,
            lambda value: str(value) if value else "unset",
            "text, numbers and dates are read and written another way, and a locale the node does not have makes "
            "locale.setlocale() raise (Python then also turns on its UTF-8 mode)",
            "give every node the same locale: unset LC_ALL/LANG on {nodes} (an ssh client forwards the laptop's LC_*: "
            "SendEnv/AcceptEnv), or set one every node has (LC_ALL=C.UTF-8), or install that locale on every node "
            "(locale-gen); code that calls setlocale should fall back when it raises locale.Error"),
    Setting("Python's UTF-8 mode (-X utf8, PYTHONUTF8)", lambda calls: calls.flags.get("utf8_mode"),
            lambda value: "on" if value else "off", "open() reads and writes text in another default encoding",
            "run every node's Python alike: set PYTHONUTF8 the same on {nodes} as on the others, and pass "
            "encoding='utf-8' to open() so that no default decides"),
    Setting("user site-packages (-s, PYTHONNOUSERSITE)", lambda calls: calls.flags.get("no_user_site"),
            lambda value: "hidden" if value else "used", "packages installed with pip --user are seen on some "
            "nodes only", "install what the job needs in the environment itself on every node (not with --user), "
            "and run every node's Python with the same PYTHONNOUSERSITE as {nodes}'s peers"),
)


def nodes_with_own_errors(ctx: Context) -> set[int]:
    """Nodes whose ranks raised an error of their own, not a peer's failure echoed back."""
    return {tb.node for tb in ctx.tracebacks if tb.node is not None and not echoes_a_peer(tb)}


def nodes_that_raised(ctx: Context) -> set[int]:
    """Nodes whose ranks raised an error of their own; else every node that raised."""
    return nodes_with_own_errors(ctx) or {tb.node for tb in ctx.tracebacks if tb.node is not None}


def blame(ctx: Context) -> dict[int, int]:
    """How likely each node is the odd one, lowest first: its ranks raised an error of their own (0), it ended first
    while another still ran or ended later (1), its ranks raised a peer's error (2), nothing (3)."""
    own = nodes_with_own_errors(ctx)
    raised = {tb.node for tb in ctx.tracebacks}
    ended = {node.index: node.exited_at for node in ctx.evidence.nodes if node.exited_at is not None}
    first = min(ended, key=ended.get) if ended else None
    if first is not None and len(ended) == len(ctx.evidence.nodes) and (
            len(ended) < 2 or sorted(ended.values())[1] - ended[first] < ENDED_APART_SECONDS):
        first = None  # every node ended within moments: none first
    cleanly = {node.index for node in ctx.evidence.nodes if node.exit_code == 0}
    apart = ({first} if first is not None else set()) | (cleanly if len(cleanly) < len(ctx.evidence.nodes) else set())
    return {node.index: 0 if node.index in own else 1 if node.index in apart else 2 if node.index in raised else 3
            for node in ctx.evidence.nodes}


def nodes_that_stood_out(ctx: Context) -> set[int]:
    """Nodes whose ranks raised, that ended with another exit status than most, or that ended while the others were
    still at work: where a node's own difference shows."""
    stood_out = nodes_that_raised(ctx)
    codes = {node.index: node.exit_code for node in ctx.evidence.nodes}
    counts = Counter(codes.values())
    if len(counts) > 1:
        fewest = min(counts.values())
        stood_out |= {index for index, code in codes.items() if counts[code] == fewest or
                      (code is not None and None in counts)}  # ended while another was still at work
    return stood_out


NOT_READ = object()  # what a `read` returns for a process that did not read the thing at all


def agreed_per_node(ctx: Context, read: Callable[[CallLog], object]) -> dict[int, object]:
    """`read` of each node's processes' calls, for the nodes whose processes all agree (nodes with no dump, or with
    mixed values, left out); a process whose read is NOT_READ does not count."""
    values: dict[int, set] = {}
    for trace in ctx.evidence.traces:
        if trace.calls is not None and trace.node is not None and (value := read(trace.calls)) is not NOT_READ:
            values.setdefault(trace.node, set()).add(value)
    return {node: next(iter(found)) for node, found in sorted(values.items()) if len(found) == 1}


def _odd_value(setting: Setting, per_node: dict[int, object]) -> object:
    if setting.lower_is_odd:
        return min(per_node.values(), key=lambda value: float("inf") if not isinstance(value, int) or value < 0
                   else value)
    counts = Counter(per_node.values())
    return min(counts, key=lambda value: (counts[value], not value))  # the fewest nodes; a set value first


def settings_findings(ctx: Context) -> list[Finding]:
    """The first setting whose value differs between nodes where the odd nodes are the ones that failed (or, for a
    setting that changes which code runs, whichever failed)."""
    if len(ctx.evidence.nodes) < 2:
        return []
    stood_out = nodes_that_stood_out(ctx)
    for setting in SETTINGS:
        per_node = agreed_per_node(ctx, setting.read)
        if len(per_node) < 2 or len(set(per_node.values())) < 2:
            continue
        odd = _odd_value(setting, per_node)
        odd_nodes = [node for node, value in per_node.items() if value == odd]
        if not setting.changes_code and not stood_out & set(odd_nodes):
            continue
        names = ", ".join(f"node{node}" for node in odd_nodes)
        shown = "; ".join(f"node{node} {setting.shown(value)}" for node, value in per_node.items())
        failed = " and a rank there failed" if stood_out & set(odd_nodes) else ""
        return [Finding(
            "settings-differ-between-nodes", f"{setting.name} differs between the nodes ({shown}): on {names} "
            f"{setting.effect}{failed}", f"{setting.name}, as each node's processes ended: {shown}", odd_nodes[0],
            None, setting.fix.format(nodes=names))]
    return _versions_differ(ctx, stood_out)


def _versions_differ(ctx: Context, stood_out: set[int]) -> list[Finding]:
    """A package the job imported in another version, or from another folder, on the nodes that failed."""
    packages = sorted({name for trace in ctx.evidence.traces if trace.calls for name in trace.calls.versions})
    for name in packages:
        per_node = agreed_per_node(ctx, lambda calls: calls.versions.get(name, NOT_READ))  # who imported it
        if len(per_node) < 2 or len({value.replace(f"node{node}", "node{n}") for node, value in per_node.items()}) < 2:
            continue  # the same everywhere, or a folder of each node's own (/opt/venv-node0, /opt/venv-node1)
        counts = Counter(per_node.values())
        odd = min(counts, key=lambda value: (counts[value], value))
        odd_nodes = [node for node, value in per_node.items() if value == odd]
        if not stood_out & set(odd_nodes):
            continue
        names = ", ".join(f"node{node}" for node in odd_nodes)
        shown = "; ".join(f"node{node} {value}" for node, value in per_node.items())
        return [Finding(
            "package-version-differs", f"the job imported {name} in another version or from another folder on "
            f"{names} ({shown}), and a rank there failed: the same code runs other library code there",
            f"{name} as each node's processes imported it: {shown}", odd_nodes[0], None,
            f"give every node the same {name}: install one version in the nodes' environment (`lab up --pip "
            f"{name}==VERSION`, `lab doctor --package {name}` compares them), and remove the other copy from "
            f"{names} (a pip --user install, a PYTHONPATH entry, a vendored folder)")]
    return []
