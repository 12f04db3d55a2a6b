"""What the lab adds to every Python process of a job: whole lines on the output, stacks on a fatal signal, and what
the process did in torch.distributed written out. The lab puts this folder first on every job's PYTHONPATH
(lab/jobs/exercises.py, readable_output_env); a sitecustomize it shadows (the system's, or one on the user's
PYTHONPATH) still runs, after it. Standard library only: it runs on every node, in every Python the job starts.

Whole lines: the processes of one node (torchrun workers, mp.spawn children, anything a script starts) share the
node's output pipe. Unbuffered Python (PYTHONUNBUFFERED=1) writes a print's parts and its newline in separate write()
calls, so two processes' text merges into one line; fully buffered Python cuts lines at 8 KiB blocks and holds them
back. Line buffering sends each line at once, in one write(), which a pipe never splits (up to PIPE_BUF = 4096 bytes).

Fatal signals: faulthandler writes 'Fatal Python error: Segmentation fault' and every thread's Python stack to stderr
(the node's log) on SIGSEGV, SIGBUS, SIGABRT, SIGFPE and SIGILL, unless the user enabled it already; a crash in C
(an extension, a driver) otherwise leaves only a negative exit code.

When LAB_FLIGHT_DIR is set (lab/jobs/flight.py), each process writes JSON into it when it ends, when the lab asks a
hung run before stopping it (a thread waits for the request: a Python signal handler would only run once the hung call
returned), and when one of its calls has been pending for a second, again once it returns (ranks stuck in C are later
ended by SIGTERM or SIGKILL, with no atexit: the snapshot is their last word). Each dump holds:
- torch's Flight Recorder (`trace`): the last collectives (sequence number, operation, sizes, entry time, state), kept
  by torch for gloo and NCCL but written nowhere unless asked; with when the process started.
- its torch.distributed calls (`calls`, read by lab/analysis/calls.py): the recorder has no send/recv, no store and
  none of the arguments that tell why ranks hang (a recv's peer and tag, a broadcast's root, a subgroup's members).
  Once torch.distributed is imported (`import torch` does it) its public calls are wrapped, on torch.distributed and
  distributed_c10d: per call the arguments that must agree across ranks, the user's line that made it, when it
  entered and left, the error it raised. Kept: the calls pending per thread, the last that raised, returned and were
  posted (async), every subgroup creation, counts per operation, and the user's own store operations (torch's
  rendezvous and barriers use the store too; those are left out). A call made while an exception was being handled
  (an except or finally block) keeps that exception and where it was raised: a rank that swallowed an error and
  went on to a rescue barrier shows it nowhere else. A torchrun agent, however started (the command, or
  torch.distributed.run.main from a script), keeps its launch settings (run id, endpoint, node counts) and, where its
  launch failed, the error: so the lab compares the nodes' rendezvous when no worker ever started.
- what makes ranks that run the same code compute different things: a call whose result tensor (or list) nothing
  but the call holds (`all_reduce(torch.stack(...))`: the result is thrown away), DDP forwards with and without
  gradient sync (`no_sync()`), the user's own hash() of strings, torch's seed and Python's string-hash salt, and the
  environment variables the job read with the values it got (a variable set on one node only). A call inside another
  recorded call (torch's own) is not recorded; the wrapper adds one frame (`recorded`, in this file) to tracebacks and costs a few microseconds.
- the files the process saved and loaded with torch.save / torch.load (path, size, time, error), the first files its
  code opened for reading (size, time, a digest of small ones), and its resource
  limits (`ulimit -f`, open files): what makes one node's read or write fail;
- the values the failing statement worked with (`failed_check`, in the dump written at exit by a process an
  exception ended): the assert's test, or the condition of the `if` that raised, or the statement whose call raised,
  with each operand read in its frame (numbers, a tensor's shape, dtype and NaN count, a container's length and first
  items); only names, attributes, subscripts and calls without side effects are evaluated. A check's message often
  says none of its numbers, and the lab compares them (two sides world-size apart, a share that holds nothing);
- the text of the user's own files (`sources`: the script and the files its calls came from), in the dumps written
  at exit and when the lab asks: what a traceback or a caller's line does not say (a value compared before it was
  converted, a tensor read before its async collective was waited for) is in the code around it.
torch is never imported here: a process that does not use torch.distributed writes nothing.

Stack at SIGTERM (torchrun's workers, which have RANK): when one rank fails, torchrun ends the node's other ranks with
SIGTERM at once, before the lab could take their stacks, yet where a rank was then (still in its own code, while the
others timed out waiting for it) is the evidence of a late rank. faulthandler writes every thread's stack as the signal
comes (in C, even from inside a long call) into a file opened at start, removed again when the process ends otherwise.
"""

import atexit
import collections
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import signal
import sys
import threading
import time


def _line_buffered() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True, write_through=False)


def _stacks_on_fatal_signals() -> None:
    """SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL: 'Fatal Python error: ...' and every thread's stack on stderr, which
    the lab keeps as the node's log (a crash in C otherwise leaves only torchrun's 'exitcode: -11')."""
    import faulthandler

    if sys.stderr is not None and not faulthandler.is_enabled():
        try:
            faulthandler.enable(all_threads=True)
        except (OSError, ValueError, RuntimeError, AttributeError):  # stderr without a file descriptor
            pass


KEPT_ENTRIES = 64  # the Flight Recorder's last collectives in a dump: where a process is, and what led there
# torch's recorder holds 2000 by default; writing them out took 190 ms where 64 take 1 ms (bench/hook_cost.py), and
# the dumps keep 64. A user's own TORCH_FR_BUFFER_SIZE is left as it is.
FR_BUFFER_SIZE = str(KEPT_ENTRIES)
STARTED = time.time()  # when this process started: a process started after a collective cannot have been late to it
try:
    STARTED_IN = os.getcwd()  # where relative paths pointed when it started (os.chdir and Hydra move it)
except OSError:
    STARTED_IN = None
PENDING_SNAPSHOT_SECONDS = 1.0  # a call pending this long is written out at once (a kill later leaves no last words)
WATCH_SECONDS = 0.25

# torch.distributed's public calls that the hook records, and which argument names a peer or root (the global rank;
# its group-relative twin is turned into one).
DIST_CALLS = ("send", "recv", "isend", "irecv", "send_object_list", "recv_object_list", "batch_isend_irecv",
              "broadcast", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "gather", "scatter",
              "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier",
              "monitored_barrier", "broadcast_object_list", "all_gather_object", "gather_object",
              "scatter_object_list", "new_group", "new_subgroups", "new_subgroups_by_enumeration",
              "init_process_group", "destroy_process_group")
