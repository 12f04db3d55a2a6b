"""The nodes differ, or lack what the job names: a file on one node's own disk, a rendezvous file each node made for
itself, a command or variable a node does not have. Told from what the nodes answered when the lab asked them after
the run (Evidence.probes, gathered by lab/jobs/probes.py); `questions` says what to ask, from the run's own words.
"""

from __future__ import annotations

import ast

import posixpath
import re
from dataclasses import dataclass, field
from typing import Iterable

from lab.analysis.diagnosis.context import Context, on_shared_folder, quote
from lab.analysis.diagnosis.evidence import NodeProbes, PathFacts
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import EXCEPTION_LINE, LogLine, Traceback
from lab.analysis.diagnosis.sources import SourceFile, call_name, env_read, parsed_files
from lab.analysis.diagnosis.settings import (NOT_READ, agreed_per_node, blame, nodes_that_stood_out,
                                            nodes_with_own_errors)

MAX_PATHS = 8  # paths asked about per run: a few, each a stat on every node
MAX_NAMES = 8  # commands and variables asked about per run
MAX_SCRIPTS = 4  # the job's scripts read for a rendezvous path

# A path an error says is missing: Python's OSError text, the shell's and coreutils' forms.
MISSING_PATH = re.compile(r"No such file or directory: '(?P<quoted>[^']+)'"
                          r"|can't open file '(?P<script>[^']+)': \[Errno 2\]"
                          r"|cannot access '(?P<access>[^']+)': No such file or directory"
                          r"|^(?:\S+: )?(?P<bare>/[^\s:']+): No such file or directory"
                          r"|Parent directory (?P<parent>/\S+?)\.? does not exist")  # torch.save's words
# Where a rendezvous keeps its file: a file:// init_method, a FileStore built in the code a traceback quotes.
FILE_URL = re.compile(r"file://(?P<path>/[^\s'\",)\]]+)")
FILE_STORE = re.compile(r"FileStore\(\s*(?:file_name\s*=\s*)?['\"](?P<path>[^'\"]+)['\"]")
# A command the node could not start: docker exec's, sh's, bash's, env's words.
EXECUTABLE_MISSING = re.compile(r'exec: "(?P<docker>[^"]+)": executable file not found'
                                r"|^(?:sh|bash|/bin/sh|/bin/bash)(?:: line \d+| \d+|: \d+)?: (?P<shell>[\w.+/-]+): "
                                r"(?:command )?not found$"
                                r"|^env: '(?P<env>[^']+)': No such file or directory")
# A variable read from the environment, in the source line a traceback quotes.
ENV_READ = re.compile(r"(?:os\.)?(?:environ\s*\[\s*|environ\.get\(\s*|getenv\(\s*)['\"](?P<name>[A-Za-z_]\w*)['\"]")
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)(?:[:!][^}]*)?\}")  # {rank}, {epoch:04d}: a format field left as text
KEY_ERROR = re.compile(r"^'(?P<name>[A-Za-z_]\w*)'$")
# Variables whose value is each node's or process's own by design (its rank, host, error file), or which another rule
# judges (the rendezvous address, the world size).
OWN_PER_PROCESS = re.compile(r"RANK|NODE|HOST|PID|ERROR_FILE|^LAB_|^TORCHELASTIC_|^SLURM_|^OMPI_|^PMI_|^MASTER_"
                             r"|WORLD_SIZE|^CUDA_VISIBLE_DEVICES$|^PWD$|^OLDPWD$")
PYTHONS = ("python", "python3")
RENDEZVOUS_CALLS = ("init_process_group", "_new_process_group_helper", "rendezvous", "_file_rendezvous_handler")
# What `lab exec --env NAME=...` can give in place of what torchrun sets (one process per node: rank = node rank).
EXEC_PLACEHOLDERS = {"RANK": "{rank}", "WORLD_SIZE": "{world_size}", "GROUP_RANK": "{node_rank}", "LOCAL_RANK": "0",
                     "LOCAL_WORLD_SIZE": "1", "GROUP_WORLD_SIZE": "{nnodes}", "ROLE_RANK": "{rank}"}
# What torchrun gives each worker, and `lab exec` does not (FACTS.md).
TORCHRUN_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
                "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID")


@dataclass
class Questions:
    """What to ask every node about a failed run (bounded: MAX_PATHS paths, MAX_NAMES commands and variables)."""

    paths: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)  # the job's .py files, read on the node for rendezvous paths

    def to_dict(self) -> dict:
        return {"paths": self.paths, "commands": self.commands, "env": self.env, "scripts": self.scripts,
                "rendezvous_patterns": [FILE_URL.pattern, FILE_STORE.pattern]}


def _add(items: list[str], value: str | None, limit: int) -> None:
    if value and value not in items and len(items) < limit:
        items.append(value)


