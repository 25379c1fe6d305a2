"""The ledger's companion for what the policy reports: act metrics averaged over observations."""

from __future__ import annotations

import pytest

from aios_rl.rollout.budget import ActMetrics


def test_act_metrics_weigh_each_call_by_the_observations_it_covered() -> None:
    act = ActMetrics()
    act.add({"policy/non_json_frac": 2 / 4, "policy/prompt_truncated_frac": 0.0}, observations=4)
    act.add({"policy/non_json_frac": 1.0, "policy/prompt_truncated_frac": 1.0}, observations=1)
    act.add({"policy/prompt_truncated_frac": 0.5}, observations=2)  # a call that reports one key only
    means = act.means()
    # 3 of the 5 answers were not JSON (a mean of the two calls' shares would say 0.75)
    assert means["policy/non_json_frac"] == pytest.approx(3 / 5)
    assert means["policy/prompt_truncated_frac"] == pytest.approx((0 + 1 + 1) / 7)
    assert list(means) == sorted(means)


def test_a_policy_that_reports_nothing_gives_no_key() -> None:
    act = ActMetrics()
    act.add({}, observations=8)
    assert act.means() == {}