RANK_ARGUMENTS = {  # op -> (the DistCall field, the argument, its group-relative twin)
    **{op: ("dst", "dst", "group_dst") for op in ("send", "isend", "send_object_list")},
    **{op: ("src", "src", "group_src") for op in ("recv", "irecv", "recv_object_list")},
    **{op: ("root", "src", "group_src") for op in ("broadcast", "broadcast_object_list", "scatter",
                                                    "scatter_object_list")},
    **{op: ("root", "dst", "group_dst") for op in ("reduce", "gather", "gather_object")},
}
GROUP_CALLS = ("new_group", "new_subgroups", "new_subgroups_by_enumeration")
AFTER_CALLS = ("init_process_group", *GROUP_CALLS)  # what they made says more once they return
ASYNC_CALLS = ("isend", "irecv", "batch_isend_irecv")
STORE_METHODS = ("set", "get", "wait", "add", "compare_set", "check", "delete_key", "multi_get", "multi_set")
KEPT = {"failed": 8, "recent": 16, "posted": 16, "groups": 64, "store": 64, "discarded": 8, "hashed": 8, "files": 16,
        "reads": 32, "writes": 16, "removed": 16, "strided": 4}
# sys.flags that change what the same code does: -O/-OO strip asserts and docstrings, -X utf8, -s/-I hide the user's
# site-packages, -X dev adds checks, -P leaves the script's folder off sys.path
INTERPRETER_FLAGS = ("optimize", "utf8_mode", "no_user_site", "isolated", "dev_mode", "safe_path")
VERSIONS_KEPT = 64  # imported packages (not the standard library's) whose version a dump notes
READS_PER_FOLDER = 4  # files read from one folder that a dump notes (of KEPT["reads"] in all)
DIGESTED_BYTES = 1 << 16  # a file read this small also gets a digest of its content (compared across nodes)
# The argument a call writes its result into (on every rank, or on the root where ROOT_ONLY names the root's
# argument): given a tensor or list nothing else holds, the call's result is thrown away as it returns.
RESULT_ARGUMENTS = {"all_reduce": "tensor", "broadcast": "tensor", "reduce": "tensor", "recv": "tensor",
                    "irecv": "tensor", "all_gather": "tensor_list", "all_gather_into_tensor": "output_tensor",
                    "reduce_scatter": "output", "reduce_scatter_tensor": "output", "all_to_all_single": "output",
                    "gather": "gather_list", "all_gather_object": "object_list"}
ROOT_ONLY = {"broadcast": "src", "reduce": "dst", "gather": "dst"}  # broadcast: the non-roots receive
TENSORS_DESCRIBED = 8  # per call: a list of 1000 tensors says enough in its first ones
# Arguments described apart (tensors, group, peers, roots) or that need not agree across ranks.
ARGUMENTS_NOT_COMPARED = {"group", "tag", "src", "dst", "group_src", "group_dst", "async_op", "timeout", "device",
                          "device_ids", "wait_all_ranks", "pg_options", "use_local_synchronization"}
INTS_SHOWN = 8  # a list of more integers (split sizes of a big world) is described by its length
KEYS_DESCRIBED = 16
ERROR_CHARS = 500
ENV_NAMES_KEPT = 128
ENV_VALUE_CHARS = 120
BULK_READ_NAMES = 8  # one line reading more names copies the environment: not a read of any one
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|API_?KEY|PRIVATE", re.IGNORECASE)  # kept as a digest
SOURCES_KEPT = 4  # files
SOURCE_CHARS = 200_000
VALUES_KEPT = 16  # the failed check's operands a dump keeps
VALUE_CHARS = 160
SAFE_CALLS = frozenset({"len", "int", "float", "abs", "round", "min", "max", "sum", "bool", "numel", "size", "item",
                        "dim", "keys", "values", "long", "isfinite", "isnan", "isinf", "all", "any", "count", "mean",
                        "norm", "equal", "allclose", "isclose"})  # calls without side effects that a check's operands are made with
ITEMS_DESCRIBED = 4  # of a list, tuple or dict operand
COUNTED_ITEMS = 10_000_000  # a float tensor or array this small also gets its count of NaNs


class _CallLog:
    """What this process does in torch.distributed, as `calls` of its dumps (lab/analysis/calls.py reads it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: dict[int, dict] = {}  # id(record) -> record: calls entered and not left, in order of entry
        self.pending_store: dict[int, dict] = {}
        self.kept = {name: collections.deque(maxlen=size) for name, size in KEPT.items()}
        self.counts: dict[str, int] = {}
        self.inside: set[int] = set()  # threads in a recorded call: torch's own calls inside it are not the user's
        self.timeouts: dict = {}  # process group (None: the default one) -> its timeout in seconds
        self.init_rank = None  # the rank passed to init_process_group, before the group can say it
        # DDP forwards whose backward all-reduces, those in no_sync, and buffers a DDP(broadcast_buffers=False) holds
        self.ddp_forwards = {"synced": 0, "no_sync": 0}
        self.optimizer = {"steps": 0, "lrs": []}  # optimizer steps taken, and the learning rates of the last one
        self.env_read: dict[str, str | None] = {}  # variable -> the value the job's first read of it got (None: unset)
        self.launch: dict[str, str] = {}  # a torchrun agent's launch settings (run id, endpoint, nodes), and its error

    def __bool__(self) -> bool:
        return bool(self.counts or self.kept["store"] or self.kept["files"] or "error" in self.launch)

    def snapshot(self) -> dict:
        with self.lock:
            return {"pending": [dict(record) for record in self.pending.values()],
                    **{name: [dict(record) for record in kept] for name, kept in self.kept.items()},
                    "counts": dict(self.counts), "ddp_forwards": dict(self.ddp_forwards),
                    "optimizer": dict(self.optimizer), "env_read": dict(self.env_read),
                    **({"launch": dict(self.launch)} if self.launch else {}), **_process_seeds()}

    def left(self, record: dict, error: BaseException | None = None) -> None:
        """A call's end: when, the error it raised, and from the pending calls to the failed or the returned ones."""
        with self.lock:
            record["ended_at"] = time.time()
            if error is not None:
                record["error"] = _error(error)
            self.pending.pop(id(record), None)
            self.kept["failed" if error is not None else "recent"].append(record)
            if any(tensor.get("contiguous") is False for tensor in record.get("tensors") or ()):
                self.kept["strided"].append(record)  # kept past the recent calls: its values came out wrong

    def long_pending(self, now: float) -> frozenset[int]:
        """The calls and store operations pending for PENDING_SNAPSHOT_SECONDS or more."""
        with self.lock:
            return frozenset(key for records in (self.pending, self.pending_store) for key, record in records.items()
                             if now - record["entered_at" if "entered_at" in record else "at"]
                             >= PENDING_SNAPSHOT_SECONDS)


CALLS = _CallLog()
_builtin_hash = hash


def _process_seeds() -> dict:
    """What makes "the same" computation differ between processes: torch's seed (seeded per rank, or not at all) and
    Python's string hashing (random per process unless PYTHONHASHSEED is set): compared across ranks by the lab. And
    the working directory it started in and has now, which relative paths depend on, the warning options
    (PYTHONWARNINGS, -W: `error` makes a warning a crash), the interpreter's flags (-O strips asserts) and which
    interpreter it is."""
    seeds = {"hash_probe": _builtin_hash("lab"), "started_in": STARTED_IN, "warnoptions": sys.warnoptions[:8],
             "limits": _limits(), "stdout_encoding": getattr(sys.stdout, "encoding", None),
             "flags": {name: int(getattr(sys.flags, name)) for name in INTERPRETER_FLAGS if hasattr(sys.flags, name)},
             "python": f"{sys.version.split()[0]} {sys.executable}", "versions": _imported_versions(),
             "locale": {name: os.environ.get(name) for name in ("LC_ALL", "LC_CTYPE", "LANG") if os.environ.get(name)}}
    try:
        seeds["cwd"] = os.getcwd()
    except OSError:
        pass
    try:
        seeds["torch_seed"] = sys.modules["torch"].initial_seed()
    except Exception:
        pass
    return seeds


