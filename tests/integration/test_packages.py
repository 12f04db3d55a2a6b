"""`lab up --pip/--requirements` on a real engine: real packages from the index into the wheelhouse, a real layer,
real nodes that import them; bad requirements are one line and leave nothing."""

import json

import pytest

from lab import paths

from .conftest import lab, lab_json, labelled

pytestmark = pytest.mark.docker
# One worker for the tests of the module's lab under pytest-xdist: it is made once.
ON_PACKAGED = pytest.mark.xdist_group("packaged")

VERSIONS = "import six, tqdm, sys; print('VERSIONS', six.__version__, tqdm.__version__, sys.executable)"


@pytest.fixture(scope="module")
def packaged(client, tmp_path_factory):
    """A 2-node lab with two small packages: one pinned by --pip, one ranged in a requirements file; the layer
    made anew (a layer of these requirements from an earlier run is removed first)."""
    for image in client.images.list(name="lab-pkgs"):
        if image.labels.get("io.lab.image.requirements") == "tqdm>=4.60 six==1.16.0":
            client.images.remove(image.id, force=True)
    folder = tmp_path_factory.mktemp("project")
    (folder / "requirements.txt").write_text("# the job's own packages\ntqdm>=4.60\n")
    name = "itpkgs"
    result = lab_json("up", "--nodes", "2", "--name", name, "--pip", "six==1.16.0",
                      "--requirements", str(folder / "requirements.txt"))
    yield name, folder, result
    lab("down", "--name", name)


@ON_PACKAGED
def test_every_node_imports_the_packages_from_a_layer_on_the_node_image(client, packaged):
    name, _, result = packaged
    assert result["changed"]
    out = lab("exec", "--name", name, "--", "python", "-c", VERSIONS, check=True).stdout
    lines = [line.split("VERSIONS", 1)[1].split() for line in out.splitlines() if "| VERSIONS" in line]
    assert len(lines) == 2 and all(words[0] == "1.16.0" and words[2] == "/opt/lab-venv/bin/python" for words in lines)
    image = client.images.get(client.containers.get(f"lab-{name}-node0").attrs["Config"]["Image"])
    assert image.tags[0].startswith("lab-pkgs:")
    assert "six==1.16.0" in image.labels["io.lab.image.requirements"]
    # installed by uv (mounted for the install, not left in the layer), .pyc written as pip would
    install_log = (paths.logs_dir() / f"packages-layer-{image.tags[0].replace(':', '-')}.log").read_text()
    assert "Installed 2 packages" in install_log and "uv failed" not in install_log, install_log
    listing = lab("exec", "--name", name, "--", "sh", "-c", "test -e /tmp/lab-packages/uv || echo NO-UV-LEFT; "
                  "ls $(python -c 'import six, os; print(os.path.dirname(six.__file__))')/__pycache__ | "
                  "grep -c '^six\\.' | sed 's/^/PYC /'", check=True).stdout
    assert listing.count("| NO-UV-LEFT") == 2 and listing.count("| PYC 1") == 2, listing


@ON_PACKAGED
def test_status_and_dry_run_show_the_requirements(packaged):
    name, folder, _ = packaged
    spec = lab_json("status", "--name", name)[name]["spec"]
    assert spec["requirements"] == ["tqdm>=4.60", "six==1.16.0"]
    plan = json.loads(lab("up", "--nodes", "2", "--name", name, "--pip", "six==1.16.0", "--requirements",
                          str(folder / "requirements.txt"), "--dry-run", "--json", check=True).stdout)
    assert plan["plan"]["spec"]["requirements"] == ["tqdm>=4.60", "six==1.16.0"]
    assert plan["plan"]["containers"][0]["image"].startswith("lab-pkgs:")
    assert any("would change nothing" in note for note in plan["notes"])