def questions(lines: Iterable[str], launched: Iterable[str] = ()) -> Questions:
    """What the run's words name: missing paths, rendezvous files, commands that would not start, variables read
    from the environment; `launched` is what the lab ran, its arguments and environment values (a file:// init_method
    may be there)."""
    asked = Questions(commands=[*PYTHONS])
    for text in launched:
        if text.endswith(".py"):
            _add(asked.scripts, text, MAX_SCRIPTS)
        for found in FILE_URL.finditer(text):
            _add(asked.paths, found["path"], MAX_PATHS)
    for raw in lines:
        text = raw.strip()
        for found in [*FILE_URL.finditer(text), *FILE_STORE.finditer(text)]:
            _add(asked.paths, found["path"], MAX_PATHS)
        if found := MISSING_PATH.search(text):
            path = next(value for value in found.groupdict().values() if value)
            _add(asked.paths, path, MAX_PATHS)
            if "/" not in path:  # 'nvidia-smi' from subprocess is a command, 'data.csv' a file: ask both
                _add(asked.commands, path, MAX_NAMES + len(PYTHONS))
        if found := EXECUTABLE_MISSING.search(text):
            _add(asked.commands, found["docker"] or found["shell"] or found["env"], MAX_NAMES + len(PYTHONS))
        for found in ENV_READ.finditer(text):
            _add(asked.env, found["name"], MAX_NAMES)
        if text.startswith("KeyError: ") and (key := KEY_ERROR.match(text[len("KeyError: "):])) \
                and ENV_NAME.match(key["name"]):
            _add(asked.env, key["name"], MAX_NAMES)
    return asked


def _nodes(indices: Iterable[int]) -> str:
    return ", ".join(f"node{index}" for index in sorted(indices))


def _describe(facts: PathFacts | None) -> str:
    if facts is None:
        return "not asked"
    if facts.kind is None and facts.link:
        return f"a link to '{facts.link}', which does not exist"
    if facts.kind is None:
        return "missing" + ("" if facts.parent else f" (its folder too; {facts.existing} exists)")
    return facts.kind + (f", {facts.size} bytes" if facts.kind == "file" and facts.size is not None else "")


def _shared_hint(probes: NodeProbes) -> str:
    if probes.shared == ["/"]:
        return "the 'nodes' share this host's disk"
    if not probes.shared:
        return ("these hosts share no folder: copy it to every host (an inventory's lab_workspace is copied to each), "
                "or put it on a network filesystem every host mounts")
    return f"put it on the folder every node shares, {probes.shared[0]}" + (
        f" (or in the workspace {probes.workspace}, which every node reads)" if probes.workspace else "")


def _path_line(ctx: Context, path: str) -> LogLine | None:
    return next((line for line in ctx.lines if path in line.text and not line.text.startswith("    ")
                 and (MISSING_PATH.search(line.text) or EXECUTABLE_MISSING.search(line.text))), None)


def _rendezvous_paths(ctx: Context) -> dict[str, str]:
    """file:// and FileStore paths, each with what names it: a log line, the job's code, its command line or --env."""
    found: dict[str, str] = {}
    for line in ctx.lines:
        for match in [*FILE_URL.finditer(line.text), *FILE_STORE.finditer(line.text)]:
            found.setdefault(match["path"], quote(line))
    for facts in ctx.evidence.probes.answered() if ctx.evidence.probes else []:
        for written in facts.rendezvous:
            found.setdefault(written["path"], f"{written['where']}: {written['text']}")
    for text in [*ctx.evidence.command, *ctx.evidence.env.values()]:
        for match in FILE_URL.finditer(text):
            found.setdefault(match["path"], f"the job's rendezvous: file://{match['path']}")
    for trace in ctx.evidence.traces:  # what each process passed to init_process_group, as the hooks saw it
        for call in trace.calls.made if trace.calls else ():
            if call.op == "init_process_group" and (method := call.argument("init_method")):
                for match in FILE_URL.finditer(method):
                    found.setdefault(match["path"], f"rank {trace.rank}: init_process_group(init_method={method!r})"
                                                    + (f" at {call.caller}" if call.caller else ""))
    return found


def _at_rendezvous(ctx: Context) -> bool:
    """The run failed meeting its peers: a traceback through init_process_group or a store, or it hung."""
    return ctx.evidence.timed_out or bool(ctx.evidence.stopped) or any(
        "FileStore" in tb.message or "Wait timeout" in tb.message or "Timeout waiting for key" in tb.message
        or any(frame.function in RENDEZVOUS_CALLS for frame in tb.frames) for tb in ctx.tracebacks)


def _subprocess_names(ctx: Context) -> set[str]:
    """Names a subprocess call could not start ('nvidia-smi'), not files the job opened."""
    return {match["quoted"] for tb in ctx.tracebacks if tb.short_type == "FileNotFoundError"
            and any(frame.file.endswith("subprocess.py") for frame in tb.frames)
            for match in [MISSING_PATH.search(tb.message)] if match and match["quoted"]}


def rendezvous_findings(ctx: Context) -> list[Finding]:
    """A file:// rendezvous or a FileStore on a folder that is each node's own: every node made its own file and
    waited there for ranks that joined elsewhere."""
    probes = ctx.evidence.probes
    if probes is None or not ctx.multi_node or not _at_rendezvous(ctx):
        return []
    waited = next((tb for tb in ctx.tracebacks if tb.collective() == "init_process_group"), None) or \
        next(iter(ctx.tracebacks), None)
    for path, named in _rendezvous_paths(ctx).items():
        answers = {facts.node: facts.paths.get(path) for facts in probes.answered() if path in facts.paths}
        absolute = next((facts.absolute for facts in answers.values() if facts), path)
        if not absolute.startswith("/") or probes.on_shared_folder(absolute):
            continue
        made = [node for node, facts in answers.items() if facts and facts.kind]
        seen = "; ".join(f"node{node}: {_describe(facts)}" for node, facts in sorted(answers.items()))
        evidence = (f"{named}; " + (f"{quote(waited.line)}; " if waited else "") + f"after the run: {seen}")
        shared = probes.shared[0] if probes.shared and probes.shared != ["/"] else None
        example = f"file://{shared}/rendezvous-<run id>, " if shared else ""
        fix = (f"put the file on a folder every node shares ({example}"
               "a new name per run, since a file left by an earlier run breaks the next), or rendezvous over TCP: "
               "init_method='env://' (lab exec sets MASTER_ADDR and MASTER_PORT; lab torchrun too) or "
               "tcp://node0:PORT, or a TCPStore instead of the FileStore")
        each = f" ({_nodes(made)} each made its own)" if len(made) > 1 else ""
        return [Finding("rendezvous-path-not-shared", f"the rendezvous file {path} is on each node's own disk, not a "
                        f"folder the nodes share: the ranks never met{each}", evidence,
                        waited.node if waited else None, waited.rank if waited else None, fix)]
    return []


