"""The generated pages of the documentation: the CLI reference (from the click commands) and the causes of failure
(from the diagnosis' catalogue, run on the samples its rules are tested on), so neither is written twice.

MkDocs loads this file as a hook (mkdocs.yml `hooks:`): `on_files` adds the two pages to the site at build time.
tests/unit/test_docs.py imports it to check that every cause and every command has its entry.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `mkdocs build` from the checkout imports this checkout's lab

import click  # noqa: E402

from lab.analysis.diagnosis import CAUSES, PRIORITY, Evidence, Fault, Finding, NodeEvidence, NodeProbes, diagnose  # noqa: E402
from lab.analysis.diagnosis.context import PatternRule  # noqa: E402
from lab.analysis.diagnosis import PATTERNS  # noqa: E402
from lab.analysis.explain import failed_checks_finding  # noqa: E402
from lab.analysis.flight import load_traces  # noqa: E402
from lab.analysis.stacks import load_stacks  # noqa: E402
from lab.cli import cli  # noqa: E402
from lab.jobs.checks import Check  # noqa: E402

SAMPLES = ROOT / "tests" / "unit" / "diagnosis_samples"
CLI_PAGE = "reference/cli.md"
CAUSES_PAGE = "reference/causes.md"
HELP_WIDTH = 100


# --- the causes ------------------------------------------------------------------------------------------------------

# Calls that make a finding: the cause id is their first argument.
FINDING_MAKERS = {"Finding", "PatternRule"}


def cause_ids_in_code(package: Path = ROOT / "lab") -> tuple[set[str], list[str]]:
    """Every cause id a rule can return, read from the source: the first argument of each Finding(...) and
    PatternRule(...) call under lab/. Also the calls whose id is not a literal (file:line), other than the one
    place that passes a PatternRule's cause on, so that no cause escapes the catalogue."""
    found, unreadable = set(), []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) in FINDING_MAKERS and node.args):
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
            elif ast.unparse(first) != "rule.cause":  # context.pattern_findings: a PatternRule's own (literal) id
                unreadable.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return found, unreadable


def all_cause_ids() -> list[str]:
    """PRIORITY's order, then any other id the code can return (wrong-results)."""
    in_code, _ = cause_ids_in_code()
    return PRIORITY + sorted(in_code - set(PRIORITY))


@dataclass
class Sample:
    """A run the rules are tested on: each node's log and the run's facts (tests/unit/diagnosis_samples/NAME/)."""
    name: str
    cause: str | None  # the top finding its run.json names (tests/unit/test_docs.py checks it)
    findings: list[Finding]


def load_evidence(folder: Path) -> Evidence:
    """A sample folder as the Evidence the runner would gather: run.json's exit codes, command and `facts` (the
    launch facts that differ from a 2-node lab exec), nodeI.log, stacks.json and flight/ when there."""
    run = json.loads((folder / "run.json").read_text())
    facts = dict(run.get("facts", {}))
    node_facts = facts.pop("nodes", {})
    exits = run.get("node_exits", {})
    nodes = []
    for index in sorted(int(node) for node in run["exit_codes"]):
        log = folder / f"node{index}.log"
        nodes.append(NodeEvidence(index, f"node{index}", run["exit_codes"][str(index)],
                                  lines=log.read_text().splitlines() if log.is_file() else [],
                                  interfaces=["lo", "eth0"], exited_at=exits.get(str(index)),
                                  **node_facts.get(str(index), {})))
    facts["faults"] = [Fault(**fault) for fault in facts.get("faults", [])]
    facts.setdefault("nnodes", len(nodes))
    facts.setdefault("master_addr", "node0")
    facts.setdefault("master_port", 29500)
    processes = load_stacks(folder) if (folder / "stacks.json").is_file() else []
    return Evidence(nodes=nodes, command=run.get("command", []), processes=processes,
                    traces=load_traces(folder / "flight"), probes=NodeProbes.from_dict(run.get("probes")), **facts)


def load_sample(folder: Path) -> Sample:
    run = json.loads((folder / "run.json").read_text())
    if "checks" in run:  # every process ended well: lab run's checks speak (lab/analysis/explain.py)
        finding = failed_checks_finding([Check(**check) for check in run["checks"]])
        findings = [Finding.from_dict(finding)] if finding else []
    else:
        findings = diagnose(load_evidence(folder))
    return Sample(folder.name, run.get("cause"), findings)


@functools.cache
def samples() -> tuple[Sample, ...]:
    """Every sample diagnosed, once per process: the causes page, its tests and the site's build all read them."""
    return tuple(load_sample(folder) for folder in sorted(SAMPLES.iterdir()) if (folder / "run.json").is_file())


def examples(loaded: tuple[Sample, ...]) -> dict[str, tuple[Sample, Finding]]:
    """For each cause, a sample that shows it: one whose top finding it is, else one where it comes after another."""
    chosen: dict[str, tuple[Sample, Finding]] = {}
    for top_only in (True, False):
        for sample in loaded:
            for finding in sample.findings[:1] if top_only else sample.findings:
                chosen.setdefault(finding.cause, (sample, finding))
    return chosen


def patterns_of(cause: str) -> list[str]:
    return [rule.pattern.pattern for rule in PATTERNS if isinstance(rule, PatternRule) and rule.cause == cause]


