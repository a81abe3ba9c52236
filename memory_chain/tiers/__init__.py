"""The three memory tiers: buffer (tier 1), SQL (tier 2) and vectors (tier 3)."""
