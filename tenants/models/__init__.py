"""The models of the tenants app, one module per object family:

- ``teams``: Team and Membership (a team owns one namespace, named from its slug);
- ``identities``: single sign-on, GroupMapping and OidcIdentity;
- API tokens live in ``tenants.tokens`` (the migrations name its functions there).

Django finds an app's models in ``<app>.models``, so this package imports them; no module
of the app imports back from here (a submodule imports its sibling, ``.teams``).
"""

from ..tokens import ApiToken
from .identities import GroupMapping, OidcIdentity, cluster_user_name
from .teams import (
    DEFAULT_MAX_PRIORITY,
    PRIORITY_BOUND,
    SLUG_MAX_LENGTH,
    SYSTEM_NAMESPACE_PREFIXES,
    SYSTEM_NAMESPACES,
    Membership,
    SystemNamespace,
    Team,
    TeamQuerySet,
    is_system_namespace,
)

__all__ = [
    "DEFAULT_MAX_PRIORITY", "PRIORITY_BOUND", "SLUG_MAX_LENGTH", "SYSTEM_NAMESPACE_PREFIXES",
    "SYSTEM_NAMESPACES", "ApiToken", "GroupMapping", "Membership", "OidcIdentity", "SystemNamespace",
    "Team", "TeamQuerySet", "cluster_user_name", "is_system_namespace",
]
