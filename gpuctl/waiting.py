"""Following a job until it ends: ``submit --wait``, ``wait ID`` and ``logs ID -f``.

The client rides out an outage of the platform (``--outage-window``); SIGTERM and SIGINT
during a wait cancel the job on the server first (``--cancel-on-interrupt``, the default), so
a cancelled pipeline does not keep holding GPUs, and exit 143 or 130 as a shell would.
"""

import signal
import threading
import time
from contextlib import contextmanager

from .client import ApiError, Client, Unreachable
from .output import EXIT, Output

FINAL = {"succeeded": EXIT["ok"], "failed": EXIT["failed"], "cancelled": EXIT["cancelled"],
         "reclaimed": EXIT["reclaimed"]}
FOLLOW_TAIL = 1000  # lines per pod each poll of logs -f reads back, to find where it left off
CANCEL_TIMEOUT = 10  # seconds: a CI runner's grace period after SIGTERM is short


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def kind(self) -> str:
        return "terminated" if self.signum == signal.SIGTERM else "interrupted"


@contextmanager
def interrupts_raise():
    """Within, SIGTERM and SIGINT raise ``Interrupted`` (signals reach the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def wait(client: Client, job: dict, args, out: Output) -> int:
    """Follow ``job`` to its end; on SIGTERM/SIGINT cancel it first if asked."""
    try:
        with interrupts_raise():
            return _poll(client, job, args, out)
    except Interrupted as signalled:
        cancelled = _cancel(client, job["id"], out, why=f"{signalled} while waiting") if args.cancel_on_interrupt else ""
        left = cancelled or f"job {job['id']} left as it is ({job['web_url']})"
        return out.fail(f"{signalled}: {left}", signalled.kind, {"job": job["id"], "cancelled": bool(cancelled)})
    except Unreachable as err:
        return out.fail(f"{err} for longer than {args.outage_window:g}s; job {job['id']} goes on: "
                        f"follow it with 'gpuctl wait {job['id']}'", "unavailable", {"job": job["id"]})


def _poll(client: Client, job: dict, args, out: Output) -> int:
    """Print each state change as it happens; the exit code says how the job ended."""
    seen, deadline = 0, time.monotonic() + args.timeout if args.timeout else None
    while True:
        # The job first, then its events: an event is written with its state change, so
        # every event up to the state just read is there, and none is skipped at the end.
        job = client.get(f"jobs/{job['id']}")
        events = client.get(f"jobs/{job['id']}/events")
        for event in events[seen:]:
            detail = f" ({event['message']})" if event["message"] else ""
            out.progress(f"{event['created_at']}  {event['from_state'] or '-':>10} -> {event['to_state']:<10} "
                         f"{event['reason']}{detail}")
        seen = len(events)
        done = _outcome(job, out)
        if done is not None:
            out.answer(job)
            return done
        if deadline and time.monotonic() >= deadline:
            return _gave_up(client, job, args, out)
        time.sleep(args.interval)


def _outcome(job: dict, out: Output) -> int | None:
    """The exit code once the job is done (None while it is not), said in a line."""
    state = job["state"]
    if state in FINAL:
        out.progress(f"job {job['id']} {state}" + (f": {job['message']}" if job["message"] else ""))
    elif job.get("runs_until_cancelled") and state == "running":
        # A kind that runs until cancelled (the server says which: docs/api.md) is done once it runs.
        out.progress(f"job {job['id']} is {job['runs_until_cancelled']}")
    else:
        return None
    out.progress(f"page: {job['web_url']}")
    return FINAL.get(state, EXIT["ok"])


def _gave_up(client: Client, job: dict, args, out: Output) -> int:
    message = f"gave up waiting after {args.timeout:g}s; job {job['id']} is {job['state']}"
    cancelled = _cancel(client, job["id"], out, why="timed out") if args.cancel_on_timeout else ""
    return out.fail(f"{message}: {cancelled or job['web_url']}", "timeout",
                    {"job": job["id"], "state": job["state"], "cancelled": bool(cancelled)})


def _cancel(client: Client, job_id: int, out: Output, *, why: str) -> str:
    """Cancel the job on the server, at once (one try, a short timeout); what happened, in
    words, or "" when it could not be cancelled (said on standard error)."""
    client.timeout = min(client.timeout, CANCEL_TIMEOUT)
    try:
        _, job = client.request("POST", f"jobs/{job_id}/cancel", retry=False)
    except (ApiError, Unreachable) as err:
        out.note(f"{why}: could not cancel job {job_id} ({getattr(err, 'message', err)}); "
                 f"cancel it with 'gpuctl cancel {job_id}'")
        return ""
    return f"cancelled job {job_id} (now {job['state']}): {job['web_url']}"


def follow_logs(client: Client, args, out: Output) -> int:
    """Print the job's pods' new lines as they come, until the job ends (its exit code)."""
    seen: dict[str, list[str]] = {}
    tail = args.tail
    while True:
        # The state first, then the logs: every line written before the job ended is read.
        job = client.get(f"jobs/{args.id}")
        logs = client.get(f"jobs/{args.id}/logs", tail=tail)
        tail = max(args.tail, FOLLOW_TAIL)
        several = len(logs["pods"]) > 1
        for pod in logs["pods"]:
            lines = pod["log"].splitlines()
            for line in new_lines(seen.get(pod["pod"], []), lines):
                _print_line(out, pod["pod"], line, several)
            seen[pod["pod"]] = lines
        if job["state"] in FINAL:
            return FINAL[job["state"]]
        time.sleep(args.interval)


def _print_line(out: Output, pod: str, line: str, several: bool) -> None:
    if out.text:
        print(f"[{pod}] {line}" if several else line, flush=True)
    else:  # one JSON (or YAML flow) object per line: a stream has no one document
        out.doc_line({"pod": pod, "line": line})


def new_lines(before: list[str], now: list[str]) -> list[str]:
    """The lines of ``now`` (a log's last lines) after those of ``before`` (the last lines read
    the time before): the longest end of ``before`` that ``now`` starts with is what was
    seen. A log that starts over (a restarted container) shares none, and is new."""
    for fresh in range(len(now) + 1):
        overlap = len(now) - fresh
        if overlap <= len(before) and now[:overlap] == before[len(before) - overlap:]:
            return now[overlap:]
    return now
