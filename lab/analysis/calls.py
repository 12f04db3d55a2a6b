"""The torch.distributed calls and c10d store operations each process of a run made, as the jobs' hooks wrote them.

The Flight Recorder keeps gloo's collectives but not their arguments that matter for a hang (a broadcast's root, the
members of a subgroup, a point-to-point peer and tag), nor send/recv, nor the store. The jobs' sitecustomize
(exercises/jobhooks/) wraps torch.distributed's public calls and the store's methods as the user's code makes them and
writes, beside each process's Flight Recorder dump (the `calls` key of the same JSON), what it was doing: the calls it
had entered and not left, the one that raised, the last ones it finished, the point-to-point operations it posted,
the subgroups it created, and the store keys it set and waited for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The operations whose `root` is the rank that sends (broadcast, scatter) or receives (reduce, gather) for everyone.
ROOTED = ("broadcast", "broadcast_object_list", "reduce", "gather", "gather_object", "scatter", "scatter_object_list")
POINT_TO_POINT = ("send", "recv", "isend", "irecv", "send_object_list", "recv_object_list")


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: str  # 'float32', 'int64', ...
    device: str | None = None  # 'meta' (no data); None: a device that holds data
    contiguous: bool = True  # False: a strided view (a column, a transpose)
    layout: str | None = None  # 'sparse_coo', 'sparse_csr'; None: dense (strided)

    def __str__(self) -> str:
        return f"{self.dtype}[{'x'.join(map(str, self.shape)) or 'scalar'}]" + (f" on {self.device}"
                                                                                  if self.device else "") + (
            f" ({self.layout})" if self.layout else "" if self.contiguous else " (a strided view)")


@dataclass(frozen=True)
class DistCall:
    """One call of the user's code into torch.distributed, with the arguments that must agree across ranks."""

    op: str  # the function's name: 'recv', 'broadcast', 'all_reduce', 'new_group', 'barrier', ...
    caller: str | None = None  # the user's line that made it: 'train.py:41 in step'
    thread: str = "MainThread"
    src: int | None = None  # recv/irecv: the peer it receives from (None: any source)
    dst: int | None = None  # send/isend: the peer it sends to
    tag: int | None = None  # point-to-point tag
    root: int | None = None  # ROOTED operations: the global rank of the root (src or dst argument)
    group: tuple[int, ...] | None = None  # the global ranks of the group it ran on; None: the default group
    group_name: str | None = None  # torch's name of that group ('1', '2': the order this rank created them in)
    tensors: tuple[Tensor, ...] = ()
    is_async: bool = False  # async_op=True, or isend/irecv
    entered_at: float | None = field(default=None, compare=False)  # seconds since the epoch
    ended_at: float | None = field(default=None, compare=False)  # None: had not returned when the dump was written
    error: str | None = None  # 'DistBackendError: [...] Timed out waiting 1000ms for recv ...' when it raised
    timeout_s: float | None = None  # the group's timeout, where known
    # Its other arguments, briefly ('input_split_sizes': '[1, 3]', 'scatter_object_input_list': 'None', 'op': 'SUM'):
    # what the ranks passed differently where a call failed on some of them.
    args: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    # The argument it writes its result into, where nothing but the call held it (a tensor made for the call): the
    # result was thrown away as the call returned.
    discarded: str | None = field(default=None, compare=False)
    # Called while an exception was being handled (an except or finally block): that exception ('IndexError: ...')
    # and the user's line it was raised at. A rank that swallowed an error shows it here, and nowhere else.
    handling: str | None = field(default=None, compare=False)
    handling_raised_at: str | None = field(default=None, compare=False)

    def argument(self, name: str) -> str | None:
        """One of `args`, as the hooks described it (exercises/jobhooks/sitecustomize.py, `briefly`)."""
        return dict(self.args).get(name)

    @property
    def object_list_length(self) -> int | None:
        """How many objects its object_list held ('list of 3', '[1, 2]'); None when not described."""
        text = self.argument("object_list")
        if text is None:
            return None
        if found := re.match(r"list of (\d+)", text):
            return int(found[1])
        shown = self.integers("object_list")
        return len(shown) if shown is not None else None

    def integers(self, name: str) -> list[int] | None:
        """An argument the hooks described as its integers ('[1, 3]': split sizes, a short list); None otherwise."""
        text = self.argument(name)
        try:
            return [int(item) for item in text.strip("[]").split(",") if item.strip()] if text and text.startswith(
                "[") else None
        except ValueError:
            return None

    @property
    def fills_a_list(self) -> bool:
        """It was given a list holding only None, to be filled in place (the receiving side of an object call)."""
        return any(text.endswith(", all None") for _, text in self.args)

    @property
    def peer(self) -> int | None:
        return self.src if self.op in ("recv", "irecv", "recv_object_list") else self.dst

    def __str__(self) -> str:
        args = [str(tensor) for tensor in self.tensors]
        for name in ("src", "dst", "root", "tag"):
            value = getattr(self, name)
            if value is not None and not (name == "tag" and value == 0):
                args.append(f"{name}={value}")
        if self.group is not None:
            args.append(f"group={list(self.group)}")
        return f"{self.op}({', '.join(args)})" + (f" at {self.caller}" if self.caller else "")


