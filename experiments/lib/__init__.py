"""Experiment plumbing: the study runner, checkpoints, results and provenance, plots,
progress, timing, local clusters, artefact lookup, the method registry, TensorBoard
events (``events`` + per-method ``scalars``), the HTML results page (``report``) and
JAX's persistent compilation cache with compile accounting (``compile_cache``).

``jaxlab`` holds the methods (pure functions); everything that touches disk, the clock,
plots or processes lives here.
"""
