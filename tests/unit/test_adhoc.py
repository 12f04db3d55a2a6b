"""lab exec/torchrun inputs: placeholders and --env."""

import pytest

from lab.errors import SpecError
from lab.jobs.adhoc import fill_placeholders, parse_env


def test_placeholders_filled_per_node():
    values = {"node_rank": 1, "nnodes": 2, "rank": 1, "world_size": 2, "master_addr": "node0", "master_port": 29500}
    argv = ["python", "t.py", "--rank", "{rank}", "--world-size={world_size}", "--init=tcp://{master_addr}:{master_port}", "{{literal}}"]
    assert fill_placeholders(argv, values) == ["python", "t.py", "--rank", "1", "--world-size=2", "--init=tcp://node0:29500", "{literal}"]


@pytest.mark.parametrize("arg", ["{nope}", "{rank", "{0}"])
def test_bad_placeholders(arg):
    with pytest.raises(SpecError):
        fill_placeholders([arg], {"rank": 0})


def test_parse_env():
    assert parse_env(("A=1", "B=x=y", "C=")) == {"A": "1", "B": "x=y", "C": ""}
    for bad in ("A", "=1", "1A=2"):
        with pytest.raises(SpecError):
            parse_env((bad,))
