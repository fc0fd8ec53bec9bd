"""Test doubles: the scripted drafter, engine and model provider
(`scripted`, `scripted_llm`), fake model servers (`llm_fakes`,
`model_server`) and fakes for driving the real agent CLIs offline (see
docs/agent-clis.md)."""
