"""``gpuctl``: submit and follow GPU Platform jobs from a shell or a CI step.

Configured by ``GPUPLATFORM_URL`` (e.g. https://gpu.example.org) and ``GPUPLATFORM_TOKEN``
(an API token). Exit codes are stable so a CI step can depend on them (see ``EXIT``). With
``-o json`` or ``-o yaml`` (before or after the command) standard output is that document
alone; progress and messages go to standard error (errors as JSON with ``-o json``).
"""

import argparse
import math
import os
import sys
import urllib.parse

from . import __version__, commands
from .client import ApiError, Client, Unreachable
from .commands import AT_CAP, BEHIND  # noqa: F401 (the names tests and scripts know them by)
from .jobfile import JobFileError
from .output import EXIT, OUTPUTS, Output, mode_in
from .waiting import FINAL  # noqa: F401

OUTAGE_WINDOW = 300.0  # seconds a wait rides out an unreachable platform (GPUPLATFORM_OUTAGE_WINDOW)
EPILOG = ("Environment: GPUPLATFORM_URL, GPUPLATFORM_TOKEN, GPUPLATFORM_OUTAGE_WINDOW (seconds, default "
          f"{OUTAGE_WINDOW:g}). Exit codes: 0 ok (or the job succeeded), 1 job failed, 2 usage, 3 job cancelled, "
          "4 rejected, 5 not allowed, 6 not found, 7 unavailable, 8 timeout, 9 the job can never run (--wait), "
          "10 the job was reclaimed for idle GPUs (--wait), 130 interrupted (SIGINT), 143 terminated (SIGTERM).")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _Parser.mode = mode_in(argv)
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "dry_run", False) and args.wait:
        parser.error("--dry-run creates nothing to wait for: leave out --wait")
    out = Output(args.output)
    url, token = os.environ.get("GPUPLATFORM_URL", ""), os.environ.get("GPUPLATFORM_TOKEN", "")
    problem = _configuration_problem(url, token)
    if problem:
        return out.fail(problem, "usage")
    try:
        window = _outage_window(args)
    except argparse.ArgumentTypeError as err:
        return out.fail(f"GPUPLATFORM_OUTAGE_WINDOW: {err}", "usage")
    client = Client(url, token, backoff=float(os.environ.get("GPUPLATFORM_RETRY_BACKOFF", "1")),
                    outage_window=window, on_outage=out.note)
    return _run(client, args, out)


def _run(client: Client, args, out: Output) -> int:
    try:
        return args.run(client, args, out)
    except ApiError as err:
        return out.api_failure(err)
    except Unreachable as err:
        return out.fail(str(err), "unavailable")
    except JobFileError as err:
        return out.fail(f"{args.file}: {err}", "invalid")
    except KeyboardInterrupt:
        return out.fail("interrupted", "interrupted")


def _configuration_problem(url: str, token: str) -> str:
    if not url:
        return "GPUPLATFORM_URL is not set (e.g. export GPUPLATFORM_URL=https://gpu.example.org)."
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"GPUPLATFORM_URL={url!r} is not an http(s) URL (e.g. https://gpu.example.org)."
    if not token:
        return ("GPUPLATFORM_TOKEN is not set: create a token in the platform "
                "(POST /api/v1/tokens or manage.py create_token) and export it.")
    return ""


