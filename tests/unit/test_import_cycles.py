"""akter's modules import each other without a cycle, counting every import: at module top,
inside a function, and under ``TYPE_CHECKING``. A local or type-only import still couples two
modules; a cycle it closes comes back at the next refactor (issue 23). There is no allowance:
a cycle anywhere in akter fails, naming each import that closes it.
"""

from __future__ import annotations

import grimp
import pytest

Imports = dict[str, set[str]]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # grimp reads every import statement of a module, wherever it is; TYPE_CHECKING ones are
    # kept unless excluded, and the on-disk cache is skipped so the graph is this checkout's
    return grimp.build_graph("akter", exclude_type_checking_imports=False, cache_dir=None)


def imports_of(graph: grimp.ImportGraph) -> Imports:
    return {
        module: {m for m in graph.find_modules_directly_imported_by(module) if m in graph.modules}
        for module in sorted(graph.modules)
    }


def cycles(imports: Imports) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in imports:
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(imports[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def describe(graph: grimp.ImportGraph, imports: Imports, component: frozenset[str]) -> str:
    """A cycle's modules and every import that closes it, with its line."""
    lines = [f"{len(component)} modules: {', '.join(sorted(component))}"]
    lines += [
        f"  {importer} -> {imported}  line {detail['line_number']}: {detail['line_contents']}"
        for importer in sorted(component)
        for imported in sorted(imports[importer] & component)
        for detail in graph.get_import_details(importer=importer, imported=imported)
    ]
    return "\n".join(lines)


def test_cycles_finds_a_cycle_closed_by_any_edge() -> None:
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e", "d"}}
    assert cycles(imports) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_akter(graph: grimp.ImportGraph) -> None:
    imports = imports_of(graph)
    found = cycles(imports)
    assert not found, "import cycles in akter:\n" + "\n".join(describe(graph, imports, c) for c in found)
