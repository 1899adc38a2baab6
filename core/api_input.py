"""Guards on what API callers send that DRF takes on trust: pagination cursors and bodies.

Each answers hostile input with an error in the API's shape (``core.api_errors``) instead
of a 500 or Django's HTML page:

- ``CursorPagination``: a cursor is a base64 query string anyone can edit; its position
  must be a value of the ordering field (a number in range for ``id``, a date for
  ``created_at``) before it reaches the database. Newest first by ``id`` unless a list says
  otherwise (DRF's default, ``-created``, is a field most models lack). A ``page_size``
  that is not a whole number from 1 to the list's maximum is a 400 on ``page_size``, as
  the schema says, rather than the default page.
- ``JSONParser`` (the API's only parser) refuses bodies larger than
  ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (413; Django's own limit covers only form bodies, and
  DRF's JSON parser reads without one), and JSON nested deeper than ``MAX_JSON_DEPTH``
  (400; 100,000 opening brackets exhaust the recursion limit of Python's decoder, and deep
  data would later do the same to the encoder).
"""

import io

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, pagination, parsers, status

# Nothing here may import rest_framework.views (nor core.api_errors, which does): DRF's
# views read DEFAULT_PARSER_CLASSES and DEFAULT_PAGINATION_CLASS, i.e. this module, when
# they are first imported.

MAX_JSON_DEPTH = 32


class TooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


class CursorPagination(pagination.CursorPagination):
    """DRF's cursor pagination, refusing (404, as DRF does for an unreadable cursor) a
    cursor whose position is no value of the ordering field."""

    ordering = "-id"

    def get_page_size(self, request):
        name = self.page_size_query_param
        if name and name in request.query_params:
            values = request.query_params.getlist(name)
            top = self.max_page_size or self.page_size
            if len(values) != 1 or not (values[0].isascii() and values[0].isdigit()) \
                    or not 1 <= int(values[0]) <= top:
                raise exceptions.ValidationError({name: [f"A whole number from 1 to {top}, given once."]})
            return int(values[0])
        return self.page_size

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size or self.page_size}
        return parameters

    def paginate_queryset(self, queryset, request, view=None):
        self._model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):
        cursor = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None:
            self._check_position(cursor.position)
        return cursor

    def _check_position(self, position: str) -> None:
        if "\x00" in position:
            raise exceptions.NotFound(self.invalid_cursor_message)
        ordering = (self.ordering,) if isinstance(self.ordering, str) else self.ordering
        name = ordering[0].lstrip("-")
        try:
            field = self._model._meta.pk if name == "pk" else self._model._meta.get_field(name)
        except FieldDoesNotExist:
            return  # an ordering across a relation: nothing of ours to check it against
        try:
            # run_validators includes the column's range for integer fields.
            field.run_validators(field.to_python(position))
        except (DjangoValidationError, ValueError, TypeError, OverflowError):
            raise exceptions.NotFound(self.invalid_cursor_message) from None


def body_limit() -> int | None:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def refuse_large_body(parser_context) -> None:
    """413 when the declared length of the body is over the limit, before reading it."""
    limit = body_limit()
    request = (parser_context or {}).get("request")
    if limit is None or request is None:
        return
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise TooLarge()


def depth(data) -> int:
    """How deeply lists and objects nest in parsed JSON (without recursing)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, level)
            if level > MAX_JSON_DEPTH:
                break
            stack.extend((item, level + 1) for item in value)
    return deepest


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        refuse_large_body(parser_context)
        limit = body_limit()
        if stream is not None and limit is not None:
            raw = stream.read(limit + 1)  # a body without a declared length is cut here
            if len(raw) > limit:
                raise TooLarge()
            stream = io.BytesIO(raw)
        try:
            data = super().parse(stream, media_type, parser_context)
            too_deep = depth(data) > MAX_JSON_DEPTH
        except RecursionError:
            too_deep = True
        if too_deep:
            raise exceptions.ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels.")
        return data
