"""Causes first met in the sixth to ninth held-out batches (bench/diagnosis/SIXTH_BATCH.md, SEVENTH_, EIGHTH_, NINTH_):
their real records (2-node labs, the jobs' hooks), each with the cause and fix the lab must now give first, and the
same records changed where a finding must not fire."""

from dataclasses import replace


from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample, with_calls
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("sixth_warnings_error_node1", "warning-raised-as-error", ["UserWarning raised as an error"], ["PYTHONWARNINGS"]),
    ("sixth_tokenize", "module-shadowed", ["tokenize.py", "linecache.py imported 'tokenize'"], ["rename tokenize.py"]),
    ("sixth_getpass_tracker_key", "prompt-without-terminal", ["no terminal", "TRACKER_API_KEY"],
     ["--env TRACKER_API_KEY="]),
    ("sixth_uploader_thread_exit", "exit-waits-for-thread", ["'ckpt-uploader'", "cannot exit"],
     ["join()", "daemon=True"]),
    ("sixth_lock_reentry_logger", "lock-taken-twice", ["self.lock", "MetricsLogger.log (lock_reentry_logger.py:31)"],
     ["RLock"]),
    ("sixth_rdzv_id_per_node", "launch-options-differ", ["--rdzv-id (node0 job-20018, node1 job-5914)"],
     ["same options"]),
    ("sixth_standalone_each_node", "separate-jobs", ["each ran a job of their own", "--standalone"],
     ["without --standalone"]),
    ("sixth_options_after_script", "bad-arguments", ["torchrun's own options", "after the script"],
     ["before the script"]),
    ("sixth_stale_worker_cleanup", "killed-by-the-job", ["killed its own sibling process 296"], ["pkill -f"]),
    ("sixth_exit_code_from_main", "exit-status-returned", ["`sys.exit(main())`", "`best_epoch`"], ["main() on its own"]),
    ("sixth_ddp_wrap_if_gpus", "gradients-never-averaged", ["50 steps", "no DDP forward"],
     ["DistributedDataParallel(model)"]),
    ("sixth_params_in_list", "modules-in-plain-list", ["ResidualMLP", "plain Python list"], ["nn.ModuleList"]),
    ("sixth_iterable_worker_dup", "iterable-not-split-by-worker", ["ShardStream", "num_workers=2"],
     ["get_worker_info()"]),
    ("sixth_eval_sampler_padding", "sampler-padding", ["1001 samples become 1004"], ["drop the repeats"]),
    ("sixth_sampler_shuffle_conflict", "sampler-with-shuffle", ["shuffle=True"], ["set_epoch"]),
    ("sixth_syncbn_cpu", "sync-batchnorm-on-cpu", ["SyncBatchNorm"], ["torch.cuda.is_available()"]),
    ("sixth_grad_ckpt_find_unused", "reentrant-checkpoint-ddp", ["checkpointing"], ["use_reentrant=False"]),
    ("sixth_world_size_at_import", "process-group-not-initialized", ["`num_replicas=dist.get_world_size()`",
                                                                     "default argument"], ["default None"]),
    ("seventh_lr_argument_string", "option-left-a-string", ["--lr", "no type="], ["type=float"]),
    ("seventh_param_average_inplace", "parameter-changed-in-place", ["in place"], ["torch.no_grad()"]),
    ("seventh_fstring_missing_shard", "file-missing-everywhere", ["placeholder {rank}"], ["f prefix"]),
    ("seventh_resume_rank0_only", "resumed-on-some-ranks", ["only rank 0 loaded", "rank 1 never did"],
     ["restore on every rank"]),
    ("seventh_popen_wait_deadlock", "child-never-ends", ["Popen.wait", "stdout=PIPE"], ["communicate()"]),
    ("seventh_worker_init_get_rank_spawn", "process-group-not-initialized", ["DataLoader worker process"],
     ["functools.partial"]),
    ("seventh_ascii_stdout_node1", "output-encoding", ["encoded as ascii", "node1"], ["PYTHONUTF8=1"]),
    ("seventh_nproc_per_node_gpu", "launcher-refused", ["before it started any worker", "--nproc-per-node"],
     ["give --nproc-per-node a number"]),
    ("seventh_timeout_wrapped_job", "command-timeout", ["`timeout 20`", "124"], ["more than the job needs"]),
    ("seventh_logger_none_rank1", "made-on-some-ranks", ["`run = Tracker(", "ranks 1, 2, 3"], ["is not None"]),
    ("seventh_sqlite_metrics_locked", "database-locked", ["SQLite"], ["one rank only"]),
    ("seventh_accuracy_local_denominator", "sum-over-local-count", ["`correct / seen`"], ["all-reduce seen too"]),
    ("seventh_sampler_not_passed", "data-not-sharded", ["DistributedSampler is made at line 26 but never given"],
     ["sampler=DistributedSampler(ds)"]),
    ("seventh_faulthandler_step_watchdog", "watchdog-fired", ["dump_traceback_later(0:00:06"], ["re-arm it"]),
    ("eighth_backward_twice_gan", "backward-twice", ["second backward()"], ["fake.detach()"]),
    ("eighth_load_strict_false_renamed", "state-dict-not-strict", ["strict=False"], ["strict=True"]),
    ("eighth_all_reduce_python_float", "collective-given-a-number", ["not a tensor"], ["torch.tensor([value])"]),
    ("eighth_scatter_list_nonsrc", "root-mismatch", ["scatter's list"], ["pass None on every other rank"]),
    ("eighth_autograd_fn_wrong_grads", "autograd-gradient-count", ["1 gradient(s) for 2 inputs"], ["None"]),
    ("eighth_sampler_seed_per_rank", "sampler-seed-per-rank", ["seed that differs per rank"], ["same seed"]),
    ("eighth_ddp_attr_access", "ddp-attribute", ["'encoder'"], ["model.module.encoder"]),
    ("eighth_clip_grad_params_method", "method-not-called", ["`model.parameters` without the call"],
     ["model.parameters()"]),
    ("eighth_mp_spawn_no_main_guard", "spawn-without-main-guard", ["unguarded"], ['if __name__ == "__main__":']),
    ("eighth_node_rank_copy_paste", "duplicate-rank", ["same --node-rank (node0 0, node1 0)"], ["{node_rank}"]),
    ("eighth_amp_unscale_twice", "unscaled-twice", ["unscale_ was called twice"], ["once per step"]),
    ("eighth_gloo_ifname_lo", "gloo-on-loopback", ["127.0.0.1"], ["GLOO_SOCKET_IFNAME"]),
    ("eighth_json_label_map_keys", "json-int-keys", ["KeyError: 1", "through JSON"], ["int(k)"]),
    ("eighth_dropout_eval_missing", "eval-mode-missing", ["Dropout", "never put in eval mode"], ["model.eval()"]),
    ("eighth_metric_count_bf16", "counts-in-low-precision", ["bfloat16"], ["dtype=torch.int64"]),
    ("eighth_optimizer_before_surgery", "optimizer-before-model-change", ["model.fc is replaced"],
     ["add_param_group"]),
    ("eighth_zero_grad_outside_loop", "gradients-not-zeroed", ["never zero_grad()"], ["zero_grad() inside the loop"]),
    ("ninth_bool_flag_argparse", "bool-option", ["type=bool", "bool('False') is True"], ["action='store_true'"]),
    ("ninth_breakpoint_left_rank0", "debugger-in-job", ["debugger"], ["PYTHONBREAKPOINT=0"]),
    ("ninth_ddp_device_ids_cpu", "ddp-device-ids-on-cpu", ["device_ids [0]"], ["without device_ids"]),
    ("ninth_all_reduce_temporary", "collective-result-discarded", ["nothing keeps"], ["variable"]),
    ("ninth_python_optimize_node1", "settings-differ-between-nodes", ["optimize flag", "node1 -O", "assert"],
     ["unset PYTHONOPTIMIZE"]),
    ("ninth_vmem_limit_node1", "settings-differ-between-nodes", ["address space limit", "node1 2.9 GiB"],
     ["ulimit -v"]),
    ("ninth_user_config_node1", "file-on-one-node-read", ["/root/.config/trainer/defaults.json", "node1 only"],
     ["remove /root/.config/trainer/defaults.json from node1"]),
    ("ninth_killpg_cleanup", "killed-by-the-job", ["rank 0 on node0 was ended by SIGTERM while its own code sent a "
                                                   "signal", "killpg_cleanup.py:23 in stop_prefetchers"],
     ["never killpg its own group"]),
    ("ninth_hostfile_node_rank_order", "node-rank-zero-not-master", ["node1 was given --node-rank 0",
                                                                     "--master-addr names node0"],
     ["give --node-rank 0 to the node --master-addr names (node0)"]),
    ("ninth_set_order_metrics", "collectives-in-unordered-loop", ["all_reduce at set_order_metrics.py:33",
                                                                  "loop over set(names)"], ["sorted(set(names))"]),
    ("ninth_comm_hook_main_only", "communication-set-up-on-some-ranks", ["register_comm_hook", "`rank == 0`"],
     ["on every rank"]),
    ("ninth_inplace_act_after_tanh", "changed-in-place-for-backward", ["output of Tanh", "changed in place"],
     ["`self.post = nn.ReLU(inplace=inplace)` (inplace_act_after_tanh.py:19)"]),
    ("ninth_onecycle_steps_floor", "scheduler-stepped-past-total", ["stepped 46 times", "45 steps"],
     ["steps_per_epoch=len(train_loader)"]),
    ("ninth_ema_before_ddp", "copied-before-ddp", ["`ModelEma(net, decay=0.995)` (ema_before_ddp.py:40)",
                                                   "before DDP(net) (line 41)"], ["after wrapping"]),
    ("ninth_tied_weights_after_ddp", "parameter-replaced-after-ddp", ["`model.module.tie_weights()`",
                                                                      "`self.head.weight = self.embed.weight`"],
     ["before wrapping"]),
    ("tenth_locale_node1", "locale-missing", ["asked node1 for a locale it does not have"], ["LC_ALL=C.UTF-8"]),
    ("tenth_shared_vocab_ready", "store-value-compared-with-str", ["returns bytes (b'ready')"], ["== b'ready'"]),
    ("tenth_plateau_schedule", "reduce-read-off-root", ["`dist.reduce(stats, dst=0)`", "on rank 1"],
     ["dist.all_reduce(stats)"]),
    ("tenth_uneven_join_logging", "collective-inside-join", ["`dist.all_reduce(running)`", "with Join(...)"],
     ["out of the Join block"]),
    ("tenth_aux_loss_warmup", "static-graph-changed", ["static_graph=True"], ["without static_graph"]),
    ("tenth_shard_scores", "recv-from-any-source", ["3 messages with recv() and no src"], ["src=peer"]),
    ("tenth_async_eval_worker", "daemon-with-children", ["daemon process"], ["daemon=False"]),
    ("tenth_trainable_filter_consumed", "iterator-used-twice", ["`trainable = filter(", "is an iterator"],
     ["trainable = list("]),
    ("tenth_best_weights_reference", "state-dict-kept-without-copy", ["`best_state = net.state_dict()`"],
     ["copy.deepcopy(net.state_dict())"]),
    ("tenth_manual_bce_nan", "log-of-probability", ["`torch.log(p)`", "nan"], ["F.logsigmoid"]),
    ("tenth_random_split_unseeded", "split-differs-per-rank", ["`random_split(rows, [1000, 200])`"],
     ["generator=torch.Generator().manual_seed(42)"]),
    ("tenth_persistent_workers_epoch", "persistent-workers-keep-a-copy", ["persistent_workers=True",
                                                                          "`data.set_epoch(epoch)`"],
     ["persistent_workers=False"]),
    ("tenth_val_drop_last_empty", "drop-last-left-no-batch", ["drop_last=True (val_drop_last_empty.py:14)"],
     ["drop_last=False"]),
    ("tenth_stale_lock_node1", "waits-on-a-file", ["rank 1 on node1", "`while LOCK.exists():`"],
     ["remove the stale file on node1"]),
    ("tenth_node_local_average", "group-non-member", ["global rank 1", "not a member"], ["belongs to the one it uses"]),
    ("tenth_feature_cache", "cache-built-on-one-node", ["node0 had it from before the run", "rank 1 built it"],
     ["build it once where every node sees it"]),
    ("eleventh_sampler_no_set_epoch", "sampler-epoch-not-set", ["never told the epoch"], ["set_epoch(epoch)"]),
    ("eleventh_float64_features", "dtype-mismatch", ["Double and Float", "float64"], [".float()"]),
    ("eleventh_fork_shared_fd", "handle-shared-with-workers", ["self.file", "num_workers=3"],
     ["open the file in each worker"]),
    ("eleventh_lru_cache_global_count", "collective-in-cached-function", ["global_count()", "@functools.lru_cache"],
     ["do not cache a function that runs a collective"]),
    ("eleventh_preds_named_by_local_rank", "file-written-by-every-rank", ["ranks 0, 2", "local rank"],
     ["global rank (RANK"]),
    ("eleventh_hashstore_rendezvous", "store-of-one-process", ["HashStore", "hashstore_rendezvous.py:13"],
     ["dist.TCPStore("]),
    ("eleventh_queue_producer_exited", "tensor-sender-gone", ["multiprocessing Queue", "already ended"],
     ["q.get() before p.join()"]),
    ("eleventh_free_port_per_node", "master-unreachable", ["rank 0 60729, rank 1 50633", "the job set it itself"],
     ["do not set it in the script"]),
    ("eleventh_fork_pool_collective", "duplicate-rank", ["a forked child of rank 0", "inherited"],
     ["all_reduce once in the parent"]),
    ("ninth_bom_header_node1", "file-differs-between-nodes", ["/root/data/intents.csv", "node1's copy differs"],
     ["same file"]),
]


