"""What ``gpuctl`` prints and the exit codes it ends with.

Standard output is the answer: text, or with ``-o json``/``-o yaml`` one document alone.
Progress and messages go to standard error; with ``-o json`` an error is one JSON object
there too, in a stable shape: ``{"error": {"code", "message", "exit_code", "details"}}``.
"""

import json
import sys

import yaml

from .client import ApiError

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
    "interrupted": 130,  # SIGINT (Ctrl-C), as a shell reports it
    "terminated": 143,   # SIGTERM (a CI runner cancelling the step), as a shell reports it
}
OUTPUTS = ["text", "json", "yaml"]


class Output:
    """Where a command's lines go, for the output format it was asked for."""

    def __init__(self, mode: str = "text"):
        self.mode = mode

    @property
    def text(self) -> bool:
        return self.mode == "text"

    def progress(self, line: str) -> None:
        """A line for the person watching: standard output in text mode, else standard error
        (standard output is the document alone)."""
        print(line, file=sys.stdout if self.text else sys.stderr, flush=True)

    def note(self, line: str) -> None:
        """A message beside the answer (a warning, a retry), always on standard error."""
        print(f"gpuctl: {line}", file=sys.stderr, flush=True)

    def doc(self, value) -> None:
        """The answer as one JSON or YAML document on standard output."""
        if self.mode == "yaml":
            sys.stdout.write(yaml.dump(value, Dumper=_NoAliases, sort_keys=True, allow_unicode=True))
        else:
            print(json.dumps(value, indent=2, sort_keys=True))

    def doc_line(self, value) -> None:
        """One item of a stream (logs -f) as one line of JSON (JSON is YAML too)."""
        print(json.dumps(value, sort_keys=True), flush=True)

    def answer(self, value) -> bool:
        """Print ``value`` as the document if a document was asked for; whether it was."""
        if not self.text:
            self.doc(value)
        return not self.text

    def fail(self, message: str, kind: str, details: dict | None = None) -> int:
        """Say what went wrong on standard error (JSON with -o json); returns its exit code."""
        print(self.fail_text(message, kind, details), end="", file=sys.stderr, flush=True)
        return EXIT[kind]

    def fail_text(self, message: str, kind: str, details: dict | None = None) -> str:
        if self.mode == "json":
            error = {"code": kind, "message": message, "exit_code": EXIT[kind], "details": details or {}}
            return json.dumps({"error": error}, sort_keys=True) + "\n"
        return f"gpuctl: {message}\n"

    def api_failure(self, err: ApiError) -> int:
        details = {"status": err.status, "api_code": err.code, "fields": err.fields}
        if err.status in (401, 403):
            hint = " Check GPUPLATFORM_TOKEN." if err.status == 401 else ""
            return self.fail(f"not allowed ({err.status} {err.code}): {err.message}{hint}", "auth", details)
        if err.status == 404:
            return self.fail(f"not found: {err.message}", "not_found", details)
        if err.status in (400, 409):
            lines = [f"rejected ({err.status} {err.code}): {err.message}"]
            lines += [f"  {field}: {' '.join(messages)}" for field, messages in sorted(err.fields.items())]
            return self.fail("\n".join(lines), "invalid", details)
        if err.status == 429:
            return self.fail(f"too many requests: {err.message}", "unavailable", details)
        return self.fail(f"server error ({err.status} {err.code}): {err.message}", "unavailable", details)

    def table(self, rows: list[tuple]) -> None:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def mode_in(argv: list[str]) -> str:
    """The output format ``argv`` asks for, read before argparse has (for its own errors)."""
    mode = "text"
    for i, arg in enumerate(argv):
        if arg in ("-o", "--output") and i + 1 < len(argv):
            mode = argv[i + 1]
        elif arg.startswith("--output="):
            mode = arg.split("=", 1)[1]
        elif arg.startswith("-o") and len(arg) > 2:
            mode = arg[2:]
    return mode if mode in OUTPUTS else "text"
