"""Why a run failed or hung: findings drawn from what the run left behind.

A pure library (no Docker, no I/O): the runner gathers `Evidence` after a run (each node's
exit code, OOM flag and combined log; stack dumps when it took them; the launch facts and the
lab's injected faults) and `diagnose()` returns `Finding`s, the root cause first. The rules
match torch's message families (c10d, gloo, NCCL, CUDA, torchrun, Python tracebacks) rather
than one script's text, and use the environment and the launch facts where they are known.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Protocol

from lab.jobs.stacks import Frame, ProcessStack

# ---------------------------------------------------------------------------------------------
# Evidence: what the runner knows after a run.


@dataclass
class NodeEvidence:
    index: int
    hostname: str
    exit_code: int | None  # None: still running when the lab stopped it
    oom_killed: bool = False
    lines: list[str] = field(default_factory=list)  # torchrun agent + workers, combined
    interfaces: list[str] = field(default_factory=list)
    gpus: int = 0
    memory_limit: str | None = None  # e.g. '2g', as `lab up --memory` set it


@dataclass(frozen=True)
class Fault:
    node: int
    action: str  # a lab fault: 'kill-worker', 'kill-node', 'kill', 'stop', 'pause', 'partition', 'delay', ...


@dataclass
class Evidence:
    nodes: list[NodeEvidence]
    nnodes: int
    nproc_per_node: int = 1
    world_size: int | None = None  # None: nnodes * nproc_per_node
    backend: str = "auto"
    master_addr: str | None = None
    master_port: int | None = None
    env: dict[str, str] = field(default_factory=dict)  # what the user added (--env)
    command: list[str] = field(default_factory=list)  # the user's command line
    faults: list[Fault] = field(default_factory=list)
    timed_out: bool = False
    stopped: str = ""  # why the run was stopped early ('interrupted', ...), '' if it was not
    processes: list[ProcessStack] = field(default_factory=list)

    @property
    def expected_world_size(self) -> int:
        return self.world_size or self.nnodes * self.nproc_per_node

    @property
    def failed(self) -> bool:
        return (self.timed_out or bool(self.stopped) or any(node.oom_killed for node in self.nodes)
                or any(node.exit_code != 0 for node in self.nodes))


class LaunchOutcome(Protocol):
    """What runner.launch() returns (runner.LaunchResult)."""
    exit_codes: dict[int, int | None]
    logs: dict[int, str]
    timed_out: bool
    oom_killed: list[int]


def evidence_from_launch(result: LaunchOutcome, *, nnodes: int, nproc_per_node: int = 1, backend: str = "auto",
                         master_addr: str | None = None, master_port: int | None = None,
                         hostnames: dict[int, str] | None = None, interfaces: dict[int, list[str]] | None = None,
                         gpus: dict[int, int] | None = None, memory_limit: str | None = None,
                         faults: Iterable[tuple[int, str]] = (), env: dict[str, str] | None = None,
                         command: list[str] | None = None, stopped: str = "",
                         processes: list[ProcessStack] | None = None) -> Evidence:
    """Evidence from a launch result plus what the runner knows of the lab.

    `hostnames`/`interfaces`/`gpus` are per node index (missing: 'node<i>', unknown, 0);
    `faults` are the (node, action) pairs the lab injected during the run.
    """
    hostnames, interfaces, gpus = hostnames or {}, interfaces or {}, gpus or {}
    nodes = [NodeEvidence(index=index, hostname=hostnames.get(index, f"node{index}"),
                          exit_code=result.exit_codes.get(index), oom_killed=index in result.oom_killed,
                          lines=result.logs.get(index, "").splitlines(), interfaces=list(interfaces.get(index, [])),
                          gpus=gpus.get(index, 0), memory_limit=memory_limit)
             for index in sorted(set(result.exit_codes) | set(result.logs))]
    return Evidence(nodes=nodes, nnodes=nnodes, nproc_per_node=nproc_per_node, backend=backend,
                    master_addr=master_addr, master_port=master_port, env=dict(env or {}), command=list(command or []),
                    faults=[Fault(int(node), action) for node, action in faults], timed_out=result.timed_out,
                    stopped=stopped, processes=list(processes or []))


# ---------------------------------------------------------------------------------------------
# Findings.


@dataclass
class Finding:
    cause: str  # stable id, e.g. 'master-addr-loopback'
    title: str
    evidence: str  # the quoted line (or fact) it rests on
    node: int | None
    rank: int | None
    fix: str

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Finding":
        """A finding as a run record keeps it (extra keys such as `step` are left out)."""
        return cls(**{key: data.get(key) for key in cls.__dataclass_fields__})


def format_findings(findings: list[Finding], verbose: bool = False) -> str:
    """Plain text: the root cause (verbose: every finding), each with where, the quoted evidence and the fix."""
    if not findings:
        return "no cause found in the logs"
    blocks = []
    for finding in findings if verbose else findings[:1]:
        where = ", ".join(part for part in (
            f"node{finding.node}" if finding.node is not None else "",
            f"rank {finding.rank}" if finding.rank is not None else "") if part)
        blocks.append(f"cause: {finding.title}" + (f" ({where})" if where else "")
                      + f"\n  evidence: {finding.evidence}\n  fix: {finding.fix}")
    if not verbose and len(findings) > 1:
        blocks.append(f"({len(findings) - 1} more finding(s): show them all with --verbose)")
    return "\n".join(blocks)


def findings_json(findings: list[Finding]) -> str:
    return json.dumps([finding.to_dict() for finding in findings], indent=2)


# ---------------------------------------------------------------------------------------------
# Reading the logs.

# torchrun and c10d put "[rank3]:" (global rank) or "[default0]:" (role + local rank) before a worker's lines.
RANK_PREFIX = re.compile(r"^\[(?:rank(?P<rank>\d+)|(?P<role>[A-Za-z_]+?)(?P<local>\d+))\]:\s?")
TRACEBACK_START = "Traceback (most recent call last):"
TRACEBACK_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|NotMet))"
                            r"(?::\s?(?P<message>.*))?$")
# torchrun's failure report: "  rank      : 1 (local_rank: 1)" then "  exitcode  : -9 (pid: 123)".
REPORT_RANK = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d+)\s*\(local_rank")
REPORT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(?P<code>-?\d+)")
LIBRARY_FILE = re.compile(r"site-packages|dist-packages|/lib/python3[.\d]*/|^<frozen")


@dataclass(frozen=True)
class LogLine:
    node: int
    rank: int | None
    text: str  # without the rank prefix

    def where(self) -> str:
        return f"node{self.node}" + (f" rank {self.rank}" if self.rank is not None else "")


@dataclass
class Traceback:
    node: int
    rank: int | None
    exc_type: str
    message: str
    line: LogLine  # the exception line
    frames: list[Frame]

    @property
    def short_type(self) -> str:
        return self.exc_type.rsplit(".", 1)[-1]

    def user_frame(self) -> Frame | None:
        """The innermost frame in the user's own code (not torch's or the standard library's)."""
        own = [frame for frame in self.frames if not LIBRARY_FILE.search(frame.file)]
        return own[-1] if own else (self.frames[-1] if self.frames else None)

    def collective(self) -> str | None:
        """The torch.distributed call the process was in, e.g. 'all_reduce'."""
        for frame in reversed(self.frames):
            if frame.file.endswith("distributed_c10d.py") and not frame.function.startswith("_"):
                return frame.function
        return None


