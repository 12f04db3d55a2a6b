"""`lab up --workspace DIR` on a real engine: the project at the same path on every node, read-only, the working
directory of `lab exec`/`lab torchrun`, `-m pkg.module` across 2 nodes, nothing copied into the run record."""

import pytest

from lab import paths

from .conftest import lab, lab_json

# One worker for the module's tests under pytest-xdist: they share the module's lab, made once.
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("workspace_lab")]

TRAIN = """import os, torch, torch.distributed as dist
from mypkg import helpers
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("TRAIN", dist.get_rank(), dist.get_world_size(), t.item(), os.getcwd(), helpers.NAME)
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def workspace_lab(tmp_path_factory):
    project = tmp_path_factory.mktemp("project")
    (project / "mypkg").mkdir()
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "helpers.py").write_text("NAME = 'helpers-imported'\n")
    (project / "mypkg" / "train.py").write_text(TRAIN)
    (project / "tools").mkdir()
    (project / "tools" / "where.py").write_text("import os\nfrom mypkg import helpers\nprint('WHERE', os.getcwd(), helpers.NAME)\n")
    name = "itwork"
    lab_json("up", "--nodes", "2", "--name", name, "--workspace", str(project))
    yield name, project
    lab("down", "--name", name)


def marked(output: str, mark: str) -> list[list[str]]:
    return [line.split(f"| {mark} ", 1)[1].split() for line in output.splitlines() if f"| {mark} " in line]


def test_torchrun_runs_a_module_of_the_workspace_across_nodes_from_the_workspace(workspace_lab):
    name, project = workspace_lab
    result = lab("torchrun", "--name", name, "-m", "mypkg.train", check=True)
    lines = marked(result.stdout + result.stderr, "TRAIN")
    assert sorted(words[0] for words in lines) == ["0", "1"]
    assert all(words[1:] == ["2", "3.0", str(project), "helpers-imported"] for words in lines)


def test_a_script_of_the_workspace_runs_where_it_is_and_nothing_is_copied(workspace_lab):
    name, project = workspace_lab
    result = lab("torchrun", "--name", name, str(project / "mypkg" / "train.py"), check=True)
    assert len(marked(result.stdout + result.stderr, "TRAIN")) == 2
    run_id = next(line for line in result.stdout.splitlines() if "record:" in line).rsplit("/", 1)[1].strip()
    shared = paths.lab_dir(name) / "shared" / "runs" / run_id / "work"
    assert not any(shared.rglob("*.py"))


def test_exec_works_from_the_workspace_which_is_read_only(workspace_lab):
    name, project = workspace_lab
    out = lab("exec", "--name", name, "--", "python", "tools/where.py", check=True).stdout
    assert [words for words in marked(out, "WHERE")] == [[str(project), "helpers-imported"]] * 2
    denied = lab("exec", "--name", name, "--node", "0", "--", "touch", str(project / "written-by-a-node"))
    assert denied.returncode != 0 and "Read-only file system" in denied.stdout + denied.stderr
    assert not (project / "written-by-a-node").exists()
    assert lab_json("status", "--name", name)[name]["spec"]["workspace"] == str(project)
