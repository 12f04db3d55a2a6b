"""Reading the Flight Recorder dumps a run's processes wrote (lab/jobs/flight.py): per process, the collectives it
reached on the default process group, the last one with its operation and sizes, in a dump taken while the run hung,
the one it was still waiting in (on the other groups too), and its torch.distributed calls and store operations
(lab/analysis/calls.py).

A process writes up to three dumps: `exit-` as it ends, `live-` when the lab asked a hung run, `pending-` when one of
its calls had been pending for a second (its last word if a kill follows). Its collectives are those of all of them;
where it waited, the live dump's (else the freshest); its calls, the freshest dump's.

On gloo every recorded collective reads 'scheduled' and a failed one is retired like a finished one: what can be
trusted is the sequence number reached (pg_status's last enqueued collective), when each collective was entered (one
clock for all the lab's nodes: they share this machine's kernel) and, in a live dump, the entry not yet retired (the
one it waits in).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from lab.analysis.calls import CallLog, read_calls

FLIGHT_FOLDER = "flight"  # in a record's stacks/ folder (a step's, for exercises of several steps)
DEFAULT_GROUP = "0"  # pg_id of the default process group in the recorder
DTYPES = {"Float": "float", "Double": "double", "Half": "half", "BFloat16": "bfloat16", "Long": "int64",
          "Int": "int32", "Byte": "uint8", "Char": "int8", "Bool": "bool"}


@dataclass(frozen=True)
class Collective:
    seq: int
    operation: str  # 'all_reduce', 'broadcast', ... (the backend prefix taken off)
    sizes: tuple[tuple[int, ...], ...]  # each input tensor's shape
    dtypes: tuple[str, ...]
    entered_at: float | None = field(default=None, compare=False)  # seconds since the epoch
    timeout_s: float | None = field(default=None, compare=False)  # the group's timeout for it
    thread: str | None = field(default=None, compare=False)  # the id of the thread that issued it

    def __str__(self) -> str:
        tensors = ", ".join(f"{DTYPES.get(dtype, dtype.lower())}[{'x'.join(map(str, shape)) or 'scalar'}]"
                            for dtype, shape in zip(self.dtypes, self.sizes))
        return f"#{self.seq} {self.operation}" + (f" {tensors}" if tensors else "")

    def same_call(self, other: Collective) -> bool:
        return (self.operation, self.sizes, self.dtypes) == (other.operation, other.sizes, other.dtypes)


@dataclass(frozen=True)
class Operand:
    """One value the failing statement worked with, as the process read it in its frame as it ended."""

    expression: str  # as the user's code writes it: `total`, `len(parts)`, `int(total) != want`
    type: str
    number: float | None = None  # where it is one number (an int, a float, a one-item tensor)
    text: str | None = None  # its repr where short: a bool, a number, a string, a tensor of at most 8 items
    shape: tuple[int, ...] | None = None  # a tensor's or an array's
    dtype: str | None = None
    length: int | None = None  # a container's or a string's
    items: tuple[Operand, ...] = ()  # a container's first items
    nan: int | None = None  # how many of a float tensor's or array's items are NaN
    key: str | None = None  # an item of a dict: its key's repr

    @property
    def size(self) -> int | None:
        """A tensor's or an array's number of items."""
        return math.prod(self.shape) if self.shape is not None else None


@dataclass(frozen=True)
class FailedCheck:
    """The user's statement that raised the exception a process ended with (an `assert`, the condition of an `if` that
    raised, or the statement whose call raised), with the values it worked with (exercises/jobhooks/sitecustomize.py,
    _failed_check)."""

    where: str  # 'train.py:41'
    statement: str
    operands: tuple[Operand, ...]

    def operand(self, expression: str) -> Operand | None:
        return next((operand for operand in self.operands if operand.expression == expression), None)


@dataclass(frozen=True)
class RankTrace:
    """One process's recorder: who it is and how far it got in the default group's collectives."""

    node: int | None
    pid: int
    rank: int | None
    world_size: int | None
    live: bool  # written while the process was still at work (the lab asked, or a call was pending), not as it ended
    reached: int  # the sequence number of the last collective it entered (0: none)
    last: Collective | None
    waiting_in: Collective | None  # live dumps only: the collective it had entered and not finished
    exception: str | None = None  # the exception that ended the process (its last words), if one did
    history: tuple[Collective, ...] = ()  # the collectives it entered that the dumps kept, oldest first
    started_at: float | None = None  # when the process started (dumps of older records lack it)
    calls: CallLog | None = None  # its torch.distributed calls and store operations (lab/analysis/calls.py)
    sources: dict[str, str] = field(default_factory=dict, compare=False)  # its user's files: path -> text
    error: str | None = field(default=None, compare=False)  # the traceback that ended it, as Python printed it
    # in a live dump, per other process group (its id): the collective not yet retired there, and how far it got
    groups_waiting: dict[str, Collective] = field(default_factory=dict, compare=False)
    groups_reached: dict[str, int] = field(default_factory=dict, compare=False)
    failed_check: FailedCheck | None = field(default=None, compare=False)  # exit dumps of a process an exception ended

    def entered(self, seq: int) -> Collective | None:
        return next((collective for collective in self.history if collective.seq == seq), None)

    @property
    def ended_without_error(self) -> bool:
        """Its last words were written as it ended, and no exception ended it (a kill writes none)."""
        return not self.live and self.exception is None

    @property
    def key(self) -> tuple[int | None, int]:
        return self.node, self.pid


WRITTEN_WHILE_AT_WORK = ("live", "pending")  # the dumps' reasons other than 'exit'


def read_trace(data: dict) -> RankTrace | None:
    """A RankTrace from one dump (the hook's JSON); None when it holds nothing of the default group and no calls."""
    trace = data.get("trace") or {}
    entries = [entry for entry in trace.get("entries", []) if str(entry.get("pg_id", DEFAULT_GROUP)) == DEFAULT_GROUP
               and not entry.get("is_p2p")]
    calls = read_calls(data.get("calls"))
    if not entries and calls is None:
        return None
    status = (trace.get("pg_status") or {}).get(DEFAULT_GROUP, {})
    collectives = [_collective(entry) for entry in entries]
    live = data.get("reason") in WRITTEN_WHILE_AT_WORK
    pending = [collective for collective, entry in zip(collectives, entries) if not entry.get("retired")]
    groups_waiting: dict[str, Collective] = {}
    for entry in trace.get("entries", []):
        group = str(entry.get("pg_id", DEFAULT_GROUP))
        if live and group != DEFAULT_GROUP and not entry.get("is_p2p") and not entry.get("retired"):
            groups_waiting.setdefault(group, _collective(entry))
    groups_reached = {str(group): reached for group, value in (trace.get("pg_status") or {}).items()
                      if str(group) != DEFAULT_GROUP and (reached := _int(value.get("last_enqueued_collective")))
                      is not None}
    return RankTrace(_int(data.get("node")), int(data.get("pid") or 0), _int(data.get("rank")),
                     _int(data.get("world_size")), live,
                     max([_int(status.get("last_enqueued_collective")) or 0] + [call.seq for call in collectives]),
                     collectives[-1] if collectives else None, pending[0] if live and pending else None,
                     str(data["exception"]) if data.get("exception") else None, tuple(collectives),
                     _float(data.get("started")), calls,
                     {str(path): str(text) for path, text in (data.get("sources") or {}).items()},
                     str(data["error"]) if data.get("error") else None, groups_waiting, groups_reached,
                     _failed_check(data.get("failed_check")))


def _failed_check(data) -> FailedCheck | None:
    if not isinstance(data, dict) or not isinstance(data.get("values"), list):
        return None
    return FailedCheck(str(data.get("where") or "?"), str(data.get("statement") or ""),
                       tuple(_operand(value) for value in data["values"] if isinstance(value, dict)))


def _operand(value: dict) -> Operand:
    shape = value.get("shape")
    return Operand(str(value.get("expr") or ""), str(value.get("type") or "?"), _float(value.get("number")),
                   str(value["value"]) if value.get("value") is not None else None,
                   tuple(int(size) for size in shape) if isinstance(shape, list) else None,
                   str(value["dtype"]) if value.get("dtype") else None, _int(value.get("length")),
                   tuple(_operand(item) for item in value.get("items") or () if isinstance(item, dict)),
                   _int(value.get("nan")), str(value["key"]) if value.get("key") is not None else None)


def load_traces(folder: Path) -> list[RankTrace]:
    """Every process's trace in a record's `flight/` folder, its dumps merged: the collectives of all of them, where it
    waited as its live dump says (where the lab asked), else as its freshest dump says, and the freshest calls."""
    dumps: dict[tuple[int | None, int], list[tuple[tuple[bool, bool, float], RankTrace]]] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            trace = read_trace(data)
        except (ValueError, OSError, TypeError, KeyError, AttributeError):
            continue  # a dump cut short by a kill
        if trace is not None:
            # ranked: the lab's live dump, then the exit dump (a process's last word, even where a snapshot's
            # clock reads later: the watcher thread can write one while the process ends), then the freshest
            rank = (data.get("reason") == "live", data.get("reason") == "exit", _float(data.get("time")) or 0)
            dumps.setdefault(trace.key, []).append((rank, trace))
    traces = []
    for found in dumps.values():
        state = max(found, key=lambda dump: dump[0])[1]
        seen = {collective.seq: collective for _, trace in found for collective in trace.history}
        freshest_calls = max(((rank[1:], trace.calls) for rank, trace in found if trace.calls is not None),
                             key=lambda dump: dump[0], default=(0, None))[1]
        history = tuple(seen[seq] for seq in sorted(seen))
        known = next((trace for _, trace in found if trace.rank is not None), state)  # one written before init
        sources = next((trace.sources for _, trace in found if trace.sources), {})
        error = next((trace.error for _, trace in found if trace.error), None)
        failed_check = next((trace.failed_check for _, trace in found if trace.failed_check), None)
        traces.append(replace(state, history=history, calls=freshest_calls, reached=max([state.reached, *seen]),
                              sources=sources, error=error, failed_check=failed_check,
                              last=state.last or (history[-1] if history else None), rank=known.rank,
                              world_size=known.world_size))
    return sorted(traces, key=lambda trace: (trace.rank is None, trace.rank, trace.node, trace.pid))


def _collective(entry: dict) -> Collective:
    name = str(entry.get("profiling_name") or "?")
    created, timeout = _float(entry.get("time_created_ns")), _float(entry.get("timeout_ms"))
    return Collective(int(entry.get("collective_seq_id") or 0), name.split(":", 1)[-1],
                      tuple(tuple(int(size) for size in shape) for shape in entry.get("input_sizes") or []),
                      tuple(str(dtype) for dtype in entry.get("input_dtypes") or []),
                      created / 1e9 if created else None, timeout / 1000 if timeout else None,
                      str(entry["thread_id"]) if entry.get("thread_id") else None)


def _float(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