def assert_told(name: str, cause: str, title: list[str], fix: list[str]) -> None:
    """The sample's top finding is `cause`, with every words of `title` in its title and of `fix` in its fix."""
    top = diagnose(sample(name))[0]
    assert top.cause == cause, (top.cause, top.title)
    assert all(words in top.title for words in title), top.title
    assert all(words in top.fix for words in fix), top.fix


def test_a_warning_names_the_node_whose_warning_options_make_it_an_error():
    evidence = sample("sixth_warnings_error_node1")
    strict = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, warnoptions=(
        ("error",) if trace.node == 1 else ()))) if trace.calls else trace for trace in evidence.traces])
    top = diagnose(strict)[0]
    assert "node1 turn warnings into errors" in top.title and "unset PYTHONWARNINGS" in top.fix and "node1" in top.fix


def test_a_lock_taken_by_another_frame_of_other_code_is_not_taken_twice():
    evidence = sample("sixth_lock_reentry_logger")
    # flush taking another lock than the one log() holds is a wait, not a self-deadlock
    other = with_source(evidence, "    def flush(self):\n        with self.lock:",
                        "    def flush(self):\n        with self.io_lock:")
    assert "lock-taken-twice" not in causes(other)


def test_agents_started_alike_and_worlds_that_never_formed_are_not_launch_mistakes():
    same_id = sample("sixth_rdzv_id_per_node")
    same_id = replace(same_id, processes=[replace(process, cmdline=[word.replace("job-5914", "job-20018")
                                                                    for word in process.cmdline])
                                          for process in same_id.processes])
    assert "launch-options-differ" not in causes(same_id)
    unformed = sample("sixth_standalone_each_node")
    unformed = replace(unformed, traces=[replace(trace, reached=0) for trace in unformed.traces])
    assert "separate-jobs" not in causes(unformed)


