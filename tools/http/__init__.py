"""The pieces of an http tool call, one concept per module.

``request`` renders the request (URL, query, headers, auth), ``bodies`` the body,
``oauth2`` fetches and caches OAuth2 tokens, ``transport`` sends one request under a
deadline and decodes the body, ``response`` turns an answer into an output or a typed
error, ``pagination`` walks the pages. ``tools.http_client.call_http_tool`` puts them
together.
"""
