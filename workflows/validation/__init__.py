"""The validator's parts, one module per concern; ``workflows.validator`` is the public face.

* ``report``: issues, the report, ``WorkflowInvalid``, path formatting
* ``schema_errors``: pydantic errors as ``schema_invalid`` issues
* ``context``: the spec parsed once (mapping leaves with their paths, tool look-ups)
* ``structure``: step ids, edges, cycles, ``not_ancestor``, the compiled graph
* ``reference_checks``: inputs, ``$env``, ``$item``, output fields, look-alike literals
* ``tool_checks``: tools, allowlists, parameters against input schemas
* ``branches``: decision branches, edge labels, unreachable steps
* ``kinds``: per-kind rules, including the unsupported-kind gate
"""
