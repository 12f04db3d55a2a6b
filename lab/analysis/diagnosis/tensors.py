"""What a tensor or a traced function is, against what a call accepts: a sparse, quantized or nested tensor where only
plain dense ones go, a collective inside a function vmap batches, a custom autograd Function's gradient shaped for
all ranks instead of one, a collective inside code torch.compile must trace whole. Each is told from torch's own
message, then placed in the job's source.
"""

from __future__ import annotations

import ast
import re

from lab.analysis.diagnosis.context import Context, PatternRule
from lab.analysis.diagnosis.logs import LIBRARY_FILE, TRACEBACK_FRAME, LogLine
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.sources import SourceFile, call_name, calls_named, made_of, parsed_files, walk

# torch's dispatcher, for an operator given a tensor whose kind (its dispatch key) has no kernel for it.
NO_KERNEL = re.compile(r"Could not run '(?P<op>[\w:.]+)' with arguments from the '(?P<key>\w+)' backend")

# What a sparse tensor's missing strides make torch say in code written for dense ones (.contiguous(), .view()).
SPARSE_LAYOUT = re.compile(r"unsupported memory format option \w+|[Ss]parse(?: CPU| CUDA)? tensors do not have "
                           r"(?:strides|is_contiguous)|(?:is_contiguous|strides?|view) (?:is )?not (?:implemented|"
                           r"supported) for (?:sparse|tensors with layout)")

# The calls that make each kind of tensor, and the keyword that makes a layer's gradients sparse.
MAKERS = {"sparse": {"to_sparse", "to_sparse_coo", "to_sparse_csr", "sparse_coo_tensor", "sparse_csr_tensor"},
          "quantized": {"quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic",
                        "quantize_dynamic", "convert_fx", "quantize_fx"},
          "nested": {"nested_tensor", "as_nested_tensor"}}

FIXES = {
    ("quantized", True): "send what a quantized tensor is made of: q.int_repr() (its integer values) with "
                         "q.q_scale() and q.q_zero_point() (a collective of each, or one float tensor), rebuilt on "
                         "the receiver with torch._make_per_tensor_quantized_tensor(values, scale, zero_point); or "
                         "q.dequantize() before the collective and quantize after it",
    ("quantized", False): "dequantize (q.dequantize()) before this operation, or run it on q.int_repr() with the "
                          "scale applied by hand",
    ("sparse", True): "give the collective dense tensors: t.to_dense() before it; or send the sparse tensor's "
                      "indices() and values() (their counts differ per rank: agree on them first) and rebuild with "
                      "torch.sparse_coo_tensor(...).coalesce(); for gradients, DDP reduces sparse ones itself",
    ("nested", True): "give the collective regular tensors: pad the items to the largest shape "
                      "(torch.nested.to_padded_tensor, with each item's shape gathered first to unpad after) or "
                      "flatten them into one 1-D tensor with their lengths; or all_gather_object the list of tensors",
    ("nested", False): "run the operation on a padded regular tensor (torch.nested.to_padded_tensor) or on each item "
                       "(unbind())",
    ("sparse", False): "treat sparse gradients apart from dense ones where the code flattens or views them (if "
                       "g.is_sparse: reduce g.to_dense() or g.coalesce()'s values), or let DDP reduce them (it "
                       "handles sparse gradients), or make the layer dense (sparse=False)",
}


def _kind(key: str | None, message: str) -> str | None:
    """'sparse', 'quantized' or 'nested', from the dispatch key (or a sparse tensor's missing strides); None for
    another kind."""
    if key is None:
        return "sparse" if SPARSE_LAYOUT.search(message) else None
    for kind in ("quantized", "sparse", "nested"):
        if kind in key.lower():
            return kind
    return None


def _made_at(ctx: Context, kind: str) -> str:
    """' (made at FILE:LINE: CODE)': the first place the job's code makes a tensor of `kind`."""
    for source in parsed_files(ctx):
        made = calls_named(source, MAKERS.get(kind, set()))
        if kind == "sparse":
            made += [call for call in source.walk() if isinstance(call, ast.Call) and any(
                item.arg == "sparse" and isinstance(item.value, ast.Constant) and item.value.value is True
                for item in call.keywords)]
        if made:
            first = min(made, key=lambda call: call.lineno)
            return f" (made at {source.name}:{first.lineno}: {ast.unparse(first)[:70]})"
    return ""


def _raised_at(ctx: Context, line: LogLine) -> str:
    """'FILE:LINE in FUNCTION': the job's own frame of the traceback whose exception is `line`."""
    tb = next((tb for tb in ctx.tracebacks if tb.line is line), None)
    frame = tb.user_frame() if tb else None
    return f"{frame.file.rsplit('/', 1)[-1]}:{frame.line} in {frame.function}" if frame else "the quoted line"