def read_lines(evidence: Evidence) -> list[LogLine]:
    """Every node's lines, prefixes removed, each with the global rank when it can be told."""
    lines = []
    for node in evidence.nodes:
        for raw in node.lines:
            text, rank = raw, None
            while match := RANK_PREFIX.match(text):
                if match["rank"] is not None:
                    rank = int(match["rank"])
                elif rank is None:
                    rank = node.index * evidence.nproc_per_node + int(match["local"])
                text = text[match.end():]
            if rank is None and evidence.nproc_per_node == 1:
                rank = node.index
            lines.append(LogLine(node.index, rank, text.rstrip()))
    return lines


def read_tracebacks(lines: list[LogLine]) -> list[Traceback]:
    """Python tracebacks in the logs, followed per (node, rank) stream so interleaved ranks stay apart."""
    open_frames: dict[tuple[int, int | None], list[Frame]] = {}
    found = []
    for line in lines:
        key = (line.node, line.rank)
        if line.text.strip() == TRACEBACK_START:
            open_frames[key] = []
            continue
        if key not in open_frames:
            continue
        if frame := TRACEBACK_FRAME.match(line.text):
            open_frames[key].append(Frame(frame["function"], frame["file"], int(frame["line"])))
        elif exception := EXCEPTION_LINE.match(line.text):
            found.append(Traceback(line.node, line.rank, exception["type"], (exception["message"] or "").strip(),
                                   line, open_frames.pop(key)))
    return [tb for tb in found if not tb.exc_type.endswith("ChildFailedError")]  # torchrun's own summary


def failure_report_ranks(lines: list[LogLine]) -> dict[int, list[tuple[int, int]]]:
    """node -> [(rank, exit code)] from torchrun's failure reports, root cause first."""
    reports: dict[int, list[tuple[int, int]]] = {}
    pending: dict[int, int] = {}
    root_cause = set()
    for line in lines:
        if line.text.startswith("Root Cause"):
            root_cause.add(line.node)
        if match := REPORT_RANK.match(line.text):
            pending[line.node] = int(match["rank"])
        elif (match := REPORT_EXIT.match(line.text)) and line.node in pending:
            entry = (pending.pop(line.node), int(match["code"]))
            if line.node in root_cause:
                reports.setdefault(line.node, []).insert(0, entry)
                root_cause.discard(line.node)
            else:
                reports.setdefault(line.node, []).append(entry)
    return reports


# ---------------------------------------------------------------------------------------------
# Helpers for rules.

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("::ffff:")).is_loopback
    except ValueError:
        return False


def _endpoint_host(value: str) -> str:
    """'tcp://h:1', 'h:1', '[::1]:1', 'h' -> the host part."""
    value = re.sub(r"^\w+://", "", value)
    if value.startswith("["):
        return value[1:value.find("]")]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


# --master-addr X / --master_addr=X / --rdzv-endpoint X:P / --init-method tcp://X:P / tcp://X:P anywhere
ADDRESS_OPTION = re.compile(r"^--(?:master[-_]addr|rdzv[-_]endpoint|init[-_]method|dist[-_]url)(?:=(?P<value>.+))?$")


def configured_master_addrs(evidence: Evidence) -> list[tuple[str, str, int | None, int | None]]:
    """(host, where it was set, node, rank) for every rendezvous address the run was given."""
    found = []
    if evidence.master_addr:
        found.append((evidence.master_addr, f"MASTER_ADDR={evidence.master_addr} (the lab's launch)", None, None))
    if "MASTER_ADDR" in evidence.env:
        found.append((evidence.env["MASTER_ADDR"], f"--env MASTER_ADDR={evidence.env['MASTER_ADDR']}", None, None))
    argv = evidence.command
    for position, arg in enumerate(argv):
        if match := ADDRESS_OPTION.match(arg):
            value = match["value"] or (argv[position + 1] if position + 1 < len(argv) else "")
            found.append((_endpoint_host(value), " ".join(argv[position:position + (1 if match["value"] else 2)]),
                          None, None))
        elif tcp := re.search(r"tcp://([^\s'\"]+)", arg):
            found.append((_endpoint_host(tcp.group(1)), arg, None, None))
    for process in evidence.processes:
        if "MASTER_ADDR" in process.env:
            found.append((process.env["MASTER_ADDR"], f"MASTER_ADDR={process.env['MASTER_ADDR']} "
                          f"(environment of pid {process.pid} on node{process.node})", process.node, process.rank))
    return found


def _rendezvous_host(evidence: Evidence) -> str:
    return evidence.nodes[0].hostname if evidence.nodes else "node0"


def _node(evidence: Evidence, index: int) -> NodeEvidence | None:
    return next((node for node in evidence.nodes if node.index == index), None)


