"""Axis and legend helpers the studies' figures share: a cut axis marked as such, one legend under a row of panels."""

from __future__ import annotations

from collections.abc import Iterable

from matplotlib.axes import Axes
from matplotlib.figure import Figure


def mark_axis_break(ax: Axes) -> None:
    """A linear y axis that does not start at zero says so: the left spine is cut at its foot, below the lowest
    tick, and two slashes mark the cut (a ratio read against 1, whose differences would vanish on an axis from
    zero)."""
    bottom, top = ax.get_ylim()
    if ax.get_yscale() != "linear" or bottom <= 0:
        return
    ax.set_ylim(bottom - 0.08 * (top - bottom), top)  # room under the lowest tick for the cut
    cut = dict(transform=ax.transAxes, clip_on=False, zorder=5)
    ax.plot((0, 0), (0.012, 0.042), color="white", linewidth=2.5, **cut)
    for y in (0.012, 0.042):
        ax.plot((-0.015, 0.015), (y - 0.01, y + 0.01), color="black", linewidth=0.9, **cut)
    ax.set_ylabel(f"{ax.get_ylabel()} (axis not from 0)")


def legend_below(fig: Figure, axes: Iterable[Axes], ncol: int = 3) -> None:
    """One legend for all panels, under them, entries deduplicated by label."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(
            list(seen.values()),
            list(seen),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=min(ncol, len(seen)),
            fontsize=8,
            frameon=False,
        )
