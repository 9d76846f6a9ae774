"""perf/targets.py: the arithmetic of the geometric-mean speed-up over stock NCCL at 4 ranks (CPU only)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

REPO = Path(__file__).resolve().parents[1]
SIZES = [8 << (2 * k) for k in range(12)]  # 8 B .. 32 MB by 4, as perf/timer_set.sh times them


def load_targets():
    perf = str(REPO / "perf")  # targets.py reads runs with its neighbour timer_summary.py
    if perf not in sys.path:
        sys.path.insert(0, perf)
    spec = importlib.util.spec_from_file_location("targets", REPO / "perf" / "targets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_run(path: Path, times: dict[int, float]) -> None:
    lines = [
        "[0] # nccl_timer: header",
        *(f"[0] {s:12d} {us:12.2f} {us / 2:12.2f} 4.00" for s, us in times.items()),
    ]
    path.write_text("\n".join(lines) + "\n")


def test_half_of_stock_everywhere_is_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    targets = load_targets()
    for collective, (small_max, (low, _high), points) in targets.STOCK.items():
        # Small sizes at half the range's low end; 16 MB must come out by interpolation from 8 and 32 MB.
        times = {s: low / 2 for s in SIZES if s <= small_max}
        for size, stock in points.items():
            times[size] = stock / 2
        if 16 << 20 in points:
            times[8 << 20], times[32 << 20] = points[16 << 20] / 4, points[16 << 20]
            del times[16 << 20]
        write_run(tmp_path / f"{collective}_4.txt", dict(sorted(times.items())))
    targets.main(str(tmp_path))
    out = capsys.readouterr().out
    assert "all: 2.00 / " in out, out
    # Against the high end the 8 small all-reduce sizes gain 20.1 / 6.7 = 3x, the 4 large ones 2x.
    high = math.exp((8 * math.log(3.0) + 4 * math.log(2.0)) / 12)
    assert f"all_reduce: 2.00 / {high:.2f}x over 12 points" in out, out


def test_speedups_against_each_end() -> None:
    targets = load_targets()
    times = {8: 10.0, 512 << 10: 27.3, 2 << 20: 53.3, 8 << 20: 64.0, 32 << 20: 339.8}
    assert dict(targets.speedups("all_reduce", times, 0)) == pytest.approx(
        {8: 1.34, 512 << 10: 1.0, 2 << 20: 1.0, 8 << 20: 2.0, 32 << 20: 1.0}
    )
    assert dict(targets.speedups("all_reduce", times, 1))[8] == pytest.approx(2.01)
    # A stock point beyond our largest size cannot be interpolated: an error, not a made-up number.
    with pytest.raises(ValueError):
        targets.speedups("all_reduce", {8: 10.0, 512 << 10: 27.3, 2 << 20: 53.3, 8 << 20: 64.0}, 0)
    assert math.isclose(targets.geomean([1.0, 4.0]), 2.0)
    assert math.isnan(targets.geomean([]))  # an empty cell, not a crash


def load_side_by_side():
    load_targets()  # puts perf/ on the path for timer_summary
    spec = importlib.util.spec_from_file_location("side_by_side", REPO / "perf" / "side_by_side.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_side_by_side_figures(tmp_path: Path) -> None:
    """perf/side_by_side.py's arithmetic: the slowest ratio and its size, the geometric mean up to 32 MB, and
    the share of the floor (2·N·S for all_reduce at 4.3 TB/s) from 32 MB up."""
    side = load_side_by_side()
    sizes = [8, 1 << 20, 32 << 20, 64 << 20]
    stock = {s: 100.0 for s in sizes}
    stock[64 << 20] = 1000.0  # ours there is twice the floor, about 250 us
    ours = {8: 50.0, 1 << 20: 80.0, 32 << 20: 40.0, 64 << 20: 2 * side.floor_us("all_reduce", 64 << 20, 4)}
    write_run(tmp_path / "stock_all_reduce_4.txt", stock)
    write_run(tmp_path / "ours_all_reduce_4.txt", ours)
    write_run(tmp_path / "ours_sendrecv_4.txt", ours)  # no stock run: left out
    rows = side.summarize(tmp_path)
    assert len(rows) == 4, rows
    cells = [c.strip() for c in rows[2].split("|")[1:-1]]
    assert cells[:2] == ["all_reduce", "4"]
    assert cells[2] == f"1.25x ({1 << 20} B) / 1.25x ({1 << 20} B)"  # graph times are half, ratios equal
    mean = math.exp((math.log(2) + math.log(1.25) + math.log(2.5)) / 3)
    assert cells[3] == f"{mean:.2f}x / {mean:.2f}x"
    share_32 = side.floor_us("all_reduce", 32 << 20, 4) / 40.0
    assert cells[4] == f"50-{100 * share_32:.0f}% / 100-{200 * share_32:.0f}%"
    assert side.floor_us("all_reduce", 32 << 20, 4) == pytest.approx(2 * 4 * (32 << 20) / 4.3e12 * 1e6)
    assert side.floor_us("broadcast", 32 << 20, 4) == pytest.approx(5 * (32 << 20) / 4.3e12 * 1e6)
    # At 8 ranks an 8-byte all_gather moves nothing (zero elements each): left out, however it timed.
    assert not side.moves_data("all_gather", 8, 8) and side.moves_data("all_gather", 16, 8)
    assert side.moves_data("all_reduce", 8, 8)
    # The pooled row of one collective repeats its figures, naming the collective at the slowest point.
    pooled = [c.strip() for c in rows[3].split("|")[1:-1]]
    assert pooled[:2] == ["all 1", "4"]
    assert pooled[2] == f"1.25x (all_reduce {1 << 20} B) / 1.25x (all_reduce {1 << 20} B)"
    assert pooled[3] == cells[3]


def test_side_by_side_plot(tmp_path: Path) -> None:
    """perf/plot_side_by_side.py: the plotted speed-ups are stock / ours per size, sizes where nothing
    moves are left out, and each rank count's figure is well-formed SVG with a panel per collective."""
    load_targets()
    spec = importlib.util.spec_from_file_location("plot", REPO / "perf" / "plot_side_by_side.py")
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    write_run(tmp_path / "stock_all_reduce_8.txt", {8: 30.0, 1 << 20: 100.0})
    write_run(tmp_path / "ours_all_reduce_8.txt", {8: 10.0, 1 << 20: 80.0})
    write_run(tmp_path / "stock_all_gather_8.txt", {8: 30.0, 16: 20.0, 32: 44.0})
    write_run(tmp_path / "ours_all_gather_8.txt", {8: 1.0, 16: 10.0, 32: 11.0})
    write_run(tmp_path / "ours_gather_8.txt", {8: 1.0})  # no stock run: no panel
    curves = plot.speedups(tmp_path)[8]
    assert sorted(curves) == ["all_gather", "all_reduce"]
    assert curves["all_reduce"] == [(8, 3.0, 3.0), (1 << 20, 1.25, 1.25)]
    assert curves["all_gather"] == [(16, 2.0, 2.0), (32, 4.0, 4.0)]  # 8 B is zero elements a rank
    plot.main(str(tmp_path), str(tmp_path / "plots"))
    root = ElementTree.parse(tmp_path / "plots" / "side_by_side_8.svg").getroot()
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 4  # eager and graph curves of two panels
    assert all(len(line.get("points").split()) == 2 for line in lines)


