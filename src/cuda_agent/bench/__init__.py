"""Layer 2: benchmarks at scale. Suites in, the evaluation pool (local processes or
Ray), a SQLite results store per run, the paper's metrics and reports out.
May import agent, eval and task; imported only by cli. Entry points live in the
modules (pool, runner, store, metrics, report); this __init__ imports nothing."""
