"""What an installed package needs: every third-party import declared, shipped folders found, state located."""

import ast
import sys
from importlib.metadata import packages_distributions

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from lab import bench, paths
from lab.errors import RunError, SpecError
from lab.jobs.exercises import discover

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

# The code that runs from an installed package: lab/ itself and the helper every exercise imports on the nodes.
SHIPPED_CODE = [*sorted((paths.PACKAGE_DIR).rglob("*.py")), paths.resource("exercises") / "labkit.py"]


def imported_top_level_modules(source: str) -> set[str]:
    """Absolute imports anywhere in the module (also the lazy ones inside functions)."""
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules.add(node.module.split(".")[0])
    return modules


# Imports a part of lab makes only where something else is sure to be there: the pytest plugin runs inside pytest.
HOSTED = {"pytest": paths.PACKAGE_DIR / "testing"}


def declared_distributions() -> set[str]:
    project = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["project"]
    return {canonicalize_name(Requirement(line).name) for line in project["dependencies"]}


def test_every_third_party_import_is_declared():
    owners = packages_distributions()
    declared = declared_distributions()
    undeclared = {}
    for path in SHIPPED_CODE:
        for module in imported_top_level_modules(path.read_text()) - set(sys.stdlib_module_names) - {"lab"}:
            if module in HOSTED and HOSTED[module] in path.parents:
                continue
            distributions = {canonicalize_name(name) for name in owners.get(module, [])}
            if not distributions & declared:
                undeclared.setdefault(module, []).append(str(path.relative_to(paths.REPO_ROOT)))
    assert not undeclared, f"imported but not in pyproject.toml's dependencies: {undeclared}"


def test_the_walk_sees_lazy_and_dotted_imports():
    source = "import os.path\nfrom yaml import safe_load\nfrom . import sibling\ndef f():\n    import cryptography.x\n"
    assert imported_top_level_modules(source) == {"os", "yaml", "cryptography"}


def test_stack_dumps_tool_is_declared():
    assert "py-spy" in declared_distributions()


def test_checkout_reads_the_repository_folders():
    assert paths.in_checkout()
    for name in paths.RESOURCES:
        assert paths.resource(name) == paths.REPO_ROOT / name and paths.resource(name).is_dir()


def test_installed_package_reads_its_bundled_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUNDLED", tmp_path)
    assert not paths.in_checkout()
    assert paths.resource("playbooks") == tmp_path / "playbooks"
    with pytest.raises(ValueError):
        paths.resource("bench")


def test_no_exercises_is_an_error_with_a_hint(tmp_path):
    with pytest.raises(SpecError) as raised:
        discover(tmp_path)
    assert str(tmp_path) in raised.value.message and "pip install ." in raised.value.hint


def test_bench_from_an_installed_package_says_where_to_run_it(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUNDLED", tmp_path)
    with pytest.raises(RunError) as raised:
        bench.run_bench(bench.bench_argv(["up"], 2, False, 1, "b", False, False))
    assert "checkout" in raised.value.message and "make bench" in raised.value.hint


def test_state_location_and_why(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_HOME", raising=False)
    nested = tmp_path / "project" / "sub"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    assert paths.locate_state() == paths.StateLocation(nested / ".lab", "new")
    (tmp_path / "project" / ".lab").mkdir()
    assert paths.locate_state() == paths.StateLocation(tmp_path / "project" / ".lab", "found")
    monkeypatch.setenv("LAB_HOME", "relative-home")
    assert paths.locate_state() == paths.StateLocation(nested / "relative-home", "LAB_HOME")
    assert paths.state_dir() == nested / "relative-home"
