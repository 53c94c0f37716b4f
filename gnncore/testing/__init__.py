"""Helpers for gnncore's own tests: slow, obviously correct pure-Python references."""
