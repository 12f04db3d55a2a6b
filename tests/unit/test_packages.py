"""Your packages: requirement lines as the spec keeps them, pip's failures as one line, the remembered resolution."""

import os
from pathlib import Path

import pytest

from lab.errors import ImageError, SpecError
from lab.model.requirements import pinned_torch, read_requirements, requirement_lines, requirement_names
from lab.model.spec import LabSpec
from lab.nodes import packages
from lab.nodes.image import Target
from lab.nodes.packages import Resolution, cached_resolution, resolution_error, resolution_key

SAMPLES = Path(__file__).parent / "pip_samples"
TARGET = Target(arch="x86_64")
TORCH = "2.13.0+cpu"
pytestmark = pytest.mark.usefixtures("own_lab_home")


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


# --- requirement lines ---------------------------------------------------------------------------------------
def test_a_requirements_file_is_read_with_includes_comments_continuations_and_local_paths(tmp_path):
    (tmp_path / "wheels").mkdir()
    wheel = tmp_path / "wheels" / "mypkg-1.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel")
    (tmp_path / "base.txt").write_text("numpy>=1.26  # the nodes' numpy\n")
    (tmp_path / "requirements.txt").write_text(
        "# training stack\n"
        "-r base.txt\n"
        "lightning==2.5.1\n"
        "transformers>=4.40,\\\n  <5\n"
        "accelerate[testing] ; python_version >= '3.9'\n"
        "\n"
        "./wheels/mypkg-1.0-py3-none-any.whl\n"
        "--find-links=wheels\n")
    lines = read_requirements(tmp_path / "requirements.txt")
    assert lines == ["numpy>=1.26", "lightning==2.5.1", "transformers>=4.40,  <5",
                     "accelerate[testing] ; python_version >= '3.9'", str(wheel), f"--find-links {tmp_path / 'wheels'}"]
    assert requirement_names(lines) == ["numpy", "lightning", "transformers", "accelerate", "mypkg"]


def test_files_then_specs_without_repeats(tmp_path):
    (tmp_path / "r.txt").write_text("six==1.16.0\n")
    assert requirement_lines((str(tmp_path / "r.txt"),), ("six==1.16.0", "tqdm")) == ("six==1.16.0", "tqdm")


@pytest.mark.parametrize("text, says", [
    ("six=1", "is not a requirement"),
    ("./missing.whl", "is not a file here"),
    ("-e .", "is not supported"),
])
def test_bad_lines_are_one_line_errors(tmp_path, text, says):
    (tmp_path / "r.txt").write_text(text + "\n")
    with pytest.raises(SpecError, match=says):
        read_requirements(tmp_path / "r.txt")


def test_a_missing_file_and_an_include_loop_are_refused(tmp_path):
    with pytest.raises(SpecError, match="is not a file"):
        read_requirements(tmp_path / "nope.txt")
    (tmp_path / "a.txt").write_text("-r a.txt\n")
    with pytest.raises(SpecError, match="include loop"):
        read_requirements(tmp_path / "a.txt")


def test_a_url_requirement_is_not_taken_for_a_local_file():
    assert requirement_lines((), ("mypkg @ https://example.invalid/mypkg-1.0.tar.gz",)) == \
        ("mypkg @ https://example.invalid/mypkg-1.0.tar.gz",)


@pytest.mark.parametrize("lines, pinned", [
    (["torch==2.12.0", "lightning"], "2.12.0"),
    (["torch>=2.2"], None),          # a range: the lab's torch, checked by the resolver
    (["torch==2.*"], None),
    (["torchvision==0.15.1"], None),  # another project whose name starts with torch
    ([], None),
])
def test_only_an_exact_torch_pin_changes_the_nodes_torch(lines, pinned):
    assert pinned_torch(lines) == pinned


def test_requirements_are_part_of_the_spec():
    plain, with_packages = LabSpec(name="a"), LabSpec(name="a", requirements=["six==1.16.0"])
    assert with_packages.requirements == ("six==1.16.0",)
    assert plain.fingerprint() != with_packages.fingerprint()
    assert LabSpec.from_dict(with_packages.to_dict()) == with_packages


def test_packages_cannot_go_into_the_hosts_own_python():
    with pytest.raises(SpecError, match="--image host"):
        LabSpec(name="a", image="host", requirements=("six",))


# --- pip's failures, as pip printed them --------------------------------------------------------------------
def test_a_package_that_needs_another_torch_is_named():
    error = resolution_error(sample("torch_wanted.txt"), TORCH, TARGET, Path("log"))
    assert str(error) == f"torchvision 0.15.1 needs torch==2.0.0, but the nodes run torch {TORCH}"
    assert "torch==VERSION" in error.hint


def test_two_pins_that_conflict_are_named():
    error = resolution_error(sample("two_pins_conflict.txt"), TORCH, TARGET, Path("log"))
    assert "six==1.16.0" in str(error) and "six==1.17.0" in str(error)
    assert "needs torch" not in str(error)


def test_a_torch_range_the_nodes_do_not_run_is_named():
    output = ("The conflict is caused by:\n    The user requested torch<2\n"
              f"    The user requested (constraint) torch=={TORCH}\n\n")
    assert "ask for torch<2, but the nodes run" in str(resolution_error(output, TORCH, TARGET, Path("log")))


def test_an_unknown_package_and_one_without_a_wheel_differ(monkeypatch):
    monkeypatch.setattr(packages, "_on_index", lambda name: False)
    unknown = resolution_error(sample("unknown_package.txt"), TORCH, TARGET, Path("log"))
    assert str(unknown) == "package 'nonexistent-pkg-zzq' was not found on the package index"
    monkeypatch.setattr(packages, "_on_index", lambda name: name == "pycairo")
    no_wheel = resolution_error(sample("no_wheel.txt"), TORCH, TARGET, Path("log"))
    assert str(no_wheel).startswith("pycairo==1.26.0 has no wheel for the nodes (Python 3.11, manylinux x86_64)")
    assert "pip wheel" in no_wheel.hint


