"""Shared fixtures. Fakes are real servers on loopback (see tests/fakes/)."""

# --- Fake public APIs, run output, management commands (tests/fakes) ---------

import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = REPO_ROOT / "examples"
EXAMPLE_TOOLS_DIR = EXAMPLES_DIR / "tools"

# The base-URL variables the shipped tool files (examples/tools/*.yaml) read,
# and the path the fake serves each API under.
FAKE_API_ENV = {
    "IPAPI_BASE_URL": "",
    "OPEN_METEO_BASE_URL": "",
    "OPEN_METEO_GEOCODING_BASE_URL": "",
    "RESTCOUNTRIES_BASE_URL": "",
    "FRANKFURTER_BASE_URL": "",
    "GITHUB_API_BASE_URL": "",
    "WEBHOOK_URL": "/post",
}
# Credentials the tool files read; unset unless a test sets them.
FAKE_API_SECRETS = ("GITHUB_TOKEN", "WEBHOOK_API_KEY")


@pytest.fixture
def fake_api(monkeypatch):
    """The recording fake of the public APIs, with the tool files pointed at it."""
    from tests.fakes import FakeAPI, install

    fake = FakeAPI().start()
    install(fake)
    for name, path in FAKE_API_ENV.items():
        monkeypatch.setenv(name, fake.url + path)
    for name in FAKE_API_SECRETS:
        monkeypatch.delenv(name, raising=False)
    yield fake
    fake.stop()


@pytest.fixture
def output_dir(settings, tmp_path):
    """A fresh ``settings.FLOWPILOT_OUTPUT_DIR`` for the files a run writes."""
    path = tmp_path / "out"
    path.mkdir()
    settings.FLOWPILOT_OUTPUT_DIR = path
    return path


@pytest.fixture
def example_tools():
    """The shipped tool files loaded into the database (needs a django_db mark)."""
    from tools.services import tools_load_dir

    report = tools_load_dir(directory=EXAMPLE_TOOLS_DIR)
    assert report.ok, report.errors
    return report


# --- Run rows and workflow files, as the run tests read and write them -------------------


def statuses(run) -> dict[str, str]:
    """``{step_id: status}`` of a run's StepResults."""
    return dict(run.step_results.order_by("step_id").values_list("step_id", "status"))


def results_of(run) -> dict:
    """``{step_id: StepResult}`` of a run, in step-id order."""
    return {r.step_id: r for r in run.step_results.order_by("step_id")}


def import_example(name: str, **changes):
    """Store ``examples/<name>.yaml`` (top-level keys replaced by ``changes``) as a version."""
    from workflows.files import read_workflow_file
    from workflows.services import workflow_import

    data = read_workflow_file(EXAMPLES_DIR / f"{name}.yaml")
    data.update(changes)
    workflow, _ = workflow_import(data=data)
    return workflow


def write_flow(tmp_path, data: dict, name: str = "flow.yaml") -> str:
    """Write a workflow definition as a YAML file under ``tmp_path``; return its path."""
    import yaml

    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


@dataclass
class CommandResult:
    """What a user sees from a management command: exit code, stdout, stderr."""

    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


@pytest.fixture
def cli():
    """``cli("runflow", "x.yaml", "--input", "a=1")`` → ``CommandResult``.

    A ``CommandError`` becomes its exit code and ``CommandError: message`` on
    stderr, as ``manage.py`` prints it.
    """
    from django.core.management import call_command
    from django.core.management.base import CommandError

    def run(*args: str) -> CommandResult:
        out, err = io.StringIO(), io.StringIO()
        code = 0
        try:
            call_command(*args, stdout=out, stderr=err)
        except CommandError as exc:
            code = exc.returncode
            err.write(f"CommandError: {exc}\n")
        return CommandResult(code, out.getvalue(), err.getvalue())

    return run


# --- The ops API for control-flow tests (tests/fakes/control.py) --------------

CONTROL_TOOLS_DIR = REPO_ROOT / "tests" / "data" / "tools" / "control"


@pytest.fixture
def control_api(monkeypatch):
    """The fake ops API on loopback, with the control tool files pointed at it."""
    from tests.fakes import FakeAPI
    from tests.fakes.control import install_control

    fake = FakeAPI().start()
    install_control(fake)
    monkeypatch.setenv("CONTROL_API_BASE_URL", fake.url)
    yield fake
    fake.stop()


@pytest.fixture
def control_tools():
    """``tests/data/tools/control`` loaded into the database (needs a django_db mark)."""
    from tools.services import tools_load_dir

    report = tools_load_dir(directory=CONTROL_TOOLS_DIR)
    assert report.ok, report.errors
    return report


