"""Recording a validation run's calls — HTTP exchanges, MCP tool calls, LLM calls — and
replaying a version against them.

``recorder``: the taps a validation run's tool and model calls go through, and the rows
they leave (``ToolCallRecording``). ``player``: the taps of a replay, which answer from
those rows and refuse anything else. ``exchange``: a call's masked, comparable request.
``services``: ``version_replay``. ``report``: what matched and what differs, per step.
"""
