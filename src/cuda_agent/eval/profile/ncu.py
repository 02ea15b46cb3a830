"""Nsight Compute for the expert profile: the command, its fixed metric list, and its CSV read back.

Contract:
- `find_ncu()` locates the tool ($CUDA_AGENT_NCU, then PATH, then $CUDA_HOME/bin and
  /usr/local/cuda/bin); None where it is not installed.
- `ncu_command(ncu, argv, metrics=METRICS)` is the argv prefix + target: `--clock-control none` always
  (the clocks are the machine's; a profile never locks or changes them), `--profile-from-start off`
  (only what the target brackets with cudaProfilerStart/Stop is profiled, so input draws and warm-up
  are not), `--csv --page raw --print-units base` (one row per kernel launch, SI base units), and the
  metric list below. Nothing else is collected (no `--set full`: every section adds replay passes).
- `parse_csv(text)` turns that output into `KernelCounters`, one per launch, in launch order. It takes
  the raw page (wide: one column per metric, a units row under the header) and the details page (long:
  "Metric Name"/"Metric Unit"/"Metric Value"), skips `==PROF==` lines and the target's own stdout,
  reads thousands separators and scales time and byte units to ns and bytes. A metric ncu printed as
  "n/a" or not at all is None, never 0. Text without a header gives [] (callers then read `failure`).
- `failure(text, returncode)` names why ncu gave no counters: permission (ERR_NVGPUCTRPERM), a metric
  this GPU or ncu version does not know, no kernel in the profiled range, or ncu's own error line.
- `merge_launches(rows)` folds repeated launches of one kernel into one row (durations averaged,
  counts kept), so the summary lists kernels, not launches.

Not guaranteed: the metric names are Nsight Compute 2023-2025's for compute capability 7.0 and later.
Checked on one real run: ncu 2025.3.1 on an H100 80GB HBM3 (2026-12-06, commit 0467285) took the whole
list and printed the raw page this parser reads (units such as "ns", thousands separators, a
`==WARNING==` line, and beside the requested metrics ncu's own device__/launch__/profiler__ columns,
which are read and ignored); tests/fixtures/ncu/h100_*.csv are those captures. Other GPUs and ncu
versions are unchecked. A name a future ncu drops makes ncu refuse the whole list; `failure` says
which, and `CORE_METRICS` is the smaller list the caller retries with. Standard library only.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

OVERRIDE = "CUDA_AGENT_NCU"

# Per kernel: what an expert reads first (GPU Speed Of Light, Launch Statistics, Occupancy sections).
CORE_METRICS = (
    "gpu__time_duration.sum",  # ns
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",  # % of the DRAM's peak
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",  # % of the SMs' peak (busiest unit)
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",  # achieved occupancy
    "sm__maximum_warps_per_active_cycle_pct",  # theoretical occupancy
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__block_size",
    "launch__grid_size",
)
# Executed floating-point instructions (predicated on), for the achieved FLOP rate: an FMA counts 2.
FLOP_METRICS = {
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": (2 if op == "fma" else 1)
    for p in ("f", "h", "d")
    for op in ("add", "mul", "fma")
}
TENSOR_METRIC = "sm__inst_executed_pipe_tensor.sum"  # > 0: tensor cores ran (their FLOPs are not counted above)
# Warp stall reasons, as cycles per issued instruction (the Warp State Statistics section's breakdown).
STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "wait",
    "barrier",
    "membar",
    "mio_throttle",
    "lg_throttle",
    "math_pipe_throttle",
    "not_selected",
    "selected",
    "dispatch_stall",
    "branch_resolving",
    "no_instruction",
    "drain",
    "imc_miss",
    "tex_throttle",
    "sleeping",
    "misc",
)
STALL_METRICS = {f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": r for r in STALL_REASONS}
METRICS = (*CORE_METRICS, *FLOP_METRICS, TENSOR_METRIC, *STALL_METRICS)

_ID_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Section Name",
)
_TIME = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
_BYTES = {
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "kibyte": 1024.0,
    "mibyte": 1024.0**2,
    "gibyte": 1024.0**3,
}


@dataclass
class KernelCounters:
    name: str
    launches: int = 1
    values: dict[str, float | None] = field(default_factory=dict)  # metric name -> value in base units

    def get(self, metric: str) -> float | None:
        return self.values.get(metric)

    @property
    def duration_ns(self) -> float | None:
        return self.get("gpu__time_duration.sum")

    def flops(self) -> float | None:
        """FLOPs of the CUDA cores (FMA = 2); None if ncu gave no FLOP counter."""
        got = [(self.get(m), w) for m, w in FLOP_METRICS.items()]
        if all(v is None for v, _ in got):
            return None
        return sum((v or 0.0) * w for v, w in got)

    def dram_bytes(self) -> float | None:
        r, w = self.get("dram__bytes_read.sum"), self.get("dram__bytes_write.sum")
        return None if r is None and w is None else (r or 0.0) + (w or 0.0)

    def stalls(self) -> list[tuple[str, float]]:
        """Stall reasons, largest first (cycles per issued instruction); 'selected' is issuing, not a stall."""
        got = [(r, v) for m, r in STALL_METRICS.items() if r != "selected" and (v := self.get(m)) is not None]
        return sorted(got, key=lambda x: -x[1])


def find_ncu() -> str | None:
    if override := os.environ.get(OVERRIDE):
        return override
    if found := shutil.which("ncu"):
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (p := Path(home) / "bin" / "ncu").is_file():
            return str(p)
    return None


def ncu_command(ncu: str, argv: list[str], metrics: tuple[str, ...] | list[str] = METRICS) -> list[str]:
    return [
        ncu,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        ",".join(metrics),
        *argv,
    ]


def _number(text: str) -> float | None:
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def _scaled(value: float | None, unit: str) -> float | None:
    if value is None:
        return None
    u = unit.strip().lower()
    return value * _TIME.get(u, _BYTES.get(u, 1.0))


def _csv_rows(text: str) -> list[list[str]]:
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]  # ncu's CSV quotes every field
    return list(csv.reader(io.StringIO("\n".join(lines))))


def parse_csv(text: str) -> list[KernelCounters]:
    rows = _csv_rows(text)
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID" and "Kernel Name" in r), None)
    if start is None:
        return []
    header, body = rows[start], rows[start + 1 :]
    col = {name: i for i, name in enumerate(header)}
    if "Metric Name" in col and "Metric Value" in col:
        return _parse_long(col, body)
    units: list[str] = [""] * len(header)
    if body and not body[0][0]:  # the raw page's units row: empty id columns, a unit per metric
        units, body = body[0] + [""] * (len(header) - len(body[0])), body[1:]
    out = []
    for r in body:
        if len(r) < len(header) or not r[0]:
            continue
        vals = {h: _scaled(_number(r[i]), units[i]) for i, h in enumerate(header) if h not in _ID_COLUMNS}
        out.append(KernelCounters(r[col["Kernel Name"]], 1, vals))
    return out


def _parse_long(col: dict[str, int], body: list[list[str]]) -> list[KernelCounters]:
    by_id: dict[str, KernelCounters] = {}
    for r in body:
        if len(r) < len(col) or not r[col["Metric Name"]]:
            continue
        k = by_id.setdefault(r[col["ID"]], KernelCounters(r[col["Kernel Name"]]))
        unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
        k.values[r[col["Metric Name"]]] = _scaled(_number(r[col["Metric Value"]]), unit)
    return list(by_id.values())


def merge_launches(rows: list[KernelCounters]) -> list[KernelCounters]:
    """One entry per kernel name, in first-launch order; each value is the mean over its launches
    (None where no launch had it)."""
    groups: dict[str, list[KernelCounters]] = {}
    for k in rows:
        groups.setdefault(k.name, []).append(k)
    out = []
    for name, ks in groups.items():
        keys = dict.fromkeys(m for k in ks for m in k.values)
        vals: dict[str, float | None] = {}
        for m in keys:
            got = [v for k in ks if (v := k.values.get(m)) is not None]
            vals[m] = sum(got) / len(got) if got else None
        out.append(KernelCounters(name, sum(k.launches for k in ks), vals))
    return out


_PERM = re.compile(r"ERR_NVGPUCTRPERM|permission to access NVIDIA GPU Performance Counters", re.I)
_METRIC = re.compile(r"(?:Failed to find metric|metric[s]? .*?(?:not found|not available|invalid))[^\n]*", re.I)
_NONE = re.compile(r"No kernels were profiled", re.I)
_ERROR = re.compile(r"^==ERROR==\s*(.+)$", re.M)


def failure(text: str, returncode: int | None) -> str | None:
    """Why the run gave no counters, in one line; None when it looks fine."""
    if _PERM.search(text):
        return (
            "refused: ERR_NVGPUCTRPERM, this user may not read the GPU's performance counters "
            "(the driver's RmProfilingAdminOnly setting; an administrator can allow it)"
        )
    if m := _METRIC.search(text):
        return f"ncu does not know a metric on this GPU: {m.group(0).strip()[:160]}"
    if _NONE.search(text):
        return "ncu profiled no kernel (the candidate launched none inside the profiled range)"
    if m := _ERROR.search(text):
        return f"ncu failed: {m.group(1).strip()[:160]}"
    if returncode not in (0, None):
        return f"ncu exited with status {returncode} and no counters"
    return None
