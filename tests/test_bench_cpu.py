"""mscclpp_nccl.bench without a GPU: options, size/count conventions, bandwidth, formatting, data and
checking, the host bookkeeping, and the whole worker loop driven against a stand-in CuPy and a stand-in
NCCL (ranks are threads; "device" memory is host memory), for every collective.
"""

from __future__ import annotations

import functools
import json
import math
import threading
from typing import Any

import fake_nccl as fake
import numpy as np
import pytest

from mscclpp_nccl import bench as b
from mscclpp_nccl.binding import RESULT_NAMES, NcclError, ffi

# --- options -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8", 8),
        ("1K", 1024),
        ("1k", 1024),
        ("64M", 64 << 20),
        ("64m", 64 << 20),
        ("2G", 2 << 30),
        ("1.5K", 1536),
        ("64MB", 64 << 20),  # nccl-tests reads one unit letter and ignores the rest
        (" 16 ", 16),
        ("0", 0),
        ("1e3", 1000),
    ],
)
def test_parse_size(text: str, value: int) -> None:
    assert b.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "5X", "M", "-4"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        b.parse_size(text)


def test_parse_int_like_strtol() -> None:
    assert b.parse_int("20") == 20
    assert b.parse_int("0x10") == 16
    assert b.parse_int(" 7 ") == 7
    with pytest.raises(ValueError):
        b.parse_int("seven")


@pytest.mark.parametrize(
    ("args", "sizes"),
    [
        ((8, 64, 2, 0), [8, 16, 32, 64]),
        ((8, 100, 2, 0), [8, 16, 32, 64]),
        ((8, 8, 2, 0), [8]),
        ((1, 1000, 10, 0), [1, 10, 100, 1000]),
        ((1024, 4096, 1, 1024), [1024, 2048, 3072, 4096]),
        ((1000, 3500, 1, 1000), [1000, 2000, 3000]),
        ((0, 4, 2, 0), [0, 1, 2, 4]),
        ((5, 5, 1, 0), [5]),
    ],
)
def test_size_series(args: tuple[int, int, int, int], sizes: list[int]) -> None:
    assert b.size_series(*args) == sizes


def test_size_series_rejects() -> None:
    with pytest.raises(ValueError):
        b.size_series(64, 8, 2, 0)  # min > max
    with pytest.raises(ValueError):
        b.size_series(8, 64, 1, 0)  # never grows


def test_default_options() -> None:
    o = b.parse_args(["all_reduce"])
    assert (o.min_bytes, o.max_bytes, o.step_factor) == (8, 64 << 20, 2)
    assert (o.iters, o.warmup_iters, o.check, o.graph_launches, o.agg_iters) == (20, 5, 1, 0, 1)
    assert (o.average, o.blocking, o.root) == (1, 0, 0)
    assert [t.name for t in o.types] == ["float"] and o.ops == ["sum"]
    assert o.ranks is None and o.mps is None and o.lib is None and o.alloc == "ncclmem"
    sizes = o.sizes()
    assert sizes[0] == 8 and sizes[-1] == 64 << 20 and len(sizes) == 24


def test_options_as_nccl_tests() -> None:
    line = "broadcast -b 1K -e 1M -f 4 -n 7 -w 2 -c 0 -G 3 -d bf16 -o max -r 2 -a 3 -C 1 --nranks 8 --no-mps"
    o = b.parse_args(line.split())
    assert (o.min_bytes, o.max_bytes, o.step_factor) == (1024, 1 << 20, 4)
    assert (o.iters, o.warmup_iters, o.check, o.graph_launches) == (7, 2, 0, 3)
    assert [t.name for t in o.types] == ["bfloat16"] and o.ops == ["max"]
    assert (o.root, o.average, o.report_cputime, o.ranks, o.mps) == (2, 3, True, 8, False)
    assert o.sizes() == [1024, 4096, 16384, 65536, 262144, 1 << 20]
    # -i alone switches to additive steps; long names work too.
    o = b.parse_args(["all_gather", "--minbytes", "1M", "--maxbytes", "4M", "--stepbytes", "1M", "--mps"])
    assert (o.step_factor, o.step_bytes, o.mps) == (1, 1 << 20, True)
    assert o.sizes() == [1 << 20, 2 << 20, 3 << 20, 4 << 20]
    assert b.parse_args(["scatter", "-r", "all"]).root == -1
    assert b.parse_args(["all_reduce", "--json", "x.json"]).json_path == "x.json"
    assert b.parse_args(["all_reduce", "-J", "y.json"]).json_path == "y.json"


# Every option of nccl-tests 2.19 (its getopt string and long names), with a value its users pass, and
# whether the benchmark honours it (True) or refuses it naming it (False).
NCCL_TESTS_OPTIONS = [
    ("-t", "--nthreads", "1", True),
    ("-g", "--ngpus", "1", True),
    ("-b", "--minbytes", "8", True),
    ("-e", "--maxbytes", "128M", True),
    ("-i", "--stepbytes", "1M", True),
    ("-f", "--stepfactor", "2", True),
    ("-n", "--iters", "20", True),
    ("-m", "--agg_iters", "2", True),
    ("-w", "--warmup_iters", "5", True),
    ("-N", "--run_cycles", "2", True),
    ("-p", "--parallel_init", "1", True),
    ("-c", "--check", "1", True),
    ("-o", "--op", "all", True),
    ("-d", "--datatype", "all", True),
    ("-r", "--root", "0", True),
    ("-z", "--blocking", "1", True),
    ("-y", "--stream_null", "1", True),
    ("-T", "--timeout", "0", True),
    ("-G", "--cudagraph", "10", True),
    ("-C", "--report_cputime", "1", True),
    ("-S", "--report_timestamps", "1", False),
    ("-J", "--output_file", "out.json", True),
    ("-a", "--average", "3", True),
    ("-R", "--local_register", "2", True),
    ("-x", "--cta_policy", "1", True),
    ("-D", "--device_implementation", "1", False),
    ("-V", "--device_cta_count", "16", True),
    ("-M", "--memory_report", "1", False),
]


@pytest.mark.parametrize(("short", "long", "value", "honoured"), NCCL_TESTS_OPTIONS)
def test_every_nccl_tests_option_is_honoured_or_refused_by_name(
    short: str, long: str, value: str, honoured: bool
) -> None:
    for flag in (short, long):
        if honoured:
            b.parse_args(["all_reduce", flag, value])
        else:
            with pytest.raises(b.UsageError, match=f"{short}/{long}"):
                b.parse_args(["all_reduce", flag, value])
    if not honoured:  # the value nccl-tests defaults to is accepted
        b.parse_args(["all_reduce", short, "0"])


def test_every_nccl_tests_option_is_listed() -> None:
    """nccl-tests 2.19's getopt string; -h is argparse's."""
    getopt = "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:"
    letters = {f"-{c}" for c in getopt.replace(":", "")} - {"-h"}
    assert letters == {short for short, *_ in NCCL_TESTS_OPTIONS}


