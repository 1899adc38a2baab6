"""``gpuctl``: submit and follow GPU Platform jobs from a shell or a CI step.

Configured by ``GPUPLATFORM_URL`` (e.g. https://gpu.example.org) and ``GPUPLATFORM_TOKEN``
(an API token). Exit codes are stable so a CI step can depend on them (see ``EXIT``). With
``-o json`` or ``-o yaml`` (before or after the command) standard output is that document
alone; progress and messages go to standard error.
"""

import argparse
import json
import math
import os
import sys
import time
import urllib.parse
import uuid

import yaml

from . import __version__
from .client import ApiError, Client, Unreachable
from .jobfile import JobFileError, load
from .said import status_lines

EXIT = {
    "ok": 0,             # done; with --wait: the job succeeded (inference: is running)
    "failed": 1,         # with --wait: the job failed
    "usage": 2,          # bad command line (argparse) or missing configuration
    "cancelled": 3,      # with --wait: the job was cancelled
    "invalid": 4,        # the server rejected the request (400, 409) or the job file is wrong
    "auth": 5,           # 401 / 403: token missing, unknown, expired, revoked or lacking a scope
    "not_found": 6,      # 404
    "unavailable": 7,    # server unreachable, 5xx, or logs unavailable
    "timeout": 8,        # --wait gave up after --timeout seconds
    "never": 9,          # with --wait: the platform says the job can never run as asked
    "reclaimed": 10,     # with --wait: the job was reclaimed because its GPUs sat idle
}
OUTPUTS = ["text", "json", "yaml"]
# The reason of a job the platform holds back because its submitter is at their per-person cap
# (jobs.lifecycle.AT_PERSONAL_CAP on the server; a test holds the two equal).
AT_CAP = "AtPersonalCap"
# The reason of a job kept back so that the first waiting job of a flavor that reserves is not
# delayed (jobs.lifecycle.BEHIND_RESERVATION): its message says which maximum runtime starts it now.
BEHIND = "BehindReservation"

FINAL = {"succeeded": EXIT["ok"], "failed": EXIT["failed"], "cancelled": EXIT["cancelled"],
         "reclaimed": EXIT["reclaimed"]}


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    url, token = os.environ.get("GPUPLATFORM_URL", ""), os.environ.get("GPUPLATFORM_TOKEN", "")
    if not url:
        return _fail("GPUPLATFORM_URL is not set (e.g. export GPUPLATFORM_URL=https://gpu.example.org).", "usage")
    if not _is_http_url(url):
        return _fail(f"GPUPLATFORM_URL={url!r} is not an http(s) URL (e.g. https://gpu.example.org).", "usage")
    if not token:
        return _fail("GPUPLATFORM_TOKEN is not set: create a token in the platform "
                     "(POST /api/v1/tokens or manage.py create_token) and export it.", "usage")
    client = Client(url, token, backoff=float(os.environ.get("GPUPLATFORM_RETRY_BACKOFF", "1")))
    try:
        return args.run(client, args)
    except ApiError as err:
        return _api_failure(err)
    except Unreachable as err:
        return _fail(str(err), "unavailable")
    except JobFileError as err:
        return _fail(f"{args.file}: {err}", "invalid")
    except KeyboardInterrupt:
        return 130


def _is_http_url(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuctl",
        description="Submit and follow GPU Platform jobs from a shell or a CI step.",
        epilog="Environment: GPUPLATFORM_URL, GPUPLATFORM_TOKEN. Exit codes: 0 ok (or the job "
               "succeeded), 1 job failed, 2 usage, 3 job cancelled, 4 rejected, 5 not allowed, "
               "6 not found, 7 unavailable, 8 timeout, 9 the job can never run (--wait), "
               "10 the job was reclaimed for idle GPUs (--wait).",
    )
    parser.add_argument("--version", action="version", version=f"gpuctl {__version__}")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text", help="text (default), json or yaml")
    # The same option after the command too (gpuctl list -o json); its default leaves the first one's.
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("-o", "--output", choices=OUTPUTS, default=argparse.SUPPRESS, help="text, json or yaml")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name, **kwargs):
        return sub.add_parser(name, parents=[output], **kwargs)

    _add_submit(command)
    _add_job_commands(command)
    return parser


