"""The circuit breaker per external host (see ``core`` for the states).

Submodules: ``core`` (policy, states, the guard), ``redis_store`` and ``db_store``
(the shared state), ``setup`` (building them from settings), ``services`` (reset) and
``selectors`` (listing). Import from the submodules.
"""
