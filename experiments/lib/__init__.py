"""Experiment plumbing: the study runner, checkpoints, results and provenance, plots,
progress, timing, local clusters, artefact lookup, the method registry, TensorBoard
events (``events`` + per-method ``scalars``) and the HTML results page (``report``).

``jaxlab`` holds the methods (pure functions); everything that touches disk, the clock,
plots or processes lives here.
"""
