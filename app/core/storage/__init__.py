"""The durable store on AGENT_DB: checkpoints, run records, event logs, leases, retention.

One sub-package per backend (`sqlite/`, `postgres/`), each with a connection, a
checkpointer and a run store; `backends.open_storage` picks one from AGENT_DB.
"""
