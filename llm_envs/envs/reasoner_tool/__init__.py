"""Reasoner–Tool environment (Stronger-MAS math): ``llm/ReasonerTool-v0``."""
