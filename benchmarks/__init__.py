"""GPU measurements: the programs (one per file) and `python -m benchmarks NAME...`, which runs the named
ones of benchmarks/manifest.py in one device call each and packs their figures into one archive
(benchmarks/runner.py; docs/measurements.md has the names and the history of past runs)."""
