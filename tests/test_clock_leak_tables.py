"""benchmarks/clock_leak.py's tables, on made-up rows (no GPU): the item-4 figure (how far a lie can lower
the mean time that counts, at two standard errors) and where the candidate's net spreads."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("clock_leak", ROOT / "benchmarks" / "clock_leak.py")
cl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cl)


def _pairs(honest: list[float], forger: list[float]) -> list[dict]:
    rows = []
    for h, f in zip(honest, forger, strict=True):
        rows += [
            {"size": "~20 us", "factor": None, "reward": 2, "time_ms": h / 1e3},
            {"size": "~20 us", "factor": 0.9, "reward": 2, "time_ms": f / 1e3},
        ]
    return rows


def _bound(out: str) -> float:
    line = next(ln for ln in out.splitlines() if ln.startswith("~20 us"))
    return float(line.split()[8].rstrip("%")) / 100


def test_the_gain_bound_is_the_forgers_lead_plus_two_standard_errors(capsys):
    honest, faster = [30.0, 31.0, 29.0, 30.0], [27.0, 28.0, 26.0, 27.0]  # the lie gains 10 %
    cl._pairs_table(_pairs(honest, faster), ["~20 us"], 0.9)
    mh, mf, se, _ = cl.fr.mean_difference(honest, faster)
    assert _bound(capsys.readouterr().out) == pytest.approx(-(mf / mh - 1) + 2 * se / mh, abs=1e-3)
    cl._pairs_table(_pairs(honest, [40.0, 41.0, 39.0, 40.0]), ["~20 us"], 0.9)  # the forgers far slower
    assert _bound(capsys.readouterr().out) == 0.0


def test_the_looks_table_tells_a_spread_within_evaluations_from_one_between_them(capsys):
    def row(best: float, second: float) -> dict:
        return {
            "size": "~20 us",
            "trusted_ms": 0.02,
            "trusted_looks": {"candidate": {"calls": 100, "ms": [second, best]}},
        }

    steady_inside = [row(6.0 + 0.3 * i, 6.0 + 0.3 * i + 0.006) for i in range(4)]  # bests apart, looks together
    cl._looks_table(steady_inside, ["~20 us"])
    cells = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("~20 us")).split()
    within, between = float(cells[5].rstrip("%")), float(cells[7].rstrip("%"))  # as shares of the burst
    bests = [(6.0 + 0.3 * i) / 100 for i in range(4)]
    assert between == pytest.approx(100 * statistics.stdev(bests) / statistics.fmean(bests), abs=0.01)
    assert within < 0.2 < between
    cl._looks_table([{"size": "~20 us", "trusted_ms": None, "trusted_looks": {}}], ["~20 us"])
    assert "fewer than two evaluations" in capsys.readouterr().out
