"""The pages of the site, each with the person who uses it and its arguments from the demo-like
data (`every_page`, tests/fixtures/demo.py), for the tests that look at every page: unique ids
(tests/web/test_page_ids.py) and axe-core in the browser (tests/web/test_accessibility.py).
Every URL of the site is one of them or named below as something else (test_page_ids holds
that), so a new page is checked from the start."""

from django.urls import URLPattern, URLResolver, get_resolver, reverse

from notifications.messages import unsubscribe_token
from notifications.models import Kind

# url name -> (who sees it, its arguments from the data); None: signed out
PAGES = {
    "dashboard": ("alice", lambda d: []),
    "login": (None, lambda d: []),
    "accounts:tokens": ("alice", lambda d: []),
    "accounts:group-mappings": ("quinn", lambda d: []),
    "accounts:access": ("alice", lambda d: ["vision"]),
    "jobs:list": ("alice", lambda d: []),
    "jobs:submit": ("alice", lambda d: []),
    "jobs:detail": ("alice", lambda d: [d["running"].pk]),
    "jobs:pods": ("alice", lambda d: [d["running"].pk]),
    "jobs:gpus": ("alice", lambda d: [d["running"].pk]),
    "jobs:logs": ("alice", lambda d: [d["running"].pk]),
    "notifications:preferences": ("alice", lambda d: []),
    "notifications:unsubscribe": (None, lambda d: [unsubscribe_token(d["people"]["alice"], Kind.JOB_FAILED)]),
    "notifications:webhooks": ("alice", lambda d: ["vision"]),
    "notifications:webhook": ("alice", lambda d: ["vision", d["hook"].pk]),
    "console:team": ("alice", lambda d: ["vision"]),
    "console:grant": ("bob", lambda d: ["nlp", d["grant"].pk]),
    "console:quotas": ("quinn", lambda d: []),
    "console:usage": ("quinn", lambda d: []),
    "console:capacity": ("quinn", lambda d: []),
    "console:requests": ("quinn", lambda d: []),
    "console:request": ("quinn", lambda d: [d["pending"].pk]),
    "console:grants": ("quinn", lambda d: []),
    "console:drains": ("quinn", lambda d: []),
    "console:drain": ("quinn", lambda d: [d["drain"].pk]),
    "console:history": ("quinn", lambda d: []),
    "console:eta-accuracy": ("quinn", lambda d: []),
    "console:object-history": ("quinn", lambda d: ["team", d["vision"].pk]),
}
# The job page's panels, loaded into it by htmx: checked alone, not as pages of their own.
PANELS = {"jobs:pods", "jobs:gpus", "jobs:logs"}
POSTS = {
    "logout", "accounts:token-revoke", "accounts:group-mapping-delete", "jobs:preview", "jobs:cancel", "jobs:stop",
    "jobs:start", "jobs:exempt_idle", "jobs:submit_draft", "notifications:webhook-delete",
    "notifications:webhook-ping", "notifications:webhook-rotate", "notifications:delivery-resend",
    "console:member-add", "console:member-remove", "console:cap-set", "console:cap-remove", "console:volume-create",
    "console:volume-delete", "console:grant-renew", "console:request-create", "console:approve", "console:deny",
    "console:grant-end", "console:drain-end",
}
NOT_PAGES = {
    "jobs:log_download", "console:usage-csv",  # text and CSV downloads
    "oidc_authentication_callback", "oidc_authentication_init", "oidc_logout",  # redirects to the IdP
    "mcp",  # the agents' endpoint: JSON-RPC over POST (docs/mcp.md)
}
ELSEWHERE = ("admin", "api")  # Django's admin, and the API (JSON; its docs page is Swagger UI's)


def path_of(name: str, data: dict) -> str:
    return reverse(name, args=PAGES[name][1](data))


def url_names(patterns=None, namespace="") -> set[str]:
    """Every named URL of the site outside the admin and the API, namespaced."""
    names = set()
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            inner = ":".join(filter(None, [namespace, pattern.namespace]))
            if inner.split(":")[0] not in ELSEWHERE and not str(pattern.pattern).startswith(ELSEWHERE):
                names |= url_names(pattern.url_patterns, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            names.add(":".join(filter(None, [namespace, pattern.name])))
    return names
