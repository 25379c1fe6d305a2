"""The `bench rollouts` table's RAIL lines, including the majority-sign base rate."""

from __future__ import annotations

from aios_rl.campaign.rollout_bench import BenchConfig, MethodSummary, format_table


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
