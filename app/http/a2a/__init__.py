"""The agents over the A2A protocol at `/a2a` (`endpoint`), their card at
`/.well-known/agent-card.json`."""