def _outage_window(args) -> float:
    """Seconds to ride out an outage: only while following a job (a wait, logs -f)."""
    follows = getattr(args, "wait", False) or getattr(args, "follow", False) or args.command == "wait"
    if not follows:
        return 0
    if args.outage_window is not None:
        return args.outage_window
    return _seconds(above_zero=False)(os.environ.get("GPUPLATFORM_OUTAGE_WINDOW", str(OUTAGE_WINDOW)))


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with its errors as JSON on standard error when -o json was asked."""

    mode = "text"

    def error(self, message):
        if self.mode == "json":
            self.exit(EXIT["usage"], Output("json").fail_text(f"{self.prog}: {message}", "usage"))
        super().error(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpuctl", description="Submit and follow GPU Platform jobs from a shell or a CI step.",
                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"gpuctl {__version__}")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text", help="text (default), json or yaml")
    # The same option after the command too (gpuctl list -o json); its default leaves the first one's.
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("-o", "--output", choices=OUTPUTS, default=argparse.SUPPRESS, help="text, json or yaml")
    sub = parser.add_subparsers(required=True, metavar="COMMAND", dest="command")

    def command(name, *, parents=(), **kwargs):
        return sub.add_parser(name, parents=[output, *parents], epilog=EPILOG, **kwargs)

    _add_submit(command)
    _add_job_commands(command)
    _add_account_commands(command)
    return parser


def _wait_options() -> argparse.ArgumentParser:
    """How a wait polls, how long it waits, what it does when stopped."""
    waits = argparse.ArgumentParser(add_help=False)
    waits.add_argument("--interval", type=_seconds(above_zero=True), default=5.0,
                       help="seconds between polls (more than 0; default 5)")
    waits.add_argument("--timeout", type=_seconds(above_zero=False), default=0,
                       help="give up waiting after this many seconds (exit 8; 0, the default: never)")
    _add_outage_window(waits)
    waits.add_argument("--cancel-on-interrupt", action=argparse.BooleanOptionalAction, default=True,
                       help="on SIGTERM or SIGINT while waiting, cancel the job on the server, then exit 143 or "
                            "130 (default: on; --no-cancel-on-interrupt leaves the job running)")
    waits.add_argument("--cancel-on-timeout", action="store_true",
                       help="cancel the job on the server when --timeout gives up (default: leave it)")
    return waits


def _add_outage_window(parser) -> None:
    parser.add_argument("--outage-window", type=_seconds(above_zero=False), default=None, metavar="SECONDS",
                        help="while following a job, retry for this long when the platform is unreachable or "
                             "answers 502/503/504, with backoff, then exit 7 (default: GPUPLATFORM_OUTAGE_WINDOW, "
                             f"else {OUTAGE_WINDOW:g})")


def _add_submit(command) -> None:
    p = command("submit", parents=[_wait_options()], help="submit a job from a YAML file")
    p.add_argument("-f", "--file", required=True, help="job file (YAML), '-' for standard input")
    p.add_argument("--team", help="team slug (overrides 'team' in the file)")
    p.add_argument("--wait", action="store_true",
                   help="follow the job; exit 0 only if it succeeds, 9 at once if it can never run")
    p.add_argument("--dry-run", action="store_true",
                   help="have the server check the job and print the objects it would apply; create nothing")
    p.add_argument("--idempotency-key", help="retry-safe key (default: a new one; give e.g. the CI run id)")
    p.set_defaults(run=commands.submit)


def _add_job_commands(command) -> None:
    """The commands that read or change jobs already submitted, in the order help lists them."""
    p = command("wait", parents=[_wait_options()], help="follow a submitted job to its end (exit codes as --wait)")
    p.add_argument("id", type=int, help="job id")
    p.set_defaults(run=commands.wait)

    p = command("status", help="show a job and its events")
    p.add_argument("id", type=int, help="job id")
    p.set_defaults(run=commands.status)

    p = command("list", help="list jobs, newest first")
    p.add_argument("--team", help="only this team's jobs (a slug)")
    p.add_argument("--state", action="append", help="only jobs in this state; repeat for several")
    p.add_argument("--limit", type=_at_least_one, default=50, help="at most this many jobs (default 50)")
    p.set_defaults(run=commands.list_jobs)

    for verb, text in (("cancel", "cancel a job"), ("stop", "stop a notebook: its GPUs go back, its volumes stay"),
                       ("start", "start a stopped notebook again (within the team's own quota)")):
        p = command(verb, help=text)
        p.add_argument("id", type=int, help="job id")
        p.set_defaults(run=commands.act(verb))

    p = command("exempt", help="exempt a job from idle-GPU reclaim, with a reason (team owners, where allowed)")
    p.add_argument("id", type=int, help="job id")
    p.add_argument("--reason", required=True, help="why the job may keep idle GPUs (recorded and audited)")
    p.set_defaults(run=commands.exempt)

    p = command("logs", help="print the last lines of a job's pods (-f: follow them until the job ends)")
    p.add_argument("id", type=int, help="job id")
    p.add_argument("--tail", type=_at_least_one, default=200, help="last lines per pod (1-5000, default 200)")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep printing new lines until the job ends; exit with its outcome, as wait does")
    p.add_argument("--interval", type=_seconds(above_zero=True), default=2.0,
                   help="with -f: seconds between polls (more than 0; default 2)")
    _add_outage_window(p)
    p.set_defaults(run=commands.logs)


def _add_account_commands(command) -> None:
    p = command("whoami", help="who the token is: the person, the token, their teams and roles")
    p.set_defaults(run=commands.whoami)

    p = command("flavors", help="the GPU flavors your teams have quota on, with the GPUs free in it now")
    p.add_argument("--team", help="only this team's quotas (a slug)")
    p.set_defaults(run=commands.flavors)


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


if __name__ == "__main__":
    sys.exit(main())
