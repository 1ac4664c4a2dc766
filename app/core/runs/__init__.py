"""Runs: starting, executing, following and cancelling them; their events and threads."""
