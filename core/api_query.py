"""A query parameter the API's schema does not declare for an operation is a 400 (issue 52: a
misspelt filter, ``?stat=failed``, answered with the whole list as if it had filtered).

What each operation takes is read from the schema itself, drf-spectacular's generator as
``/api/schema/`` serves it, so the API and its schema cannot disagree: filters, pagination,
ordering and the parameters an action declares (``tail`` of a job's logs). It is generated
once per process, on the first request that carries a query parameter (most carry none).
"""

import functools
import re

from drf_spectacular.generators import SchemaGenerator
from rest_framework import exceptions

Operations = list[tuple[re.Pattern, dict[str, frozenset[str]]]]


@functools.cache
def operations() -> Operations:
    """(path, {method: the query parameters it takes}) for every path of the schema, those
    with fewer variable parts first (``/jobs/dry-run`` before ``/jobs/{id}``)."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    for path, item in schema["paths"].items():
        pattern = re.compile(re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(path)))
        taken = {method.upper(): frozenset(p["name"] for p in operation.get("parameters", []) if p["in"] == "query")
                 for method, operation in item.items() if isinstance(operation, dict)}
        found.append((path.count("{"), pattern, taken))
    return [(pattern, taken) for _, pattern, taken in sorted(found, key=lambda entry: entry[0])]


def taken_by(path: str, method: str) -> frozenset[str] | None:
    """The query parameters of the operation ``method path``; None: the schema has no such
    operation (an OPTIONS request, say), so nothing is refused here."""
    method = "GET" if method == "HEAD" else method
    for pattern, taken in operations():
        if pattern.fullmatch(path):
            return taken.get(method)
    return None


def refuse_unknown(request) -> None:
    """400 in the error shape, on each parameter the operation does not take."""
    if not request.query_params:
        return
    taken = taken_by(request.path_info, request.method)
    unknown = sorted(set(request.query_params) - taken) if taken is not None else []
    if unknown:
        takes = f"it takes {', '.join(sorted(taken))}" if taken else "it takes none"
        raise exceptions.ValidationError({name: [f"Not a query parameter of this operation; {takes}."]
                                          for name in unknown})