def _quote(line: LogLine, limit: int = 300) -> str:
    text = line.text.strip()
    return f"{line.where()}: {text if len(text) <= limit else text[:limit] + '...'}"


# ---------------------------------------------------------------------------------------------
# Rules. Each returns findings; `diagnose` orders them by the priority of their cause.

# Causes, most specific / most likely root first.
PRIORITY = [
    "lab-fault", "out-of-memory", "master-addr-loopback", "master-addr-unresolvable", "wrong-service-on-port",
    "master-port-in-use", "socket-ifname-missing", "nccl-without-gpu", "duplicate-gpu", "shared-memory-exhausted",
    "package-missing-on-nodes", "import-error", "script-not-found", "bad-arguments", "process-group-not-initialized",
    "duplicate-rank", "late-rank", "world-size-mismatch", "ddp-parameter-mismatch", "ddp-unused-parameters", "shape-mismatch", "collective-mismatch",
    "rank-crashed", "uneven-collectives", "process-killed", "master-unreachable", "ranks-missing", "peer-lost",
    "collective-timeout", "timed-out",
    "stopped", "nonzero-exit",
]
# Causes that describe how a run ended rather than why.
SYMPTOMS = {"lab-fault", "ranks-missing", "peer-lost", "collective-timeout", "timed-out", "stopped", "nonzero-exit"}


@dataclass(frozen=True)
class Context:
    evidence: Evidence
    lines: list[LogLine]
    tracebacks: list[Traceback]
    reports: dict[int, list[tuple[int, int]]]

    @property
    def multi_node(self) -> bool:
        return self.evidence.nnodes > 1 or len({node.hostname for node in self.evidence.nodes}) > 1


@dataclass(frozen=True)
class PatternRule:
    """A line matching `pattern` is evidence of `cause`; `describe` turns the match into (title, fix)."""
    cause: str
    pattern: re.Pattern
    describe: Callable[[re.Match, LogLine, Context], tuple[str, str] | None]  # None: not this cause after all