def _ended_a_process(ctx: Context, path: str, line: LogLine) -> bool:
    """The path is named by an error that ended a process (an exception, the shell's or Python's own line), not by a
    message the job printed and went on from (a retry loop's 'copy attempt 1 failed: ...')."""
    shell = MISSING_PATH.search(line.text)
    return (any(path in tb.message for tb in ctx.tracebacks) or bool(EXCEPTION_LINE.match(line.text.strip()))
            or bool(EXECUTABLE_MISSING.search(line.text))
            or bool(shell and (shell["script"] or shell["access"] or shell["bare"])))  # python's, coreutils', the shell's


def file_findings(ctx: Context) -> list[Finding]:
    """A path an error names that exists on some nodes only (each node has its own disk), or on none (a script on no
    node stays script-not-found: it was not copied, whose fix says how)."""
    probes = ctx.evidence.probes
    if probes is None:
        return []
    rendezvous, commands = set(_rendezvous_paths(ctx)), _subprocess_names(ctx)
    found = []
    for path in dict.fromkeys(path for facts in probes.answered() for path in facts.paths):
        line = _path_line(ctx, path)
        if path in rendezvous or path in commands or line is None or not _ended_a_process(ctx, path, line):
            continue
        answers = {facts.node: facts.paths[path] for facts in probes.answered() if path in facts.paths}
        have = sorted(node for node, facts in answers.items() if facts.kind)
        seen = "; ".join(f"node{node}: {_describe(facts)}" for node, facts in sorted(answers.items()))
        evidence = f"{quote(line)}; after the run: {seen}"
        absolute = next(iter(answers.values())).absolute
        if have and len(have) < len(answers):
            lacking = sorted(set(answers) - set(have))
            found.append(Finding(
                "file-on-some-nodes-only", f"{path} exists on {_nodes(have)} only: each node has its own disk, and "
                f"{_nodes(lacking)} never got it", evidence, line.node, line.rank,
                f"{_shared_hint(probes)}, and read it from there on every node; or write it on every node (each rank "
                "its own copy), or have rank 0 send its content (torch.distributed.broadcast_object_list) instead of "
                "a file"))
        elif not have and answers and len(answers) == ctx.evidence.nnodes and "can't open file" not in line.text:
            nearest = {facts.close for facts in answers.values() if facts.close}
            if (salted := _named_by_salted_hash(ctx, path, sorted(nearest)[0] if nearest else "")) is not None:
                wanted, made, caller = salted
                found.append(Finding(
                    "hash-differs-per-process", f"{path} is on no node, but {made} is: the name's {wanted} comes from "
                    f"hash() of a string ({caller}), which Python salts per process (PYTHONHASHSEED is not set), so "
                    "the process that wrote the file and the one reading it computed different names",
                    evidence + f"; the nearest name there is {sorted(nearest)[0]}", line.node, line.rank,
                    "name it with a hash that is the same in every process: hashlib.sha256(repr(key).encode())"
                    ".hexdigest()[:8] (or zlib.crc32), or build the name from the values themselves; or set one "
                    "PYTHONHASHSEED for every process before Python starts (`lab torchrun --env PYTHONHASHSEED=0`)"))
                continue
            if (local := _named_by_local_rank(ctx, path)) is not None:
                found.append(Finding("file-missing-everywhere", f"{path} is on no node: {local}", evidence, line.node,
                                     line.rank, "name the files by the global rank (dist.get_rank()) where they are "
                                     "written and where they are read: the local rank starts at 0 on every node, so "
                                     "each node's ranks write the same names (on a shared folder, over each other's) "
                                     "and the ranks of the other nodes find none under their own number"))
                continue
            stamped = _stamped_differently(path, sorted(nearest)[0] if nearest else "")
            if stamped and (other := _another_ranks_number(*stamped, line.rank,
                                                           ctx.evidence.expected_world_size)) is not None:
                wanted, made = stamped
                found.append(Finding(
                    "file-missing-everywhere", f"{path} is on no node, but {made} is: the files are per rank, and rank "
                    f"{line.rank}'s own is missing while rank {other}'s is there: the ranks wrote or kept different "
                    "sets of their files (a save, a cleanup or a choice of which to keep made on each rank's own "
                    "values)", evidence + f"; the nearest name there is {sorted(nearest)[0]}", line.node, line.rank,
                    "make every rank write, keep and remove the same set of files: decide which ones together (from "
                    "values all-reduced across the ranks, or on rank 0 and broadcast), then each rank acts on its own "
                    "file of each"))
                continue
            if stamped:
                wanted, made = stamped
                found.append(Finding(
                    "file-missing-everywhere", f"{path} is on no node, but {made} is: a name made of numbers (a date, "
                    f"an hour, a counter) came out as {wanted} here and as {made} where it was written",
                    evidence + f"; the nearest name there is {sorted(nearest)[0]}", line.node, line.rank,
                    "make that name once and give it to every rank (rank 0 builds it, broadcast_object_list sends "
                    "it), or build it from what every node shares (the run's id, UTC rather than local time: the "
                    "nodes' clocks and time zones, TZ, can differ), never from each node's own clock"))
                continue
            if dangling := next((facts for facts in answers.values() if facts.link), None):
                where = posixpath.normpath(posixpath.join(posixpath.dirname(dangling.absolute), dangling.link))
                found.append(Finding(
                    "file-missing-everywhere", f"{path} is a symbolic link to '{dangling.link}', which does not exist: "
                    + (f"a link's relative target is read from the link's own folder, so it points at {where}"
                       if not dangling.link.startswith("/") else "its target was moved or never written"),
                    evidence, line.node, line.rank,
                    "make the link's target right: relative to the link's own folder (os.symlink(os.path.basename("
                    "target), link), `ln -s name link` inside the folder) or absolute (os.path.abspath(target)); "
                    "check it with os.path.exists(link), which follows the link"))
                continue
            if placeholder := PLACEHOLDER.search(path):
                found.append(Finding(
                    "file-missing-everywhere", f"{path} is on no node: its name still holds the placeholder "
                    f"{placeholder[0]}, never filled in (a string missing its f prefix, or a template never "
                    ".format()ted)", evidence + (f"; the nearest name there is {sorted(nearest)[0]}" if nearest else ""),
                    line.node, line.rank,
                    f"fill the placeholder where the path is made: f\"...{placeholder[0]}...\" (the f prefix), or "
                    f"'...{placeholder[0]}...'.format({placeholder[1]}={placeholder[1]})"))
                continue
            named = (f"; the nearest name there is {sorted(nearest)[0]}" if nearest else
                     f"; the deepest folder of it that exists is {next(iter(answers.values())).existing}")
            shared = "" if probes.on_shared_folder(absolute) else f"; if a step was to make it, {_shared_hint(probes)}"
            found.append(Finding(
                "file-missing-everywhere", f"{path} is on no node: a wrong path, or the step that makes it did not run",
                evidence + named, line.node, line.rank,
                f"check the path (relative paths start from the job's working directory){named}; run the step that "
                f"writes it first{shared}"))
    return found