def _imported_versions() -> dict[str, str]:
    """The version and folder of each package the process imported that says its version (the first 64 by name):
    one node with another copy (pip --user, a PYTHONPATH to an old checkout) is told from them."""
    found = {}
    standard = getattr(sys, "stdlib_module_names", frozenset())
    for name in sorted(name for name in list(sys.modules) if "." not in name and not name.startswith("_")
                       and name not in standard):
        version = getattr(sys.modules.get(name), "__version__", None)
        if isinstance(version, str) and len(found) < VERSIONS_KEPT:
            where = os.path.dirname(getattr(sys.modules[name], "__file__", None) or "")
            found[name] = f"{version[:40]} {where[:200]}".strip()
    return found


def _limits() -> dict[str, int]:
    """The process's soft resource limits that make a write, an open or an allocation fail on one node only (a
    `ulimit -f` in a launch script): -1 for unlimited."""
    try:
        import resource
    except ImportError:
        return {}
    found = {}
    for name in ("FSIZE", "NOFILE", "AS", "NPROC"):
        try:
            soft = resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))[0]
        except (AttributeError, ValueError, OSError):
            continue
        found[name.lower()] = -1 if soft == resource.RLIM_INFINITY else int(soft)
    return found


def _temporary_references(*args, **kwargs) -> int:
    """How many references a value made for the call holds inside `recorded` (Python versions differ: measured)."""
    given = {**dict(zip(["value"], args)), **kwargs}
    return _references(given, "value")


def _references(given: dict, name: str) -> int:
    value = given.get(name)
    return sys.getrefcount(value) - 1  # less this function's own


_LIBRARY_DIRS = tuple(os.path.dirname(path) + os.sep for path in (os.__file__, os.path.abspath(__file__)))
_user_files: dict[str, bool] = {}
_file_names: dict[str, str] = {}


def _is_user_file(filename: str) -> bool:
    """The user's code: not torch, an installed package, the standard library or this hook."""
    known = _user_files.get(filename)
    if known is None:
        torch = sys.modules.get("torch")
        torch_dir = os.path.dirname(getattr(torch, "__file__", None) or "/nonexistent") + os.sep
        _file_names[filename] = os.path.basename(filename)
        known = _user_files[filename] = not (
            filename.startswith(("<frozen", torch_dir) + _LIBRARY_DIRS)
            or f"{os.sep}site-packages{os.sep}" in filename or f"{os.sep}dist-packages{os.sep}" in filename)
    return known


def _caller(frame) -> str | None:
    """'train.py:41 in step': the innermost frame of the user's code from `frame` outwards."""
    while frame is not None:
        code = frame.f_code
        if _is_user_file(code.co_filename):
            return f"{_file_names[code.co_filename]}:{frame.f_lineno} in {code.co_name}"
        frame = frame.f_back
    return None


def _error(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:ERROR_CHARS]


def _raised_at(error: BaseException) -> str | None:
    """'train.py:41 in step': the innermost frame of the user's code that `error` passed through."""
    where, step = None, error.__traceback__
    while step is not None:
        code = step.tb_frame.f_code
        if _is_user_file(code.co_filename):
            where = f"{_file_names[code.co_filename]}:{step.tb_lineno} in {code.co_name}"
        step = step.tb_next
    return where


