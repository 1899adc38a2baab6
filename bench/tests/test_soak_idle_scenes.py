"""The soak's idle-GPU scenes as planned and counted (bench/soak/plan.py, checks.idle_rows),
without a cluster: the busy-one-rank gang is submitted and a reclaim of it fails the run's
'busy jobs reclaimed' row. The short soak (tests/live/soak/test_soak_short.py) runs them live."""

from bench.soak import checks, plan
from bench.soak.profile import load


def planned_scenes() -> dict:
    scenes = {}
    for item in plan.build(load({"SOAK_MINUTES": "2"})):
        if item.scene in plan.IDLE_SCENES:
            scenes[item.scene] = item
    return scenes


def test_a_gang_with_one_busy_rank_is_planned_among_the_busy_scenes():
    gang = planned_scenes()["busy-one-rank"]
    assert gang.label == "volcano-training" and gang.body["workers"] >= 2
    assert gang.body["env"]["GPU_SIM_UTIL"] == "rank0=90;*=1"  # rank 0 busy, every other rank at 1 %


def test_the_busy_one_rank_gang_reclaimed_fails_the_busy_row():
    scenes = planned_scenes()
    for job_id, item in enumerate(scenes.values(), start=1):
        item.job_id = job_id
    gang = scenes["busy-one-rank"]
    idle = {item.job_id: (100.0, 120.0) for item in scenes.values() if item.scene.startswith("idle")}
    states = {item.job_id: "reclaimed" if item.scene.startswith("idle") else "running" for item in scenes.values()}
    busy_row, idle_row = checks.idle_rows(list(scenes.values()), states, idle, grace=20, sweep=5)
    assert busy_row.ok and idle_row.ok and "of 3" in busy_row.result

    states[gang.job_id] = "reclaimed"
    busy_row, _ = checks.idle_rows(list(scenes.values()), states, idle, grace=20, sweep=5)
    assert not busy_row.ok and f"#{gang.job_id}" in busy_row.result


def test_a_grace_that_ends_while_the_api_server_is_away_reclaims_at_the_first_sweep_after_it():
    scenes = planned_scenes()
    idle_jobs = [item for item in scenes.values() if item.scene.startswith("idle")]
    for job_id, item in enumerate(idle_jobs, start=1):
        item.job_id = job_id
    states = {item.job_id: "reclaimed" for item in idle_jobs}
    late = {item.job_id: (100.0, 142.0) for item in idle_jobs}  # warned at 100, grace 20: due at 120
    _, row = checks.idle_rows(idle_jobs, states, late, grace=20, sweep=5)
    assert not row.ok and "after 42s" in row.result
    _, row = checks.idle_rows(idle_jobs, states, late, grace=20, sweep=5, away=(118.0, 138.0))
    assert row.ok, row.result
    _, row = checks.idle_rows(idle_jobs, states, late, grace=20, sweep=5, away=(60.0, 80.0))  # long before
    assert not row.ok
