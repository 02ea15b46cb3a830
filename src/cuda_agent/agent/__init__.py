"""Layer 3: the `optimize` agent, a driver of the environment core over a chat API.

Modules: `loop` (run_episode: the chat loop, token and wall limits, the log),
`context` (staying under the context budget by eliding old material),
`trajectory` (the run log and its loader), `sandbox` (the agent's bash shell,
handed to the environment as its shell factory until it moves to layer 0).
The tools, the prompt and the best-candidate bookkeeping live in
`cuda_agent.env`. Imports task, eval, llm and env; never synth, bench, rl or cli."""
