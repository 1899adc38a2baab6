"""What an API operation can answer, read from its code: the statuses it raises or returns
and the headers it sets on them (issue 52: a 409 or a ``Location`` the schema did not list
made generated clients raise).

An operation runs its view's method (a viewset's action) and, for DRF's generic actions,
the hook it calls (``perform_destroy`` for ``destroy``...), and the methods of ours those call
on ``self``. Each is read once (``ast``): ``raise Conflict(...)`` is the exception's
``status_code``; ``Response(..., status=status.HTTP_201_CREATED, headers={"Location": ...})``
is 201 with ``Location``. DRF's and Django's own code is not read: what it answers every
operation may answer, and the schema says so once (``core.api_errors.add_error_responses``).
"""

import ast
import builtins
import functools
import inspect
import textwrap
from dataclasses import dataclass, field

from rest_framework.exceptions import APIException
from rest_framework.response import Response

# The hooks DRF's generic actions call, where a viewset puts what its action does.
HOOKS = {"create": ("perform_create",), "update": ("perform_update",), "partial_update": ("perform_update",),
         "destroy": ("perform_destroy",)}
FRAMEWORKS = ("rest_framework.", "django.", "django_filters.", "drf_spectacular.")


@dataclass
class Answers:
    """Statuses an operation's code gives (with the exception that gives each, if one does)
    and the headers it sets on each."""

    statuses: dict[int, type[APIException] | None] = field(default_factory=dict)
    headers: dict[int, set[str]] = field(default_factory=dict)

    def add(self, other: "Answers") -> None:
        for code, exception in other.statuses.items():
            self.statuses.setdefault(code, exception)
        for code, names in other.headers.items():
            self.headers.setdefault(code, set()).update(names)


def of_operation(view, method: str) -> Answers:
    """What the operation ``method`` of ``view`` (a view instance, its ``action`` set for a
    viewset) can answer."""
    action = getattr(view, "action", None) or method.lower()
    found = Answers()
    for name in ("initial", action, *HOOKS.get(action, ())):
        found.add(_of_method(type(view), name, frozenset()))
    return found


def _of_method(cls, name: str, seen: frozenset) -> Answers:
    found = Answers()
    function = getattr(cls, name, None)
    function = inspect.unwrap(function) if callable(function) else None
    if name in seen or not inspect.isfunction(function) or function.__module__.startswith(FRAMEWORKS):
        return found  # not ours: what DRF answers is declared for every operation
    own, calls = _read(function)
    found.add(own)
    for called in calls:
        found.add(_of_method(cls, called, seen | {name}))
    return found


@functools.cache
def _read(function) -> tuple[Answers, tuple[str, ...]]:
    """The answers one function's own code gives, and the methods it calls on ``self``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    names = {**vars(builtins), **function.__globals__}
    found, calls = Answers(), []
    dicts = {target.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
             for target in node.targets if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = _resolve(node.exc.func if isinstance(node.exc, ast.Call) else node.exc, names)
            if isinstance(raised, type) and issubclass(raised, APIException):
                found.statuses.setdefault(raised.status_code, raised)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == "self":
                calls.append(node.func.attr)
            called = _resolve(node.func, names)
            if isinstance(called, type) and issubclass(called, Response):
                _read_response(node, names, dicts, found)
    return found, tuple(calls)


def _read_response(call: ast.Call, names: dict, dicts: dict, found: Answers) -> None:
    keywords = {keyword.arg: keyword.value for keyword in call.keywords}
    code = _resolve(keywords["status"], names) if "status" in keywords else 200
    if not isinstance(code, int):
        return
    found.statuses.setdefault(code, None)
    headers = keywords.get("headers")
    if isinstance(headers, ast.Name):
        headers = dicts.get(headers.id)
    if isinstance(headers, ast.Dict):
        keys = {key.value for key in headers.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)}
        found.headers.setdefault(code, set()).update(keys)


def _resolve(node, names: dict):
    """The object a name or dotted name in the code stands for (None: not a plain name)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        return getattr(_resolve(node.value, names), node.attr, None)
    return None
