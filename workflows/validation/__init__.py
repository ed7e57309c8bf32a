"""The validator's parts, one module per concern; ``workflows.validator`` is the public face.

* ``report``: issues, the report, ``WorkflowInvalid``, path formatting, name lists
* ``schema_errors``: pydantic errors as ``schema_invalid`` issues, with the field meant
* ``partial``: what parsed after a schema error, so the cross checks still run
* ``context``: the spec parsed once (mapping leaves with their paths, tool look-ups,
  the declared output fields of every step)
* ``structure``: step ids, edges, cycles (a decision looping back), ``not_ancestor``
* ``reference_checks``: inputs, ``$env``, ``$item``, output fields of every step kind
* ``literals``: plain strings meant as references (unknown steps, templates,
  ``input.x``, a bare step id, look-alike characters)
* ``confusables``: the look-alike characters and the ASCII they pass for
* ``exclusive``: reads across exclusive branches of a decision
* ``tool_checks``: tools, allowlists, parameters against input schemas
* ``types``: declared types against their use (parameters, defaults, foreach items)
* ``branches``: decision branches, edge labels, unreachable steps
* ``kinds``: per-kind rules, including the unsupported-kind gate
* ``jmespath_checks``: the names a transform reads, quoted text in comparisons
* ``hints``: the fix for a condition or expression that does not compile
"""
