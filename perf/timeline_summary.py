"""Where rank 0's eager time goes, from perf/nccl_timer's NCCL_TIMER_TIMELINE=1 lines (every rank's).

Usage: python perf/timeline_summary.py LOG...   (the launcher's logs, lines prefixed "[rank] ")
Per collective and size, the median over the timings of, in microseconds:
  eager      rank 0's figure: (rank 0 drained - rank 0 began) / calls
  host0      rank 0's calls returned, per call; host_max the slowest rank's
  skew       how long after rank 0 the last rank began (0: rank 0 began last), whole timing
  last_ret   when the last rank's last call returned, after rank 0 began, per call
  tail       rank 0's drain after the last rank's last call returned, whole timing
so eager = last_ret + tail / calls: a large skew or host_max is the ranks' hosts, a large tail the GPU.
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(
    r"# timeline rank (\d+) (\S+) (\d+) B trial (\d+) calls (\d+): began ([\d.]+) returned ([\d.]+) "
    r"drained ([\d.]+)"
)


def summarize(path: str) -> list[str]:
    timings: dict[tuple[str, int, int], dict[int, tuple[float, float, float]]] = defaultdict(dict)
    calls: dict[tuple[str, int], int] = {}
    with open(path) as log:
        for line in log:
            match = LINE.search(line)
            if not match:
                continue
            collective = match.group(2)
            rank, size, trial, n = (int(match.group(i)) for i in (1, 3, 4, 5))
            began, returned, drained = (float(match.group(i)) for i in (6, 7, 8))
            timings[(collective, size, trial)][rank] = (began, returned, drained)
            calls[(collective, size)] = n
    rows: dict[tuple[str, int], list[tuple[float, ...]]] = defaultdict(list)
    for (collective, size, _), ranks in timings.items():
        if 0 not in ranks:
            continue
        n = calls[(collective, size)]
        began0, returned0, drained0 = ranks[0]
        last_returned = max(r for _, r, _ in ranks.values())
        rows[(collective, size)].append(
            (
                (drained0 - began0) / n,
                (returned0 - began0) / n,
                max((r - b) / n for b, r, _ in ranks.values()),
                max(b for b, _, _ in ranks.values()) - began0,
                (last_returned - began0) / n,
                drained0 - last_returned,
            )
        )
    out = [
        f"## {path}",
        "",
        "| collective | bytes | calls | eager | host0 | host_max | skew | last_ret | tail |",
    ]
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (collective, size), samples in sorted(rows.items()):
        medians = [statistics.median(column) for column in zip(*samples, strict=True)]
        out.append(
            f"| {collective} | {size} | {calls[(collective, size)]} | "
            + " | ".join(f"{m:.2f}" for m in medians)
            + " |"
        )
    return [*out, ""]


if __name__ == "__main__":
    for log_path in sys.argv[1:]:
        print("\n".join(summarize(log_path)))
