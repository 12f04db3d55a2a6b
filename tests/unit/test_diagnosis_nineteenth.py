"""The nineteenth held-out batch's misses (bench/diagnosis/NINETEENTH_BATCH_A.md, _B.md): each scored run's own record
(rerun with the hooks of its mending), with the cause and fix the lab must now give first, and the same record
changed where the finding must not fire."""

from dataclasses import replace


from lab.analysis.diagnosis import diagnose

from tests.unit.test_diagnosis_fourteenth import with_log
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("nineteenth_moe_expert_parallel_train", "length-from-data",
     ["ranks 1, 2 crashed with RuntimeError", "`counts` comes from `torch.bincount(expert_idx[order])` (line 45)"],
     ["minlength=N"]),
    ("nineteenth_hierarchical_allreduce_trainer", "rank-not-in-group", ["global rank 0 is not in that group"],
     ["dist.get_global_rank(group, 0)", "group_dst="]),
    ("nineteenth_zero1_sharded_adamw", "collective-output-size",
     ["reduce_scatter's input (1590 elements) does not divide by the world size (4)"], ["pad the flat buffer"]),
    ("nineteenth_sync_sgd_param_server", "rpc-handler-blocked",
     ["the RPCs to ps_push_and_pull", "blocks at `self.lock.wait_for(", "num_worker_threads="],
     ["@rpc.functions.async_execution", "torch.futures.Future"]),
    ("nineteenth_pipeline_gpipe_lm", "tensor-not-contiguous", ["send at pipeline_gpipe_lm.py:43"], ["t.contiguous()"]),
    ("nineteenth_run_registry_trainer", "created-by-every-rank",
     ["crashed with IntegrityError (UNIQUE constraint failed: runs.name)", "run_registry_trainer.py:34 in start_run",
      "all but the first collide"], ["on rank 0", "INSERT OR IGNORE"]),
    ("nineteenth_vocab_lm_trainer", "size-from-rank-data",
     ["`BagLM(len(vocab))` (vocab_lm_trainer.py:70)", "`lines = load_shard(rank, world)` (line 65)"],
     ["broadcast_object_list", "before it is split into shards"]),
    ("nineteenth_feature_cache_eval", "hash-differs-per-process",
     ["comes from hash() of a string (feature_cache_eval.py:16 in cache_path)"], ["hashlib.sha256", "PYTHONHASHSEED"]),
    ("nineteenth_prep_tokenize_shards", "read-before-written",
     ["opened corpus_text_document.idx at prep_tokenize_shards.py:49", "before rank", "`while not os.path.exists("],
     ["dist.barrier()", "os.replace"]),
    ("nineteenth_retrieval_index_eval", "collective-under-lock",
     ["waits in all_reduce while it holds `with node_lock(INDEX_DIR / '.build.lock')`", "wait to take a lock at "
      "retrieval_index_eval.py:18 (`fcntl.flock(fh, fcntl.LOCK_EX)`)"], ["leave the `with` block"]),
]


def test_bincount_given_its_length_is_no_length_from_the_data():
    evidence = with_source(sample("nineteenth_moe_expert_parallel_train"), "torch.bincount(expert_idx[order])",
                           "torch.bincount(expert_idx[order], minlength=self.num_experts)")
    assert "length-from-data" not in causes(evidence)


def test_an_input_that_divides_by_the_world_size_keeps_the_output_size_wording():
    evidence = with_log(sample("nineteenth_zero1_sharded_adamw"), "(1588 vs. 1590)", "(1590 vs. 1592)")
    top = diagnose(evidence)[0]
    assert top.cause == "collective-output-size" and "does not divide" not in top.title


def test_a_handler_that_returns_a_future_blocks_no_thread():
    evidence = with_source(sample("nineteenth_sync_sgd_param_server"),
                           "def ps_push_and_pull(trainer, grads):", "@rpc.functions.async_execution\n"
                           "def ps_push_and_pull(trainer, grads):")
    assert "rpc-handler-blocked" not in causes(evidence)


def test_ranks_that_claim_one_rank_number_on_two_nodes_are_separate_jobs_not_a_race():
    evidence = sample("nineteenth_run_registry_trainer")
    doubled = replace(evidence, traces=[replace(trace, rank=0) if trace.rank == 2 else trace
                                        for trace in evidence.traces])
    assert "created-by-every-rank" not in causes(doubled)


def test_a_model_sized_from_the_whole_data_is_not_sized_per_rank():
    evidence = with_source(sample("nineteenth_vocab_lm_trainer"), "BagLM(len(vocab))", "BagLM(VOCAB_SIZE)")
    assert "size-from-rank-data" not in causes(evidence)


def test_processes_with_one_hash_seed_name_the_file_alike():
    evidence = sample("nineteenth_feature_cache_eval")
    seeded = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, hash_probe=1)) if trace.calls
                                       else trace for trace in evidence.traces])
    assert "hash-differs-per-process" not in causes(seeded)


def test_a_file_written_before_it_was_read_was_not_read_too_early():
    evidence = sample("nineteenth_prep_tokenize_shards")
    early = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, writes=tuple(
        replace(op, at=0.0) for op in trace.calls.writes))) if trace.calls else trace for trace in evidence.traces])
    assert "read-before-written" not in causes(early)


def test_a_collective_after_the_lock_is_released_waits_under_no_lock():
    evidence = with_source(sample("nineteenth_retrieval_index_eval"),
                           "        ready = wait_for_peers(\"index-ready\")\n        index = torch.load(index_file)\n",
                           "    ready = wait_for_peers(\"index-ready\")\n    index = torch.load(index_file)\n")
    assert "collective-under-lock" not in causes(evidence)


def test_a_handler_that_joins_strings_is_not_blocked():
    evidence = with_source(sample("nineteenth_sync_sgd_param_server"),
                           "self.lock.wait_for(lambda: self.version > my_version)",
                           "print(', '.join(map(str, self.pending)))")
    assert "rpc-handler-blocked" not in causes(evidence)


def test_a_size_picked_by_the_rank_itself_is_not_a_size_from_the_ranks_data():
    evidence = with_source(sample("nineteenth_vocab_lm_trainer"), "    model = nn.parallel.DistributedDataParallel(BagLM(len("
                           "vocab)))", "    hidden = 16 if rank == 0 else 32\n    model = nn.parallel."
                           "DistributedDataParallel(BagLM(hidden))")
    assert "size-from-rank-data" not in causes(evidence)