def _add_submit(command) -> None:
    p = command("submit", help="submit a job from a YAML file")
    p.add_argument("-f", "--file", required=True, help="job file (YAML), '-' for standard input")
    p.add_argument("--team", help="team slug (overrides 'team' in the file)")
    p.add_argument("--wait", action="store_true",
                   help="follow the job; exit 0 only if it succeeds, 9 at once if it can never run")
    p.add_argument("--interval", type=_seconds(above_zero=True), default=5.0,
                   help="seconds between polls with --wait (more than 0; default 5)")
    p.add_argument("--timeout", type=_seconds(above_zero=False), default=0,
                   help="give up waiting after this many seconds (0: never)")
    p.add_argument("--idempotency-key", help="retry-safe key (default: a new one; give e.g. the CI run id)")
    p.set_defaults(run=_submit)


def _add_job_commands(command) -> None:
    """The commands that read or change jobs already submitted, in the order help lists them."""
    p = command("status", help="show a job and its events")
    p.add_argument("id", type=int)
    p.set_defaults(run=_status)

    p = command("list", help="list jobs, newest first")
    p.add_argument("--team")
    p.add_argument("--state", action="append", help="repeat for several states")
    p.add_argument("--limit", type=_at_least_one, default=50, help="at most this many jobs (default 50)")
    p.set_defaults(run=_list)

    p = command("cancel", help="cancel a job")
    p.add_argument("id", type=int)
    p.set_defaults(run=_cancel)

    p = command("stop", help="stop a notebook: its GPUs go back, its volumes stay")
    p.add_argument("id", type=int)
    p.set_defaults(run=_stop)

    p = command("start", help="start a stopped notebook again (within the team's own quota)")
    p.add_argument("id", type=int)
    p.set_defaults(run=_start)

    p = command("exempt", help="exempt a job from idle-GPU reclaim, with a reason (team owners, where allowed)")
    p.add_argument("id", type=int)
    p.add_argument("--reason", required=True, help="why the job may keep idle GPUs (recorded and audited)")
    p.set_defaults(run=_exempt)

    p = command("logs", help="print the last lines of a job's pods")
    p.add_argument("id", type=int)
    p.add_argument("--tail", type=_at_least_one, default=200, help="last lines per pod (1-5000, default 200)")
    p.set_defaults(run=_logs)


