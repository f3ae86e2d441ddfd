"""Plot recall latency and RSS against store size, from the JSON results (matplotlib, PNG).

    uv run --group bench python -m benchmarks.plot      # reads benchmarks/results/*.json, writes recall_vs_size.png

Left: recall over MCP stdio p50 and p95 (recall_mcp.json) with the bare embedding floor, the 1.3x target line
and the server's own query-embedding time. Right: resident memory of the server after its recalls
(recall_mcp.json), and of a fresh process that only opens the store (scale.json), against the number of memories.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks import _common as C


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=str(C.RESULTS), help="folder with recall_mcp.json and scale.json")
    parser.add_argument("--out", default=None, help="PNG to write (default <results>/recall_vs_size.png)")
    args = parser.parse_args(argv)
    results = Path(args.results)
    recall = {n: r for n, r in load(results / "recall_mcp.json").get("sizes", {}).items() if n.isdigit()}  # hybrid
    scale = load(results / "scale.json").get("sizes", {})
    if not recall and not scale:
        C.log(f"no recall_mcp.json or scale.json in {results}")
        return 1

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    if recall:
        ns = sorted(int(n) for n in recall)
        get = lambda key, p: [recall[str(n)][key][p] for n in ns]  # noqa: E731
        ax1.plot(ns, get("recall_ms", "p50"), "o-", label="recall over MCP, p50")
        ax1.plot(ns, get("recall_ms", "p95"), "o--", alpha=0.6, label="recall over MCP, p95")
        if all("raw_client" in recall[str(n)] for n in ns):
            raw = [recall[str(n)]["raw_client"]["recall_ms"]["p50"] for n in ns]
            ax1.plot(ns, raw, "D-", color="tab:purple", label="same, raw JSON-RPC client, p50")
        floor = get("floor_bare_ms", "p50")
        ax1.plot(ns, floor, "s-", color="grey", label="bare embedding floor, p50")
        ax1.plot(ns, [1.3 * f for f in floor], ":", color="grey", label="target: 1.3x floor")
        embed = [recall[str(n)].get("breakdown_p50_ms", {}).get("embed") for n in ns]
        if all(e is not None for e in embed):
            ax1.plot(ns, embed, "^-", color="green", alpha=0.6, label="server's own embed_query, p50")
        for n in ns:
            b = recall[str(n)].get("breakdown_p50_ms", {})
            if "search" in b:
                ax1.annotate(
                    f"search {b['search']:.1f} ms",
                    (n, recall[str(n)]["recall_ms"]["p50"]),
                    fontsize=7,
                    textcoords="offset points",
                    xytext=(4, -12),
                )
        rss = [recall[str(n)].get("server_rss_mb", {}).get("rss") for n in ns]
        ax2.plot(ns, rss, "o-", label="server RSS after recalls (model + store)")
    if scale:
        ns2 = sorted(int(n) for n in scale)
        ax2.plot(
            ns2,
            [scale[str(n)]["sentences"]["open_fresh_process"]["rss_mb"] for n in ns2],
            "s--",
            label="store opened alone (no model)",
        )
    ax2.axhline(3072, color="red", linestyle=":", label="target at 1M: 3 GB")
    for ax, title, ylabel in (
        (ax1, "recall latency vs store size", "ms"),
        (ax2, "resident memory vs store size", "MB"),
    ):
        ax.set_xscale("log")
        ax.set_xlabel("memories")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    ax2.set_yscale("log")
    taken = load(results / "recall_mcp.json").get("machine", {})
    fig.suptitle(
        f"memserver, {taken.get('cpus', '?')} CPUs ({taken.get('cpu', '')}), {taken.get('taken_at', '')}", fontsize=9
    )
    fig.tight_layout()
    out = Path(args.out or results / "recall_vs_size.png")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    C.log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