def _tensor_kind(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """A tensor of a kind the operation has no code for: the kind from the dispatch key (or a sparse tensor's missing
    strides), where the job makes such tensors, and what to send or compute instead."""
    groups = match.groupdict()
    kind = _kind(groups.get("key"), match.group(0))
    op = groups.get("op") or ""
    if kind is None:
        return None
    collective = op.startswith("c10d::")
    doing = f"the collective {op.split('::')[-1].rstrip('_')}" if collective else \
        f"{op.split('::')[-1]}" if op else "code written for dense tensors"
    return (f"{doing} was given {kind} tensors{_made_at(ctx, kind)}, which it has no code for "
            f"(at {_raised_at(ctx, line)})", FIXES[kind, collective])


GRADIENT_SHAPE = re.compile(r"Function (?P<function>\w+?)(?:Backward\d*)? returned an invalid gradient at index "
                            r"(?P<index>\d+) - got \[(?P<got>[\d, ]*)\] but expected shape compatible with "
                            r"\[(?P<expected>[\d, ]*)\]")


def _dims(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _function_class(ctx: Context, name: str) -> tuple[SourceFile, ast.ClassDef] | None:
    for source in parsed_files(ctx):
        for node in source.walk():
            if isinstance(node, ast.ClassDef) and node.name == name:
                return source, node
    return None


def _gradient_shape(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """A custom Function's backward returned a gradient of another shape than its input's; where one dimension is
    the world size times the input's, it returned the gradient of everything the ranks gathered."""
    name, index = match["function"], match["index"]
    got, expected = _dims(match["got"]), _dims(match["expected"])
    world = ctx.evidence.expected_world_size or 0
    found = _function_class(ctx, name)
    at = f" ({found[0].name}:{found[1].lineno})" if found else ""
    gathers = found is not None and any(call_name(call) in {"all_gather", "all_gather_into_tensor", "gather"}
                                        for call in walk(found[1]) if isinstance(call, ast.Call))
    scaled = [i for i, (g, e) in enumerate(zip(got, expected)) if g != e] if len(got) == len(expected) else []
    if world > 1 and len(scaled) == 1 and got[scaled[0]] == expected[scaled[0]] * world:
        return (f"the backward of {name}{at} returns the gradient of what all {world} ranks gathered ({got}) for its "
                f"input #{index}, which holds this rank's part only ({expected})"
                + (": its forward gathers across ranks" if gathers else ""),
                "in backward, sum the gathered gradient over the ranks and return this rank's slice: g = torch.cat("
                "grads) (or grad_output); dist.all_reduce(g); return g[rank * n:(rank + 1) * n]; or use torch."
                "distributed.nn.functional.all_gather, whose backward does this")
    return (f"the backward of {name}{at} returns a gradient shaped {got} for its input #{index}, which is shaped "
            f"{expected}", f"return from {name}.backward one gradient per input of forward, each shaped like that "
            "input (reduce or slice what backward computed back to it)")


UNTRACEABLE = re.compile(r"^torch\._dynamo\.exc\.(?P<kind>\w+): (?P<what>.+)")
DISTRIBUTED_FILE = re.compile(r"/torch/distributed/|/jobhooks/sitecustomize\.py$")


def _traced_frames(ctx: Context, line: LogLine) -> list[tuple[str, int, str, str]]:
    """(file, line, function, quoted code) of each frame dynamo printed under 'from user code:' after `line`."""
    frames, started, stream = [], False, [other for other in ctx.lines if (other.node, other.rank) ==
                                          (line.node, line.rank)]
    after = stream[stream.index(line) + 1:] if line in stream else []
    for position, other in enumerate(after):
        text = other.text.strip()
        if text.startswith("Traceback (most recent call last)"):
            break
        if text == "from user code:":
            started = True
        elif started and (frame := TRACEBACK_FRAME.match(" " + text if not other.text[:1].isspace() else other.text)):
            code = after[position + 1].text.strip() if position + 1 < len(after) else ""
            frames.append((frame["file"], int(frame["line"]), frame["function"], code))
    return frames


def _compiled(ctx: Context) -> str:
    """' (compiled with fullgraph=True at FILE:LINE)' where the job's code asks for one whole graph."""
    for source in parsed_files(ctx):
        for call in calls_named(source, {"compile"}):
            if any(item.arg == "fullgraph" and isinstance(item.value, ast.Constant) and item.value.value is True
                   for item in call.keywords):
                return f" (compiled with fullgraph=True at {source.name}:{call.lineno})"
    return ""


def _not_traceable(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """torch.compile stopped at code dynamo cannot trace: name the job's line it was tracing, and where that line is a
    torch.distributed call, the collectives dynamo can trace."""
    if match["kind"] not in {"Unsupported", "UserError"}:
        return None
    frames = _traced_frames(ctx, line)
    own = [frame for frame in frames if not LIBRARY_FILE.search(frame[0])]
    if not own:
        return None
    file, number, function, code = own[-1]
    inner = frames[frames.index(own[-1]) + 1:]
    where = f"{file.rsplit('/', 1)[-1]}:{number} in {function}"
    distributed = "dist." in code or any(DISTRIBUTED_FILE.search(frame[0]) for frame in inner)
    if distributed:
        return (f"torch.compile cannot trace the torch.distributed call `{code[:60]}` at {where}{_compiled(ctx)}: "
                f"dynamo stopped there ({match['what'][:80]})",
                "keep the collective out of the compiled function (compile the computation, call the collective "
                "between compiled parts), or use the functional collectives dynamo traces (torch.distributed."
                "_functional_collectives: all_reduce, all_gather_tensor, reduce_scatter_tensor, broadcast, which "
                "return new tensors), or drop fullgraph=True so dynamo runs that call outside the graph")
    return (f"torch.compile cannot trace `{code[:60]}` at {where}{_compiled(ctx)}: dynamo stopped there "
            f"({match['what'][:80]})",
            "move that call out of the compiled function (or wrap it in torch.compiler.disable), or drop "
            "fullgraph=True so dynamo runs it outside the graph")


# functorch's refusal of an operator it cannot batch: a collective called inside vmap (or another torch.func transform).
NOT_BATCHED = re.compile(r"Batching rule not implemented for (?P<op>c10d::\w+)")
TRANSFORMS = {"vmap", "jacrev", "jacfwd", "hessian"}


def _collective_in_transform(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """A collective inside a function torch.func.vmap runs: the function sees batched tensors, and c10d's operators
    have no batching rule."""
    op = match["op"].split("::")[-1].rstrip("_")
    where = next((f" ({call_name(call)} at {source.name}:{call.lineno}: {ast.unparse(call)[:60]})"
                  for source in parsed_files(ctx)
                  for call in calls_named(source, TRANSFORMS)), "")
    return (f"the collective {op} ran inside a function that torch.func transforms{where}, at {_raised_at(ctx, line)}: "
            "vmap runs it on batched tensors, and collectives have no batching rule",
            f"take the {op} out of the transformed function: compute the batch's local values outside vmap (or "
            "before it), reduce them once, and pass the result into the function; or apply the per-item function "
            "in a loop")


PATTERNS = [
    PatternRule("collective-in-transform", NOT_BATCHED, _collective_in_transform),
    PatternRule("tensor-kind-unsupported", NO_KERNEL, _tensor_kind),
    PatternRule("tensor-kind-unsupported", SPARSE_LAYOUT, _tensor_kind),
    PatternRule("autograd-gradient-shape", GRADIENT_SHAPE, _gradient_shape),
    PatternRule("not-traceable-by-compile", UNTRACEABLE, _not_traceable),
]


# torch's warning where torch.from_numpy() is given a read-only array (np.load(mmap_mode='r'), a broadcast view).
NOT_WRITABLE = re.compile(r"(?P<file>[\w.-]+\.py):(?P<line>\d+): UserWarning: The given NumPy array is not writable")
WRITING_COLLECTIVES = {"broadcast", "all_reduce", "recv", "irecv", "reduce", "scatter", "reduce_scatter_tensor",
                       "all_to_all_single", "all_gather_into_tensor"}


def read_only_buffer_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    """A collective that writes into a tensor made over a read-only NumPy array (torch warned at the from_numpy):
    gloo cannot write what it receives there, and the receiving ranks' call never completes."""
    warned = {(match["file"], int(match["line"])) for line in ctx.lines if (match := NOT_WRITABLE.search(line.text))}
    if not warned:
        return []
    for source in parsed_files(ctx):
        for call in calls_named(source, WRITING_COLLECTIVES):
            written = call.args[1] if call_name(call) in ("reduce_scatter_tensor", "all_gather_into_tensor",
                                                          "all_to_all_single") and len(call.args) > 1 else \
                call.args[0] if call.args else None
            if written is None:
                continue
            makers = [node for made in made_of(source, written, source.function_of(call)) for node in walk(made)
                      if isinstance(node, ast.Call) and call_name(node) in ("from_numpy", "as_tensor", "asarray")
                      and (source.name, node.lineno) in warned]
            if not makers:
                continue
            name = ast.unparse(written)
            made = next((node for node in makers if name in ast.unparse(node)), makers[0])
            evidence = next((finding.evidence for finding in found), "") or f"{source.name}:{made.lineno}: " \
                "UserWarning: The given NumPy array is not writable"
            return [Finding(
                "collective-into-read-only", f"`{ast.unparse(call)[:50]}` ({source.name}:{call.lineno}) writes what "
                f"it receives into `{ast.unparse(written)[:30]}`, a tensor over a read-only NumPy array "
                f"(`{ast.unparse(made)[:40]}`, line {made.lineno}: torch warned that the array is not writable, as "
                "np.load(mmap_mode='r') makes it): gloo cannot write into that memory, so the receiving ranks' call "
                "never completes", evidence, None, None,
                "receive into writable memory: copy the array first (np.array(...), or torch.from_numpy(...).clone()),"
                " or allocate the buffer (torch.empty(shape, dtype=...)) on the receiving ranks; keep mmap_mode='r' "
                "for data that is only read")]
    return []
