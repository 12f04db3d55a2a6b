"""`lab bench` builds the benchmark command line from its options and refuses unknown parts."""

import sys
from pathlib import Path

import pytest

from lab.bench import BENCH_SCRIPT, bench_argv
from lab.errors import SpecError


def test_options_reach_the_benchmark_script():
    argv = bench_argv(["allreduce", "memory"], 4, cold=True, rounds=3, name="b1", keep=False, as_json=True,
                      results=Path("/tmp/out"))
    assert argv[:2] == [sys.executable, str(BENCH_SCRIPT)] and BENCH_SCRIPT.is_file()
    options = " ".join(argv[2:])
    for expected in ("--only allreduce,memory", "--max-nodes 4", "--rounds 3", "--name b1", "--results /tmp/out",
                     "--cold", "--json"):
        assert expected in options
    assert "--keep" not in argv


@pytest.mark.parametrize("parts", [["nope"], [], ["up", "allreduc"]])
def test_unknown_parts_are_refused(parts):
    with pytest.raises(SpecError) as raised:
        bench_argv(parts, 16, cold=False, rounds=2, name="bench", keep=False, as_json=False)
    assert "allreduce" in raised.value.hint