def test_a_pid_a_rank_printed_without_killing_words_is_not_a_kill_by_the_job():
    evidence = sample("sixth_stale_worker_cleanup")
    quiet = replace(evidence, nodes=[replace(node, lines=[line.replace("killing stale worker", "loaded shard")
                                                          for line in node.lines]) for node in evidence.nodes])
    assert causes(quiet)[0] == "process-killed"


def test_main_returning_nothing_and_a_wrapped_model_are_not_these_causes():
    exits = sample("sixth_exit_code_from_main")
    assert "exit-status-returned" not in causes(with_source(exits, "sys.exit(main())", "main()"))
    unwrapped = sample("sixth_ddp_wrap_if_gpus")
    assert "gradients-never-averaged" not in causes(with_calls(unwrapped, ddp_forwards={"synced": 50, "no_sync": 0}))
    listed = sample("sixth_params_in_list")
    registered = with_source(with_source(listed, "self.blocks = [", "self.blocks = nn.ModuleList(["),
                             "for _ in range(depth)]", "for _ in range(depth)])")
    assert "modules-in-plain-list" not in causes(registered)


def test_an_iterable_dataset_split_by_worker_and_a_count_off_by_more_than_padding_are_not_these_causes():
    iterable = sample("sixth_iterable_worker_dup")
    assert "iterable-not-split-by-worker" not in causes(with_source(
        iterable, "    def __iter__(self):", "    def __iter__(self):\n        info = get_worker_info()"))
    padded = sample("sixth_eval_sampler_padding")
    assert "sampler-padding" not in causes(with_source(padded, "DistributedSampler", "SequentialSampler"))