@pytest.mark.parametrize(
    "argv",
    [
        ["nope"],
        ["all_reduce", "-b", "1M", "-e", "1K"],
        ["all_reduce", "-n", "0"],
        ["all_reduce", "-a", "4"],
        ["all_reduce", "-z", "3"],
        ["all_reduce", "-z", "1", "-G", "1"],
        ["all_reduce", "-d", "float128"],
        ["all_reduce", "-o", "xor"],
        ["all_reduce", "-r", "-3"],
        ["all_reduce", "--nranks", "0"],
        ["all_reduce", "-N", "-1"],
        ["all_reduce", "-g", "0"],
        ["all_reduce", "-t", "0"],
        ["all_reduce", "-g", "2", "--nranks", "4"],
        ["all_reduce", "-p", "2"],
        ["all_reduce", "-y", "2"],
        ["all_reduce", "-y", "1", "-G", "1"],
        ["all_reduce", "-R", "3"],
        ["all_reduce", "-D", "1"],
        ["all_reduce", "-S", "1"],
        ["all_reduce", "-M", "1"],
        ["all_reduce", "-T", "-1"],
        ["all_reduce", "-b", "12Q"],
        ["all_reduce", "-f", "1", "-i", "0"],  # never grows
    ],
)
def test_bad_options(argv: list[str]) -> None:
    with pytest.raises(b.UsageError):
        b.parse_args(argv)
    assert b.main(argv) == 2


def test_type_and_op_lists() -> None:
    assert [t.name for t in b.resolve_types("all")] == [
        "int8",
        "uint8",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "half",
        "float",
        "double",
        "bfloat16",
        "f8e4m3",
        "f8e5m2",
    ]
    assert [t.nccl for t in b.resolve_types("all")] == list(range(12))
    aliases = "float16,fp32,float64,bf16,fp8_e4m3,fp8_e5m2,half,float"
    assert [t.name for t in b.resolve_types(aliases)] == [
        "half",
        "float",
        "double",
        "bfloat16",
        "f8e4m3",
        "f8e5m2",
    ]
    assert b.resolve_ops("all") == ["sum", "prod", "max", "min", "avg", "mulsum"]
    assert b.resolve_ops("premulsum") == ["mulsum"]
    assert b.resolve_ops("sum,max,sum") == ["sum", "max"]


# --- sizes, counts and bandwidth ---------------------------------------------------------------------


def test_layout_whole_collectives() -> None:
    for coll in ("all_reduce", "broadcast", "reduce", "sendrecv"):
        lay = b.layout(coll, 1 << 20, 4, 8)
        assert (lay.count, lay.sendcount, lay.recvcount, lay.size) == (262144, 262144, 262144, 1 << 20)
        assert (lay.send_inplace, lay.recv_inplace) == (0, 0)
    assert b.layout("all_reduce", 10, 4, 4).count == 2  # whole elements only
    assert b.layout("all_reduce", 10, 4, 4).size == 8


def test_layout_split_collectives() -> None:
    # 64 MiB of float over 4 ranks: 4 Mi elements per rank, size the total, count per rank.
    for coll in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter"):
        lay = b.layout(coll, 64 << 20, 4, 4)
        assert (lay.count, lay.size) == (4 << 20, 64 << 20)
    ag = b.layout("all_gather", 1024, 4, 4)
    assert (ag.sendcount, ag.recvcount, ag.send_inplace, ag.recv_inplace) == (64, 256, 64, 0)
    rs = b.layout("reduce_scatter", 1024, 4, 4)
    assert (rs.sendcount, rs.recvcount, rs.send_inplace, rs.recv_inplace) == (256, 64, 0, 64)
    a2a = b.layout("alltoall", 1024, 4, 4)
    assert (a2a.sendcount, a2a.recvcount, a2a.send_inplace, a2a.recv_inplace) == (256, 256, 0, 0)
    ga = b.layout("gather", 1024, 4, 4)
    assert (ga.sendcount, ga.recvcount, ga.send_inplace) == (64, 256, 64)
    sc = b.layout("scatter", 1024, 4, 4)
    assert (sc.sendcount, sc.recvcount, sc.recv_inplace) == (256, 64, 64)
    # Per-rank counts round down to 16 bytes, so small sizes give 0 (nccl-tests prints those rows).
    assert b.layout("all_gather", 8, 4, 4).count == 0
    assert b.layout("all_gather", 8, 4, 4).size == 0
    assert b.layout("all_gather", 100, 4, 2).count == 12  # 50 B per rank -> 48 B
    assert b.layout("reduce_scatter", 1000, 2, 3).count == 160  # half: multiples of 8 elements
    assert b.layout("alltoall", 1000, 1, 3).count == 320  # int8: multiples of 16
    assert b.layout("gather", 1000, 8, 3).count == 40  # double: multiples of 2
    assert b.layout("scatter", 96, 4, 3).size == 96


@pytest.mark.parametrize(
    ("coll", "nbytes", "nranks", "seconds", "algbw", "busbw"),
    [
        # algbw = bytes / 1e9 / s; busbw = algbw * factor, as nccl-tests.
        ("all_reduce", 4 << 20, 8, 100e-6, 41.94304, 41.94304 * 14 / 8),
        ("all_reduce", 1 << 30, 2, 0.01, 107.3741824, 107.3741824),
        ("all_gather", 64 << 20, 4, 1e-3, 67.108864, 67.108864 * 3 / 4),
        ("reduce_scatter", 64 << 20, 4, 1e-3, 67.108864, 50.331648),
        ("alltoall", 64 << 20, 8, 2e-3, 33.554432, 33.554432 * 7 / 8),
        ("gather", 16 << 20, 4, 1e-3, 16.777216, 12.582912),
        ("scatter", 16 << 20, 4, 1e-3, 16.777216, 12.582912),
        ("broadcast", 32 << 20, 4, 1e-3, 33.554432, 33.554432),
        ("reduce", 32 << 20, 8, 1e-3, 33.554432, 33.554432),
        ("sendrecv", 8 << 20, 4, 1e-4, 83.886080, 83.886080),
    ],
)
def test_bandwidth(coll: str, nbytes: int, nranks: int, seconds: float, algbw: float, busbw: float) -> None:
    lay = b.layout(coll, nbytes, 4, nranks)
    assert lay.size == nbytes
    alg, bus = b.bandwidth(coll, lay.count, 4, seconds, nranks)
    assert alg == pytest.approx(algbw, rel=1e-12)
    assert bus == pytest.approx(busbw, rel=1e-12)


def test_bus_factors() -> None:
    assert b.bus_factor("all_reduce", 4) == 1.5
    assert b.bus_factor("all_reduce", 4, "NVLS") == 0.6
    for coll in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter"):
        assert b.bus_factor(coll, 8) == 7 / 8
    for coll in ("broadcast", "reduce", "sendrecv"):
        assert b.bus_factor(coll, 8) == 1.0
    assert b.bandwidth("all_reduce", 0, 4, 1e-5, 4) == (0.0, 0.0)
    assert b.bandwidth("all_reduce", 4, 4, 0.0, 4)[0] == math.inf


