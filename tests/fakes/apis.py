"""Route handlers answering in the real public APIs' response shapes.

Shapes follow the live services (fields trimmed to the ones that matter, same
nesting and types):

===================  ===============================  =====================================
route                path                             service
===================  ===============================  =====================================
``ipapi``            ``/json/{ip}``                   ip-api.com (200 + ``status: fail`` for
                                                      private or invalid addresses)
``weather``          ``/v1/forecast``                 open-meteo (``current_weather=true`` and
                                                      ``current=…`` forms; 400 ``reason``)
``geocoding``        ``/v1/search``                   open-meteo geocoding (no ``results`` key
                                                      when nothing matches)
``restcountries``    ``/v3.1/alpha/{code}``           restcountries v3.1 (a JSON *list*)
``frankfurter``      ``/latest``, ``/v1/latest``      frankfurter (``from``/``to`` or
                                                      ``base``/``symbols``)
``github_repo``      ``/repos/{o}/{r}``               GitHub REST (404 ``Not Found`` body)
``github_*``         ``…/contributors|issues|         GitHub list endpoints (``per_page``,
                     releases|languages``             ``page`` and ``Link`` headers like
                                                      GitHub's), languages is an object
``post``             ``/post``                        httpbin (echoes json, headers, args)
===================  ===============================  =====================================

``install(fake)`` adds them to a ``FakeAPI``; ``fake.data`` (a ``FakeData``) holds
the records they serve, so a test can add a repository or a country.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlencode

from tests.fakes.http import FakeAPI, FakeResponse, RecordedRequest

SEGMENT = r"[^/]+"

IP_RECORDS: dict[str, dict[str, Any]] = {
    "8.8.8.8": {
        "country": "United States", "countryCode": "US", "region": "VA",
        "regionName": "Virginia", "city": "Ashburn", "zip": "20149", "lat": 39.03,
        "lon": -77.5, "timezone": "America/New_York", "isp": "Google LLC",
        "org": "Google Public DNS", "as": "AS15169 Google LLC",
    },
    "81.2.69.142": {
        "country": "United Kingdom", "countryCode": "GB", "region": "ENG",
        "regionName": "England", "city": "London", "zip": "EC2V", "lat": 51.5074,
        "lon": -0.1196, "timezone": "Europe/London", "isp": "Andrews & Arnold Ltd",
        "org": "Andrews & Arnold Ltd", "as": "AS20712 Andrews & Arnold Ltd",
    },
    "85.214.132.117": {
        "country": "Germany", "countryCode": "DE", "region": "BE", "regionName": "Land Berlin",
        "city": "Berlin", "zip": "10115", "lat": 52.5196, "lon": 13.4069,
        "timezone": "Europe/Berlin", "isp": "Strato AG", "org": "Strato AG",
        "as": "AS6724 Strato AG",
    },
}  # fmt: skip

CITIES: list[dict[str, Any]] = [
    {"id": 2950159, "name": "Berlin", "latitude": 52.52437, "longitude": 13.41053,
     "elevation": 74.0, "feature_code": "PPLC", "country_code": "DE", "timezone": "Europe/Berlin",
     "population": 3426354, "country_id": 2921044, "country": "Germany", "admin1": "Land Berlin"},
    {"id": 2988507, "name": "Paris", "latitude": 48.85341, "longitude": 2.3488,
     "elevation": 42.0, "feature_code": "PPLC", "country_code": "FR", "timezone": "Europe/Paris",
     "population": 2138551, "country_id": 3017382, "country": "France",
     "admin1": "Île-de-France"},
    {"id": 1850147, "name": "Tokyo", "latitude": 35.6895, "longitude": 139.69171,
     "elevation": 44.0, "feature_code": "PPLC", "country_code": "JP", "timezone": "Asia/Tokyo",
     "population": 8336599, "country_id": 1861060, "country": "Japan", "admin1": "Tokyo"},
    {"id": 2643743, "name": "London", "latitude": 51.50853, "longitude": -0.12574,
     "elevation": 25.0, "feature_code": "PPLC", "country_code": "GB",
     "timezone": "Europe/London", "population": 8961989, "country_id": 2635167,
     "country": "United Kingdom", "admin1": "England"},
]  # fmt: skip


def _country(
    cca2, cca3, common, official, capital, region, subregion, population, currencies, latlng
) -> dict[str, Any]:
    return {
        "name": {"common": common, "official": official, "nativeName": {}},
        "tld": [f".{cca2.lower()}"],
        "cca2": cca2,
        "ccn3": "000",
        "cca3": cca3,
        "independent": True,
        "status": "officially-assigned",
        "unMember": True,
        "currencies": currencies,
        "capital": [capital],
        "region": region,
        "subregion": subregion,
        "languages": {},
        "latlng": latlng,
        "population": population,
        "timezones": ["UTC"],
        "continents": [region],
        "flag": "",
    }


COUNTRIES: dict[str, dict[str, Any]] = {
    c["cca2"]: c
    for c in (
        _country("US", "USA", "United States", "United States of America", "Washington, D.C.",
                 "Americas", "North America", 329484123,
                 {"USD": {"name": "United States dollar", "symbol": "$"}}, [38.0, -97.0]),
        _country("DE", "DEU", "Germany", "Federal Republic of Germany", "Berlin", "Europe",
                 "Western Europe", 83240525, {"EUR": {"name": "Euro", "symbol": "€"}},
                 [51.0, 9.0]),
        _country("FR", "FRA", "France", "French Republic", "Paris", "Europe", "Western Europe",
                 67391582, {"EUR": {"name": "Euro", "symbol": "€"}}, [46.0, 2.0]),
        _country("JP", "JPN", "Japan", "Japan", "Tokyo", "Asia", "Eastern Asia", 125836021,
                 {"JPY": {"name": "Japanese yen", "symbol": "¥"}}, [36.0, 138.0]),
        _country("GB", "GBR", "United Kingdom",
                 "United Kingdom of Great Britain and Northern Ireland", "London", "Europe",
                 "Northern Europe", 67215293,
                 {"GBP": {"name": "British pound", "symbol": "£"}}, [54.0, -2.0]),
    )
}  # fmt: skip

# Units of each currency for one euro (frankfurter publishes ECB rates against EUR).
EUR_RATES: dict[str, float] = {
    "EUR": 1.0, "USD": 1.0945, "GBP": 0.8604, "JPY": 158.2, "CHF": 0.9312, "AUD": 1.6302,
}  # fmt: skip
RATES_DATE = "2024-01-05"


def _github_repo(owner: str, name: str, **extra: Any) -> dict[str, Any]:
    full = f"{owner}/{name}"
    return {
        "id": 1296269,
        "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5",
        "name": name,
        "full_name": full,
        "private": False,
        "owner": {"login": owner, "id": 1, "type": "Organization"},
        "html_url": f"https://github.com/{full}",
        "description": "Widgets for everyone",
        "fork": False,
        "url": f"https://api.github.com/repos/{full}",
        "created_at": "2011-01-26T19:01:12Z",
        "updated_at": "2024-01-05T10:00:00Z",
        "pushed_at": "2024-01-04T18:30:00Z",
        "homepage": "https://widgets.example",
        "size": 10832,
        "stargazers_count": 1523,
        "watchers_count": 1523,
        "language": "Python",
        "forks_count": 211,
        "open_issues_count": 37,
        "license": {"key": "mit", "name": "MIT License", "spdx_id": "MIT"},
        "topics": ["widgets", "python"],
        "default_branch": "main",
        "subscribers_count": 42,
        **extra,
    }


@dataclass
class GitHubRepo:
    info: dict[str, Any]
    contributors: list[dict[str, Any]]
    issues: list[dict[str, Any]]
    releases: list[dict[str, Any]]
    languages: dict[str, int]


def default_repo(owner: str = "octo-org", name: str = "widgets") -> GitHubRepo:
    contributors = [
        {"login": login, "id": 100 + i, "type": "User", "site_admin": False,
         "contributions": count}
        for i, (login, count) in enumerate(
            [("alice", 812), ("bob", 377), ("carol", 120), ("dave", 45), ("erin", 9)]
        )
    ]  # fmt: skip
    issues = [
        {"id": 9000 + n, "number": n, "title": title, "state": "open",
         "user": {"login": user}, "labels": [{"name": label}] if label else [],
         "comments": comments, "created_at": f"2024-01-0{n}T09:00:00Z",
         **({"pull_request": {"url": f"https://api.github.com/repos/{owner}/{name}/pulls/{n}"}}
            if pr else {})}
        for n, title, user, label, comments, pr in [
            (1, "Widget spins backwards", "bob", "bug", 4, False),
            (2, "Add gadget support", "carol", "enhancement", 1, False),
            (3, "Fix the spin direction", "alice", None, 0, True),
            (4, "Docs: typo in README", "erin", "docs", 2, False),
        ]
    ]  # fmt: skip
    releases = [
        {"id": 700 + i, "tag_name": tag, "name": f"Widgets {tag}", "draft": False,
         "prerelease": pre, "created_at": date, "published_at": date,
         "author": {"login": "alice"}, "html_url": f"https://github.com/{owner}/{name}/releases/{tag}"}
        for i, (tag, pre, date) in enumerate(
            [("v2.1.0", False, "2024-01-02T12:00:00Z"), ("v2.1.0rc1", True, "2023-12-20T12:00:00Z"),
             ("v2.0.0", False, "2023-11-01T12:00:00Z")]
        )
    ]  # fmt: skip
    return GitHubRepo(
        info=_github_repo(owner, name),
        contributors=contributors,
        issues=issues,
        releases=releases,
        languages={"Python": 81234, "HTML": 5120, "Shell": 1024},
    )


@dataclass
class FakeData:
    """The records the fake APIs serve. Tests may change them while the server runs."""

    ips: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(IP_RECORDS))
    caller_ip: str = "8.8.8.8"  # who ip-api thinks is asking, for /json/ without an address
    cities: list[dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(CITIES))
    countries: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(COUNTRIES))
    eur_rates: dict[str, float] = field(default_factory=lambda: dict(EUR_RATES))
    repos: dict[tuple[str, str], GitHubRepo] = field(
        default_factory=lambda: {
            ("octo-org", "widgets"): default_repo(),
            ("django", "django"): default_repo("django", "django"),
        }
    )

    def repo(self, owner: str, name: str) -> GitHubRepo | None:
        return self.repos.get((owner.lower(), name.lower()))


# --- handlers -----------------------------------------------------------------


def _ipapi(data: FakeData, req: RecordedRequest, match: re.Match) -> FakeResponse:
    ip = unquote(match.group("ip") or "") or data.caller_ip
    record = data.ips.get(ip)
    if record is None:
        private = ip.startswith(("10.", "127.", "192.168.")) or ip == "localhost"
        reason = "private range" if private else "invalid query"
        return FakeResponse.json({"status": "fail", "message": reason, "query": ip})
    body = {"status": "success", **record, "query": ip}
    wanted = req.arg("fields")
    if wanted and not wanted.isdigit():
        names = set(wanted.split(","))
        body = {k: v for k, v in body.items() if k in names}
    return FakeResponse.json(body)


def _float(req: RecordedRequest, name: str) -> float | None:
    try:
        return float(req.arg(name) or "")
    except ValueError:
        return None


def current_reading(lat: float, lon: float) -> tuple[float, float, int]:
    """(temperature °C, windspeed km/h, WMO code): stable per place, so tests know them."""
    return round(20 - abs(lat) / 3, 1), round(5 + abs(lon) / 10, 1), 3 if lat > 45 else 1


def _weather(data: FakeData, req: RecordedRequest, match: re.Match) -> FakeResponse:
    lat, lon = _float(req, "latitude"), _float(req, "longitude")
    if lat is None or lon is None or not (-90 <= lat <= 90 and -180 <= lon <= 180):
        reason = "Parameter 'latitude' and 'longitude' must be valid coordinates"
        return FakeResponse.json({"error": True, "reason": reason}, 400)
    temperature, windspeed, weathercode = current_reading(lat, lon)
    body: dict[str, Any] = {
        "latitude": round(lat, 4), "longitude": round(lon, 4), "generationtime_ms": 0.05,
        "utc_offset_seconds": 0, "timezone": "GMT", "timezone_abbreviation": "GMT",
        "elevation": 38.0,
    }  # fmt: skip
    if (req.arg("current_weather") or "").lower() == "true":
        body["current_weather_units"] = {
            "time": "iso8601", "interval": "seconds", "temperature": "°C",
            "windspeed": "km/h", "winddirection": "°", "is_day": "", "weathercode": "wmo code",
        }  # fmt: skip
        body["current_weather"] = {
            "time": "2024-01-05T12:00", "interval": 900, "temperature": temperature,
            "windspeed": windspeed, "winddirection": 250, "is_day": 1,
            "weathercode": weathercode,
        }  # fmt: skip
    if req.arg("current"):
        values = {
            "temperature_2m": temperature, "wind_speed_10m": windspeed,
            "weather_code": weathercode, "relative_humidity_2m": 71, "is_day": 1,
        }  # fmt: skip
        names = [n for n in req.arg("current").split(",") if n]
        body["current_units"] = {"time": "iso8601", "interval": "seconds"}
        body["current"] = {"time": "2024-01-05T12:00", "interval": 900}
        body["current"].update({n: values.get(n) for n in names})
    return FakeResponse.json(body)


def _geocoding(data: FakeData, req: RecordedRequest, match: re.Match) -> FakeResponse:
    name = (req.arg("name") or "").strip().lower()
    body: dict[str, Any] = {"generationtime_ms": 0.7}
    if len(name) < 2:
        return FakeResponse.json(body)
    count = int(req.arg("count") or 10)
    found = [c for c in data.cities if c["name"].lower().startswith(name)][:count]
    if found:
        body["results"] = found
    return FakeResponse.json(body)


def _restcountries(data: FakeData, req: RecordedRequest, match: re.Match) -> FakeResponse:
    code = unquote(match.group("code")).upper()
    for country in data.countries.values():
        if code in (country["cca2"], country["cca3"]):
            return FakeResponse.json([country])
    return FakeResponse.json({"status": 404, "message": "Not Found"}, 404)


def _frankfurter(data: FakeData, req: RecordedRequest, match: re.Match) -> FakeResponse:
    base = (req.arg("from") or req.arg("base") or "EUR").upper()
    wanted = req.arg("to") or req.arg("symbols")
    symbols = [s.upper() for s in wanted.split(",") if s] if wanted else None
    rates = data.eur_rates
    if base not in rates or any(s not in rates for s in symbols or []):
        return FakeResponse.json({"message": "not found"}, 404)
    amount = float(req.arg("amount") or 1)
    targets = symbols if symbols is not None else sorted(rates)
    body = {
        "amount": amount,
        "base": base,
        "date": RATES_DATE,
        "rates": {s: round(amount * rates[s] / rates[base], 5) for s in targets if s != base},
    }
    return FakeResponse.json(body)


_GITHUB_404 = {
    "message": "Not Found",
    "documentation_url": "https://docs.github.com/rest/repos/repos#get-a-repository",
    "status": "404",
}


def _per_page(req: RecordedRequest) -> int:
    try:
        return max(1, min(100, int(req.arg("per_page") or 30)))
    except ValueError:
        return 30


def _github(kind: str):
    def handler(data: FakeData, req: RecordedRequest, match: re.Match) -> FakeResponse:
        repo = data.repo(unquote(match.group("owner")), unquote(match.group("repo")))
        if repo is None:
            return FakeResponse.json(_GITHUB_404, 404)
        headers = {"X-RateLimit-Limit": "5000" if "authorization" in req.headers else "60"}
        if kind == "repo":
            return FakeResponse.json(repo.info, headers=headers)
        if kind == "languages":
            return FakeResponse.json(repo.languages, headers=headers)
        items = getattr(repo, kind)
        if kind == "issues":
            state = req.arg("state") or "open"
            items = [i for i in items if state == "all" or i["state"] == state]
        page, per_page = _page(req), _per_page(req)
        headers.update(_github_links(req, page, last=max(1, -(-len(items) // per_page))))
        return FakeResponse.json(items[(page - 1) * per_page : page * per_page], headers=headers)

    return handler


def _page(req: RecordedRequest) -> int:
    try:
        return max(1, int(req.arg("page") or 1))
    except ValueError:
        return 1


def _github_links(req: RecordedRequest, page: int, *, last: int) -> dict[str, str]:
    """GitHub's ``Link`` header: absolute URLs to the next/last/first/prev pages."""
    base = f"http://{req.headers.get('host', '127.0.0.1')}{req.path}"

    def url(number: int) -> str:
        query = {k: v[-1] for k, v in req.query.items() if k != "page"}
        return f"{base}?{urlencode({**query, 'page': number})}"

    rels = []
    if page < last:
        rels += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
    if page > 1:
        rels += [f'<{url(1)}>; rel="first"', f'<{url(page - 1)}>; rel="prev"']
    return {"Link": ", ".join(rels)} if rels else {}


