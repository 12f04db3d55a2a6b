import importlib.metadata
import re
from pathlib import Path
from types import SimpleNamespace

import docker.errors
import pytest

from lab import paths
from lab.nodes import image
from lab.nodes.bootstrap import BASE_TAG
from lab.errors import ImageError
from lab.nodes.image import CONFIGURED_BASE, PullFailed, Target, resolve_base, select_wheels

PINS = {"torch": "2.13.0+cpu", "numpy": "2.4.6"}
TORCH = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
NUMPY = "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
SYMPY = "sympy-1.14.0-py3-none-any.whl"


pytestmark = pytest.mark.usefixtures("own_lab_home")


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setattr(image, "host_pins", lambda: dict(PINS))
    monkeypatch.setattr(image, "TARGET", Target(arch="x86_64"))


# --- tag ---------------------------------------------------------------------------------------
def test_tag_is_stable_and_names_a_hash(pinned):
    tag = image.node_image_tag()
    assert re.fullmatch(r"lab-node:[0-9a-f]{12}", tag)
    assert image.node_image_tag() == tag


def test_tag_changes_with_each_input(pinned, monkeypatch, tmp_path):
    original = image.node_image_tag()
    changed = set()

    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(image.DOCKERFILE.read_text() + "\nLABEL changed=1\n")
    with monkeypatch.context() as patch:
        patch.setattr(image, "DOCKERFILE", dockerfile)
        changed.add(image.node_image_tag())
    script = tmp_path / "install-venv.sh"
    script.write_text(image.INSTALL_SCRIPT.read_text() + "\necho changed\n")
    with monkeypatch.context() as patch:
        patch.setattr(image, "INSTALL_SCRIPT", script)
        changed.add(image.node_image_tag())
    with monkeypatch.context() as patch:
        patch.setattr(image, "host_pins", lambda: {**PINS, "torch": "2.14.1"})
        changed.add(image.node_image_tag())
    with monkeypatch.context() as patch:
        patch.setattr(image, "host_pins", lambda: {**PINS, "numpy": None})
        changed.add(image.node_image_tag())
    with monkeypatch.context() as patch:
        patch.setattr(image, "TARGET", Target(python=(3, 12), arch="x86_64"))
        changed.add(image.node_image_tag())
    with monkeypatch.context() as patch:
        patch.setattr(image, "TARGET", Target(arch="aarch64"))
        changed.add(image.node_image_tag())
    with monkeypatch.context() as patch:
        patch.setattr(image, "CONFIGURED_BASE", "debian:bookworm-20250520-slim")
        changed.add(image.node_image_tag())

    assert len(changed) == 7 and original not in changed
    assert image.node_image_tag() == original