# --- formatting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "width", "text"),
    [
        (12.3456, 7, "  12.35"),
        (1234.567, 7, "1234.57"),
        (12345.67, 7, "12345.7"),
        (123456.7, 7, " 123457"),
        (1234567.8, 7, "1234568"),
        (12345678.9, 7, "1.2e+07"),
        (0.0, 6, "  0.00"),
        (0.004, 6, "  0.00"),
        (1.5, 6, "  1.50"),
        (123.456, 6, "123.46"),
        (1234.56, 6, "1234.6"),
        (12345.6, 6, " 12346"),
        (123456.7, 6, "123457"),
        (1234567.0, 6, " 1e+06"),
    ],
)
def test_float_str(value: float, width: int, text: str) -> None:
    assert b.float_str(value, width) == text


def test_table_layout() -> None:
    head = b.header_lines()
    assert head[0] == (
        "#                                                              out-of-place"
        "                       in-place          "
    )
    assert head[1] == (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong "
    )
    assert head[2] == (
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
        "     (us)  (GB/s)  (GB/s)         "
    )
    assert "cputime" in b.header_lines(True)[1]
    row = b.format_preamble(1048576, 262144, "float", "sum", -1)
    row += b.format_result(25.8123, 40.62, 60.94, 0) + b.format_result(24.5, 42.8, 64.2, None)
    assert row == (
        "     1048576        262144     float     sum      -1"
        "    25.81   40.62   60.94       0    24.50   42.80   64.20    N/A"
    )
    # Columns line up under the header: each value ends where its header name ends.
    names = head[1].split()
    for name in ("size", "count", "type", "redop", "root"):
        end = head[1].index(name) + len(name)
        assert row[:end].split()[-1] == row.split()[names.index(name) - 1]
    assert len(b.format_preamble(0, 0, "bfloat16", "mulsum", 7)) == 52
    assert len(b.format_result(1e9, 1e9, 1e9, 123456)) == 33
    assert b.format_result(1.0, 1.0, 1.0, 12)[-6:] == "    12"


def test_footer() -> None:
    lines = b.footer_lines(0, 12.3456789, None, "all_reduce_perf")
    assert lines == [
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 12.3457 ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "#",
    ]
    assert b.footer_lines(3, 1.0, None, "x")[0] == "# Out of bounds values : 3 FAILED"
    assert b.footer_lines(0, 1.0, 2.0, "x")[1] == "# Avg bus bandwidth    : 1 FAILED"
    assert b.footer_lines(0, 5.0, 2.0, "x")[1] == "# Avg bus bandwidth    : 5 OK"


# --- data: codecs, generation, references, comparison ------------------------------------------------


def test_fp8_tables_against_formula_points() -> None:
    e4 = b.TYPE_BY_NAME["f8e4m3"]
    e5 = b.TYPE_BY_NAME["f8e5m2"]
    codes = np.array([0x00, 0x01, 0x08, 0x38, 0x40, 0x7E, 0x7F, 0xB8], dtype=np.uint8)
    got = b.decode(codes, e4)
    assert got[:6].tolist() == [0.0, 2.0**-9, 2.0**-6, 1.0, 2.0, 448.0]
    assert math.isnan(got[6]) and got[7] == -1.0
    codes = np.array([0x00, 0x01, 0x3C, 0x7B, 0x7C, 0xFC], dtype=np.uint8)
    got = b.decode(codes, e5)
    assert got.tolist()[:4] == [0.0, 2.0**-16, 1.0, 57344.0]
    assert got[4] == math.inf and got[5] == -math.inf
    for dt in (e4, e5):
        every = np.arange(256, dtype=np.uint8)
        values = b.decode(every, dt)
        finite = np.isfinite(values)
        back = b.encode(values[finite], dt)
        # Every finite code round-trips, except -0 whose encoding keeps the sign too.
        assert np.array_equal(back, every[finite])


def test_codecs_match_ml_dtypes() -> None:
    mld = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(7)
    x32 = (rng.standard_normal(20000) * np.exp2(rng.integers(-20, 20, 20000))).astype(np.float32)
    x32 = np.concatenate([x32, np.float32([0.0, -0.0, 1.0, 3.0, 448.0, 240.0, 1e-6, 2.0**-9, 2.0**-10])])
    cases = [("bfloat16", mld.bfloat16), ("f8e4m3", mld.float8_e4m3fn), ("f8e5m2", mld.float8_e5m2)]
    for name, ref_type in cases:
        dt = b.TYPE_BY_NAME[name]
        limit = {"bfloat16": 3e38, "f8e4m3": 448.0, "f8e5m2": 57344.0}[name]
        x = x32[np.abs(x32) <= limit].astype(np.float64)
        expected = x.astype(ref_type).view(np.uint8 if dt.size == 1 else np.uint16)
        assert np.array_equal(b.encode(x, dt), expected), name
        every = np.arange(256 if dt.size == 1 else 65536, dtype=np.uint8 if dt.size == 1 else np.uint16)
        with np.errstate(invalid="ignore"):
            ref = every.view(ref_type).astype(np.float64)
        ours = b.decode(every, dt)
        assert np.array_equal(np.isnan(ref), np.isnan(ours)), name
        assert np.array_equal(ref[~np.isnan(ref)], ours[~np.isnan(ours)]), name


def test_fp8_encode_is_nearest_ties_even_saturating() -> None:
    """Brute force over every finite code: the nearest value, the even code on a tie, and the largest
    finite value beyond it (the GPU's satfinite conversions), whatever library does the rounding."""
    rng = np.random.default_rng(3)
    for name, top in (("f8e4m3", 448.0), ("f8e5m2", 57344.0)):
        dt = b.TYPE_BY_NAME[name]
        codes = np.arange(256, dtype=np.uint8)
        table = b.decode(codes, dt)
        finite = codes[np.isfinite(table) & ~(codes == 0x80)]  # -0 rounds like +0 but keeps its sign
        x = np.concatenate(
            [rng.uniform(-2 * top, 2 * top, 4000), (table[finite][:-1] + table[finite][1:]) / 2]
        )
        x = x[np.isfinite(x)]
        got = b.encode(x, dt)
        for value, code in zip(x, got, strict=True):
            clipped = min(max(value, -top), top)
            dist = np.abs(table[finite] - clipped)
            best = finite[dist == dist.min()]
            even = best[(best & 1) == 0]
            want = (even if even.size else best)[0]
            if clipped == 0.0 or want == 0:
                continue  # the sign of a zero result follows the input's
            assert code == want, (name, value, hex(code), hex(want))


