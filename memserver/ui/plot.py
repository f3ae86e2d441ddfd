"""The Stats page's plot: memories per month as an inline SVG bar chart, drawn here (no script, no library).
Colours come from the stylesheet (classes), so the plot follows light and dark mode."""

from __future__ import annotations

from collections.abc import Mapping

from memserver.ui.markup import Markup, el

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 720, 240, 48, 28, 12


def months_between(first: str, last: str) -> list[str]:
    """Every "YYYY-MM" from `first` to `last`, both included (months without memories too)."""
    year, month = int(first[:4]), int(first[5:7])
    out: list[str] = []
    while f"{year:04d}-{month:02d}" <= last and len(out) < 1200:
        out.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def timeline_plot(per_month: Mapping[str, int]) -> Markup:
    valid = sorted(m for m in per_month if len(m) == 7 and m[:4].isdigit() and m[5:7].isdigit())
    months = months_between(valid[0], valid[-1]) if valid else []
    peak = max((per_month.get(m, 0) for m in months), default=0)
    title = el("title", "Memories per month")
    desc = el("desc", ", ".join(f"{m}: {per_month.get(m, 0)}" for m in months) or "No memories yet.")
    if not months or peak == 0:
        return el(
            "svg",
            title,
            desc,
            el("text", "No memories yet.", x="20", y="40", class_="axis"),
            id="timeline-plot",
            viewBox=f"0 0 {WIDTH} 80",
            role="img",
            aria_label="Memories per month: none yet",
        )
    inner_w, inner_h = WIDTH - PAD_LEFT - 8, HEIGHT - PAD_BOTTOM - PAD_TOP
    step = inner_w / len(months)
    bars = []
    for i, month in enumerate(months):
        n = per_month.get(month, 0)
        h = inner_h * n / peak
        x = PAD_LEFT + i * step
        bars.append(
            el(
                "rect",
                el("title", f"{month}: {n}"),
                x=f"{x + step * 0.1:.1f}",
                y=f"{PAD_TOP + inner_h - h:.1f}",
                width=f"{max(step * 0.8, 1):.1f}",
                height=f"{h:.1f}",
                class_="bar",
            )
        )
    every = max(1, len(months) // 8)
    labels = [
        el(
            "text",
            month,
            x=f"{PAD_LEFT + i * step + step / 2:.1f}",
            y=str(HEIGHT - 8),
            class_="axis",
            text_anchor="middle",
        )
        for i, month in enumerate(months)
        if i % every == 0
    ]
    axis = [
        el(
            "line",
            x1=str(PAD_LEFT),
            y1=str(PAD_TOP + inner_h),
            x2=str(WIDTH - 8),
            y2=str(PAD_TOP + inner_h),
            class_="axis-line",
        ),
        el("text", f"{peak:,}", x=str(PAD_LEFT - 6), y=str(PAD_TOP + 10), class_="axis", text_anchor="end"),
        el("text", "0", x=str(PAD_LEFT - 6), y=str(PAD_TOP + inner_h), class_="axis", text_anchor="end"),
    ]
    return el(
        "svg",
        title,
        desc,
        axis,
        bars,
        labels,
        id="timeline-plot",
        viewBox=f"0 0 {WIDTH} {HEIGHT}",
        role="img",
        aria_label=f"Memories per month, {months[0]} to {months[-1]}, at most {peak} in a month",
    )
