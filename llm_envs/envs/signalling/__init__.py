"""Signalling: a tiny two-agent referential game, the trainers' learning testbed."""
