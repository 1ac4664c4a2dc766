"""Users: who a request comes from (a key, an identity provider's token, a trusted proxy's
header), and what each may use (runs at once, requests a minute, tokens a day)."""
