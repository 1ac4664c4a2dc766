"""The A2A paths (light: read at start-up, before the A2A stack loads)."""

PATH = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
