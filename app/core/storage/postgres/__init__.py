"""PostgreSQL: the pool, the checkpointer and the run store on it."""
