"""The idle rule (jobs/use/idle.py): fixed windows, every GPU of every pod, paused when unsure."""

from datetime import UTC, datetime

import pytest

from cluster.prometheus import Prometheus
from jobs.lifecycle import State
from jobs.models import Job
from jobs.use import idle
from jobs.use.idle import Window
from tests.builders import make_flavor, make_job
from workloads.pods import object_name

W = 10  # window seconds
NOW = 1_800_000_000.0  # a multiple of W: the latest window ends now
START = NOW - 600


def running(team, flavor, *, workers=1, gpus=1, **fields) -> Job:
    job = make_job(team, flavor, workers=workers, gpus_per_worker=gpus, **fields)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING, gpus_in_use=workers * gpus,
                                         started_at=datetime.fromtimestamp(START, tz=UTC))
    job.refresh_from_db()
    return job


def pod(job, index=0) -> str:
    return f"{object_name(job)}-{index}-abcde"


def profile(*steps: tuple[float, float], since: float = 0.0):
    """GPU_SIM_UTIL's profile: (seconds from ``since``, percent), the last step from there on."""
    def at(t: float) -> float:
        value = steps[0][1]
        for offset, percent in steps:
            if t - since >= offset:
                value = percent
        return value
    return at


def read(prometheus_api, *jobs, threshold=5, lookback=300) -> dict:
    """What the idle rule reads of ``jobs`` through a Prometheus client asking ``prometheus_api`` (the
    stand-in, or a client itself; None: no Prometheus)."""
    prometheus = prometheus_api if prometheus_api is None or isinstance(prometheus_api, Prometheus) else Prometheus(prometheus_api.url)
    return idle.measure(prometheus, jobs, now=NOW, window_seconds=W,
                        lookback_seconds={job.pk: lookback for job in jobs},
                        thresholds={job.pk: threshold for job in jobs})


# --- the pure rule -----------------------------------------------------------------------
@pytest.mark.parametrize("case, states, idle_seconds, run_start", [
    ("every window idle counts them all", [Window.IDLE] * 4, 40, 960.0),
    ("a busy window resets the count", [Window.IDLE, Window.BUSY, Window.IDLE, Window.IDLE], 20, 980.0),
    ("an unknown window ends the run too", [Window.IDLE, Window.UNKNOWN, Window.IDLE], 10, 990.0),
    ("busy now is not idle at all", [Window.IDLE, Window.IDLE, Window.BUSY], 0, None),
])
def test_the_idle_run_is_the_idle_windows_ending_now(case, states, idle_seconds, run_start):
    ends = [1000.0 - W * (len(states) - 1 - i) for i in range(len(states))]
    got = idle.reading(states, ends, W)
    assert (got.idle_seconds, got.run_start, got.known) == (idle_seconds, run_start, True), case


def test_an_unknown_latest_window_pauses_the_job():
    got = idle.reading([Window.IDLE, Window.IDLE, Window.UNKNOWN], [980.0, 990.0, 1000.0], W)
    assert not got.known and got.idle_seconds == 0 and "No GPU metrics" in got.paused


def test_a_window_is_idle_only_when_every_gpu_reported_below_the_threshold():
    ends = [10.0, 20.0, 30.0]
    samples = {"a": {10.0: 1, 20.0: 1, 30.0: 1}, "b": {10.0: 2, 20.0: 50}}
    assert idle.window_states(samples, gpus=2, ends=ends, threshold_percent=5) == [
        Window.IDLE, Window.BUSY, Window.UNKNOWN]
    # a third GPU the job holds that never reported makes every window unknown
    assert set(idle.window_states(samples, gpus=3, ends=ends, threshold_percent=5)) == {Window.UNKNOWN}


def test_windows_are_fixed_on_the_clock_and_start_after_the_pod():
    assert idle.window_ends(1005.0, W, since=973.0) == [990.0, 1000.0]


# --- measured through a Prometheus --------------------------------------------------------
def test_a_job_idle_for_five_minutes_reads_idle_for_the_whole_lookback(team, flavor, prometheus_api):
    job = running(team, flavor)
    prometheus_api.gpu(team.namespace_name, pod(job), 0, util=1)
    got = read(prometheus_api, job)[job.pk]
    assert got.known and got.idle_seconds == 300 and got.last_busy is None


def test_a_steadily_busy_job_is_never_idle(team, flavor, prometheus_api):
    job = running(team, flavor)
    prometheus_api.gpu(team.namespace_name, pod(job), 0, util=70)
    got = read(prometheus_api, job)[job.pk]
    assert got.idle_seconds == 0 and got.last_busy == NOW


