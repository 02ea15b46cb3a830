"""The filter's output: Ops-6K columns plus provenance, as parquet and JSON lines.

Contract: `write_tasks(rows, out)` writes `out` (.parquet needs pyarrow; .jsonl
always works) and, for a .parquet `out`, the same rows as `<out>.jsonl`
beside it. Every row has the Ops-6K columns `ops` (a JSON list of op names,
as a string), `data_source` ("torch#K" or "transformers") and `code` (the
task file), then the provenance columns of `PROVENANCE` with fixed types, so
`task.suites.load_suite` reads the file as it reads the released Ops-6K.
`read_tasks(path)` reads either form back as a list of dicts.
Not guaranteed: column order beyond the Ops-6K three coming first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OPS6K = ("ops", "data_source", "code")
# name -> pyarrow type name; JSON-valued columns are strings
PROVENANCE: dict[str, str] = {
    "id": "string",
    "seed_ids": "string",
    "composer": "string",
    "eager_ms": "float64",
    "compile_ms": "float64",
    "max_similarity": "float64",
    "nearest_ref": "string",
    "semantic_similarity": "float64",
    "semantic_ref": "string",
    "reshapes": "string",
    "pipeline_version": "string",
}


def _schema():
    import pyarrow as pa

    types = {"string": pa.string(), "float64": pa.float64()}
    return pa.schema([(c, pa.string()) for c in OPS6K] + [(c, types[t]) for c, t in PROVENANCE.items()])


def _row(r: dict[str, Any]) -> dict[str, Any]:
    out = {c: r.get(c) for c in (*OPS6K, *PROVENANCE)}
    for c in ("ops", "seed_ids", "reshapes"):
        if not isinstance(out[c], str):
            out[c] = json.dumps(out[c] if out[c] is not None else [])
    return out


def write_tasks(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    out = Path(out)
    rows = [_row(r) for r in rows]
    written = []
    if out.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise RuntimeError(
                "writing .parquet needs pyarrow (pip install 'cuda-agent[data]'), or use -o X.jsonl"
            ) from None
        pq.write_table(pa.Table.from_pylist(rows, schema=_schema()), out)
        written.append(out)
        out = out.with_suffix(".jsonl")
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    written.append(out)
    return written


def read_tasks(path: Path) -> list[dict[str, Any]]:
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