def test_a_broken_cache_file_from_before_the_run_on_one_node_is_told_as_that_node_copy():
    """tests/failures/stale_cache_on_one_node.py (the sixth batch's corrupt_cache_node1, by another script): the
    hooks keep each torch.load's file, size and time."""
    evidence = sample("stale_cache_on_one_node")
    top = diagnose(evidence)[0]
    assert top.cause == "stale-file-on-node" and top.node == 1
    assert "/root/.cache/featcache/features.pt on node1: 30000 bytes, written before the run" in top.title
    assert "node0's copy (801584 bytes) loaded" in top.title and "delete /root/.cache/featcache/features.pt on node1" \
        in top.fix
    # saved on node1 during the run (the write may be what it read): not a file from before
    saved_here = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, files=tuple(
        replace(op, op="save") if trace.node == 1 else op for op in trace.calls.files) + tuple(
        op for op in trace.calls.files if trace.node == 1))) for trace in evidence.traces])
    assert "stale-file-on-node" not in causes(saved_here)


def test_a_write_that_stopped_at_one_node_file_size_limit_names_the_limit():
    """tests/failures/file_size_limit_on_one_node.py (the sixth batch's fsize_limit_node1, by another script)."""
    evidence = sample("file_size_limit_on_one_node")
    top = diagnose(evidence)[0]
    assert top.cause == "file-size-limit" and top.node == 1
    assert "to 1.0 MiB (ulimit -f; node0: unlimited)" in top.title and "optim_shard_1.pt stopped at 1.0 MiB" in top.title
    assert "ulimit -f unlimited" in top.fix
    unlimited = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, limits={
        **trace.calls.limits, "fsize": -1})) for trace in evidence.traces])
    assert "file-size-limit" not in causes(unlimited)


def test_code_that_trains_each_rank_alone_on_purpose_is_not_told_to_wrap_in_ddp():
    """seventh_gather_preds_order trains an identical reference model on every rank, with no DDP in its code."""
    assert "gradients-never-averaged" not in causes(sample("seventh_gather_preds_order"))


def test_a_checkpoint_rank_0_loads_and_broadcasts_is_not_a_resume_on_some_ranks():
    evidence = sample("seventh_resume_rank0_only")
    sent = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, counts={
        **trace.calls.counts, "broadcast_object_list": 1})) if trace.calls else trace for trace in evidence.traces])
    assert "resumed-on-some-ranks" not in causes(sent)


def test_the_string_option_the_none_logger_and_the_timeout_need_their_own_evidence():
    typed = with_source(sample("seventh_lr_argument_string"), 'p.add_argument("--lr", default=TrainConfig.lr)',
                        'p.add_argument("--lr", type=float, default=TrainConfig.lr)')
    assert "option-left-a-string" not in causes(typed)
    renamed = with_source(sample("seventh_logger_none_rank1"), "run = Tracker(", "tracker = Tracker(")
    assert "made-on-some-ranks" not in causes(renamed)  # the failing line uses `run`, which is not that one now
    bare = sample("seventh_timeout_wrapped_job")
    assert "command-timeout" not in causes(replace(bare, command=["python", "timeout_wrapped_job.py"]))


