"""No production function is longer than 60 lines (issue 45; docs: shared STYLE.md, "Avoid").

A long function is split into named steps. Complexity has its own guard: ruff's C901
(`[tool.ruff.lint.mccabe]` in pyproject.toml), which `make test` runs. The production
packages are the import-linter's root packages but the tests and the benchmarks (graphed for
the contract that the tests never import the benchmarks), so a new package is checked the day
it is added to the layers.
"""

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOT_PRODUCTION = {"tests", "bench"}
PACKAGES = [package for package in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
            if package not in NOT_PRODUCTION]
MAX_LINES = 60

# Packages NOT YET checked, while a rewrite makes them long for a time. Remove each one here
# when it is done; the goal is an empty set.
NOT_YET_CHECKED: set[str] = set()


def long_functions(source: str, filename: str = "<source>") -> list[str]:
    """``file:line name (N lines)`` for each function (methods and nested ones too) over MAX_LINES."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1  # from `def`, decorators not counted
            if lines > MAX_LINES:
                found.append(f"{filename}:{node.lineno} {node.name} ({lines} lines)")
    return found


def modules(package: str) -> list[Path]:
    """The package's modules, without migrations (makemigrations writes those)."""
    return sorted(path for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts)


CHECKED = [package for package in PACKAGES if package not in NOT_YET_CHECKED]


@pytest.mark.parametrize("package", CHECKED)
def test_no_function_of_the_package_is_longer_than_60_lines(package):
    files = modules(package)
    assert files, f"{package} has no modules: the test reads the wrong folder"
    found = [line for path in files for line in long_functions(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "split these into named steps:\n" + "\n".join(found)


def test_a_function_of_61_lines_is_found_and_one_of_60_is_not():
    def function(name, lines):  # `def` and lines - 1 statements
        return f"def {name}():\n" + "    pass\n" * (lines - 1)

    source = function("fits", MAX_LINES) + "\n\nclass Page:\n" + "\n".join(
        "    " + line for line in function("too_long", MAX_LINES + 1).splitlines())
    assert long_functions(source, "page.py") == ["page.py:64 too_long (61 lines)"]  # after 60 lines, 2 blank, the class


def test_the_tests_and_the_benchmarks_are_the_only_packages_left_out():
    root_packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    assert set(root_packages) - set(PACKAGES) == NOT_PRODUCTION
    assert {"jobs", "cluster", "gpuplatform"} <= set(CHECKED)


def test_the_packages_not_yet_checked_are_production_packages_or_about_to_be():
    # A name misspelled here would check nothing and say nothing.
    assert NOT_YET_CHECKED <= set(PACKAGES)
