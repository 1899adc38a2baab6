"""The ``gpuctl`` commands: each takes the client, the parsed arguments and the output, and
returns the exit code. Every answer about a job names its page (``web_url``)."""

import sys
import uuid

import yaml

from . import waiting
from .client import Client
from .jobfile import JobFileError, load
from .output import EXIT, Output
from .said import status_lines

# The reason of a job the platform holds back because its submitter is at their per-person cap
# (jobs.lifecycle.AT_PERSONAL_CAP on the server; a test holds the two equal).
AT_CAP = "AtPersonalCap"
# The reason of a job kept back so that the first waiting job of a flavor that reserves is not
# delayed (jobs.lifecycle.BEHIND_RESERVATION): its message says which maximum runtime starts it now.
BEHIND = "BehindReservation"


def submit(client: Client, args, out: Output) -> int:
    text = sys.stdin.read() if args.file == "-" else _read(args.file)
    spec = load(text, team=args.team)
    if args.dry_run:
        return _dry_run(client, spec, out)
    key = args.idempotency_key or str(uuid.uuid4())
    status, job = client.request("POST", "jobs", body=spec, headers={"Idempotency-Key": key})
    verb = "submitted" if status == 201 else "already submitted (same Idempotency-Key)"
    out.progress(f"job {job['id']} {job['team']}/{job['name']} {verb}: {job['state']}")
    out.progress(f"page: {job['web_url']}")
    if job.get("reason") == AT_CAP:
        out.note(f"waiting at your cap: {job['message']}")
    elif job.get("reason") == BEHIND:
        out.note(f"kept back behind a reservation: {job['message']}")
    verdict = job.get("feasibility") or {}
    if verdict.get("verdict") == "never":
        if args.wait:  # it would wait for ever: say why now, and leave the job to its owner
            out.answer(job)
            return out.fail(f"job {job['id']} can never run as asked: {verdict['message']} It stays submitted "
                            f"(the quota may grow): cancel it with 'gpuctl cancel {job['id']}'.", "never",
                            {"job": job["id"], "feasibility": verdict})
        out.note(f"warning: {verdict['message']}")
    elif verdict.get("waits_for"):  # room on the nodes, not quota: say which jobs it waits for
        out.note(verdict["message"])
    if verdict.get("verdict") == "queue" and job.get("eta"):
        out.progress(f"job {job['id']}: {job['eta']['message']}")
    if not args.wait:
        out.answer(job)
        return EXIT["ok"]
    return waiting.wait(client, job, args, out)


def _dry_run(client: Client, spec: dict, out: Output) -> int:
    """The server checks the job and renders its objects; nothing is created. Text: the
    objects as YAML on standard output (for kubeconform and friends), the verdict on stderr."""
    _, plan = client.request("POST", "jobs/dry-run", body=spec, retry=True)
    if out.answer(plan):
        return EXIT["ok"]
    sys.stdout.write(yaml.safe_dump_all(plan["objects"], sort_keys=False))
    job = plan["job"]
    out.note(f"dry run: {job['team']}/{job['name']} would be accepted; nothing was created.")
    out.note(f"{plan['feasibility']['verdict']}: {plan['feasibility']['message']}")
    return EXIT["ok"]


def wait(client: Client, args, out: Output) -> int:
    job = client.get(f"jobs/{args.id}")
    out.progress(f"job {job['id']} {job['team']}/{job['name']}: {job['state']}")
    out.progress(f"page: {job['web_url']}")
    return waiting.wait(client, job, args, out)


def status(client: Client, args, out: Output) -> int:
    job = client.get(f"jobs/{args.id}")
    events = client.get(f"jobs/{args.id}/events")
    if out.answer({**job, "events": events}):
        return EXIT["ok"]
    print(f"job {job['id']}  {job['team']}/{job['name']}  ({job['kind']}, {job['flavor']}, {job['total_gpus']} GPUs)")
    print("\n".join(status_lines(job)))
    print(f"page: {job['web_url']}")
    print(f"image: {job['image']}  submitted by {job['submitter'] or '-'} at {job['submitted_at'] or '-'}")
    _print_runtime(job)
    if eta := job.get("eta"):
        print(f"start: {eta['message']}  (GPU Platform's estimate)")
        for advice in eta.get("sooner") or ():
            print(f"  sooner: {advice['message']}  (clone: {advice['clone_url']})")
    _print_idle(job.get("idle") or {}, job["state"])
    for event in events:
        print(f"  {event['created_at']}  {event['from_state'] or '-':>10} -> {event['to_state']:<10} {event['reason']}")
    return EXIT["ok"]


def _print_runtime(job: dict) -> None:
    if job.get("max_runtime_seconds"):
        left = job.get("runtime_left_seconds")
        print(f"max runtime: {_span(job['max_runtime_seconds'])}"
              + (f", {_span(left)} left (counted from admission)" if left is not None else ""))