def test_timeline_summary(tmp_path: Path) -> None:
    """perf/timeline_summary.py: rank 0's eager figure, the slowest host, the skew and the tail, each the
    median over the timings, from every rank's timeline lines (any order, other lines ignored)."""
    spec = importlib.util.spec_from_file_location("timeline", REPO / "perf" / "timeline_summary.py")
    timeline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(timeline)
    line = "[{r}] # timeline rank {r} all_reduce 8 B trial {t} calls 10: began {b} returned {ret} drained {d}"
    trials = [  # (rank, trial, began, returned, drained)
        (0, 0, 100.0, 130.0, 170.0),
        (1, 0, 104.0, 150.0, 171.0),  # began 4 later, its host the slowest: 4.6 a call
        (1, 1, 200.0, 230.0, 262.0),
        (0, 1, 202.0, 232.0, 262.0),  # rank 0 began last
        (0, 2, 300.0, 330.0, 380.0),
        (1, 2, 301.0, 321.0, 381.0),
    ]
    log = tmp_path / "ours.log"
    log.write_text(
        "[0] # empty kernel launch: 3.00 us of host time\n"
        + "\n".join(line.format(r=r, t=t, b=b, ret=ret, d=d) for r, t, b, ret, d in trials)
        + "\n"
    )
    rows = timeline.summarize(str(log))
    cells = [c.strip() for c in rows[-2].split("|")[1:-1]]
    assert cells[:3] == ["all_reduce", "8", "10"]
    eager, host0, host_max, skew, last_ret, tail = (float(c) for c in cells[3:])
    assert eager == pytest.approx(7.0)  # (170-100)/10, (262-202)/10, (380-300)/10: median 7.0
    assert host0 == pytest.approx(3.0)
    assert host_max == pytest.approx(3.0)  # 4.6, 3.0, 3.0
    assert skew == pytest.approx(1.0)  # 4, 0, 1
    assert last_ret == pytest.approx(3.0)  # (150-100)/10, (232-202)/10, (330-300)/10: 5, 3, 3
    assert tail == pytest.approx(30.0)  # 170-150, 262-232, 380-330
    assert len(rows) == 6  # title, blank, header, rule, one row, blank
