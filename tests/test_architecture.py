"""The house's layering, read from the source: no import cycle among the project's modules,
`providers` knows nothing of `services`, the business rules import nothing of the HTTP
layer (`services/api/`), and no test module imports another."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.harness import BASE_DIR

PACKAGES = ("credvault", "services", "providers")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(BASE_DIR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in (BASE_DIR / package).rglob("*.py")
        if "migrations" not in path.parts
    }


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules that `name` imports anywhere in its file (inside functions too: an
    import deferred to break a cycle is still a cycle)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imports_of(path, name, known) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read():
    graph = import_graph()
    assert "services.broker.call" in graph["services.api.proxy_views"]
    assert "services.access" in graph["services.agents"]


def test_no_import_cycle_among_the_projects_modules():
    assert cycles(import_graph()) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_providers_import_nothing_of_services():
    graph = import_graph()
    leaks = {
        name: sorted(target for target in targets if target.startswith("services"))
        for name, targets in graph.items()
        if name.startswith("providers")
    }
    assert {name: found for name, found in leaks.items() if found} == {}


def test_the_outbound_client_imports_nothing_of_the_rest_of_the_project():
    """providers/http/ speaks HTTP and knows no catalog, check or account: the rest of the
    project imports it, never the reverse."""
    graph = import_graph()
    client = {name for name in graph if name.startswith("providers.http.")}
    assert "providers.http.client" in client
    leaks = {
        name: sorted(target for target in graph[name] if not target.startswith("providers.http"))
        for name in client
    }
    assert {name: found for name, found in leaks.items() if found} == {}


def test_no_command_infrastructure_lives_in_providers():
    """Every management command and their base class live in services/management/."""
    assert not [name for name in project_modules() if name.startswith("providers.management")]


def test_the_business_rules_import_nothing_of_the_http_layer():
    """Only the HTTP layer itself, the project's wiring and the app's start-up reach into
    services/api/."""
    graph = import_graph()
    allowed = ("services.api", "credvault", "services.apps")
    leaks = {
        name: sorted(target for target in targets if target.startswith("services.api"))
        for name, targets in graph.items()
        if not name.startswith(allowed)
    }
    assert {name: found for name, found in leaks.items() if found} == {}


def is_test_module(name: str) -> bool:
    return name.startswith("tests.") and name.rpartition(".")[2].startswith("test_")


def is_support_module(name: str) -> bool:
    return name == "tests.support" or name.startswith("tests.support.")


def test_no_test_module_imports_another():
    """Helpers, the harness and the stand-ins of providers live in tests/support/, fixtures in
    conftest.py files: a test module imports nothing from another (a test or a fixture imported
    is collected again where it lands), and the scripts nothing of the tests but tests/support/."""
    modules = {
        module_name(path): path
        for folder in ("tests", "scripts")
        for path in (BASE_DIR / folder).rglob("*.py")
    }
    known = set(modules)
    found = {}
    for name, path in modules.items():
        imported = imports_of(path, name, known)
        if name.startswith("scripts"):
            found[name] = sorted(
                target
                for target in imported
                if target.startswith("tests") and not is_support_module(target)
            )
        else:
            found[name] = sorted(target for target in imported if is_test_module(target))
    assert {name: targets for name, targets in found.items() if targets} == {}


def test_a_script_may_import_the_test_support_alone():
    assert is_support_module("tests.support")
    assert is_support_module("tests.support.harness")
    assert not is_support_module("tests.conftest")
    assert not is_support_module("tests.supporting")
    assert not is_support_module("tests.services.test_audit")


def test_an_import_of_a_test_module_is_found(tmp_path):
    path = tmp_path / "test_new.py"
    path.write_text(
        "from tests.test_agents import put_agent\n\ndef f():\n    from . import test_proxy\n"
    )
    known = {"tests", "tests.support", "tests.test_agents", "tests.test_proxy"}
    imported = imports_of(path, "tests.test_new", known)
    assert {name for name in imported if is_test_module(name)} == {
        "tests.test_agents",
        "tests.test_proxy",
    }
