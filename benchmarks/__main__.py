"""`python -m benchmarks NAME...` (from the repository root): benchmarks/runner.py says what it does."""

from benchmarks.runner import main

raise SystemExit(main())
