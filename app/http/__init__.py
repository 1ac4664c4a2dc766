"""The HTTP server: the run core over AG-UI/SSE and plain JSON, and the built web UI."""
