"""Layer 4: training adapters (verl 0.9.1, behind the optional extra `.[rl]`).

The environment core does the work; these modules turn it into what a trainer
needs. Framework-free (importable without verl): `tokens` (the token stream and
the chat-template token builder), `rollout` (one episode at the token level),
`replay` (stored trajectories as token streams), `scoring` (the evaluator over
the pool; the single-turn reward), `gae` (the critic's targets), `prompts`
(datasets from suites), `rft` (the rejection filter and SFT rows), `tiny` (a
tiny random model for CI and smoke runs), `inputs` (model, dataset and Ray address
checks before verl, one line each). verl-bound: `verl_loop` (the agent loops),
`sft_data` (the SFT dataset class), `config` (complete verl configs per stage,
validated by verl's loader), `launch` (start a stage), and the CPU backend:
`hf_rollout` (a transformers rollout), `cpu_platform` (verl's device platform for
the CPU) and `verl_plugins` (registers both; verl imports it through
VERL_USE_EXTERNAL_MODULES). Nothing outside this package imports verl.
"""
