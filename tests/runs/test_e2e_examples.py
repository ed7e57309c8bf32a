"""The shipped examples, end to end: ``runflow examples/<x>.yaml --tools examples/tools``.

Named after the feature, not a module: each test spans the command, the engine and the tools.

Every HTTP call goes to the recording fake of the public APIs on loopback
(``fake_api``); the tests assert what the APIs received, every StepResult row,
the run's outputs and what the user reads on stdout.
"""

from __future__ import annotations

import csv
import html
import itertools
import re
from collections import defaultdict
from decimal import Decimal

import pytest

from runs.models import Run
from tests.conftest import EXAMPLE_TOOLS_DIR, EXAMPLES_DIR, results_of
from tests.fakes.apis import CITIES, COUNTRIES, EUR_RATES, IP_RECORDS, current_reading

pytestmark = pytest.mark.django_db(transaction=True)

STEP_LINE = re.compile(r"^  (ok|FAILED|skipped)\s+([a-z][a-z0-9_]*)\b")
PARALLEL_DELAY = 0.3


def run_example(cli, name: str, *inputs: str):
    args = ["runflow", str(EXAMPLES_DIR / f"{name}.yaml"), "--tools", str(EXAMPLE_TOOLS_DIR)]
    for pair in inputs:
        args += ["--input", pair]
    return cli(*args)


def step_lines(result) -> list[tuple[str, str]]:
    return [m.groups() for line in result.lines if (m := STEP_LINE.match(line))]


def assert_all_overlap(requests) -> None:
    for a, b in itertools.combinations(requests, 2):
        assert a.overlaps(b), f"{a.path} and {b.path} were not in flight at the same time"


def assert_user_saw_success(result, run: Run, name: str, steps: int) -> None:
    assert result.code == 0, result.err
    assert result.lines[0] == f"run {run.pk}: {name} v1, {steps} steps"
    assert any(line.startswith(f"run {run.pk} succeeded in ") for line in result.lines)
    assert "outputs: {" in result.out
    assert result.err == ""


# --- geo_weather ----------------------------------------------------------------


def test_geo_weather_locates_then_fetches_weather_and_country_in_parallel(fake_api, cli):
    fake_api.delay("weather", PARALLEL_DELAY)
    fake_api.delay("restcountries", PARALLEL_DELAY)
    ip = "81.2.69.142"
    place = IP_RECORDS[ip]

    result = run_example(cli, "geo_weather", f"ip={ip}")

    run = Run.objects.get()
    assert_user_saw_success(result, run, "geo_weather", 3)
    lines = step_lines(result)
    assert lines[0] == ("ok", "locate")
    assert sorted(lines[1:]) == [("ok", "country"), ("ok", "weather")]

    (locate,) = fake_api.requests("ipapi")
    (weather,) = fake_api.requests("weather")
    (country,) = fake_api.requests("restcountries")
    assert locate.method == "GET"
    assert locate.path == f"/json/{ip}"
    assert weather.query == {
        "latitude": [str(place["lat"])],
        "longitude": [str(place["lon"])],
        "current_weather": ["true"],
    }
    assert country.path == f"/v3.1/alpha/{place['countryCode']}"
    assert locate.received_at < weather.received_at
    assert locate.received_at < country.received_at
    assert weather.overlaps(country)
    assert len(fake_api.requests()) == 3

    temperature, windspeed, code = current_reading(place["lat"], place["lon"])
    steps = results_of(run)
    assert {s: (r.status, r.attempts) for s, r in steps.items()} == {
        "country": ("succeeded", 1),
        "locate": ("succeeded", 1),
        "weather": ("succeeded", 1),
    }
    assert steps["locate"].inputs == {"ip": ip}
    assert steps["locate"].output == {
        "lat": place["lat"],
        "lon": place["lon"],
        "city": "London",
        "country": "United Kingdom",
        "country_code": "GB",
    }
    assert steps["weather"].inputs == {"latitude": place["lat"], "longitude": place["lon"]}
    assert steps["weather"].output == {
        "temperature": temperature,
        "windspeed": windspeed,
        "weathercode": code,
    }
    assert steps["country"].inputs == {"code": "GB"}
    gb = COUNTRIES["GB"]
    assert steps["country"].output == {
        "name": "United Kingdom",
        "capital": "London",
        "population": gb["population"],
        "region": "Europe",
        "currencies": gb["currencies"],
    }
    for step in steps.values():
        assert step.error is None
        assert not step.output_truncated
        assert step.started_at <= step.finished_at
        assert [a["status"] for a in step.attempt_log] == ["succeeded"]

    assert run.status == "succeeded"
    assert run.trigger == "cli"
    assert run.inputs == {"ip": ip}
    assert run.outputs == {
        "city": "London",
        "country": "United Kingdom",
        "capital": "London",
        "population": gb["population"],
        "region": "Europe",
        "latitude": place["lat"],
        "longitude": place["lon"],
        "temperature_c": temperature,
        "windspeed_kmh": windspeed,
        "weathercode": code,
    }