def test_a_file_on_each_node_whose_copy_differs_on_the_failing_node_is_named():
    """tests/failures/label_cache_on_one_node.py (the seventh batch's label_map_cache_node1, by another script): the
    hooks note each file the job's code opens for reading, with its size, time and a checksum of small ones."""
    evidence = sample("label_cache_on_one_node")
    top = diagnose(evidence)[0]
    assert top.cause == "file-differs-between-nodes" and top.node == 1
    assert "/root/.cache/intentcls/labels.json" in top.title and "node1's copy differs" in top.title
    assert "written before the run, the others by it" in top.title and "delete node1's copy" in top.fix

    def reads(change) -> list[str]:
        return causes(replace(evidence, traces=[replace(trace, calls=replace(trace.calls, reads=tuple(
            change(op) for op in trace.calls.reads))) if trace.calls else trace for trace in evidence.traces]))

    assert "file-differs-between-nodes" not in reads(lambda op: replace(op, size=44, digest="same"))  # alike
    assert "file-differs-between-nodes" not in reads(lambda op: replace(op, path="/lab/shared/labels.json"))


def assert_not_the_cause_once_fixed(fixed: dict[str, tuple[str, str]]) -> None:
    """For each sample, its top cause is gone once `old` in its code reads `new`."""
    for name, (old, new) in fixed.items():
        cause = diagnose(sample(name))[0].cause
        assert cause not in causes(with_source(sample(name), old, new)), name


def test_the_code_lints_need_the_mistake_in_the_code():
    """Each reads the job's code: with the line fixed, it says nothing (and what is left is a rank-exited)."""
    fixed = {
        "eighth_zero_grad_outside_loop": ("        loss.backward()", "        opt.zero_grad()\n        loss.backward()"),
        "eighth_load_strict_false_renamed": ("strict=False", "strict=True"),
        "eighth_optimizer_before_surgery": (  # the optimizer built again once the head is replaced
            '    model.fc = nn.Linear(48, cfg["num_classes"])',
            '    model.fc = nn.Linear(48, cfg["num_classes"])\n'
            '    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=0.9)'),
    }
    assert_not_the_cause_once_fixed(fixed)
    every = causes(with_source(sample("eighth_dropout_eval_missing"), "@torch.no_grad()",
                               "@torch.no_grad()\n# model.eval() is called by the caller"))
    assert every[0] == "eval-mode-missing"  # a comment is not a call


def test_a_scheduler_or_generator_made_after_the_optimizer_is_not_a_replaced_layer():
    """The ninth batch's scored run told these two 'optimizer built before the model is changed': the rule took any
    `self.x = ...` after `Optimizer(self.model.parameters())`; a layer of that very model is what counts."""
    for name in ("ninth_callback_monitor_missing", "ninth_resume_scheduler_not_restored"):
        assert "optimizer-before-model-change" not in causes(sample(name)), name


def on_node(evidence, node: int, **changes):
    """The record with the CallLogs of one node's ranks changed as `changes` says."""
    return replace(evidence, traces=[replace(trace, calls=replace(trace.calls, **changes))
                                     if trace.calls and trace.node == node else trace for trace in evidence.traces])


def test_settings_that_differ_only_where_they_cannot_explain_the_failure_are_not_named():
    """-O counts wherever it is (it changes what runs); a limit only on a node whose ranks failed; the same settings on
    every node say nothing."""
    optimized = sample("ninth_python_optimize_node1")
    assert "settings-differ-between-nodes" not in causes(on_node(optimized, 1, flags={"optimize": 0}))
    limited = sample("ninth_vmem_limit_node1")
    unlimited = {"fsize": -1, "nofile": 20000, "as": -1, "nproc": 96365}
    assert "settings-differ-between-nodes" not in causes(on_node(limited, 1, limits=unlimited))
    swapped = on_node(on_node(limited, 1, limits=unlimited), 0, limits={**unlimited, "as": 3072000000})
    assert "settings-differ-between-nodes" not in causes(swapped)  # node0's is lower, and node1's rank crashed


def test_a_file_one_node_read_counts_only_off_rank_0_and_off_the_numbered_paths():
    evidence = sample("ninth_user_config_node1")
    [read] = [op for trace in evidence.traces if trace.node == 1 and trace.calls for op in trace.calls.reads
              if op.path.endswith("defaults.json")]
    both = on_node(evidence, 0, reads=(read,))
    assert "file-on-one-node-read" not in causes(both)
    numbered = on_node(evidence, 1, reads=(replace(read, path="/root/cache/shard-1.json"),))
    assert "file-on-one-node-read" not in causes(numbered)
    rank_zero_only = on_node(on_node(evidence, 1, reads=()), 0, reads=(read,))
    assert "file-on-one-node-read" not in causes(rank_zero_only)  # rank 0 reading what it then shares is common


def test_a_rank_ended_by_sigterm_elsewhere_than_a_line_that_signals_did_not_kill_itself():
    """The stack a rank wrote at SIGTERM says where it was: only a line of its own that sends signals makes it the
    sender (torchrun's SIGTERM after a peer failed finds it anywhere else)."""
    elsewhere = with_source(sample("ninth_killpg_cleanup"), "    os.killpg(os.getpgid(0), signal.SIGTERM)",
                            "    time.sleep(0.1)")
    assert "killed-by-the-job" not in causes(elsewhere)


