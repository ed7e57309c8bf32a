from tools.redaction import MASK, Redactor, is_sensitive_header, redact_headers


def test_scrub_deep_copy_and_longest_first():
    redactor = Redactor()
    redactor.add_secret("secret")
    redactor.add_secret("secret-long-value")
    data = {"a": "x secret-long-value y", "b": ["secret", 1, None], "secret": True}
    out = redactor.scrub(data)
    assert out == {"a": "x *** y", "b": ["***", 1, None], "***": True}
    assert data["a"] == "x secret-long-value y"  # original untouched


def test_short_values_ignored():
    redactor = Redactor(["abc", "", None])
    assert len(redactor) == 0
    assert redactor.scrub_text("abc") == "abc"


def test_url_encoded_variants_masked():
    redactor = Redactor(["p@ss/word+1"])
    assert redactor.scrub_text("?key=p%40ss%2Fword%2B1") == f"?key={MASK}"
    assert redactor.scrub_text("?key=p%40ss%2Fword%2B1&x") == f"?key={MASK}&x"


def test_basic_auth_token_masked():
    redactor = Redactor()
    redactor.add_basic_auth("user", "hunter22")
    assert redactor.scrub_text("Basic dXNlcjpodW50ZXIyMg==") == f"Basic {MASK}"
    assert redactor.scrub_text("hunter22") == MASK


def test_scrub_without_secrets_and_tuples():
    assert Redactor().scrub_text("anything") == "anything"
    redactor = Redactor(["tok3n"])
    assert redactor.scrub(("tok3n", 2)) == ["***", 2]
    assert redactor.scrub_text("") == ""


def test_redact_headers():
    headers = {
        "Authorization": "Bearer x",
        "Proxy-Authorization": "x",
        "Cookie": "a=b",
        "X-API-Key": "k",
        "X-Custom-Token": "t",
        "Api-Key": "k",
        "Accept": "application/json",
        "Idempotency-Key": "run-1:step",
    }
    out = redact_headers(headers)
    assert out["Accept"] == "application/json"
    assert out["Idempotency-Key"] == "run-1:step"
    assert all(out[k] == MASK for k in headers if k not in ("Accept", "Idempotency-Key"))
    assert is_sensitive_header("x-client-secret")
    assert not is_sensitive_header("Content-Type")


def test_concurrent_add_and_scrub():
    import threading

    redactor = Redactor()
    errors = []

    def worker(n):
        try:
            for i in range(40):
                redactor.add_secret(f"secret-{n}-{i}")
                assert redactor.scrub_text(f"x secret-{n}-{i} y") == "x *** y"
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_scrub_masks_by_value_never_by_key_name():
    redactor = Redactor(["hunter22-password"])
    data = {"password": "not-a-secret", "note": "pw hunter22-password", "user": "user"}
    assert redactor.scrub(data) == {"password": "not-a-secret", "note": "pw ***", "user": "user"}


def test_scrub_walks_600_levels_without_recursion_limits():
    deep: object = "tok3n-deep"
    for level in range(600):
        deep = {"l": [deep, level]} if level % 2 else [deep]
    out = Redactor(["tok3n-deep"]).scrub(deep)
    for level in reversed(range(600)):
        out = out["l"][0] if level % 2 else out[0]
    assert out == "***"


def test_a_secret_url_masks_its_path_and_query_wherever_echoed():
    redactor = Redactor()
    redactor.add_secret("https://hooks.example.com/services/T00/B11/XyZsecret?sig=abc123def")
    echoed = "404: no route for POST /services/T00/B11/XyZsecret?sig=abc123def"
    assert redactor.scrub_text(echoed) == "404: no route for POST ***"
    assert redactor.scrub_text("path services/T00/B11/XyZsecret") == "path ***"
    assert redactor.scrub_text("query sig=abc123def") == "query ***"
    # a short path of a secret URL is not itself a secret (it would mask every "/api")
    short = Redactor(["https://api.example.com/v1?key=k"])
    assert short.scrub_text("GET /v1 ok") == "GET /v1 ok"


def test_a_value_holding_a_url_masks_that_url_s_path():
    redactor = Redactor(["endpoint=https://h.example/hooks/abcdef123456 retries=3"])
    assert redactor.scrub_text("POST /hooks/abcdef123456 failed") == "POST *** failed"
