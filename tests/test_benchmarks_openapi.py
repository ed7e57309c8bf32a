"""``benchmarks/openapi_import.py --quick`` still runs: the table has every column and
both shipped documents, imported. A smoke test, never a timing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_openapi_benchmark_prints_its_table():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "openapi_import.py"), "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.strip("|").split("|") for line in done.stdout.splitlines() if line.startswith("|")]
    assert [cell.strip() for cell in rows[0]] == [
        "document", "size", "operations", "plain parse CPU", "import CPU", "import wall",
        "x plain parse", "result"]  # fmt: skip
    body = {row[0].strip(): row[-1].strip() for row in rows[2:] if "(shipped)" in row[0]}
    assert body == {
        "petstore (shipped)": "imported 3 operations, skipped 0; 2 unsupported construct(s)",
        "GitHub subset (shipped)": "imported 4 operations, skipped 0; 1 unsupported construct(s)",
    }
    assert rows[-1][0].strip() == "target"