def _print_idle(idle: dict, state: str) -> None:
    if idle.get("idle_gpu_hours") is not None and state == "reclaimed":
        print(f"reclaimed at {idle['reclaim_at']}: {idle['idle_gpu_hours']} idle GPU-hours")
    elif idle.get("exempt_reason"):
        print(f"exempt from idle reclaim ({idle['exempted_by'] or '-'}): {idle['exempt_reason']}")
    elif idle.get("reclaim_at"):
        print(f"idle GPUs: reclaimed at {idle['reclaim_at']} unless busy again")
    elif idle.get("paused_reason"):
        print(f"idle reclaim paused: {idle['paused_reason']}")


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


def list_jobs(client: Client, args, out: Output) -> int:
    params = {"team": args.team, "state": args.state, "page_size": min(args.limit, 200)}
    jobs = []
    for job in client.pages("jobs", **{k: v for k, v in params.items() if v}):
        jobs.append(job)
        if len(jobs) >= args.limit:
            break
    if out.answer(jobs):
        return EXIT["ok"]
    out.table([("ID", "TEAM", "NAME", "STATE", "FLAVOR", "GPUS", "SUBMITTED", "PAGE")] + [
        (str(j["id"]), j["team"], j["name"], _state(j), j["flavor"], str(j["total_gpus"]), j["submitted_at"] or "-",
         j["web_url"]) for j in jobs
    ])
    return EXIT["ok"]


def act(verb: str):
    """``cancel``, ``stop`` and ``start``: one POST on the job, its new state and page."""
    def run(client: Client, args, out: Output) -> int:
        _, job = client.request("POST", f"jobs/{args.id}/{verb}", retry=False)
        if not out.answer(job):
            print(f"job {job['id']} {job['state']}  {job['web_url']}")
        return EXIT["ok"]

    return run


def exempt(client: Client, args, out: Output) -> int:
    _, job = client.request("POST", f"jobs/{args.id}/exempt-idle", body={"reason": args.reason}, retry=False)
    if not out.answer(job):
        print(f"job {job['id']} exempt from idle reclaim: {job['idle']['exempt_reason']}  {job['web_url']}")
    return EXIT["ok"]


def logs(client: Client, args, out: Output) -> int:
    if args.follow:
        return waiting.follow_logs(client, args, out)
    answer = client.get(f"jobs/{args.id}/logs", tail=args.tail)
    if out.answer(answer):
        return EXIT["ok"]
    if answer["message"]:
        print(answer["message"], file=sys.stderr)
    for pod in answer["pods"]:
        if len(answer["pods"]) > 1:
            print(f"==> {pod['pod']} <==")
        sys.stdout.write(pod["log"] if pod["log"].endswith("\n") or not pod["log"] else pod["log"] + "\n")
    return EXIT["ok"]


def whoami(client: Client, args, out: Output) -> int:
    me = client.get("me")
    if out.answer(me):
        return EXIT["ok"]
    token = me["token"]
    print(me["username"] + (" (quota manager)" if me["quota_manager"] else ""))
    if token:
        print(f"token: {token['name']} ({token['prefix']}...), team {token['team'] or 'all of yours'}, "
              f"scopes {' '.join(token['scopes'])}, expires {token['expires_at'] or 'never'}")
    out.table([("TEAM", "ROLE")] + [(team["slug"], team["role"]) for team in me["teams"]])
    return EXIT["ok"]


def flavors(client: Client, args, out: Output) -> int:
    """The flavors the caller's teams have quota on, with the GPUs free in that quota now:
    the teams the person is in (``me``), not every team a quota manager may read."""
    specs = {flavor["name"]: flavor for flavor in client.pages("flavors")}
    rows = []
    for team in client.get("me")["teams"]:
        if args.team and team["slug"] != args.team:
            continue
        for quota in client.get(f"teams/{team['slug']}")["quotas"]:
            flavor = specs.get(quota["flavor"], {})
            rows.append({"flavor": quota["flavor"], "team": team["slug"], "gpu_model": flavor.get("gpu_model", ""),
                         "gpus_per_node": flavor.get("gpus_per_node"), "scheduler": flavor.get("scheduler", ""),
                         "nominal_gpus": quota["nominal_gpus"], "ceiling_gpus": quota["ceiling_gpus"],
                         "running_gpus": quota["running_gpus"], "pending_gpus": quota["pending_gpus"],
                         "free_gpus": max(quota["nominal_gpus"] - quota["running_gpus"], 0)})
    rows.sort(key=lambda row: (row["flavor"], row["team"]))
    if out.answer(rows):
        return EXIT["ok"]
    out.table([("FLAVOR", "TEAM", "MODEL", "GPUS/NODE", "SCHEDULER", "QUOTA", "CEILING", "RUNNING", "FREE")] + [
        (r["flavor"], r["team"], r["gpu_model"], str(r["gpus_per_node"]), r["scheduler"], str(r["nominal_gpus"]),
         _number(r["ceiling_gpus"]), str(r["running_gpus"]), str(r["free_gpus"])) for r in rows])
    return EXIT["ok"]


def _number(value) -> str:
    return "-" if value is None else str(value)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as err:
        raise JobFileError(err.strerror or str(err)) from None
