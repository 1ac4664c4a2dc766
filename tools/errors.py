"""The small exception hierarchy tools raise to the graph."""


class ToolsetUnavailable(Exception):
    """An agent's tools cannot be had right now; the message tells the user what to do."""