def _named_by_salted_hash(ctx: Context, path: str, nearest: str) -> tuple[str, str, str] | None:
    """(the part that differs, the existing name, the line that hashed) where the missing name and the nearest one
    differ in one hex or decimal token, the job hashed strings (the hooks' `hashed`) and the processes' salts differ."""
    made = nearest.rstrip("/").rsplit("/", 1)[-1]
    wanted = path.rstrip("/").rsplit("/", 1)[-1]
    mine, theirs = re.split(r"([-_.])", wanted), re.split(r"([-_.])", made)
    differ = [(a, b) for a, b in zip(mine, theirs) if a != b] if len(mine) == len(theirs) else []
    if len(differ) != 1 or not all(re.fullmatch(r"-?[0-9a-f]{4,}", part) for part in differ[0]):
        return None
    logs = [trace.calls for trace in ctx.evidence.traces if trace.calls]
    hashed = [caller for calls in logs for caller in calls.hashed]
    if not hashed or len({calls.hash_probe for calls in logs if calls.hash_probe is not None}) < 2:
        return None
    return differ[0][0], made, hashed[0]


def _named_by_local_rank(ctx: Context, path: str) -> str | None:
    """How a file named by a rank's number is missing because it was written under the local rank and read under the
    global one: every writer's number is its local rank, and the reader's (another) is its global rank."""
    def number(name: str) -> int | None:
        found = re.findall(r"\d+", name.rsplit("/", 1)[-1])
        return int(found[-1]) if found else None

    traces = [trace for trace in ctx.evidence.traces if trace.calls and trace.rank is not None]
    by_node: dict[int | None, list[int]] = {}
    for trace in traces:
        by_node.setdefault(trace.node, []).append(trace.rank)
    local = {trace.rank: sorted(by_node[trace.node]).index(trace.rank) for trace in traces}
    written = [(trace, op) for trace in traces for op in (*trace.calls.files, *trace.calls.writes)
               if op.op in ("save", "write", "append") and number(op.path) is not None]
    reader = next((trace for trace in traces for op in trace.calls.files if op.op == "load" and op.path.rsplit(
        "/", 1)[-1] == path.rsplit("/", 1)[-1]), None)
    if reader is None or not written or number(path) != reader.rank or local[reader.rank] == reader.rank:
        return None
    if any(number(op.path) != local[trace.rank] for trace, op in written) or \
            all(local[trace.rank] == trace.rank for trace, _ in written):
        return None
    trace, op = next((trace, op) for trace, op in written if trace.rank != local[trace.rank])  # one, by the check above
    return (f"the ranks wrote their files under their local rank (rank {trace.rank} on node{trace.node} wrote "
            f"{op.path.rsplit('/', 1)[-1]}, {op.caller}) and read them under their global rank (rank {reader.rank} asked "
            f"for {path.rsplit('/', 1)[-1]})")


