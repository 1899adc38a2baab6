"""REST API routes (``/api/``): the v1 API, its OpenAPI schema and docs."""

urlpatterns: list = []
