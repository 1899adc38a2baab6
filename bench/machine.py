"""What every benchmark's results file says about the machine it ran on."""

import os
import platform
import time
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


def cpu_times(name_of) -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system, with reaped children's) each live process has used,
    for those ``name_of(pid, pgid, argv)`` names (None: not counted): ``{pid: (name, s)}``.
    Two of these, before and after, give what each part of a run cost (``cpu_used``)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3
        pgid = int(fields[2])
        name = name_of(int(entry.name), pgid, [a.decode(errors="replace") for a in argv if a])
        if name:
            found[int(entry.name)] = (name, sum(int(f) for f in fields[11:15]) / tick)
    return found


def cpu_used(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds by name between two ``cpu_times``: a process started meanwhile counts whole."""
    used: dict[str, float] = {}
    for pid, (name, seconds) in after.items():
        earlier = before.get(pid)
        used[name] = used.get(name, 0.0) + seconds - (earlier[1] if earlier and earlier[0] == name else 0.0)
    return used


def _busy_and_total() -> tuple[int, int]:
    """Jiffies the machine's cores spent busy, and in all, since boot (``/proc/stat``)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def wait_for_idle(progress, *, busy_below: float = 0.25, window: float = 3.0, timeout: float = 120.0) -> float:
    """Wait until the machine's cores are less than ``busy_below`` busy over ``window``
    seconds: what one timed phase set off (controllers digesting a thousand new objects, a
    cleanup's deletions) must not run into the next one. Returns the last share measured;
    after ``timeout`` it says so and returns anyway."""
    deadline = time.monotonic() + timeout
    said = False
    while True:
        busy0, total0 = _busy_and_total()
        time.sleep(window)
        busy1, total1 = _busy_and_total()
        share = (busy1 - busy0) / max(1, total1 - total0)
        if share < busy_below:
            return share
        if time.monotonic() > deadline:
            progress(f"  the machine is still {share:.0%} busy after {timeout:.0f} s; measuring anyway")
            return share
        if not said:
            progress(f"  waiting for the machine to go quiet ({share:.0%} busy)")
            said = True