def _unresolvable(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    host = match["host"] or "the rendezvous host"
    return (f"the rendezvous host '{host}' does not resolve on node{line.node}",
            f"set MASTER_ADDR (or --master-addr / --rdzv-endpoint) to a name every node resolves, "
            f"e.g. {_rendezvous_host(ctx.evidence)}, the lab's rendezvous host; check the spelling of '{host}'")


def _port_in_use(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    named = re.search(r"port: (\d+)|address \('[^']*', (\d+)\)", line.text)
    port = next(filter(None, named.groups()), None) if named else ctx.evidence.master_port
    port_text = f"port {port}" if port else "the rendezvous port"
    return (f"{port_text} is already in use on node{line.node}: the store could not listen on it",
            f"pick a free MASTER_PORT (lab: --master-port PORT) or stop what holds {port_text} "
            f"(a previous run still alive? `ss -ltnp` on node{line.node} shows it)")


def _ifname_missing(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    node = _node(ctx.evidence, line.node)
    have = [name for name in (node.interfaces if node else []) if name != "lo"]
    name = match["name"]
    variables = [key for key in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
                 if name and any(value == name for value in _env_values(ctx, key))]
    variable = " / ".join(variables) or ("NCCL_SOCKET_IFNAME" if "Bootstrap" in line.text else "GLOO_SOCKET_IFNAME")
    named = f"'{name}'" if name else "the interface asked for"
    return (f"{variable} names an interface node{line.node} does not have ({named})",
            f"set {variable} to an interface every node has"
            + (f" ({', '.join(have)} on node{line.node})" if have else "") + ", or unset it to let torch choose")


def _env_values(ctx: Context, key: str) -> list[str]:
    values = [ctx.evidence.env[key]] if key in ctx.evidence.env else []
    return values + [process.env[key] for process in ctx.evidence.processes if key in process.env]


def _no_gpu(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    node = _node(ctx.evidence, line.node)
    gpus = node.gpus if node else 0
    return (f"nccl/CUDA asked for on node{line.node}, which has {gpus or 'no'} GPU(s) usable by torch",
            "use the gloo backend on CPU nodes (init_process_group('gloo'), tensors on the CPU), or run on a lab "
            "with GPUs: `lab up --gpus all` on a GPU host (`lab doctor` shows what each node has)")


def _duplicate_gpu(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    node = _node(ctx.evidence, line.node)
    gpus = node.gpus if node else 0
    return (f"more nccl processes than GPUs on node{line.node}: two ranks landed on one GPU",
            f"run at most one process per GPU (--nproc-per-node {gpus or 1} here), and give each its own device: "
            "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init_process_group; or use gloo")


def _shape_mismatch(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return ("the ranks passed tensors of different sizes to the same collective",
            "make every rank pass the same shape and dtype to each collective (pad or drop the uneven last batch, "
            "e.g. DistributedSampler(drop_last=True)); TORCH_DISTRIBUTED_DEBUG=DETAIL names the shapes")


def _fingerprint_mismatch(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL's report: a different OpType is an order bug, the same one a shape bug."""
    ops = re.findall(r"OpType=(\w+)", line.text)
    if len(set(ops)) > 1:
        return None
    return _shape_mismatch(match, line, ctx)


def _op_mismatch(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    ops = re.findall(r"OpType=(\w+)", line.text)
    if len(set(ops)) < 2:
        return None
    return (f"the ranks called different collectives at the same point ({' vs '.join(dict.fromkeys(ops))})",
            "make every rank call the same collectives in the same order (no collective inside a branch on rank "
            "or on data that differs per rank)")


def _not_initialized(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return ("a torch.distributed call before init_process_group (or after destroy_process_group)",
            "call dist.init_process_group(...) first on every rank, and guard clean-up with "
            "`if dist.is_initialized(): dist.destroy_process_group()`")


def _script_not_found(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"the script {match['path']} is not on node{line.node}",
            "copy it to every node (lab exec --copy FILE, or a path under the lab's shared folder /lab/shared)")


def _bad_arguments(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"the script rejected its command-line arguments: {match['why']}",
            "pass the arguments the script's usage line asks for (lab exec fills {rank}, {world_size}, ... per node)")


def _wrong_service(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    endpoint = re.search(r"to host (\S+?):(\d+)", line.text)
    where = f"{endpoint[1]}:{endpoint[2]}" if endpoint else "the rendezvous address"
    port = endpoint[2] if endpoint else None
    known = {"22": "sshd's", "80": "a web server's", "443": "a web server's"}.get(port or "", "another program's")
    return (f"something other than a torch store answers at {where} (node{line.node} dialled it): the port is "
            f"{known}", f"give MASTER_PORT (or the tcp:// port) the port rank 0's store listens on, a free one "
            f"(the lab gives {{master_port}} and --master-port), not {port or 'a port another service uses'}")


def _shared_memory(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"shared memory (/dev/shm) ran out on node{line.node}: tensors handed between processes live there",
            "share less at once: fewer or lighter DataLoader workers (num_workers), smaller batches, or "
            "torch.multiprocessing.set_sharing_strategy('file_system'); or give the machines a bigger /dev/shm "
            "(the lab's nodes have 512 MiB, Docker's default is 64 MiB: --shm-size; Kubernetes: a memory emptyDir); "
            "`lab doctor` shows each node's /dev/shm")


def _unused_parameters(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    named = _near(ctx, line, r"Parameters which did not receive grad for rank (\d+): (.+)")
    indices = _near(ctx, line, r"Parameter indices which did not receive grad for rank (\d+): ([\d ]+)")
    which = (f"{named[2].strip()}" if named else f"parameter indices {indices[2].strip()}" if indices
             else "some parameters")
    return (f"DDP got no gradient for {which} (rank {(named or indices)[1] if (named or indices) else '?'}): "
            "the loss does not use them", "remove the parameters the forward pass never uses (or freeze them: "
            "requires_grad=False); if they are used only on some steps, pass find_unused_parameters=True to "
            "DistributedDataParallel" + ("" if named else "; TORCH_DISTRIBUTED_DEBUG=INFO names them"))


def _near(ctx: Context, line: LogLine, pattern: str) -> re.Match | None:
    """The first line of the same node matching `pattern`."""
    return next((found for other in ctx.lines if other.node == line.node
                 for found in [re.search(pattern, other.text)] if found), None)


def _model_mismatch(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    shape = re.search(r"\[(\d+)\]: params\[(\d+)\] in this process with sizes (\[[^\]]*\]) appears not to match "
                      r"sizes of the same param in process (\d+)", line.text)
    detail = (f": rank {shape[1]}'s params[{shape[2]}] is {shape[3]}, not the shape rank {shape[4]} has" if shape
              else "")
    return (f"the ranks built different models, so DDP cannot keep them in step{detail}",
            "build the same model on every rank: the same code, config and checkpoint on every node (a config "
            "read per node, a rank-dependent layer size or a stale file on one node makes them differ)")


PATTERN_RULES = [
    PatternRule("master-addr-unresolvable", re.compile(
        r"addresses of \((?P<host>[^,\s]+), \d+\) cannot be retrieved \(gai error: -[235]\b"
        r"|gaierror: \[Errno -[235]\]|Name or service not known|Temporary failure in name resolution"
        r"|No address associated with hostname"), _unresolvable),
    PatternRule("master-port-in-use", re.compile(r"EADDRINUSE|[Aa]ddress already in use|errno: 98\b"), _port_in_use),
    PatternRule("wrong-service-on-port", re.compile(
        r"invalid value returned from server|Ping failed"), _wrong_service),
    PatternRule("shared-memory-exhausted", re.compile(
        r"unable to (?:allocate shared memory|write to file </torch_|open shared memory)|insufficient shared memory"
        r"|[Bb]us error.*(?:shared memory|shm)|/dev/shm.*No space left on device"), _shared_memory),
    PatternRule("ddp-unused-parameters", re.compile(
        r"Expected to have finished reduction in the prior iteration"), _unused_parameters),
    PatternRule("ddp-parameter-mismatch", re.compile(
        r"appears not to match sizes of the same param in process|DDP expects same model across all ranks"),
        _model_mismatch),
    PatternRule("socket-ifname-missing", re.compile(
        r"Unable to find (?:address|interface) for:? (?P<name>\S+)|Bootstrap : no socket interface found"),
        _ifname_missing),
    PatternRule("nccl-without-gpu", re.compile(
        r"No CUDA GPUs are available|Found no NVIDIA driver|Torch not compiled with CUDA enabled"
        r"|ProcessGroupNCCL is only supported with GPUs|Distributed package doesn't have NCCL built in"
        r"|NCCL is not available|CUDA driver initialization failed|no CUDA-capable device is detected"), _no_gpu),
    PatternRule("duplicate-gpu", re.compile(
        r"Duplicate GPU detected|CUDA error: invalid device ordinal"), _duplicate_gpu),
    PatternRule("collective-mismatch", re.compile(r"Detected mismatch between collectives on ranks"), _op_mismatch),
    PatternRule("shape-mismatch", re.compile(r"Detected mismatch between collectives on ranks"), _fingerprint_mismatch),
    PatternRule("shape-mismatch", re.compile(
        r"op\.preamble\.length <= op\.nbytes|Received data size doesn't match expected size"
        r"|[Mm]essage truncated|[Tt]ensors? must have (?:the )?same (?:size|shape|number of elements)"
        r"|size mismatch in collective|Mismatch between collective"), _shape_mismatch),
    PatternRule("process-group-not-initialized", re.compile(
        r"Default process group has not been initialized|Process group cannot be None"), _not_initialized),
    PatternRule("script-not-found", re.compile(
        r"can't open file '(?P<path>[^']+)': \[Errno 2\]"), _script_not_found),
    PatternRule("bad-arguments", re.compile(r"^(?:usage: )?\S+\.py: error: (?P<why>.+)$"), _bad_arguments),
]


def pattern_findings(ctx: Context) -> list[Finding]:
    found = []
    for line in ctx.lines:
        if line.text.startswith("    "):
            continue  # a source line a traceback quotes (`raise RuntimeError("...")`), not a message
        for rule in PATTERN_RULES:
            if match := rule.pattern.search(line.text):
                described = rule.describe(match, line, ctx)
                if described:
                    rank = line.rank if line.rank is not None else _report_root_rank(ctx, line.node)
                    found.append(Finding(rule.cause, described[0], _quote(line), line.node, rank, described[1]))
    return found


# Connection attempts c10d reports: "failed to connect to [host]:port", "trying to connect to (host, port)",
# "failed to connect/validate to host host:port".
CONNECT_ATTEMPT = re.compile(
    r"(?:failed to connect to \[(?P<h1>[^\]]+)\]:(?P<p1>\d+)"
    r"|trying to connect to \((?P<h2>[^,]+), (?P<p2>\d+)\)"
    r"|connect(?:/validate)? to host (?P<h3>\S+?):(?P<p3>\d+)\b)"
    r"(?P<rest>.*)")
REFUSED_OR_TIMEOUT = re.compile(r"Connection refused|errno: 111|timed out|timeout", re.IGNORECASE)
FINAL_ATTEMPT = re.compile(r"^[\w.]*(?:Error|Exception)\b|- timed out \(try=")  # the exception, or c10d's last try
HARMLESS_ERRNO = re.compile(r"errno: 99 - Cannot assign requested address")  # c10d tries ::1 first, then 127.0.0.1


def _connect_attempts(ctx: Context) -> list[tuple[LogLine, str, int]]:
    attempts = []
    for line in ctx.lines:
        if match := CONNECT_ATTEMPT.search(line.text):
            host = match["h1"] or match["h2"] or match["h3"]
            attempts.append((line, host, int(match["p1"] or match["p2"] or match["p3"])))
    return attempts


def loopback_findings(ctx: Context) -> list[Finding]:
    """A multi-node job told to meet at localhost/127.x: every node looks for the store on itself."""
    if not ctx.multi_node:
        return []
    fix = (f"set MASTER_ADDR to {_rendezvous_host(ctx.evidence)} (the lab's rendezvous host), not localhost; "
           "with torchrun: --master-addr/--rdzv-endpoint node0:PORT; never hard-code localhost or 127.0.0.1 "
           "in a multi-node script")
    # The evidence: a node other than the rendezvous node (node0) dialling a loopback address.
    attempts = [(line, host) for line, host, _ in _connect_attempts(ctx) if is_loopback(host) and line.node != 0]
    if attempts:
        line, host = attempts[0]
        return [Finding("master-addr-loopback", f"a multi-node job points its rendezvous at {host}",
                        _quote(line), line.node, line.rank, fix)]
    for host, where, node, rank in configured_master_addrs(ctx.evidence):
        if is_loopback(host):
            return [Finding("master-addr-loopback", f"a multi-node job points its rendezvous at {host}", where,
                            node, rank, fix)]
    return []


def unreachable_findings(ctx: Context) -> list[Finding]:
    """Connection attempts that were refused or timed out: nothing listens at that address and port."""
    master_port = ctx.evidence.master_port
    # The run hung, or a rank waited in vain for others: a retry that failed then is no passing hiccup.
    stuck = ctx.evidence.timed_out or any(JOINED.search(line.text) or STORE_WAIT.search(line.text)
                                          for line in ctx.lines)
    for line, host, port in _connect_attempts(ctx):
        if HARMLESS_ERRNO.search(line.text) or not REFUSED_OR_TIMEOUT.search(line.text):
            continue
        if not (stuck or FINAL_ATTEMPT.search(line.text)):
            continue  # a retry that may have succeeded later (c10d retries while the store starts)
        if ctx.multi_node and is_loopback(host):
            continue  # master-addr-loopback's evidence
        if master_port and port != master_port:
            fix = (f"use the same MASTER_PORT on every node: the rendezvous listens on {master_port}, this rank "
                   f"dialled {port}")
        else:
            fix = (f"check that rank 0 (the store) runs on {host} and listens on {port}: MASTER_ADDR/MASTER_PORT "
                   "must be the same on every node, and rank 0 must start (see its log)")
        return [Finding("master-unreachable", f"nothing answered at {host}:{port} (the rendezvous store)",
                        _quote(line), line.node, line.rank, fix)]
    return []


JOINED = re.compile(r"(?P<joined>\d+)/(?P<size>\d+) clients joined")
STORE_WAIT = re.compile(r"wait timeout after \d+ms, keys: (?P<keys>\S+)"
                        r"|Timed out after \d+ seconds waiting for clients")


def _missing_rank(keys: str | None) -> int:
    """The rank a store wait was for: gloo's keys end in it ('/default_pg/0//cpu//0/2'); -1 when not told."""
    last = (keys or "").rstrip("/").rsplit("/", 1)[-1]
    return int(last) if last.isdigit() else -1


def world_size_findings(ctx: Context) -> list[Finding]:
    launched = ctx.evidence.expected_world_size
    found = []
    for line in ctx.lines:
        if match := JOINED.search(line.text):
            joined, size = int(match["joined"]), int(match["size"])
            if size != launched:
                found.append(Finding(
                    "world-size-mismatch",
                    f"the job expects a world size of {size} but the lab launched {launched} process(es)",
                    _quote(line), line.node, line.rank,
                    f"pass world_size={launched} (or read WORLD_SIZE from the environment instead of hard-coding it); "
                    "or launch as many processes as the job expects (--nproc-per-node / nodes)"))
            elif joined < size:
                found.append(Finding(
                    "ranks-missing", f"only {joined} of {size} ranks reached the rendezvous", _quote(line),
                    line.node, line.rank,
                    "look at the ranks that never joined (their node's log): they failed before init_process_group "
                    "or could not reach MASTER_ADDR:MASTER_PORT"))
        elif (wait := STORE_WAIT.search(line.text)) and _missing_rank(wait["keys"]) >= launched:
            found.append(Finding(
                "world-size-mismatch", f"the job waits for rank {_missing_rank(wait['keys'])}, but the lab launched "
                                       f"{launched} process(es) (ranks 0..{launched - 1})", _quote(line), line.node,
                line.rank, f"pass world_size={launched} (or read WORLD_SIZE from the environment instead of "
                           "hard-coding it); or launch as many processes as the job expects"))
        elif wait:
            found.append(Finding(
                "ranks-missing", "a rank waited for others that never arrived", _quote(line), line.node, line.rank,
                "look at the ranks that never arrived: they crashed, hang before this point, or dialled another "
                "address or port"))
    return found


def duplicate_rank_findings(ctx: Context) -> list[Finding]:
    """Every launched process waited in gloo's rendezvous for a rank inside the world (gloo's keys end in the rank
    awaited): none is missing, none crashed, yet that rank never came, so two processes claimed one rank (LOCAL_RANK
    used as the rank, or the same node rank given on two nodes)."""
    waiting: dict[tuple[int, int | None], tuple[LogLine, int]] = {}
    for line in ctx.lines:
        wait = STORE_WAIT.search(line.text)
        awaited = _missing_rank(wait["keys"]) if wait else -1
        if 0 <= awaited < ctx.evidence.expected_world_size:
            waiting.setdefault((line.node, line.rank), (line, awaited))
    if len(waiting) < max(2, ctx.evidence.expected_world_size):
        return []
    line, awaited = next(iter(waiting.values()))
    nodes = ", ".join(f"node{node}" for node in sorted({node for node, _ in waiting}))
    torchrun = bool(ctx.reports) or any("torch/distributed/run.py" in other.text for other in ctx.lines)
    return [Finding(
        "duplicate-rank", f"all {len(waiting)} processes ({nodes}) reached the rendezvous, yet rank {awaited} never "
                          "did: two of them claim the same rank", _quote(line), line.node, line.rank,
        "give every process its own global rank: under torchrun pass RANK (int(os.environ['RANK'])), not "
        "LOCAL_RANK, which starts at 0 on every node" if torchrun else
        "give every process its own global rank: node_rank * processes_per_node + local_rank, with a different "
        "node rank on each node (lab exec fills {node_rank} and {rank} per node)")]


def late_rank_findings(ctx: Context) -> list[Finding]:
    """A rank gave up waiting at the rendezvous while another was alive but busy outside torch.distributed (its
    stack, taken before the lab stopped it, says where): late, not lost."""
    gave_up = next((line for line in ctx.lines if JOINED.search(line.text) or STORE_WAIT.search(line.text)), None)
    if gave_up is None:
        return []
    for process in ctx.evidence.processes:
        where = process.waiting() if process.role != "agent" else None
        if where is None or where.in_distributed_call or where.user_frame is None:
            continue
        frame = where.user_frame
        who = f"rank {process.rank}" if process.rank is not None else "a process"
        return [Finding(
            "late-rank", f"{who} on node{process.node} was alive but late: still in {frame.function} "
                         f"({frame.file}:{frame.line}) when node{gave_up.node} gave up waiting for it at the rendezvous",
            f"node{process.node} {who}: in {frame.function} at {frame.file}:{frame.line} (its stack); node{gave_up.node}: "
            + gave_up.text.strip()[:200], process.node, process.rank,
            "join the process group before slow start-up work (or do that work after init_process_group), or give "
            "init_process_group a timeout longer than the slowest rank's start (timeout=datetime.timedelta(...); "
            "torchrun: --rdzv-conf join_timeout=...)")]
    return []


# Exceptions that are the consequence of another rank's failure, not a cause of their own.
SYMPTOM = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|[Tt]imed out|timeout|DistStoreError"
    r"|DistNetworkError|DistBackendError|client socket|Socket Timeout|NCCL communicator was aborted"
    r"|ProcessGroupNCCL.*(?:watchdog|Timeout)|Watchdog caught collective operation timeout")
START_ERRORS = {"ModuleNotFoundError", "ImportError", "SyntaxError", "IndentationError"}


def _explained_by_rule(text: str) -> bool:
    """A line one of the message rules already turns into a cause."""
    return any(rule.pattern.search(text) for rule in PATTERN_RULES) or bool(
        JOINED.search(text) or STORE_WAIT.search(text))


def traceback_findings(ctx: Context) -> list[Finding]:
    """Exceptions a rank raised on its own (not a peer's failure echoed back, not a cause found by a rule)."""
    found = []
    for tb in ctx.tracebacks:
        if _explained_by_rule(tb.line.text) or SYMPTOM.search(f"{tb.exc_type}: {tb.message}"):
            continue
        rank = tb.rank if tb.rank is not None else _report_root_rank(ctx, tb.node)
        frame = tb.user_frame()
        at = f" at {frame.file}:{frame.line} in {frame.function}" if frame else ""
        where = f"node{tb.node}" + (f" rank {rank}" if rank is not None else "")
        evidence = f"{where}: {tb.exc_type}: {tb.message}"[:400] + at
        if tb.short_type in START_ERRORS:
            missing = re.search(r"No module named '([^'.]+)", tb.message)
            lacking = _nodes_lacking(ctx, missing.group(1)) if missing else set()
            if missing and ctx.multi_node and lacking < {node.index for node in ctx.evidence.nodes}:
                module, nodes = missing.group(1), ", ".join(f"node{index}" for index in sorted(lacking))
                found.append(Finding(
                    "package-missing-on-nodes", f"'{module}' is missing on {nodes} only: the nodes' Python "
                    "environments differ", evidence, tb.node, rank,
                    f"give every node the same packages: on a lab, `lab up --pip <the package with '{module}'> "
                    f"--recreate` installs it on all of them, and `lab doctor` names a node whose versions differ; "
                    f"on real hosts, install it on {nodes} as on the others"))
                continue
            fix = (f"install '{missing.group(1)}' on the nodes: `lab up --pip <the package with '{missing.group(1)}'> "
                   "--recreate` on a lab (resolved on this host, no registry in the nodes), or remove the import"
                   if missing else "fix the error at the quoted line; every node runs the same file")
            found.append(Finding("import-error", f"the script fails at start on node{tb.node}: {tb.short_type}",
                                 evidence, tb.node, rank, fix))
        else:
            fix = f"fix the {tb.short_type}" + (f" in {frame.file}:{frame.line}" if frame else "")
            found.append(Finding("rank-crashed", f"rank {rank if rank is not None else '?'} crashed with "
                                                 f"{tb.short_type}{at}", evidence, tb.node, rank,
                                 fix + "; the other ranks' connection errors and timeouts follow from it"))
    return found


def _nodes_lacking(ctx: Context, module: str) -> set[int]:
    """The nodes where some process could not import `module`."""
    return {tb.node for tb in ctx.tracebacks if f"No module named '{module}" in tb.message}


def _report_root_rank(ctx: Context, node: int) -> int | None:
    report = ctx.reports.get(node)
    return report[0][0] if report else None


def uneven_findings(ctx: Context) -> list[Finding]:
    """A node whose ranks all finished (exit 0) while another's still waited in a collective (a peer gone, a
    timeout, stopped): the ranks ran different numbers of collectives, none of them crashed."""
    finished = [node.index for node in ctx.evidence.nodes if node.exit_code == 0]
    if not finished or not ctx.multi_node:
        return []
    waiting = [tb for tb in ctx.tracebacks if tb.node not in finished and SYMPTOM.search(f"{tb.exc_type}: {tb.message}")]
    if not waiting:
        return []
    tb = waiting[0]
    frame = tb.user_frame()
    at = f" at {frame.file}:{frame.line}" if frame else ""
    done = ", ".join(f"node{index}" for index in finished)
    return [Finding("uneven-collectives",
                    f"{done} finished (exit 0) while node{tb.node} still waited for it in a collective{at}: the ranks "
                    "ran different numbers of collectives",
                    f"{done}: exit 0; node{tb.node}" + (f" rank {tb.rank}" if tb.rank is not None else "")
                    + f": {tb.exc_type}: {tb.message}"[:300], tb.node, tb.rank,
                    "give every rank the same number of steps: shard with DistributedSampler (drop_last=True, or "
                    "padding), or wrap DDP's loop in torch.distributed.algorithms.Join([model]) for uneven inputs; "
                    "never return or break early on one rank only")]


def peer_lost_findings(ctx: Context) -> list[Finding]:
    for tb in ctx.tracebacks:
        if re.search(r"Connection closed by peer|Connection reset by peer|Broken pipe", tb.message):
            return [Finding("peer-lost", "a rank lost its connection to a peer in the middle of a collective",
                            _quote(tb.line), tb.node, tb.rank,
                            "find the peer that died first (its own error, an OOM kill or a lab fault) and fix that")]
    return []


def collective_findings(ctx: Context) -> list[Finding]:
    """Ranks waiting in different collectives (or the same one at different places): an order bug.

    From stack dumps when the lab took them (a hang), else from the collective each rank's traceback ended in.
    """
    where: dict[int, tuple[str, Frame | None, str]] = {}
    for process in ctx.evidence.processes:
        if process.rank is None or process.role == "agent":
            continue
        collective, caller = _collective_in(process.frames)
        where[process.rank] = (collective or "", caller, f"stack of pid {process.pid} on node{process.node}")
    if not where:
        for tb in ctx.tracebacks:
            if tb.rank is not None and tb.collective() and tb.rank not in where:
                where[tb.rank] = (tb.collective(), tb.user_frame(), _quote(tb.line))
    in_collective = {rank: spot for rank, spot in where.items() if spot[0]}
    if not in_collective:
        return []
    places = {(name, caller.file, caller.line) if caller else (name, "", 0) for name, caller, _ in where.values()}
    if len(places) < 2:
        return []
    summary = "; ".join(
        f"rank {rank} in {name or 'no collective'}" + (f" ({caller.file.rsplit('/', 1)[-1]}:{caller.line})"
                                                       if caller else "")
        for rank, (name, caller, _) in sorted(where.items()))
    first = min(in_collective)
    odd_rank = _odd_one_out(where)
    names = {name for name, _, _ in where.values()}
    title = ("the ranks wait in different collectives" if len(names) > 1
             else f"the ranks call {next(iter(names))} from different places (another order)")
    return [Finding("collective-mismatch", title, summary, _node_of_rank(ctx, odd_rank if odd_rank is not None
                                                                           else first),
                    odd_rank if odd_rank is not None else first,
                    "make every rank call the same collectives in the same order; a collective inside "
                    "`if rank == ...` or a loop whose length differs per rank is the usual culprit")]


def _odd_one_out(where: dict[int, tuple[str, Frame | None, str]]) -> int | None:
    """The rank whose place differs from all the others, when there is exactly one such rank."""
    keys = {rank: (name, (caller.file, caller.line) if caller else None) for rank, (name, caller, _) in where.items()}
    counts = Counter(keys.values())
    lonely = [rank for rank, key in keys.items() if counts[key] == 1]
    return lonely[0] if len(lonely) == 1 else None


def _collective_in(frames: list[Frame]) -> tuple[str | None, Frame | None]:
    collective = next((frame.function for frame in reversed(frames)
                       if frame.file.endswith("distributed_c10d.py") and not frame.function.startswith("_")), None)
    own = [frame for frame in frames if not LIBRARY_FILE.search(frame.file)]
    return collective, own[-1] if own else None


def _node_of_rank(ctx: Context, rank: int) -> int | None:
    for process in ctx.evidence.processes:
        if process.rank == rank:
            return process.node
    for line in ctx.lines:
        if line.rank == rank:
            return line.node
    return rank // ctx.evidence.nproc_per_node if ctx.evidence.nproc_per_node else None


KILLED = re.compile(r"exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\)|exitcode: -9\b|\bKilled\b")


def memory_findings(ctx: Context) -> list[Finding]:
    """The kernel's OOM killer (the node's OOM count went up), or a SIGKILL that nothing else explains."""
    faulted = {fault.node for fault in ctx.evidence.faults}
    found = []
    for node in ctx.evidence.nodes:
        killed_line = next((line for line in ctx.lines if line.node == node.index and KILLED.search(line.text)), None)
        rank = _killed_rank(ctx, node.index)
        if node.oom_killed:
            limit = f" (limit {node.memory_limit})" if node.memory_limit else ""
            found.append(Finding(
                "out-of-memory", f"a process on node{node.index} was killed for exceeding the node's memory{limit}",
                _quote(killed_line) if killed_line else f"node{node.index}: the kernel's OOM kill count went up",
                node.index, rank,
                "use less memory per process (smaller batch, fewer processes per node, free what you keep) or give "
                "the nodes more: `lab up --memory 4g --recreate`"))
        elif node.index not in faulted and (node.exit_code in (137, -9) or killed_line):
            found.append(Finding(
                "process-killed", f"a process on node{node.index} was killed with SIGKILL",
                _quote(killed_line) if killed_line else f"node{node.index} exited with {node.exit_code}",
                node.index, rank,
                "find who sent SIGKILL: the kernel's OOM killer outside the lab's accounting (dmesg), a job "
                "scheduler, or a user; if memory, lower the per-process memory use"))
    return found


def _killed_rank(ctx: Context, node: int) -> int | None:
    for rank, code in ctx.reports.get(node, []):
        if code == -9:
            return rank
    return node if ctx.evidence.nproc_per_node == 1 else None


# Faults as a manifest names them (actions) and as the lab finds them in force after a run (node states).
FAULT_WORDS = {"kill": "killed", "kill-node": "killed", "kill-worker": "had a worker killed", "stop": "stopped",
               "pause": "paused", "partition": "cut off from the network", "delay": "slowed down (network delay)",
               "partitioned": "cut off from the network"}


def fault_findings(ctx: Context) -> list[Finding]:
    """The lab's own faults; with one process per node the faulted node's rank is its index (as read_lines says)."""
    one_per_node = ctx.evidence.nproc_per_node == 1
    return [Finding("lab-fault", f"node{fault.node} was {FAULT_WORDS.get(fault.action, fault.action)} by the lab "
                                 f"(fault '{fault.action}')",
                    f"the lab injected '{fault.action}' on node{fault.node} during the run", fault.node,
                    fault.node if one_per_node else None,
                    "this failure was made on purpose: to survive it, restart workers from a snapshot "
                    "(torchrun --max-restarts N) and let membership shrink (--nnodes MIN:MAX)")
            for fault in ctx.evidence.faults]


def ending_findings(ctx: Context) -> list[Finding]:
    """How the run ended when nothing more specific explains it: timed out, stopped, or a bare exit code."""
    evidence = ctx.evidence
    found = []
    collective_timeout = next((tb for tb in ctx.tracebacks if re.search(r"[Tt]imed out|[Tt]imeout", tb.message)
                               and tb.collective() and tb.collective() != "init_process_group"), None)
    if collective_timeout:
        found.append(Finding("collective-timeout", f"rank {collective_timeout.rank} timed out in "
                                                   f"{collective_timeout.collective()}: a peer never joined it",
                             _quote(collective_timeout.line), collective_timeout.node, collective_timeout.rank,
                             "find the rank that did not reach this collective (its log or stack): it is stuck, "
                             "slow, or took another branch"))
    if evidence.timed_out:
        where = "; ".join(f"rank {process.rank} in {_collective_in(process.frames)[0] or process.frames[-1].function}"
                          for process in evidence.processes if process.rank is not None and process.frames)
        found.append(Finding("timed-out", "the run did not finish before the lab's timeout",
                             f"stacks at the timeout: {where}" if where else "the lab stopped the run at its timeout",
                             None, None,
                             "pass a short timeout to init_process_group so a missing peer fails fast, and raise "
                             "the lab's --timeout only if the job is just slow"))
    if evidence.stopped:
        found.append(Finding("stopped", f"the run was stopped early: {evidence.stopped}", evidence.stopped, None, None,
                             "run it again; nothing in the logs points at the job itself"))
    for node in evidence.nodes:
        if node.exit_code not in (0, None):
            last = next((line for line in reversed(ctx.lines) if line.node == node.index and line.text.strip()), None)
            found.append(Finding("nonzero-exit", f"node{node.index} exited with code {node.exit_code}",
                                 _quote(last) if last else f"node{node.index}: no output", node.index, None,
                                 "read this node's log above the quoted line for the first error"))
    return found


# ---------------------------------------------------------------------------------------------


def diagnose(evidence: Evidence) -> list[Finding]:
    """Findings for a failed or hung run, the root cause first; [] for a run that passed."""
    if not evidence.failed:
        return []
    lines = read_lines(evidence)
    ctx = Context(evidence, lines, read_tracebacks(lines), failure_report_ranks(lines))
    found = (fault_findings(ctx) + memory_findings(ctx) + loopback_findings(ctx) + pattern_findings(ctx)
             + duplicate_rank_findings(ctx) + late_rank_findings(ctx) + world_size_findings(ctx)
             + collective_findings(ctx))
    found += traceback_findings(ctx) + uneven_findings(ctx) + unreachable_findings(ctx) + peer_lost_findings(ctx)
    found += ending_findings(ctx)
    return _rank(found, ctx)


def _rank(found: list[Finding], ctx: Context) -> list[Finding]:
    """One finding per cause (its first evidence), ordered by cause; drop what the root causes already explain."""
    by_cause: dict[str, Finding] = {}
    for finding in found:
        by_cause.setdefault(finding.cause, finding)
    causes = set(by_cause)
    if causes - SYMPTOMS:
        causes.discard("nonzero-exit")  # a bare exit code adds nothing once a cause is known
    ordered = sorted((by_cause[cause] for cause in causes), key=lambda finding: PRIORITY.index(finding.cause))
    if ordered and ordered[0].cause == "lab-fault" and not _fault_explains(ctx):
        ordered.append(ordered.pop(0))
    return ordered


def _fault_explains(ctx: Context) -> bool:
    """A fault explains the run when its node failed, the run hung, or a peer lost a connection."""
    faulted = {fault.node for fault in ctx.evidence.faults}
    return (ctx.evidence.timed_out or any(node.exit_code != 0 for node in ctx.evidence.nodes if node.index in faulted)
            or any(re.search(r"closed by peer|reset by peer|Broken pipe", tb.message) for tb in ctx.tracebacks))
