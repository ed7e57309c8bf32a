"""OpenAPI import of large documents, in one run: ``benchmarks/openapi_import.py``.

Documents: the shipped petstore and GitHub subset, and two generated ones of the size
and shape of Stripe's published document (OpenAPI 3.0, about 4.9 MB of JSON, 600
operations over 1,000 densely cross-referenced schemas, form-encoded bodies) and
GitHub's (about 12.9 MB, 900 operations, shared parameters, responses and examples):
``tests/fakes/openapi_specs.py``, the same bytes every run.

Per document: the plain parse (``json.loads``, or ``yaml.safe_load`` for YAML) in this
process, the floor any import pays; then ``manage.py importopenapi`` of every operation
in a child process (CPU time and wall time, Django's start included); with
``--baseline REF``, the same command run from the tree of the commit ``REF``
(``git archive``), in the same run, and what it did (files written, or its error).
Then the target (each import at most 30 s) met or not. Prints; asserts nothing; exits 0.
``--quick`` imports only the two shipped documents (a smoke run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script

from tests.fakes.openapi_specs import write_spec  # noqa: E402 - the generated documents

TARGET_SECONDS = 30.0
METHODS = ("get", "post", "put", "patch", "delete")
SHIPPED = ROOT / "tests" / "data" / "openapi"


def plain_parse(path: Path) -> tuple[float, int]:
    """(CPU seconds of the plain parse, the operations the document has)."""
    import yaml

    text = path.read_text(encoding="utf-8")
    started = time.process_time()
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    seconds = time.process_time() - started
    operations = sum(
        1 for item in data["paths"].values() for method in item if method in METHODS
    )
    return seconds, operations


def run_import(tree: Path, path: Path, out: Path, timeout: float) -> dict:
    """``manage.py importopenapi`` of ``path`` from ``tree``: CPU, wall, outcome."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    command = [sys.executable, "manage.py", "importopenapi", str(path), "--out", str(out),
               "--prefix", "bench"]  # fmt: skip
    try:
        done = subprocess.run(
            command, cwd=tree, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        outcome = f"still running after {timeout:g} s"
    else:
        lines = (done.stdout.strip() or done.stderr.strip() or "?").splitlines()
        last = lines[-1].replace(f"{path.parent}/", "")  # the scratch directory: noise
        outcome = last if done.returncode == 0 else "refused: " + last[:90]
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall, "outcome": outcome}


def baseline_tree(ref: str, into: Path) -> Path:
    """The files of commit ``ref``, extracted under ``into``."""
    tree = into / "baseline"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the shipped documents")
    parser.add_argument("--baseline", metavar="REF", help="also import with commit REF's code")
    parser.add_argument("--timeout", type=float, default=900.0, help="per import, seconds")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    with tempfile.TemporaryDirectory(prefix="openapi-bench-") as scratch:
        work = Path(scratch)
        documents = [("petstore (shipped)", SHIPPED / "petstore.yaml"),
                     ("GitHub subset (shipped)", SHIPPED / "github_subset.yaml")]  # fmt: skip
        if not args.quick:
            documents += [
                ("Stripe-sized (generated)", write_spec("stripe", work / "stripe.json")),
                ("GitHub-sized (generated)", write_spec("github", work / "github.json")),
            ]
        old = baseline_tree(args.baseline, work) if args.baseline else None
        rows = []
        for n, (name, path) in enumerate(documents):
            parse, operations = plain_parse(path)
            now = run_import(ROOT, path, work / f"now-{n}", args.timeout)
            then = run_import(old, path, work / f"old-{n}", args.timeout) if old else None
            rows.append((name, path.stat().st_size, operations, parse, now, then))
    print(report(rows, args.baseline))


def report(rows: list[tuple], baseline: str | None) -> str:
    load = os.getloadavg()[0]
    lines = [
        f"OpenAPI import (manage.py importopenapi, every operation, Django's start included) "
        f"— Python {platform.python_version()}, {os.cpu_count()} cores, load {load:.1f}",
        "",
        "| document | size | operations | plain parse CPU | import CPU | import wall "
        "| x plain parse | result |"
        + (f" at {baseline}: CPU | at {baseline}: result |" if baseline else ""),
        "|---|---:|---:|---:|---:|---:|---:|---|" + ("---:|---|" if baseline else ""),
    ]
    met = True
    for name, size, operations, parse, now, then in rows:
        met = met and now["wall"] <= TARGET_SECONDS and not now["outcome"].startswith("refused")
        ratio = now["cpu"] / parse if parse > 0 else float("inf")
        line = (
            f"| {name} | {_size(size)} | {operations} | {parse:.2f} s | {now['cpu']:.1f} s "
            f"| {now['wall']:.1f} s | {ratio:.0f}x | {now['outcome']} |"
        )
        if then is not None:
            line += f" {then['cpu']:.1f} s | {then['outcome']} |"
        lines.append(line)
    lines += ["", f"| target | each import <= {TARGET_SECONDS:g} s wall | "
              f"{'met' if met else 'NOT MET'} |"]  # fmt: skip
    return "\n".join(lines)


def _size(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"


if __name__ == "__main__":
    main()