def test_node_rank_0_on_the_master_address_or_a_c10d_rendezvous_is_not_a_misplaced_rank_0():
    evidence = sample("ninth_hostfile_node_rank_order")

    def launched(change):
        return replace(evidence, processes=[replace(process, cmdline=change(process)) if process.role == "agent"
                                            else process for process in evidence.processes])

    in_order = launched(lambda process: [("0" if process.node == 0 else "1") if word in ("0", "1") and
                                         process.cmdline[index - 1] == "--node-rank" else word
                                         for index, word in enumerate(process.cmdline)])
    assert "node-rank-zero-not-master" not in causes(in_order)
    c10d = launched(lambda process: process.cmdline[:-1] + ["--rdzv-backend", "c10d", process.cmdline[-1]])
    assert "node-rank-zero-not-master" not in causes(c10d)  # c10d ignores --node-rank: the endpoint hosts the store


def test_a_sorted_loop_and_a_hook_on_every_rank_are_not_why_the_collectives_disagree():
    ordered = with_source(sample("ninth_set_order_metrics"), "for name in set(names):",
                          "for name in sorted(set(names)):")
    assert "collectives-in-unordered-loop" not in causes(ordered)
    everywhere = with_source(sample("ninth_comm_hook_main_only"),
                             "        model.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)\n", "")
    everywhere = with_source(everywhere, "    opt = torch.optim.SGD(",
                             "    model.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)\n"
                             "    opt = torch.optim.SGD(")
    assert "communication-set-up-on-some-ranks" not in causes(everywhere)


def test_a_copy_after_ddp_or_under_one_seed_and_weights_tied_before_ddp_are_not_these_causes():
    after = with_source(sample("ninth_ema_before_ddp"), "    ema = ModelEma(net, decay=0.995)\n    model = DDP(net)",
                        "    model = DDP(net)\n    ema = ModelEma(net, decay=0.995)")
    assert "copied-before-ddp" not in causes(after)
    assert "copied-before-ddp" not in causes(with_calls(sample("ninth_ema_before_ddp"), torch_seed=0))
    tied_first = with_source(sample("ninth_tied_weights_after_ddp"), "    model = DDP(TinyLM())\n",
                             "    model = TinyLM()\n    model.tie_weights()\n    model = DDP(model)\n")
    assert "parameter-replaced-after-ddp" not in causes(with_source(tied_first, "    model.module.tie_weights()\n", ""))


def test_collectives_from_two_threads_are_named_and_one_thread_is_not():
    evidence = sample("collectives_from_a_thread")
    top = diagnose(evidence)[0]
    assert top.cause == "collectives-from-threads" and "reporter (collectives_from_a_thread.py:20 in report)" in top.title
    assert "process group of its own" in top.fix
    one_thread = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, recent=tuple(
        replace(call, thread="MainThread") for call in trace.calls.recent), failed=tuple(
        replace(call, thread="MainThread") for call in trace.calls.failed))) if trace.calls else trace
        for trace in evidence.traces])
    assert "collectives-from-threads" not in causes(one_thread)


def test_a_package_imported_from_another_copy_on_the_failing_node_is_named_and_alike_ones_are_not():
    """The hooks survive a job's own PYTHONPATH (the venv's .pth puts them first) and note each package's version
    and folder; node1 imported an older tinytok from ~/pylib."""
    evidence = sample("package_copy_on_one_node")
    top = diagnose(evidence)[0]
    assert top.cause == "package-version-differs" and "tinytok" in top.title and "node1 0.9.1 /root/pylib/tinytok" in \
        top.title and "remove the other copy from node1" in top.fix
    node0 = next(trace.calls.versions for trace in evidence.traces if trace.node == 0 and trace.calls)
    alike = on_node(evidence, 1, versions=dict(node0))
    assert "package-version-differs" not in [finding.cause for finding in diagnose(alike) if "tinytok" in finding.title]
    numbered = on_node(on_node(evidence, 0, versions={"tinytok": "1.2.0 /opt/venv-node0/tinytok"}), 1,
                       versions={"tinytok": "1.2.0 /opt/venv-node1/tinytok"})
    assert not [finding for finding in diagnose(numbered) if "tinytok" in finding.title and
                finding.cause == "package-version-differs"]


def test_a_shorter_data_file_on_the_node_that_left_first_is_that_node_copy():
    """node1's ~/data/train.txt is shorter: its rank left (exit 0) and rank 0 lost it moments later. Both nodes'
    copies differ; the odd one is the node that ended apart, not the one that raised its peer's error."""
    evidence = sample("data_file_differs_per_node")
    top = diagnose(evidence)[0]
    assert top.cause == "file-differs-between-nodes" and "node1's copy differs" in top.title and top.node == 1
    [read] = [op for trace in evidence.traces if trace.node == 1 and trace.calls for op in trace.calls.reads
              if op.path.endswith("train.txt")]
    node0 = next(op for trace in evidence.traces if trace.node == 0 and trace.calls for op in trace.calls.reads
                 if op.path.endswith("train.txt"))
    alike = on_node(evidence, 1, reads=(replace(read, size=node0.size, digest=node0.digest),))
    assert "file-differs-between-nodes" not in causes(alike)


