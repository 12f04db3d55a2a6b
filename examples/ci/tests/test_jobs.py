"""Whole jobs started from a test, as `lab torchrun` and `lab exec` start them: the `lab_cluster` fixture."""

from pathlib import Path

TRAIN = Path(__file__).parent.parent / "train.py"


def test_training_run_keeps_replicas_equal(lab_cluster):
    result = lab_cluster.torchrun(TRAIN)
    assert result.passed, result.why
    assert sorted(result.ranks) == [0, 1]
    assert all(run.exit_code == 0 for run in result.ranks.values())
    assert "rank 1 of 2: replicas equal" in result.output(1)


def test_a_command_on_every_node(lab_cluster):
    result = lab_cluster.exec(["sh", "-c", "echo {rank} of {world_size} on $(hostname)"])
    assert result.passed
    assert [result.output(rank) for rank in (0, 1)] == ["0 of 2 on node0", "1 of 2 on node1"]


def test_a_failed_job_says_why(lab_cluster):
    result = lab_cluster.exec(["python", "-c", "import os; assert os.environ['NODE_RANK'] == '0', 'not on node0'"])
    assert not result.passed
    assert result.exit_codes == {0: 0, 1: 1}
    assert "not on node0" in result.output(1)
