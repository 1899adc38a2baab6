"""`make bench-eta`'s reference estimators (bench/eta.py): told what no platform can know, they
measure the floor the platform's information sets. They only mean something if they really
know the generator: checked against jobs it draws."""

import random

import pytest

from bench import eta as replay

HOUR = 3600.0


@pytest.mark.parametrize("max_runtime", [600.0, 1800.0, 4 * HOUR])
def test_the_posterior_is_the_generators_runtime_given_its_maximum(max_runtime):
    rng = random.Random(7)
    runtimes = sorted(job.runtime for job in (replay._job(rng, pk, 0.0, "a100", "vision") for pk in range(60_000))
                      if job.max_runtime == max_runtime)
    assert len(runtimes) > 300
    grid, weights = replay._posterior(max_runtime)
    low, high = replay.OVER_ASK
    assert grid[0] >= (max_runtime - replay.ROUND_UP) / high and grid[-1] <= max_runtime / low
    for q in (0.25, 0.5, 0.75):
        cut = sum(weights) * q
        seen = 0.0
        predicted = next(g for g, w in zip(grid, weights, strict=True) if (seen := seen + w) >= cut)
        observed = runtimes[int(q * (len(runtimes) - 1))]
        assert predicted == pytest.approx(observed, rel=0.08), q


def test_the_known_distribution_draw_respects_what_the_job_has_run():
    rng = random.Random(1)
    draws = [replay.known_distributions(rng, (), 2000.0, 3600.0) for _ in range(500)]
    assert min(draws) > 2000.0 and max(draws) <= 3600.0 / replay.OVER_ASK[0]

