"""The pull-request wing: the ``rag-gate pr`` flow, git plumbing, the base-results cache and the GitHub surface.

It sits above the engine (``gate.sides``, ``gate.produce`` and below): the engine never imports this package.
"""
