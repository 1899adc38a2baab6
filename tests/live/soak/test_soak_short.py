"""The short soak (``make soak`` with SOAK_MINUTES=2): the real worker, beat, watcher and
API against a local cluster of its own, with a worker SIGKILL and an API-server restart.
It must pass and print its invariants table with jobs of every kind.

It runs the driver as a separate process, exactly as ``make soak`` does, with its own
database (``gpuplatform_soak``), Redis database (2) and cluster (port offset 2000), so it
shares nothing with this test session but the servers.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SHORT_MINUTES = "2"

pytestmark = pytest.mark.cluster


def test_short_soak_passes_with_jobs_of_every_kind(tmp_path):
    env = {**os.environ, "SOAK_MINUTES": SHORT_MINUTES, "SOAK_LOG_DIR": str(tmp_path / "soak")}
    result = subprocess.run([sys.executable, "-m", "bench.soak"], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=1800, check=False)
    output = result.stdout + result.stderr
    table = re.search(r"^check\s+verdict\s+result$.*", result.stdout, re.M | re.S)
    assert table, f"no invariants table:\n{output[-6000:]}"
    submitted = re.search(r"^jobs submitted per kind.*$", table.group(0), re.M)
    assert submitted, table.group(0)
    counts = [int(n) for n in re.findall(r"(?:training|inference) (\d+)", submitted.group(0))]
    assert len(counts) == 4 and all(counts), submitted.group(0)
    assert result.returncode == 0, f"the soak failed:\n{table.group(0)}\n{result.stderr[-2000:]}"