def _post_sink(fake: FakeAPI):
    def handler(data: FakeData, req: RecordedRequest, match: re.Match) -> FakeResponse:
        text = req.body.decode("utf-8", errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        body = {
            "args": {k: v[-1] for k, v in req.query.items()},
            "data": text,
            "files": {},
            "form": {},
            "headers": {k.title(): v for k, v in req.headers.items()},
            "json": parsed,
            "origin": "127.0.0.1",
            "url": fake.url + req.path,
        }
        return FakeResponse.json(body)

    return handler


def install(fake: FakeAPI, data: FakeData | None = None) -> FakeData:
    """Add every API route to ``fake``; returns the data they serve (also ``fake.data``)."""
    data = data or FakeData()
    fake.data = data  # type: ignore[attr-defined]
    repo = rf"/repos/(?P<owner>{SEGMENT})/(?P<repo>{SEGMENT})"
    table = [
        ("ipapi", "GET", rf"/json(?:/(?P<ip>{SEGMENT})?)?", _ipapi),
        ("weather", "GET", r"/v1/forecast/?", _weather),
        ("geocoding", "GET", r"/v1/search/?", _geocoding),
        ("restcountries", "GET", rf"/v3\.1/alpha/(?P<code>{SEGMENT})", _restcountries),
        ("frankfurter", "GET", r"(?:/v1)?/latest/?", _frankfurter),
        ("github_repo", "GET", repo, _github("repo")),
        ("github_contributors", "GET", repo + "/contributors", _github("contributors")),
        ("github_issues", "GET", repo + "/issues", _github("issues")),
        ("github_releases", "GET", repo + "/releases", _github("releases")),
        ("github_languages", "GET", repo + "/languages", _github("languages")),
        ("post", "POST", r"/post/?", _post_sink(fake)),
    ]
    for name, method, pattern, handler in table:
        fake.route(name, method, pattern, _bind(handler, data))
    return data


def _bind(handler, data: FakeData):
    return lambda req, match: handler(data, req, match)
