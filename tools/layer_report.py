"""Report import cycles and private cross-calls among pykaf's own modules.

Two checks behind the rule of docs/design.md that each layer imports only the
layers below it:

* **Import cycles**, counting imports made only under ``TYPE_CHECKING`` (grimp
  records them by default). Prints every strongly connected group of modules
  (a set where each module reaches every other one through imports), and
  within it the pairs that import each other directly.
* **Private cross-calls**: an attribute ``<expr>._name`` (not a dunder) read,
  called or written where ``<expr>`` is not ``self`` or ``cls``: a module
  reaching into another object's privates. Accesses whose ``<expr>`` is an
  imported module (``P._x`` after ``import pykaf.protocol as P``) are listed
  apart, since a module-level private imported on purpose is a judgement call,
  not an object's state. So are accesses to a private name the same file
  defines (a helper class of the module, or another instance of the class):
  they are listed apart, and only the cross-module ones count as found.
* **The fake cluster's imports** of pykaf beyond the codec, the protocol,
  ``errors`` and ``_util``: the fake is a broker, so it should stand on the
  wire format only.

Run from the checkout (the checkout's ``pykaf`` is the one analysed)::

    python tools/layer_report.py            # both reports
    python tools/layer_report.py --cycles   # only the cycles
    python tools/layer_report.py --fake     # only the fake cluster's imports
    python tools/layer_report.py --private  # only the private accesses

The exit status is 1 when anything is found in the selected reports.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "pykaf"


# ---------------------------------------------------------------- import cycles


def import_graph(package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports directly (TYPE_CHECKING too).

    An import of a package's name only (``from pykaf._consumer import x``
    where ``x`` is defined in ``__init__``) is an edge to the package module.
    """
    import grimp

    graph = grimp.build_graph(package, include_external_packages=False)
    edges = {
        module: set(graph.find_modules_directly_imported_by(module)) - {module}
        for module in graph.modules
    }
    # grimp sees only .py files: ``from pykaf import _codec`` (a compiled
    # extension) reads as an import of the package ``pykaf``. Point such edges
    # at the extension instead.
    extensions = _extension_modules(package)
    for module, targets in edges.items():
        for target in sorted(targets):
            names = extensions.get(target)
            if not names:
                continue
            details = graph.get_import_details(importer=module, imported=target)
            imported = [_from_import_names(target, d["line_contents"]) for d in details]
            if imported and all(found and found <= names for found in imported):
                targets.discard(target)
                targets.update(f"{target}.{name}" for found in imported for name in found)
    for targets in list(edges.values()):
        for target in targets:
            edges.setdefault(target, set())
    return edges


def _extension_modules(package: str) -> dict[str, set[str]]:
    """Package module -> names of the compiled extension modules it holds."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*"):
        if path.suffix in (".so", ".pyd"):
            parent = ".".join(path.parent.relative_to(ROOT).parts)
            found.setdefault(parent, set()).add(path.name.split(".")[0])
    return found


def _from_import_names(package: str, line: str) -> set[str]:
    """The names of ``from <package> import a, b as c`` (empty if not that form)."""
    match = re.match(rf"from\s+{re.escape(package)}\s+import\s+\(?([\w\s,]+)", line)
    if not match:
        return set()
    names = re.split(r"\s*,\s*", match.group(1).strip())
    return {name.split()[0] for name in names if name}


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of two or more modules that import each other, sorted.

    Tarjan's algorithm, iterative so that deep import chains do not hit the
    recursion limit.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def mutual_pairs(edges: dict[str, set[str]], group: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of the group's modules that import each other directly."""
    members = sorted(group)
    return [
        (a, b)
        for i, a in enumerate(members)
        for b in members[i + 1 :]
        if b in edges.get(a, ()) and a in edges.get(b, ())
    ]


def report_cycles(out: list[str]) -> int:
    """Append the cycle report to ``out``; return how many groups were found."""
    edges = import_graph()
    groups = strongly_connected(edges)
    out.append(f"import cycles (TYPE_CHECKING imports counted): {len(groups)} group(s)")
    for group in groups:
        out.append(f"  cycle of {len(group)}: " + ", ".join(group))
        for a, b in mutual_pairs(edges, group):
            out.append(f"    {a} <-> {b}")
        inner = {m: sorted(edges[m] & set(group)) for m in group}
        for module, targets in inner.items():
            if targets:
                out.append(f"    {module} -> " + ", ".join(targets))
    return len(groups)


# ------------------------------------------------- what the fake cluster uses

FAKE = "pykaf.testing._fake"
#: What the fake cluster may import of pykaf: the codec and the protocol, and
#: the leaves they stand on.
FAKE_ALLOWED = (
    "pykaf.codec",
    "pykaf._codec",
    "pykaf._codec_py",
    "pykaf._columns",
    "pykaf._compression",
    "pykaf.protocol",
    "pykaf.errors",
    "pykaf._util",
)


def _allowed_for_fake(module: str) -> bool:
    return any(module == a or module.startswith(a + ".") for a in (FAKE, *FAKE_ALLOWED))


