"""The import-linter contracts of pyproject.toml leave no module of an app out.

A layers contract says nothing about a module it does not name, so a module left out may
import anything, and an import circle through it passes `lint-imports`. These tests read
the contracts and the apps' folders, so a new module fails here until it has a layer.
"""

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
APPS = ["tenants", "quotas", "jobs", "console", "notifications", "accounts"]


def in_app_contracts():
    return [c for c in CONTRACTS if c["type"] == "layers" and c.get("containers")]


def named_layers(contract) -> set[str]:
    return {name for layer in contract["layers"] for name in re.findall(r"[\w.]+", layer)}


def modules_of(app: str) -> set[str]:
    """The modules and packages directly inside an app, as a container's layers name them."""
    folder = ROOT / app
    modules = {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
    packages = {p.parent.name for p in folder.glob("*/__init__.py")}
    return modules | packages


def test_every_app_is_a_container_of_an_in_app_contract():
    containers = {app for c in in_app_contracts() for app in c["containers"]}
    assert set(APPS) <= containers


@pytest.mark.parametrize("app", APPS)
def test_every_module_of_the_app_is_named_in_its_in_app_contract(app):
    named = set().union(*(named_layers(c) for c in in_app_contracts() if app in c["containers"]))
    assert modules_of(app), f"{app} has no modules: the test reads the wrong folder"
    assert sorted(modules_of(app) - named) == []


def test_no_app_may_hold_an_import_cycle():
    acyclic = [c for c in CONTRACTS if c["type"] == "acyclic_siblings"]
    assert set(APPS) <= {app for c in acyclic for app in c["ancestors"]}


@pytest.mark.parametrize("app", ["tenants", "quotas", "jobs"])
def test_the_models_of_the_app_are_a_package_whose_modules_never_import_it(app):
    """``<app>/models/__init__.py`` gathers the models for Django; a module of the app that
    imported back from it would close a circle with the package that imports that module."""
    package = ROOT / app / "models"
    assert (package / "__init__.py").is_file()
    for module in package.glob("*.py"):
        if module.name == "__init__.py":
            continue
        source = module.read_text()
        assert not re.search(rf"^\s*from (\.|{app}\.models) import", source, re.MULTILINE), module.name