def test_a_success_and_an_unrelated_failure_are_not_explained():
    assert resolution_error(sample("success.txt"), TORCH, TARGET, Path("log")) is None
    assert resolution_error("ERROR: Could not install packages due to an OSError", TORCH, TARGET, Path("log")) is None


def test_the_downloaded_wheels_are_read_from_pips_lines():
    wheels = [packages.DOWNLOADED.match(line.strip()) for line in sample("success.txt").splitlines()]
    assert [Path(m.group("path")).name for m in wheels if m] == ["six-1.17.0-py2.py3-none-any.whl",
                                                                 "tqdm-4.70.1-py3-none-any.whl"]


# --- the remembered resolution and the layer's tag -------------------------------------------------------------
def test_the_key_changes_with_each_input_and_with_a_rebuilt_local_wheel(tmp_path):
    wheel = tmp_path / "mypkg-1.0-py3-none-any.whl"
    wheel.write_bytes(b"one")
    base = resolution_key((str(wheel),), TARGET, TORCH)
    assert resolution_key((str(wheel),), TARGET, TORCH) == base
    assert resolution_key((str(wheel), "six"), TARGET, TORCH) != base
    assert resolution_key((str(wheel),), TARGET, "2.12.0") != base
    assert resolution_key((str(wheel),), Target(python=(3, 12), arch="x86_64"), TORCH) != base
    wheel.write_bytes(b"rebuilt")
    os.utime(wheel, ns=(1, 1))
    assert resolution_key((str(wheel),), TARGET, TORCH) != base


def test_an_unchanged_resolution_runs_no_pip(monkeypatch, tmp_path):
    house = packages.wheelhouse_dir()
    house.mkdir(parents=True)
    (house / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"w")
    calls = []

    def fake_run_logged(command, log, on_line):
        calls.append(command)
        on_line(f"Saved {house}/six-1.16.0-py2.py3-none-any.whl")
        return 0, []

    monkeypatch.setattr(packages, "run_logged", fake_run_logged)
    first = packages.resolve(("six==1.16.0",), TARGET, TORCH, lambda line: None)
    again = packages.resolve(("six==1.16.0",), TARGET, TORCH, lambda line: None)
    assert first == again == Resolution(("six-1.16.0-py2.py3-none-any.whl",))
    assert len(calls) == 1 and "--only-binary=:all:" in calls[0]
    (house / "six-1.16.0-py2.py3-none-any.whl").unlink()  # a wheel gone from the cache: resolved again
    assert cached_resolution(("six==1.16.0",), TARGET, TORCH) is None


def test_a_failed_resolution_is_one_line_and_not_remembered(monkeypatch):
    def failing(command, log, on_line):
        log.write(sample("torch_wanted.txt"))
        log.flush()
        return 1, []

    monkeypatch.setattr(packages, "run_logged", failing)
    with pytest.raises(ImageError, match="torchvision 0.15.1 needs torch==2.0.0"):
        packages.resolve(("torchvision==0.15.1",), TARGET, TORCH, lambda line: None)
    assert cached_resolution(("torchvision==0.15.1",), TARGET, TORCH) is None


def test_the_layer_tag_names_the_base_the_interpreter_and_the_set():
    resolution = Resolution(("six-1.16.0-py2.py3-none-any.whl", "tqdm-4.70.1-py3-none-any.whl"))
    tag = resolution.layer_tag("lab-node:abc", "/opt/lab-venv/bin/python")
    assert tag.startswith("lab-pkgs:") and tag == Resolution(tuple(reversed(resolution.wheels))).layer_tag(
        "lab-node:abc", "/opt/lab-venv/bin/python")
    assert tag != resolution.layer_tag("lab-node:def", "/opt/lab-venv/bin/python")
    assert tag != resolution.layer_tag("lab-node:abc", "/opt/conda/bin/python")
    assert resolution.pins() == ["six==1.16.0", "tqdm==4.70.1"]


# --- lab doctor: the same versions everywhere -------------------------------------------------------------------
def doctor_nodes(*versions):
    from lab.jobs.doctor import NodeDiagnosis

    return [NodeDiagnosis(index, f"node{index}", {"python": "3.11.2", "torch": torch, "packages": packages}, None)
            for index, (torch, packages) in enumerate(versions)]


def test_doctor_names_the_node_whose_versions_differ():
    from lab.jobs.doctor import compare_versions

    nodes = doctor_nodes((TORCH, {"six": "1.16.0"}), ("2.12.0", {"six": "1.16.0"}), (TORCH, {"six": None}))
    compare_versions(nodes)
    assert nodes[0].problems == []
    assert nodes[1].problems == [f"torch 2.12.0 here, torch {TORCH} on node0, node2"]
    assert nodes[2].problems == ["six missing here, six 1.16.0 on node0, node1"]


def test_doctor_is_quiet_when_every_node_agrees_and_says_when_none_has_a_package():
    from lab.jobs.doctor import compare_versions

    same = doctor_nodes((TORCH, {"six": "1.16.0"}), (TORCH, {"six": "1.16.0"}))
    compare_versions(same)
    assert all(not node.problems for node in same)
    none = doctor_nodes((TORCH, {"six": None}), (TORCH, {"six": None}))
    compare_versions(none)
    assert all(node.problems == ["six is not installed (the lab's requirements ask for it)"] for node in none)