# --- Real Celery workers for the Celery driver's tests (tests/celery_support.py) -----


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "celery: needs real Celery workers, Redis and PostgreSQL (never SQLite)"
    )
    _hypothesis_profile(os.environ)


def _hypothesis_profile(environ) -> str:
    """Under ``CI=true`` Hypothesis draws the same examples on every run (``derandomize``)
    and keeps no example database, so a CI run's result depends on the code alone; on a
    person's machine each run explores new examples, and a failure found is replayed
    from ``.hypothesis/`` until it is fixed."""
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, database=None)
    name = "ci" if environ.get("CI", "").lower() in {"1", "true", "yes"} else "default"
    settings.load_profile(name)
    return name


# --- the `slow` mark: what `python -m tests --fast` leaves out -------------------------

# A test using one of these starts processes that each pay a Django start, or a browser:
# real Celery workers and beat, chromium, httpbin under gunicorn, a spawned `mcpserve`.
SLOW_FIXTURES = frozenset({"celery_cluster", "playwright_api", "httpbin", "stdio_env"})


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` every test marked ``celery`` or using a fixture of ``SLOW_FIXTURES``
    (others are marked where they are written: the documented commands, Schemathesis…).

    On a pass told ``FLOWPILOT_TEST_PASS=database`` (the PostgreSQL pass of ``python -m
    tests``, which runs beside a SQLite pass) only the tests that use the database are
    kept: a test with neither a ``django_db`` or ``postgres`` mark nor a database fixture
    cannot reach a database (pytest-django refuses it), so it would only repeat what the
    SQLite pass runs. A test marked ``one_database`` uses a database only as a place to
    keep what it works on (its subject is a protocol, a parser, a clock) and costs many
    seconds: it is left to the SQLite pass too."""
    database_only = os.environ.get("FLOWPILOT_TEST_PASS") == "database"
    kept, left = [], []
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("celery") or SLOW_FIXTURES & uses:
            item.add_marker(pytest.mark.slow)
        if database_only and (
            item.get_closest_marker("one_database") or not _uses_a_database(item, uses)
        ):
            left.append(item)
        else:
            kept.append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "django_db_setup",
        "live_server",
        "admin_client",
        "admin_user",
    }
)


def _uses_a_database(item: pytest.Item, uses: set[str]) -> bool:
    marked = item.get_closest_marker("django_db") or item.get_closest_marker("postgres")
    return bool(marked) or bool(DATABASE_FIXTURES & uses)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test databases, made cheap to write and to empty on PostgreSQL.

    - Each is set to ``synchronous_commit = off``: a commit returns once its WAL is
      written, without waiting for the flush to disk. Every connection (this
      process's, a Celery worker's, a subprocess's) sees it exactly as before; only a
      crash of the PostgreSQL server itself, which no test causes, could lose it. The
      product never does this: its checkpoints stay flushed (docs/benchmarks.md).
    - A transactional test is emptied afterwards by ``DELETE`` instead of Django's one
      ``TRUNCATE`` of every table (:func:`_delete_instead_of_truncate`): TRUNCATE makes
      new files for each of the ~40 tables and their indexes (about a second a test on this
      machine under load), where deleting the few rows a test wrote takes milliseconds."""
    from django.db import connections
    from django.db.backends.postgresql.operations import DatabaseOperations

    with django_db_blocker.unblock():
        for connection in connections.all():
            if connection.vendor != "postgresql":
                continue
            name = connection.ops.quote_name(connection.settings_dict["NAME"])
            with connection.cursor() as cursor:
                cursor.execute(f"ALTER DATABASE {name} SET synchronous_commit TO off")
                cursor.execute("SET synchronous_commit TO off")  # this open connection too
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            DatabaseOperations,
            "sql_flush",
            _delete_instead_of_truncate(DatabaseOperations.sql_flush),
        )
        yield django_db_setup


def _delete_instead_of_truncate(truncate):
    """PostgreSQL's ``sql_flush`` as one ``DELETE`` per table, where it means the same.

    Django's foreign keys are ``DEFERRABLE INITIALLY DEFERRED`` and ``flush`` runs its
    statements in one transaction, so the order of the DELETEs does not matter.
    Restarting sequences, or cascading into tables outside the list, is left to the
    TRUNCATE."""

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        delete = f"{style.SQL_KEYWORD('DELETE')} {style.SQL_KEYWORD('FROM')}"
        return [f"{delete} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]

    return sql_flush


@pytest.fixture(scope="module")
def celery_cluster(request, django_db_setup, tmp_path_factory):
    """Two real workers (``w1``, ``w2``: prefork, concurrency 4) on a queue of their own.

    They use this session's test database and Redis; this process publishes to the
    same queue. On SQLite the tests are skipped; with PostgreSQL or Redis down they
    are skipped, or fail under ``CI=true``.
    """
    from tests.celery_support import start_cluster

    with start_cluster(tmp_path_factory.mktemp("celery")) as cluster:
        yield cluster


@pytest.fixture
def workers(celery_cluster, settings):
    """Both workers up (one an earlier test killed is started again)."""
    from tests.celery_support import WORKER_SETTINGS

    for name, value in WORKER_SETTINGS.items():
        setattr(settings, name, float(value))
    for name in ("w1", "w2"):
        process = celery_cluster.processes.get(name)
        if process is None or not process.alive:
            celery_cluster.start_worker(name)
    return celery_cluster


@pytest.fixture(scope="module")
def echo_fake():
    """A recording loopback server with the routes of the Celery tests' tools."""
    from tests.celery_support import install_echo
    from tests.fakes import FakeAPI

    fake = FakeAPI().start()
    install_echo(fake)
    yield fake
    fake.stop()


@pytest.fixture
def echo_tools(echo_fake):
    """The loopback tools stored, and a clean record of requests (needs a django_db mark)."""
    from tests.celery_support import load_echo_tools

    echo_fake.heal()
    echo_fake.clear()
    load_echo_tools(echo_fake)
    return echo_fake


# --- review and approval (admin, services, browser) ----------------------------------


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashing():
    """Every test hashes passwords with MD5: Django's PBKDF2 costs about half a second of
    CPU per hash here, and every user a factory or ``admin_client`` makes is hashed once.
    The default hashers stay listed after it, so a hash made another way still checks."""
    from django.conf import settings
    from django.test.utils import override_settings

    hashers = ["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]
    with override_settings(PASSWORD_HASHERS=hashers):
        yield


@pytest.fixture(scope="session", autouse=True)
def live_server_sends_whole_answers():
    """pytest-django's ``live_server`` answers through Django's test request handler,
    which writes an answer's headers and body in separate sends: with Nagle's algorithm
    on, each answer then waits for the client's delayed ACK, about 40 ms on loopback
    (Schemathesis' ~1,400 requests took two minutes of it). ``disable_nagle_algorithm``
    is the handler's own switch for this, as the loopback fakes set it."""
    from django.test.testcases import QuietWSGIRequestHandler

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(QuietWSGIRequestHandler, "disable_nagle_algorithm", True)
        yield


@pytest.fixture
def approver(db):
    from tests.factories import UserFactory

    return UserFactory(username="approver", approver=True)


@pytest.fixture
def reviewer(db):
    from tests.factories import UserFactory

    return UserFactory(username="reviewer")


@pytest.fixture
def no_llm(settings, monkeypatch):
    """A fresh installation: the public default endpoint and no key; any client built
    to send fails the test."""
    import openai

    from tools.llm.endpoints import PUBLIC_BASE_URL

    settings.OPENAI_BASE_URL = PUBLIC_BASE_URL
    settings.OPENAI_API_KEY = ""
    settings.FLOWPILOT_PLANNER_ENDPOINT = ""

    def never(*args, **kwargs):
        raise AssertionError("an LLM client was built without a configured LLM")

    monkeypatch.setattr(openai, "OpenAI", never)
    return settings


@pytest.fixture
def planner_llm(settings):
    """The loopback OpenAI-compatible server, with the settings pointed at it."""
    from tests.factories import start_fake_llm

    fake = start_fake_llm(settings)
    yield fake
    fake.stop()


@pytest.fixture
def restore_loggers():
    """``--log-level`` adds stderr handlers to these loggers; put them back afterwards."""
    saved = {}
    for name in ("flowpilot", "httpx"):
        log = logging.getLogger(name)
        saved[name] = (log.level, list(log.handlers), log.propagate)
    yield
    for name, (level, handlers, propagate) in saved.items():
        log = logging.getLogger(name)
        log.setLevel(level)
        log.handlers[:] = handlers
        log.propagate = propagate


@pytest.fixture(autouse=True)
def trigger_sources_read_afresh():
    """Each test's triggers are its own: the process's snapshot of the workflows some
    trigger waits for (triggers/events.py) is read again in each test."""
    from triggers.events import waited_for_forget

    waited_for_forget()