def test_geo_weather_uses_the_declared_default_input(fake_api, cli):
    result = run_example(cli, "geo_weather")

    assert result.code == 0, result.out + result.err
    assert Run.objects.get().inputs == {"ip": "8.8.8.8"}
    assert [r.path for r in fake_api.requests("ipapi")] == ["/json/8.8.8.8"]


# --- github_intel -----------------------------------------------------------------

GITHUB_ROUTES = ("github_contributors", "github_issues", "github_releases", "github_languages")


def expected_summary(fake_api, owner: str, name: str) -> dict:
    repo = fake_api.data.repo(owner, name)
    info = repo.info
    return {
        "repository": info["full_name"],
        "url": info["html_url"],
        "stars": info["stargazers_count"],
        "forks": info["forks_count"],
        "open_issues": info["open_issues_count"],
        "language": info["language"],
        "license": info["license"]["spdx_id"],
        "contributors": len(repo.contributors),
        "top_contributor": repo.contributors[0]["login"],
        "top_contributions": repo.contributors[0]["contributions"],
        "issues_fetched": len(repo.issues),
        "latest_issue": repo.issues[0]["title"],
        "releases": len(repo.releases),
        "latest_release": repo.releases[0]["tag_name"],
        "latest_release_published_at": repo.releases[0]["published_at"],
        "python_bytes": repo.languages["Python"],
    }


@pytest.mark.parametrize("token", ["ghp_fakeTokenForTests123", None], ids=["token", "anonymous"])
def test_github_intel_fans_out_and_posts_a_summary(fake_api, cli, monkeypatch, token):
    if token:
        monkeypatch.setenv("GITHUB_TOKEN", token)
    for route in GITHUB_ROUTES:
        fake_api.delay(route, PARALLEL_DELAY)

    result = run_example(cli, "github_intel", "owner=octo-org", "repo=widgets", "per_page=5")

    run = Run.objects.get()
    assert_user_saw_success(result, run, "github_intel", 6)
    lines = step_lines(result)
    assert lines[0] == ("ok", "repo")
    assert lines[-1] == ("ok", "post")
    assert sorted(s for _, s in lines[1:5]) == ["contributors", "issues", "languages", "releases"]

    (repo,) = fake_api.requests("github_repo")
    fetches = [fake_api.requests(route)[0] for route in GITHUB_ROUTES]
    (post,) = fake_api.requests("post")
    assert len(fake_api.requests()) == 6
    assert repo.path == "/repos/octo-org/widgets"
    assert [r.path for r in fetches] == [
        "/repos/octo-org/widgets/contributors",
        "/repos/octo-org/widgets/issues",
        "/repos/octo-org/widgets/releases",
        "/repos/octo-org/widgets/languages",
    ]
    assert [r.query for r in fetches] == [
        {"per_page": ["5"]},
        {"per_page": ["5"], "state": ["open"]},
        {"per_page": ["5"]},
        {},
    ]
    assert all(r.received_at > repo.received_at for r in fetches)  # the explicit edges
    assert_all_overlap(fetches)
    assert all(post.received_at > r.received_at for r in fetches)
    for request in [repo, *fetches]:
        assert request.headers["accept"] == "application/vnd.github+json"
        assert request.headers["x-github-api-version"] == "2022-11-28"
        if token:
            assert request.headers["authorization"] == f"Bearer {token}"
        else:
            assert "authorization" not in request.headers

    assert post.method == "POST"
    assert post.path == "/post"
    assert post.headers["content-type"] == "application/json"
    assert post.headers["idempotency-key"] == f"{run.uuid}:post"
    assert "authorization" not in post.headers
    assert "x-api-key" not in post.headers
    assert post.json() == expected_summary(fake_api, "octo-org", "widgets")

    steps = results_of(run)
    assert {s: (r.status, r.attempts) for s, r in steps.items()} == dict.fromkeys(
        ("contributors", "issues", "languages", "post", "releases", "repo"), ("succeeded", 1)
    )
    assert steps["repo"].inputs == {"owner": "octo-org", "repo": "widgets"}
    assert steps["issues"].inputs == {
        "owner": "octo-org",
        "repo": "widgets",
        "per_page": 5,
        "state": "open",
    }
    assert steps["post"].inputs == {"payload": expected_summary(fake_api, "octo-org", "widgets")}
    assert steps["repo"].output["stars"] == 1523
    assert steps["contributors"].output["count"] == 5
    assert steps["languages"].output == {"Python": 81234, "HTML": 5120, "Shell": 1024}
    assert steps["post"].output["json"] == expected_summary(fake_api, "octo-org", "widgets")
    assert run.outputs == {
        "repository": "octo-org/widgets",
        "stars": 1523,
        "forks": 211,
        "open_issues": 37,
        "contributors": 5,
        "top_contributor": "alice",
        "latest_release": "v2.1.0",
        "delivered": expected_summary(fake_api, "octo-org", "widgets"),
    }
    if token:
        assert token not in result.out


