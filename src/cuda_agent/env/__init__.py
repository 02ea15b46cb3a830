"""Layer 2: the environment core that every driver shares (`optimize`, RL rollouts).

Modules: `core` (Environment: reset / step / settle / close, typed step results),
`toolbox` (tool schemas, argument checks, dispatch), `files` (the file tools),
`shell` (the shell protocol and the seam through which the sandboxed shell
arrives), `best` (ranking and the kept best candidate), `prompt` (system prompt,
task message, nudges). Imports task, eval and llm; never pool (same layer),
agent, synth, bench, rl or cli."""
