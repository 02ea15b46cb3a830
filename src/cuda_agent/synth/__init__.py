"""Task synthesis (layer 3): an Ops-6K-style pipeline over files.

    crawl    torch (+ transformers) ops -> seeds.jsonl        (crawl.py, crawl_hf.py, probe.py)
    compose  seeds -> candidates.jsonl  (deterministic or LLM) (compose.py, compose_llm.py)
    filter   candidates -> tasks.parquet + tasks.jsonl          (filter.py: parse, dedup, decontaminate
             on the CPU; device checks as pool jobs: device_job.py + check_child.py)
    stats    tasks -> Markdown + PNG                            (stats.py)

Every stage writes its results as it goes (append-only JSON lines, `records.py`)
and skips what a file already holds, so a killed run continues where it stopped.
Rejections are records with a stage and a reason, never silently dropped.
Imports task, eval, llm and pool only (tests/test_layers.py).
"""
