"""Every page sends a Content-Security-Policy that allows no inline script or style (and
so no injected one), the templates keep to it, and the API docs load nothing from a CDN."""

import re
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
STYLE = re.compile(r"<style\b|\sstyle\s*=", re.IGNORECASE)


def policy(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy")
    assert header, f"no Content-Security-Policy on {response.request['PATH_INFO']}"
    return {name: values for name, *values in (part.split() for part in header.split(";") if part.strip())}


def pages(client_for, owner, quota_manager, client):
    yield "login", client.get(reverse("login"))
    yield "dashboard", client_for(owner).get(reverse("dashboard"))
    yield "submit", client_for(owner).get(reverse("jobs:submit"))
    yield "admin", client_for(quota_manager).get(reverse("admin:index"))
    yield "admin login", client.get(reverse("admin:login"))
    yield "api docs", client.get("/api/docs/")


def test_pages_send_csp_without_unsafe_inline(client_for, owner, quota_manager, client, team):
    for name, response in pages(client_for, owner, quota_manager, client):
        assert response.status_code == 200, name
        csp = policy(response)
        assert csp["default-src"] == ["'self'"], name
        for directive in ("script-src", "style-src"):
            assert csp[directive] == ["'self'"], (name, directive, csp[directive])
        assert csp["object-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"], name
        html = response.content.decode()
        assert not INLINE_SCRIPT.search(html), f"inline <script> on {name}"
        assert not EVENT_HANDLER.search(html), f"inline event handler on {name}"
        assert not STYLE.search(html), f"inline style on {name}"


@pytest.mark.parametrize("path", sorted(TEMPLATES.rglob("*.html")), ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_templates_have_no_inline_script_handler_or_style(path):
    text = path.read_text()
    assert not INLINE_SCRIPT.search(text)
    assert not EVENT_HANDLER.search(text)
    assert not STYLE.search(text)


def test_htmx_is_vendored_not_from_a_cdn(client_for, owner, team):
    html = client_for(owner).get(reverse("dashboard")).content.decode()
    sources = re.findall(r'<script[^>]*\bsrc="([^"]+)"', html)
    assert "/static/vendor/htmx/htmx.min.js" in sources
    assert all(src.startswith("/static/") for src in sources), sources


def test_swagger_ui_served_without_cdn(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert not re.search(r"cdn|jsdelivr|unpkg|https?://", html, re.IGNORECASE), html
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any("swagger-ui-bundle.js" in a for a in assets) and any("swagger-ui.css" in a for a in assets)
    for asset in assets:
        if asset.startswith("/static/"):
            assert finders.find(asset.removeprefix("/static/")), f"{asset} is not a vendored static file"
        else:
            assert asset.startswith("/api/docs/?"), asset  # the start-up script, a file of its own
            script = client.get(asset)
            assert script.status_code == 200 and b"SwaggerUIBundle" in script.content