def _another_ranks_number(wanted: str, made: str, rank: int | None, world: int | None) -> int | None:
    """The other rank whose file `made` is, where `wanted` and `made` differ only in one run of digits: the reading
    rank's number in `wanted`, another rank's in `made` (`epoch005-rank1.pt` against `epoch005-rank0.pt`)."""
    ours, theirs = re.findall(r"\d+", wanted), re.findall(r"\d+", made)
    differing = [(a, b) for a, b in zip(ours, theirs) if a != b]
    if rank is None or not world or len(ours) != len(theirs) or len(differing) != 1:
        return None
    a, b = differing[0]
    return int(b) if int(a) == rank and int(b) < world and int(b) != rank else None


def _stamped_differently(path: str, nearest: str) -> tuple[str, str] | None:
    """(wanted, made) when a part of `path` and the nearest existing name differ only in their digits."""
    made = nearest.rstrip("/").rsplit("/", 1)[-1]
    shape = re.sub(r"\d", "0", made)
    for part in path.split("/"):
        if part != made and any(char.isdigit() for char in part) and re.sub(r"\d", "0", part) == shape:
            return part, made
    return None


def executable_findings(ctx: Context) -> list[Finding]:
    """A command the job starts that a node's PATH does not have; which names it has, and its Python."""
    probes = ctx.evidence.probes
    if probes is None:
        return []
    names = {match["docker"] or match["shell"] or match["env"]: line
             for line in ctx.lines if (match := EXECUTABLE_MISSING.search(line.text))}
    names.update({name: _traceback_line(ctx, name) for name in _subprocess_names(ctx) if name not in names})
    for name, line in names.items():
        answers = {facts.node: facts.commands.get(name) for facts in probes.answered() if name in facts.commands}
        lacking = sorted(node for node, where in answers.items() if not where)
        if not lacking or line is None:
            continue
        have = sorted(set(answers) - set(lacking))
        first = probes.of(lacking[0])
        pythons = ", ".join(f"{each} -> {first.commands[each]}" for each in PYTHONS
                            if first and first.commands.get(each))
        evidence = (f"{quote(line)}; on the PATH of {_nodes(lacking)}: {name} missing"
                    + (f", {pythons}" if pythons else "")
                    + (f"; the lab's interpreter: {first.python}" if first else ""))
        if re.fullmatch(r"python[\d.]*", name):
            interpreter = first.python if first and first.python else "the interpreter `lab status` names"
            fix = (f"run the node's interpreter, {interpreter}, which the lab "
                   "found with torch: `lab exec -- python ...` and `lab torchrun` run it for you; in a shell line "
                   f"(sh -c, a script's #! line) name it{f' ({pythons})' if pythons else ''}")
        elif have:
            fix = (f"install {name} on {_nodes(lacking)} as on {_nodes(have)} (or use its full path there); "
                   "`lab doctor` compares the nodes")
        else:
            fix = (f"give the nodes {name}: build it into the image (`lab up --image IMAGE` with it), `lab up --pip` "
                   "for a Python package's command, or call it by its full path; or drop the call")
        where = f"{_nodes(lacking)} only" if have else "any node"
        return [Finding("executable-missing", f"'{name}' is not on the PATH of {where}: the command could not start",
                        evidence, line.node, line.rank, fix)]
    return []


def _traceback_line(ctx: Context, name: str) -> LogLine | None:
    return next((tb.line for tb in ctx.tracebacks if f"'{name}'" in tb.message), None)


def env_findings(ctx: Context) -> list[Finding]:
    """A variable the job read that is set on some nodes only, or on none (of what the lab passed and the nodes had)."""
    probes = ctx.evidence.probes
    if probes is None:
        return []
    for tb in ctx.tracebacks:
        name = _env_read(ctx, tb)
        if name is None or name in probes.launcher_env:
            continue
        answers = {facts.node: facts.env[name] for facts in probes.answered() if name in facts.env}
        have = sorted(node for node, present in answers.items() if present)
        if not answers or len(have) == len(answers):
            continue
        lacking = sorted(set(answers) - set(have))
        evidence = f"node{tb.node}" + (f" rank {tb.rank}" if tb.rank is not None else "") + \
            f": {tb.short_type}: {tb.message}"[:300] + f"; {name} set on: {_nodes(have) or 'no node'}"
        if have:
            return [Finding("env-differs-between-nodes", f"{name} is set on {_nodes(have)} only, not on "
                            f"{_nodes(lacking)}: the nodes' environments differ", evidence, tb.node, tb.rank,
                            f"give every node the same environment: pass it with the job (`lab exec --env {name}=...` "
                            "or `lab torchrun --env`, the same on every node, {node_rank} and the like filled per "
                            "node), not from one node's shell profile")]
        fix = (f"{name} is set by torchrun for its workers; `lab exec` starts one plain process per node: run the "
               f"script with `lab torchrun`, or read NODE_RANK and NNODES (which lab exec sets), or pass "
               f"--env {name}={EXEC_PLACEHOLDERS.get(name, 'VALUE')}" if name in TORCHRUN_ENV else
               f"pass it to every node: `lab exec --env {name}=VALUE` (or `lab torchrun --env`); placeholders such as "
               "{node_rank} are filled per node; or give the script a default (os.environ.get)")
        return [Finding("env-not-set", f"{name} is not set on any node: the job read it from the environment",
                        evidence, tb.node, tb.rank, fix)]
    return []


