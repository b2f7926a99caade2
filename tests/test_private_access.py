"""No module reaches into another module's private names (issue 18's rule, checked).

A name that starts with one underscore (a method, an attribute, a module) is
private to the module that defines it: code there may use it on any object
(``other._x`` in ``__eq__``, a factory filling in a new instance), code
elsewhere may not. The import contracts (``.importlinter``, run by ``make
lint``) keep the layers one-way; this keeps the objects' insides their own.
The few exceptions are listed below with their reasons.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).parents[1] / "pykaf"

#: (module, attribute) -> why it may be read from outside its module.
ALLOWED: dict[tuple[str, str], str] = {
    ("pykaf/spark/_savemode.py", "_jsparkSession"): (
        "PySpark keeps the JVM session of a SparkSession only there; the save-mode "
        "wrapper needs it to ask the JVM which data sources it has"
    ),
    ("pykaf/testing/_spark.py", "_jsc"): (
        "PySpark has no public call that counts the executors registered with the driver; "
        "standalone_spark_session waits for them through the JVM SparkContext"
    ),
    ("pykaf/_sync/producer.py", "_invoke_callbacks"): (
        "send_async's futures subclass concurrent.futures.Future without its per-future "
        "Condition (sharing the producer's) and resolve a settled batch's futures under one "
        "hold of it, so they run Future's own callback step; the Future internals this "
        "assumes are checked by test_future_internals_are_what_send_async_assumes"
    ),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_here(tree: ast.Module) -> set[str]:
    """Private names a module defines: functions, classes, attributes it assigns, slots."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # __slots__ entries, setattr names
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.rsplit(".", 1)[-1])
    return {n for n in names if _private(n)}


def _reaches() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).as_posix()
        tree = ast.parse(path.read_text(), rel)
        own = _defined_here(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr in own or (rel, node.attr) in ALLOWED:
                continue
            found.append((rel, node.lineno, ast.unparse(node)))
    return found


def test_no_module_reaches_into_another_modules_private_names() -> None:
    assert _reaches() == []


def test_the_check_finds_a_reach() -> None:
    tree = ast.parse("def f(producer):\n    producer._drain_input()\n")
    assert "_drain_input" not in _defined_here(tree)
    source = "class A:\n    def _x(self):\n        pass\n    def f(self, o):\n        o._x()\n"
    tree = ast.parse(source)
    assert "_x" in _defined_here(tree)


def test_every_exception_is_still_needed() -> None:
    used = set()
    for rel, attr in ALLOWED:
        tree = ast.parse((PKG.parent / rel).read_text())
        if any(isinstance(n, ast.Attribute) and n.attr == attr for n in ast.walk(tree)):
            used.add((rel, attr))
    assert used == set(ALLOWED)


def test_future_internals_are_what_send_async_assumes() -> None:
    """``_DeliveryFuture`` stands in for ``Future.__init__``: a CPython change must fail here."""
    from concurrent.futures import Future

    assert set(vars(Future())) == {
        "_condition",
        "_state",
        "_result",
        "_exception",
        "_waiters",
        "_done_callbacks",
    }
    assert callable(Future._invoke_callbacks)  # type: ignore[attr-defined]


#: Objects that own their changes (issue 31): the module of each class, and the
#: packages (or modules) where objects of it are handled. Outside its own module a field of
#: one is read, never written: the class has a method named for each change.
OWNED: dict[str, tuple[str, tuple[str, ...]]] = {
    "PartitionState": ("pykaf/_producer/state.py", ("pykaf/_producer", "pykaf/_txn")),
    # Leaders, leader epochs and named replicas are the partition router's alone.
    "Route": ("pykaf/_cluster/router.py", ("pykaf/_producer", "pykaf/_consumer", "pykaf/_share")),
    # A partition's fetch state: the fetcher, the consumer and the reader move it
    # through the cursor's methods; the readers on top of them only read it.
    "FetchCursor": (
        "pykaf/_consumer/fetch_cursor.py",
        ("pykaf/_consumer", "pykaf/_group", "pykaf/_sync/consumer.py", "pykaf/aio"),
    ),
}


def _slots(module: str, cls: str) -> set[str]:
    tree = ast.parse((PKG.parent / module).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets)
                    and isinstance(item.value, ast.Tuple)
                ):
                    return {ast.literal_eval(e) for e in item.value.elts}
    raise AssertionError(f"{module} defines no {cls} with __slots__")


def _field_writes(source: str, fields: set[str]) -> list[tuple[int, str]]:
    """Writes (``x.f = ...``, ``x.f += ...``) of ``fields`` on anything but ``self``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for t in ast.walk(target):
                if (
                    isinstance(t, ast.Attribute)
                    and t.attr in fields
                    and not (isinstance(t.value, ast.Name) and t.value.id == "self")
                ):
                    found.append((t.lineno, ast.unparse(t)))
    return found


def test_owned_state_is_written_only_by_its_own_module() -> None:
    found = []
    for cls, (module, scope) in OWNED.items():
        # topic and partition name the object and are set once; other objects
        # (a ProducerMessage) have fields of those names that are theirs to set.
        fields = _slots(module, cls) - {"topic", "partition"}
        for where in scope:
            place = PKG.parent / where
            for path in [place] if place.is_file() else sorted(place.rglob("*.py")):
                rel = path.relative_to(PKG.parent).as_posix()
                if rel == module:
                    continue
                found += [
                    (rel, line, text) for line, text in _field_writes(path.read_text(), fields)
                ]
    assert found == []


def test_the_write_check_finds_a_write() -> None:
    source = "def f(p):\n    p.failures += 1\n    p.open = None\n    self.open = 1\n"
    assert _field_writes(source, {"failures", "open"}) == [(2, "p.failures"), (3, "p.open")]
