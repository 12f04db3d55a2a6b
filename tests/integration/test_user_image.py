"""`lab up --image IMAGE` on a real engine, with images built here that look like real training images: Python under
another prefix, no sshd, a non-root USER, an ENTRYPOINT that swallows commands, a WORKDIR; and images that lack
what the lab needs, each a one-line error with nothing left behind."""

import io
import json
import uuid

import pytest

from lab.nodes.image import node_image_tag

from .conftest import lab, lab_json, labelled

# One worker for the module's tests under pytest-xdist: they share the module's images and labs, made once.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.xdist_group("user_image")]

TRAINING_IMAGE = """FROM {base}
RUN mv /opt/lab-venv /opt/conda && grep -l lab-venv /opt/conda/bin/* | xargs sed -i 's#/opt/lab-venv#/opt/conda#g' \\
    && rm -f /usr/sbin/sshd /etc/environment && useradd -u 1000 -m trainer && mkdir /workspace \\
    && chown trainer /workspace
ENV PATH=/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /workspace
USER 1000
ENTRYPOINT ["/bin/sh", "-c", "echo this image only trains; exit 3"]
"""
NO_TORCH_IMAGE = """FROM {base}
RUN rm -rf /opt/lab-venv
"""
NO_PYTHON_IMAGE = """FROM {base}
RUN rm -rf /opt/lab-venv /usr/bin/python3* /usr/local/bin/python*
"""


@pytest.fixture(scope="module")
def images(client):
    """The three images, built from the node image (no registry), removed at the end."""
    suffix = uuid.uuid4().hex[:6]
    built = {}
    for kind, dockerfile in (("train", TRAINING_IMAGE), ("notorch", NO_TORCH_IMAGE), ("nopython", NO_PYTHON_IMAGE)):
        tag = f"lab-test/{kind}-{suffix}:1"
        client.images.build(fileobj=io.BytesIO(dockerfile.format(base=node_image_tag()).encode()), tag=tag, rm=True)
        built[kind] = tag
    yield built
    for tag in built.values():
        for derived in client.images.list(filters={"label": f"io.lab.image.source={tag}"}):
            client.images.remove(derived.id, force=True)
        client.images.remove(tag, force=True)


@pytest.fixture(scope="module")
def training_lab(images):
    name = f"it{uuid.uuid4().hex[:6]}"
    result = lab_json("up", "--nodes", "2", "--name", name, "--image", images["train"])
    yield name, result
    lab("down", "--name", name)


def test_a_training_image_becomes_nodes_running_its_own_python(client, images, training_lab):
    name, result = training_lab
    assert result["changed"]
    out = lab("exec", "--name", name, "--", "python", "-c",
              "import os, sys, torch; print('FOUND', sys.executable, torch.__version__, os.getuid())", check=True).stdout
    found = [line.split("FOUND ", 1)[1].split() for line in out.splitlines() if "| FOUND " in line]
    # `python` runs the interpreter the lab found in the image (python or python3 of the same /opt/conda)
    assert len(found) == 2 and all(words[0] in ("/opt/conda/bin/python", "/opt/conda/bin/python3") and words[2] == "0"
                                   for words in found)
    user_image = client.images.get(images["train"])
    assert user_image.attrs["Config"]["User"] == "1000"  # the user's image is as it was
    assert user_image.attrs["Config"]["Entrypoint"] == ["/bin/sh", "-c", "echo this image only trains; exit 3"]
    node = client.containers.get(f"lab-{name}-node0")
    assert node.image.labels["io.lab.image.source"] == images["train"]
    assert lab_json("status", "--name", name)[name]["spec"]["image"] == images["train"]


def test_an_exercise_and_the_same_lab_up_again(images, training_lab):
    name, _ = training_lab
    run = lab("run", "--name", name, "exercise01", "--json", check=True)
    assert json.loads(run.stdout)[0]["status"] == "passed"
    again = lab_json("up", "--nodes", "2", "--name", name, "--image", images["train"])
    assert not again["changed"]


@pytest.mark.parametrize("kind, says", [
    ("missing", "is not in the engine (the lab never pulls a user's image)"),
    ("notorch", "cannot import torch"),
    ("nopython", "has no Python 3 the lab can run"),
])
def test_an_image_that_lacks_what_the_lab_needs_is_one_line_and_leaves_nothing(client, images, fresh_name, kind, says):
    reference = images.get(kind, f"lab-test/not-built-{uuid.uuid4().hex[:6]}:1")
    result = lab("up", "--nodes", "2", "--name", fresh_name, "--image", reference)
    assert result.returncode == 4, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0] and "Traceback" not in result.stderr
    assert labelled(client, fresh_name) == ([], [], [])
    if kind == "missing":
        assert "docker build" in result.stderr and "docker load" in result.stderr


# Debian's way: the interpreter with torch is called python3 only (no `python` anywhere on the image's PATH).
PYTHON3_ONLY_IMAGE = """FROM {base}
RUN rm -f /opt/lab-venv/bin/python /opt/lab-venv/bin/python3.11
"""


@pytest.fixture(scope="module")
def python3_only_lab(client):
    tag = f"lab-test/python3only-{uuid.uuid4().hex[:6]}:1"
    client.images.build(fileobj=io.BytesIO(PYTHON3_ONLY_IMAGE.format(base=node_image_tag()).encode()), tag=tag, rm=True)
    name = f"it{uuid.uuid4().hex[:6]}"
    try:
        lab_json("up", "--nodes", "2", "--name", name, "--image", tag)
        yield name
    finally:  # also when `lab up` of it failed
        lab("down", "--name", name)
        for derived in client.images.list(filters={"label": f"io.lab.image.source={tag}"}):
            client.images.remove(derived.id, force=True)
        client.images.remove(tag, force=True)


def test_python_as_the_command_of_lab_exec_runs_the_images_python3(python3_only_lab):
    """`lab exec -- python ...` runs the interpreter the lab found (python3 here), as `python3 ...` does."""
    for command in ("python", "python3"):
        out = lab("exec", "--name", python3_only_lab, "--", command, "-c",
                  "import sys, torch; print('FOUND', sys.executable)", check=True).stdout
        found = [line.split("FOUND ", 1)[1].strip() for line in out.splitlines() if "| FOUND " in line]
        assert found == ["/opt/lab-venv/bin/python3"] * 2, out


def test_python_in_a_shell_line_on_such_an_image_is_named_with_the_interpreter_to_use(python3_only_lab):
    """In `sh -c` the lab does not rewrite the command: the node's shell cannot find `python`; the diagnosis names
    python3, which the nodes have, from what they answered after the run."""
    result = lab("exec", "--name", python3_only_lab, "--json", "--", "sh", "-c", "python -c 'print(1)'")
    assert result.returncode == 1, result.stderr
    top = json.loads(result.stdout)["diagnosis"][0]
    assert top["cause"] == "executable-missing" and top["title"].startswith("'python' is not on the PATH of any node")
    assert "/opt/lab-venv/bin/python3" in top["fix"], top