def test_host_pins_require_torch(monkeypatch):
    def version(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    with pytest.raises(ImageError, match="torch is not installed") as error:
        image.host_pins()
    assert "make setup" in error.value.hint


def test_requirement_lines_pin_what_has_a_version():
    assert image.requirement_lines({"torch": "2.13.0+cpu", "numpy": None}) == ["torch==2.13.0+cpu", "numpy"]


# --- base resolution ---------------------------------------------------------------------------
class FakeEngine:
    def __init__(self, local=(), pull_works=False):
        self.local = set(local)
        self.pull_works = pull_works
        self.calls = []

    def has_image(self, ref):
        self.calls.append(("has", ref))
        return ref in self.local

    def pull(self, ref):
        self.calls.append(("pull", ref))
        if not self.pull_works:
            raise PullFailed("no registry")
        self.local.add(ref)

    def bootstrap(self, on_progress):
        self.calls.append(("bootstrap",))
        on_progress("debootstrap: Retrieving InRelease")
        return BASE_TAG


def test_a_local_configured_base_wins():
    engine = FakeEngine(local={CONFIGURED_BASE, BASE_TAG})
    assert resolve_base(engine, lambda _: None) == CONFIGURED_BASE
    assert engine.calls == [("has", CONFIGURED_BASE)]


def test_a_local_bootstrapped_base_comes_next():
    engine = FakeEngine(local={BASE_TAG}, pull_works=True)
    assert resolve_base(engine, lambda _: None) == BASE_TAG
    assert ("pull", CONFIGURED_BASE) not in engine.calls


def test_pull_before_bootstrap():
    engine = FakeEngine(pull_works=True)
    assert resolve_base(engine, lambda _: None) == CONFIGURED_BASE
    assert engine.calls[-1] == ("pull", CONFIGURED_BASE)


def test_bootstrap_when_the_pull_fails():
    engine, progress = FakeEngine(), []
    assert resolve_base(engine, progress.append) == BASE_TAG
    assert engine.calls == [("has", CONFIGURED_BASE), ("has", BASE_TAG), ("pull", CONFIGURED_BASE), ("bootstrap",)]
    assert any("no registry" in line for line in progress)


# --- wheels ------------------------------------------------------------------------------------
WHEELHOUSE = [
    TORCH,
    "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",  # another torch version
    "torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl",  # another Python
    NUMPY,
    "numpy-2.3.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "numpy-2.4.6-cp311-cp311-manylinux_2_17_aarch64.whl",  # another CPU
    "sympy-1.13.3-py3-none-any.whl",
    SYMPY,
    "markupsafe-3.0.4-cp311-cp311-win_amd64.whl",  # another OS
    "markupsafe-3.0.4-cp311-cp311-manylinux_2_39_x86_64.whl",  # newer glibc than bookworm's
    "markupsafe-3.0.3-cp311-cp311-manylinux2014_x86_64.whl",
    "markupsafe-3.0.3-cp311-cp311-musllinux_1_2_x86_64.whl",
    "jinja2-3.1.6.tar.gz",  # not a wheel
    "not-a-wheel.whl",
]


def test_select_wheels_takes_pins_one_version_each_and_compatible_tags():
    selected = select_wheels(WHEELHOUSE, PINS, Target(arch="x86_64").tags())
    assert selected == {
        "torch": TORCH,
        "numpy": NUMPY,
        "sympy": SYMPY,
        "markupsafe": "markupsafe-3.0.3-cp311-cp311-manylinux2014_x86_64.whl",
    }


def test_select_wheels_takes_the_newest_of_an_unpinned_project():
    selected = select_wheels(WHEELHOUSE, {"torch": "2.13.0+cpu", "numpy": None}, Target(arch="x86_64").tags())
    assert selected["numpy"] == NUMPY


def test_a_pin_without_local_label_matches_a_local_build():
    assert select_wheels([TORCH], {"torch": "2.13.0"}, Target(arch="x86_64").tags()) == {"torch": TORCH}


def test_select_wheels_prefers_the_most_specific_tag_of_one_version():
    generic = "pkg-1.0-py3-none-any.whl"
    native = "pkg-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    assert select_wheels([generic, native], {}, Target(arch="x86_64").tags()) == {"pkg": native}


def test_select_wheels_without_the_pinned_version_leaves_it_out():
    assert "torch" not in select_wheels(WHEELHOUSE, {"torch": "2.12.0"}, Target(arch="x86_64").tags())


def test_target_platforms_and_pip_args():
    intel, arm = Target(arch="x86_64"), Target(arch="aarch64")
    assert intel.platforms()[0] == "manylinux_2_36_x86_64"
    assert {"manylinux2014_x86_64", "manylinux1_x86_64"} <= set(intel.platforms())
    assert "manylinux2014_aarch64" in arm.platforms() and "manylinux1_aarch64" not in arm.platforms()
    args = intel.pip_args()
    assert args[args.index("--python-version") + 1] == "3.11" and "--only-binary=:all:" in args
    assert args.count("--platform") == len(intel.platforms())


class FakePip:
    """Stands in for run_logged: drops `wheels` into the --dest folder, exits with `status`."""

    def __init__(self, wheels, status=0):
        self.wheels, self.status, self.commands = wheels, status, []

    def __call__(self, command, log, on_line):
        self.commands.append(command)
        dest = Path(command[command.index("--dest") + 1])
        assert dest == paths.cache_dir() / "wheelhouse"
        for name in self.wheels:
            (dest / name).write_bytes(b"")
        return self.status, ["ERROR: No matching distribution found for torch==2.13.0+cpu"]


def test_fill_wheelhouse_downloads_once(monkeypatch, tmp_path):
    pip = FakePip([TORCH, NUMPY, SYMPY])
    monkeypatch.setattr(image, "run_logged", pip)
    target = Target(arch="x86_64")
    first = image.fill_wheelhouse(PINS, target, None, tmp_path / "log", lambda _: None)
    assert sorted(p.name for p in first) == sorted([TORCH, NUMPY, SYMPY])
    command = pip.commands[0]
    assert command[1:4] == ["-m", "pip", "download"] and command[-2:] == ["torch==2.13.0+cpu", "numpy==2.4.6"]
    assert "--platform" in command

    progress = []
    assert image.fill_wheelhouse(PINS, target, None, tmp_path / "log", progress.append) == first
    assert len(pip.commands) == 1
    assert progress == ["wheelhouse already holds torch==2.13.0+cpu numpy==2.4.6"]

    image.fill_wheelhouse({**PINS, "numpy": None}, target, None, tmp_path / "log", lambda _: None)
    assert len(pip.commands) == 2  # other requirements: no record of a complete download


def test_fill_wheelhouse_reports_pip_failure(monkeypatch, tmp_path):
    monkeypatch.setattr(image, "run_logged", FakePip([], status=1))
    with pytest.raises(ImageError, match="pip could not download torch==2.13.0\\+cpu") as error:
        image.fill_wheelhouse(PINS, Target(arch="x86_64"), None, tmp_path / "build.log", lambda _: None)
    assert "No matching distribution" in error.value.hint and "build.log" in error.value.hint


def test_fill_wheelhouse_refuses_when_pip_leaves_a_pin_out(monkeypatch, tmp_path):
    monkeypatch.setattr(image, "run_logged", FakePip([TORCH]))
    with pytest.raises(ImageError, match="no Python 3.11, manylinux x86_64 wheel of numpy"):
        image.fill_wheelhouse(PINS, Target(arch="x86_64"), None, tmp_path / "log", lambda _: None)


# --- ensure ------------------------------------------------------------------------------------
class FakeImages:
    def __init__(self, present):
        self.present = set(present)
        self.removed = []

    def get(self, ref):
        if ref not in self.present:
            raise docker.errors.ImageNotFound(ref)
        return SimpleNamespace(attrs={"Config": {"Cmd": ["/bin/sh", "-c", "exec sshd -D"]}})

    def remove(self, image_id):
        self.removed.append(image_id)


class FakeBuildAPI:
    """The engine's build endpoint: streams `chunks`, then the built image's ID unless one of them is an error."""

    def __init__(self, chunks, images):
        self.chunks, self.images, self.builds = chunks, images, []

    def build(self, path, tag, **options):
        context = sorted(str(p.relative_to(path)) for p in Path(path).rglob("*"))
        self.builds.append({"tag": tag, "context": context, **options})
        yield from self.chunks
        if not any("error" in chunk for chunk in self.chunks):
            self.images.present.add("sha256:system")
            yield {"aux": {"ID": "sha256:system"}}


class FakeContainer:
    """The venv install: prints `output`, exits `status`; a commit makes the image it names."""

    def __init__(self, client, image, command, name, volumes, **options):
        self.client, self.image, self.command, self.name, self.options = client, image, command, name, options
        (mounted,) = volumes
        self.mounted = sorted(str(p.relative_to(mounted)) for p in Path(mounted).rglob("*"))
        self.commits, self.removed = [], False

    def start(self):
        pass

    def logs(self, stream, follow):
        yield from self.client.output

    def wait(self):
        return {"StatusCode": self.client.status}

    def commit(self, repository, tag, changes):
        self.commits.append(changes)
        self.client.images.present.add(f"{repository}:{tag}")

    def remove(self, force):
        self.removed = True


class FakeContainers:
    def __init__(self, client):
        self.client, self.made, self.leftovers = client, [], set()

    def get(self, name):
        if name not in self.leftovers:
            raise docker.errors.NotFound(name)
        return SimpleNamespace(remove=lambda force: self.leftovers.discard(name))

    def create(self, image, command, **options):
        self.made.append(FakeContainer(self.client, image, command, **options))
        return self.made[-1]


class FakeClient:
    def __init__(self, present=(), chunks=(), output=(b"Successfully installed torch\n",), status=0):
        self.images = FakeImages(present)
        self.api = FakeBuildAPI(list(chunks), self.images)
        self.containers = FakeContainers(self)
        self.output, self.status = output, status

    def info(self):
        return {"DockerRootDir": str(paths.state_dir())}


@pytest.fixture
def wheels(pinned, monkeypatch):
    house = paths.cache_dir() / "wheelhouse"
    house.mkdir(parents=True)
    (house / TORCH).write_bytes(b"torch")
    monkeypatch.setattr(image, "fill_wheelhouse", lambda *args: [house / TORCH])


def test_warm_ensure_builds_nothing(pinned):
    client = FakeClient(present={image.node_image_tag()})
    assert image.ensure_node_image(client, lambda _: None) == image.node_image_tag()
    assert client.api.builds == []


def test_cold_ensure_builds_the_system_part_then_installs_the_wheels_offline_and_commits(wheels):
    client = FakeClient(present={CONFIGURED_BASE}, chunks=[{"stream": "Step 1/9 : ARG BASE\n"}],
                        output=[b"Processing /tmp/lab-image-build/wheelhouse/torch", b"-2.13.0.whl\nSuccessfully", b" installed\n"])
    progress = []
    tag = image.ensure_node_image(client, progress.append)
    (build,) = client.api.builds
    assert build["tag"] is None and build["buildargs"] == {"BASE": CONFIGURED_BASE}
    assert build["context"] == ["Dockerfile"]  # the wheels never go to the builder
    (install,) = client.containers.made
    assert install.image == "sha256:system" and install.options["network_mode"] == "none"
    assert install.command == ["sh", "/tmp/lab-image-build/install-venv.sh", "torch==2.13.0+cpu", "numpy==2.4.6"]
    assert install.mounted == ["install-venv.sh", "wheelhouse", f"wheelhouse/{TORCH}"]
    assert install.commits == [['CMD ["/bin/sh", "-c", "exec sshd -D"]']] and install.removed
    assert tag in client.images.present and client.images.removed == []
    # Output arrives in chunks that cut lines: progress gets whole lines.
    assert "Processing /tmp/lab-image-build/wheelhouse/torch-2.13.0.whl" in progress and "Successfully installed" in progress
    log = paths.logs_dir() / f"image-build-{tag.replace(':', '-')}.log"
    assert "Step 1/9 : ARG BASE" in log.read_text() and "Successfully installed" in log.read_text()
    assert not list(paths.cache_dir().glob("image-context-*"))


def test_a_build_container_left_by_a_killed_build_is_replaced(wheels):
    client = FakeClient(present={CONFIGURED_BASE})
    leftover = image.BUILD_CONTAINER_PREFIX + image.node_image_tag().partition(":")[2]
    client.containers.leftovers.add(leftover)
    image.ensure_node_image(client, lambda _: None)
    assert not client.containers.leftovers and client.containers.made[0].name == leftover


def test_failed_install_names_the_exit_and_the_log_and_keeps_nothing(wheels):
    client = FakeClient(present={CONFIGURED_BASE}, status=1,
                        output=[b"ERROR: Could not find a version that satisfies the requirement torch\n"])
    with pytest.raises(ImageError, match=r"installing torch into the node image failed \(exit 1\)") as error:
        image.ensure_node_image(client, lambda _: None)
    assert "Could not find a version" in error.value.hint and "image-build-lab-node-" in error.value.hint
    assert image.node_image_tag() not in client.images.present
    assert client.images.removed == ["sha256:system"] and client.containers.made[0].removed


def test_rebuild_builds_again_without_cache(wheels):
    client = FakeClient(present={CONFIGURED_BASE, image.node_image_tag()})
    image.ensure_node_image(client, lambda _: None, rebuild=True)
    assert client.api.builds[0]["nocache"] is True


def test_failed_build_step_names_the_error_and_the_log(wheels):
    client = FakeClient(present={CONFIGURED_BASE}, chunks=[
        {"stream": "Step 9/16 : RUN python3 -m venv /opt/lab-venv\n"},
        {"stream": "ERROR: Could not find a version that satisfies the requirement torch\n"},
        {"error": "The command '/bin/sh -c python3 -m venv' returned a non-zero code: 1"},
    ])
    with pytest.raises(ImageError, match="build failed: The command .* non-zero code: 1") as error:
        image.ensure_node_image(client, lambda _: None)
    assert "Could not find a version" in error.value.hint and "image-build-lab-node-" in error.value.hint


def test_disk_full_build_says_what_is_free(wheels):
    client = FakeClient(present={CONFIGURED_BASE}, chunks=[
        {"error": "failed to copy files: write /var/lib/docker/tmp/x: no space left on device"},
    ])
    with pytest.raises(ImageError, match="no space left on device .*GiB free on") as error:
        image.ensure_node_image(client, lambda _: None)
    assert "docker builder prune" in error.value.hint


def test_engine_refusal_is_an_image_error(wheels):
    client = FakeClient(present={CONFIGURED_BASE})

    def refuse(**_):
        raise docker.errors.APIError("500 Server Error", explanation="invalid reference format")

    client.api.build = refuse
    with pytest.raises(ImageError, match="Docker refused to build the node image: invalid reference format"):
        image.ensure_node_image(client, lambda _: None)