def _record_dist_calls(dist, c10d) -> None:
    """Wrap torch.distributed's public calls (on both modules that hold them) to record each call of the process."""
    torch = sys.modules["torch"]
    tensor_type = torch.Tensor

    def ranks_of(group):
        if group is None or group is c10d.GroupMember.WORLD:
            return None
        return list(dist.get_process_group_ranks(group))

    def global_rank(group, rank):
        if rank is None or group is None or group is c10d.GroupMember.WORLD:
            return rank
        return dist.get_global_rank(group, rank)

    def tensors_in(values) -> list:
        """Shape and dtype of the tensors among `values` (in lists too, and those of batch_isend_irecv's P2POps)."""
        found = []
        for value in values:
            for item in value[:TENSORS_DESCRIBED] if isinstance(value, (list, tuple)) else (value,):
                if not isinstance(item, tensor_type):
                    if not isinstance(item, c10d.P2POp):
                        continue
                    item = item.tensor
                found.append({"shape": list(item.shape), "dtype": str(item.dtype)[6:]})  # 'torch.float32'
                if str(item.layout) != "torch.strided":  # sparse (COO, CSR): no strides to speak of
                    found[-1]["layout"] = str(item.layout)[6:]
                elif item.device.type == "meta":  # no data: the call moves nothing into it
                    found[-1]["device"] = "meta"
                elif not item.is_contiguous():  # a strided view: gloo reads and writes it as if it were not
                    found[-1]["contiguous"] = False
                if len(found) >= TENSORS_DESCRIBED:
                    return found
        return found

    def briefly(value) -> str | None:
        """A short, comparable description of an argument that is not a tensor: None, a number, a list's integers
        or length, a reduce op; None for what cannot be compared across processes (an object, a tensor)."""
        if value is None or isinstance(value, (bool, int, float)):
            return repr(value)
        if isinstance(value, str):
            return repr(value[:40])
        if isinstance(value, (list, tuple)):
            if value and isinstance(value[0], tensor_type):
                distinct = len({id(item) for item in value})  # [t] * world: every slot is one tensor
                return f"list of {len(value)} holding {distinct} tensor{'s' if distinct > 1 else ''}" \
                    if distinct < len(value) else None
            if value and isinstance(value[0], c10d.P2POp):
                return None
            if len(value) <= INTS_SHOWN and all(isinstance(item, int) and not isinstance(item, bool) for item in value):
                return repr(list(value))
            return f"{'tuple' if isinstance(value, tuple) else 'list'} of {len(value)}" + (
                ", all None" if value and all(item is None for item in value) else "")
        if "RedOp" in type(value).__name__ or "ReduceOp" in type(value).__name__:
            return str(value).rsplit(".", 1)[-1]
        return None

    def compiling() -> bool:
        """Inside torch.compile's tracing: the original call, which dynamo knows how to trace."""
        compiler = getattr(torch, "compiler", None)
        return compiler is not None and compiler.is_compiling()

    def timeout_of(group):
        """The group's timeout (None: the default group), as its backend holds it."""
        try:
            group = group if group is not None else c10d._get_default_group()
            for device in group._device_types:
                return group._get_backend(device).options._timeout.total_seconds()
        except Exception:
            pass
        return None

    def describe(op, given: dict, values: tuple, record: dict) -> None:
        """The arguments that must agree across ranks (`given`: the call's by name, defaults too; `values`: those
        passed); one that cannot be described is left out."""
        group = given.get("group")
        try:
            if op in GROUP_CALLS:
                if given.get("ranks") is not None:
                    record["group"] = [int(rank) for rank in given["ranks"]]
            elif group is not None:
                record["group"] = ranks_of(group)
                if record["group"] is not None:
                    record["group_name"] = str(group.group_name)  # which of the groups with these members
            if op in RANK_ARGUMENTS:
                field, name, relative = RANK_ARGUMENTS[op]
                value = given.get(name)
                if value is None and given.get(relative) is not None:
                    value = global_rank(group, given[relative])
                if value is not None:
                    record[field] = int(value)
            if given.get("tag"):
                record["tag"] = int(given["tag"])
        except Exception:
            pass
        try:
            tensors = tensors_in(values)
            if tensors:
                record["tensors"] = tensors
        except Exception:
            pass
        if op not in AFTER_CALLS:
            try:
                others = {name: briefly(value) for name, value in given.items() if name not in ARGUMENTS_NOT_COMPARED}
                if described := {name: text for name, text in others.items() if text is not None}:
                    record["args"] = described
            except Exception:
                pass
        elif op == "init_process_group" and isinstance(given.get("init_method"), str):
            record["args"] = {"init_method": given["init_method"][:300]}  # where the ranks meet: file://, tcp://
        if given.get("async_op") or op in ASYNC_CALLS:
            record["async"] = True
        try:
            timeout = given.get("timeout")  # barrier, monitored_barrier, init_process_group, new_group
            if timeout is None:
                timeout = CALLS.timeouts.get(None if group is None or group is c10d.GroupMember.WORLD else group)
            if timeout is not None:
                record["timeout_s"] = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
        except Exception:
            pass

    temporary = {False: _temporary_references(object()), True: _temporary_references(value=object())}
    storage_uses = getattr(torch._C, "_storage_Use_Count", None)

    def thrown_away(op, given: dict, by_keyword: bool) -> bool:
        """The call writes its result into a tensor (or list) nothing but the call holds (torch.stack(...),
        x.clone(), a list made in the call): nobody can read the result once it returns."""
        name = RESULT_ARGUMENTS[op]
        if _references(given, name) != temporary[by_keyword]:  # counted before this function holds it too
            return False
        value = given.get(name)
        if value is None:
            return False
        if op in ROOT_ONLY:
            root = given.get(ROOT_ONLY[op])
            is_root = root is not None and root == dist.get_rank()
            if is_root != (op != "broadcast"):  # broadcast's root only sends; reduce's and gather's root receives
                return False
        if isinstance(value, tensor_type):  # not a view or alias of a tensor that is kept, nor C++'s (a .grad)
            return (value._base is None and value._use_count() == 1 and storage_uses is not None
                    and storage_uses(value.untyped_storage()._cdata) <= 2)
        return isinstance(value, list)

    def posted_by_batch(p2p_ops, caller, at) -> None:
        for p2p in list(p2p_ops)[:TENSORS_DESCRIBED]:
            try:
                op = getattr(p2p.op, "__name__", "?")
                record = {"op": op, "caller": caller, "thread": threading.current_thread().name,
                          "src" if op == "irecv" else "dst": int(p2p.peer), "async": True, "entered_at": at,
                          "tensors": tensors_in([p2p.tensor])}
                if p2p.tag:
                    record["tag"] = int(p2p.tag)
                if p2p.group is not None and p2p.group is not c10d.GroupMember.WORLD:
                    record["group"] = ranks_of(p2p.group)
                CALLS.kept["posted"].append(record)
            except Exception:
                pass

    def after(op, record, result) -> None:
        """What only the call's end says: the members of this rank's subgroup, a new group's timeout."""
        if op == "init_process_group":
            CALLS.timeouts[None] = timeout_of(None)
        elif op == "new_group" and result is not None:
            CALLS.timeouts[result] = timeout_of(result)
            if getattr(result, "group_name", None) is not None:
                record["group_name"] = str(result.group_name)
        elif op in ("new_subgroups", "new_subgroups_by_enumeration") and result:
            record["group"] = ranks_of(result[0])  # the subgroup this rank is in
            CALLS.timeouts[result[0]] = timeout_of(result[0])

    def wrap(op, function):
        import inspect

        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            parameters = {}
        names = list(parameters)
        defaults = {name: parameter.default for name, parameter in parameters.items()
                    if parameter.default is not inspect.Parameter.empty}

        @functools.wraps(function)
        def recorded(*args, **kwargs):
            if compiling():  # first: dynamo traces this wrapper and cannot trace threading's calls
                return function(*args, **kwargs)
            ident = threading.get_ident()
            if ident in CALLS.inside:
                return function(*args, **kwargs)
            try:
                given = {**defaults, **dict(zip(names, args)), **kwargs}
                now = time.time()
                record = {"op": op, "caller": _caller(sys._getframe(1)), "thread": threading.current_thread().name,
                          "entered_at": now}
                describe(op, given, args + tuple(kwargs.values()), record)
                handling = sys.exc_info()[1]
                if handling is not None:  # called from an except or finally block: what the rank was handling
                    record["handling"] = {"error": _error(handling), "raised_at": _raised_at(handling)}
                if op in RESULT_ARGUMENTS and thrown_away(op, given, RESULT_ARGUMENTS[op] in kwargs):
                    record["discarded"] = RESULT_ARGUMENTS[op]
                    CALLS.kept["discarded"].append(record)
                if op == "init_process_group" and isinstance(given.get("rank"), int) and given["rank"] >= 0:
                    CALLS.init_rank = (given["rank"], given.get("world_size"))
                with CALLS.lock:
                    CALLS.pending[id(record)] = record
                    CALLS.counts[op] = CALLS.counts.get(op, 0) + 1
                    if record.get("async"):
                        CALLS.kept["posted"].append(record)
                    if op in GROUP_CALLS:
                        CALLS.kept["groups"].append(record)
                    if op == "batch_isend_irecv":
                        posted_by_batch(given.get("p2p_op_list") or [], record["caller"], now)
            except Exception:
                return function(*args, **kwargs)
            CALLS.inside.add(ident)
            try:
                result = function(*args, **kwargs)
            except BaseException as error:
                CALLS.inside.discard(ident)
                try:
                    CALLS.left(record, error)
                except Exception:
                    pass
                raise
            CALLS.inside.discard(ident)
            try:
                if op in AFTER_CALLS:
                    after(op, record, result)
                CALLS.left(record)
            except Exception:
                pass
            return result

        return recorded

    for op in DIST_CALLS:
        original = getattr(c10d, op, None)
        if not callable(original) or getattr(original, "__wrapped_by_lab__", False):
            continue
        recorded = wrap(op, original)
        recorded.__wrapped_by_lab__ = True
        setattr(c10d, op, recorded)
        if getattr(dist, op, None) is original:
            setattr(dist, op, recorded)