# Launcher variables whose true value each process knows once its group is up: name -> the RankTrace field.
KNOWN_BY_THE_GROUP = {"RANK": "rank", "WORLD_SIZE": "world_size"}


def defaulted_rank_findings(ctx: Context) -> list[Finding]:
    """A process read RANK (or WORLD_SIZE) unset, as under `lab exec` or a hand launch, and the code's default
    (`os.environ.get("RANK", "0")`) stood in for it: that process took itself for another rank than the one its
    process group says it is (every process the main one, or a world of one)."""
    if not ctx.multi_node or not ctx.evidence.failed:
        return []
    for name, field in KNOWN_BY_THE_GROUP.items():
        unset = [trace for trace in ctx.evidence.traces if trace.calls and name in trace.calls.env_read
                 and trace.calls.env_read[name] is None and getattr(trace, field) is not None]
        texts = {path.rsplit("/", 1)[-1]: text for trace in unset for path, text in trace.sources.items()}
        for source in parsed_files(ctx):
            default = _env_default(source, name) if source.name in texts else None
            if default is None:
                continue
            value, read = default
            wrong = [trace for trace in unset if getattr(trace, field) != value]
            if not wrong:
                continue
            first = wrong[0]
            where = f"{source.name}:{read.lineno}"
            shown = texts[source.name].splitlines()[read.lineno - 1].strip()
            ranks = ", ".join(f"rank {trace.rank} (node{trace.node})" for trace in wrong[:4])
            return [Finding(
                "env-not-set", f"{name} was not set in the job's processes, and the code's default stood in for it: "
                f"`{shown[:70]}` ({where}) made it {value} where the process group "
                f"says {getattr(first, field)} ({ranks}), so those processes acted as {name.lower().replace('_', ' ')} "
                f"{value}", f"{name} unset in {len(unset)} process(es); {where}", first.node, first.rank,
                f"take it from the process group once it is up (dist.get_{field}()), or from the arguments the script "
                f"is given; {name} is set by torchrun (and most launchers), not by `lab exec` or a hand launch: run "
                f"with `lab torchrun`, or pass --env {name}={EXEC_PLACEHOLDERS.get(name, 'VALUE')}")]
    return []


def _env_default(source: SourceFile, name: str) -> tuple[int, ast.Call] | None:
    """(the default as a number, the read) of the first os.environ.get(name, DEFAULT) / os.getenv in `source`."""
    for node in source.walk():
        if env_read(node) == name and isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(
                node.args[1], ast.Constant) and str(node.args[1].value).strip().lstrip("-").isdigit():
            return int(node.args[1].value), node
    return None


def _set_by_the_job(ctx: Context, name: str) -> tuple[SourceFile, ast.AST] | None:
    """(the file, the statement) where the job's own code sets variable `name` (os.environ[name] = ..., putenv,
    setdefault, update(name=...))."""
    for source in parsed_files(ctx):
        for node in source.walk():
            if isinstance(node, ast.Assign) and any(isinstance(target, ast.Subscript) and "environ" in ast.unparse(
                    target.value) and isinstance(target.slice, ast.Constant) and target.slice.value == name
                    for target in node.targets):
                return source, node
            if isinstance(node, ast.Call) and call_name(node) in ("putenv", "setdefault", "update") and (
                    "environ" in ast.unparse(node.func) or call_name(node) == "putenv") and (
                    any(isinstance(arg, ast.Constant) and arg.value == name for arg in node.args[:1])
                    or any(item.arg == name for item in node.keywords)):
                return source, source.statement_of(node)
    return None


def read_env_findings(ctx: Context) -> list[Finding]:
    """A variable the job's processes read (the jobs' hooks note each read and its value, by the script or any library
    it uses) with one value on some nodes and another, or none, on others: the same code then takes another path."""
    names = dict.fromkeys(name for trace in ctx.evidence.traces if trace.calls is not None
                          for name in trace.calls.env_read if not OWN_PER_PROCESS.search(name))
    for name in names:  # in the order the processes read them
        per_node = agreed_per_node(ctx, lambda calls: calls.env_read.get(name, NOT_READ))
        if len(per_node) < 2 or len(set(per_node.values())) < 2 or _numbered(per_node):
            continue
        counts = {value: sum(1 for other in per_node.values() if other == value) for value in per_node.values()}
        odd = min(counts, key=lambda value: (counts[value], value is None))  # the fewest nodes; a set one first
        odd_nodes = [node for node, value in per_node.items() if value == odd]
        shown = "; ".join(f"node{node} {_shown(value)}" for node, value in per_node.items())
        failure = next((f"node{tb.node}" + (f" rank {tb.rank}" if tb.rank is not None else "")
                        + f": {tb.short_type}: {tb.message}"[:200] for tb in ctx.tracebacks), "")
        where = f"{_nodes(odd_nodes)}'s environment" if odd is not None else f"the environment of {_nodes(odd_nodes)}"
        if (set_here := _set_by_the_job(ctx, name)) is not None:
            source, assign = set_here
            return [Finding(
                "env-set-by-the-job", f"the job sets {name} itself (`{ast.unparse(assign)[:70]}`, {source.name}:"
                f"{assign.lineno}) to pass a value to the other ranks, but a process's environment is its own: only "
                f"the process that set it sees it ({shown}, as the processes read it), and the others compute with "
                "their default", "; ".join(filter(None, (f"{name} read as: {shown}", failure))), odd_nodes[0], None,
                f"share the value with a collective, not the environment: the rank that decides puts it in a list "
                f"and the others receive it (value = [x] if rank == 0 else [None]; dist.broadcast_object_list(value, "
                "src=0)), or the c10d store (store.set / store.get), or compute it the same way on every rank")]
        return [Finding(
            "env-differs-between-nodes", f"{name} differs between the nodes ({shown}, as the job's processes read it): "
            f"the same code computes otherwise on {_nodes(odd_nodes)}", "; ".join(filter(None, (
                f"{name} read as: {shown}", failure))), odd_nodes[0], None,
            f"give every node the same {name}: {'remove it from' if odd is not None else 'set it in'} {where} (a "
            f"shell profile, an export in the launch command), or pass it with the job for every node (`lab exec "
            f"--env {name}=...`, `lab torchrun --env`); where it chooses how the ranks compute (a dtype, a path, a "
            "flag), choose once in the code and share it (rank 0 decides, broadcast_object_list)")]
    return []


