import pytest

from lab.errors import SpecError
from lab.model.spec import PROCESS_MEMORY, LabSpec, parse_memory


def test_defaults_and_nodes():
    spec = LabSpec()
    assert spec.nodes == 2 and spec.name == "default"
    assert [n.hostname for n in spec.node_list()] == ["node0", "node1"]
    assert spec.master_addr == "node0"


@pytest.mark.parametrize("nodes", [0, -1, 65])
def test_node_count_out_of_range(nodes):
    with pytest.raises(SpecError):
        LabSpec(nodes=nodes)


@pytest.mark.parametrize("name", ["", "UPPER", "1abc", "has space", "x" * 40, "a_b"])
def test_bad_names(name):
    with pytest.raises(SpecError) as error:
        LabSpec(name=name)
    assert error.value.hint


@pytest.mark.parametrize("text,expected", [("512m", 512 * 1024**2), ("2g", 2 * 1024**3), ("1.5G", int(1.5 * 1024**3)), ("2048MB", 2048 * 1024**2)])
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["lots", "12q", "1m", ""])
def test_parse_memory_rejects(text):
    with pytest.raises(SpecError):
        parse_memory(text)


def test_fingerprint_tracks_every_field():
    base = LabSpec(nodes=2)
    assert base.fingerprint() == LabSpec(nodes=2).fingerprint()
    assert base.fingerprint() != LabSpec(nodes=3).fingerprint()
    assert base.fingerprint() != LabSpec(nodes=2, cpus=1.0).fingerprint()
    assert LabSpec.from_dict(base.to_dict()) == base


def test_check_fits_refuses_what_the_host_cannot_hold():
    host_memory = 4 * 1024**3
    LabSpec(nodes=4).check_fits(2, host_memory)
    with pytest.raises(SpecError) as error:
        LabSpec(nodes=64).check_fits(2, host_memory)
    assert f"--nodes {host_memory // (3 * PROCESS_MEMORY)}" in error.value.hint  # 2 workers + torchrun's agent
    with pytest.raises(SpecError):
        LabSpec(nodes=2, cpus=4).check_fits(2, host_memory)
    with pytest.raises(SpecError):
        LabSpec(nodes=2, memory=3 * 1024**3).check_fits(2, host_memory)


def test_a_node_is_counted_for_its_processes_or_its_memory_limit():
    """One worker per node holds less than the default two; an explicit --memory is what the node can take."""
    host_memory = 24105 * 1024**2  # the 24 GiB machine the numbers were measured on
    assert LabSpec(nproc_per_node=1).node_memory() == 2 * PROCESS_MEMORY
    assert LabSpec(nproc_per_node=4).node_memory() == 5 * PROCESS_MEMORY
    LabSpec(nodes=60, nproc_per_node=1).check_fits(2, host_memory)
    with pytest.raises(SpecError):
        LabSpec(nodes=60).check_fits(2, host_memory)
    with pytest.raises(SpecError):
        LabSpec(nodes=64, nproc_per_node=1).check_fits(2, host_memory)
    LabSpec(nodes=64, nproc_per_node=1, memory=320 * 1024**2).check_fits(2, host_memory)

