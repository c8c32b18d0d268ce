"""Stage 40, serving: functional suites over an OpenAI-compatible server, the openai-suite kind."""