def test_github_intel_per_page_limits_the_lists_but_collects_every_issue(fake_api, cli):
    result = run_example(cli, "github_intel", "owner=octo-org", "repo=widgets", "per_page=3")

    assert result.code == 0, result.out + result.err
    body = fake_api.requests("post")[0].json()
    assert (body["contributors"], body["releases"]) == (3, 3)
    # github_issues follows GitHub's Link headers: all 4 open issues, in 2 pages of 3.
    assert body["issues_fetched"] == 4
    pages = fake_api.requests("github_issues")
    assert [r.query.get("page") for r in pages] == [None, ["2"]]
    issues = Run.objects.get().step_results.get(step_id="issues")
    assert issues.output["pages"] == 2


# --- travel_briefing -----------------------------------------------------------------


def test_travel_briefing_geocodes_then_fans_out_and_posts(fake_api, cli):
    for route in ("weather", "restcountries", "frankfurter"):
        fake_api.delay(route, PARALLEL_DELAY)

    result = run_example(
        cli,
        "travel_briefing",
        "city=Tokyo",
        "home_currency=EUR",
        "quote_currencies=JPY,USD",
    )

    run = Run.objects.get()
    assert_user_saw_success(result, run, "travel_briefing", 5)
    lines = step_lines(result)
    assert lines[0] == ("ok", "place")
    assert lines[-1] == ("ok", "briefing")

    (geo,) = fake_api.requests("geocoding")
    parallel = [fake_api.requests(r)[0] for r in ("weather", "restcountries", "frankfurter")]
    weather, country, money = parallel
    (post,) = fake_api.requests("post")
    tokyo = next(c for c in CITIES if c["name"] == "Tokyo")
    assert geo.path == "/v1/search"
    assert geo.query == {"name": ["Tokyo"], "count": ["1"]}
    assert weather.query["latitude"] == [str(tokyo["latitude"])]
    assert weather.query["longitude"] == [str(tokyo["longitude"])]
    assert country.path == "/v3.1/alpha/JP"
    assert money.path == "/latest"
    assert money.query == {"from": ["EUR"], "to": ["JPY,USD"]}
    assert all(r.received_at > geo.received_at for r in parallel)
    assert_all_overlap(parallel)

    temperature, windspeed, code = current_reading(tokyo["latitude"], tokyo["longitude"])
    rates = {"JPY": EUR_RATES["JPY"], "USD": EUR_RATES["USD"]}
    briefing = {
        "city": "Tokyo",
        "latitude": tokyo["latitude"],
        "longitude": tokyo["longitude"],
        "country": "Japan",
        "capital": "Tokyo",
        "population": COUNTRIES["JP"]["population"],
        "region": "Asia",
        "currencies": {"JPY": {"name": "Japanese yen", "symbol": "¥"}},
        "weather": {"temperature_c": temperature, "windspeed_kmh": windspeed, "weathercode": code},
        "exchange": {"base": "EUR", "date": "2024-01-05", "rates": rates},
    }
    assert post.json() == briefing
    assert post.headers["idempotency-key"] == f"{run.uuid}:briefing"

    steps = results_of(run)
    assert {s: (r.status, r.attempts) for s, r in steps.items()} == dict.fromkeys(
        ("briefing", "country", "exchange", "place", "weather"), ("succeeded", 1)
    )
    assert steps["exchange"].inputs == {"from": "EUR", "to": "JPY,USD"}
    assert steps["exchange"].output == {"rates": rates, "date": "2024-01-05", "base": "EUR"}
    assert steps["place"].output == {
        "latitude": tokyo["latitude"],
        "longitude": tokyo["longitude"],
        "country_code": "JP",
        "name": "Tokyo",
    }
    assert run.outputs == {
        "city": "Tokyo",
        "country": "Japan",
        "capital": "Tokyo",
        "temperature_c": temperature,
        "weathercode": code,
        "rates": rates,
        "rates_date": "2024-01-05",
        "delivered": briefing,
    }


