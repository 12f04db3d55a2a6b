"""Run the unseen broken scripts of bench/diagnosis/cases.yaml on 2-node labs and score `lab`'s top finding.

Each case is run as a user would: `lab exec --copy SCRIPT -- python SCRIPT` or `lab torchrun SCRIPT` (the script
alone, copied into a folder of its own), with `--json`; the run's `diagnosis` (findings, root cause first) is read
from that JSON. The top finding's title + fix are matched against the case's keyword groups (every group must
match one of its words) and its fix against the case's `wrong` words. This score is an aid: the human judgement
in bench/diagnosis/RESULTS.md (right cause AND right fix = hit) is the authority.

  PYTHONPATH=$PWD python bench/diagnosis_trials.py --name unseen1 --name unseen2 --out first_try.json
  PYTHONPATH=$PWD python bench/diagnosis_trials.py --name unseen1 --only store_key_typo,init_twice
  PYTHONPATH=$PWD python bench/diagnosis_trials.py --name lead1 --repo /work/main     # rescore with another lab

--name may be given several times (or comma-separated): one case runs at a time on each lab. Labs are brought up
(`lab up --nodes 2`, idempotent) unless --no-up. --repo DIR runs the lab CLI from that checkout (PYTHONPATH=DIR);
the state folder stays this tree's .lab/ (or LAB_HOME), so the labs and run records are found where they are.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CASES = HERE / "diagnosis" / "cases.yaml"
SCRIPTS = HERE / "diagnosis" / "unseen"
PYTHON = sys.executable
PATHS = re.compile(r"(?<![\w.])/\S+|\S+\.py\b\S*")


def load_cases(path: Path) -> list[dict]:
    spec = yaml.safe_load(path.read_text())
    defaults = spec.get("defaults", {}).get("run", {})
    cases = []
    for case in spec["cases"]:
        run = dict(defaults)
        run.update(case.get("run") or {})
        if "timeout" in case:
            run["timeout"] = case["timeout"]
        cases.append({**case, "run": run})
    return cases


def lab_cli(repo: Path, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(repo))
    return subprocess.run([PYTHON, "-m", "lab.cli", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout)


def command_for(case: dict, lab: str, workdir: Path) -> list[str]:
    run = case["run"]
    script = SCRIPTS / f"{case['name']}.py"
    common = ["--name", lab, "--json", "--timeout", str(run["timeout"])]
    for key, value in (run.get("env") or {}).items():
        common += ["--env", f"{key}={value}"]
    if run["launcher"] == "torchrun":
        folder = workdir / case["name"]
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(script, folder / script.name)
        return ["torchrun", *common, "--nproc-per-node", str(run.get("nproc", 1)), str(folder / script.name)]
    command = run.get("command") or ["python", script.name]
    return ["exec", *common, "--copy", str(script), "--", *command]


def strip_paths(text: str) -> str:
    """File names and paths do not count towards a finding (FACTS.md): drop them before matching words."""
    return PATHS.sub(" ", text)


def score(case: dict, top: dict | None) -> dict:
    if top is None:
        return {"keywords": "no-finding", "missing_groups": [], "wrong_words": []}
    text = strip_paths(f"{top.get('title', '')} {top.get('fix', '')}").lower()
    fix = strip_paths(top.get("fix") or "").lower()
    missing = [group for group in case.get("keywords", []) if not any(str(w).lower() in text for w in group)]
    wrong = [w for w in case.get("wrong", []) if str(w).lower() in fix]
    verdict = "harmful" if wrong else ("match" if not missing else "no-match")
    return {"keywords": verdict, "missing_groups": missing, "wrong_words": wrong}


def run_case(case: dict, lab: str, repo: Path, workdir: Path) -> dict:
    args = command_for(case, lab, workdir)
    started = time.monotonic()
    try:
        done = lab_cli(repo, args, timeout=case["run"]["timeout"] + 240)
        stdout, stderr, rc = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        stdout, stderr, rc = expired.stdout or "", expired.stderr or "", None
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
        stderr = stderr.decode() if isinstance(stderr, bytes) else stderr
    seconds = round(time.monotonic() - started, 1)
    try:
        record = json.loads(stdout)
    except json.JSONDecodeError:
        record = {}
    findings = record.get("diagnosis") or []
    top = findings[0] if findings else None
    step = (record.get("steps") or [{}])[0]
    return {
        "name": case["name"], "class": case["class"], "lab": lab, "launcher": case["run"]["launcher"],
        "command": ["lab", *args], "rc": rc, "seconds": seconds, "status": record.get("status"),
        "run_id": record.get("run_id"), "record": record.get("path"),
        "exit_codes": step.get("exit_codes"), "timed_out": step.get("timed_out"), "problem": step.get("problem"),
        "top": top, "findings": findings, "score": score(case, top),
        "cause_truth": case["cause"], "right_fix": case["right_fix"],
        "stderr_tail": stderr[-3000:] if not record else stderr[-600:],
    }


def bring_up(labs: list[str], repo: Path) -> None:
    for lab in labs:
        done = lab_cli(repo, ["up", "--nodes", "2", "--name", lab], timeout=600)
        print(f"lab {lab}: {'up' if done.returncode == 0 else 'FAILED: ' + done.stderr.strip()[-300:]}", flush=True)
        if done.returncode != 0:
            raise SystemExit(1)


def table(results: list[dict]) -> str:
    rows = [("class", "script", "status", "top cause", "keywords", "s")]
    for r in sorted(results, key=lambda r: (r["class"], r["name"])):
        top = (r["top"] or {}).get("cause", "-")
        rows.append((r["class"], r["name"], str(r["status"]), top, r["score"]["keywords"], str(r["seconds"])))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
    matched = sum(r["score"]["keywords"] == "match" for r in results)
    lines.append(f"keyword match: {matched}/{len(results)} (an aid; RESULTS.md holds the judgement)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", action="append", required=True, help="lab name (repeat or comma-separate for more)")
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--out", type=Path, help="write every result as JSON here")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="checkout whose lab CLI runs the cases")
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("--scripts", type=Path, help="folder of the cases' scripts (default: bench/diagnosis/unseen; "
                                                     "the cases file's `scripts:` key if it has one)")
    parser.add_argument("--no-up", action="store_true", help="do not run `lab up` first")
    args = parser.parse_args()
    labs = [name for value in args.name for name in value.split(",") if name]
    repo = args.repo.resolve()
    os.environ.setdefault("LAB_HOME", str(Path.cwd() / ".lab"))
    global SCRIPTS
    cases = load_cases(args.cases)
    folder = args.scripts or (yaml.safe_load(args.cases.read_text()) or {}).get("scripts")
    if folder:
        SCRIPTS = (args.cases.parent / folder).resolve() if not args.scripts else args.scripts.resolve()
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {c["name"] for c in cases}
        if unknown:
            raise SystemExit(f"unknown case(s): {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c["name"] in wanted]
    missing = [c["name"] for c in cases if not (SCRIPTS / f"{c['name']}.py").exists()]
    if missing:
        raise SystemExit(f"no script for: {', '.join(missing)}")
    if not args.no_up:
        bring_up(labs, repo)
    free: queue.Queue[str] = queue.Queue()
    for lab in labs:
        free.put(lab)
    results: list[dict] = []
    lock = threading.Lock()
    started = time.time()

    def one(case: dict) -> None:
        lab = free.get()
        try:
            result = run_case(case, lab, repo, workdir)
        finally:
            free.put(lab)
        with lock:
            results.append(result)
            top = result["top"] or {}
            print(f"[{len(results)}/{len(cases)}] {case['name']} on {lab}: {result['status']} in {result['seconds']} s; "
                  f"top {top.get('cause', '-')}: {top.get('title', '')[:110]} -> {result['score']['keywords']}",
                  flush=True)

    with tempfile.TemporaryDirectory(prefix="diagnosis-trials-") as tmp:
        workdir = Path(tmp)
        with ThreadPoolExecutor(max_workers=len(labs)) as pool:
            list(pool.map(one, cases))
    print(table(results))
    if args.out:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
        load = os.getloadavg()
        args.out.write_text(json.dumps({
            "repo": str(repo), "commit": commit, "labs": labs, "started": started,
            "seconds": round(time.time() - started, 1), "load_at_end": [round(x, 2) for x in load],
            "results": sorted(results, key=lambda r: (r["class"], r["name"])),
        }, indent=2))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