def test_inputs_regenerate_and_slice() -> None:
    for dt in b.TYPES:
        for kind in ("copy", *b.OPS):
            full = b.gen_input(dt, kind, 4, 2, 11, 0, 1000)
            assert full.dtype == np.dtype(dt.storage) and full.size == 1000
            assert np.array_equal(full, b.gen_input(dt, kind, 4, 2, 11, 0, 1000))
            assert np.array_equal(full[300:700], b.gen_input(dt, kind, 4, 2, 11, 300, 400))
            other = b.gen_input(dt, kind, 4, 3, 11, 0, 1000)
            if kind != "avg":  # avg leaves most elements 0 on most ranks
                assert not np.array_equal(full, other)
            if dt.is_float:
                assert np.isfinite(b.decode(full, dt)).all()


def wrap_to(dt: b.DType, values: np.ndarray) -> np.ndarray:
    """Python integers wrapped to an integer type, as two's complement arithmetic in the type gives."""
    unsigned = np.array([int(v) % (1 << dt.bits) for v in values], dtype=f"uint{dt.bits}")
    return unsigned.view(dt.storage)


def independent_reduce(dt: b.DType, kind: str, inputs: list[np.ndarray]) -> np.ndarray:
    """The reduction written apart from the bench's reduce_ranks, so that comparing the two can fail:
    integers in Python's exact arithmetic and then wrapped (avg divides the wrapped sum, as the type
    would), floats in float64 and then rounded once to the type."""
    if dt.is_float:
        values = np.stack([b.decode(x, dt) for x in inputs])
        total = {"sum": values.sum(0), "prod": values.prod(0), "max": values.max(0), "min": values.min(0)}
        return b.encode(total[kind] if kind != "avg" else values.sum(0) / len(inputs), dt)
    exact = [x.astype(object) for x in inputs]  # Python integers: nothing overflows
    if kind in ("max", "min"):
        pick = np.maximum if kind == "max" else np.minimum
        return wrap_to(dt, functools.reduce(pick, exact))
    if kind == "prod":
        return wrap_to(dt, functools.reduce(np.multiply, exact))
    wrapped = wrap_to(dt, functools.reduce(np.add, exact))
    if kind == "sum":
        return wrapped
    return wrap_to(dt, wrapped.astype(object) // len(inputs))


@pytest.mark.parametrize("dt", b.TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("nranks", [1, 2, 3, 8, 17])
def test_reference_is_exact(dt: b.DType, nranks: int) -> None:
    """The data keeps sums, products and pre-multiplied sums exact in every type (so any reduction order
    gives the same bits), and averages within 2 ULP."""
    count = 4096
    for kind in ("sum", "prod", "max", "min", "mulsum", "avg"):
        inputs = [b.gen_input(dt, kind, nranks, r, 5, 0, count) for r in range(nranks)]
        expected, tolerance = b.reduce_ranks(dt, kind, inputs)
        assert expected.dtype == np.dtype(dt.storage)
        if kind != "mulsum":
            again = independent_reduce(dt, kind, inputs)
            if kind == "avg" and dt.is_float:
                assert b.count_wrong(expected, again, dt, tolerance=2) == 0, kind
            else:
                assert np.array_equal(expected, again), kind
        if not dt.is_float:
            assert tolerance == 0
            continue
        values = [b.decode(x, dt) for x in inputs]
        scaled = [v * b.premul_scalar(r) for r, v in enumerate(values)] if kind == "mulsum" else values
        exact = {
            "sum": np.sum(values, axis=0),
            "mulsum": np.sum(scaled, axis=0),
            "prod": np.prod(values, axis=0),
            "max": np.max(values, axis=0),
            "min": np.min(values, axis=0),
            "avg": np.sum(values, axis=0) / nranks,
        }[kind]
        if kind == "avg":
            assert tolerance == 2
            continue
        assert tolerance == 0
        assert np.array_equal(b.decode(expected, dt), exact), kind
        # Reduced in another order, step by step in the type itself, the bits are the same.
        acc = scaled[-1]
        for v in reversed(scaled[:-1]):
            step = {
                "sum": np.add,
                "mulsum": np.add,
                "prod": np.multiply,
                "max": np.maximum,
                "min": np.minimum,
            }
            acc = b.decode(b.encode(step[kind](acc, v), dt), dt)
        assert np.array_equal(b.encode(acc, dt), expected), kind


def test_integer_reference_wraps() -> None:
    i8 = b.TYPE_BY_NAME["int8"]
    x = [np.array([100, -100, 7], dtype=np.int8), np.array([100, -100, 9], dtype=np.int8)]
    assert b.reduce_ranks(i8, "sum", x)[0].tolist() == [-56, 56, 16]
    assert b.reduce_ranks(i8, "max", x)[0].tolist() == [100, -100, 9]
    assert b.reduce_ranks(i8, "mulsum", x)[0].tolist() == [44, -44, 25]  # 1*a + 2*b, wrapped
    u8 = b.TYPE_BY_NAME["uint8"]
    assert b.reduce_ranks(u8, "avg", [np.array([3, 200], np.uint8), np.array([4, 50], np.uint8)])[
        0
    ].tolist() == [
        3,
        125,
    ]


def test_count_wrong() -> None:
    f32 = b.TYPE_BY_NAME["float"]
    exp = np.array([1.0, -2.0, 0.0, 3.5], dtype=np.float32)
    assert b.count_wrong(exp.copy(), exp, f32) == 0
    assert b.count_wrong(np.array([1.0, -2.0, -0.0, 3.5], np.float32), exp, f32) == 0  # -0 == +0
    one_ulp = np.nextafter(exp, np.float32(np.inf))
    assert b.count_wrong(one_ulp, exp, f32) == 4
    assert b.count_wrong(one_ulp, exp, f32, tolerance=1) == 0
    assert b.count_wrong(np.array([1.0, np.nan, 0.0, 3.5], np.float32), exp, f32, tolerance=10**9) == 1
    tiny = np.array([np.float32(1e-45)], np.float32)  # smallest subnormal vs -smallest: 2 ULP apart
    assert b.count_wrong(-tiny, tiny, f32, tolerance=2) == 0
    assert b.count_wrong(-tiny, tiny, f32, tolerance=1) == 1
    big = np.array([1e300], np.float64)
    assert b.count_wrong(-big, big, b.TYPE_BY_NAME["double"], tolerance=5) == 1  # no int64 overflow
    bf = b.TYPE_BY_NAME["bfloat16"]
    bits = b.encode(np.array([1.0, 2.0]), bf)
    assert b.count_wrong(bits + np.uint16(1), bits, bf) == 2
    assert b.count_wrong(bits + np.uint16(2), bits, bf, tolerance=2) == 0
    i32 = b.TYPE_BY_NAME["int32"]
    assert b.count_wrong(np.array([1, 2, 3], np.int32), np.array([1, 2, 4], np.int32), i32, tolerance=5) == 1
    with pytest.raises(ValueError):
        b.count_wrong(np.zeros(2, np.int32), np.zeros(3, np.int32), i32)


def _simulate(coll: str, dt: b.DType, kind: str, n: int, root: int, lay: b.Layout, seed: int, in_place: bool):
    """What each rank's receive region holds after the collective, from its definition."""
    inputs = [b.input_for(coll, dt, kind, n, r, root, lay, seed) for r in range(n)]
    c = lay.count

    def initial(r: int) -> np.ndarray:
        region = np.zeros(lay.recvcount, dt.storage)
        if in_place and inputs[r] is not None:
            start = lay.send_inplace * r - lay.recv_inplace * r
            if 0 <= start and start + inputs[r].size <= region.size:
                region[start : start + inputs[r].size] = inputs[r]
        return region

    red = b.reduce_ranks(dt, kind, inputs)[0] if coll in b.REDUCING else None
    out = []
    for r in range(n):
        if coll == "all_reduce":
            out.append(red)
        elif coll == "reduce_scatter":
            out.append(red[r * c : (r + 1) * c])
        elif coll == "reduce":
            out.append(red if r == root else initial(r))
        elif coll == "all_gather":
            out.append(np.concatenate(inputs))
        elif coll == "broadcast":
            out.append(inputs[root])
        elif coll == "alltoall":
            out.append(np.concatenate([x[r * c : (r + 1) * c] for x in inputs]))
        elif coll == "gather":
            out.append(np.concatenate(inputs) if r == root else initial(r))
        elif coll == "scatter":
            out.append(inputs[root][r * c : (r + 1) * c])
        else:
            out.append(inputs[(r - 1) % n])
    return out


@pytest.mark.parametrize("coll", b.COLLECTIVES)
@pytest.mark.parametrize("nranks", [1, 3, 4])
def test_expected_output_matches_definitions(coll: str, nranks: int) -> None:
    for dt in (b.TYPE_BY_NAME["float"], b.TYPE_BY_NAME["bfloat16"], b.TYPE_BY_NAME["int8"]):
        kinds = b.OPS if coll in b.REDUCING else ("copy",)
        for kind in kinds:
            for nbytes in (0, 64, 1000, 4096):
                lay = b.layout(coll, nbytes, dt.size, nranks)
                for root in range(nranks) if coll in b.ROOTED else [-1]:
                    for in_place in (False, True):
                        sim = _simulate(coll, dt, kind, nranks, root, lay, 3, in_place)
                        for r in range(nranks):
                            exp, tol = b.expected_output(coll, dt, kind, nranks, r, root, in_place, lay, 3)
                            if exp is None:
                                assert in_place and coll in b.UNCHECKED_IN_PLACE
                                continue
                            assert exp.shape == (lay.recvcount,)
                            assert b.count_wrong(sim[r], exp, dt, tol) == 0, (coll, kind, nbytes, root, r)
                            if exp.size:
                                bad = sim[r].copy()
                                bad.view(f"uint{dt.bits}")[exp.size // 2] ^= 0x3C
                                assert b.count_wrong(bad, exp, dt, tol) == 1


def test_scalar_bits() -> None:
    assert b.scalar_bits(b.TYPE_BY_NAME["float"], 2) == 0x40000000
    assert b.scalar_bits(b.TYPE_BY_NAME["half"], 1) == 0x3C00
    assert b.scalar_bits(b.TYPE_BY_NAME["bfloat16"], 2) == 0x4000
    assert b.scalar_bits(b.TYPE_BY_NAME["f8e4m3"], 2) == 0x40
    assert b.scalar_bits(b.TYPE_BY_NAME["f8e5m2"], 1) == 0x3C
    assert b.scalar_bits(b.TYPE_BY_NAME["int64"], 2) == 2


# --- bookkeeping -----------------------------------------------------------------------------------------


def _run_threads(n: int, fn: Any) -> list[Any]:
    results: list[Any] = [None] * n

    def body(r: int) -> None:
        try:
            results[r] = fn(r)
        except BaseException as e:
            results[r] = e

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a rank hung"
    return results


def test_host_group_allgather_and_barrier() -> None:
    port = fake.free_port()

    def rank(r: int) -> list[Any]:
        g = b.HostGroup(r, 3, "127.0.0.1", port, 10.0)
        try:
            g.barrier()
            first = g.allgather({"rank": r, "t": [r * 1.5]})
            second = g.allgather(r * 10)
            return [first, second]
        finally:
            g.close()

    results = _run_threads(3, rank)
    for res in results:
        assert res == [[{"rank": r, "t": [r * 1.5]} for r in range(3)], [0, 10, 20]]
    assert b.HostGroup(0, 1, "127.0.0.1", 0, 1.0).allgather("x") == ["x"]


def test_host_group_sees_a_rank_leave() -> None:
    port = fake.free_port()

    def rank(r: int) -> Any:
        g = b.HostGroup(r, 3, "127.0.0.1", port, 10.0)
        if r == 2:
            g.close()  # a rank that failed
            return "left"
        try:
            return g.allgather(r)
        finally:
            g.close()

    results = _run_threads(3, rank)
    assert results[2] == "left"
    assert isinstance(results[0], b.HostGroupError) and "rank 2" in str(results[0])
    assert isinstance(results[1], b.HostGroupError)


def test_host_group_times_out() -> None:
    with pytest.raises(b.HostGroupError, match="did not connect"):
        b.HostGroup(0, 2, "127.0.0.1", fake.free_port(), 0.3)


def test_combine_times() -> None:
    t = [3.0, 1.0, 2.0, 6.0]
    assert [b.combine_times(t, a) for a in range(4)] == [3.0, 3.0, 1.0, 6.0]


def test_launch_plan() -> None:
    # As nccl-tests: one rank (-g 1 -t 1) unless -g/-t say more; --nranks, ours, shares GPUs.
    o = b.parse_args(["all_reduce"])
    assert b.launch_plan(o, 1, {})[:3] == (1, False, {})
    assert b.launch_plan(o, 8, {})[:3] == (1, False, {})
    assert b.launch_plan(b.parse_args(["all_reduce", "-g", "8"]), 8, {})[:3] == (8, False, {})
    assert b.launch_plan(b.parse_args(["all_reduce", "-g", "2", "-t", "2"]), 4, {})[:3] == (4, False, {})
    assert b.launch_plan(b.parse_args(["all_reduce", "--nranks", "4"]), 1, {})[:3] == (4, True, {})
    assert b.launch_plan(b.parse_args(["all_reduce", "--nranks", "8", "--no-mps"]), 1, {})[:2] == (8, False)
    stock = b.parse_args(["all_reduce", "--lib", "/x/libnccl.so.2", "--nranks", "4"])
    assert b.launch_plan(stock, 1, {})[2] == {"NCCL_MAX_CTAS": "8"}
    assert b.launch_plan(b.parse_args(["all_reduce", "--lib", "x", "--nranks", "8"]), 1, {})[2] == {
        "NCCL_MAX_CTAS": "4"
    }
    assert b.launch_plan(b.parse_args(["all_reduce", "--lib", "x", "--nranks", "2"]), 1, {})[2] == {}
    assert b.launch_plan(stock, 1, {"NCCL_MAX_CTAS": "2"})[2] == {}


def test_main_without_gpu(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import mscclpp_nccl.run as run

    monkeypatch.setattr(run, "visible_gpus", lambda env=None: [])
    assert b.main(["all_reduce"]) == 2
    assert "no NVIDIA GPU" in capsys.readouterr().err


# --- the worker loop against stand-ins -------------------------------------------------------------------


class _Graph:
    def launch(self, stream: Any = None) -> None:
        pass  # the captured calls already ran (the stand-in library executes at once)


class _Stream:
    def __init__(self, non_blocking: bool = False) -> None:
        self.ptr = 0x5000
        self.done = True
        self.captures = 0

    def use(self) -> _Stream:
        return self

    def begin_capture(self, mode: int | None = None) -> None:
        self.captures += 1

    def end_capture(self) -> _Graph:
        return _Graph()


_Stream.null = _Stream()  # type: ignore[attr-defined]  # CuPy's NULL stream (-y 1)
FAKE_CUPY = fake.fake_cupy(fake.HostRuntime, _Stream)
TYPE_BY_CODE = fake.TYPE_BY_CODE


class _FakeLib(fake.FakeLibResources):
    """NCCL's calls on host memory, one instance per rank, rendezvousing through a fake.World."""

    def __init__(self, world: fake.World, rank: int, fail: str | None = None, corrupt: bool = False) -> None:
        super().__init__()
        self.world, self.rank, self.fail, self.corrupt = world, rank, fail, corrupt
        self.last = ""
        self.premul: dict[int, int] = {}
        self.depth = 0
        self.group_error = 0  # the first failure inside the open group: it fails the group, as in NCCL
        self.p2p: list[tuple[str, int, Any, int, b.DType]] = []
        self.calls: dict[str, int] = {}

    def _enter(self, name: str) -> int:
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.fail == name:
            self.last = f"{name} is not implemented yet"
            if self.depth and not self.group_error:
                self.group_error = 5
            return 5
        return 0

    def _reduce(self, dt: b.DType, op: int, parts: list[tuple[np.ndarray, int]]) -> np.ndarray:
        if op >= 5:  # PreMulSum: scale by each rank's scalar, then sum
            scalars = [np.array([s], dtype=f"uint{dt.bits}").view(dt.storage) for _, s in parts]
            if dt.is_float:
                total = sum(
                    b.decode(x, dt) * b.decode(k, dt)[0] for (x, _), k in zip(parts, scalars, strict=True)
                )
                return b.encode(total, dt)
            with np.errstate(over="ignore"):
                acc = np.zeros(parts[0][0].size, dt.storage)
                for (x, _), k in zip(parts, scalars, strict=True):
                    acc = acc + x * k[0]
            return acc
        kind = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}[op]
        return independent_reduce(dt, kind, [x for x, _ in parts])

    def _damage(self, out: np.ndarray) -> None:
        if self.corrupt and out.size:
            out.view(f"uint{out.itemsize * 8}")[0] ^= 1

    def ncclAllReduce(self, s: Any, r: Any, count: int, code: int, op: int, comm: Any, st: Any) -> int:
        if rc := self._enter("ncclAllReduce"):
            return rc
        dt = TYPE_BY_CODE[code]
        parts = self.world.exchange(self.rank, (fake.view(s, count, dt).copy(), self.premul.get(op, 1)))
        out = self._reduce(dt, op, parts)
        self._damage(out)
        fake.view(r, count, dt)[:] = out
        return 0

    def ncclReduceScatter(self, s: Any, r: Any, count: int, code: int, op: int, comm: Any, st: Any) -> int:
        if rc := self._enter("ncclReduceScatter"):
            return rc
        dt, n = TYPE_BY_CODE[code], self.world.n
        parts = self.world.exchange(self.rank, (fake.view(s, count * n, dt).copy(), self.premul.get(op, 1)))
        fake.view(r, count, dt)[:] = self._reduce(dt, op, parts)[self.rank * count : (self.rank + 1) * count]
        return 0

    def ncclReduce(
        self, s: Any, r: Any, count: int, code: int, op: int, root: int, comm: Any, st: Any
    ) -> int:
        if rc := self._enter("ncclReduce"):
            return rc
        dt = TYPE_BY_CODE[code]
        parts = self.world.exchange(self.rank, (fake.view(s, count, dt).copy(), self.premul.get(op, 1)))
        if self.rank == root:
            fake.view(r, count, dt)[:] = self._reduce(dt, op, parts)
        return 0

    def ncclAllGather(self, s: Any, r: Any, count: int, code: int, comm: Any, st: Any) -> int:
        if rc := self._enter("ncclAllGather"):
            return rc
        dt = TYPE_BY_CODE[code]
        parts = self.world.exchange(self.rank, fake.view(s, count, dt).copy())
        fake.view(r, count * self.world.n, dt)[:] = np.concatenate(parts)
        return 0

    def ncclBroadcast(self, s: Any, r: Any, count: int, code: int, root: int, comm: Any, st: Any) -> int:
        if rc := self._enter("ncclBroadcast"):
            return rc
        dt = TYPE_BY_CODE[code]
        parts = self.world.exchange(self.rank, fake.view(s, count, dt).copy() if self.rank == root else None)
        fake.view(r, count, dt)[:] = parts[root]
        return 0

    def ncclAlltoAll(self, s: Any, r: Any, count: int, code: int, comm: Any, st: Any) -> int:
        if rc := self._enter("ncclAlltoAll"):
            return rc
        dt, n, me = TYPE_BY_CODE[code], self.world.n, self.rank
        parts = self.world.exchange(me, fake.view(s, count * n, dt).copy())
        fake.view(r, count * n, dt)[:] = np.concatenate([x[me * count : (me + 1) * count] for x in parts])
        return 0

    def ncclSend(self, s: Any, count: int, code: int, peer: int, comm: Any, st: Any) -> int:
        if rc := self._enter("ncclSend"):
            return rc
        dt = TYPE_BY_CODE[code]
        self.p2p.append(("send", peer, fake.view(s, count, dt).copy(), count, dt))
        return 0 if self.depth else self.ncclGroupEnd(implicit=True)

    def ncclRecv(self, r: Any, count: int, code: int, peer: int, comm: Any, st: Any) -> int:
        if rc := self._enter("ncclRecv"):
            return rc
        self.p2p.append(("recv", peer, r, count, TYPE_BY_CODE[code]))
        return 0 if self.depth else self.ncclGroupEnd(implicit=True)

    def ncclGroupStart(self) -> int:
        self.depth += 1
        return 0

    def ncclGroupEnd(self, implicit: bool = False) -> int:
        if not implicit:
            self.depth -= 1
            if self.depth:
                return 0
        ops, self.p2p = self.p2p, []
        if self.group_error:  # nothing of a failed group runs
            failed, self.group_error = self.group_error, 0
            return failed
        sends = [(peer, data) for what, peer, data, _, _ in ops if what == "send"]
        everyone = self.world.exchange(self.rank, sends)
        taken = [0] * self.world.n
        for what, peer, ptr, count, dt in ops:
            if what != "recv":
                continue
            mine = [data for dst, data in everyone[peer] if dst == self.rank]
            fake.view(ptr, count, dt)[:] = mine[taken[peer]]
            taken[peer] += 1
        return 0

    def ncclRedOpCreatePreMulSum(self, handle: Any, scalar: Any, code: int, residence: int, comm: Any) -> int:
        assert residence == 1  # host immediate, as nccl-tests
        op = 5 + len(self.premul)
        self.premul[op] = int(ffi.cast("uint64_t*", scalar)[0]) & ((1 << (8 * TYPE_BY_CODE[code].size)) - 1)
        handle[0] = op
        return 0

    def ncclRedOpDestroy(self, op: int, comm: Any) -> int:
        self.premul.pop(op)
        return 0

    def ncclCommAbort(self, comm: Any) -> int:
        return 0


class _FakeExt:
    """ncclGather and ncclScatter (NCCL 2.28+), reached by the benchmark through its own cffi declarations."""

    def __init__(self, lib: _FakeLib) -> None:
        self.lib = lib

    def ncclGather(self, s: Any, r: Any, count: int, code: int, root: int, comm: Any, st: Any) -> int:
        lib = self.lib
        if rc := lib._enter("ncclGather"):
            return rc
        dt = TYPE_BY_CODE[code]
        parts = lib.world.exchange(lib.rank, fake.view(s, count, dt).copy())
        if lib.rank == root:
            fake.view(r, count * lib.world.n, dt)[:] = np.concatenate(parts)
        return 0

    def ncclScatter(self, s: Any, r: Any, count: int, code: int, root: int, comm: Any, st: Any) -> int:
        lib = self.lib
        if rc := lib._enter("ncclScatter"):
            return rc
        dt, me = TYPE_BY_CODE[code], lib.rank
        parts = lib.world.exchange(me, fake.view(s, count * lib.world.n, dt).copy() if me == root else None)
        fake.view(r, count, dt)[:] = parts[root][me * count : (me + 1) * count]
        return 0


class _FakeNccl:
    path = "/nonexistent/libnccl-stand-in.so.2"

    def __init__(self, lib: _FakeLib, version: int = 23203, native_gather: bool = False) -> None:
        self.lib = lib
        self._version = version
        if native_gather:
            import cffi

            self.ext = (cffi.FFI(), _FakeExt(lib))

    def version(self) -> int:
        return self._version

    def get_unique_id(self) -> Any:
        return ffi.new("ncclUniqueId*")[0]

    def comm_init_rank(self, nranks: int, uid: Any, rank: int, config: Any) -> Any:
        assert len(uid) == 256 and nranks == self.lib.world.n and rank == self.lib.rank
        return ffi.cast("void*", 0x1000 + rank)

    def check(self, result: int, comm: Any = None) -> int:
        if result not in (0, 7):
            raise NcclError(result, RESULT_NAMES[result], self.lib.last)
        return result

    def last_error(self, comm: Any = None) -> str:
        return self.lib.last

    def error_string(self, code: int) -> str:
        return RESULT_NAMES.get(code, "?")


def run_fake(
    argv: list[str],
    nranks: int,
    *,
    version: int = 23203,
    fail: str | None = None,
    corrupt_rank: int = -1,
    native_gather: bool = False,
) -> tuple[list[int], list[_FakeLib]]:
    """Runs the worker of every rank in threads against the stand-ins; returns exit codes and libraries."""
    opts = b.parse_args([*argv, "-T", "30", "--worker"])
    port = fake.free_port()
    world = fake.World(nranks)
    libs = [_FakeLib(world, r, fail=fail, corrupt=r == corrupt_rank) for r in range(nranks)]

    def rank(r: int) -> int:
        where = b.RankInfo(r, nranks, "127.0.0.1", port)
        return b.worker_main(opts, argv, where, FAKE_CUPY, _FakeNccl(libs[r], version, native_gather))

    codes = _run_threads(nranks, rank)
    return codes, libs


def _table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize("coll", b.COLLECTIVES)
def test_worker_every_collective(coll: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "out.json"
    argv = [coll, "-b", "8", "-e", "4K", "-f", "4", "-w", "1", "-n", "2", "-J", str(path)]
    if coll in b.ROOTED:
        argv += ["-r", "all"]
    codes, libs = run_fake(argv, 4)
    captured = capsys.readouterr()
    assert codes == [0, 0, 0, 0], captured.err
    rows = _table(captured.out)
    sweep = b.size_series(8, 4096, 4, 0)  # 8, 32, 128, 512, 2048
    roots = list(range(4)) if coll in b.ROOTED else [-1]
    assert len(rows) == len(sweep) * len(roots)
    for i, row in enumerate(rows):
        assert len(row) == 13
        lay = b.layout(coll, sweep[i % len(sweep)], 4, 4)
        assert (int(row[0]), int(row[1])) == (lay.size, lay.count)
        assert row[2] == "float" and row[3] == ("sum" if coll in b.OP_COLUMN else "none")
        assert int(row[4]) == roots[i // len(sweep)]
        assert row[8] == "0"
        assert row[12] == ("N/A" if coll in b.UNCHECKED_IN_PLACE else "0")
    assert "# Out of bounds values : 0 OK" in captured.out
    assert f"# Collective test concluded: {coll}_perf" in captured.out
    assert captured.out.count("#  Rank ") == 4
    doc = json.loads(path.read_text())
    assert doc["collective"] == coll and len(doc["results"]) == len(rows)
    assert all(r["out_of_place"]["nwrong"] == 0 for r in doc["results"])
    assert doc["out_of_bounds"] == {"count": 0, "okay": True}
    assert len(doc["devices"]) == 4
    # Every rank issued the same calls, and the stand-in saw the native collective where one exists.
    native = {
        "all_reduce": "ncclAllReduce",
        "all_gather": "ncclAllGather",
        "reduce_scatter": "ncclReduceScatter",
        "alltoall": "ncclAlltoAll",
        "broadcast": "ncclBroadcast",
        "reduce": "ncclReduce",
        "gather": "ncclSend",  # no ncclGather in the stand-in: nccl-tests' send/recv fallback
        "scatter": "ncclRecv",
        "sendrecv": "ncclSend",
    }[coll]
    assert all(lib.calls.get(native, 0) > 0 for lib in libs)


def test_worker_all_types_and_ops(capsys: pytest.CaptureFixture[str]) -> None:
    codes, _ = run_fake(
        ["all_reduce", "-b", "8", "-e", "1K", "-f", "8", "-w", "0", "-n", "1", "-d", "all", "-o", "all"], 3
    )
    captured = capsys.readouterr()
    assert codes == [0, 0, 0], captured.err
    rows = _table(captured.out)
    assert len(rows) == 12 * 6 * 3  # 8, 64 and 512 bytes
    assert {r[2] for r in rows} == {t.name for t in b.TYPES}
    assert {r[3] for r in rows} == set(b.OPS)
    assert all(r[8] == "0" and r[12] == "0" for r in rows)


@pytest.mark.parametrize(
    "coll", ["reduce_scatter", "reduce", "all_gather", "alltoall", "scatter", "sendrecv"]
)
def test_worker_odd_ranks_and_types(coll: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [coll, "-b", "1", "-e", "3000", "-f", "7", "-w", "1", "-n", "1", "-d", "half,int64,f8e5m2"]
    if coll in b.REDUCING:
        argv += ["-o", "mulsum,avg,prod"]
    codes, _ = run_fake(argv, 3)
    captured = capsys.readouterr()
    assert codes == [0, 0, 0], captured.err
    assert "# Out of bounds values : 0 OK" in captured.out


@pytest.mark.parametrize(
    "extra",
    [
        ["-G", "2"],
        ["-m", "3"],
        ["-z", "1"],
        ["-z", "2"],
        ["-a", "0", "-C", "1"],
        ["-c", "2", "--alloc", "cuda"],
        ["-i", "1000", "-b", "1000", "-e", "3000"],
        ["-N", "3", "-f", "128"],
        ["-y", "1"],
        ["-R", "1"],
        ["-R", "2"],
        ["-x", "1", "-p", "1", "-V", "8", "-T", "0"],
    ],
)
def test_worker_modes(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    codes, libs = run_fake(
        ["sendrecv" if "-m" in extra else "all_reduce", "-b", "8", "-e", "1K", "-w", "1", "-n", "2", *extra],
        2,
    )
    captured = capsys.readouterr()
    assert codes == [0, 0], captured.err
    rows = _table(captured.out)
    # Every result checked and right (sendrecv in place is not checked, as in nccl-tests).
    assert all(r[8] == "0" and r[-1] in ("0", "N/A") for r in rows), captured.out
    if "-C" in extra:
        assert "cputime" in captured.out
    if "-i" in extra:
        assert [int(r[0]) for r in rows] == [1000, 2000, 3000]
    if "-N" in extra:  # the sweep, printed -N times
        assert [int(r[0]) for r in rows] == [8, 1024] * 3
    if "-R" in extra:  # both buffers, registered then released
        kind = "window" if extra[1] == "2" else "buffer"
        assert all(lib.registered == [kind, kind] and lib.deregistered == 2 for lib in libs)


def test_worker_counts_wrong_results(capsys: pytest.CaptureFixture[str]) -> None:
    codes, _ = run_fake(
        ["all_reduce", "-b", "64", "-e", "256", "-f", "2", "-w", "0", "-n", "1"], 4, corrupt_rank=1
    )
    captured = capsys.readouterr()
    assert codes == [1, 1, 1, 1]
    rows = _table(captured.out)
    assert [r[8] for r in rows] == ["1", "1", "1"] and [r[12] for r in rows] == ["1", "1", "1"]
    # Each rank counts the sizes it got wrong; only rank 1 did (3 sizes x 2 placements).
    assert "# Out of bounds values : 6 FAILED" in captured.out
    assert "rank 1: all_reduce 64 B float sum root -1 out-of-place: 1 of 16 elements wrong" in captured.err


def test_worker_reports_library_errors(capsys: pytest.CaptureFixture[str]) -> None:
    codes, _ = run_fake(["all_gather", "-b", "1K", "-e", "1K"], 2, fail="ncclAllGather")
    captured = capsys.readouterr()
    assert codes == [3, 3]
    assert "ncclInvalidUsage (5): ncclAllGather is not implemented yet" in captured.err
    assert "# error: " in captured.out


def test_worker_old_library_falls_back(capsys: pytest.CaptureFixture[str]) -> None:
    # Before 2.28 there is no ncclAlltoAll: nccl-tests sends and receives per peer instead.
    codes, libs = run_fake(["alltoall", "-b", "1K", "-e", "4K", "-w", "0", "-n", "1"], 2, version=22703)
    assert codes == [0, 0], capsys.readouterr().err
    assert all("ncclAlltoAll" not in lib.calls and lib.calls["ncclSend"] > 0 for lib in libs)


def test_worker_rejects_bad_root(capsys: pytest.CaptureFixture[str]) -> None:
    codes, _ = run_fake(["broadcast", "-r", "5", "-e", "1K"], 2)
    assert codes == [3, 3]
    assert "root 5 is not a rank of 2" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "per_placement"),
    [
        ([], 5 + 2 + 1),
        (["-G", "3"], 5 + 2 + 1),
        (["-m", "3"], 5 + 2 * 3 + 1),
        (["-c", "0"], 5 + 2),
        (["-w", "0"], 1 + 2 + 1),
    ],
)
def test_worker_call_counts(extra: list[str], per_placement: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Per size and placement: the warm-up calls (at least one), the timed calls, one call per check."""
    codes, libs = run_fake(["all_reduce", "-b", "64", "-e", "128", "-w", "5", "-n", "2", *extra], 2)
    assert codes == [0, 0], capsys.readouterr().err
    assert all(lib.calls["ncclAllReduce"] == 2 * 2 * per_placement for lib in libs)


@pytest.mark.parametrize("coll", ["gather", "scatter"])
def test_worker_native_gather_scatter(coll: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [coll, "-b", "8", "-e", "8K", "-f", "4", "-w", "1", "-n", "2", "-r", "all", "-d", "half"]
    codes, libs = run_fake(argv, 3, native_gather=True)
    captured = capsys.readouterr()
    assert codes == [0, 0, 0], captured.err
    assert "# Out of bounds values : 0 OK" in captured.out
    name = "ncclGather" if coll == "gather" else "ncclScatter"
    assert all(lib.calls[name] > 0 and "ncclSend" not in lib.calls for lib in libs)


def test_main_launches_workers(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import importlib.util

    import mscclpp_nccl.run as run

    seen: dict[str, Any] = {}

    def fake_launch(nranks: int, cmd: list[str], **kwargs: Any) -> int:
        seen.update(nranks=nranks, cmd=cmd, **kwargs)
        return 0

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(run, "visible_gpus", lambda env=None: ["0"])
    monkeypatch.setattr(run, "launch", fake_launch)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "cupy" else real_find_spec(name, *a)
    )
    monkeypatch.delenv("NCCL_MAX_CTAS", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libnccl.so.2").write_bytes(b"")
    assert b.main(["all_gather", "-b", "1K", "--lib", "libnccl.so.2", "--nranks", "4"]) == 0
    assert seen["nranks"] == 4 and seen["mps"] is True
    assert seen["prefix"] is False and seen["unique_id"] is False
    assert seen["env"]["NCCL_MAX_CTAS"] == "8"
    cmd = seen["cmd"]
    assert cmd[1:3] == ["-m", "mscclpp_nccl.bench"] and "--worker" in cmd
    assert cmd[-2:] == ["--lib", str(tmp_path / "libnccl.so.2")]
    assert b.parse_args(cmd[3:]).worker
    assert b.main(["broadcast", "-r", "4", "--nranks", "4"]) == 2  # 4 ranks: no rank 4
    assert b.main(["all_reduce", "-g", "2"]) == 2  # 2 ranks, one GPU each, on 1 GPU: as nccl-tests, no
    assert b.main(["all_reduce", "--lib", "missing.so"]) == 2
