"""Experiment plumbing: the study runner, checkpoints, results and provenance, plots,
progress, timing, local clusters, artefact lookup, the method list (``methods``) and
running a method by name (``registry``), TensorBoard events (``events`` + per-method
``scalars``; ``events_export`` rewrites them from finished units), the HTML results page
(``report``) and JAX's persistent compilation cache with compile accounting
(``compile_cache``).

``jaxlab`` holds the methods (pure functions); everything that touches disk, the clock,
plots or processes lives here.

The modules import each other without a cycle (``tests/test_import_graph.py``), in layers:
``locks``, ``paths``, ``methods``, ``events``, ``compile_cache``, ``progress``, ``plots``,
``timing`` import no module of this package; then ``provenance`` (locks, paths, methods),
``results`` (provenance), ``checkpoint`` (locks, provenance), ``artifacts`` (checkpoint,
paths, results), ``scalars`` (methods); ``study`` above those; ``registry`` and
``events_export`` above ``study``.
"""
