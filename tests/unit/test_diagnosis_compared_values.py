"""What a failed check of the job's own compared, as its frame held the values when it raised (the hooks' `failed_check`,
exercises/jobhooks/sitecustomize.py): two sides exactly world-size apart tell a count made once per rank from a share
compared with the whole, whatever the check's message says. Samples from real 2-node runs (lab torchrun)."""

from dataclasses import replace

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source


def with_operand(evidence, expression: str, **changes):
    """The record with the failed checks' operand `expression` changed as `changes` says (number=..., length=...)."""
    def changed(check):
        return check and replace(check, operands=tuple(replace(operand, **changes)
                                                       if operand.expression == expression else operand
                                                       for operand in check.operands))
    return replace(evidence, traces=[replace(trace, failed_check=changed(trace.failed_check))
                                     for trace in evidence.traces])


def test_a_count_every_rank_made_whole_and_then_summed_is_counted_once_per_rank():
    evidence = sample("counted_by_every_rank_summed")
    found = diagnose(evidence)[0]
    assert found.cause == "counted-by-every-rank"
    assert "`int(seen.item())` = 192 with `expected` = 96: exactly 2 times apart" in found.title
    assert "summed over the ranks (all_reduce at line 11)" in found.title
    assert "split what is counted by rank before the SUM" in found.fix
    # the message says no number: without the values the hooks kept, nothing tells the count was doubled
    assert "counted-by-every-rank" not in causes(replace(evidence, traces=[
        replace(trace, failed_check=None) for trace in evidence.traces]))
    # values that are not world-size apart (here 3 times) are some other mistake
    tripled = diagnose(with_operand(evidence, "int(seen.item())", number=288.0))[0]
    assert tripled.cause == "rank-crashed"
    # the generic ending still says what the check compared, as the rank held it
    assert "rank 0 checked `int(seen.item()) == expected` with int(seen.item()) = " in tripled.fix
    assert "expected = 96" in tripled.fix


def test_a_rank_s_share_compared_with_the_whole_is_told_as_a_share():
    evidence = sample("counted_by_every_rank_share")
    found = diagnose(evidence)[0]
    assert found.cause == "counted-by-every-rank"
    assert "`len(dataset)` = 120 with `processed.item()` = 60" in found.title and "this rank's share" in found.title
    assert "all_reduce SUM of `processed`" in found.fix
    # nothing in the code splits by rank: the finding cannot say which side is wrong, and says both
    unsplit = diagnose(with_source(evidence, "shard = dataset[rank::world]", "shard = dataset[:60]"))[0]
    assert unsplit.cause == "counted-by-every-rank" and "one side counts once per rank" in unsplit.title
    # a share of a third is not what 2 ranks make
    assert "counted-by-every-rank" not in causes(with_operand(evidence, "processed.item()", number=40.0))
