"""Why a run failed or hung: findings drawn from what the run left behind.

A pure library (no Docker, no I/O): the runner gathers `Evidence` after a run (each node's exit code, OOM flag and
combined log; stack dumps when it took them; the launch facts and the lab's injected faults) and `diagnose()` returns
`Finding`s, the root cause first. The rules match torch's message families (c10d, gloo, NCCL, CUDA, torchrun, Python
tracebacks) rather than one script's text, and use the environment and the launch facts where they are known. They
live by family: addresses (rendezvous and network), divergence (ranks that disagree), resources (memory, shared
memory, GPUs), nodes (the nodes differ or lack what the job names: from what they answered after the run), crashes
(a process failing on its own), replicas (ranks that ran alike and computed different things, which the script's
own check caught), signals (a process killed by a fatal signal), waits (the ranks' pending calls matched
across ranks: deadlocks, roots, groups, tags, store keys, timeouts) and endings (how a run ended when nothing more is
known, saying what each rank was doing).
"""

from __future__ import annotations

from lab.analysis.diagnosis import (addresses, crashes, divergence, endings, launches, nodes, order, replicas,
                                    pitfalls, resources, settings, shared_files, signals, sources, threads, waits,
                                    tensors, wrapping)
from lab.analysis.diagnosis.context import Context, guarded, pattern_findings
from lab.analysis.diagnosis.evidence import Evidence, Fault, NodeEvidence, NodeProbes, evidence_from_launch
from lab.analysis.diagnosis.findings import Finding, findings_json, format_findings
from lab.analysis.diagnosis.logs import errors_not_printed, failure_report_ranks, read_lines, read_tracebacks

__all__ = ["Evidence", "Fault", "Finding", "NodeEvidence", "NodeProbes", "diagnose", "evidence_from_launch",
           "failure_report_ranks", "findings_json", "format_findings", "read_lines", "CAUSES", "PRIORITY"]

