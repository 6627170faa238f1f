"""The simulated GPU's step-time drift against the benchmark's interval: two derivations of one measurement (the
simulator steps a process; bench_stats states the spread of its time average in closed form) must agree."""

import math

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_stats
from moesweep_sim import drift, reference_profile


def test_off_unless_configured():
    assert drift.from_env({}) is None
    assert drift.from_env({"MOESWEEP_SIM_STEP_DRIFT": ""}) is None
    d = drift.from_env({"MOESWEEP_SIM_STEP_DRIFT": "0.003,6.0,7"})
    assert (d.cv, d.tau_s) == (0.003, 6.0)
    with pytest.raises(ValueError, match="CV,TAU_S"):
        drift.from_env({"MOESWEEP_SIM_STEP_DRIFT": "0.003"})


def test_the_same_seed_gives_the_same_course_and_steps_share_their_drift():
    a, b = drift.Drift(0.003, 60.0, 5), drift.Drift(0.003, 60.0, 5)
    xs = [a.factor(t * 0.05) for t in range(200)]
    assert xs == [b.factor(t * 0.05) for t in range(200)]
    # 50 ms steps within a 60 s correlation time: neighbours nearly equal, the whole course within a few CV of 1
    assert max(abs(x - y) for x, y in zip(xs, xs[1:], strict=False)) < 0.003 * 0.2
    assert all(abs(x - 1.0) < 0.003 * 5 for x in xs)


@pytest.mark.parametrize("span", [51.0, 291.0])  # one cohort at c1 and at c64 of the reference deployment
def test_the_spread_of_cohort_averages_is_the_intervals_drift_term(span):
    cv, tau, dt = bench_stats.DRIFT_CV, bench_stats.DRIFT_TAU_S, 0.5
    means = []
    for seed in range(1500):
        d = drift.Drift(cv, tau, seed)
        steps = int(span / dt)
        means.append(sum(d.factor(i * dt) - 1.0 for i in range(steps)) / steps)
    sd = math.sqrt(sum(m * m for m in means) / len(means))
    assert sd == pytest.approx(bench_stats.drift_se_rel(span), rel=0.1)


def test_the_simulated_profile_and_the_interval_read_the_same_measurement():
    # both take their constants from bench/device/results/step-drift-h100-x1-20261207/, each on its own side
    assert (reference_profile.DRIFT_CV, reference_profile.DRIFT_TAU_S) == (bench_stats.DRIFT_CV,
                                                                            bench_stats.DRIFT_TAU_S)