# --- sales_report (offline) -------------------------------------------------------


def region_totals_from_csv() -> dict[str, Decimal]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    with (EXAMPLES_DIR / "data" / "sales.csv").open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            totals[row["region"]] += Decimal(row["amount"])
    return dict(totals)


def report_table(page: str, heading: str) -> dict[str, list[str]]:
    """The rows (first cell → other cells) of the table under ``<h2>heading</h2>``."""
    section = page.split(f"<h2>{html.escape(heading)}</h2>", 1)[1].split("</section>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>", 1)[1])
    cells = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in rows]
    return {row[0]: row[1:] for row in cells}


def test_sales_report_writes_the_html_report_offline(fake_api, cli, output_dir):
    result = cli("runflow", str(EXAMPLES_DIR / "sales_report.yaml"))

    run = Run.objects.get()
    assert_user_saw_success(result, run, "sales_report", 4)
    assert fake_api.requests() == []  # offline: no HTTP at all
    report = output_dir / "sales_report.html"
    assert report.is_file()
    assert run.outputs["report"] == str(report.resolve())

    expected = region_totals_from_csv()
    page = report.read_text(encoding="utf-8")
    table = report_table(page, "Revenue by region")
    assert set(table) == set(expected)
    for region, total in expected.items():
        shown = table[region][0]
        assert re.fullmatch(r"\d{1,3}(,\d{3})*\.\d{2}", shown), shown  # two decimals
        assert Decimal(shown.replace(",", "")) == total, region
    assert Decimal(str(run.outputs["total_revenue"])) == sum(expected.values())
    # The headline: the run's total revenue, which run wrote it and when; numbers aligned.
    grand = f"{sum(expected.values()):,.2f}"
    assert f'<tr><th>Total revenue</th><td class="num">{grand}</td></tr>' in page
    assert re.search(rf'<p class="meta">run {run.pk} · \d{{4}}-\d\d-\d\d \d\d:\d\d UTC</p>', page)
    assert "<th>Region</th><th class=num>Revenue</th><th class=num>Sales</th>" in page
    with (EXAMPLES_DIR / "data" / "sales.csv").open(encoding="utf-8") as handle:
        assert run.outputs["rows_read"] == sum(1 for _ in handle) - 1
    steps = results_of(run)
    assert {s: r.status for s, r in steps.items()} == dict.fromkeys(
        ("by_region", "load", "report", "top_products"), "succeeded"
    )


def test_sales_report_inputs_choose_the_output_file(fake_api, cli, output_dir):
    result = cli(
        "runflow",
        str(EXAMPLES_DIR / "sales_report.yaml"),
        "--input",
        "report_path=nested/q1.html",
        "--input",
        "top=2",
    )

    assert result.code == 0, result.out + result.err
    page = (output_dir / "nested" / "q1.html").read_text(encoding="utf-8")
    assert len(report_table(page, "Top products by revenue")) == 2