def _record_store_operations(store_type) -> None:
    """Wrap the c10d store's methods (every store class inherits them from Store) to record the user's operations;
    torch's own (rendezvous, barriers) are left out."""

    def wrap(op, method):
        @functools.wraps(method)
        def recorded(self, *args, **kwargs):
            frame = sys._getframe(1)
            if not _is_user_file(frame.f_code.co_filename):
                return method(self, *args, **kwargs)
            try:
                keys = args[0] if args else kwargs.get("key", kwargs.get("keys"))
                keys = [keys] if isinstance(keys, (str, bytes)) else list(keys or [])[:KEYS_DESCRIBED]
                record = {"op": op, "keys": [key.decode(errors="replace") if isinstance(key, bytes) else str(key)
                                             for key in keys],
                          "caller": _caller(frame), "at": time.time(), "store": type(self).__name__}
                with CALLS.lock:
                    CALLS.pending_store[id(record)] = record
                    CALLS.kept["store"].append(record)
            except Exception:
                return method(self, *args, **kwargs)
            try:
                result = method(self, *args, **kwargs)
            except BaseException as error:
                with CALLS.lock:
                    record["ended_at"], record["error"] = time.time(), _error(error)
                    CALLS.pending_store.pop(id(record), None)
                raise
            with CALLS.lock:
                record["ended_at"] = time.time()
                CALLS.pending_store.pop(id(record), None)
                if op == "add" and isinstance(result, int):
                    record["value"] = result  # a counter's value: one past the world size says its key is reused
            return result

        return recorded

    for op in STORE_METHODS:
        method = store_type.__dict__.get(op)
        if method is not None:
            try:
                setattr(store_type, op, wrap(op, method))
            except (TypeError, AttributeError):
                pass


def _once_imported(name: str, then) -> None:
    """Call `then(module)` as soon as module `name` has been imported (torch.distributed: `import torch` does it, as
    does any form of importing it): a finder first on sys.meta_path runs its loader and then `then`."""

    class AfterImport:
        @staticmethod
        def find_spec(fullname, path=None, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(AfterImport)
            spec = importlib.util.find_spec(fullname)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            loader_exec = spec.loader.exec_module

            def exec_module(module):
                loader_exec(module)
                try:
                    then(module)
                except Exception:
                    pass

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, AfterImport)


def _write_dumps(folder: str):
    """Write this process's Flight Recorder and its calls as JSON into `folder`: at exit, when the lab asks, and
    when a call has been pending for PENDING_SNAPSHOT_SECONDS."""
    # The rank as torch.distributed says it while the group lives (a job that ends with destroy_process_group
    # before this thread looked falls back on the rank init_process_group was given, then on torchrun's RANK).
    identity = {"node": os.environ.get("LAB_NODE"), "pid": os.getpid(), "rank": None, "world_size": None}
    request = os.path.join(folder, "dump-request")

    def distributed():
        module = sys.modules.get("torch.distributed")
        return module if module is not None and hasattr(module, "get_world_size") else None

    def learn_rank() -> None:
        module = distributed()
        try:
            if module is not None and module.is_initialized():
                identity["rank"], identity["world_size"] = module.get_rank(), module.get_world_size()
        except Exception:  # torch half imported, or a group being torn down: try again later
            pass

    ended = threading.Event()  # the exit dump began: the watcher writes nothing after the process's last word

    def dump(reason: str) -> None:
        if reason == "exit":
            ended.set()
        elif ended.is_set():
            return
        if distributed() is None:
            return
        learn_rank()
        if identity["rank"] is None and CALLS.init_rank is not None:
            identity["rank"], identity["world_size"] = CALLS.init_rank
        if identity["rank"] is None and os.environ.get("RANK", "").isdigit():
            identity["rank"], identity["world_size"] = int(os.environ["RANK"]), os.environ.get("WORLD_SIZE")
        try:
            from torch._C._distributed_c10d import _dump_fr_trace_json
            trace = json.loads(_dump_fr_trace_json(True, False))  # collectives, not only the active ones
        except Exception:
            trace = {}
        if not trace.get("entries") and not CALLS and not (
                reason == "exit" and hasattr(sys, "last_value") and os.environ.get("RANK")):
            return  # nothing of torch.distributed, and no rank's error that its own code (`sources`) may explain
        trace["entries"] = (trace.get("entries") or [])[-KEPT_ENTRIES:]  # the last ones say where it is
        path = os.path.join(folder, f"{reason}-node{identity['node']}-pid{identity['pid']}.json")
        try:
            os.makedirs(folder, exist_ok=True)
            # At exit: whether an exception ended the process (the interpreter keeps it in sys.last_value), so the
            # lab tells a rank that finished its work from one that failed.
            failed = getattr(sys, "last_value", None) if reason == "exit" else None
            with open(path + ".tmp", "w") as out:
                json.dump({**identity, "reason": reason, "time": time.time(), "started": STARTED,
                           "exception": type(failed).__name__ if failed is not None else None,
                           "error": _error_text(failed) if failed is not None else None,
                           **({"failed_check": _checked_or_none(failed)} if failed is not None else {}),
                           "trace": trace,
                           "calls": CALLS.snapshot(),
                           **({"sources": _user_sources()} if reason in ("exit", "live") else {})}, out)
            os.replace(path + ".tmp", path)
        except (OSError, TypeError, ValueError):
            pass

    def _error_text(failed: BaseException) -> str:
        """The traceback that ended the process, as Python printed it: where its output went elsewhere (torchrun's
        --redirects, a log file of the job's own), the lab still reads it."""
        import traceback

        return "".join(traceback.format_exception(type(failed), failed, failed.__traceback__))[-6000:]

    def _checked_or_none(failed: BaseException) -> dict | None:
        try:
            return _failed_check(failed)
        except Exception:  # the hook never adds an error of its own to the job's
            return None

    def watch() -> None:
        answered, written = None, frozenset()
        while True:
            time.sleep(WATCH_SECONDS)
            if identity["rank"] is None:
                learn_rank()
            # a call pending for a second that no snapshot holds yet, or the end of those it holds (a process killed
            # later, with no last words, must not seem to wait where it waited once)
            waiting = CALLS.long_pending(time.time())
            if waiting != written:
                dump("pending")
            written = waiting
            try:
                asked = os.stat(request).st_mtime_ns
            except OSError:
                continue
            if asked != answered:
                answered = asked
                dump("live")

    threading.Thread(target=watch, name="lab-flight-recorder", daemon=True).start()
    atexit.register(dump, "exit")
    return dump


LAUNCH_SETTINGS = ("run_id", "rdzv_backend", "rdzv_endpoint", "min_nodes", "max_nodes", "nproc_per_node",
                   "max_restarts")


