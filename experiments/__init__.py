"""Experiment binaries and configs (thin wrappers over library functions)."""