def causes_markdown() -> str:
    ids = all_cause_ids()
    missing = [cause for cause in ids if cause not in CAUSES]
    if missing:
        raise RuntimeError(f"causes without an entry in CAUSES (lab/analysis/diagnosis/__init__.py): {missing}")
    shown = examples(samples())
    lines = [
        "# Causes of failure",
        "",
        "Every cause `lab explain` can name, in the order the diagnosis ranks them (root causes first, the ways a run "
        "ended last). Paste an error message into the search box: each example below is the diagnosis of a real "
        "failing run kept in `tests/unit/diagnosis_samples/`, the logs the rules are tested on, run again when this "
        "page was built. How to read a finding: [When a run fails](../tutorials/when-a-run-fails.md).",
        "",
        "This page is generated from `CAUSES` and `PRIORITY` in `lab/analysis/diagnosis/__init__.py` and from the "
        "samples; it cannot drift from the code.",
        "",
        "| cause | what it means |",
        "| --- | --- |",
    ]
    lines += [f"| [`{cause}`](#{cause}) | {_one_line(CAUSES[cause])} |" for cause in ids]
    for cause in ids:
        lines += ["", f"## {cause} {{#{cause}}}", "", CAUSES[cause], ""]
        if cause in shown:
            sample, finding = shown[cause]
            after = "" if sample.findings[0] is finding else \
                f", where it comes after `{sample.findings[0].cause}`"
            lines += [f"Example: what `lab explain` says of the sample `{sample.name}`{after}:", "", "```text",
                      _finding_text(finding), "```", ""]
            lines += [f"**Fix**: {finding.fix}", ""]
        else:
            lines += ["No sample shows this cause yet.", ""]
        if patterns := patterns_of(cause):
            lines += ["Lines it reads (regular expressions matched against every node's log):", "", "```text",
                      *patterns, "```", ""]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _finding_text(finding: Finding) -> str:
    where = ", ".join(part for part in (f"node{finding.node}" if finding.node is not None else "",
                                        f"rank {finding.rank}" if finding.rank is not None else "") if part)
    return (f"cause: {finding.title}" + (f" ({where})" if where else "")
            + f"\n  evidence: {finding.evidence}")


# --- the command line ----------------------------------------------------------------------------------------------

@dataclass
class CommandDoc:
    path: str  # 'lab export k8s'
    command: click.Command
    ctx: click.Context


def commands() -> list[CommandDoc]:
    """Every command and sub-command of `lab`, depth first, in --help's order."""
    found = []

    def walk(command: click.Command, ctx: click.Context) -> None:
        found.append(CommandDoc(ctx.command_path, command, ctx))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                walk(sub, click.Context(sub, info_name=name, parent=ctx, terminal_width=HELP_WIDTH,
                                        max_content_width=HELP_WIDTH))

    walk(cli, click.Context(cli, info_name="lab", terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH))
    return found


def option_names(command: click.Command) -> list[str]:
    return [name for param in command.params if isinstance(param, click.Option) for name in param.opts +
            param.secondary_opts]


def cli_markdown() -> str:
    docs = commands()
    lines = [
        "# Command line",
        "",
        "Every `lab` command, with the help it prints (`lab COMMAND --help`). This page is generated from the click "
        "commands in `lab/cli/` when the site is built.",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    lines += [f"| [`{doc.path}`](#{_anchor(doc.path)}) | {_one_line(doc.command.get_short_help_str(200))} |"
              for doc in docs[1:]]
    for doc in docs:
        heading = "#" * min(2 + doc.path.count(" ") - 1, 4) if doc.path != "lab" else "##"
        lines += ["", f"{heading} `{doc.path}` {{#{_anchor(doc.path)}}}", "", "```text",
                  doc.command.get_help(doc.ctx).rstrip(), "```"]
        hidden = [param for param in doc.command.params if isinstance(param, click.Option) and param.hidden]
        if hidden:
            lines += ["", "Options left out of `--help` (kept so that older command lines still work):", ""]
            lines += [f"- `{' / '.join(param.opts)}` {_hidden_values(param)}".rstrip() for param in hidden]
    lines += ["", "## Exit codes {#exit-codes}", "", "Every failure is one line (`error: ...`) and a hint (`hint: ...`), "
              "then one of these exit codes (the classes of `lab/errors.py`):", "", "| code | when |", "| --- | --- |"]
    lines += [f"| {code} | {why} |" for code, why in exit_codes()]
    return "\n".join(lines) + "\n"


def _hidden_values(param: click.Option) -> str:
    values = f"({' | '.join(param.type.choices)})" if isinstance(param.type, click.Choice) else ""
    return f"{values} {param.help or ''}".strip()


def exit_codes() -> list[tuple[int, str]]:
    """(code, meaning) of every LabError class, then the codes lab/cli/__init__.py's main() gives itself."""
    from lab import errors

    classes = [errors.LabError, *errors.LabError.__subclasses__()]
    codes = [(cls.exit_code, f"`{cls.__name__}`: {_one_line(cls.__doc__.strip())}"
              + (" Also: a run that failed, `lab doctor` finding a problem." if cls is errors.LabError else ""))
             for cls in classes]
    return sorted(codes) + [(70, "a bug in lab: one line, the traceback in `.lab/logs/crash.log`"),
                            (130, "Ctrl-C: whatever the command had started on the nodes was stopped")]


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


# --- the MkDocs hook -------------------------------------------------------------------------------------------------

def on_files(files, config):
    """Add the generated pages to the site (MkDocs 1.6: File.generated)."""
    from mkdocs.structure.files import File

    for uri, text in ((CLI_PAGE, cli_markdown()), (CAUSES_PAGE, causes_markdown())):
        files.append(File.generated(config, uri, content=text))
    return files