def _record_launches(module) -> None:
    """torchrun's agent, however it is started (the command, or torch.distributed.run.main / elastic_launch from a
    script): its rendezvous settings, and the error that ended its launch before any worker failed (a rendezvous that
    never formed), so the lab compares them across nodes. Only such an error makes the agent write a dump."""
    original = module.launch_agent

    @functools.wraps(original)
    def launch_agent(config, *args, **kwargs):
        try:
            CALLS.launch = {name: str(getattr(config, name)) for name in LAUNCH_SETTINGS if hasattr(config, name)}
        except Exception:
            pass
        try:
            return original(config, *args, **kwargs)
        except BaseException as error:
            if type(error).__name__ != "ChildFailedError":  # the workers' failure: their own dumps tell it
                CALLS.launch["error"] = _error(error)
            raise

    module.launch_agent = launch_agent


def _record_store_construction(store_type) -> None:
    """A TCPStore the user's code builds is a call like the others (pending while its server waits for world_size
    clients, which a wrong world_size makes for ever); torch's own stores pass straight through."""
    construct = store_type.__init__
    names = ("host_name", "port", "world_size", "is_master", "timeout", "wait_for_workers")

    @functools.wraps(construct)
    def constructed(self, *args, **kwargs):
        frame = sys._getframe(1)
        if not _is_user_file(frame.f_code.co_filename):
            return construct(self, *args, **kwargs)
        try:
            given = {**dict(zip(names, args)), **kwargs}
            record = {"op": "TCPStore", "caller": _caller(frame), "thread": threading.current_thread().name,
                      "entered_at": time.time(), "args": {name: repr(given[name]) for name in names[:4] + names[5:]
                                                          if name in given}}
            if hasattr(given.get("timeout"), "total_seconds"):
                record["timeout_s"] = given["timeout"].total_seconds()
            with CALLS.lock:
                CALLS.pending[id(record)] = record
                CALLS.counts["TCPStore"] = CALLS.counts.get("TCPStore", 0) + 1
        except Exception:
            return construct(self, *args, **kwargs)
        try:
            construct(self, *args, **kwargs)
        except BaseException as error:
            CALLS.left(record, error)
            raise
        CALLS.left(record)

    store_type.__init__ = constructed


def _record_dist_calls_and_store(dist) -> None:
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is None:
        return
    _record_dist_calls(dist, c10d)
    store_type = getattr(c10d, "Store", None)
    if store_type is not None:
        _record_store_operations(store_type)
    tcp_store = getattr(dist, "TCPStore", None)
    if tcp_store is not None:
        try:
            _record_store_construction(tcp_store)
        except (TypeError, AttributeError):
            pass


def _count_ddp_forwards(module) -> None:
    """Count DDP's forwards by whether their backward all-reduces the gradients (outside `no_sync()`) or not: a job
    whose every forward ran in no_sync never averaged a gradient."""
    ddp = module.DistributedDataParallel
    forward, construct = ddp.forward, ddp.__init__

    @functools.wraps(construct)
    def constructed(self, *args, **kwargs):
        construct(self, *args, **kwargs)
        try:  # buffers (BatchNorm's running statistics) that DDP will not keep equal across the ranks
            if not self.broadcast_buffers and any(True for _ in self.module.buffers()):
                CALLS.ddp_forwards["buffers_not_broadcast"] = sum(1 for _ in self.module.buffers())
        except Exception:
            pass

    @functools.wraps(forward)
    def counted(self, *args, **kwargs):
        try:
            CALLS.ddp_forwards["synced" if self.require_backward_grad_sync else "no_sync"] += 1
        except Exception:
            pass
        return forward(self, *args, **kwargs)

    ddp.forward, ddp.__init__ = counted, constructed


def _record_optimizer_steps(module) -> None:
    """Count the optimizers' steps and keep the learning rates the last one used (torch's global post-step hook): ranks
    whose rates differ at the same step (a scheduler stepped on one rank only) drift apart whatever DDP averages."""

    def stepped(optimizer, args, kwargs) -> None:
        try:
            CALLS.optimizer = {"steps": CALLS.optimizer["steps"] + 1,
                               "lrs": [float(group["lr"]) for group in optimizer.param_groups[:8]]}
        except Exception:
            pass

    module.register_optimizer_step_post_hook(stepped)


def _file_facts(path: str) -> dict:
    try:
        stat = os.stat(path)
    except OSError:
        return {"size": None}
    return {"size": stat.st_size, "mtime": stat.st_mtime}


def _record_serialization(module) -> None:
    """torch.save and torch.load of a named file: which file, its size and time as the load began (a copy left on one
    node from before the run) or as the save ended (a write a limit cut short), and the error."""
    for op, position in (("save", 1), ("load", 0)):
        original = getattr(module, op, None)
        if callable(original) and not getattr(original, "__wrapped_by_lab__", False):
            recorded = _recorded_file_op(op, position, original)
            recorded.__wrapped_by_lab__ = True
            setattr(module, op, recorded)


def _recorded_file_op(op: str, position: int, original):
    @functools.wraps(original)
    def recorded(*args, **kwargs):
        target = args[position] if len(args) > position else kwargs.get("f")
        if not isinstance(target, (str, os.PathLike)):
            return original(*args, **kwargs)
        try:
            path = os.path.abspath(os.fspath(target))
            record = {"op": op, "path": path[:300], "caller": _caller(sys._getframe(1)), "at": time.time(),
                      **(_file_facts(path) if op == "load" else {})}
            with CALLS.lock:
                CALLS.kept["files"].append(record)
        except Exception:
            return original(*args, **kwargs)
        try:
            return original(*args, **kwargs)
        except BaseException as error:
            record["error"] = _error(error)
            raise
        finally:
            record["ended_at"] = time.time()
            if op == "save":
                record.update(_file_facts(path))

    return recorded


def _opener(frame):
    """The frame that asked for a file: past pathlib's own (Path.read_text -> Path.open -> io.open)."""
    while frame is not None and frame.f_code.co_filename.endswith(f"{os.sep}pathlib.py"):
        frame = frame.f_back
    return frame


_NOT_DATA = tuple({sys.prefix, sys.base_prefix, "/proc", "/sys", "/dev", "/etc", "/usr"})


def _read_for_user(path: str) -> bool:
    """A file (an absolute path) a library opens on the user's behalf (np.load, pandas, PIL, a tokenizer's cache):
    not the interpreter's or a package's own files (the user's frame further up is checked by the caller)."""
    return not path.startswith(_NOT_DATA) and f"{os.sep}site-packages{os.sep}" not in path


