"""What every benchmark's results file says about the machine it ran on."""

import os
import platform
from pathlib import Path


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                  if line.startswith("model name")), "") if cpuinfo.exists() else platform.processor()
    return (f"{platform.node()}, {os.cpu_count()} cores ({model}), Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def load() -> str:
    """The load average when the run ended: other work on the machine shares its cores."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min)"
