"""Graduation: `lab run --inventory` reaches the lab's containers only as SSH hosts of a hand-written inventory."""

import json

import pytest

from lab import paths

from .conftest import lab, lab_json

# One worker for the module's tests under pytest-xdist: they share the state folder of the inventory's hosts.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.xdist_group("inventory_hosts")]


def inventory_of(lab_name: str, folder, *extra: str):
    """A hand-written inventory whose hosts are the lab's containers, reached over SSH on their published ports."""
    nodes = lab_json("status", "--name", lab_name)[lab_name]["nodes"]
    key = paths.lab_dir(lab_name) / "ssh" / "id_ed25519"
    inventory = folder / "hosts.ini"
    inventory.write_text("\n".join(
        ["[nodes]"]
        + [f"n{node['index']} ansible_host=127.0.0.1 ansible_port={node['ssh_port']}" for node in nodes]
        + ["", "[nodes:vars]", "ansible_user=root", f"ansible_ssh_private_key_file={key}",
           "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR'",
           "ansible_python_interpreter=/opt/lab-venv/bin/python",
           "# 127.0.0.1 is how this machine reaches the nodes; they reach node0 by its name",
           "master_addr=node0",
           "lab_exercises_dir=/lab/exercises", "lab_shared_dir=/lab/shared", *extra, ""]))
    return inventory


def test_exercise01_runs_on_the_hosts_of_an_inventory(two_nodes, tmp_path):
    inventory = inventory_of(two_nodes, tmp_path)
    result = lab("run", "exercise01", "--inventory", str(inventory), "--json", timeout=600)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    [record] = json.loads(result.stdout)
    assert record["status"] == "passed" and record["lab"] == "inventory-hosts"
    assert all(check["passed"] for check in record["checks"]) and len(record["checks"]) > 3
    # The results were copied back over ssh into the inventory's own folder, not read from the lab's mount.
    copied = paths.lab_dir("inventory-hosts") / "shared" / "runs" / record["run_id"]
    assert sorted(path.name for path in (copied / "results" / "main").glob("rank*.json")) == ["rank0.json", "rank1.json"]



def test_a_workspace_in_the_inventory_is_copied_when_it_changed_and_runs_as_a_package(two_nodes, tmp_path):
    project = tmp_path / "project"
    (project / "mypkg").mkdir(parents=True)
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "hello.py").write_text("import os\nprint('HELLO', os.environ['NODE_RANK'], os.getcwd())\n")
    (project / "env").mkdir()
    (project / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a virtual environment: never copied
    inventory = inventory_of(two_nodes, tmp_path, f"lab_workspace={project}")

    def run_hello():
        result = lab("exec", "--inventory", str(inventory), "--", "python", "-m", "mypkg.hello", timeout=300)
        assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
        said = sorted(line.split("| HELLO ", 1)[1].split()[:2] for line in result.stdout.splitlines() if "| HELLO " in line)
        assert said == [["0", str(project)], ["1", str(project)]], result.stdout
        return result.stdout + result.stderr  # progress lines go where the helper puts them

    assert f"workspace {project}: copied to n0, n1 (2 files" in run_hello()
    assert f"workspace {project}: unchanged since the last copy on every host" in run_hello()
    (project / "mypkg" / "hello.py").write_text("import os\nprint('HELLO', os.environ['NODE_RANK'], os.getcwd(), 2)\n")
    assert f"workspace {project}: copied to n0, n1" in run_hello()
    listed = lab("exec", "--inventory", str(inventory), "--", "ls", "-A", str(project), timeout=300)
    assert "mypkg" in listed.stdout and "env" not in listed.stdout.split(), listed.stdout


def test_a_workspace_that_is_not_a_folder_here_is_refused_in_one_line(tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[nodes]\nn0 ansible_host=127.0.0.1\n[nodes:vars]\nlab_workspace=relative/project\n")
    result = lab("exec", "--inventory", str(inventory), "--", "true")
    assert result.returncode != 0 and "lab_workspace=relative/project is not a folder on this machine" in result.stderr
    assert "Traceback" not in result.stderr
