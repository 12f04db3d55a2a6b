"""launch() with host processes as nodes: the early stop when a node has failed, and what it records."""

import sys

from lab.jobs.launch import TORCHRUN_GAVE_UP, launch
from lab.jobs.transports import LocalTransport


class Collect:
    def __init__(self):
        self.events = []

    def line(self, node, text):
        pass

    def event(self, text):
        self.events.append(text)


def node_commands(*programs: str) -> dict:
    return {index: ([sys.executable, "-c", program], {}) for index, program in enumerate(programs)}


def run(tmp_path, *programs, **options):
    transport = LocalTransport(tmp_path / "shared", tmp_path)
    reporter = Collect()
    result = launch(transport, node_commands(*programs), f"launch-{tmp_path.name}", options.pop("timeout", 60),
                    reporter, **options)
    return result, reporter


def test_a_failed_node_stops_the_waiting_ones_after_the_grace(tmp_path):
    result, reporter = run(tmp_path, "import sys; sys.exit(3)", "import time; time.sleep(120)",
                                    fail_grace=0.5)
    assert not result.timed_out
    assert result.exit_codes == {0: 3, 1: None}  # node1 was still waiting: the lab killed it
    assert result.stopped.startswith("node0 (exit 3) failed while node1 kept running")
    assert any(event == result.stopped for event in reporter.events)


def test_torchrun_that_gave_up_but_hangs_in_shutdown_is_stopped_too(tmp_path):
    hung_agent = f"print({TORCHRUN_GAVE_UP!r} + ': train.py FAILED', flush=True); import time; time.sleep(120)"
    result, _ = run(tmp_path, hung_agent, hung_agent, fail_grace=0.5)
    assert not result.timed_out and result.exit_codes == {0: None, 1: None}
    assert "node0 (torchrun gave up), node1 (torchrun gave up) failed" in result.stopped


def test_no_early_stop_for_a_node_taken_away_on_purpose_or_when_switched_off(tmp_path):
    programs = ("import sys; sys.exit(137)", "import time; time.sleep(3)")
    result, _ = run(tmp_path, *programs, fail_grace=0.5, expendable=frozenset({0}))
    assert result.stopped == "" and result.exit_codes == {0: 137, 1: 0}
    result, _ = run(tmp_path, *programs, fail_grace=None)
    assert result.stopped == "" and result.exit_codes == {0: 137, 1: 0}


def test_a_timeout_marks_the_nodes_the_lab_killed(tmp_path):
    result, _ = run(tmp_path, "import time; time.sleep(120)", "print('done')", timeout=1)
    assert result.timed_out and result.exit_codes == {0: None, 1: 0}