# Causes, most specific / most likely root first.
PRIORITY = [
    "lab-fault", "out-of-memory", "killed-by-the-job", "master-addr-loopback", "master-addr-unresolvable", "wrong-service-on-port",
    "master-port-in-use", "port-in-use", "socket-ifname-missing", "nccl-without-gpu", "duplicate-gpu", "shared-memory-exhausted",
    "rendezvous-path-not-shared", "executable-missing", "socket-path-too-long", "env-set-by-the-job", "env-differs-between-nodes", "env-not-set", "working-directory-changed", "rename-race", "file-differs-between-nodes", "cache-built-on-one-node", "stale-file-on-node", "file-size-limit", "locale-missing", "settings-differ-between-nodes", "file-on-one-node-read",
    "file-on-some-nodes-only", "env-string-compared", "async-result-read-early", "share-ignores-rank", "exit-status-returned",
    "iterable-not-split-by-worker", "sampler-padding", "modules-in-plain-list", "data-not-sharded", "sum-over-local-count", "made-on-some-ranks", "option-left-a-string", "sum-not-mean", "counted-by-every-rank", "mean-of-an-empty-share", "nothing-in-this-share", "index-made-float", "shares-rounded-apart", "rank-state-in-a-fingerprint",
    "sampler-epoch-not-set", "bool-option", "eval-mode-missing", "optimizer-before-model-change", "gradients-not-zeroed",
    "state-dict-not-strict", "counts-in-low-precision", "sampler-seed-per-rank", "variance-by-cancellation", "weights-in-low-precision", "gathered-without-gradient", "read-before-written", "file-removed-by-another-rank", "file-written-by-every-rank", "created-by-every-rank", "service-at-localhost", "length-from-data", "link-target-relative", "share-rounded-up", "read-before-flushed", "loop-over-endless-stream", "shared-memory-of-another-node", "file-missing-everywhere", "another-interpreter", "package-missing-on-nodes", "package-version-differs",
    "import-error", "script-not-found", "bad-arguments", "option-spelled-otherwise",
    "process-group-not-initialized", "debugger-in-job", "spawn-without-main-guard", "json-int-keys", "launcher-refused", "output-encoding", "command-timeout", "watchdog-fired", "database-locked", "module-shadowed", "prompt-without-terminal", "warning-raised-as-error",
    "fatal-signal", "killed-by-signal", "error-swallowed-exit-0", "duplicate-rank", "node-rank-zero-not-master", "launch-options-differ", "nodes-never-come", "ranks-wait-for-each-other", "group-made-again", "separate-jobs", "exit-waits-for-thread", "lock-taken-twice", "lock-copied-by-fork", "collective-under-lock", "event-loop-blocked", "forked-after-process-group", "rpc-handler-blocked", "child-never-ends", "dataloader-worker-stuck", "waits-on-a-file", "late-rank",
    "store-of-one-process", "checkpoint-loaded-into-empty", "buffer-reused-before-sent", "child-signal-ignored", "scheduler-per-micro-batch", "pipeline-last-batch-smaller", "store-value-compared-with-str", "store-key-never-set", "store-counter-reused", "world-size-mismatch", "weights-only-forced", "resumed-on-some-ranks", "collectives-in-unordered-loop", "collectives-from-threads", "collective-inside-join", "communication-set-up-on-some-ranks", "collective-in-cached-function", "collective-under-own-condition", "request-polled-not-waited", "sharded-without-shape", "sharded-unit-skipped", "parameter-replaced-after-ddp", "layers-in-unordered-loop", "characters-counted-for-bytes", "default-dtype-per-rank", "collective-into-read-only", "size-from-rank-data", "unfrozen-after-ddp", "global-count-skips-own-indices", "learning-rate-scaled-by-world", "copied-before-ddp", "buffer-resized", "handle-shared-with-workers", "iterator-used-twice", "changed-in-place-on-some-ranks", "state-dict-kept-without-copy", "tensor-attribute-not-saved", "log-of-probability", "split-differs-per-rank", "persistent-workers-keep-a-copy", "drop-last-left-no-batch", "identity-of-a-received-copy", "step-skipped-on-some-ranks", "collective-behind-a-rank-test", "autograd-collective-used-on-some-ranks", "first-number-of-a-rank-name", "backward-skipped-on-own-test", "sends-left-unreceived", "received-into-one-buffer", "recv-from-any-source", "reduce-read-off-root", "collective-while-handling-error", "p2p-deadlock", "rank-zero-as-false", "p2p-mismatch", "root-mismatch", "group-mismatch",
    "decision-result-discarded", "model-changed-per-rank", "wrapped-when-first-needed", "ddp-parameter-mismatch", "static-graph-changed", "ddp-unused-parameters", "meta-tensors", "shape-mismatch", "collective-output-size", "reduce-op-dtype", "reduce-op-not-in-backend", "tensor-not-contiguous", "group-non-member",
    "batch-of-one", "statistic-of-one-sample", "group-wait-cycle", "collective-on-the-world", "collective-mismatch", "timeout-too-short",
    "gloo-on-loopback", "ddp-device-ids-on-cpu", "backend-unavailable", "ddp-double-backward", "parameter-changed-in-place", "grad-of-non-leaf", "grad-of-unused-parameter", "cast-into-integer-tensor", "authkey-differs", "node-resource-from-global-value", "global-index-on-shard", "view-of-a-split", "nested-dataclass-from-dict", "threads-divided-again", "empty-share-of-the-world", "sized-by-own-longest", "share-smaller-than-needed", "share-not-representative", "parts-joined-as-whole", "layouts-disagree", "layers-dealt-round-robin", "nothing-to-join", "share-over-global-total", "slice-to-minus-zero", "rate-over-a-share", "module-name-rebound", "split-size-is-the-world", "optimizer-state-not-made", "decided-on-the-root-from-its-own", "padded-from-the-front-of-an-order", "split-sizes-of-floats", "zero-at-this-world-size", "joined-along-the-wrong-dim", "group-ranks-repeated", "bucketized-to-the-rank-before", "owner-product-wrapped", "owner-index-reaches-world", "index-from-other-ranks", "key-from-other-ranks", "pairs-of-an-absent-rank", "shares-short-of-the-whole", "share-not-a-multiple", "sum-of-nothing", "squeezed-to-a-scalar", "whole-beside-a-part", "bool-summed-as-count", "statistic-of-a-small-share", "columns-sharded-differently", "labels-offset-past-the-logits", "grad-mode-left-off", "padding-index-of-the-whole", "gathered-vector-read-as-a-number", "entry-made-by-its-owner-only", "sentinel-wins-the-merge", "saved-view-of-the-whole", "node-budget-over-the-world", "length-of-the-whole", "replicated-counted-per-rank", "renormalized-by-forward", "batches-across-a-strided-shard", "assembled-by-a-sum", "joined-into-the-features", "distributions-summed", "empty-at-this-world-size", "gathered-into-a-stacked-output", "scattered-uneven-blocks", "gathered-tensors-compared", "nothing-in-the-buffer", "tag-past-an-int", "fixed-slot-too-small", "lock-held-by-a-node-mate", "ragged-parts-stacked", "scalar-stacked-with-a-vector", "scaler-step-without-gradients", "state-dropped-by-getstate", "count-returned-as-float", "joined-not-added", "sparse-reduction-refused", "json-of-non-string-keys", "rank-packed-past-a-narrow-type", "sorted-ties-reach-unorderable", "records-run-together", "received-kept-as-bytes", "shares-padded-with-empty-items", "integer-sum-wrapped", "settings-per-host", "method-not-called",
    "collective-given-a-number", "tensor-from-strings", "int64-overflow", "ddp-wrapper-passed-on", "ddp-attribute", "autograd-gradient-count", "autograd-gradient-shape", "tensor-kind-unsupported", "collective-in-transform", "not-traceable-by-compile", "daemon-with-children", "backward-twice", "changed-in-place-for-backward", "scheduler-stepped-past-total", "unscaled-twice", "half-weights-with-scaler", "loader-timeout-without-workers", "stream-replaced-incompletely", "needs-a-terminal", "recomputation-took-another-path", "sampler-with-shuffle", "sampler-rank-outside-replicas", "sync-batchnorm-on-cpu", "plain-tensor-into-dtensor", "start-method-set-twice", "inference-tensor-updated", "reentrant-checkpoint-ddp", "rank-not-in-group", "allocation-too-large", "input-over-size-limit", "text-cut-at-bytes", "partial-recv", "split-drops-remainder", "state-consolidated-elsewhere", "restored-another-ranks-state", "half-sum-overflowed", "ratio-of-a-share", "split-mid-record", "numpy-value-in-json", "ddp-without-trainable-parameters", "ddp-state-uncopyable", "collective-return-used", "collective-output-immutable", "received-state-built-otherwise", "comm-hook-state-per-bucket", "comm-hook-registered-twice", "sized-for-another-world", "padding-for-the-world-kept", "per-rank-list-too-short", "fmod-keeps-the-sign", "no-gpu-on-node", "builtin-replaced-narrower", "rank-zero-result-in-collective", "inputs-sized-per-rank", "sized-by-world-not-group", "cached-before-init", "checkpoint-weights-only", "checkpoint-read-while-written", "state-dict-mismatch", "checkpoint-keys-differ", "optimizer-state-mismatch", "collective-list-length", "dataloader-worker-died", "initialized-twice", "file-descriptors-exhausted", "compiler-missing", "read-only-filesystem", "cross-device-rename",
    "object-not-picklable", "device-mismatch", "dtype-mismatch", "sample-is-none", "worker-init-failed", "dataset-length-mismatch", "tensor-sender-gone", "disk-full", "thread-died", "collective-result-discarded", "output-list-aliased", "gradients-not-synchronised", "gradients-never-averaged", "buffers-not-broadcast", "learning-rate-differs",
    "state-changed-on-some-ranks", "seeded-on-some-ranks", "loss-divided-by-world-size", "hash-differs-per-process", "initial-weights-differ", "rank-made-value-out-of-range", "several-rank-path-only", "rank-crashed", "rank-exited", "uneven-collectives",
    "process-killed", "master-unreachable", "ranks-missing", "peer-lost", "collective-timeout", "timed-out", "stopped",
    "nonzero-exit",
]
# What each cause means, in a sentence or two: the reference page of every cause (docs/reference/causes.md) is
# generated from this and from the samples the rules are tested on; tests/unit/test_docs.py fails for a cause a rule
# can return that has no entry here.
CAUSES = {
    "lab-fault": "A node was killed, stopped, paused or cut off by `lab fault` or by an exercise's fault step. It "
                 "comes first only when it explains the failure.",
    "out-of-memory": "The kernel's OOM killer ended a process that went over its node's memory limit "
                     "(`lab up --memory`).",
    "master-addr-loopback": "A job across nodes meets at `localhost` or `127.x` (`MASTER_ADDR`, a `tcp://` init "
                            "method, `--master-addr`): every node dials itself, and the ranks never meet.",
    "master-addr-unresolvable": "`MASTER_ADDR` names a host the nodes cannot resolve.",
    "wrong-service-on-port": "Something other than a torch store answers at the rendezvous port (for example sshd "
                             "on 22: \"invalid value returned from server\").",
    "master-port-in-use": "The store could not listen on `MASTER_PORT` on the first node: something else holds it.",
    "port-in-use": "A port the job's own code binds (a metrics or debug server, a socket of its own) is taken on the "
                   "node, most often by the job's other processes there, which run the same line.",
    "checkpoint-read-while-written": "`torch.load` read a file that ends early: a checkpoint another rank was still "
                                     "writing (a reader that polls for the file sees it from its first byte), or a "
                                     "write cut short.",
    "thread-died": "A thread of a rank died of an exception while the rank lived on: it then waits for the thread's "
                   "work (a queue nobody drains, a join) and the other ranks time out waiting for it.",
    "working-directory-changed": "A rank changed its working directory (os.chdir, a framework's run folder) and then "
                                 "opened a path relative to where the job started.",
    "rename-race": "Every rank writes and renames the same temporary file on a folder the ranks share: the first "
                   "rename moves it away, and the others find nothing to rename.",
    "cross-device-rename": "`os.rename`/`os.replace` between two filesystems (a node's own `/tmp` and a shared "
                           "folder): the kernel refuses it (EXDEV).",
    "collective-output-size": "A collective's output is not sized for the world: reduce_scatter's holds one shard "
                              "(input / world size), all_gather_into_tensor's every rank's input (input x world size).",
    "tensor-not-contiguous": "A collective was given a tensor that is not contiguous (a transposed or strided view).",
    "tensor-from-strings": "torch.tensor() given strings (ids, names) to send them between ranks: tensors hold "
                           "numbers only.",
    "int64-overflow": "A Python integer of 2**63 or more (64 bits of a hash, an unsigned seed) put into an int64 "
                      "tensor to send it between ranks.",
    "group-non-member": "A rank ran a collective on a group it is not in: torch skips the call with a warning, so the "
                        "rank goes on without the data; or built DDP on such a group, which it cannot; or used the "
                        "-1 that get_rank(group) and get_world_size(group) return outside the group.",
    "batch-of-one": "A batch of one sample reached BatchNorm in training: the leftover last batch of an epoch.",
    "reduce-op-not-in-backend": "The process group's backend has no such reduction (gloo has no PREMUL_SUM, which FSDP2 uses once a custom "
                                "gradient divide factor is set, and some backends no AVG): the collective fails on every rank.",
    "reduce-op-dtype": "A reduce op was given a dtype it cannot reduce (the bitwise BOR, BAND, BXOR on floats).",
    "socket-ifname-missing": "`GLOO_SOCKET_IFNAME` or `NCCL_SOCKET_IFNAME` names a network interface the node "
                             "lacks.",
    "nccl-without-gpu": "The nccl backend or CUDA was asked for on a node without a GPU torch can use.",
    "duplicate-gpu": "Two ranks landed on one GPU (more nccl processes on a node than it has GPUs).",
    "shared-memory-exhausted": "/dev/shm ran out: tensors handed between processes (DataLoader workers, "
                               "torch.multiprocessing) did not fit.",
    "package-missing-on-nodes": "A module imports on some nodes and not on others: the nodes' Python environments "
                                "differ (`lab up --pip`, `lab doctor`).",
    "package-version-differs": "A package differs between the nodes: a name is missing from it on some nodes only "
                               "(`cannot import name`, or a module attribute), or the job imported it in another "
                               "version or from another folder on the nodes that failed (`lab doctor --package`).",
    "import-error": "The script fails at start on every node: a module it imports is not installed, or "
                    "`python -m` cannot find the module.",
    "script-not-found": "The script's file is not on the node at the path the command names.",
    "bad-arguments": "The script's own argument parser rejected its command line.",
    "process-group-not-initialized": "A `torch.distributed` call ran before `init_process_group` (or after "
                                     "`destroy_process_group`).",
    "node-rank-zero-not-master": "torchrun's static rendezvous: the node given --node-rank 0 hosts the store, and "
                                 "every node dials --master-addr; a node rank 0 on another node than that address "
                                 "(a host file in another order) leaves nobody listening there.",
    "collectives-in-unordered-loop": "A collective runs in a loop over a set (ordered by string hashes salted per "
                                     "process) or a directory listing (each filesystem's order): each rank runs the "
                                     "loop's collectives in its own order, and they pair other tensors.",
    "communication-set-up-on-some-ranks": "What sets up how ranks communicate (a DDP comm hook, DDP, a process group) "
                                          "runs under a test of the rank: the ranks then send different things.",
    "integer-sum-wrapped": "Counts summed over the ranks in a 32-bit (or narrower) signed integer tensor passed "
                           "what the type holds and wrapped around to a negative number, silently; what "
                           "used the total (a step count, a size) refused it.",
    "input-over-size-limit": "An operation with a size limit (torch.quantile: 2**24 elements) was given more: "
                             "typically a tensor gathered from every rank, which grows with the world size.",
    "characters-counted-for-bytes": "Byte buffers of different sizes in a collective whose length was sent as "
                                    "len(text), a count of characters, while the buffer holds text.encode().",
    "text-cut-at-bytes": "UTF-8 text that ends inside a multi-byte character: it was cut at a byte count (a "
                         "fixed-width byte buffer that carried strings in a tensor collective, a slice of "
                         "encoded text), so any character over one byte can fall across the cut.",
    "partial-recv": "A message read with one socket recv(n): recv returns the bytes that have arrived so far, up "
                    "to n, so a message longer than a few packets arrives in part and does not parse.",
    "split-drops-remainder": "Lengths for random_split or torch.split made by dividing by the world size: the "
                             "remainder of the division is in no share, so they add up to less than the data.",
    "state-consolidated-elsewhere": "ZeroRedundancyOptimizer.state_dict() called on a rank the sharded state was "
                                    "not consolidated to (consolidate_state_dict(to=...)): only that rank holds "
                                    "the whole optimizer state.",
    "restored-another-ranks-state": "A rank put back state from a file another rank alone saved (rank 0's "
                                    "checkpoint): it got that rank's own data position, RNG or shard.",
    "half-sum-overflowed": "float16 values summed over the ranks (a compression hook that divides after the "
                           "all_reduce) passed 65504 and became inf: what used them was not finite.",
    "option-spelled-otherwise": "The command line passes an option under another spelling than the script's "
                                "parser defines (--node-rank for --node_rank), and parse_known_args() set it "
                                "aside without an error: the option kept its default.",
    "ratio-of-a-share": "A division by a count of the rank's own share of the data, which that share can "
                        "lack (a class absent from it): the ratio must be taken of counts reduced over the "
                        "ranks.",
    "ranks-wait-for-each-other": "A rank gave up waiting for something a peer provides only after "
                                 "init_process_group (a service it starts), while that peer waited in "
                                 "init_process_group for it: a start-up order in which each waits for the other.",
    "split-mid-record": "Each rank reads a shared file from a byte offset made from its rank (the size split "
                        "by the world size): an offset inside a record makes the first read a record's tail.",
    "numpy-value-in-json": "json.dump got a NumPy scalar (from a NumPy sum, cumsum or index): json writes only "
                           "Python numbers.",
    "cached-before-init": "The job's own world-size helper is cached and answers a constant before "
    "init_process_group: one early call fixes that answer for the whole run.",
    "sized-by-world-not-group": "A collective on a subgroup given a tensor or list sized by the whole world's "
    "ranks (dist.get_world_size() without the group), which the group does not have.",
    "inputs-sized-per-rank": "Each rank makes its inputs at a size of its own (a per-rank setting such as a "
    "resolution), but the model was built for one size: the ranks with another fail at their first forward.",
    "rank-zero-result-in-collective": "A collective given the result of a function decorated to run on rank 0 only "
    "(the job's rank_zero_only): on the other ranks it returned None.",
    "builtin-replaced-narrower": "A builtin the job replaced on some ranks (print quieted off rank 0) with a stand-in "
    "that takes fewer arguments: the quieted ranks fail at a call that passes one (flush=, end=).",
    "no-gpu-on-node": "A division by the number of GPUs (rank % torch.cuda.device_count()) on a node that has none: "
    "code written for GPU nodes picking a device from the rank.",
    "fmod-keeps-the-sign": "Owners or buckets computed with fmod, which keeps the sign of the dividend: a signed "
    "hash gives negative values, refused where they are used as counts, indices or ranks.",
    "per-rank-list-too-short": "A per-rank setting picked from a list written in the code (`STRIDES[rank]`) that "
    "has fewer entries than the launch has ranks: the ranks past its end fail with an IndexError.",
    "padding-for-the-world-kept": "Shards joined with the padding that made them equal across the ranks (a "
    "vocabulary rounded up to a multiple of the world size), loaded into a model of the real size.",
    "sized-for-another-world": "torch refused a number it measures against the world size (a group size, ranks "
    "per server) that the job took from a constant written for another cluster rather than from the launch.",
    "comm-hook-registered-twice": "A second communication hook registered on one DDP wrapper: DDP takes one hook "
    "per wrapper for its whole life.",
    "comm-hook-state-per-bucket": "A DDP communication hook that keeps state per bucket.index() (an error-feedback "
    "residual) from the first iteration: DDP rebuilds its buckets after it, so an index then holds other parameters "
    "and the kept state no longer fits.",
    "received-state-built-otherwise": "A model's or optimizer's state received from another rank (a state_dict "
    "through an object collective) loaded into this rank's own, built from other settings (a width or parameter "
    "groups sampled per rank): load_state_dict refuses it.",
    "collective-output-immutable": "A tuple given to a collective that writes what it receives into the list it is "
    "given (broadcast_object_list on the receiving ranks, all_gather_object, scatter_object_list): it cannot be "
    "written into, and only the ranks that receive fail.",
    "collective-return-used": "What a torch.distributed collective returns used as its result: the collectives write "
    "their result into the tensor or list they are given and return None (a Work handle with async_op=True), so "
    "`parts = dist.all_gather_object([None] * n, x)` leaves parts None.",
    "ddp-state-uncopyable": "DistributedDataParallel copies rank 0's parameters and buffers into every other rank's "
    "in place, when it is built and (buffers) before each forward; a registered tensor that cannot be written in "
    "place (an expanded view, a sparse tensor, one made under torch.inference_mode()) fails that copy on every rank. "
    "A job run alone never makes it.",
    "ddp-without-trainable-parameters": "DistributedDataParallel wrapped a module with no parameter that "
                                        "requires a gradient (a frozen or EMA target network), which it refuses.",
    "changed-in-place-for-backward": "Autograd kept a tensor for the backward pass (a layer's output) and "
                                     "something changed it in place afterwards (an inplace=True layer, x += y, a "
                                     "method ending in _): backward refuses the changed values.",
    "scheduler-stepped-past-total": "A OneCycleLR-style scheduler was stepped more times than the total it was "
                                    "built for (epochs x steps_per_epoch computed by hand, smaller than the loop).",
    "global-count-skips-own-indices": "a count of samples over all ranks given to a sampler that skips that many of each rank's own indices when it "
                                      "resumes",
    "unfrozen-after-ddp": "parameters frozen when DDP wrapped the model and unfrozen after: DDP never averages their gradients, so each "
                          "rank trains its own copy",
    "parameter-replaced-after-ddp": "A parameter of the model was replaced after DDP wrapped it (weights tied, a new "
                                    "nn.Parameter assigned): DDP reduces the Parameter it registered, which forward no "
                                    "longer uses.",
    "buffer-resized": "DDP broadcasts the buffers from rank 0 before each forward, and a buffer the code assigns anew (a cache grown to "
                      "each rank's input) has another size on some ranks: the broadcast pairs tensors of different sizes.",
    "copied-before-ddp": "A copy of the model (an EMA, deepcopy, AveragedModel) was taken before DDP's broadcast of "
                         "rank 0's weights, in a job whose ranks seed torch differently: the copies differ per rank.",
    "collectives-from-threads": "A rank made collectives on one process group from two threads (a metrics or "
                                "checkpoint thread beside the training loop): which comes first differs per rank.",
    "locale-missing": "locale.setlocale() asked for a locale the node does not have (LC_ALL or LANG forwarded from "
                      "a laptop by ssh, or named in the code).",
    "loop-over-endless-stream": "every rank still computing in one loop at the timeout, over an IterableDataset whose __iter__ never ends",
    "grad-of-unused-parameter": "A loop over the model's parameters read .grad of one the step's forward did not "
                                "use (an auxiliary head, a warm-up branch): zero_grad() leaves it None.",
    "cast-into-integer-tensor": "An in-place operation put a floating-point result into an integer tensor, such as "
                                "averaging every tensor of a state_dict() that holds BatchNorm's num_batches_tracked.",
    "node-resource-from-global-value": "An OSError on the other nodes' ranks only, at a call given a per-node "
                                       "resource computed from the global rank (CPU cores, a device) or from "
                                       "MASTER_ADDR (an address to listen on), which only fits node0.",
    "shared-memory-of-another-node": "A rank attached to a named shared-memory segment that a process on another "
                                     "node created: each machine has its own shared memory (/dev/shm).",
    "settings-per-host": "An error on some nodes only, in a job that picks settings by the host's name: the nodes "
                         "ran with different settings, and the ones that differ failed.",
    "global-index-on-shard": "An index out of bounds at a line that uses a value computed from the rank (a shard's "
                             "start, positions offset by the rank): the whole range met one rank's part of a tensor.",
    "view-of-a-split": "A view or reshape refused at a line whose tensor each rank got from a split by the world "
                       "size: at this world size a rank's part is no whole number of the groups the view makes.",
    "nested-dataclass-from-dict": "A dict where a nested dataclass was meant: a dataclass rebuilt from a dict "
                                  "(JSON, asdict, YAML) keeps a field that is itself a dataclass as the dict it got.",
    "empty-share-of-the-world": "An error about something empty or zero where a rank's share of a split by the "
                                "world size (a list strided by the ranks, a size divided by them) came out empty or 0.",
    "share-smaller-than-needed": "A size refused where the job works on a rank's share of the data (split by the "
                                 "world size): at this world size a share, or its last piece, is smaller than what "
                                 "the operation needs (a window, k, a padding, a sample's support).",
    "parts-joined-as-whole": "A failure on data joined end to end from every rank's gathered parts, each made "
                             "from its rank's own data: positions that start at 0 in every part, lists sorted part "
                             "by part, records merged by an id each rank numbered from 0.",
    "layouts-disagree": "An index refused where a sharded table's ids are routed to their owner one way (id % "
                        "world, round-robin) and looked up another (a contiguous block per rank).",
    "share-over-global-total": "A rank's own values divided by their sum over every rank (all_reduce of the sum): on "
                               "each rank they add up to that rank's part of the whole, not to 1, and a call that "
                               "wants a distribution (a sampler's probabilities) refuses them.",
    "slice-to-minus-zero": "A margin dropped with `x[lo:-hi]` where `hi` is 0 on the rank at the edge of the split: "
                           "`x[lo:-0]` is empty, not the rest, and that rank's part comes out empty.",
    "rate-over-a-share": "A rate or fraction refused as out of range on every rank, made by dividing by the size of the "
                         "rank's own share of the data: meant against the whole, it comes out world-size times larger.",
    "module-name-rebound": "A module's name (`dist` for torch.distributed) assigned a value at the script's top level: "
                           "code that reads the module through that name afterwards meets the value.",
    "split-size-is-the-world": "torch.split(x, world_size): an int is the size of each piece, not how many pieces, "
                               "so each rank takes a piece of world-size items instead of its share.",
    "optimizer-state-not-made": "An optimizer's per-parameter state read (exp_avg, momentum_buffer) on a rank whose "
                                "optimizer never stepped: torch makes it in the first step(), which ran under a "
                                "condition that differs per rank.",
    "default-dtype-per-rank": "torch.set_default_dtype() on some ranks only: tensors made without a dtype differ in "
                              "type between the ranks, and one collective moves other numbers of bytes.",
    "collective-into-read-only": "A collective that writes into a tensor over a read-only NumPy array (np.load with "
                                 "mmap_mode='r', then torch.from_numpy): gloo cannot write what it receives there.",
    "decided-on-the-root-from-its-own": "A value decided on the root rank from its own data and broadcast, then "
                                        "applied by every rank to its own data, which differs: it fits the root's "
                                        "only.",
    "padded-from-the-front-of-an-order": "A rank's share topped up with the first items of a sorted list: on a padded "
                                         "rank they come after its last items, out of the order a call needs.",
    "sized-by-own-longest": "Batches padded to the longest item over every rank (all_reduce MAX) and a mask or "
                            "positions sized from the rank's own longest: on a rank whose own is shorter they differ.",
    "split-sizes-of-floats": "Split sizes given to a collective (all_to_all_single) as the .tolist() of a float tensor "
                             "(torch.histc counts): Python floats, where the call takes ints.",
    "zero-at-this-world-size": "A division by zero whose divisor the job works out from the number of ranks and which "
                               "comes to 0 at this run's world size: the formula holds only for more ranks.",
    "joined-along-the-wrong-dim": "The ranks' gathered parts joined with torch.cat along one dimension where the batch "
                                  "runs along another (an LSTM's states): a size of world-size times one dimension "
                                  "and a world-size part of another.",
    "group-ranks-repeated": "new_group given a ranks list with repeats, built with one entry per item a rank owns.",
    "bucketized-to-the-rank-before": "Ids routed to their owner with torch.bucketize over the shards' start rows and "
                                     "right=False: a shard's first row goes to the rank before it, one past its rows.",
    "owner-product-wrapped": "K-bit keys mapped to ranks as (keys * world) >> K in int64: past 2**63 the product wraps "
                             "negative, and some owners come out below 0.",
    "owner-index-reaches-world": "Items given their rank as floor(coordinate / (extent / world)) with no clamp: an "
                                 "item at the upper edge gets rank world, which no rank is, and is lost.",
    "index-from-other-ranks": "Indices received from the other ranks (a gather's list) past the size this rank built "
                              "for its own range: another rank produces values this rank did not size for.",
    "key-from-other-ranks": "Keys received from the other ranks (a gather's list) looked up in a table this rank "
                            "filled from its own share: the keys of items other ranks held are not in it.",
    "shares-short-of-the-whole": "A whole divided by the world size with a remainder, and the shares joined then "
                                 "used as the whole: at this world size they hold less than it.",
    "share-not-a-multiple": "A rank's share of a whole (whole // world) cut into groups of a fixed size: at this "
                            "world size the share is not a multiple of the group, as the whole is on one rank.",
    "sum-of-nothing": "Python's sum() of a list filled item by item, empty on a rank whose share kept none: the int "
                      "0 where a tensor was expected, and that rank falls out of the collectives.",
    "squeezed-to-a-scalar": "A per-rank result squeezed with no dimension named: a rank whose share held one item "
                            "gets a 0-d part, which torch.cat refuses.",
    "whole-beside-a-part": "Every rank's gathered parts joined into one tensor and then met with this rank's own "
                           "part: sizes that differ by the world size.",
    "distributions-summed": "Each rank's distribution summed over the ranks with all_reduce and not divided by their "
                            "number: its rows sum to the world size, not 1.",
    "bool-summed-as-count": "A bool tensor summed over the ranks and compared with the world size: a SUM of bools "
                            "stays a bool, so the count never reaches the world.",
    "threads-divided-again": "OMP_NUM_THREADS divided by the node's processes, though torchrun already sets it per "
                             "process: the share rounds to 0 threads.",
    "statistic-of-a-small-share": "A statistic that needs several values (quantiles, a variance) taken on each "
                                  "rank's share before gathering: with more ranks a share has too few.",
    "columns-sharded-differently": "Parallel columns of the same records shared out two ways (strided and in "
                                   "blocks): on more than one rank their items no longer line up.",
    "labels-offset-past-the-logits": "Class labels offset by rank times a size that is not the rows each rank "
                                     "adds to the gathered logits (or offset at all against local logits).",
    "joined-into-the-features": "The ranks' gathered parts joined along a dimension other than the samples': rows "
                                "world times as wide.",
    "grad-mode-left-off": "Autograd turned off with a bare torch.set_grad_enabled(False) and not turned back on on "
                          "every path: later steps of that rank run without a graph.",
    "padding-index-of-the-whole": "nn.Embedding of a rank's rows of a split vocabulary given the whole vocabulary's "
                                  "padding id: it lies outside the shard.",
    "gathered-vector-read-as-a-number": "The ranks' gathered values joined into one tensor and read as a single "
                                        "number: one value per rank, a single number only on one rank.",
    "entry-made-by-its-owner-only": "A dict's entries set only on the rank that owns each and never sent: another "
                                    "rank looks up an entry it does not hold.",
    "sentinel-wins-the-merge": "A tensor started at +inf for 'not yet seen' merged with MAX (or -inf with MIN): "
                               "another rank's sentinel wins over a measured value.",
    "saved-view-of-the-whole": "torch.save of a rank's slice of a tensor: a view, and torch.save writes the whole "
                               "storage it shares into every rank's file.",
    "node-budget-over-the-world": "A per-node worker budget divided by the whole job's world size: 0 workers once "
                                  "there are more ranks than the budget.",
    "length-of-the-whole": "A sampler or dataset that yields this rank's share but whose __len__ counts every "
                           "rank's: a loop sized by len() runs out.",
    "replicated-counted-per-rank": "Parameter counts summed over the ranks, each rank counting what it holds: "
                                   "parameters every rank holds whole are counted once per rank.",
    "renormalized-by-forward": "An nn.Embedding with max_norm renormalizes in place the rows each forward looks "
                               "up: ranks looking up their own data drift apart.",
    "batches-across-a-strided-shard": "Default collate refusing items of different sizes after a per-item strided "
                                      "shard: items that shared a batch on one process are dealt to different ranks.",
    "assembled-by-a-sum": "Parts assembled by writing each into zeros and summing with all_reduce: a sum is no "
                          "copy (-0.0 + 0.0 is +0.0), so byte checksums differ.",
    "pairs-of-an-absent-rank": "Per-peer terms that cancel in an all_reduce (secure aggregation's pairwise masks), "
                               "added under a condition of each rank's own: an absent rank leaves its partners' "
                               "terms in the sum.",
    "empty-at-this-world-size": "A slice whose bounds, worked out at the run's world size from the number of ranks' "
                                "parts, leave nothing (a trimmed mean that trims every part): what is made of it fails "
                                "the job's own check.",
    "gathered-into-a-stacked-output": "all_gather_into_tensor given an output of shape (world, *shape): gloo cuts its "
                                      "output along dim 0 into pieces of the input's shape.",
    "scattered-uneven-blocks": "A scatter list of blocks of different sizes (tensor_split of a length the world size "
                               "does not divide) against one receive size.",
    "gathered-tensors-compared": "Python's max()/min()/sorted() over the ranks' gathered tensors: a comparison of two "
                                 "tensors of several values has no truth value.",
    "nothing-in-the-buffer": "torch.frombuffer of an empty buffer on a rank whose share had nothing to send.",
    "tag-past-an-int": "A point-to-point tag packed with a large shift ((src << 30) | ...): past 2**31 it no longer fits "
                       "the C int torch's send and recv take, and only the higher ranks fail.",
    "fixed-slot-too-small": "The job's own check that a rank's payload fits a slot of a fixed size in an exchange "
                            "(world * max_size bytes): the payload grew with the data, the slot did not.",
    "lock-held-by-a-node-mate": "A non-blocking file lock refused where several ranks share a node: the lock file is "
                                "one per node's disk, and another rank of the node holds it.",
    "nothing-to-join": "torch.cat of a list the job fills by appending results as they come: a rank whose share of "
                       "the data gave none has an empty list to join.",
    "ragged-parts-stacked": "torch.stack of the parts every rank gave a gather, where each rank's part holds its own "
                            "number of items: they are to be joined end to end (torch.cat) or padded.",
    "share-not-representative": "A fit or a statistic that failed on a rank's own contiguous block of the data "
                                "(one class, a column that does not vary, types inferred per block): ordered data "
                                "puts only part of the whole in each block.",
    "rank-zero-as-false": "An exchange with rank 0 that its partner skipped: the partner tests a neighbour's rank "
                          "for truth (`if left:`), and rank 0 is false in Python.",
    "layers-dealt-round-robin": "A layer given an input of another width in a job whose pipeline stages take "
                                "every world-th layer (layers[rank::world]) instead of a contiguous block.",
    "authkey-differs": "A multiprocessing Manager or Listener refused a client: processes started on their own (each "
                       "node's launcher) hold different random authkeys unless one is given.",
    "rpc-handler-blocked": "RPCs ran past their timeout because the function they call blocks until more calls "
                           "arrive, while the callee runs each RPC on a thread of a fixed pool (num_worker_threads).",
    "size-from-rank-data": "DDP's parameter mismatch where the model's constructor is given a size that follows from "
                           "each rank's own data (a vocabulary built from its shard): the ranks built layers of "
                           "different sizes.",
    "length-from-data": "A size error on some ranks only, at a tensor whose length comes from the values in the data "
                        "(bincount without minlength, unique, nonzero): a rank whose data lacks the largest value "
                        "gets a shorter one.",
    "file-removed-by-another-rank": "A rank could not open a file another rank of its node (or of a shared folder) "
    "had removed: more than one rank cleans up the same folder, each keeping only what it wrote.",
    "read-before-written": "A rank opened a file that another rank wrote a moment later: it waited for something "
                           "that comes true earlier (another file's existence, a fixed sleep), not for the file to be "
                           "complete.",
    "read-before-flushed": "a file read at 0 bytes that the job keeps open for writing and never flushes or closes: the writes sat in the "
                           "writer's buffer",
    "share-rounded-up": "each rank's share of the data rounded up (ceil of n / world): the shares add up to more than the data, and the "
                        "last rank's window runs past the end",
    "link-target-relative": "a symbolic link made with a target relative to the working directory: a link's relative target is read from the "
                            "link's own folder, so it points at nothing",
    "file-written-by-every-rank": "Several ranks open one file for writing where they share it (the shared folder, "
                                  "or one node's disk): each open empties what the others wrote, and a reader finds "
                                  "it cut short, mixed or empty.",
    "store-value-compared-with-str": "A c10d store's get() returns bytes; compared with a str it never matches, so a "
                                     "wait for a value never ends.",
    "iterator-used-twice": "An iterator (filter, map, a generator, model.parameters()) was used twice: the second use "
                           "got nothing (an optimizer given an empty parameter list).",
    "state-dict-kept-without-copy": "`best = model.state_dict()` keeps references to the live tensors: loading it "
                                    "back restores the last weights, not the ones kept.",
    "log-of-probability": "The log of a probability (log(sigmoid(x)), log(1 - p)) underflows to -inf in float32 and "
                          "turns the loss into nan, where a log-space form is exact.",
    "split-differs-per-rank": "random_split without a generator, in a job whose ranks seed torch differently: each "
                              "rank splits the data its own way.",
    "persistent-workers-keep-a-copy": "A dataset changed per epoch behind a DataLoader with persistent_workers=True: "
                                      "the workers keep the copy they got at the first epoch.",
    "drop-last-left-no-batch": "drop_last=True where a rank's share of the data is smaller than a batch: no batch at "
                               "all, and a division by the count fails.",
    "recv-from-any-source": "Several recv() without src: messages arrive in the order the senders finish, so buffers "
                            "filled by position hold other ranks' data.",
    "reduce-read-off-root": "reduce() leaves the result on the root only; the other ranks used the tensor as if it "
                            "held the total.",
    "static-graph-changed": "DDP was built with static_graph=True and the parameters the forward uses changed "
                            "between iterations (a branch or warm-up that uses a module in some steps only).",
    "daemon-with-children": "A daemon process (multiprocessing.Process(daemon=True)) tried to start processes of its "
                            "own (a DataLoader with workers, a Pool) and died; whoever waited for it waits on.",
    "collective-inside-join": "A collective of the code's own inside `with Join([...])`: Join shadows only DDP's "
                              "collectives for ranks that ran out of data, so this one meets other calls.",
    "waits-on-a-file": "A rank was still in a loop that waits on a file (`while lock.exists():`) when the run "
                       "ended: a lock or marker that never changes on that node.",
    "cache-built-on-one-node": "A file on each node's own disk (a cache) that some nodes had from before the run and "
                               "one node built during it, while the others waited for it.",
    "duplicate-rank": "Every process reached the rendezvous, yet a rank inside the world never came: two processes "
                      "claim one rank (LOCAL_RANK used as RANK, one node rank given twice, spawned workers numbered "
                      "from 0 on every node).",
    "late-rank": "A rank gave up waiting (at the rendezvous or in a collective) while another was alive but busy "
                 "elsewhere, or got there after the first one's timeout had passed.",
    "world-size-mismatch": "The job waits for more ranks than were launched (the `world_size` it passes, or the "
                           "store's count, is larger than the processes the nodes started).",
    "wrapped-when-first-needed": "Modules wrapped in DDP inside a loop, each the first time a rank needs it: "
                                 "wrapping is a collective, and ranks that need the modules in another order wrap "
                                 "different ones at the same moment.",
    "ddp-parameter-mismatch": "The ranks built different models: DDP found a parameter whose shape differs "
                              "between ranks.",
    "ddp-unused-parameters": "DDP got no gradient for some parameters in an iteration (parameters the forward pass "
                             "did not use).",
    "shape-mismatch": "Ranks passed tensors of different sizes to one collective.",
    "collective-under-lock": "A rank waits in a collective inside a `with` block of a lock (a file lock, a threading "
                             "lock) while other ranks wait to take that lock: neither can go on.",
    "event-loop-blocked": "An asyncio event loop's thread was found running the job's own code inside a coroutine: a "
                          "blocking call (time.sleep, a lock, a socket) holds the loop, and no other task runs.",
    "forked-after-process-group": "A rank forked a child (os.fork, a fork-started Process) after init_process_group "
                                  "and waits for it; the child copied the group but not gloo's or NCCL's threads, "
                                  "and hangs, often as it exits.",
    "error-swallowed-exit-0": "A rank's collective failed (a peer lost, a timeout) and the job caught the error and "
                              "ended with status 0: torchrun counts the worker as finished, so it neither restarts "
                              "the group nor stops the others; it waits for them in its exit barrier.",
    "collective-while-handling-error": "A rank called a collective from an except or finally block (the hooks keep "
                                       "the exception it handled) while the other ranks went on: the exception is "
                                       "the cause, the collective in its handler why the run hangs.",
    "collective-on-the-world": "A collective without group= in code that works on its own process group (it passes "
    "the group to its other calls): on the whole world it pairs with other groups' calls, and the ranks fall out of "
    "step.",
    "group-wait-cycle": "A hang where each rank waits in one process group's collective for a rank that waits in "
    "another's: ranks that share several groups issued their collectives on them in different orders.",
    "collective-mismatch": "Ranks wait in different collectives, are out of step by some collectives, or call one "
                           "from different places: they do not run the same sequence of collectives.",
    "rank-crashed": "One rank raised an exception of its own; the other ranks' errors follow from it.",
    "uneven-collectives": "Some ranks finished while others still waited in a collective: the ranks ran different "
                          "numbers of collectives (uneven data, a skipped batch, an early return).",
    "process-killed": "A process was killed with SIGKILL and nothing else explains it (not the lab's OOM count, not "
                      "a lab fault).",
    "master-unreachable": "Nothing answered at `MASTER_ADDR:MASTER_PORT` (a wrong port, or rank 0 never started "
                          "its store).",
    "ranks-missing": "Ranks waited at the rendezvous for others that never arrived, and nothing more specific "
                     "says why.",
    "peer-lost": "A rank lost its connection to a peer in the middle of a collective, and nothing more specific "
                 "says why.",
    "collective-timeout": "A collective timed out (the process group's timeout), and nothing more specific says "
                          "why.",
    "timed-out": "The run did not finish before the lab's timeout (`--timeout`), and nothing more specific says "
                 "why.",
    "stopped": "The lab stopped the run early (a node failed while others waited, or Ctrl-C).",
    "nonzero-exit": "A node's command exited with a non-zero code and left no message a rule knows: the last "
                    "line it printed is quoted.",
    "wrong-results": "(`lab run`) Every process ended well, but the exercise's checks failed.",
    "fatal-signal": "A process was killed by a fatal signal from native code (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL): "
                    "named with the Python line that called into the native code (faulthandler's stack, which the "
                    "jobs' hooks turn on), and the other ranks' lost connections put below it.",
    "rank-not-in-group": "A collective on a subgroup was given a source or destination rank that is not a member: "
                         "`src=`/`dst=` are global ranks even with `group=` (`group_src=` takes the group's own).",
    "allocation-too-large": "A tensor far larger than any node holds was asked for (tens of GiB or more): its shape "
                            "is not the one meant, or the work must go in chunks.",
    "checkpoint-weights-only": "`torch.load` refused a checkpoint holding objects other than tensors and plain data: "
                               "`weights_only=True` is its default since torch 2.6.",
    "killed-by-signal": "A process was ended by a signal sent to it rather than by native code: an alarm of its own "
                        "(SIGALRM from signal.alarm), its output pipe closed (SIGPIPE), a CPU-time or file-size limit "
                        "(SIGXCPU, SIGXFSZ), a scheduler's warning (SIGUSR1): named with who sends such a signal.",
    "dataloader-worker-stuck": "A rank waits for its next batch while one of its DataLoader worker processes is stuck "
                               "in the dataset's code: the worker's own stack names the frame.",
    "store-key-never-set": "A rank waited on a c10d store for a key that no rank set; the keys that were set (and by "
                           "whom) are matched against it, and the nearest one named: a misspelt key, a key on "
                           "another store, or a setter that never got there.",
    "store-counter-reused": "A counter on the c10d store (`store.add`) that ranks wait on went past the number of "
                            "ranks: its key is reused from an earlier round, so the count they wait for never comes.",
    "p2p-deadlock": "Point-to-point calls that wait on each other in a cycle: every rank receives first (or sends "
                    "first), so none ever does the other half.",
    "p2p-mismatch": "A send and a receive that do not pair up: the peer sends to another rank, under another tag or "
                    "group, not at all (it is in a collective), or the rank named does not exist.",
    "root-mismatch": "A broadcast, reduce, gather or scatter whose root differs between the ranks: each waits for a "
                     "root the others do not use (a root computed per rank or per node).",
    "group-mismatch": "Subgroups that differ between the ranks: new_group called with other members or in another "
                      "order, a rank waiting in new_group that another never calls, or one collective run on groups "
                      "with other members.",
    "timeout-too-short": "Every rank entered the same collective alike and it still timed out, or a call gave up "
                         "after milliseconds: nobody was missing, the timeout was shorter than the transfer.",
    "initialized-twice": "init_process_group was called a second time in one process.",
    "file-descriptors-exhausted": "A process ran out of open file descriptors (its `ulimit -n`), often through tensors "
                                  "passed between DataLoader workers.",
    "compiler-missing": "Code is compiled while the job runs (a JIT extension, a fused op) and the node has no "
                        "compiler or build tool for it.",
    "read-only-filesystem": "The job writes into a read-only folder (the lab mounts the workspace read-only).",
    "object-not-picklable": "An object sent through a *_object collective cannot be pickled, or names a class the "
                            "receiving rank does not define (the ranks run different code).",
    "sharded-unit-skipped": "each module of a list sharded on its own (fully_shard per expert) and a forward that skips one on a condition of "
                            "each rank's own data: the skipped unit's collectives run on some ranks only",
    "sharded-without-shape": "DTensor.from_local with a Shard placement and no shape=: pieces of uneven size give a wrong global shape, and "
                             "gathering them hands all_gather tensors of different sizes",
    "request-polled-not-waited": "A rank polls a request's is_completed() in a loop (an irecv, an isend, an async collective) instead of calling "
                                 "wait(): with gloo a send's or recv's work is marked completed only inside wait(), so the loop never ends while "
                                 "its peers wait for it.",
    "collective-under-own-condition": "ranks stuck in different collectives because an if (or an if ...: break out of the loop) that does not test the "
                                      "rank went one way on one rank and the other way on another: it reads each rank's own values (loss, clock, data)",
    "collective-in-cached-function": "A function that runs a collective is cached (functools.lru_cache, cache, "
                                     "cached_property): a rank whose cache holds the answer skips the collective "
                                     "another rank runs.",
    "pipeline-last-batch-smaller": "a pipeline stage (torch.distributed.pipelining) fed a smaller last batch (no drop_last): its micro-batches do "
                                   "not fit the sizes the stages were built for",
    "scheduler-per-micro-batch": "the learning-rate scheduler steps on every micro-batch while the optimizer steps only every N (gradient "
                                 "accumulation): the schedule runs ahead of the updates",
    "child-signal-ignored": "SIGCHLD set to SIG_IGN in a process that waits for its children: the kernel reaps them at once and keeps no exit "
                            "status, so multiprocessing or subprocess finds none",
    "buffer-reused-before-sent": "A loop writes a tensor in place and posts it with isend (or irecv) on every pass, waiting only after the loop: "
                                 "later passes overwrite what earlier ones were still sending.",
    "checkpoint-loaded-into-empty": "torch.distributed.checkpoint's load given an empty dict: it loads in place into the keys the dict already holds, "
                                    "so nothing is loaded, and reading a key raises KeyError.",
    "store-of-one-process": "The process group was given a HashStore: it lives in one process's memory, so each "
                            "rank waits in its own store for the others until the timeout.",
    "tensor-sender-gone": "A tensor taken from a multiprocessing Queue could not be rebuilt: the process that sent it "
                          "(as a handle to its shared memory) had ended before it was taken.",
    "handle-shared-with-workers": "A Dataset opens a file (or an HDF5 or SQLite handle) once in `__init__` and reads "
                                  "it in `__getitem__` behind a DataLoader with worker processes: the forked "
                                  "workers share its offset, and their reads interleave.",
    "dataset-length-mismatch": "A Dataset's __len__ returns more than the list its __getitem__ indexes holds (a count from a manifest, records "
                               "filtered out as the list was filled): the sampler hands out indices past its end.",
    "worker-init-failed": "a DataLoader worker failed in its worker_init_fn, the hook that runs once as each worker starts, before any "
                          "sample is read (a seed out of range, a file or connection opened there)",
    "sample-is-none": "A DataLoader could not batch a sample that is None: the dataset's `__getitem__` returns None for some records "
                      "(ones it skips as damaged), and the default collate_fn batches every sample it is given.",
    "dtype-mismatch": "An operation got tensors of two dtypes: float64 data (NumPy's default) against float32 "
                      "weights, integer labels where floats are computed with, or one side cast to half precision.",
    "device-mismatch": "A collective got tensors on a device its backend cannot use (CUDA tensors with gloo, CPU "
                       "tensors with NCCL).",
    "disk-full": "The disk a node writes to is full (not /dev/shm, which is `shared-memory-exhausted`).",
    "rank-exited": "A rank ended itself with a non-zero status and no Python error (sys.exit, os._exit, a failing "
                   "command): its last output says why, and the other ranks' errors follow from it.",
    "rendezvous-path-not-shared": "A `file://` init method or a FileStore points at a folder on each node's own disk, "
                                  "so every node made its own rendezvous file and the ranks never met.",
    "executable-missing": "The command the job runs is not on the PATH of some or all nodes (`python` where the image "
                          "has only `python3`, a tool installed on one node).",
    "env-set-by-the-job": "The job sets an environment variable in one process to pass a value to the other ranks: "
    "a process's environment is its own, so the others read their default.",
    "env-differs-between-nodes": "An environment variable the job reads is set on some nodes and not on others, or "
                                 "holds another value there.",
    "env-string-compared": "A value read from the environment (always a string) is compared with a number, so the "
                           "branch meant for one rank runs on every rank or on none.",
    "exit-waits-for-thread": "A rank finished its code but cannot exit: the interpreter waits for a thread that is "
                             "not a daemon and that nothing stops.",
    "lock-copied-by-fork": "A rank's forked child processes (a multiprocessing Pool's workers) wait forever for a lock of the job's own "
                           "code: the fork copied the lock while another thread of the parent held it, and in the child nothing will release "
                           "it.",
    "lock-taken-twice": "A rank's thread waits for a threading.Lock it already holds (a method that takes the lock "
                        "calls another that takes it again).",
    "gradients-never-averaged": "Every rank stepped its optimizer with no DDP forward and fewer reductions than "
                                "steps: the model was never wrapped in DDP, its gradients never averaged.",
    "modules-in-plain-list": "A model keeps layers in a plain Python list or dict: their parameters are not "
                             "registered, so DDP, the optimizer and state_dict never see them.",
    "exit-status-returned": "`sys.exit(main())` with a main() that returns a value: ranks that finished their work "
                            "exit with that status.",
    "group-made-again": "A rank made the default process group again after destroy_process_group: the second rendezvous meets on the "
                        "store the first group used (its keys still there), and the ranks do not form the new group alike.",
    "nodes-never-come": "torchrun was told (--nnodes) to wait for more nodes than the job was launched on: its rendezvous waits for nodes "
                        "that never come, and no worker starts.",
    "launch-options-differ": "The nodes' torchrun were started with different options (a --rdzv-id made per node): "
                             "each waits in a rendezvous the others never join.",
    "separate-jobs": "Each node ran a job of its own (both have a rank 0 of the same world size): --standalone or a "
                     "localhost rendezvous on every node.",
    "killed-by-the-job": "A process of the job was killed with SIGKILL by another process of the same job, which "
                         "named its pid in its output just before (a clean-up of \"stale\" workers by name).",
    "sampler-rank-outside-replicas": "A DistributedSampler got a rank past its num_replicas: the two count different ranks (num_replicas a data-"
                                     "parallel group's size, rank the global rank), so the sampler refuses the ranks past the group's size.",
    "sampler-with-shuffle": "A DataLoader given both a sampler (DistributedSampler) and shuffle=True.",
    "inference-tensor-updated": "A tensor made under torch.inference_mode() was changed in place after inference mode ended (a collective writing "
                                "its result into it, an in-place op): inference tensors may not be.",
    "start-method-set-twice": "multiprocessing's start method was set a second time in one process (a function that sets it run twice, or after "
                              "a library set it): set_start_method raises.",
    "plain-tensor-into-dtensor": "A plain tensor met a DTensor (a parameter sharded by fully_shard or tensor parallelism): most often a full state "
                                 "dict loaded with load_state_dict into a sharded model.",
    "sync-batchnorm-on-cpu": "SyncBatchNorm layers in a model on the CPU: DDP supports them only on CUDA.",
    "reentrant-checkpoint-ddp": "DDP marked a parameter ready twice in one backward: reentrant activation "
                                "checkpointing (or a parameter used twice, or used outside forward through the "
                                "wrapper) with find_unused_parameters=True, or a second backward through one forward.",
    "iterable-not-split-by-worker": "An IterableDataset that does not split its records among the DataLoader's "
                                    "workers, with num_workers > 0: every record comes once per worker.",
    "sampler-padding": "DistributedSampler padded the dataset to a multiple of the world size, and an evaluation "
                       "counted the repeats.",
    "stale-file-on-node": "A file a rank loaded was written before the run and by nobody during it, and it is cut "
                          "short: a copy left on that node's own disk (a cache from an earlier run).",
    "settings-differ-between-nodes": "One node's processes ran under other settings than the others': Python's -O "
                                     "(asserts skipped), a resource limit (ulimit -v, -n, -f, -u), UTF-8 mode or the "
                                     "user's site-packages: the same code then runs or fails otherwise there.",
    "file-on-one-node-read": "The job read a file from one node's own disk that the other nodes did not read (it is "
                             "not there): a config or cache left on that node changes what its ranks do.",
    "file-size-limit": "A write failed on a node whose processes may not write files past a size (ulimit -f).",
    "mean-of-an-empty-share": "A value held NaN where the job failed, made from a division by a count each rank "
                              "kept of its own share only: a category the share holds none of is 0/0.",
    "nothing-in-this-share": "Some ranks only failed at a step whose tensor or array held no items, or only NaN, in "
                             "their frame: the data was split so that their share has nothing for it.",
    "index-made-float": "A tensor of ids made with torch.tensor from per-rank lists without a dtype: a rank's empty "
                        "list becomes a float32 tensor, and joined with the others every id is a float, which cannot "
                        "index.",
    "shares-rounded-apart": "Each rank rounds its own share of a whole (round(BUDGET * share)): the rounded shares "
                            "need not add up to the whole, and what was sized for the whole meets fewer or more items.",
    "identity-of-a-received-copy": "An object that came through an object collective tested with `is` against "
                                   "the module's own sentinel: objects sent between ranks are pickled and arrive as "
                                   "new objects, so the test is never true where they are received.",
    "sends-left-unreceived": "Ranks left in send to a rank that had stopped receiving: its receiving loop ended on "
                             "its own condition (the work left to hand out) before the last messages came.",
    "scalar-stacked-with-a-vector": "torch.stack of values meant to be scalars (losses to reduce as one tensor), one of "
                                    "which is a vector: in a helper that returns early on one process, only a run of "
                                    "several ranks gets there.",
    "received-into-one-buffer": "A loop receives every message into one tensor made before it and keeps that tensor "
                                "itself: each later receive overwrites what was kept.",
    "scaler-step-without-gradients": "GradScaler.step on a rank where no parameter of the optimizer had a gradient "
                                     "('No inf checks were recorded'): the job drops the gradients of what a rank "
                                     "does not own, and that rank owns nothing.",
    "step-skipped-on-some-ranks": "GradScaler.step on an optimizer whose step makes collectives: the scaler skips the "
                                  "step where this rank's own gradients hold inf, so with gradients split over the "
                                  "ranks, one rank skips collectives the others make.",
    "state-dropped-by-getstate": "An attribute missing on objects that came through an object collective: their "
                                 "class's __getstate__ leaves it out of the pickled state.",
    "count-returned-as-float": "A float where an integer is needed, from a helper that sums over the ranks in a float "
                               "tensor and returns .item(), while one process gets its integers back unchanged.",
    "joined-not-added": "Unpacking met world-size times the items it expects: the ranks' tuples or lists were joined "
                        "end to end by +, where their items were to be added.",
    "collective-behind-a-rank-test": "Under `if rank == 0:` a call of the job's own code that makes a collective out "
                                     "of sight (len() of a dataset whose __len__ all-reduces, a helper): only that "
                                     "rank makes it.",
    "changed-in-place-on-some-ranks": "A function of the job, called only under a test of the rank, changes in place "
                                      "a list or dict it is given, which every rank uses after it.",
    "autograd-collective-used-on-some-ranks": "A value made with an autograd collective (torch.distributed.nn) joins "
                                              "the loss only under a test of each rank's data: only some ranks run its "
                                              "backward collective.",
    "rank-state-in-a-fingerprint": "The ranks' fingerprints, compared by the job's own check, include the random "
                                   "number generator's state, which the job seeds with the rank.",
    "first-number-of-a-rank-name": "A number read as the first one in a name the job makes with the rank before it "
                                   "(worker{rank}-step{step}): each rank reads its rank where it meant the step.",
    "backward-skipped-on-own-test": "A `continue` before loss.backward() under a test of a rank's own values (a loss "
                                    "spike) in a DDP job: the rank that skips makes none of that step's gradient "
                                    "all_reduces.",
    "json-of-non-string-keys": "json.dumps of a dict keyed by tuples, on a path the job takes only with several ranks "
                               "(to send it): JSON keys must be strings.",
    "rank-packed-past-a-narrow-type": "Ids that carry the rank in their high bits stored in a narrow integer tensor: "
                                      "rank 0's fit, the others' do not.",
    "sorted-ties-reach-unorderable": "sorted() of tuples gathered from every rank without a key: a first field two "
                                     "ranks share makes Python compare fields that have no order.",
    "records-run-together": "Records joined with '\\n'.join by each rank and then end to end: a rank's last record "
                            "runs into the next rank's first.",
    "received-kept-as-bytes": "What arrives from the other ranks is bytes, what a rank kept for itself is str, and the "
                              "job joins or compares them.",
    "shares-padded-with-empty-items": "Shares padded to a multiple of the world size with an empty item: the rank "
                                      "that gets it meets an item of length 0.",
    "sparse-reduction-refused": "A sparse tensor given to all_reduce that gloo's sparse path cannot add up: a bool "
                                "one, or ones whose size each rank took from the largest index it touched.",
    "rank-made-value-out-of-range": "Some ranks only failed on a value the job makes from the rank (a count, a seed, "
                                    "a strength): at this world size the higher ranks' values are past what the step "
                                    "takes.",
    "several-rank-path-only": "A failure in, or on a value from, a helper that returns early on one process: only a "
                              "run of several ranks takes its other path, which gives another kind of value.",
    "counted-by-every-rank": "A check of the job's own compared two numbers exactly world-size times apart (the "
                             "values as its frame held them when it raised): a value every rank held whole was summed "
                             "over the ranks, or one rank's share was compared with the whole.",
    "sum-not-mean": "An all_reduce left at SUM where a mean was meant: the check saw world-size times the value.",
    "data-not-sharded": "A DataLoader with no sampler in a job of several ranks: every rank goes through the whole "
                        "dataset.",
    "sampler-epoch-not-set": "A DistributedSampler never told the epoch (no set_epoch): every epoch repeats the "
                             "first one's order.",
    "command-timeout": "The job's command runs under coreutils' `timeout N`, whose limit ended it (status 124).",
    "watchdog-fired": "The job's own faulthandler watchdog (dump_traceback_later(T, exit=True)) fired: a step took "
                      "longer than its limit.",
    "database-locked": "Several processes write one SQLite database at once: it stays locked for the others.",
    "sum-over-local-count": "A total all-reduced over the ranks is divided by this rank's own count: world-size "
                            "times too large.",
    "child-never-ends": "A rank waits in Popen.wait for a child process that does not end (its output on a pipe "
                        "nobody reads).",
    "launcher-refused": "torchrun itself failed before it started a worker: one of its own arguments (--nproc-per-node "
                        "gpu on a CPU node, --nnodes, the endpoint) is wrong.",
    "weights-only-forced": "torch.load was called with weights_only=False and still loaded weights-only: the node's environment forces it "
                           "(TORCH_FORCE_WEIGHTS_ONLY_LOAD set), which overrides the argument.",
    "resumed-on-some-ranks": "A checkpoint was loaded by some ranks only, with nothing sent to the others: the ranks "
                             "resumed from different states.",
    "made-on-some-ranks": "An object made only on some ranks (`x = Thing() if rank == 0 else None`) is used on "
                          "every rank.",
    "option-left-a-string": "A command-line option declared without type= reaches the code as a string.",
    "output-encoding": "A rank printed text its output encoding cannot hold (ascii under PYTHONIOENCODING=ascii or a "
                       "C locale on its node).",
    "ddp-double-backward": "A backward that builds a graph of the gradients (create_graph=True) through a "
    "DistributedDataParallel model: DDP's reducer writes .grad in place, which such a gradient refuses.",
    "parameter-changed-in-place": "A parameter was changed in place while autograd records (outside "
                                  "torch.no_grad()).",
    "file-differs-between-nodes": "A file on each node's own disk that the job read has other content on one node "
                                  "(a cache or config left from before), and a rank there failed.",
    "method-not-called": "A method passed where its result was meant (`model.parameters` without the call).",
    "collective-given-a-number": "A collective was given a Python number or object, not a tensor.",
    "ddp-wrapper-passed-on": "The DistributedDataParallel wrapper given where the model inside is meant: copied "
                             "(an SWA or EMA copy), pickled or exported.",
    "ddp-attribute": "The code reaches an attribute of the model through the DistributedDataParallel wrapper.",
    "autograd-gradient-count": "A custom autograd Function's backward returns another number of gradients than "
                               "forward has inputs.",
    "autograd-gradient-shape": "A custom autograd Function's backward returns a gradient of another shape than its "
                               "input's; one dimension the world size times the input's means it returned the "
                               "gradient of everything the ranks gathered instead of this rank's part.",
    "tensor-kind-unsupported": "A sparse or quantized tensor went where only plain dense tensors go: a collective "
                               "(the backends send dense buffers) or code that flattens or views tensors; or a dtype "
                               "the backend has no kernel for (gloo: int16, the unsigned types above uint8).",
    "collective-in-transform": "A collective called inside a function torch.func.vmap (or another transform) runs: "
                               "the function sees batched tensors, and collectives have no batching rule.",
    "not-traceable-by-compile": "torch.compile (fullgraph=True) stopped at code dynamo cannot trace, such as an "
                                "in-place torch.distributed call; the functional collectives trace.",
    "backward-twice": "A second backward through a graph the first one freed.",
    "recomputation-took-another-path": "activation checkpointing reran a forward that took another path (a draw from Python's or NumPy's random, which "
                                       "checkpoint does not restore)",
    "needs-a-terminal": "a call that asks the process's terminal (os.get_terminal_size, os.getlogin) in a launched rank, whose output is "
                        "a pipe or a file",
    "stream-replaced-incompletely": "sys.stdout or sys.stderr replaced by an object of the job's own that lacks a method every stream has (flush, "
                                    "fileno, isatty)",
    "socket-path-too-long": "a Unix socket path under a long TMPDIR exceeds the 107 bytes the system allows: multiprocessing's sockets "
                            "(DataLoader workers, shared tensors) fail",
    "loader-timeout-without-workers": "a DataLoader given a timeout with no worker processes (num_workers computed to 0): a loader that reads in the "
                                      "rank refuses a timeout",
    "half-weights-with-scaler": "GradScaler used with a model whose weights were turned to float16 (model.half()): the scaler refuses float16 "
                                "gradients; mixed precision keeps float32 weights under autocast",
    "unscaled-twice": "GradScaler.unscale_ called twice for one optimizer in one step.",
    "gloo-on-loopback": "gloo connects to 127.0.0.1 across nodes: the ranks advertised their loopback address.",
    "spawn-without-main-guard": "Processes started from the script's top level without `if __name__ == "
                                "\"__main__\":`: every child runs that line again.",
    "json-int-keys": "A dict with number keys went through JSON, which makes every key a string.",
    "eval-mode-missing": "A model with Dropout or BatchNorm evaluated without .eval().",
    "optimizer-before-model-change": "The optimizer was built before a layer of the model was replaced: the new "
                                     "layer never trains.",
    "gradients-not-zeroed": "A training loop that never calls zero_grad(): gradients pile up.",
    "state-dict-not-strict": "load_state_dict(strict=False) skipped keys that did not match.",
    "counts-in-low-precision": "Counts all-reduced in bfloat16/float16, which rounds whole numbers past 256.",
    "gathered-without-gradient": "torch.distributed's all_gather returns tensors with no autograd history: a loss built on them (a contrastive "
                                 "loss over every rank's keys) sends no gradient back to the rank that made them.",
    "weights-in-low-precision": "A model's weights cast to bfloat16 or float16 and updated there by the optimizer, with no float32 copy: updates "
                                "smaller than a weight's rounding step are lost, and training stalls.",
    "variance-by-cancellation": "A standard deviation computed as sqrt(mean of squares - square of the mean) in float32: for values large against "
                                "their spread the two terms cancel, and the sqrt gives 0 or nan.",
    "sampler-seed-per-rank": "DistributedSampler seeded per rank: the ranks' shares overlap.",
    "debugger-in-job": "A breakpoint() or pdb.set_trace() left in the code: with no terminal the debugger quits.",
    "ddp-device-ids-on-cpu": "DistributedDataParallel given device_ids for a model on the CPU.",
    "bool-option": "A command-line option declared with type=bool: any value given turns it on.",
    "module-shadowed": "A file of the job has the name of a standard library module (tokenize.py, queue.py): a "
                       "library's import of that module loads the job's file instead.",
    "prompt-without-terminal": "The job asked for input (a password or key prompt, input()) and met end of input: "
                               "a job's processes have no terminal.",
    "warning-raised-as-error": "A warning stopped a rank: warnings are errors there (PYTHONWARNINGS=error, -W "
                               "error), maybe on one node only.",
    "share-ignores-rank": "Each rank's share of the data is sized by the world size but taken without the rank "
                          "(`ids[:n // world]`): every rank works on the same samples, the others are never seen.",
    "async-result-read-early": "A collective started with async_op=True (or an irecv) has its tensor read before the "
                               "work was waited for: the read sees the rank's own values, not the result.",
    "env-not-set": "An environment variable the job reads is set on no node (under `lab exec`, the variables torchrun "
                   "would set, such as RANK, are not there).",
    "file-on-some-nodes-only": "A file the job reads exists on some nodes only: each node has its own disk, and the "
                               "file was written or copied on one of them.",
    "file-missing-everywhere": "A file the job reads exists on no node: a wrong path, or a step that never ran; the "
                               "nearest existing name is given.",
    "another-interpreter": "A process of the job ran a Python without torch: not the nodes' interpreter (a subprocess "
                           "started as `python3` or `/usr/bin/python3`, a shebang).",
    "collective-list-length": "A collective's list of tensors (all_gather's outputs, scatter's inputs) has another "
                              "length than the group has ranks: sized with LOCAL_WORLD_SIZE or a count of its own.",
    "dataloader-worker-died": "A DataLoader worker process died (killed by the OOM killer, or a crash in the "
                              "dataset's native code) and its rank raised.",
    "backend-unavailable": "A node asked for a backend this torch was built without (mpi, ucc), often because the "
                           "backend is read from something that differs between the nodes.",
    "model-changed-per-rank": "Before DDP wrapped it, the model was changed under a condition that follows from the "
    "rank (its share of the batch, its data): frozen, extended or replaced on some ranks only.",
    "decision-result-discarded": "A decision (stop, skip) sent with a collective into a tensor made for the call: "
    "nothing keeps what was received, each rank decides on its own value, and the ranks take different paths until "
    "their collectives no longer match.",
    "collective-result-discarded": "A collective wrote its result into a tensor (or list) made for the call that "
                                   "nothing kept (`all_reduce(torch.stack(...))`, `.clone()`, `.to()`): the result was "
                                   "thrown away, and each rank went on with its own values.",
    "output-list-aliased": "A collective's output list holds one tensor several times (`[t] * world_size`): every "
                           "rank's piece lands in the same tensor, and every slot holds the last.",
    "meta-tensors": "A collective was given tensors on the meta device (a model built on meta and never "
                    "materialised): they hold no data, so nothing moves into them.",
    "gradients-not-synchronised": "Every DDP forward ran inside `no_sync()`, so DDP never all-reduced a gradient: each "
                                  "rank stepped on its own gradients and the replicas drifted apart.",
    "buffers-not-broadcast": "DDP was built with `broadcast_buffers=False` on a model with buffers (BatchNorm's "
                             "running statistics): each rank's buffers follow its own data, so evaluation differs "
                             "between replicas whose weights agree.",
    "learning-rate-differs": "The ranks took as many optimizer steps with different learning rates (a scheduler "
                             "stepped on some ranks only): DDP averages gradients, not updates, so replicas drift.",
    "layers-in-unordered-loop": "The model's layers are made in a loop over a set (or a directory listing): Python "
                                "salts string hashes per process, so each rank registers them in another order and "
                                "DDP finds parameters whose shapes differ by position.",
    "grad-of-non-leaf": "The code read `.grad` of a tensor that is not a leaf (a view or a result of a tensor that "
                        "requires grad): backward() fills .grad only for leaves, so it was None.",
    "learning-rate-scaled-by-world": "The loss went nan or inf, and the learning rate is multiplied by the world "
                                     "size (the linear scaling rule): DDP averages the gradients, so each step is "
                                     "world-size times the one the rate was tuned for.",
    "created-by-every-rank": "Every rank creates the same path (os.makedirs without exist_ok, mkdir, open(..., 'x')): "
                             "the first one wins and the others crash with FileExistsError.",
    "service-at-localhost": "The job addresses a service (a metrics sink, a database, a server rank 0 starts) as "
                            "localhost: on the other nodes localhost is that node itself, where nothing listens.",
    "hash-differs-per-process": "The script assigns or shards with `hash()` of strings, which Python salts per "
                                "process (PYTHONHASHSEED unset): every rank computed another assignment.",
    "initial-weights-differ": "Every rank's own check failed alike after the ranks started from different weights: "
                              "torch seeded per rank (or not at all) and no broadcast or DDP made the weights the same.",
    "tensor-attribute-not-saved": "A module keeps a tensor as a plain attribute (`self.mean = torch.zeros(n)`), not "
                                  "a buffer, and changes it after construction: state_dict() holds parameters and "
                                  "buffers only, so a model saved and loaded back computes with __init__'s value.",
    "loss-divided-by-world-size": "The loss is divided by the world size before backward() through DDP, which "
                                  "already averages the gradients: they come out 1/world of their size.",
    "state-changed-on-some-ranks": "An attribute every rank uses (a model's temperature, a scale) is changed only "
                                   "under a test of the rank (`if rank == 0:`): the other ranks keep the old value, "
                                   "so the replicas compute differently.",
    "seeded-on-some-ranks": "A seeding call (random.seed, np.random.seed, torch.manual_seed) runs only under a test "
                            "of the rank: the other ranks draw other numbers, so shuffles and splits meant to agree "
                            "differ per rank.",
    "statistic-of-one-sample": "std() or var() of a single value (a batch of one sample, the last of an epoch) is nan "
                               "with the default correction (torch warns: degrees of freedom is <= 0), and the run "
                               "then reported nan.",
    "optimizer-state-mismatch": "The optimizer failed inside torch.optim on a shape after load_state_dict: the state "
                                "was saved for parameter groups built in another order (or from other parameters), "
                                "and load_state_dict pairs states with parameters by position.",
    "checkpoint-keys-differ": "torch.distributed.checkpoint's load was given a state dict shaped otherwise than the one saved (nested under "
                              "other keys, another prefix): it asks for keys the checkpoint does not hold",
    "state-dict-mismatch": "A checkpoint's keys differ from the model's: saved from a DDP-wrapped model ('module.' "
                           "prefixes) and loaded into the bare one, or another architecture on this node.",
}
# Causes that describe how a run ended rather than why.
SYMPTOMS = {"lab-fault", "ranks-missing", "peer-lost", "collective-timeout", "timed-out", "stopped", "nonzero-exit"}
PATTERNS = (*addresses.PATTERNS, *resources.PATTERNS, *divergence.PATTERNS, *tensors.PATTERNS, *crashes.PATTERNS)


