"""Per-lab SSH identity: one ed25519 key pair, private half 0600, never shared between labs."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def ensure_key(folder: Path, comment: str) -> tuple[Path, Path]:
    """Create the key pair in `folder` if missing; return (private, public) paths."""
    folder.mkdir(parents=True, exist_ok=True)
    private, public = folder / "id_ed25519", folder / "id_ed25519.pub"
    if not private.exists() or not public.exists():
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
        descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
        openssh = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        public.write_bytes(openssh + f" {comment}\n".encode())
    os.chmod(private, 0o600)
    return private, public
