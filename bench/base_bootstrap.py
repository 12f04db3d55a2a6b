"""The base image's bootstrap: mmdebstrap against debootstrap, side by side in one session (root, a Debian host).

  python bench/base_bootstrap.py --rounds 2

Each round runs both programs (their order alternating) with the node image's package list, from the mirror the
host's apt sources name, into a temporary folder: a folder for debootstrap, a tarball for mmdebstrap, which is what
`lab image base` imports. Nothing is cached between runs (every run downloads every package, as on a fresh
machine). Prints each run's seconds, the medians and their ratio, with `uptime`'s load; no image is imported.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from lab.nodes.bootstrap import APT_DIR, BASE_PACKAGES, BASE_SUITE, OS_RELEASE, choose_mirror, read_apt_sources, \
    read_os_release, unmount_below


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one_run(tool: str, mirror: str) -> float:
    folder = tempfile.mkdtemp(prefix=f"bench-{tool}-")
    target = os.path.join(folder, "base.tar") if tool == "mmdebstrap" else os.path.join(folder, "root")
    command = [tool, "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", BASE_SUITE, target, mirror]
    started = time.monotonic()
    try:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.monotonic() - started
    finally:
        unmount_below(Path(folder))
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    missing = [tool for tool in ("mmdebstrap", "debootstrap") if shutil.which(tool) is None]
    if missing or os.geteuid() != 0:
        raise SystemExit(f"needs root and both programs (apt-get install mmdebstrap debootstrap); missing: {missing}")
    release = read_os_release(OS_RELEASE)
    mirror = choose_mirror(read_apt_sources(APT_DIR), release.get("VERSION_CODENAME"))
    if mirror is None:
        raise SystemExit("no Debian mirror in the apt sources")
    times: dict[str, list[float]] = {"mmdebstrap": [], "debootstrap": []}
    print(f"load before: {load()}")
    for round_ in range(args.rounds):
        order = ("mmdebstrap", "debootstrap") if round_ % 2 == 0 else ("debootstrap", "mmdebstrap")
        for tool in order:
            seconds = one_run(tool, mirror)
            times[tool].append(seconds)
            print(f"round {round_ + 1} {tool:12s} {seconds:6.1f} s  (load {load()})", flush=True)
    fast, slow = statistics.median(times["mmdebstrap"]), statistics.median(times["debootstrap"])
    print(f"median: mmdebstrap {fast:.1f} s, debootstrap {slow:.1f} s; mmdebstrap / debootstrap = {fast / slow:.2f}")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
