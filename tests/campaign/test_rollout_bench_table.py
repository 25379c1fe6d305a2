"""The `bench rollouts` table: its summaries over seeds and RAIL's lines, with the majority-sign base rate."""

from __future__ import annotations

from aios_rl.campaign.rollout_bench import BenchConfig, MethodSummary, SeedRun, format_table, summarize


def summary(rail: dict[str, float]) -> MethodSummary:
    return MethodSummary(
        method="rail", success_mean=0.5, success_std=0.0, rollouts=256, env_steps=2000,
        rollouts_to_match_uniform16=None, zero_variance_share=0.0, wall_s=10.0, curve=[], rail=rail, seeds=[],
    )


def test_rail_lines_report_sign_agreement_beside_the_majority_sign():
    config = BenchConfig(methods=("rail",), seeds=1)
    promoted = {
        "rail/traces": 120.0, "rail/live": 1.0, "rail/promoted_at": 70.0, "rail/mae_online_paired": 0.02,
        "rail/mae_frozen": 0.04, "rail/sign_agreement": 0.72, "rail/sign_agreement_frozen": 0.7,
        "rail/sign_base_rate": 0.77, "rail/live_arm_share/none": 1.0,
    }
    lines = format_table([summary(promoted)], config)
    assert "  traces 120; live in 100% of seeds, promoted after 70 traces" in lines
    assert "  MAE online 0.0200 vs frozen-at-promotion 0.0400 (50 % lower)" in lines
    assert ("  sign agreement online 0.720 vs frozen 0.700 (not on the same traces)"
            " (always the majority sign: 0.770)") in lines
    paired = promoted | {"rail/sign_agreement_online_paired": 0.65}
    assert ("  sign agreement online 0.650 vs frozen 0.700 on the same traces;"
            " online over its last window 0.720 (always the majority sign: 0.770)"
            ) in format_table([summary(paired)], config)
    shadow = {"rail/traces": 20.0, "rail/live": 0.0, "rail/sign_agreement": 0.5, "rail/sign_base_rate": 0.6}
    lines = format_table([summary(shadow)], config)
    assert lines[-1] == (
        "  never promoted to live: no frozen copy to compare against; shadow sign agreement 0.500"
        " (always the majority sign: 0.600)"
    )
    older = {"rail/traces": 20.0, "rail/live": 0.0, "rail/sign_agreement": 0.5}  # saved before the rate
    assert format_table([summary(older)], config)[-1].endswith("shadow sign agreement 0.500")


def test_the_zero_variance_share_is_the_mean_over_seeds_like_every_other_column():
    def run(seed: int, groups: int, zero: int) -> SeedRun:
        return SeedRun(method="uniform-16", seed=seed, curve=[(0, 0.5), (8, 0.5)], rollouts=8, env_steps=20,
                       groups=groups, zero_variance_groups=zero, wall_s=1.0)

    # seed 0: none of its 10 groups had zero variance; seed 1: all 30 did. Over seeds: (0 + 1) / 2.
    (s,) = summarize({"uniform-16": [run(0, 10, 0), run(1, 30, 30)]})
    assert s.zero_variance_share == 0.5  # not the pooled 30 / 40
    # a seed that formed no groups has no share: the mean is over the seeds that did
    (s,) = summarize({"uniform-16": [run(0, 4, 1), run(1, 0, 0)]})
    assert s.zero_variance_share == 0.25
    (s,) = summarize({"uniform-16": [run(0, 0, 0)]})
    assert s.zero_variance_share == 0.0


def test_an_online_mae_above_the_frozen_copys_reads_higher_not_negative_lower():
    config = BenchConfig(methods=("rail",), seeds=1)
    worse = {"rail/traces": 130.0, "rail/live": 1.0, "rail/promoted_at": 64.0,
             "rail/mae_online_paired": 0.0531, "rail/mae_frozen": 0.0436}
    lines = format_table([summary(worse)], config)
    assert "  MAE online 0.0531 vs frozen-at-promotion 0.0436 (22 % higher)" in lines


def test_the_reference_is_found_under_any_name_of_uniform_16():
    """REFERENCE was matched by its exact text, so `--methods UNIFORM-16,rail` (or grpo-16) ran fine but
    lost the "to match uniform-16" column: no target, and "-" for every method."""
    def run(method: str, success: float) -> SeedRun:
        return SeedRun(method=method, seed=0, curve=[(8, success / 2), (16, success)], rollouts=16,
                       env_steps=40, groups=2, zero_variance_groups=0, wall_s=1.0)

    for reference in ("UNIFORM-16", "grpo-16", " Uniform-16"):
        runs = {reference: [run(reference, 0.5)], "rail": [run("rail", 1.0)], "dapo-4": [run("dapo-4", 0.2)]}
        summaries = summarize(runs)
        assert [s.rollouts_to_match_uniform16 for s in summaries] == [16, 8, None]
        config = BenchConfig(methods=(reference, "rail", "dapo-4"), seeds=1)
        rows = format_table(summaries, config)[2:5]
        assert [row.split()[-3] for row in rows] == ["16", "8", "reached"]  # "not reached", not "-"
