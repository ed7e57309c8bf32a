import pytest

from tools.errors import TemplateError
from tools.templating import (
    encode_segment,
    iter_strings,
    placeholders,
    render,
    render_text,
    render_url_path,
    to_text,
)

VALUES = {
    "name": "Ada",
    "tags": ["a", "b"],
    "user": {"name": "Grace", "langs": ["COBOL", "FORTRAN"]},
    "n": 3,
    "flag": True,
    "nothing": None,
}


def test_exact_placeholder_preserves_type():
    assert render("{{tags}}", VALUES, env={}) == ["a", "b"]
    assert render("{{n}}", VALUES, env={}) == 3
    assert render("{{flag}}", VALUES, env={}) is True
    assert render("{{user}}", VALUES, env={}) == VALUES["user"]


def test_missing_key_is_none_when_exact():
    assert render("{{missing}}", VALUES, env={}) is None
    assert render("{{user.missing.deeper}}", VALUES, env={}) is None


def test_interpolation_as_text():
    assert render("Hello {{name}}!", VALUES, env={}) == "Hello Ada!"
    assert render("tags={{tags}}", VALUES, env={}) == 'tags=["a","b"]'
    assert render("u={{user.name}} n={{n}}", VALUES, env={}) == "u=Grace n=3"
    assert render("[{{nothing}}][{{missing}}]", VALUES, env={}) == "[][]"
    assert render("{{flag}}!", VALUES, env={}) == "true!"


def test_no_placeholder_and_non_strings_unchanged():
    assert render("plain {text}", VALUES, env={}) == "plain {text}"
    assert render(42, VALUES, env={}) == 42
    assert render(None, VALUES, env={}) is None


def test_walks_dicts_and_lists_without_mutating():
    template = {"q": "{{name}}", "list": ["{{n}}", {"deep": "x{{user.langs.1}}"}]}
    out = render(template, VALUES, env={})
    assert out == {"q": "Ada", "list": [3, {"deep": "xFORTRAN"}]}
    assert template["list"][0] == "{{n}}"


def test_dotted_paths_index_lists():
    assert render("{{user.langs.0}}", VALUES, env={}) == "COBOL"
    assert render("{{user.langs.9}}", VALUES, env={}) is None
    assert render("{{tags.x}}", VALUES, env={}) is None
    assert render("{{name.first}}", VALUES, env={}) is None


def test_whitespace_inside_braces_allowed():
    assert render("{{ name }}", VALUES, env={}) == "Ada"


def test_env_and_defaults():
    env = {"TOKEN": "s3cret-token", "EMPTY": ""}
    assert render("{{env.TOKEN}}", {}, env=env) == "s3cret-token"
    assert render("{{env.NOPE}}", {}, env=env) == ""
    assert render("{{env.NOPE:-https://a.org}}", {}, env=env) == "https://a.org"
    assert render("{{env.EMPTY:-fallback}}", {}, env=env) == "fallback"
    assert render("{{env.TOKEN:-fallback}}", {}, env=env) == "s3cret-token"
    assert render("{{env.NOPE:-}}", {}, env=env) == ""


@pytest.mark.parametrize(
    "template",
    ["{{", "a }} b", "{{ }}", "{{}}", "x {{name", "{{na me}}", "{{env.}}", "{{env}}", "{{a{b}}"],
)
def test_malformed_templates_raise_naming_the_template(template):
    with pytest.raises(TemplateError) as info:
        render(template, VALUES, env={})
    assert repr(template)[1:-1][:10] in info.value.message


def test_placeholders_parse():
    found = placeholders("{{a.b}} {{env.X:-d:-e}}")
    assert found[0].path == ("a", "b")
    assert found[1].env_name == "X"
    assert found[1].default == "d:-e"
    assert found[1].is_env


def test_long_template_is_shortened_in_errors():
    with pytest.raises(TemplateError) as info:
        render("x" * 500 + "{{", {}, env={})
    assert "…" in info.value.message


def test_url_path_encodes_every_value():
    for hostile, expected in [
        ("../admin", "..%2Fadmin"),
        ("evil.com/x", "evil.com%2Fx"),
        ("a?b#c", "a%3Fb%23c"),
        ("@evil", "%40evil"),
        ("a b", "a%20b"),
    ]:
        assert render_url_path("/repos/{{o}}/x", {"o": hostile}, {}) == f"/repos/{expected}/x"


def test_url_path_refuses_dot_segments():
    for walker in (".", ".."):
        with pytest.raises(TemplateError, match="would walk the path"):
            render_url_path("/repos/{{o}}/x", {"o": walker}, {})


def test_url_path_keeps_template_literals_and_exact_is_text():
    out = render_url_path("/s?q={{q}}&n={{n}}", {"q": "a&b=c", "n": 2}, {})
    assert out == "/s?q=a%26b%3Dc&n=2"
    assert render_url_path("{{n}}", {"n": 5}, {}) == "5"
    assert render_url_path("/x/{{missing}}", {}, {}) == "/x/"


def test_url_path_encodes_env_values_too():
    out = render_url_path("/bot{{env.T}}/send", {}, {"T": "12:ab/c"})
    assert out == "/bot12%3Aab%2Fc/send"


def test_helpers():
    assert to_text({"a": 1}) == '{"a":1}'
    assert to_text(False) == "false"
    assert to_text(1.5) == "1.5"
    assert encode_segment("ü") == "%C3%BC"
    assert list(iter_strings({"k": ["x", 1, {"y": "z"}]})) == ["k", "x", "y", "z"]
    assert render_text("{{missing}}", {}, env={}) == ""
    assert render({"{{name}}": 1}, VALUES, env={}) == {"Ada": 1}


# --- bounded rendering (tools.sizes) ------------------------------------------------------


def test_rendering_past_the_cap_is_refused_before_the_text_is_built():
    from tools.sizes import OutputTooLarge

    big = "x" * 100_000
    template = "{{v}}" * 1000  # would be 100 MB of text
    with pytest.raises(OutputTooLarge) as caught:
        render_text(template, {"v": big}, env={}, max_bytes=1_000_000)
    assert caught.value.what == "rendered template"
    assert caught.value.cap == 1_000_000
    assert caught.value.size > 1_000_000


def test_rendering_counts_the_whole_structure_and_shared_values_each_time():
    from tools.sizes import OutputTooLarge

    rows = [{"id": i} for i in range(1000)]  # ~10 KB as JSON
    body = {f"k{i}": "{{rows}}" for i in range(20)}  # twenty references: ~200 KB
    assert render(body, {"rows": rows}, env={}, max_bytes=1_000_000)["k0"] is rows
    with pytest.raises(OutputTooLarge):
        render(body, {"rows": rows}, env={}, max_bytes=100_000)


def test_rendering_within_the_cap_is_unchanged():
    assert render_text("a {{v}} b", {"v": [1, 2]}, env={}, max_bytes=11) == "a [1,2] b"
    assert render_url_path("/x/{{v}}", {"v": "a/b"}, {}, max_bytes=100) == "/x/a%2Fb"
