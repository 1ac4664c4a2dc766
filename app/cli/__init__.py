"""The terminal client: `react-agent chat` and `graphs`, in-process or against a server."""
