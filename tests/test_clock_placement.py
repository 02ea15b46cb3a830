"""benchmarks/clock_placement.py's summary on saved rows (no GPU): the spreads it prints are the ones
that tell a per-allocation factor from a per-process one (issue 28)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("clock_placement", ROOT / "benchmarks" / "clock_placement.py")
cp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cp)


def _row(proc: int, alloc: int, net_us: float, variant: str = "dense") -> dict:
    loop = 0.090
    model = loop + net_us / 1e3
    return {
        "proc": proc,
        "alloc": alloc,
        "variant": variant,
        "model_ms": [model, model * 1.01],
        "loop_ms": [loop, loop * 1.01],
        "net_ms": net_us / 1e3,
    }


def test_a_per_allocation_factor_shows_within_a_process_and_a_per_process_one_only_between():
    # allocations alternate 10 / 12 us in every process: spread within a process, none between medians
    by_alloc = [_row(p, a, 10.0 if a % 2 == 0 else 12.0) for p in range(3) for a in range(2)]
    # every allocation of process p at 10 + p us: none within a process, 18 % between
    by_proc = [_row(p, a, 10.0 + p, "rank1") for p in range(3) for a in range(2)]
    header, dense, rank1 = cp.summary(by_alloc + by_proc)
    assert header.startswith("variant") and dense.startswith("dense ") and rank1.startswith("rank1 ")
    cols = dense.split()
    assert cols[1] == "11.00" and cols[3] == "18.18%" and cols[4] == "0.00%", dense  # (12 - 10) / 11
    cols = rank1.split()
    assert cols[3] == "0.00%" and cols[4] == "18.18%", rank1  # (12 - 10) / 11
    # a look's wobble as a share of the net: 1 % of a 0.1 ms burst against a 10 us net is about 10 %
    assert 9.0 < float(cols[2].rstrip("%")) < 10.5, rank1


def test_a_variant_with_no_rows_is_left_out():
    (header,) = cp.summary([])
    assert header.startswith("variant")
