"""The tests' shared harness: PostgreSQL (the `postgres` fixtures plugin), server child
processes, the environment that points the app at the doubles, clients of the LLM
double, and real peers the tests start (llama.py: llama.cpp's llama-server). The
stand-ins of external services themselves are in `tests.doubles`."""
