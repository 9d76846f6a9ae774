"""Plots ours against stock NCCL, one SVG per rank count: a run of perf/nccl_timer, or a result CSV of
nccl-tests (perf/nccl_tests_table.py --csv).

Usage: python perf/plot_side_by_side.py DIR OUTDIR
       python perf/plot_side_by_side.py --csv RESULT.csv OUTDIR
DIR holds `ours_COLL_N.txt` and `stock_COLL_N.txt` (perf/side_by_side.sh writes them); a CSV gives its
eager and graph rows. Writes OUTDIR/side_by_side_N.svg (for a CSV: OUTDIR/RESULT_N.svg): a panel per
collective, the speed-up (stock time / ours) against the size on a log scale, eager (solid) and in
graphs (dashed), with a line at the 1.1x target. Plain SVG, no plotting library.
"""

from __future__ import annotations

import csv
import math
import re
import sys
from collections import defaultdict
from pathlib import Path

from side_by_side import moves_data  # perf/, beside this script
from timer_summary import human, read

PANEL_W, PANEL_H, MARGIN, COLUMNS = 300, 190, 44, 3
TARGET = 1.1


def speedups(directory: Path) -> dict[int, dict[str, list[tuple[int, float, float]]]]:
    """ranks -> collective -> (size, eager speed-up, graph speed-up) for every size both libraries timed."""
    out: dict[int, dict[str, list[tuple[int, float, float]]]] = defaultdict(dict)
    for ours_path in sorted(directory.glob("ours_*_*.txt")):
        match = re.fullmatch(r"ours_(.+)_(\d+)\.txt", ours_path.name)
        stock_path = directory / ours_path.name.replace("ours_", "stock_", 1)
        if not match or not stock_path.exists():
            continue
        collective, nranks = match.group(1), int(match.group(2))
        ours, stock = read(ours_path), read(stock_path)
        points = [
            (size, stock[size][0] / ours[size][0], stock[size][1] / ours[size][1])
            for size in sorted(set(ours) & set(stock))
            if moves_data(collective, size, nranks) and min(ours[size]) > 0
        ]
        if points:
            out[nranks][collective] = points
    return out


def speedups_from_csv(path: Path) -> dict[int, dict[str, list[tuple[int, float, float]]]]:
    """The same from a result CSV: sizes with both an eager and a graph row (ours and stock). A CSV with a
    row per library (no ours_us and stock_us columns) gives nothing."""
    times: dict[tuple[int, str, int], dict[str, float]] = defaultdict(dict)
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        if not {"ours_us", "stock_us"} <= set(reader.fieldnames or ()):
            return {}
        for row in reader:
            if row["mode"] in ("eager", "graph") and float(row["ours_us"]) > 0:
                key = (int(row["ranks"]), row["collective"], int(row["bytes"]))
                times[key][row["mode"]] = float(row["stock_us"]) / float(row["ours_us"])
    out: dict[int, dict[str, list[tuple[int, float, float]]]] = defaultdict(dict)
    for (nranks, collective, size), modes in sorted(times.items()):
        if len(modes) == 2:
            out[nranks].setdefault(collective, []).append((size, modes["eager"], modes["graph"]))
    return out


def panel(collective: str, points: list[tuple[int, float, float]], left: int, top: int) -> list[str]:
    """SVG elements of one panel: frame, axis labels, the 1x and 1.1x lines, the two curves."""
    sizes = [math.log2(size) for size, _, _ in points]
    low, high = min(sizes), max(max(sizes), min(sizes) + 1)
    top_ratio = max(4.0, math.ceil(max(max(e, g) for _, e, g in points)))
    w, h = PANEL_W - MARGIN - 8, PANEL_H - MARGIN
    x0, y0 = left + MARGIN, top + 18

    def x(size: float) -> float:
        return x0 + (size - low) / (high - low) * w

    def y(ratio: float) -> float:
        return y0 + h - min(ratio, top_ratio) / top_ratio * h

    def text(left: float, top: float, anchor: str, content: str, extra: str = "") -> str:
        return f'<text x="{left:.1f}" y="{top:.1f}" text-anchor="{anchor}"{extra}>{content}</text>'

    parts = [
        text(x0 + w / 2, top + 12, "middle", collective, ' font-weight="bold"'),
        f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#888"/>',
    ]
    for ratio, colour in ((1.0, "#888"), (TARGET, "#c33")):
        level = f"{y(ratio):.1f}"
        parts.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{level}" y2="{level}" stroke="{colour}"/>')
    for ratio in range(0, int(top_ratio) + 1, max(1, int(top_ratio) // 4)):
        parts.append(text(x0 - 4, y(ratio) + 4, "end", f"{ratio}x"))
    for size in (points[0][0], points[len(points) // 2][0], points[-1][0]):
        parts.append(text(x(math.log2(size)), y0 + h + 14, "middle", human(size)))
    for index, dash in ((1, ""), (2, ' stroke-dasharray="5,3"')):
        line = " ".join(f"{x(math.log2(p[0])):.1f},{y(p[index]):.1f}" for p in points)
        parts.append(f'<polyline points="{line}" fill="none" stroke="#26c" stroke-width="1.5"{dash}/>')
    return parts


def svg(nranks: int, curves: dict[str, list[tuple[int, float, float]]]) -> str:
    """One rank count's figure: a panel per collective, COLUMNS to a row."""
    names = sorted(curves)
    rows = math.ceil(len(names) / COLUMNS)
    width, height = COLUMNS * PANEL_W, rows * PANEL_H + 30
    body = [
        f'<text x="8" y="18" font-weight="bold">{nranks} ranks: stock time / ours (solid: eager, '
        f"dashed: graphs; red: {TARGET}x)</text>"
    ]
    for index, name in enumerate(names):
        body += panel(name, curves[name], (index % COLUMNS) * PANEL_W, 30 + (index // COLUMNS) * PANEL_H)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">\n' + "\n".join(body) + "\n</svg>\n"
    )


def main(source: str, outdir: str, from_csv: bool = False) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    curves_by_ranks = speedups_from_csv(Path(source)) if from_csv else speedups(Path(source))
    stem = Path(source).stem if from_csv else "side_by_side"
    for nranks, curves in sorted(curves_by_ranks.items()):
        path = out / f"{stem}_{nranks}.svg"
        path.write_text(svg(nranks, curves))
        print(path)


if __name__ == "__main__":
    args = sys.argv[1:]
    from_csv = args[:1] == ["--csv"]
    if from_csv:
        args = args[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    main(args[0], args[1], from_csv)