@dataclass(frozen=True)
class StoreOp:
    """One operation of the user's code on a c10d store (TCPStore, FileStore, PrefixStore, HashStore)."""

    op: str  # 'set', 'get', 'wait', 'add', 'compare_set', 'check', 'delete_key', 'multi_get', 'multi_set'
    keys: tuple[str, ...]
    caller: str | None = None
    at: float | None = field(default=None, compare=False)
    ended_at: float | None = field(default=None, compare=False)  # None: had not returned when the dump was written
    error: str | None = None
    store: str | None = None  # the store's class: 'TCPStore', 'PrefixStore' (whose prefix makes every key another)
    value: int | None = None  # what an `add` returned: the counter's value after it

    @property
    def waits(self) -> bool:
        """get, wait and multi_get block until every key is set."""
        return self.op in ("get", "wait", "multi_get")


@dataclass(frozen=True)
class FileOp:
    """A torch.save or torch.load of a named file by the user's code."""

    op: str  # 'save', 'load' (torch.save, torch.load), 'read', 'write' or 'append' (open() by the user's code)
    path: str  # absolute, as the process saw it
    caller: str | None = None
    at: float | None = field(default=None, compare=False)
    ended_at: float | None = field(default=None, compare=False)
    size: int | None = None  # bytes: as a load began, as a save ended; None: no such file then
    mtime: float | None = field(default=None, compare=False)
    error: str | None = None
    digest: str | None = None  # 'read' of a small file: a checksum of its content


