"""The parts of an http tool's definition about reading answers: response format,
success condition, pagination, and the ``$status`` / ``$headers.<name>`` extraction paths.

Declarative on purpose: the tools layer evaluates no expressions, so a success
condition is a dot-path and a value (or a list of accepted values), nothing more.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tools.paths import PathError, parse_path

RESPONSE_META = ("$status", "$headers")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def parse_extract_path(text: str) -> tuple[str, ...]:
    """A ``response_extract`` path: a dot-path into the body, or ``$status``, or
    ``$headers.<name>`` (header names are matched case-insensitively). Raises PathError."""
    head, _, rest = text.partition(".")
    if head == "$status":
        if rest:
            raise PathError(f"{text!r}: $status has no fields")
        return ("$status",)
    if head == "$headers":
        if not rest:
            raise PathError(f"{text!r}: name a header, e.g. $headers.link")
        return ("$headers", *(s.lower() for s in parse_path(rest)))
    if head.startswith("$"):
        raise PathError(f"{text!r}: only $status and $headers.<name> start with '$'")
    return parse_path(text)


def _check_path(value: str | None, what: str) -> None:
    if value is None:
        return
    try:
        parse_path(value)
    except PathError as exc:
        raise ValueError(f"{what}: {exc}") from exc


class SuccessCondition(_Frozen):
    """For APIs that answer errors with HTTP 200: the body's ``path`` must equal
    ``equals`` (or be one of ``in``); otherwise the call is a fatal ``http_error``
    whose message quotes the body at ``message`` (a dot-path)."""

    path: str = Field(description="Dot-path in the JSON body, e.g. status.")
    equals: Any = Field(None, description="The value meaning success.")
    in_: list[Any] | None = Field(None, alias="in", description="Values meaning success.")
    message: str | None = Field(None, description="Dot-path of the error message.")

    @model_validator(mode="after")
    def _one_test(self) -> SuccessCondition:
        _check_path(self.path, "success.path")
        _check_path(self.message, "success.message")
        given = ("equals" in self.model_fields_set) + (self.in_ is not None)
        if given != 1:
            raise ValueError("success needs exactly one of 'equals' or 'in'")
        return self

    def accepts(self, value: Any) -> bool:
        return value in self.in_ if self.in_ is not None else value == self.equals


class ResponseConfig(_Frozen):
    """How the body is read. ``auto``: JSON when it parses (text otherwise; but with
    ``response_extract`` a non-JSON body is ``response_invalid``); ``json``: must be
    JSON; ``jsonl``: one JSON value per line → ``{items, count}``; ``text``:
    ``{text}``; ``binary``: ``{base64, content_type, size}``."""

    format: Literal["auto", "json", "jsonl", "text", "binary"] = "auto"
    success: SuccessCondition | None = None


class Pagination(_Frozen):
    """How to fetch every page of a list. ``style``:

    * ``link``: follow ``Link: <…>; rel="next"`` (GitHub) on the same origin;
    * ``cursor``: send the body's ``cursor_path`` value as query ``cursor_param``;
    * ``page``: query ``page_param`` = start, start+1, …;
    * ``offset``: query ``offset_param`` = start + items received so far.

    Each page's list is read at ``items`` (a dot-path in the wrapped page, ``items``
    for a bare JSON list). Pages stop when there is no next link/cursor, a page is
    empty or shorter than the first, or at ``max_pages`` / ``max_items``.
    """

    style: Literal["link", "cursor", "page", "offset"]
    items: str = Field("items", description="Dot-path of the list in one page.")
    cursor_path: str | None = Field(None, description="cursor: dot-path of the next cursor.")
    cursor_param: str | None = Field(None, description="cursor: query parameter to send it in.")
    page_param: str = Field("page", description="page: query parameter.")
    offset_param: str = Field("offset", description="offset: query parameter.")
    start: int | None = Field(None, ge=0, description="First page (1) or offset (0).")
    max_pages: int = Field(10, ge=1, le=1000)
    max_items: int | None = Field(None, ge=1, le=1_000_000)

    @model_validator(mode="after")
    def _style_fields(self) -> Pagination:
        _check_path(self.items, "pagination.items")
        _check_path(self.cursor_path, "pagination.cursor_path")
        if self.style == "cursor" and not (self.cursor_path and self.cursor_param):
            raise ValueError("pagination style 'cursor' needs cursor_path and cursor_param")
        if self.style != "cursor" and (self.cursor_path or self.cursor_param):
            raise ValueError(f"cursor_path/cursor_param do not apply to style {self.style!r}")
        return self

    @property
    def first(self) -> int:
        if self.start is not None:
            return self.start
        return 1 if self.style == "page" else 0
