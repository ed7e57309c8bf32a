"""The HTTP clients a run uses: no cookie ever outlives the calls that share a session.

A run's client (``run_http_client``) keeps connections but never cookies: its jar
refuses every cookie, so a ``Set-Cookie`` received by one step is never sent by
another, and an in-process, resumed or Celery run of the same inputs sends the
same requests. A tool that declares ``cookies: step`` gets a client of its own for
one session (``tool_session``): one attempt of a ``tool`` step, or one item of a
``foreach`` step with that item's retries; its cookies end with it.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from tools.registry import ToolRegistry


def run_http_client() -> httpx.Client:
    """The run's shared client: pooled connections, no redirects, no cookies kept."""
    return _client(CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])))


def process_http_client() -> httpx.Client:
    """A ``run_http_client`` shared by this process's Celery step tasks, never closed by
    them (``build_run_context(http=…)``): its pooled connections outlive each task, as a
    worker's database connection does. One per process id: a forked worker process
    never uses its parent's sockets. httpx clients are safe to share across threads.
    """
    return _process_client(os.getpid())


@functools.cache
def _process_client(pid: int) -> httpx.Client:
    return run_http_client()


def _client(jar: CookieJar) -> httpx.Client:
    return httpx.Client(
        verify=_tls_context(),
        follow_redirects=False,
        cookies=jar,
        # Unbounded: steps and foreach concurrency already bound what is in flight.
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
    )


@contextmanager
def tool_session(
    run_http: httpx.Client, registry: ToolRegistry, tool: str
) -> Iterator[httpx.Client]:
    """The client for one session of calls to ``tool``: the run's cookie-less client,
    or — when the tool declares ``cookies: step`` — a fresh client whose cookie jar
    lives only as long as this session."""
    spec = registry.get(tool)
    if spec is None or spec.http is None or spec.http.cookies != "step":
        yield run_http
        return
    with _client(CookieJar()) as client:
        yield client


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context per process, shared by the runs' own clients.

    Loading the CA bundle costs ~30 ms, more than a Celery step task's own work; a
    context holds no per-run state (cookies and connections stay in each client).
    """
    return httpx.create_ssl_context()