@dataclass(frozen=True)
class CallLog:
    """What one process was doing in torch.distributed and on its stores when its dump was written."""

    pending: tuple[DistCall, ...] = ()  # entered and not left (a hung call), innermost last per thread
    failed: tuple[DistCall, ...] = ()  # calls that raised, oldest first
    recent: tuple[DistCall, ...] = ()  # the last calls that returned, oldest first
    posted: tuple[DistCall, ...] = ()  # isend/irecv (and async collectives) it posted, oldest first
    groups: tuple[DistCall, ...] = ()  # new_group / new_subgroups calls, with the ranks passed in `group`
    store: tuple[StoreOp, ...] = ()  # the user's store operations, oldest first
    counts: dict[str, int] = field(default_factory=dict)  # calls made per operation
    discarded: tuple[DistCall, ...] = ()  # calls whose result went into a tensor or list nothing else held
    strided: tuple[DistCall, ...] = ()  # the last calls given a strided view (kept however many calls came after)
    hashed: tuple[str, ...] = ()  # the user's lines that hash()ed strings (salted per process unless PYTHONHASHSEED)
    ddp_forwards: dict[str, int] = field(default_factory=dict)  # 'synced' / 'no_sync': DDP forwards by gradient sync
    torch_seed: int | None = None  # torch.initial_seed() as the process ended: per rank, or random when unseeded
    hash_probe: int | None = None  # hash('lab') in that process: differs between processes whose salt differs
    optimizer_steps: int = 0  # optimizer.step() calls (every optimizer of the process)
    learning_rates: tuple[float, ...] = ()  # the learning rates of the last step, per parameter group
    started_in: str | None = None  # its working directory when it started
    cwd: str | None = None  # and when the dump was written (os.chdir, Hydra's run folder)
    env_read: dict[str, str | None] = field(default_factory=dict)  # variables it read -> the value got (None: unset)
    warnoptions: tuple[str, ...] = ()  # sys.warnoptions (PYTHONWARNINGS, -W): 'error' makes a warning an exception
    files: tuple[FileOp, ...] = ()  # its last torch.save / torch.load of named files, oldest first
    reads: tuple[FileOp, ...] = ()  # the first files its code opened for reading
    writes: tuple[FileOp, ...] = ()  # the first files its code opened for writing ('write': truncated, or 'append')
    removed: tuple[FileOp, ...] = ()  # the first files and folders its code removed ('remove', 'rmtree')
    limits: dict[str, int] = field(default_factory=dict)  # soft limits 'fsize', 'nofile', 'as', 'nproc'; -1: none
    stdout_encoding: str | None = None  # how its output is encoded (PYTHONIOENCODING, the locale)
    flags: dict[str, int] = field(default_factory=dict)  # interpreter flags: 'optimize' (-O), 'utf8_mode', ...
    python: str | None = None  # '3.11.2 /opt/lab-venv/bin/python': the interpreter's version and path
    versions: dict[str, str] = field(default_factory=dict)  # imported package -> 'version folder'
    locale: dict[str, str] = field(default_factory=dict)  # LC_ALL, LC_CTYPE, LANG as it started with them (set only)
    # A torchrun agent's launch settings (run_id, rdzv_endpoint, min_nodes, ...) and 'error', where its launch failed
    launch: dict[str, str] = field(default_factory=dict)

    @property
    def made(self) -> tuple[DistCall, ...]:
        """Every call it kept: those that returned, raised, or had not returned when the dump was written."""
        return (*self.recent, *self.failed, *self.pending)

    @property
    def blocked_in(self) -> DistCall | None:
        """The call it was stuck in (a pending one), else the one that raised last."""
        return (self.pending[-1] if self.pending else None) or (self.failed[-1] if self.failed else None)


# The lists a collective fills on the ranks that receive: what those ranks put in them is replaced, only the length
# has to agree ("list of 2" on the source, "list of 2, all None" elsewhere is how it is meant to be called).
FILLED_ON_RECEIPT = {"broadcast_object_list": "object_list", "scatter_object_list": "scatter_object_output_list"}


def arguments_that_differ(calls: dict[int, DistCall]) -> list[str]:
    """'input_split_sizes: rank 0 [1, 3]; rank 1 [2, 2]' for each argument whose value is not the same on every rank."""
    if len(calls) < 2:
        return []
    described = {rank: {**{name: value.split(", ")[0] if name == FILLED_ON_RECEIPT.get(call.op) else value
                           for name, value in call.args},
                        **({"tensors": ", ".join(map(str, call.tensors))} if call.tensors else {}),
                        **({"root": str(call.root)} if call.root is not None else {})}
                 for rank, call in sorted(calls.items())}
    differs = []
    for name in sorted(set().union(*described.values())):
        values = {rank: arguments.get(name, "(none)") for rank, arguments in described.items()}
        if len(set(values.values())) > 1:
            differs.append(f"{name}: " + "; ".join(f"rank {rank} {value}" for rank, value in values.items()))
    return differs