def read_file_findings(ctx: Context) -> list[Finding]:
    """A file on each node's own disk that the job's code read (the hooks note size, time and a digest of small
    files) with other content on some node, and a rank of that node failed: the node's copy is the cause."""
    failing, odds = nodes_that_stood_out(ctx), blame(ctx)
    copies: dict[str, dict[int, tuple]] = {}
    for trace in ctx.evidence.traces:
        if trace.calls is None or trace.node is None:
            continue
        for op in trace.calls.reads:
            if op.size is not None and not on_shared_folder(ctx, op.path):
                before = op.mtime is not None and trace.started_at is not None and op.mtime < trace.started_at
                copies.setdefault(op.path, {})[trace.node] = (op.size, op.digest, before, op.caller)
    for path, by_node in copies.items():
        kinds = {(size, digest) for size, digest, _, _ in by_node.values()}
        if len(by_node) < 2 or len(kinds) < 2:
            continue
        # the odd copy: one from before the run where the others were written by it, else the fewest, else a failing one
        counts = {kind: sum(1 for size, digest, _, _ in by_node.values() if (size, digest) == kind) for kind in kinds}
        odd_kind = min(kinds, key=lambda kind: (
            -min(value[2] for value in by_node.values() if value[:2] == kind), counts[kind],
            min(odds.get(node, 3) for node, value in by_node.items() if value[:2] == kind)))
        odd = sorted(node for node, value in by_node.items() if value[:2] == odd_kind)
        if not failing & set(odd):
            continue
        usual = next(value for node, value in sorted(by_node.items()) if node not in odd)
        size, _, _, caller = by_node[odd[0]]
        shown = "; ".join(f"node{node} {value[0]} bytes" + (f", checksum {value[1]}" if value[1] else "")
                          for node, value in sorted(by_node.items()))
        return [Finding(
            "file-differs-between-nodes", f"{path}, which the job read (at {caller}), is a file on each node's own "
            f"disk, and {_nodes(odd)}'s copy differs from the others' ({size} bytes against {usual[0]}"
            + ("; written before the run, the others by it" if by_node[odd[0]][2] and not usual[2] else "")
            + f"): a cache, config or data file left there from before, and the run went wrong on {_nodes(odd)}",
            f"{path}: {shown}",
            odd[0], None,
            f"give every node the same file: delete {_nodes(odd)}'s copy so it is made again, or keep it on the "
            "shared folder (or ship it with the job) instead of each node's own disk; a cache should carry what it "
            "was made from (a version, a checksum) and be rebuilt when that differs")]
    return _read_on_some_nodes(ctx, copies)


BUILT_LATE_SECONDS = 2.0  # a save this long after the process started was work done before the job could go on


def built_on_some_nodes_findings(ctx: Context) -> list[Finding]:
    """A file on each node's own disk that one node's ranks had from before the run and another node's ranks built
    (torch.save) while the run waited: that node spent the time building what the other had (a node-local cache)."""
    had: dict[str, set[int]] = {}
    built: dict[str, dict[int, tuple]] = {}
    for trace in ctx.evidence.traces:
        if trace.calls is None or trace.node is None or trace.rank is None or trace.started_at is None:
            continue
        for op in (*trace.calls.files, *trace.calls.reads):
            if on_shared_folder(ctx, op.path):
                continue
            if op.op == "save" and op.at is not None and op.at - trace.started_at >= BUILT_LATE_SECONDS:
                built.setdefault(op.path, {}).setdefault(trace.node, (trace.rank, op, op.at - trace.started_at))
            elif op.op in ("load", "read") and op.mtime is not None and op.mtime < trace.started_at:
                had.setdefault(op.path, set()).add(trace.node)
    own_errors = nodes_with_own_errors(ctx)
    for path, builders in built.items():
        others = had.get(path, set()) - set(builders)
        if not others or others & own_errors:
            continue  # a node that had it raised an error of its own: its copy is the suspect (stale-file-on-node)
        node, (rank, op, after) = min(builders.items())
        return [Finding(
            "cache-built-on-one-node", f"{path} is a file on each node's own disk: {_nodes(others)} had it from "
            f"before the run, node{node} did not, and rank {rank} built it while the others waited ({op.caller}, "
            f"{after:.0f} s after it started)", f"{path}: saved by rank {rank} on node{node} {after:.1f} s into the "
            f"run; loaded from before the run on {_nodes(others)}", node, rank,
            f"build it once where every node sees it (the shared folder, or the project folder of `lab up "
            f"--workspace`), or on every node before the job starts (a setup step); and start the process group "
            f"after slow start-up work only with a timeout that covers it")]
    return []


