"""Scenarios of public speculative-decoding results (docs/analytic-profiles.md)."""