def read_calls(data: dict | None) -> CallLog | None:
    """A CallLog from the `calls` part of a dump (see exercises/jobhooks/sitecustomize.py); None when it has none."""
    if not data:
        return None
    return CallLog(pending=_calls(data.get("pending")), failed=_calls(data.get("failed")),
                   recent=_calls(data.get("recent")), posted=_calls(data.get("posted")),
                   groups=_calls(data.get("groups")),
                   store=tuple(_store_op(item) for item in data.get("store") or [] if isinstance(item, dict)),
                   counts=_counts(data.get("counts")), discarded=_calls(data.get("discarded")),
                   strided=_calls(data.get("strided")),
                   hashed=tuple(str(item.get("caller")) for item in data.get("hashed") or []
                                if isinstance(item, dict) and item.get("caller")),
                   ddp_forwards=_counts(data.get("ddp_forwards")), torch_seed=_int(data.get("torch_seed")),
                   hash_probe=_int(data.get("hash_probe")), started_in=data.get("started_in"), cwd=data.get("cwd"),
                   env_read={str(name): None if value is None else str(value)
                             for name, value in (data.get("env_read") or {}).items()},
                   warnoptions=tuple(str(option) for option in data.get("warnoptions") or []),
                   files=tuple(_file_op(item) for item in data.get("files") or [] if isinstance(item, dict)
                               and item.get("op") and item.get("path")),
                   reads=tuple(_file_op(item) for item in data.get("reads") or [] if isinstance(item, dict)
                               and item.get("path")),
                   writes=tuple(_file_op(item) for item in data.get("writes") or [] if isinstance(item, dict)
                                and item.get("path")),
                   removed=tuple(_file_op(item) for item in data.get("removed") or [] if isinstance(item, dict)
                                 and item.get("path")),
                   limits=_counts(data.get("limits")), stdout_encoding=data.get("stdout_encoding"),
                   flags=_counts(data.get("flags")), python=data.get("python"),
                   versions={str(name): str(value) for name, value in (data.get("versions") or {}).items()},
                   locale={str(name): str(value) for name, value in (data.get("locale") or {}).items()},
                   launch={str(name): str(value) for name, value in (data.get("launch") or {}).items()},
                   optimizer_steps=_int((data.get("optimizer") or {}).get("steps")) or 0,
                   learning_rates=tuple(rate for rate in map(_float, (data.get("optimizer") or {}).get("lrs") or [])
                                        if rate is not None))


def _file_op(item: dict) -> FileOp:
    return FileOp(op=str(item["op"]), path=str(item["path"]), caller=item.get("caller"), at=_float(item.get("at")),
                  ended_at=_float(item.get("ended_at")), size=_int(item.get("size")), mtime=_float(item.get("mtime")),
                  error=item.get("error"), digest=item.get("digest"))


def _counts(data) -> dict[str, int]:
    return {str(name): int(count) for name, count in (data or {}).items() if isinstance(count, int)}


def _calls(items) -> tuple[DistCall, ...]:
    return tuple(_call(item) for item in items or [] if isinstance(item, dict) and item.get("op"))


def _call(item: dict) -> DistCall:
    group = item.get("group")
    handled = item["handling"] if isinstance(item.get("handling"), dict) else {}
    return DistCall(
        op=str(item["op"]), caller=item.get("caller"), thread=str(item.get("thread") or "MainThread"),
        src=_int(item.get("src")), dst=_int(item.get("dst")), tag=_int(item.get("tag")), root=_int(item.get("root")),
        group=tuple(int(rank) for rank in group) if isinstance(group, list) else None,
        group_name=str(item["group_name"]) if item.get("group_name") is not None else None,
        tensors=tuple(Tensor(tuple(int(size) for size in tensor.get("shape") or []), str(tensor.get("dtype") or "?"),
                             tensor.get("device"), tensor.get("contiguous") is not False,
                             str(tensor["layout"]) if tensor.get("layout") else None)
                      for tensor in item.get("tensors") or [] if isinstance(tensor, dict)),
        is_async=bool(item.get("async")), entered_at=_float(item.get("entered_at")),
        ended_at=_float(item.get("ended_at")), error=item.get("error"), timeout_s=_float(item.get("timeout_s")),
        args=tuple((str(name), str(text)) for name, text in (item.get("args") or {}).items())
        if isinstance(item.get("args"), dict) else (), discarded=item.get("discarded"),
        handling=handled.get("error"), handling_raised_at=handled.get("raised_at"))


def _store_op(item: dict) -> StoreOp:
    return StoreOp(str(item.get("op") or "?"), tuple(str(key) for key in item.get("keys") or []), item.get("caller"),
                   _float(item.get("at")), _float(item.get("ended_at")), item.get("error"), item.get("store"),
                   _int(item.get("value")))


def _int(value) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _float(value) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