def _read_on_some_nodes(ctx: Context, copies: dict[str, dict[int, tuple]]) -> list[Finding]:
    """A file on a node's own disk that only the failing nodes' code read, and not rank 0's node (rank 0 alone reading
    what it then shares is common): it is not on the others, and a config or cache left there steered those ranks."""
    dumped = {trace.node for trace in ctx.evidence.traces if trace.calls is not None and trace.node is not None}
    first = {trace.node for trace in ctx.evidence.traces if trace.rank == 0}
    ranks = {}
    for trace in ctx.evidence.traces:
        ranks.setdefault(trace.node, set()).add(trace.rank)
    stood_out = nodes_that_stood_out(ctx)
    written = {op.path for trace in ctx.evidence.traces if trace.calls is not None for op in trace.calls.writes}
    for path, by_node in copies.items():
        if path in written and not any(before for _, _, before, _ in by_node.values()):
            continue  # the job made it during the run (a scratch file named for its process): no node had it before
        readers = set(by_node)
        numbered = any(re.search(rf"(?<!\d){number}(?!\d)", path) for node in readers
                       for number in {node, *(rank for rank in ranks.get(node, ()) if rank is not None)})
        if numbered or readers & first or not dumped - readers or not readers & stood_out:
            continue
        size, _, before, caller = by_node[min(readers)]
        others = _nodes(sorted(dumped - readers))
        return [Finding(
            "file-on-one-node-read", f"{path}, which the job read at {caller}, was read on {_nodes(readers)} only "
            f"({size} bytes{', from before the run' if before else ''}): it is on that node's own disk and not on "
            f"{others}, so {_nodes(readers)}'s ranks ran with something the others did not have, and they failed",
            f"{path}: read on {_nodes(readers)}, on no other node", min(readers), None,
            f"remove {path} from {_nodes(readers)} (left from before), or give every node the same file (the shared "
            "folder, the workspace, or shipped with the job); a job's settings should come from its own files or "
            "command line, or be read by rank 0 and broadcast (broadcast_object_list), never from one node's disk")]
    return []


def _numbered(per_node: dict[int, str | None]) -> bool:
    """Values that differ only by the node's own number (/data/node0, /data/node1): per node by design."""
    return all(value is not None for value in per_node.values()) and len(
        {str(value).replace(str(node), "{node}") for node, value in per_node.items()}) == 1


def _shown(value: str | None) -> str:
    return "unset" if value is None else repr(value) if len(value) <= 60 else repr(value[:60] + "...")


def _env_read(ctx: Context, tb: Traceback) -> str | None:
    """The variable a traceback failed on: KeyError of os.environ, or a source line that reads one (getenv -> None)."""
    if tb.short_type == "KeyError" and (key := KEY_ERROR.match(tb.message)) and (
            any(frame.file.endswith("os.py") for frame in tb.frames) or _source_reads(ctx, tb, key["name"])):
        return key["name"]
    if tb.short_type in ("TypeError", "ValueError", "AttributeError") and "None" in tb.message:
        return _source_reads(ctx, tb, None)
    return None


def _source_reads(ctx: Context, tb: Traceback, name: str | None) -> str | None:
    """The variable the source lines of `tb` read from the environment (`name`, or any when None)."""
    end = next((index for index, line in enumerate(ctx.lines) if line is tb.line), None)
    for line in reversed(ctx.lines[max(0, (end or 0) - 2 * len(tb.frames) - 2):end or 0]):
        if line.node == tb.node and line.rank == tb.rank:
            for found in ENV_READ.finditer(line.text):
                if name is None or found["name"] == name:
                    return found["name"]
    return None


def node_findings(ctx: Context) -> list[Finding]:
    """Every rule of this family, for diagnose()."""
    return (rendezvous_findings(ctx) + executable_findings(ctx) + env_findings(ctx) + defaulted_rank_findings(ctx)
            + read_env_findings(ctx)
            + read_file_findings(ctx) + built_on_some_nodes_findings(ctx) + file_findings(ctx))



def format_probes(probes: NodeProbes) -> str:
    """What the nodes answered, one line per path, command and variable asked about ('' when nothing was asked
    beyond their interpreter): what `lab explain` shows under the findings."""
    answered = probes.answered()
    lines = [f"  {path}: " + "; ".join(f"node{facts.node} {_describe(facts.paths.get(path))}" for facts in answered)
             for path in dict.fromkeys(path for facts in answered for path in facts.paths)]
    lines += [f"  {name}: " + "; ".join(f"node{facts.node} {facts.commands.get(name) or 'not on PATH'}"
                                        for facts in answered)
              for name in dict.fromkeys(name for facts in answered for name in facts.commands) if name not in PYTHONS]
    lines += [f"  ${name}: set on {_nodes(facts.node for facts in answered if facts.env.get(name)) or 'no node'}"
              for name in dict.fromkeys(name for facts in answered for name in facts.env)]
    lines += [f"  node{facts.node}: {facts.error}" for facts in probes.nodes if facts.error]
    if not lines:
        return ""
    return f"the nodes, asked after the run ({probes.seconds:g} s):\n" + "\n".join(lines)