def report_fake(out: list[str]) -> int:
    """Append the fake's imports outside codec/protocol; return their count."""
    edges = import_graph()
    outside = sorted(
        (module, target)
        for module, targets in edges.items()
        if module == FAKE or module.startswith(FAKE + ".")
        for target in targets
        if not _allowed_for_fake(target)
    )
    out.append(f"the fake's imports beyond codec, protocol, errors, _util: {len(outside)}")
    for module, target in outside:
        out.append(f"  {module} -> {target}")
    return len(outside)


# ------------------------------------------------------------ private accesses


@dataclass(frozen=True)
class PrivateAccess:
    """One ``<expr>._name`` outside ``self``/``cls``."""

    path: str
    line: int
    expr: str
    name: str
    kind: str  # "call", "write", "read", or "import" (``from <expr> import _name``)
    on_module: bool  # <expr> is a name bound by an import in that file
    local: bool  # the file itself defines ``_name`` (a method or an attribute it sets)


def _imported_names(tree: ast.Module) -> set[str]:
    """Names a file binds by ``import`` (modules, or names of modules)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names.add(alias.asname or alias.name)
    return names


def _defined_names(tree: ast.Module) -> set[str]:
    """Private names the file defines on its classes: methods and attributes set."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            targets: list[ast.expr] = []
            if isinstance(stmt, ast.Assign):
                targets = stmt.targets
            elif isinstance(stmt, ast.AnnAssign):
                targets = [stmt.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                elif isinstance(target, ast.Tuple):
                    names.update(e.id for e in target.elts if isinstance(e, ast.Name))
                if isinstance(target, ast.Name) and target.id == "__slots__":
                    for const in ast.walk(stmt.value) if stmt.value else ():
                        if isinstance(const, ast.Constant) and isinstance(const.value, str):
                            names.add(const.value)
    return {name for name in names if _is_private(name)}


def _is_private_module(package: str, name: str) -> bool:
    """Whether ``package.name`` is a module (``from pykaf import _codec``), not a name in one."""
    where = ROOT.joinpath(*package.split("."))
    return (
        (where / f"{name}.py").exists()
        or (where / name).is_dir()
        or any(where.glob(f"{name}.*.so"))
    )


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_accesses(path: pathlib.Path) -> list[PrivateAccess]:
    """Every private attribute reached on something other than self/cls."""
    tree = ast.parse(path.read_text(), str(path))
    imported = _imported_names(tree)
    defined = _defined_names(tree)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    found = []
    rel = str(path.relative_to(ROOT))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE + "."):
            # ``from pykaf.x import _name``: a module-level private of another module
            module = node.module or ""
            found.extend(
                PrivateAccess(rel, node.lineno, module, alias.name, "import", True, False)
                for alias in node.names
                if _is_private(alias.name) and not _is_private_module(module, alias.name)
            )
            continue
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls"):
            continue
        # super()._x is the object's own method.
        if (
            isinstance(base, ast.Call)
            and isinstance(base.func, ast.Name)
            and base.func.id == "super"
        ):
            continue
        parent = parents.get(node)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            kind = "write"
        elif isinstance(parent, ast.Call) and parent.func is node:
            kind = "call"
        else:
            kind = "read"
        on_module = isinstance(base, ast.Name) and base.id in imported
        found.append(
            PrivateAccess(
                rel,
                node.lineno,
                ast.unparse(base),
                node.attr,
                kind,
                on_module,
                not on_module and node.attr in defined,
            )
        )
    return found


def report_private(out: list[str]) -> int:
    """Append the private-access report to ``out``; return the cross-module accesses."""
    accesses = sorted(
        (
            access
            for path in sorted((ROOT / PACKAGE).rglob("*.py"))
            for access in private_accesses(path)
        ),
        key=lambda a: (a.path, a.line, a.expr, a.name),
    )
    objects = [a for a in accesses if not a.on_module and not a.local]
    local = [a for a in accesses if a.local]
    modules = [a for a in accesses if a.on_module]
    out.append(f"private attributes of objects another module defines: {len(objects)}")
    for a in objects:
        out.append(f"  {a.path}:{a.line}: {a.kind} {a.expr}.{a.name}")
    out.append(
        "private attributes reached within the module defining them"
        f" (another instance, or a helper class of the same module; judge each): {len(local)}"
    )
    for a in local:
        out.append(f"  {a.path}:{a.line}: {a.kind} {a.expr}.{a.name}")
    out.append(
        "private names of other modules, imported or reached on an imported module"
        f" (judge each): {len(modules)}"
    )
    for a in modules:
        out.append(f"  {a.path}:{a.line}: {a.kind} {a.expr}.{a.name}")
    return len(objects)


def main(argv: list[str] | None = None) -> int:
    """Print the selected reports; 1 if any found something."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", action="store_true", help="only the import cycles")
    parser.add_argument("--private", action="store_true", help="only the private accesses")
    parser.add_argument("--fake", action="store_true", help="only the fake's imports")
    args = parser.parse_args(argv)
    both = not (args.cycles or args.private or args.fake)
    sys.path.insert(0, str(ROOT))
    out: list[str] = []
    found = 0
    if both or args.cycles:
        found += report_cycles(out)
    if both or args.fake:
        found += report_fake(out)
    if both or args.private:
        found += report_private(out)
    print("\n".join(out))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