def diagnose(evidence: Evidence) -> list[Finding]:
    """Findings for a failed or hung run, the root cause first; [] for a run that passed."""
    if not evidence.failed:
        return []
    lines = read_lines(evidence)
    tracebacks = read_tracebacks(lines)
    unprinted_lines, unprinted_tracebacks = errors_not_printed(evidence, tracebacks)
    lines, tracebacks = lines + unprinted_lines, tracebacks + unprinted_tracebacks
    ctx = Context(evidence, lines, tracebacks, failure_report_ranks(lines), PATTERNS)
    # of two findings of one cause the first is kept: the Flight Recorder's sequence numbers, then the ranks' calls
    # with their arguments, then the messages
    found = _findings(ctx, (
        endings.fault_findings, resources.memory_findings, addresses.loopback_findings, signals.signal_findings,
        signals.self_signalled_findings, signals.sent_signal_findings, signals.swallowed_error_findings, divergence.flight_findings,
        divergence.out_of_step_findings, launches.launch_findings, order.group_made_again_findings,
        threads.thread_findings, waits.reasoning_findings, replicas.meta_tensor_findings, pattern_findings,
        divergence.inherited_rank_findings, divergence.duplicate_rank_findings, divergence.late_rank_findings,
        divergence.world_size_findings, divergence.collective_findings, nodes.node_findings,
        settings.settings_findings, shared_files.read_before_written_findings,
        shared_files.removed_by_another_rank_findings))
    found += _findings(ctx, (
        replicas.replica_findings, crashes.object_list_findings, crashes.traceback_findings, crashes.run_module_findings, signals.exit_findings,
        divergence.uneven_findings, addresses.unreachable_findings, endings.peer_lost_findings))
    found += _findings(ctx, (endings.ending_findings,))
    # these read the code behind what was found so far (each given the same findings)
    found += _findings(ctx, (sources.source_findings, replicas.resume_findings, replicas.discarded_decision_findings,
                             order.order_findings), found)
    found += _findings(ctx, (wrapping.wrapping_findings, wrapping.world_collective_in_group_code,
                             wrapping.cached_before_init, tensors.read_only_buffer_findings,
                             shared_files.shared_write_findings,
                             shared_files.handle_shared_with_workers_findings), found)
    found += _findings(ctx, (pitfalls.pitfall_findings,), found)
    return _rank(found, ctx)


def _findings(ctx: Context, rules, *found: list[Finding]) -> list[Finding]:
    """What the rules find, in their order; a rule that raises loses its own findings only (context.guarded)."""
    return [finding for rule in rules for finding in guarded(rule, ctx, *found) or []]


def _rank(found: list[Finding], ctx: Context) -> list[Finding]:
    """One finding per cause (its first evidence), ordered by cause; drop what the root causes already explain."""
    by_cause: dict[str, Finding] = {}
    for finding in found:
        by_cause.setdefault(finding.cause, finding)
    causes = set(by_cause)
    if causes - SYMPTOMS:
        causes.discard("nonzero-exit")  # a bare exit code adds nothing once a cause is known
    ordered = sorted((by_cause[cause] for cause in causes), key=lambda finding: PRIORITY.index(finding.cause))
    if ordered and ordered[0].cause == "lab-fault" and not endings.fault_explains(ctx):
        ordered.append(ordered.pop(0))
    return ordered
