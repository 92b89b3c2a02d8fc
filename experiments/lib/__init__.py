"""Experiment plumbing: the study runner, checkpoints, results and provenance, plots,
progress, timing, local clusters, artefact lookup and the method registry.

``jaxlab`` holds the methods (pure functions); everything that touches disk, the clock,
plots or processes lives here.
"""
