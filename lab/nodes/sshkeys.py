"""Per-lab SSH identity: one ed25519 key pair, private half 0600, never shared between labs."""

from __future__ import annotations

import os
from pathlib import Path

from lab.errors import LabStateError


def key_paths(folder: Path) -> tuple[Path, Path]:
    """Where the lab's (private, public) key lies in `folder`, whether or not it exists yet."""
    return folder / "id_ed25519", folder / "id_ed25519.pub"


def ensure_key(folder: Path, comment: str, fresh: bool = False) -> tuple[Path, Path]:
    """Create the key pair in `folder` if missing (always, when `fresh`); return (private, public) paths."""
    from cryptography.hazmat.primitives import serialization  # only for making or checking a key: not for every run
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    folder.mkdir(parents=True, exist_ok=True)
    private, public = key_paths(folder)
    if fresh or not private.exists() or not public.exists():
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
        descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
        openssh = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        public.write_bytes(openssh + f" {comment}\n".encode())
    return checked_key(folder)


def checked_key(folder: Path) -> tuple[Path, Path]:
    """The lab's existing key pair, made 0600; a missing or unparsable key is the user's state to repair."""
    from cryptography.hazmat.primitives import serialization

    private, public = key_paths(folder)
    hint = "`lab up --recreate` makes a new key (the running nodes accept only the old one)"
    if not private.is_file():
        raise LabStateError(f"the lab's SSH key {private} is missing", hint)
    os.chmod(private, 0o600)
    try:
        serialization.load_ssh_private_key(private.read_bytes(), password=None)
    except ValueError:
        raise LabStateError(f"the lab's SSH key {private} is corrupted", hint) from None
    return private, public


def known_hosts_path(folder: Path) -> Path:
    """The lab's known_hosts in its ssh `folder`: the nodes' host keys, pinned when they start."""
    return folder / "known_hosts"


def write_known_hosts(path: Path, keys: dict[tuple[str, ...], str]) -> None:
    """Pin host keys: each (names...) -> the host's public key line ('ssh-ed25519 AAAA... [comment]')."""
    lines = []
    for names, public_key in keys.items():
        key_type, key_data, *_ = public_key.split()
        lines.append(f"{','.join(names)} {key_type} {key_data}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))


def known_names(path: Path) -> set[str]:
    """Every host name `path` pins a key for (none when it does not exist)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return set()
    return {name for line in text.splitlines() if line.strip() for name in line.split()[0].split(",")}