def test_a_bursty_job_with_gaps_shorter_than_a_window_is_never_idle(team, flavor, prometheus_api):
    # 2 s at 95 % every 8 s, 0 % in between: every 10 s window holds a burst
    job = running(team, flavor)
    prometheus_api.gpu(team.namespace_name, pod(job), 0, util=lambda t: 95.0 if t % 8 < 2 else 0.0)
    got = read(prometheus_api, job)[job.pk]
    assert got.idle_seconds == 0 and got.known


def test_a_job_busy_then_idle_counts_from_its_last_busy_window(team, flavor, prometheus_api):
    job = running(team, flavor)
    prometheus_api.gpu(team.namespace_name, pod(job), 0, util=profile((0, 90), (420, 1), since=START))
    got = read(prometheus_api, job)[job.pk]
    assert got.idle_seconds == 180 and got.run_start == NOW - 180 and got.last_busy == NOW - 180


def test_memory_held_at_zero_activity_is_idle(team, flavor, prometheus_api):
    # The rule reads engine activity (or utilization), never memory: a job that squats on its
    # GPUs' memory without computing is idle.
    job = running(team, flavor)
    prometheus_api.gpu(team.namespace_name, pod(job), 0, util=0, mem_mib=70_000)
    assert read(prometheus_api, job)[job.pk].idle_seconds == 300
    assert all("FB_USED" not in q and "FB_FREE" not in q for q in prometheus_api.promql)
    assert idle.ACTIVITY in prometheus_api.promql[0] and idle.UTILIZATION in prometheus_api.promql[0]


def test_a_gang_with_one_busy_rank_is_not_idle(team, flavor, prometheus_api):
    gang = running(team, flavor, workers=4)
    for i in range(3):
        prometheus_api.gpu(team.namespace_name, pod(gang, i), 0, host=f"n{i}", util=0)
    prometheus_api.gpu(team.namespace_name, pod(gang, 3), 0, host="n3", util=80)
    assert read(prometheus_api, gang)[gang.pk].idle_seconds == 0


def test_every_gpu_of_a_pod_counts_mig_slices_each(team, prometheus_api):
    mig = make_flavor("mig-1g", resource_name="nvidia.com/mig-1g.10gb", gpus_per_node=7)
    job = running(team, mig, gpus=2)
    slices = [prometheus_api.gpu(team.namespace_name, pod(job), 0, mig=str(i), util=0) for i in (1, 2)]
    assert read(prometheus_api, job)[job.pk].idle_seconds == 300
    slices[1].value = 60  # the second slice of the same GPU computes
    assert read(prometheus_api, job)[job.pk].idle_seconds == 0


def test_a_gpu_without_metrics_pauses_the_job(team, flavor, prometheus_api):
    job = running(team, flavor, gpus=2)
    prometheus_api.gpu(team.namespace_name, pod(job), 0, util=0)
    got = read(prometheus_api, job)[job.pk]
    assert not got.known and got.idle_seconds == 0


def test_metrics_that_stopped_coming_pause_the_job(team, flavor, prometheus_api):
    job = running(team, flavor)
    prometheus_api.gpu(team.namespace_name, pod(job), 0, util=lambda t: 0.0 if t < NOW - 60 else None)
    got = read(prometheus_api, job)[job.pk]
    assert not got.known


def test_an_unreachable_prometheus_pauses_every_job_with_its_reason(team, flavor):
    a, b = running(team, flavor), running(team, flavor)
    got = read(Prometheus("http://127.0.0.1:9"), a, b)  # nothing listens on the discard port
    assert {r.paused for r in got.values()} == {"Prometheus at http://127.0.0.1:9 cannot be reached."}


def test_no_prometheus_configured_pauses_every_job(team, flavor):
    job = running(team, flavor)
    assert "not configured" in read(None, job)[job.pk].paused


def test_one_query_for_many_jobs_and_no_job_takes_anothers_gpus(team, flavor, outsider, prometheus_api):
    a = running(team, flavor, name="train")
    b = running(team, flavor, name="train-b")
    other_team = outsider.memberships.get().team
    c = running(other_team, flavor, name="train")
    prometheus_api.gpu(team.namespace_name, pod(a), 0, util=0)
    prometheus_api.gpu(team.namespace_name, pod(b), 0, util=90)
    prometheus_api.gpu(other_team.namespace_name, pod(c), 0, util=90)
    got = read(prometheus_api, a, b, c)
    assert prometheus_api.queries == 1
    assert (got[a.pk].idle_seconds, got[b.pk].idle_seconds, got[c.pk].idle_seconds) == (300, 0, 0)


def test_a_job_younger_than_one_window_is_paused_not_idle(team, flavor, prometheus_api):
    job = running(team, flavor)
    Job.objects.filter(pk=job.pk).update(started_at=datetime.fromtimestamp(NOW - 5, tz=UTC))
    job.refresh_from_db()
    prometheus_api.gpu(team.namespace_name, pod(job), 0, util=0)
    got = read(prometheus_api, job)[job.pk]
    assert not got.known and got.idle_seconds == 0