def _record_file_reads() -> None:
    """The files the user's code opens (open() and pathlib's read_text/open): for reading, the first 32 paths with
    size, time and, for small ones, a digest of the content, compared across nodes by the lab (a cache or config on
    each node's own disk that differs on one, or that one node has and the others do not); for writing, the first 16
    paths and how (truncated, appended): the same file written by several ranks."""
    import builtins
    import io
    import zlib

    original = builtins.open
    seen: set[str] = set()
    written: set[str] = set()
    per_folder: dict[str, int] = {}  # a dataset of many files takes a few places, not all of them

    def note_read(path: str, opener) -> None:
        folder = os.path.dirname(path)
        if path in seen or len(seen) >= KEPT["reads"] or per_folder.get(folder, 0) >= READS_PER_FOLDER:
            return
        caller = _caller(opener)
        if caller is None:
            return
        seen.add(path)
        per_folder[folder] = per_folder.get(folder, 0) + 1
        record = {"op": "read", "path": path[:300], "caller": caller, "at": time.time(), **_file_facts(path)}
        if record.get("size") is not None and record["size"] <= DIGESTED_BYTES:
            with original(path, "rb") as content:
                record["digest"] = f"{zlib.crc32(content.read()):08x}"
        with CALLS.lock:
            CALLS.kept["reads"].append(record)

    def note_write(path: str, mode: str, opener) -> None:
        if path in written or len(written) >= KEPT["writes"] or (caller := _caller(opener)) is None:
            return
        written.add(path)
        with CALLS.lock:
            CALLS.kept["writes"].append({"op": "append" if "a" in mode else "write", "path": path[:300],
                                         "caller": caller, "at": time.time()})

    def note_missing(file, args, kwargs, error: OSError) -> None:
        """A read of a file that was not there (yet): when, so the lab compares it with another rank's write."""
        mode = args[0] if args else kwargs.get("mode", "r")
        opener = _opener(sys._getframe(2))
        if not isinstance(file, (str, os.PathLike)) or not isinstance(mode, str) or "r" not in mode or \
                opener is None or not _is_user_file(opener.f_code.co_filename) or len(seen) >= KEPT["reads"]:
            return
        path = os.path.abspath(os.fspath(file))
        seen.add(path)
        with CALLS.lock:
            CALLS.kept["reads"].append({"op": "read", "path": path[:300], "caller": _caller(opener),
                                        "at": time.time(), "error": _error(error)})

    def open(file, *args, **kwargs):  # noqa: A001 - stands in for the builtin
        try:
            opened = original(file, *args, **kwargs)
        except FileNotFoundError as error:
            try:
                note_missing(file, args, kwargs, error)
            except Exception:
                pass
            raise
        try:
            mode = args[0] if args else kwargs.get("mode", "r")
            opener = _opener(sys._getframe(1))
            path = os.path.abspath(os.fspath(file)) if isinstance(file, (str, os.PathLike)) else None
            if path is not None and isinstance(mode, str) and opener is not None and (
                    _is_user_file(opener.f_code.co_filename) or _read_for_user(path)):
                if "r" in mode and "+" not in mode:
                    note_read(path, opener)
                elif any(letter in mode for letter in "wax"):
                    note_write(path, mode, opener)
        except Exception:
            pass
        return opened

    builtins.open = io.open = open


def _record_file_removals() -> None:
    """The files and folders the user's code removes (os.remove, os.unlink, Path.unlink, shutil.rmtree): a file another
    rank of the node wrote and this one cleaned up as stale is missing for the rank that reads it next. shutil is
    wrapped when the job imports it (importing it here would cost every process of a node its import)."""

    def wrapped(original, op):
        @functools.wraps(original)
        def remove(path, *args, **kwargs):
            try:
                opener = _opener(sys._getframe(1))
                if isinstance(path, (str, os.PathLike)) and opener is not None and \
                        _is_user_file(opener.f_code.co_filename) and len(CALLS.kept["removed"]) < KEPT["removed"]:
                    with CALLS.lock:
                        CALLS.kept["removed"].append({"op": op, "path": os.path.abspath(os.fspath(path))[:300],
                                                      "caller": _caller(opener), "at": time.time()})
            except Exception:
                pass
            return original(path, *args, **kwargs)
        return remove

    def wrap_rmtree(shutil) -> None:
        shutil.rmtree = wrapped(shutil.rmtree, "rmtree")

    os.remove, os.unlink = wrapped(os.remove, "remove"), wrapped(os.unlink, "remove")
    if "shutil" in sys.modules:
        wrap_rmtree(sys.modules["shutil"])
    else:
        _once_imported("shutil", wrap_rmtree)


def _record_string_hashes() -> None:
    """Note the user's own hash() of strings: Python salts them per process (PYTHONHASHSEED), so ranks that shard,
    assign or seed by hash() disagree. Other calls pass straight through."""
    import builtins

    def hash(value):  # noqa: A001 - stands in for the builtin
        if type(value) in (str, bytes) or (type(value) is tuple and any(type(item) in (str, bytes) for item in value)):
            try:
                frame = sys._getframe(1)
                filename = frame.f_code.co_filename
                if not filename.startswith("<") and _is_user_file(filename):
                    caller = _caller(frame)
                    with CALLS.lock:
                        if all(record["caller"] != caller for record in CALLS.kept["hashed"]):
                            CALLS.kept["hashed"].append({"op": "hash", "caller": caller, "at": time.time()})
            except Exception:
                pass
        return _builtin_hash(value)

    builtins.hash = hash


_ENV_PLUMBING = {"<frozen os>", "<frozen _collections_abc>", os.__file__}
_ENV_READ_BY_CALLER = {"get", "getenv", "__contains__"}  # environ.get, os.getenv, `in`: a read by whoever called them


def _record_environment_reads() -> None:
    """Note each variable the job reads from its environment and the value its first read got (None: unset): ranks
    that run the same code compute otherwise when one node's environment sets a variable the others do not (a shell
    profile, an export in a launch script). torch's own reads are left out, and so is a line that reads many names
    (a copy of the whole environment: dict(os.environ), a subprocess's env)."""
    environ_type = type(os.environ)
    original = environ_type.__getitem__
    here = os.path.abspath(__file__)
    names_by_line: dict[tuple[str, int], list[str]] = {}

    def note(key, value) -> None:
        if key in CALLS.env_read or not isinstance(key, str) or len(CALLS.env_read) >= ENV_NAMES_KEPT:
            return
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename in _ENV_PLUMBING:
            if frame.f_code.co_name not in _ENV_READ_BY_CALLER:
                return
            frame = frame.f_back
        if frame is None:
            return
        filename = frame.f_code.co_filename
        torch = sys.modules.get("torch")
        if filename == here or (torch is not None and filename.startswith(os.path.dirname(torch.__file__ or "/-"))):
            return
        names = names_by_line.setdefault((filename, frame.f_lineno), [])
        if len(names) >= BULK_READ_NAMES:
            for name in names:
                CALLS.env_read.pop(name, None)
            return
        names.append(key)
        if value is not None and SECRET_NAME.search(key):
            value = "sha256:" + hashlib.sha256(value.encode(errors="replace")).hexdigest()[:12]
        CALLS.env_read[key] = value if value is None else value[:ENV_VALUE_CHARS]

    def read(self, key):
        try:
            value = original(self, key)
        except KeyError:
            try:
                note(key, None)
            except Exception:
                pass
            raise
        try:
            note(key, value)
        except Exception:
            pass
        return value

    environ_type.__getitem__ = read


