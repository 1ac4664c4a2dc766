"""SQLite: the process's writer connection, the checkpointer and the run store on it."""
