"""OpenAPI import: an OpenAPI 3.0/3.1 document → http tool YAML files (docs/openapi-import.md).

``document`` reads the document (a file, or a URL on ``FLOWPILOT_OPENAPI_HOSTS``) and
resolves its local ``$ref``; ``generate`` turns each selected operation into a tool
file's mapping, listing every construct it cannot express instead of dropping it.

The package itself holds only what the tool admin needs on every page (who may
import), so the admin does not load the parsing and generating modules until an
import is made.
"""

# Both are needed to import: an import adds tools and may change existing ones.
IMPORT_PERMISSIONS = ("tools.add_tool", "tools.change_tool")