def test_one_file_written_by_every_rank_on_the_shared_folder_is_named_and_a_file_each_is_not():
    evidence = sample("log_file_written_by_every_rank")
    top = diagnose(evidence)[0]
    assert top.cause == "file-written-by-every-rank" and "metrics.jsonl is opened for writing by ranks 0, 1" in top.title
    assert "metrics-{rank}.jsonl" in top.fix

    def writes(change):
        return replace(evidence, traces=[replace(trace, calls=replace(trace.calls, writes=tuple(
            change(trace, op) for op in trace.calls.writes))) if trace.calls else trace for trace in evidence.traces])

    own = writes(lambda trace, op: replace(op, path=op.path.replace("metrics.jsonl", f"metrics-{trace.rank}.jsonl")))
    assert "file-written-by-every-rank" not in causes(own)
    local = writes(lambda trace, op: replace(op, path="/tmp/metrics.jsonl"))  # each node's own disk
    assert "file-written-by-every-rank" not in causes(local)


def test_a_locale_that_differs_is_named_before_the_utf8_mode_it_turns_on():
    """An LC_ALL node1 lacks makes Python fall back to C and turn on UTF-8 mode: the locale is the cause."""
    evidence = on_node(sample("tenth_locale_node1"), 1, locale={"LC_ALL": "de_DE.UTF-8"})
    found = [finding for finding in diagnose(evidence) if finding.cause == "settings-differ-between-nodes"]
    assert found and "the locale" in found[0].title and "node1 LC_ALL=de_DE.UTF-8" in found[0].title
    alike = on_node(on_node(sample("tenth_locale_node1"), 1, flags={"optimize": 0, "utf8_mode": 0}), 0,
                    flags={"optimize": 0, "utf8_mode": 0})
    assert "settings-differ-between-nodes" not in causes(alike)


def test_the_tenth_batch_pitfalls_need_the_mistake_in_the_code():
    """Each reads the job's code: with the line fixed, it is not the cause any more."""
    fixed = {
        "tenth_shared_vocab_ready": ('!= "ready"', '!= b"ready"'),
        "tenth_trainable_filter_consumed": ("trainable = filter(lambda p: p.requires_grad, model.parameters())",
                                            "trainable = [p for p in model.parameters() if p.requires_grad]"),
        "tenth_best_weights_reference": ("best_state = val, epoch, net.state_dict()",
                                         "best_state = val, epoch, copy.deepcopy(net.state_dict())"),
        "tenth_manual_bce_nan": ("-(target * torch.log(p) + (1 - target) * torch.log(1 - p)).mean()",
                                 "F.binary_cross_entropy_with_logits(logits, target)"),
        "tenth_random_split_unseeded": ("random_split(rows, [1000, 200])", "random_split(rows, [1000, 200], generator=g)"),
        "tenth_persistent_workers_epoch": ("persistent_workers=True", "persistent_workers=False"),
        "tenth_uneven_join_logging": ("            dist.all_reduce(running)\n", ""),
        "tenth_stale_lock_node1": ("while LOCK.exists():", "for _ in range(1000):"),
        "tenth_plateau_schedule": ("dist.reduce(stats, dst=0)", "dist.all_reduce(stats)"),
    }
    assert_not_the_cause_once_fixed(fixed)
    assert "split-differs-per-rank" not in causes(with_calls(sample("tenth_random_split_unseeded"), torch_seed=7))
    one_source = with_calls(sample("tenth_shard_scores"), recent=())
    assert "recv-from-any-source" not in causes(one_source)


def test_a_collective_given_a_column_is_named_and_a_contiguous_one_is_not():
    evidence = sample("collective_on_a_column")
    top = diagnose(evidence)[0]
    assert top.cause == "tensor-not-contiguous" and "collective_on_a_column.py:16" in top.title
    assert "view.contiguous()" in top.fix
    laid_out = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, recent=tuple(
        replace(call, tensors=tuple(replace(tensor, contiguous=True) for tensor in call.tensors))
        for call in trace.calls.recent))) if trace.calls else trace for trace in evidence.traces])
    assert "tensor-not-contiguous" not in causes(laid_out)


def test_every_sample_seen_from_one_node_or_with_nodes_that_never_ended_is_still_diagnosed():
    """The rules that compare nodes must not assume two of them: a 1-node lab's OOM once crashed the diagnosis
    (IndexError in the odd-node ranking), and a node still running when the lab stopped it has no end time."""
    from tests.unit.test_diagnosis_replicas import SAMPLES
    for folder in sorted(path for path in SAMPLES.iterdir() if path.is_dir()):
        evidence = sample(folder.name)
        alone = replace(evidence, nodes=evidence.nodes[:1], nnodes=1,
                        traces=[trace for trace in evidence.traces if trace.node in (0, None)])
        diagnose(alone)  # raises no error (a node that ended well leaves nothing to find)
        unended = replace(evidence, nodes=[replace(node, exited_at=None) for node in evidence.nodes])
        diagnose(unended)


def test_a_cache_every_node_had_or_built_is_not_one_node_building_it():
    evidence = sample("tenth_feature_cache")
    [built] = [op for trace in evidence.traces if trace.node == 1 and trace.rank == 1 for op in trace.calls.files
               if op.op == "save"]
    early = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, files=tuple(
        replace(op, at=trace.started_at + 0.5) if op.op == "save" else op for op in trace.calls.files)))
        if trace.node == 1 and trace.calls else trace for trace in evidence.traces])
    assert "cache-built-on-one-node" not in causes(early)  # written as it started: not what the others waited for
    both = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, files=(*trace.calls.files, built)))
                                     if trace.node == 0 and trace.rank == 0 else trace for trace in evidence.traces])
    assert "cache-built-on-one-node" not in causes(both)


