"""One JSON shape for every API error: ``{"code", "message", "fields"}``.

``code`` is stable and machine-readable (``invalid``, ``not_authenticated``,
``authentication_failed``, ``permission_denied``, ``not_found``, ``conflict``,
``throttled``, ...); ``message`` is a sentence for people; ``fields`` maps a request
field to its messages (empty when the error is not about a field).
"""

from django.core.exceptions import NON_FIELD_ERRORS, RequestDataTooBig
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

from .api_input import TooLarge
from .api_query import refuse_unknown

NON_FIELD = api_settings.NON_FIELD_ERRORS_KEY


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


class Unavailable(exceptions.APIException):
    """Something the platform depends on (the cluster) cannot answer this now."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "Temporarily unavailable."
    default_code = "unavailable"


class ErrorSerializer(serializers.Serializer):
    """The shape of every error response (for the OpenAPI schema)."""

    code = serializers.CharField()
    message = serializers.CharField()
    fields = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    return {"code": code, "message": message, "fields": fields or {}}


def _flatten(detail) -> dict[str, list[str]]:
    """DRF's nested error detail -> ``{"field": ["msg"]}`` (nested fields dotted)."""
    out: dict[str, list[str]] = {}

    def walk(prefix: str, value):
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and value and not all(isinstance(v, str) for v in value):
            for index, inner in enumerate(value):
                if inner:
                    walk(f"{prefix}.{index}" if prefix else str(index), inner)
        else:
            messages = value if isinstance(value, list) else [value]
            out.setdefault(prefix or NON_FIELD, []).extend(str(m) for m in messages)

    walk("", detail)
    return out


def _as_drf(exc):
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD: exc.messages}
        # Model-wide rules (Django's "__all__") are DRF's non-field errors.
        detail = {NON_FIELD if key == NON_FIELD_ERRORS else key: value for key, value in detail.items()}
        return exceptions.ValidationError(detail)
    if isinstance(exc, DjangoPermissionDenied):
        return exceptions.PermissionDenied(str(exc) or None)
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    # Django's own limit, should anything read the body through request.body or POST.
    if isinstance(exc, RequestDataTooBig):
        return TooLarge()
    return exc


def exception_handler(exc, context):
    exc = _as_drf(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a bug: let Django report a 500
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        message = "; ".join(fields.pop(NON_FIELD)) if set(fields) == {NON_FIELD} else "Some fields are invalid."
        body = error_body("invalid", message, fields)
    else:
        detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
        if isinstance(detail, (list, dict)):
            body = error_body(code if isinstance(code, str) else "error", "The request failed.", _flatten(detail))
        else:
            body = error_body(code if isinstance(code, str) else "error", str(detail))
    response.data = body
    return response


@csrf_exempt  # a 404 whatever the method; CSRF would answer an HTML 403 first
def not_found(request, *args, **kwargs):
    """Unknown URLs under ``/api/`` answer in the error shape, not with an HTML page."""
    return JsonResponse(error_body("not_found", f"No API endpoint at {request.path}."), status=404)


# Error responses every operation may give, added to the schema by ``add_error_responses``.
ERROR_DESCRIPTIONS = {
    "400": "Invalid request: see `fields`.",
    "401": "No credentials, or an unknown, expired or revoked token.",
    "403": "Signed in, but not allowed (role, token scope or CSRF).",
    "404": "No such object, or one you may not see.",
    "405": "Method not allowed.",
    "406": "Not acceptable.",
    "413": "The request body is larger than the platform accepts.",
    "415": "Unsupported media type.",
    "429": "Too many requests for this token; retry after `Retry-After` seconds.",
}
# The headers the API sets, as the schema describes them. DRF sets two on the errors above:
# ``Retry-After`` on a 429 (``Throttled.wait``; ours always knows it), ``Allow`` on every
# answer of an API view, a 405 included. The others are found in the views' code
# (``core.api_answers``: the ``Location`` of a 201).
HEADERS = {
    "Location": {"schema": {"type": "string", "format": "uri"}, "description": "Where the new object is read."},
    "Retry-After": {"schema": {"type": "integer", "minimum": 0}, "description": "Seconds to wait before retrying."},
    "Allow": {"schema": {"type": "string"}, "description": "The methods this path takes."},
}
ERROR_HEADERS = {"405": ("Allow",), "429": ("Retry-After",)}


def header(name: str) -> dict:
    return HEADERS.get(name, {"schema": {"type": "string"}})


def add_error_responses(result, generator, request, public):
    """drf-spectacular postprocessing hook: one ``Error`` component, referenced by every
    operation for every error status it can give; and request bodies that say they take no
    field beyond theirs (every serializer that reads a body is ``core.api_fields.StrictFields``)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Error", {
        "type": "object",
        "properties": {
            "code": {"type": "string"},
            "message": {"type": "string"},
            "fields": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        },
        "required": ["code", "message", "fields"],
    })
    ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            for parameter in operation.get("parameters", []):
                _no_nul(parameter.get("schema", {}))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            if "$ref" in body:
                component = schemas[body["$ref"].rsplit("/", 1)[1]]
                component["additionalProperties"] = False
                for field in component.get("properties", {}).values():
                    for inner in (field, field.get("items"), field.get("additionalProperties")):
                        if isinstance(inner, dict):
                            _no_nul(inner)
            _declare_errors(operation.setdefault("responses", {}), ref)
    return result


def _declare_errors(responses: dict, ref: dict) -> None:
    for code, description in ERROR_DESCRIPTIONS.items():
        responses.setdefault(code, {"description": description, **ref})
    for code, names in ERROR_HEADERS.items():
        declared = responses[code].setdefault("headers", {})
        for name in names:
            declared.setdefault(name, header(name))
    # In status order, those the views' code gives (core.api_schema) among these.
    ordered = sorted(responses.items())
    responses.clear()
    responses.update(ordered)


# What PostgreSQL text cannot hold, as the schema says it (see NUL_MESSAGE below).
NO_NUL = "^[^\\u0000]*$"


def _no_nul(schema: dict) -> None:
    """A free-form string (no pattern, format or choices of its own) says it takes no NUL."""
    if schema.get("type") == "string" and not {"pattern", "format", "enum"} & set(schema):
        schema["pattern"] = NO_NUL


def error_response(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


# --- NUL characters ----------------------------------------------------------------------
# PostgreSQL text cannot hold NUL; a lookup with one fails in the database (a 500) instead
# of simply matching nothing. DRF's CharField refuses NUL; these cover the other inputs.
NUL_MESSAGE = "Null characters are not allowed."


class SlugRelatedField(serializers.SlugRelatedField):
    """``SlugRelatedField`` that answers "does not exist" for values with NUL in them, and
    refuses "" (DRF would read it as null: an all-teams token for ``"team": ""``)."""

    default_error_messages = {"blank": "Give a name, or null where the field may be empty."}

    def run_validation(self, data=serializers.empty):
        if data == "":
            self.fail("blank")
        return super().run_validation(data)

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data.replace("\x00", "\\0"))
        return super().to_internal_value(data)


class RefuseNulMixin:
    """For every API view: NUL in a URL part is a 404, in a query parameter a 400; and a query
    parameter the schema does not declare for the operation is a 400 (``core.api_query``)."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if any("\x00" in str(value) for value in kwargs.values()):
            raise exceptions.NotFound()
        bad = sorted({key for key, value in request.query_params.items() if "\x00" in key + value})
        if bad:
            raise exceptions.ValidationError({key.replace("\x00", "\\0"): [NUL_MESSAGE] for key in bad})
        refuse_unknown(request)