@ON_PACKAGED
def test_the_same_requirements_again_change_nothing_and_other_ones_are_refused(packaged):
    name, folder, _ = packaged
    again = lab_json("up", "--nodes", "2", "--name", name, "--pip", "six==1.16.0",
                     "--requirements", str(folder / "requirements.txt"))
    assert not again["changed"]
    other = lab("up", "--nodes", "2", "--name", name, "--pip", "six==1.17.0")
    assert other.returncode == 5 and "different spec" in other.stderr and "--recreate" in other.stderr


@pytest.mark.parametrize("requirement, says", [
    ("nonexistent-package-for-lab-tests", "package 'nonexistent-package-for-lab-tests' was not found"),
    ("torchvision==0.15.1", "torchvision 0.15.1 needs torch==2.0.0, but the nodes run torch"),
])
def test_a_bad_requirement_is_one_line_and_leaves_nothing(client, fresh_name, requirement, says):
    result = lab("up", "--nodes", "2", "--name", fresh_name, "--pip", requirement)
    assert result.returncode == 4
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0] and "Traceback" not in result.stderr
    assert labelled(client, fresh_name) == ([], [], [])


@ON_PACKAGED
def test_doctor_compares_the_packages_and_names_a_node_that_differs(client, packaged):
    """Last in this file: it takes a package away from node1."""
    name, _, _ = packaged
    report = lab_json("doctor", "--name", name)
    assert report["ok"] and all(node["packages"] == {"tqdm": node["packages"]["tqdm"], "six": "1.16.0"}
                                for node in report["nodes"])
    removed = client.containers.get(f"lab-{name}-node1").exec_run(
        ["/opt/lab-venv/bin/python", "-m", "pip", "uninstall", "-y", "six"])
    assert removed.exit_code == 0, removed.output
    result = lab("doctor", "--name", name, "--json")
    assert result.returncode == 1
    nodes = json.loads(result.stdout)["nodes"]
    assert nodes[0]["problems"] == [] and nodes[1]["problems"] == ["six missing here, six 1.16.0 on node0"]


@ON_PACKAGED
def test_a_package_missing_on_one_node_is_named_as_such(packaged, tmp_path):
    """After the doctor test took six away from node1: a job importing it fails there only, and the diagnosis says
    the nodes differ (not that the package is missing everywhere)."""
    name, _, _ = packaged
    script = tmp_path / "uses_six.py"
    script.write_text("import datetime, six, torch.distributed as dist\n"
                      "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=10))\n"
                      "dist.barrier()\n")
    result = lab("torchrun", "--name", name, "--timeout", "60", "--json", str(script))
    assert result.returncode == 1
    top = json.loads(result.stdout)["diagnosis"][0]
    assert (top["cause"], top["node"]) == ("package-missing-on-nodes", 1), top
    assert "'six' is missing on node1 only" in top["title"] and "lab up --pip" in top["fix"]


def test_a_package_published_as_source_only_is_built_here_and_installed(client):
    """docopt 0.6.2 exists on the index only as a source archive: its wheel is built on this host (pure Python, so
    the nodes take it), lands in the wheelhouse, and the layer's Python imports it."""
    from lab.nodes.image import TARGET, node_image_tag, node_pins, wheelhouse_dir
    from lab.nodes.packages import BUILT_FOLDER, NODE_PYTHON, ensure_layer, resolve

    said = []
    pins = node_pins()
    resolution = resolve(("docopt==0.6.2",), TARGET, pins["torch"], said.append)
    assert resolution.wheels == ("docopt-0.6.2-py2.py3-none-any.whl",)
    assert (wheelhouse_dir() / BUILT_FOLDER / resolution.wheels[0]).is_file()
    assert any("no wheel on the index, building one here from its source archive" in text for text in said)
    tag = ensure_layer(client, node_image_tag(pins), NODE_PYTHON, resolution, ("docopt==0.6.2",), said.append)
    try:
        out = client.containers.run(tag, [NODE_PYTHON, "-c", "import docopt; print(docopt.__version__)"], remove=True,
                                    entrypoint=[], network_mode="none")
        assert out.decode().strip() == "0.6.2"
    finally:
        client.images.remove(tag, force=True)
