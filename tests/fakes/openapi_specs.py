"""Deterministic OpenAPI documents of the size and shape of two large published ones.

``stripe_like()``: OpenAPI 3.0, about 4 MB of JSON, 500 paths and 600 operations over
1,000 component schemas that refer to each other densely (cycles included, as an
object's expandable fields do), ``anyOf`` with ``x-expansionResources``,
``x-expandableFields``, and request bodies that are ``application/x-www-form-urlencoded``
inline schemas nested a few levels deep.

``github_like()``: OpenAPI 3.0.3, about 13 MB, 650 paths and 900 operations under 45
tags, parameters, responses, headers and (large) examples shared through ``$ref``,
JSON request bodies, a few other media types, ``x-github`` extensions.

The same seed gives the same document byte for byte, so the tests and the benchmark
import the same thing without shipping megabytes. ``write_spec`` writes one as JSON.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

WORDS = (
    "account", "balance", "card", "charge", "coupon", "customer", "dispute", "event", "file",
    "invoice", "item", "line", "mandate", "payment", "method", "intent", "payout", "plan",
    "price", "product", "promotion", "quote", "refund", "review", "session", "setup", "source",
    "subscription", "schedule", "tax", "rate", "terminal", "reader", "token", "topup",
    "transfer", "report", "run", "radar", "rule", "issuing", "cardholder", "authorization",
    "transaction", "treasury", "financial", "connection", "climate", "order", "identity",
    "verification", "application", "fee", "country", "spec", "credit", "note", "discount",
    "ephemeral", "key", "exchange", "link", "shipping", "webhook", "endpoint", "billing",
    "portal", "configuration", "checkout", "sigma", "scheduled", "query", "apps", "secret",
    "test", "clock", "entitlement", "feature", "forwarding", "request",
)


def _name(rng: random.Random, parts: int) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(parts))


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


# --------------------------------------------------------------------------- Stripe


def stripe_like(seed: int = 25) -> dict[str, Any]:
    """A Stripe-sized OpenAPI 3.0 document (see the module docstring)."""
    rng = random.Random(seed)
    names: list[str] = []
    while len(names) < 1000:
        name = _name(rng, rng.choice((1, 2, 2, 3)))
        if name not in names:
            names.append(name)
    schemas = {name: _stripe_schema(rng, name, names) for name in names}
    schemas["error"] = {
        "description": "An error response from the API.",
        "properties": {"error": {"$ref": "#/components/schemas/api_errors"}},
        "required": ["error"],
        "type": "object",
    }
    schemas["api_errors"] = {
        "properties": {
            "code": {"maxLength": 5000, "type": "string"},
            "message": {"maxLength": 40000, "type": "string"},
            "param": {"maxLength": 5000, "type": "string"},
            "type": {"enum": ["api_error", "card_error", "invalid_request_error"],
                     "type": "string"},
        },
        "required": ["type"],
        "type": "object",
    }
    paths: dict[str, Any] = {}
    for i in range(500):
        resource = names[i % 200]
        if i < 200:
            path = f"/v1/{resource}s"
        elif i < 400:
            path = f"/v1/{resource}s/{{{resource}}}"
        else:
            path = f"/v1/{resource}s/{{{resource}}}/{_name(rng, 1)}_{i}"
        methods = ("get", "post") if i % 5 == 0 else (("get",) if i % 2 else ("post",))
        paths[path] = {
            method: _stripe_operation(rng, method, path, resource, names) for method in methods
        }
    return {
        "openapi": "3.0.0",
        "info": {
            "title": "Stripe API",
            "version": "2024-06-20",
            "description": "The Stripe REST API. Please see the reference for more details.",
        },
        "servers": [{"url": "https://api.stripe.com/"}],
        "security": [{"basicAuth": []}, {"bearerAuth": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "basicAuth": {"scheme": "basic", "type": "http"},
                "bearerAuth": {"bearerFormat": "auth-scheme", "scheme": "bearer", "type": "http"},
            },
        },
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _stripe_schema(rng: random.Random, name: str, names: list[str]) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "id": {"description": "Unique identifier for the object.", "maxLength": 5000,
               "type": "string"},
        "object": {"description": "String representing the object's type.", "enum": [name],
                   "type": "string"},
    }  # fmt: skip
    expandable = []
    for _ in range(rng.randint(2, 6)):
        prop = _name(rng, rng.choice((1, 2)))
        kind = rng.random()
        target = rng.choice(names)
        if kind < 0.25:
            expandable.append(prop)
            properties[prop] = {
                "anyOf": [{"maxLength": 5000, "type": "string"}, _ref(target)],
                "description": _sentence(rng, 6),
                "nullable": True,
                "x-expansionResources": {"oneOf": [_ref(target)]},
            }
        elif kind < 0.40:
            properties[prop] = {
                "anyOf": [_ref(target)],
                "description": _sentence(rng, 8),
                "nullable": True,
            }
        elif kind < 0.50:
            properties[prop] = {"description": _sentence(rng, 6), "items": _ref(target),
                                "type": "array"}  # fmt: skip
        elif kind < 0.60:
            properties[prop] = {
                "additionalProperties": {"maxLength": 500, "type": "string"},
                "description": "Set of key-value pairs that you can attach to an object.",
                "type": "object",
            }
        else:
            properties[prop] = _scalar(rng)
    return {
        "description": _sentence(rng, 12),
        "properties": properties,
        "required": sorted(properties)[:3],
        "title": name.replace("_", " ").title(),
        "type": "object",
        "x-expandableFields": expandable,
        "x-resourceId": name,
    }


def _scalar(rng: random.Random) -> dict[str, Any]:
    kind = rng.random()
    if kind < 0.4:
        return {"description": _sentence(rng, 12), "maxLength": 5000, "nullable": kind < 0.2,
                "type": "string"}  # fmt: skip
    if kind < 0.6:
        return {"description": _sentence(rng, 8), "type": "integer", "format": "unix-time"}
    if kind < 0.8:
        return {"description": _sentence(rng, 8), "type": "boolean"}
    return {"description": _sentence(rng, 8), "enum": [_name(rng, 1) for _ in range(4)],
            "type": "string"}  # fmt: skip


def _form_object(rng: random.Random, depth: int) -> dict[str, Any]:
    """An inline form-encoded object, as Stripe writes its request bodies."""
    properties: dict[str, Any] = {}
    for _ in range(rng.randint(2, 5)):
        prop = _name(rng, rng.choice((1, 2)))
        kind = rng.random()
        if depth > 0 and kind < 0.2:
            inner = _form_object(rng, depth - 1)
            inner["title"] = f"{prop}_params"
            properties[prop] = {"anyOf": [inner, {"enum": [""], "type": "string"}]}
        elif depth > 0 and kind < 0.25:
            properties[prop] = {"items": _form_object(rng, depth - 1), "type": "array"}
        elif kind < 0.5:
            properties[prop] = {"additionalProperties": {"type": "string"}, "type": "object"}
        else:
            properties[prop] = {"maxLength": 5000, "type": "string"}
    return {"properties": properties, "type": "object"}


def _stripe_operation(
    rng: random.Random, method: str, path: str, resource: str, names: list[str]
) -> dict[str, Any]:
    op_id = method.capitalize() + "".join(
        part.strip("{}").title().replace("_", "") for part in path.split("/")[1:]
    )
    parameters: list[dict[str, Any]] = [
        {"in": "path", "name": part.strip("{}"), "required": True,
         "schema": {"maxLength": 5000, "type": "string"}, "style": "simple"}
        for part in path.split("/") if part.startswith("{")
    ]  # fmt: skip
    operation: dict[str, Any] = {
        "description": f"<p>{_sentence(rng, 15)}</p>",
        "operationId": op_id,
        "summary": _sentence(rng, 5),
    }
    if method == "get":
        parameters += [
            {"description": "Specifies which fields in the response should be expanded.",
             "explode": True, "in": "query", "name": "expand", "required": False,
             "schema": {"items": {"maxLength": 5000, "type": "string"}, "type": "array"},
             "style": "deepObject"},
            {"description": "A limit on the number of objects to be returned.",
             "in": "query", "name": "limit", "required": False,
             "schema": {"type": "integer"}, "style": "form"},
            {"description": "A cursor for use in pagination.", "in": "query",
             "name": "starting_after", "required": False,
             "schema": {"maxLength": 5000, "type": "string"}, "style": "form"},
            {"description": "Only return objects created in this range.", "explode": True,
             "in": "query", "name": "created", "required": False,
             "schema": {"anyOf": [
                 {"properties": {k: {"type": "integer"} for k in ("gt", "gte", "lt", "lte")},
                  "title": "range_query_specs", "type": "object"},
                 {"type": "integer"}]},
             "style": "deepObject"},
        ]  # fmt: skip
        operation["requestBody"] = {
            "content": {"application/x-www-form-urlencoded": {
                "encoding": {}, "schema": {"additionalProperties": False, "properties": {},
                                           "type": "object"}}},
            "required": False,
        }  # fmt: skip
        ok: dict[str, Any] = {
            "description": "",
            "properties": {
                "data": {"items": _ref(resource), "type": "array"},
                "has_more": {"description": "True if this list has another page.",
                             "type": "boolean"},
                "object": {"enum": ["list"], "type": "string"},
                "url": {"maxLength": 5000, "pattern": f"^{path}", "type": "string"},
            },
            "required": ["data", "has_more", "object", "url"],
            "title": f"{resource}_list",
            "type": "object",
        }  # fmt: skip
        if "{" in path:
            ok = _ref(resource)
    else:
        body = _form_object(rng, 2)
        body["properties"]["expand"] = {
            "description": "Specifies which fields in the response should be expanded.",
            "items": {"maxLength": 5000, "type": "string"}, "type": "array"}  # fmt: skip
        body["properties"]["metadata"] = {"anyOf": [
            {"additionalProperties": {"type": "string"}, "type": "object"},
            {"enum": [""], "type": "string"}]}  # fmt: skip
        body["additionalProperties"] = False
        operation["requestBody"] = {
            "content": {"application/x-www-form-urlencoded": {
                "encoding": {p: {"explode": True, "style": "deepObject"}
                             for p in sorted(body["properties"])},
                "schema": body}},
            "required": False,
        }  # fmt: skip
        ok = _ref(resource)
    operation["parameters"] = parameters
    operation["responses"] = {
        "200": {"content": {"application/json": {"schema": ok}},
                "description": "Successful response."},
        "default": {"content": {"application/json": {"schema": _ref("error")}},
                    "description": "Error response."},
    }  # fmt: skip
    return operation


# --------------------------------------------------------------------------- GitHub


def github_like(seed: int = 25) -> dict[str, Any]:
    """A GitHub-sized OpenAPI 3.0.3 document (see the module docstring)."""
    rng = random.Random(seed)
    tags = [f"{word}s" for word in WORDS[:45]]
    schema_names = [f"{_name(rng, 2).replace('_', '-')}-{i}" for i in range(700)]
    # The last 50 are plain objects: request bodies refer to those, as GitHub's do.
    schemas = {
        name: _github_schema(rng, schema_names[:650], leaf=i >= 650)
        for i, name in enumerate(schema_names)
    }
    schemas["basic-error"] = {
        "title": "Basic Error",
        "type": "object",
        "properties": {k: {"type": "string"} for k in ("message", "documentation_url", "url")},
    }
    parameters = {
        "owner": {"name": "owner", "description": "The account owner of the repository.",
                  "in": "path", "required": True, "schema": {"type": "string"}},
        "repo": {"name": "repo", "description": "The name of the repository.", "in": "path",
                 "required": True, "schema": {"type": "string"}},
        "per-page": {"name": "per_page", "description": "The number of results per page.",
                     "in": "query", "schema": {"type": "integer", "default": 30}},
        "page": {"name": "page", "description": "The page number of the results to fetch.",
                 "in": "query", "schema": {"type": "integer", "default": 1}},
    }  # fmt: skip
    for i in range(150):
        name = f"{_name(rng, 2).replace('_', '-')}-{i}"
        parameters[name] = {
            "name": name.replace("-", "_"), "description": _sentence(rng, 14), "in": "query",
            "required": False, "schema": _scalar(rng)}  # fmt: skip
    examples = {
        f"{name}-example": {"value": _example(rng, 4)} for name in schema_names[:650]
    } | {f"{name}-items": {"value": [_example(rng, 3) for _ in range(4)]}
         for name in schema_names[:650]}  # fmt: skip
    responses = {
        "not_found": {"description": "Resource not found", "content": {"application/json": {
            "schema": _ref("basic-error")}}},
        "forbidden": {"description": "Forbidden", "content": {"application/json": {
            "schema": _ref("basic-error")}}},
        "validation_failed": {"description": "Validation failed", "content": {
            "application/json": {"schema": _ref("basic-error")}}},
        "not_modified": {"description": "Not modified"},
    }  # fmt: skip
    paths: dict[str, Any] = {}
    count = 0
    for i in range(650):
        tag = tags[i % len(tags)]
        base = "/repos/{owner}/{repo}" if i % 3 else f"/{tag}"
        path = f"{base}/{tag}/{_name(rng, 1)}-{i}" + ("/{id}" if i % 4 == 0 else "")
        methods = ["get"] + (["post"] if i % 2 == 0 else []) + (["delete"] if i % 7 == 0 else [])
        methods += ["patch"] if i % 9 == 0 and count < 900 else []
        paths[path] = {}
        for method in methods:
            if count == 900:
                break
            paths[path][method] = _github_operation(
                rng, method, path, tag, schema_names, list(parameters)
            )
            count += 1
    return {
        "openapi": "3.0.3",
        "info": {"title": "GitHub v3 REST API", "version": "1.1.4",
                 "description": "GitHub's v3 REST API."},
        "tags": [{"name": tag, "description": _sentence(rng, 8)} for tag in tags],
        "servers": [{"url": "https://api.github.com"}],
        "security": [{"bearerAuth": []}],
        "externalDocs": {"description": "GitHub v3 REST API", "url": "https://docs.github.com"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "parameters": parameters,
            "responses": responses,
            "headers": {"link": {"example": '<https://api.github.com/x?page=2>; rel="next"',
                                 "schema": {"type": "string"}}},
            "examples": examples,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }  # fmt: skip


def _github_schema(rng: random.Random, names: list[str], *, leaf: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "id": {"type": "integer", "example": 42},
        "node_id": {"type": "string", "example": "MDQ6VXNlcjE="},
        "url": {"type": "string", "format": "uri", "example": "https://api.github.com/x/1"},
    }
    for _ in range(rng.randint(5, 20)):
        prop = _name(rng, rng.choice((1, 2)))
        kind = 1.0 if leaf else rng.random()
        if kind < 0.2:
            properties[prop] = {"$ref": f"#/components/schemas/{rng.choice(names)}"}
        elif kind < 0.3:
            properties[prop] = {"type": "array",
                                "items": {"$ref": f"#/components/schemas/{rng.choice(names)}"}}
        elif kind < 0.35:
            properties[prop] = {"allOf": [{"$ref": f"#/components/schemas/{rng.choice(names)}"}],
                                "nullable": True}  # fmt: skip
        else:
            properties[prop] = _scalar(rng) | {"example": _name(rng, 2)}
    return {"title": _sentence(rng, 3), "description": _sentence(rng, 16), "type": "object",
            "properties": properties, "required": sorted(properties)[:4]}  # fmt: skip


def _example(rng: random.Random, depth: int) -> Any:
    value: dict[str, Any] = {}
    for _ in range(rng.randint(5, 10)):
        key = _name(rng, rng.choice((1, 2)))
        kind = rng.random()
        if depth > 0 and kind < 0.15:
            value[key] = _example(rng, depth - 1)
        elif kind < 0.45:
            value[key] = f"https://api.github.com/{_name(rng, 2).replace('_', '/')}"
        elif kind < 0.65:
            value[key] = rng.randint(1, 10**9)
        elif kind < 0.75:
            value[key] = rng.random() < 0.5
        else:
            value[key] = _sentence(rng, rng.randint(2, 12))
    return value


def _github_operation(
    rng: random.Random, method: str, path: str, tag: str, schemas: list[str], params: list[str]
) -> dict[str, Any]:
    target, leaf = rng.choice(schemas[:650]), rng.choice(schemas[650:])
    parameters: list[dict[str, Any]] = []
    if path.startswith("/repos/"):
        parameters += [{"$ref": "#/components/parameters/owner"},
                       {"$ref": "#/components/parameters/repo"}]  # fmt: skip
    if "{id}" in path:
        parameters.append({"name": "id", "in": "path", "required": True,
                           "description": "The unique identifier.",
                           "schema": {"type": "integer"}})  # fmt: skip
    operation: dict[str, Any] = {
        "summary": _sentence(rng, 5),
        "description": _sentence(rng, rng.randint(20, 80)),
        "tags": [tag],
        "operationId": f"{tag}/{method}-{path.rsplit('/', 2)[-2 if '{id}' in path else -1]}",
        "externalDocs": {"description": "API method documentation",
                         "url": f"https://docs.github.com/rest/{tag}#{method}"},
    }  # fmt: skip
    if method == "get":
        parameters += [{"$ref": "#/components/parameters/per-page"},
                       {"$ref": "#/components/parameters/page"}]  # fmt: skip
        parameters += [
            {"$ref": f"#/components/parameters/{name}"}
            for name in rng.sample(params[4:], rng.randint(0, 3))
        ]
        many = "{id}" not in path
        schema = {"type": "array", "items": _ref(target)} if many else _ref(target)
        example = f"#/components/examples/{target}-{'items' if many else 'example'}"
        operation["responses"] = {
            "200": {"description": "Response", "content": {"application/json": {
                "schema": schema, "examples": {"default": {"$ref": example}}}},
                "headers": {"Link": {"$ref": "#/components/headers/link"}}},
            "304": {"$ref": "#/components/responses/not_modified"},
            "404": {"$ref": "#/components/responses/not_found"},
        }  # fmt: skip
    else:
        if method in ("post", "patch"):
            kind = rng.random()
            media = ("application/json" if kind < 0.92 else
                     "application/octet-stream" if kind < 0.96 else "text/plain")  # fmt: skip
            body = {
                "type": "object",
                "properties": {
                    _name(rng, 1): (_scalar(rng) if rng.random() < 0.8 else _ref(leaf))
                    for _ in range(rng.randint(1, 8))
                },
            }
            operation["requestBody"] = {"required": True, "content": {media: {
                "schema": body, "examples": {"default": {"value": _example(rng, 1)}}}}}  # fmt: skip
        operation["responses"] = {
            "201" if method == "post" else "200": {
                "description": "Response", "content": {"application/json": {
                    "schema": _ref(target),
                    "examples": {"default": {"$ref": f"#/components/examples/{target}-example"}},
                }}},
            "403": {"$ref": "#/components/responses/forbidden"},
            "422": {"$ref": "#/components/responses/validation_failed"},
        }  # fmt: skip
    operation["parameters"] = parameters
    operation["x-github"] = {"githubCloudOnly": False, "enabledForGitHubApps": True,
                             "category": tag, "subcategory": method}  # fmt: skip
    return operation


SPECS = {"stripe": stripe_like, "github": github_like}


def write_spec(kind: str, path: Path) -> Path:
    """Write the ``kind`` (``stripe`` or ``github``) document to ``path`` as indented JSON,
    as both vendors publish theirs."""
    path.write_text(json.dumps(SPECS[kind](), indent=2), encoding="utf-8")
    return path
