"""Layer 1: a chat client for any OpenAI-compatible server (hosted APIs, vLLM, SGLang).

Import from `cuda_agent.llm.client` (the client, `Completion`, `LLMError`) and
`cuda_agent.llm.textcalls` (tool calls written as text). Imports only the
standard library and the `openai` SDK; nothing from the agent."""
