"""The headers of an htmx request, for the tests of pages that answer one."""

HTMX = {"HTTP_HX_REQUEST": "true"}


def htmx(target: str | None = None) -> dict:
    """Headers of an htmx request swapping into the element with id ``target``."""
    return {**HTMX, **({"HTTP_HX_TARGET": target} if target else {})}
