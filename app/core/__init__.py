"""The run core: starts runs, turns graph streams into AG-UI events, reads threads.

Shared by both programs (the HTTP server and the terminal client); imports neither.
"""
