"""Rate limits and adaptive pacing of tool calls, shared by every worker.

Submodules: ``config`` (the ``rate_limit:`` key of a tool file), ``headers`` (reading
an API's own rate headers), ``core`` (the pacer one run uses: reserve a slot, wait,
record a pause), ``redis_store`` and ``db_store`` (the shared state), ``setup``
(building the pacer from settings). Import from the submodules.
"""
