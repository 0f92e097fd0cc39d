"""Coder–Tester environment (Stronger-MAS code generation): ``llm/CoderTester-v0``."""
