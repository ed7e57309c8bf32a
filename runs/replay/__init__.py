"""Recording a validation run's HTTP exchanges, and replaying a version against them.

``recorder``: the taps a validation run's tool calls go through, and the rows they
leave (``ToolCallRecording``). ``player``: the taps of a replay, which answer from
those rows and refuse anything else. ``services``: ``version_replay``. ``report``:
what matched and what differs, per step.
"""
