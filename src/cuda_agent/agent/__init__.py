"""Layer 2: the ReAct agent that optimises one task in one workspace.

Modules: `loop` (run_episode: the loop, limits, best candidate), `toolbox`
(tool schemas and dispatch), `files` and `sandbox` (what the tools do),
`context` (staying under the context budget), `trajectory` (the run log and its
loader), `prompt` (system prompt and task message), `best` (ranking and the
kept copy). Imports task, eval and llm; never synth, rl or cli."""
