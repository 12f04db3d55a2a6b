"""What a run copies of the user's folder: environments by content, the project's ignore rules, a size limit."""

import pytest

from lab.errors import SpecError
from lab.jobs.staging import checked_copy, copy_planned, parse_copy_limit, plan_copy


def make(root, files):
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())


def kept(root, state=None):
    return [name for name, _ in plan_copy(root, (state or root / "no-state").resolve()).files]


def test_the_labs_state_version_control_and_caches_are_left_out(tmp_path):
    make(tmp_path, {"train.py": "x", "data/x.txt": "x", ".lab/runs/r1/work/train.py": "x", ".git/HEAD": "x",
                    "__pycache__/t.pyc": "x", "state/labs/key": "x"})
    assert kept(tmp_path, tmp_path / "state") == ["train.py", "data/x.txt"]


def test_a_virtual_environment_is_known_by_its_content_not_its_name(tmp_path):
    make(tmp_path, {"train.py": "x", "env311/pyvenv.cfg": "home = /usr/bin", "env311/lib/torch.so": "x" * 100,
                    "conda/conda-meta/history": "x", "conda/bin/python": "x",
                    "venv-notes/README.md": "a folder named like a venv, but it is not one"})
    plan = plan_copy(tmp_path, tmp_path / "none")
    assert [name for name, _ in plan.files] == ["train.py", "venv-notes/README.md"]
    assert sorted(plan.environments) == ["conda", "env311"]


def test_gitignore_and_labignore_rules_apply_where_they_stand(tmp_path):
    make(tmp_path, {".gitignore": "*.ckpt\nlogs/\n!keep.ckpt\n", ".labignore": "data/raw/\n",
                    "train.py": "x", "model.ckpt": "x", "keep.ckpt": "x", "logs/run1.txt": "x",
                    "data/raw/big.bin": "x", "data/small.csv": "x",
                    "sub/.gitignore": "local.txt\n", "sub/local.txt": "x", "sub/code.py": "x", "other/local.txt": "x"})
    assert sorted(kept(tmp_path)) == [".gitignore", ".labignore", "data/small.csv", "keep.ckpt", "other/local.txt",
                                      "sub/.gitignore", "sub/code.py", "train.py"]


def test_a_copy_over_the_limit_is_refused_naming_what_is_big(tmp_path):
    source, destination = tmp_path / "project", tmp_path / "copy"
    make(source, {"train.py": "x" * 200, "checkpoints/a.pt": b"\0" * 3000, "checkpoints/b.pt": b"\0" * 3000,
                  "data.bin": b"\0" * 2000})
    with pytest.raises(SpecError) as refused:
        checked_copy(source, tmp_path / "none", limit=4096)
    assert "8 KiB, over the 4 KiB limit (biggest: checkpoints/ 5.9 KiB, data.bin 2 KiB, train.py 200 B)" in str(refused.value)
    assert ".labignore" in refused.value.hint and "--workspace" in refused.value.hint
    assert not destination.exists()
    (source / ".labignore").write_text("checkpoints/\n")
    copy_planned(checked_copy(source, tmp_path / "none", limit=4096), destination)
    assert sorted(p.name for p in destination.rglob("*")) == [".labignore", "data.bin", "train.py"]


def test_copy_limit_sizes():
    assert parse_copy_limit("100m") == 100 * 1024**2 and parse_copy_limit("2g") == 2 * 1024**3
    with pytest.raises(SpecError, match="--copy-limit"):
        parse_copy_limit("lots")
