"""Templates in tool request configs and prompts.

Rules:

* A string that is exactly ``"{{key}}"`` is *type-preserving*: the value is
  returned as it is (a list stays a list; a missing key gives ``None``).
* Any other string with placeholders interpolates them as text: ``None`` → ``""``,
  booleans → ``true``/``false``, dicts and lists → compact JSON.
* A string without placeholders, and any non-string leaf, is returned unchanged.
  Dicts and lists are walked.
* Keys are dotted paths (``{{user.name}}``, ``{{items.0.id}}``) read by the one
  dot-path rule of :mod:`tools.paths` (``-?[0-9]+`` segments index lists).
* ``{{env.NAME}}`` reads the ``env`` mapping (a missing variable renders ``""``);
  ``{{env.NAME:-default}}`` falls back to ``default`` when the variable is unset
  or empty.
* Malformed placeholders (``{{``, ``{{ }}``, unbalanced braces, bad keys) raise
  :class:`~tools.errors.TemplateError` naming the template.

Rendering is bounded (``max_bytes``): before a string is built, the sizes of the
values it would take in are added up (``tools.sizes``, without copying them) with
its literal text, over the whole structure; past the cap :class:`OutputTooLarge` is
raised and nothing is built (``"{{x}}"`` written a thousand times over a large ``x``
never exists in memory).

Rendering knows nothing of secrets: which values are secret is declared by the
tool definition and decided by :mod:`tools.secrets`, not by where a value came from.

Plain regular expressions only; nothing is evaluated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from tools.errors import TemplateError
from tools.paths import PathError, get, parse_path
from tools.sizes import Memo, OutputTooLarge, json_bytes, text_bytes

_TOKEN = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_ENV = re.compile(r"^env\.([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$", re.DOTALL)
_MAX_SHOWN = 200


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One parsed ``{{...}}``: either an env reference or a dotted value path."""

    raw: str
    env_name: str | None = None
    default: str | None = None
    path: tuple[str, ...] = ()

    @property
    def is_env(self) -> bool:
        return self.env_name is not None


def _shown(template: str) -> str:
    text = template if len(template) <= _MAX_SHOWN else template[:_MAX_SHOWN] + "…"
    return repr(text)


def _parse(content: str, template: str) -> Placeholder:
    inner = content.strip()
    env_match = _ENV.match(inner)
    if env_match:
        return Placeholder(raw=inner, env_name=env_match.group(1), default=env_match.group(2))
    try:
        path = parse_path(inner)
    except PathError:
        path = ()
    if not path or path[0] == "env":
        shown = "{{" + content + "}}"
        raise TemplateError(f"malformed placeholder {shown} in template {_shown(template)}")
    return Placeholder(raw=inner, path=path)


def placeholders(template: str) -> list[Placeholder]:
    """Parse and return every placeholder of ``template`` (validating the whole string)."""
    found = [_parse(m.group(1), template) for m in _TOKEN.finditer(template)]
    rest = _TOKEN.sub("", template)
    if "{{" in rest or "}}" in rest:
        raise TemplateError(f"unbalanced '{{{{' or '}}}}' in template {_shown(template)}")
    return found


def iter_strings(template: Any) -> Iterator[str]:
    """Every string leaf (and dict key) of a template structure."""
    if isinstance(template, str):
        yield template
    elif isinstance(template, Mapping):
        for key, value in template.items():
            if isinstance(key, str):
                yield key
            yield from iter_strings(value)
    elif isinstance(template, list | tuple):
        for item in template:
            yield from iter_strings(item)


def to_text(value: Any) -> str:
    """How a value reads inside interpolated text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return str(value)


def _resolve(ph: Placeholder, values: Mapping[str, Any], env: Mapping[str, str]) -> Any:
    if not ph.is_env:
        return get(values, ph.path)
    found = env.get(ph.env_name or "") or ""
    if found:
        return found
    return ph.default if ph.default is not None else ""


class _Room:
    """What a rendering may still build (``max_bytes`` in all); None: unbounded."""

    def __init__(self, max_bytes: int | None) -> None:
        self.cap = max_bytes
        self.used = 0
        self.memo: Memo = {}

    def take(self, template: str, found: list[Any], *, encode: bool) -> None:
        """Count one string's rendering before it is built: its literal text and the
        size of every value it takes in (percent-encoding may triple a value)."""
        if self.cap is None:
            return
        size = len(_TOKEN.sub("", template))  # the literal text around the placeholders
        for value in found:
            each = text_bytes(value) - 2 if isinstance(value, str) else json_bytes(value, self.memo)
            size += each * 3 if encode else each
        self.used += size
        if self.used > self.cap:
            raise OutputTooLarge(
                step="", what="rendered template", size=self.used, cap=self.cap, at_least=True
            )


def _render_string(
    template: str,
    values: Mapping[str, Any],
    env: Mapping[str, str],
    encode: bool,
    room: _Room | None = None,
) -> Any:
    parsed = placeholders(template)
    if not parsed:
        return template
    found = [_resolve(ph, values, env) for ph in parsed]
    if room is not None:
        room.take(template, found, encode=encode)
    first = _TOKEN.match(template)
    if not encode and first is not None and first.end() == len(template):
        return found[0]
    resolved = iter(found)

    def substitute(_match: re.Match[str]) -> str:
        text = to_text(next(resolved))
        return encode_segment(text) if encode else text

    return _TOKEN.sub(substitute, template)


def encode_segment(text: str) -> str:
    """Percent-encode ``text`` so it stays inside one URL path segment.

    ``/ ? # @ :`` and friends are encoded. A value that is exactly ``.`` or ``..``
    is refused: servers may normalise even ``%2E%2E`` back to a step up the path.
    """
    if text in (".", ".."):
        raise TemplateError(
            f"a URL path value may not be `{text}`: it would walk the path (a fatal input error)"
        )
    return quote(text, safe="")


def render(
    template: Any,
    values: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    max_bytes: int | None = None,
) -> Any:
    """Render ``template`` (any JSON-like structure) with ``values`` and ``env``.

    Returns a new structure; the input is not modified. Past ``max_bytes`` in all:
    :class:`OutputTooLarge` (naming no step), before the value is built.
    """
    return _render(template, values, env, _Room(max_bytes))


def _render(template: Any, values: Mapping[str, Any], env: Mapping[str, str], room: _Room) -> Any:
    if isinstance(template, str):
        return _render_string(template, values, env, encode=False, room=room)
    if isinstance(template, Mapping):
        return {
            _render(k, values, env, room): _render(v, values, env, room)
            for k, v in template.items()
        }
    if isinstance(template, list | tuple):
        return [_render(item, values, env, room) for item in template]
    return template


def render_text(
    template: str,
    values: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    max_bytes: int | None = None,
) -> str:
    """Render ``template`` and always return text (``None`` → ``""``)."""
    return to_text(render(template, values, env=env, max_bytes=max_bytes))


def render_url_path(
    template: str,
    values: Mapping[str, Any],
    env: Mapping[str, str],
    max_bytes: int | None = None,
) -> str:
    """Render a URL path (and optional query) template, percent-encoding every value.

    The literal text of the template keeps its meaning (``/``, ``?``, ``&``);
    a substituted value can never add a path segment, a query, a fragment or
    change the host: ``"../admin"`` → ``..%2Fadmin``, ``"@evil"`` → ``%40evil``.
    """
    return str(_render_string(template, values, env, encode=True, room=_Room(max_bytes)))
