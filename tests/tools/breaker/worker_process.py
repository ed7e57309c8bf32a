"""One worker process calling a flaky http tool through the breakers the environment
configures (``FLOWPILOT_BREAKER_*``, ``DATABASE_URL``), for the shared-state tests.

``python -m tests.tools.breaker.worker_process BASE_URL`` prints ``ready``, then for
every line ``CALLS [START_AT]`` on stdin waits until the Unix time ``START_AT`` (if
given), makes ``CALLS`` calls and prints their outcomes as one JSON list (``"ok"`` or
the error code). It ends at the end of its input.
"""

from __future__ import annotations

import json
import os
import sys
import time

import django


def main(base_url: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    import httpx  # after setup: the tools modules import Django models

    from tests.tools.breaker.conftest import flaky_spec
    from tools.breaker.setup import breakers_from_settings
    from tools.calls import ToolCallContext
    from tools.errors import FlowpilotError
    from tools.http_client import call_http_tool
    from tools.redaction import Redactor

    breakers = breakers_from_settings()
    assert breakers is not None, "the breaker backend is off"
    with httpx.Client() as client:
        ctx = ToolCallContext(
            env={"BASE": base_url}, redactor=Redactor(), http=client, breakers=breakers
        )
        print("ready", flush=True)
        for line in sys.stdin:
            calls, *start_at = line.split()
            if start_at:
                time.sleep(max(0.0, float(start_at[0]) - time.time()))
            outcomes = []
            for _ in range(int(calls)):
                try:
                    call_http_tool(flaky_spec(), {}, ctx)
                    outcomes.append("ok")
                except FlowpilotError as exc:
                    outcomes.append(exc.code)
            print(json.dumps(outcomes), flush=True)
    breakers.close()


if __name__ == "__main__":
    main(sys.argv[1])