def _failed_check(failed: BaseException) -> dict | None:
    """The values the failing statement of the user's code worked with, read in its frame as the process ended: what
    a check like `assert total == want` or `if a != b: raise` compared, which its message often does not say. Only
    names, attributes, constant subscripts and calls without side effects (SAFE_CALLS) are evaluated."""
    import ast
    import linecache

    frame, line, step = None, None, failed.__traceback__
    while step is not None:  # a compiled extension's frame names a source it does not ship (numpy's mtrand.pyx)
        filename = step.tb_frame.f_code.co_filename
        if _is_user_file(filename) and filename.endswith(".py"):
            frame, line = step.tb_frame, step.tb_lineno
        step = step.tb_next
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    try:
        tree = ast.parse("".join(linecache.getlines(filename, frame.f_globals)) or open(filename).read())
    except (SyntaxError, ValueError, OSError):
        return None
    statement, parents = None, {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno) and not any(
                isinstance(child, ast.stmt) and child.lineno <= line <= (child.end_lineno or child.lineno)
                for field in ("body", "orelse", "finalbody", "handlers") for child in getattr(node, field, ()) or ()):
            statement = node
    if statement is None:
        return None
    checked = statement.test if isinstance(statement, ast.Assert) else statement
    if isinstance(statement, ast.Raise):  # `if a != b: raise ...`: what the condition compared
        above = parents.get(statement)
        checked = above.test if isinstance(above, ast.If) and statement in above.body else statement
    values, seen = [], set()
    for node in ast.walk(checked):
        if len(values) >= VALUES_KEPT or not isinstance(node, ast.expr) or isinstance(node, ast.Constant):
            continue
        text = ast.unparse(node)
        if text in seen or not _safe(node):
            continue
        seen.add(text)
        try:
            value = eval(compile(ast.Expression(node), filename, "eval"), frame.f_globals, frame.f_locals)
        except Exception:
            continue
        if callable(value) or type(value).__name__ == "module":
            continue
        values.append(_brief_value(text, value))
    return {"where": f"{os.path.basename(filename)}:{line}", "statement": ast.unparse(checked)[:VALUE_CHARS],
            "values": values}


def _safe(node) -> bool:
    """`node` reads values and calls only what SAFE_CALLS names (nothing that could write, wait or send)."""
    import ast

    for part in ast.walk(node):
        if isinstance(part, ast.Call):
            name = part.func.attr if isinstance(part.func, ast.Attribute) else getattr(part.func, "id", None)
            if name not in SAFE_CALLS:
                return False
        elif isinstance(part, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.ListComp,
                               ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return False
    return True


def _brief_value(text: str, value) -> dict:
    """One operand: its expression, its type, a number where it is one, and a short description."""
    return {"expr": text[:VALUE_CHARS], **_described(value, nested=False)}


def _described(value, nested: bool) -> dict:
    """A value's type, and as cheaply as it can be said: a number, a tensor's shape and dtype (its items where there
    are at most 8), a container's length and first items, a short repr."""
    brief = {"type": type(value).__name__}
    shape = getattr(value, "shape", None)
    if isinstance(value, bool):
        brief["value"] = str(value)
    elif isinstance(value, (int, float)):
        brief["number"], brief["value"] = float(value), repr(value)
    elif isinstance(value, (str, bytes)):
        brief["length"], brief["value"] = len(value), repr(value[:VALUE_CHARS])
    elif shape is not None and hasattr(value, "dtype"):
        dims = [int(size) for size in shape]
        count = 1
        for size in dims:
            count *= size
        brief["shape"], brief["dtype"] = dims, str(value.dtype).replace("torch.", "")
        try:
            if count == 1:
                brief["number"] = float(value.reshape(-1)[0])
            if count <= 8:
                brief["value"] = repr(value.reshape(-1).tolist())[:VALUE_CHARS]
            if 0 < count <= COUNTED_ITEMS and ("float" in brief["dtype"] or "complex" in brief["dtype"]):
                brief["nan"] = int((value != value).sum())  # NaN is the one value unequal to itself
        except Exception:
            pass
    elif isinstance(value, (list, tuple, dict, set, frozenset)):
        brief["length"] = len(value)
        if not nested and isinstance(value, dict):  # a dict's values, each with its key
            brief["items"] = [{"key": repr(key)[:VALUE_CHARS], **_described(item, nested=True)}
                              for key, item in list(value.items())[:ITEMS_DESCRIBED]]
        elif not nested:
            brief["items"] = [_described(item, nested=True) for item in list(value)[:ITEMS_DESCRIBED]]
    return brief


def _user_sources() -> dict[str, str]:
    """The text of the user's own files: the script that runs, then the files its recorded calls came from."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    files = ([os.path.abspath(main)] if main else []) + [name for name, mine in _user_files.items() if mine]
    sources = {}
    for name in dict.fromkeys(files):
        if len(sources) >= SOURCES_KEPT:
            break
        if name.startswith("<") or not _is_user_file(name):
            continue
        try:
            with open(name, errors="replace") as source:
                sources[name] = source.read(SOURCE_CHARS)
        except OSError:
            pass
    return sources


def _stack_when_terminated(folder: str) -> None:
    import faulthandler

    path = os.path.join(folder, f"term-node{os.environ.get('LAB_NODE')}-pid{os.getpid()}.txt")
    try:
        os.makedirs(folder, exist_ok=True)
        out = open(path, "w")
        out.write(json.dumps({"node": os.environ.get("LAB_NODE"), "pid": os.getpid(), "rank": os.environ.get("RANK"),
                              "local_rank": os.environ.get("LOCAL_RANK"), "argv": sys.argv,
                              "main_thread": f"0x{threading.main_thread().ident:016x}"}) + "\n")
        out.flush()
        faulthandler.register(signal.SIGTERM, file=out, all_threads=True, chain=True)
    except (OSError, ValueError, RuntimeError, AttributeError):
        return

    def ended_otherwise() -> None:
        try:
            faulthandler.unregister(signal.SIGTERM)
            out.close()
            os.remove(path)
        except (OSError, ValueError):
            pass

    atexit.register(ended_otherwise)


def _profile_steps(folder: str) -> None:
    """A few steady steps profiled for `lab forecast` (lab_profile.py beside this file; LAB_PROFILE_DIR)."""
    try:
        import lab_profile
    except ImportError:
        return
    lab_profile.install(folder)


def _run_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_line_buffered()
_stacks_on_fatal_signals()
if os.environ.get("LAB_FLIGHT_DIR"):
    _once_imported("torch.distributed", _record_dist_calls_and_store)
    _once_imported("torch.nn.parallel.distributed", _count_ddp_forwards)
    _once_imported("torch.optim.optimizer", _record_optimizer_steps)
    _once_imported("torch.serialization", _record_serialization)
    _once_imported("torch.distributed.launcher.api", _record_launches)
    if not os.environ.get("PYTHONHASHSEED", "random").isdigit():  # salted per process
        _record_string_hashes()
    _record_environment_reads()
    _record_file_reads()
    _record_file_removals()
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", FR_BUFFER_SIZE)
    write_dump = _write_dumps(os.environ["LAB_FLIGHT_DIR"])  # write_dump(reason): what bench/hook_cost.py times
    if os.environ.get("RANK"):
        _stack_when_terminated(os.environ["LAB_FLIGHT_DIR"])
if os.environ.get("LAB_PROFILE_DIR"):
    _profile_steps(os.environ["LAB_PROFILE_DIR"])
_run_shadowed_sitecustomize()
