"""OpenAPI import: an OpenAPI 3.0/3.1 document → http tool YAML files (docs/openapi-import.md).

``document`` reads the document (a file, or a URL on ``FLOWPILOT_OPENAPI_HOSTS``) and
resolves its local ``$ref``; ``generate`` turns each selected operation into a tool
file's mapping, listing every construct it cannot express instead of dropping it.
"""
