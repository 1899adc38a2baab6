"""The API's OpenAPI schema class (``DEFAULT_SCHEMA_CLASS``): drf-spectacular's, made to say
what the code does (issue 52, "an honest schema").

- Every status an operation's code raises or returns, and every header it sets on one
  (``core.api_answers``), is in its responses: a 409 of ``DELETE /volumes/{id}``, the
  ``Location`` of a 201. An error status takes the error shape.
- A field (or filter, or path part) whose validator holds it to a pattern
  (``core.validators.matches``) says that pattern, from the validator's own regex.
- A filter takes no empty value: ``core.api_filters.FilterBackend`` answers ``?team=`` with
  400, and the schema says ``minLength: 1``.

Together with ``core.api_errors.add_error_responses`` (the statuses every operation may give)
and ``core.api_query`` (a query parameter the schema does not declare is a 400).
"""

import inspect
import re
from http import HTTPStatus

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema

from . import api_answers
from .api_errors import ERROR_DESCRIPTIONS, header

ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


def pattern_of(validators) -> str | None:
    """The ECMAScript pattern of the first validator that says its regex (matched whole)."""
    for validator in validators:
        regex = getattr(validator, "regex", None)
        if inspect.isfunction(validator) and isinstance(regex, re.Pattern):
            return f"^(?:{regex.pattern})$"
    return None


class AutoSchema(SpectacularAutoSchema):
    def get_operation(self, *args, **kwargs):
        operation = super().get_operation(*args, **kwargs)
        if operation is not None:
            self._add_answers(operation["responses"])
        return operation

    def _add_answers(self, responses: dict) -> None:
        found = api_answers.of_operation(self.view, self.method)
        for code, exception in found.statuses.items():
            if code >= 400:
                detail = ERROR_DESCRIPTIONS.get(str(code)) or (
                    str(exception.default_detail) if exception else HTTPStatus(code).phrase)
                responses.setdefault(str(code), {"description": detail, "content": ERROR})
            else:
                responses.setdefault(str(code), {"description": HTTPStatus(code).phrase})
        for code, names in found.headers.items():
            declared = responses[str(code)].setdefault("headers", {})
            for name in sorted(names):
                declared.setdefault(name, header(name))

    def _insert_field_validators(self, field, schema):
        super()._insert_field_validators(field, schema)
        _add_pattern(field.validators, schema)

    def _map_model_field(self, model_field, direction):
        schema = super()._map_model_field(model_field, direction)
        _add_pattern(model_field.validators, schema)
        return schema

    def _get_filter_parameters(self):
        parameters = super()._get_filter_parameters()
        for parameter in parameters:
            schema = parameter.get("schema", {})
            if schema.get("type") == "string" and "enum" not in schema:
                schema["minLength"] = max(schema.get("minLength", 0), 1)
        return parameters


def _add_pattern(validators, schema: dict) -> None:
    pattern = pattern_of(validators)
    if pattern and schema.get("type") == "string":
        schema["pattern"] = pattern