def test_a_crash_torch_raised_is_not_explained_by_a_mistake_that_only_makes_numbers_wrong():
    """The eleventh batch's float64 job crashed at its first step; its loop also never calls set_epoch, which was
    named first. A pitfall of that kind explains a check of the job's own that failed, not torch's error."""
    assert "sampler-epoch-not-set" not in causes(sample("eleventh_float64_features"))
    assert causes(sample("eleventh_sampler_no_set_epoch"))[0] == "sampler-epoch-not-set"  # its own check failed


def test_small_numbers_in_a_check_are_no_sampler_padding():
    """'epochs [1, 2] start with the same 16 samples' once read as 1 sample padded to 2."""
    assert "sampler-padding" not in causes(sample("eleventh_sampler_no_set_epoch"))


def test_a_handle_each_worker_opens_itself_or_no_workers_is_not_shared():
    opened = '        self.file = open(path, "rb", buffering=0)  # opened once, reused by every read'
    assert_not_the_cause_once_fixed({
        "eleventh_fork_shared_fd": (opened, "        self.path, self.file = path, None"),
    })
    assert "handle-shared-with-workers" not in causes(
        with_source(sample("eleventh_fork_shared_fd"), "num_workers=3", "num_workers=0"))


def test_a_scratch_file_the_job_wrote_during_the_run_is_not_a_file_left_on_one_node():
    """fork_shared_fd's rank writes /tmp/records-<pid>.bin and reads it back: no node had it before the run."""
    assert "file-on-one-node-read" not in causes(sample("eleventh_fork_shared_fd"))


def test_shared_memory_filled_by_files_from_before_the_run_says_remove_them():
    """The eleventh batch's node1 had a 508 MiB segment in /dev/shm from a killed job (its rerun after the mending,
    whose record holds the nodes' /dev/shm answers)."""
    top = diagnose(sample("eleventh_shm_leftover_node1"))[0]
    assert (top.cause, top.node) == ("shared-memory-exhausted", 1)
    assert "508 MiB of its 512 MiB are held by files older than the job's processes there" in top.title, top.title
    assert "rm /dev/shm/torch_4711_2853015962_0" in top.fix
    evidence = sample("eleventh_shm_leftover_node1")
    written_during = replace(evidence, probes=replace(evidence.probes, nodes=[
        replace(facts, shm={**facts.shm, "largest": [{**found, "mtime": found["mtime"] + 60}
                                                     for found in facts.shm["largest"]]})
        for facts in evidence.probes.nodes]))
    top = diagnose(written_during)[0]
    assert top.cause == "shared-memory-exhausted" and "older than" not in top.title  # the job's own use


def test_a_collective_in_an_uncached_function_or_a_per_rank_store_is_not_these_causes():
    assert_not_the_cause_once_fixed({
        "eleventh_lru_cache_global_count": ("@functools.lru_cache(maxsize=None)\n", ""),
        "eleventh_hashstore_rendezvous": ("dist.HashStore()", "dist.TCPStore('node0', 29511, world_size, rank == 0)"),
    })
    assert_not_the_cause_once_fixed({  # cached without arguments: every rank runs it once, then skips it alike
        "eleventh_lru_cache_global_count": ("def global_count(local_count: int) -> int:", "def global_count() -> int:"),
        "eleventh_hashstore_rendezvous": (  # a HashStore made for something else, not the one the group meets on
            "    store = dist.HashStore()", "    scratch = dist.HashStore()\n"
            "    store = dist.TCPStore('node0', 29511, world_size, rank == 0)"),
    })


def test_files_the_ranks_name_apart_or_a_name_without_the_local_rank_are_not_written_over():
    evidence = sample("eleventh_preds_named_by_local_rank")

    def renamed(trace, name: str):
        files = tuple(replace(op, path=op.path.replace("part-0.pt", name).replace("part-1.pt", name))
                      if op.op == "save" else op for op in trace.calls.files)
        return replace(trace, calls=replace(trace.calls, files=files))

    apart = replace(evidence, traces=[renamed(trace, f"part-{trace.rank}.pt") if trace.calls else trace
                                      for trace in evidence.traces])
    assert "file-written-by-every-rank" not in causes(apart)
    one_name = replace(evidence, traces=[renamed(trace, "preds.pt") if trace.calls else trace
                                         for trace in evidence.traces])
    top = diagnose(one_name)[0]  # every rank saves one path: written over, but not for the local rank's sake
    assert top.cause == "file-written-by-every-rank" and "local rank" not in top.title, top.title


def test_ranks_that_read_the_launchers_master_port_are_not_told_the_job_set_it():
    evidence = sample("eleventh_free_port_per_node")
    launched = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, env_read={
        **trace.calls.env_read, "MASTER_PORT": "29500"})) if trace.calls else trace for trace in evidence.traces])
    top = diagnose(launched)[0]
    assert top.cause == "master-unreachable" and "the job set it itself" not in top.title, top.title
