"""Plots of benchmark results (matplotlib, headless Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aios_rl.campaign.rollout_bench import MethodSummary


def plot_rollout_curves(summaries: Sequence[MethodSummary], path: Path, *, title: str = "") -> Path:
    """Holdout success (mean over seeds, ±1 std band) against rollouts consumed, one line per method."""
    import matplotlib

    matplotlib.use("Agg")  # no display: benchmarks run on servers
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.5), dpi=120)
    try:
        for summary in summaries:
            x = [p[0] for p in summary.curve]
            mean = [100 * p[1] for p in summary.curve]
            std = [100 * p[2] for p in summary.curve]
            (line,) = ax.plot(x, mean, marker="o", label=summary.method)
            ax.fill_between(
                x,
                [m - s for m, s in zip(mean, std)],
                [m + s for m, s in zip(mean, std)],
                color=line.get_color(),
                alpha=0.15,
            )
        ax.set_xlabel("rollouts consumed (branches and resamples included)")
        ax.set_ylabel("holdout success (%)")
        ax.set_title(title or "holdout success vs rollout budget")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