def _seconds(*, above_zero: bool):
    """A number of seconds: more than 0 (a poll interval) or at least 0 (a timeout, 0: never)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (above_zero and value == 0):
            raise argparse.ArgumentTypeError(f"must be {'more than' if above_zero else 'at least'} 0 seconds, not {text}")
        return value

    return parse


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


# --- commands ------------------------------------------------------------------------
def _submit(client: Client, args) -> int:
    text = sys.stdin.read() if args.file == "-" else _read(args.file)
    spec = load(text, team=args.team)
    key = args.idempotency_key or str(uuid.uuid4())
    status, job = client.request("POST", "jobs", body=spec, headers={"Idempotency-Key": key})
    verb = "submitted" if status == 201 else "already submitted (same Idempotency-Key)"
    _progress(args, f"job {job['id']} {job['team']}/{job['name']} {verb}: {job['state']}")
    if job.get("reason") == AT_CAP:
        print(f"gpuctl: waiting at your cap: {job['message']}", file=sys.stderr)
    elif job.get("reason") == BEHIND:
        print(f"gpuctl: kept back behind a reservation: {job['message']}", file=sys.stderr)
    verdict = job.get("feasibility") or {}
    if verdict.get("verdict") == "never":
        if args.wait:  # it would wait for ever: say why now, and leave the job to its owner
            if args.output != "text":
                _print_doc(job, args)
            return _fail(f"job {job['id']} can never run as asked: {verdict['message']} It stays submitted "
                         f"(the quota may grow): cancel it with 'gpuctl cancel {job['id']}'.", "never")
        print(f"gpuctl: warning: {verdict['message']}", file=sys.stderr)
    elif verdict.get("waits_for"):  # room on the nodes, not quota: say which jobs it waits for
        print(f"gpuctl: {verdict['message']}", file=sys.stderr)
    if verdict.get("verdict") == "queue" and job.get("eta"):
        _progress(args, f"job {job['id']}: {job['eta']['message']}")
    if not args.wait:
        if args.output != "text":
            _print_doc(job, args)
        return EXIT["ok"]
    return _wait(client, job, args)


def _progress(args, line: str) -> None:
    """A line for the person watching: standard output in text mode, else standard error
    (standard output is the document alone)."""
    print(line, file=sys.stdout if args.output == "text" else sys.stderr, flush=True)


def _wait(client: Client, job: dict, args) -> int:
    """Print each state change as it happens; the exit code says how the job ended."""
    seen, deadline = 0, time.monotonic() + args.timeout if args.timeout else None
    while True:
        # The job first, then its events: an event is written with its state change, so
        # every event up to the state just read is there, and none is skipped at the end.
        job = client.get(f"jobs/{job['id']}")
        state = job["state"]
        events = client.get(f"jobs/{job['id']}/events")
        for event in events[seen:]:
            detail = f" ({event['message']})" if event["message"] else ""
            _progress(args, f"{event['created_at']}  {event['from_state'] or '-':>10} -> {event['to_state']:<10} "
                            f"{event['reason']}{detail}")
        seen = len(events)
        if state in FINAL:
            _progress(args, f"job {job['id']} {state}" + (f": {job['message']}" if job["message"] else ""))
            if args.output != "text":
                _print_doc(job, args)
            return FINAL[state]
        # A kind that runs until cancelled (the server says which: docs/api.md) is done once it runs.
        if job.get("runs_until_cancelled") and state == "running":
            _progress(args, f"job {job['id']} is {job['runs_until_cancelled']}")
            if args.output != "text":
                _print_doc(job, args)
            return EXIT["ok"]
        if deadline and time.monotonic() >= deadline:
            print(f"gpuctl: gave up waiting after {args.timeout:g}s; job {job['id']} is {state}", file=sys.stderr)
            return EXIT["timeout"]
        time.sleep(args.interval)


def _status(client: Client, args) -> int:
    job = client.get(f"jobs/{args.id}")
    events = client.get(f"jobs/{args.id}/events")
    if args.output != "text":
        _print_doc({**job, "events": events}, args)
        return EXIT["ok"]
    print(f"job {job['id']}  {job['team']}/{job['name']}  ({job['kind']}, {job['flavor']}, {job['total_gpus']} GPUs)")
    print("\n".join(status_lines(job)))
    print(f"image: {job['image']}  submitted by {job['submitter'] or '-'} at {job['submitted_at'] or '-'}")
    if job.get("max_runtime_seconds"):
        left = job.get("runtime_left_seconds")
        print(f"max runtime: {_span(job['max_runtime_seconds'])}"
              + (f", {_span(left)} left (counted from admission)" if left is not None else ""))
    if eta := job.get("eta"):
        print(f"start: {eta['message']}  (GPU Platform's estimate)")
        for advice in eta.get("sooner") or ():
            print(f"  sooner: {advice['message']}  (clone: {advice['clone_url']})")
    idle = job.get("idle") or {}
    if idle.get("idle_gpu_hours") is not None and job["state"] == "reclaimed":
        print(f"reclaimed at {idle['reclaim_at']}: {idle['idle_gpu_hours']} idle GPU-hours")
    elif idle.get("exempt_reason"):
        print(f"exempt from idle reclaim ({idle['exempted_by'] or '-'}): {idle['exempt_reason']}")
    elif idle.get("reclaim_at"):
        print(f"idle GPUs: reclaimed at {idle['reclaim_at']} unless busy again")
    elif idle.get("paused_reason"):
        print(f"idle reclaim paused: {idle['paused_reason']}")
    for event in events:
        print(f"  {event['created_at']}  {event['from_state'] or '-':>10} -> {event['to_state']:<10} {event['reason']}")
    return EXIT["ok"]


def _span(seconds: int) -> str:
    """Seconds as the job page says them: "1 d 2 h", "2 h 05 min", "3 min 12 s", "45 s"."""
    days, rest = divmod(max(int(seconds), 0), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


def _state(job: dict) -> str:
    held = {AT_CAP: "at cap", BEHIND: "kept back"}.get(job.get("reason"))
    return f"{job['state']} ({held})" if held else job["state"]


def _list(client: Client, args) -> int:
    params = {"team": args.team, "state": args.state, "page_size": min(args.limit, 200)}
    jobs = []
    for job in client.pages("jobs", **{k: v for k, v in params.items() if v}):
        jobs.append(job)
        if len(jobs) >= args.limit:
            break
    if args.output != "text":
        _print_doc(jobs, args)
        return EXIT["ok"]
    rows = [("ID", "TEAM", "NAME", "STATE", "FLAVOR", "GPUS", "SUBMITTED")] + [
        (str(j["id"]), j["team"], j["name"], _state(j), j["flavor"], str(j["total_gpus"]), j["submitted_at"] or "-")
        for j in jobs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return EXIT["ok"]


def _cancel(client: Client, args) -> int:
    return _act(client, args, "cancel")


def _stop(client: Client, args) -> int:
    return _act(client, args, "stop")


def _start(client: Client, args) -> int:
    return _act(client, args, "start")


def _act(client: Client, args, verb: str) -> int:
    _, job = client.request("POST", f"jobs/{args.id}/{verb}", retry=False)
    if args.output != "text":
        _print_doc(job, args)
    else:
        print(f"job {job['id']} {job['state']}")
    return EXIT["ok"]


def _exempt(client: Client, args) -> int:
    _, job = client.request("POST", f"jobs/{args.id}/exempt-idle", body={"reason": args.reason}, retry=False)
    if args.output != "text":
        _print_doc(job, args)
    else:
        print(f"job {job['id']} exempt from idle reclaim: {job['idle']['exempt_reason']}")
    return EXIT["ok"]


def _logs(client: Client, args) -> int:
    logs = client.get(f"jobs/{args.id}/logs", tail=args.tail)
    if args.output != "text":
        _print_doc(logs, args)
        return EXIT["ok"]
    if logs["message"]:
        print(logs["message"], file=sys.stderr)
    for pod in logs["pods"]:
        if len(logs["pods"]) > 1:
            print(f"==> {pod['pod']} <==")
        sys.stdout.write(pod["log"] if pod["log"].endswith("\n") or not pod["log"] else pod["log"] + "\n")
    return EXIT["ok"]


# --- output --------------------------------------------------------------------------
def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as err:
        raise JobFileError(err.strerror or str(err)) from None


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def _print_doc(value, args) -> None:
    """The answer as one JSON or YAML document on standard output."""
    if args.output == "yaml":
        sys.stdout.write(yaml.dump(value, Dumper=_NoAliases, sort_keys=True, allow_unicode=True))
    else:
        print(json.dumps(value, indent=2, sort_keys=True))


def _fail(message: str, kind: str) -> int:
    print(f"gpuctl: {message}", file=sys.stderr)
    return EXIT[kind]


def _api_failure(err: ApiError) -> int:
    if err.status in (401, 403):
        hint = " Check GPUPLATFORM_TOKEN." if err.status == 401 else ""
        return _fail(f"not allowed ({err.status} {err.code}): {err.message}{hint}", "auth")
    if err.status == 404:
        return _fail(f"not found: {err.message}", "not_found")
    if err.status in (400, 409):
        lines = [f"rejected ({err.status} {err.code}): {err.message}"]
        lines += [f"  {field}: {' '.join(messages)}" for field, messages in sorted(err.fields.items())]
        return _fail("\n".join(lines), "invalid")
    if err.status == 429:
        return _fail(f"too many requests: {err.message}", "unavailable")
    return _fail(f"server error ({err.status} {err.code}): {err.message}", "unavailable")


if __name__ == "__main__":
    sys.exit(main())
