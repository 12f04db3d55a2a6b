#!/bin/sh
# Installs the node image's venv at /opt/lab-venv, offline, from the wheelhouse/ folder beside this script.
# lab/nodes/image.py runs it in a container of the system image (docker/Dockerfile) with the wheelhouse
# bind-mounted read-only, then commits that container as the node image: the wheelhouse never becomes a
# layer, and the venv is written once (a build stage copied into a second one took 27 s more).
# Arguments: the requirements, e.g. torch==2.13.0+cpu numpy==2.4.6.
set -eu
WHEELHOUSE="$(dirname "$0")/wheelhouse"
python3 -m venv /opt/lab-venv
/opt/lab-venv/bin/pip install --no-index --no-cache-dir --disable-pip-version-check --no-compile \
    --find-links "$WHEELHOUSE" "$@"
site=$(/opt/lab-venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
# Left out, as no job can use them: torch's C++ test binaries (83 MB) and its C++ headers (9,400 files: the
# nodes have no compiler, so neither C++ extensions nor torch.compile's CPU code can be built there).
# torch/bin stays: torch_shm_manager.
rm -rf "$site/torch/test" "$site/torch/include"
# The lab's job hooks (exercises/jobhooks: sitecustomize and its plugins) reach a job through PYTHONPATH; a job whose
# own command sets PYTHONPATH anew would lose them, so the venv also puts LAB_JOBHOOKS_DIR first on sys.path before
# Python imports sitecustomize (site.py runs .pth lines that start with `import`).
echo 'import os, sys; hooks = os.environ.get("LAB_JOBHOOKS_DIR"); hooks and hooks not in sys.path and sys.path.insert(0, hooks)' \
    > "$site/lab_jobhooks.pth"
# pip byte-compiles on one core; compileall -j0 uses them all. Like pip, it passes over the few files
# written for a newer Python (torch's py312_intrinsics.py), hence `|| true`.
/opt/lab-venv/bin/python -m compileall -q -j0 /opt/lab-venv/lib >/dev/null || true
/opt/lab-venv/bin/python -c "import torch; print('torch', torch.__version__, 'imports in the node image')"
