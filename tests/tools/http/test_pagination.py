"""Pagination against a paginated loopback API: 87 items in pages of 30, every style."""

import pytest

from tests.tools.conftest import Reply, make_spec
from tools.errors import ToolHTTPError, ToolResponseInvalid
from tools.http_client import call_http_tool

ITEMS = [{"id": n} for n in range(1, 88)]
SIZE = 30


def paginated_api(server):
    """GET /link?page=N (Link headers, bare list), /cursor?after=ID ({data, next}),
    /page?page=N and /offset?offset=K ({results})."""

    def handler(req):
        query = dict(req.query)
        if req.path == "/link":
            page = int(query.get("page", 1))
            chunk = ITEMS[(page - 1) * SIZE : page * SIZE]
            last = (len(ITEMS) + SIZE - 1) // SIZE
            links = [f'<{server.url}/link?page={page + 1}>; rel="next"'] if page < last else []
            links.append(f'<{server.url}/link?page={last}>; rel="last"')
            return Reply.json(chunk, Link=", ".join(links))
        if req.path == "/cursor":
            start = int(query.get("after", 0))
            chunk = ITEMS[start : start + SIZE]
            following = start + SIZE if start + SIZE < len(ITEMS) else None
            return Reply.json({"data": chunk, "meta": {"next": following}})
        if req.path == "/page":
            page = int(query["page"])
            return Reply.json({"results": ITEMS[(page - 1) * SIZE : page * SIZE]})
        offset = int(query["offset"])
        return Reply.json({"results": ITEMS[offset : offset + SIZE]})

    server.handler = handler


STYLES = {
    "link": ("/link", {"style": "link"}),
    "cursor": (
        "/cursor",
        {"style": "cursor", "items": "data", "cursor_path": "meta.next", "cursor_param": "after"},
    ),
    "page": ("/page", {"style": "page", "items": "results"}),
    "offset": ("/offset", {"style": "offset", "items": "results"}),
}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_every_style_collects_all_87_items(server, ctx_for, style):
    paginated_api(server)
    url, pagination = STYLES[style]
    spec = make_spec(
        url, extract={"items": "items", "count": "count", "pages": "pages"},
        http_pagination=pagination,
    )  # fmt: skip
    output = call_http_tool(spec, {}, ctx_for()).output
    assert output["items"] == ITEMS
    assert (output["count"], output["pages"]) == (87, 3)
    # page and offset stop at the short third page: no fourth request.
    assert len(server.requests) == 3


@pytest.mark.parametrize("style", sorted(STYLES))
def test_max_items_and_max_pages_stop_early_and_say_there_is_more(server, ctx_for, style):
    paginated_api(server)
    url, pagination = STYLES[style]
    by_items = make_spec(url, http_pagination={**pagination, "max_items": 45})
    output = call_http_tool(by_items, {}, ctx_for()).output
    assert output["items"] == ITEMS[:45]
    assert output["pages"] == 2
    assert output["more"] is True
    by_pages = make_spec(url, http_pagination={**pagination, "max_pages": 1})
    output = call_http_tool(by_pages, {}, ctx_for()).output
    assert (output["count"], output["pages"], output["more"]) == (30, 1, True)


def test_a_next_link_to_another_origin_is_not_followed(server, ctx_for):
    server.reply(Reply.json([{"id": 1}], Link='<http://evil.example/steal?page=2>; rel="next"'))
    spec = make_spec(
        auth={"type": "bearer", "token": "{{env.TOKEN}}"}, http_pagination={"style": "link"}
    )
    with pytest.raises(ToolResponseInvalid, match="another origin"):
        call_http_tool(spec, {}, ctx_for(TOKEN="tok-123456"))
    assert len(server.requests) == 1


def test_api_key_query_credentials_follow_next_links_on_the_same_origin(server, ctx_for):
    paginated_api(server)
    spec = make_spec(
        "/link",
        auth={"type": "api_key", "in": "query", "name": "key", "value": "{{env.KEY}}"},
        http_pagination={"style": "link"},
    )
    assert call_http_tool(spec, {}, ctx_for(KEY="k-123456")).output["count"] == 87
    assert [dict(r.query).get("key") for r in server.requests] == ["k-123456"] * 3


def test_a_page_whose_items_are_not_a_list_is_invalid(server, ctx_for):
    server.reply(Reply.json({"results": {"id": 1}}))
    spec = make_spec(http_pagination={"style": "page", "items": "results"})
    with pytest.raises(ToolResponseInvalid, match="page 1: 'results' is a dict, not a list"):
        call_http_tool(spec, {}, ctx_for())


def test_the_success_condition_is_checked_on_every_page(server, ctx_for):
    def handler(req):
        page = int(dict(req.query)["page"])
        if page == 2:
            return Reply.json({"status": "error", "message": "backend busy", "results": []})
        return Reply.json({"status": "ok", "results": ITEMS[:SIZE]})

    server.handler = handler
    spec = make_spec(
        http_pagination={"style": "page", "items": "results"},
        http_response={"success": {"path": "status", "equals": "ok", "message": "message"}},
    )
    with pytest.raises(ToolHTTPError, match="backend busy"):
        call_http_tool(spec, {}, ctx_for())
    assert len(server.requests) == 2


def test_the_pages_together_are_bounded_by_the_step_cap(server, ctx_for):
    """Each page is small, the pages together pass the step's cap: refused, not collected."""
    from tools.sizes import OutputTooLarge

    paginated_api(server)
    url, pagination = STYLES["page"]
    spec = make_spec(url, http_pagination=pagination)
    with pytest.raises(OutputTooLarge) as caught:
        call_http_tool(spec, {}, ctx_for(max_output_bytes=700))
    assert caught.value.what == "response (2 pages)"
    assert caught.value.cap == 700
    assert len(call_http_tool(spec, {}, ctx_for(max_output_bytes=10_000)).output["items"]) == 87
