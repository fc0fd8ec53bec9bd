"""textkit: small text helpers (corral demo fixture)."""
