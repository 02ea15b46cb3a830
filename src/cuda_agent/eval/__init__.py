"""Layer 1: the trusted evaluator. Import the entry points from `cuda_agent.eval.api`.
This package __init__ stays empty of imports: the child process imports
`cuda_agent.eval.child`, which must pull in only the standard library and torch."""
