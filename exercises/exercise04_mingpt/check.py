"""Checks for exercise 04: every rank trained on the same share of the text, replicas agree, the resume step
continued from the train step's snapshot, the loss fell, and the trained model writes the corpus's words."""

import math

from lab.jobs.checks import (Check, RunOutcome, all_ranks_present, every_rank, expect_below, expect_equal, in_step,
                        load_sibling, same_value)

LOSS_RATIO = 0.75  # the final loss must be below this fraction of the first
REAL_WORDS = 0.6  # at least this share of the sample's whole words are words of the corpus


def data_checks(results: dict[int, dict], world: int, text_length: int) -> list[Check]:
    def windows(result: dict) -> int | None:
        return (text_length - 1) // result["block_size"] if result.get("block_size") else None

    return [
        every_rank("dataset is (len(text) - 1) // block_size windows on every rank", results, "dataset_size", windows),
        every_rank(f"DistributedSampler gave every rank ceil(dataset / {world}) windows", results, "samples",
                   lambda result: math.ceil(result.get("dataset_size", 0) / world)),
        same_value("parameters identical on all ranks", results, "params_hash"),
    ]


def sample_check(sample, vocabulary: set[str], prompt: str, length: int) -> Check:
    name = f"rank 0 sampled {length} characters, mostly words of the corpus"
    if not isinstance(sample, str) or not isinstance(length, int) or len(sample) != len(prompt) + length \
            or not sample.startswith(prompt):
        return Check(name, False, f"sample {sample!r}")
    whole_words = sample.replace(".", " ").split()[1:-1]  # the last word may be cut off
    real = [word for word in whole_words if word in vocabulary]
    passed = bool(whole_words) and len(real) >= REAL_WORDS * len(whole_words)
    detail = f"{len(real)} of {len(whole_words)} words are the corpus's: {sample!r}"
    return Check(name, passed, "" if passed else detail)


def check(run: RunOutcome) -> list[Check]:
    corpus = load_sibling(__file__, "corpus")
    text_length, world = len(corpus.text()), run.world_size
    train, resume = run.step("train").results, run.step("resume").results
    train0, resume0 = train.get(0, {}), resume.get(0, {})
    checks = []
    for name, results in (("train", train), ("resume", resume)):
        checks += [in_step(name, check) for check in [all_ranks_present(run.step(name), world),
                                                      *data_checks(results, world, text_length)]]
    done = train0.get("epochs_total")
    total = resume0.get("epochs_total")
    checks += [
        every_rank("train: started fresh at epoch 0", train, "start_epoch", 0),
        every_rank(f"train: trained epochs 0..{(done or 0) - 1}", train, "epochs_trained", list(range(done or 0))),
        every_rank(f"resume: loaded the snapshot at epoch {done}", resume, "start_epoch", done),
        every_rank(f"resume: trained only the remaining epochs {done}..{(total or 0) - 1}", resume, "epochs_trained",
                   list(range(done or 0, total or 0)) or "at least one epoch"),
        expect_equal("resume: the loaded snapshot holds the weights train ended with",
                     resume0.get("loaded_params_hash"), train0.get("params_hash")),
        expect_below(f"final loss (resume) below {LOSS_RATIO} x the first loss (train)", resume0.get("final_loss"),
                     LOSS_RATIO * train0["first_loss"] if isinstance(train0.get("first_loss"), float) else None),
        sample_check(resume0.get("sample"), corpus.words(), resume0.get("prompt", ""), resume0.get("sample_chars")),
    ]
    return checks
