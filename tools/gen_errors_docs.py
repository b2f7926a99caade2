"""Write docs/errors.md from the exception classes of pykaf (pykaf.errors and the rest).

Run: python tools/gen_errors_docs.py. A test fails when the page is stale.
The page shows the class tree, pykaf's own errors, and every Kafka error code
with its class, whether it is retriable and Kafka's description.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import sys
from typing import TypeGuard

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pykaf import errors  # noqa: E402

OUT = ROOT / "docs" / "errors.md"

# Modules whose public names (``__all__``) may hold exception classes, with the
# prefix a reader writes them with; a class is named after the first that has it.
PUBLIC = [
    ("pykaf.errors", ""),
    ("pykaf", "pykaf."),
    ("pykaf.sync", "pykaf.sync."),
    ("pykaf.protocol", "pykaf.protocol."),
    ("pykaf.spark", "pykaf.spark."),
]

EXAMPLE = """\
```python
import trio

import pykaf
from pykaf import errors

cls = errors.error_for_code(6)
print(cls.__name__, cls.name, cls.retriable)  # NotLeaderOrFollowerError ... True

try:
    errors.raise_for_code(3, "no topic 'orders' here")
except errors.RetriableError as exc:  # what a retry may cure
    print("retry later:", exc.code, exc)


async def main() -> None:
    async with pykaf.open_admin("localhost:9092") as admin:
        await admin.create_topic("orders", partitions=3)
        try:
            await admin.create_topic("orders", partitions=3)
        except errors.TopicExistsError as exc:  # the broker's own error, as its class
            print(exc.code, exc.name, exc.retriable)
        except errors.PykafError as exc:  # anything else pykaf raises
            raise SystemExit(f"unexpected: {exc!r}") from exc


trio.run(main)
```
"""


def public_names() -> dict[type, str]:
    """Every public exception class derived from PykafError, with the name to write it by."""
    names: dict[type, str] = {}
    for module_name, prefix in PUBLIC:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, errors.PykafError) and obj not in names:
                names[obj] = prefix + name
    return names


def has_code(cls: type) -> TypeGuard[type[errors.KafkaError]]:
    """Whether ``cls`` is the class of one Kafka error code."""
    return (
        issubclass(cls, errors.KafkaError) and cls is not errors.KafkaError and "code" in vars(cls)
    )


def parent(cls: type, names: dict[type, str]) -> type | None:
    """Where ``cls`` sits in the tree: its first base that is a public pykaf error."""
    for base in cls.__bases__:
        if base in names:
            return base
    return None


def other_bases(cls: type, names: dict[type, str]) -> list[str]:
    """The bases besides the tree parent worth naming (not the RetriableError marker)."""
    first = parent(cls, names)
    return [
        names.get(base, base.__name__)
        for base in cls.__bases__
        if base is not first and base is not errors.RetriableError
    ]


def sort_key(cls: type) -> tuple[int, int, str]:
    """Kafka code classes by code, after the others by name."""
    if has_code(cls):
        return (1, int(vars(cls)["code"]), cls.__name__)
    return (0, 0, cls.__name__)


def label(cls: type, names: dict[type, str]) -> str:
    """One line of the tree."""
    notes = []
    if has_code(cls):
        notes.append(f"code {vars(cls)['code']}")
    if has_code(cls) and getattr(cls, "retriable", False):
        notes.append("retriable")
    notes += [f"also {b}" for b in other_bases(cls, names)]
    return names[cls] + (f"  ({', '.join(notes)})" if notes else "")


def tree(names: dict[type, str]) -> list[str]:
    """The class tree under PykafError, drawn with box characters."""
    children: dict[type, list[type]] = {}
    for cls in names:
        up = parent(cls, names)
        if up is not None:
            children.setdefault(up, []).append(cls)
    lines = [names[errors.PykafError]]

    def draw(cls: type, indent: str) -> None:
        kids = sorted(children.get(cls, []), key=sort_key)
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            lines.append(f"{indent}{'└── ' if last else '├── '}{label(kid, names)}")
            draw(kid, indent + ("    " if last else "│   "))

    draw(errors.PykafError, "")
    return lines


def first_line(cls: type) -> str:
    """The first sentence line of a class's docstring."""
    doc = inspect.getdoc(cls) or ""
    return doc.splitlines()[0] if doc else ""


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """The whole page."""
    names = public_names()
    own = sorted((c for c in names if not has_code(c)), key=lambda c: c.__name__)
    coded = sorted([c for c in names if has_code(c)], key=sort_key)
    lines = [
        "# Errors",
        "",
        "Generated from the exception classes by `tools/gen_errors_docs.py`; do not edit.",
        "",
        "Everything pykaf raises derives from `pykaf.errors.PykafError`. Each Kafka error",
        "code has a class of its own (derived from `KafkaError`, with `.code`, `.name`,",
        "`.retriable` and `.description`), so a call fails with the broker's specific",
        "error. Retriable errors also derive from `RetriableError`: `except",
        "RetriableError` catches exactly what a retry may cure. `error_for_code(code)`",
        "gives a code's class and `raise_for_code(code, message)` raises it; a code",
        "missing from Kafka's table comes back as `UnknownKafkaError`.",
        "",
        "A partition's error in a consumer is a `ConsumerError` (`.topic`, `.partition`,",
        "`.error`) that is also an instance of its cause's class: the one",
        "`pykaf.sync.Consumer.poll()` raises for a Fetch an ACL refused is caught by",
        "`except TopicAuthorizationError` as well as by `except ConsumerError`. The",
        "`open_*` functions run on trio: awaited from asyncio they raise",
        "`WrongAsyncLibraryError` (also a `RuntimeError`), which names `pykaf.aio` for",
        "asyncio code and `pykaf.sync` for blocking code.",
        "",
        EXAMPLE,
        "## The tree",
        "",
        "Names without a module are in `pykaf.errors`. A class with two pykaf bases",
        "sits under the first and names the other.",
        "",
        "```text",
        *tree(names),
        "```",
        "",
        "## pykaf's own errors",
        "",
        "| class | derives from | what |",
        "|---|---|---|",
    ]
    for cls in own:
        bases = ", ".join(names.get(b, b.__name__) for b in cls.__bases__)
        lines.append(f"| `{names[cls]}` | {cell(bases)} | {cell(first_line(cls))} |")
    lines += [
        "",
        "## Kafka error codes",
        "",
        f"{len(coded)} codes, from Kafka's error table.",
        "",
        "| code | name | class | retriable | description |",
        "|---:|---|---|---|---|",
    ]
    for cls in coded:
        retriable = "yes" if cls.retriable else "no"
        lines.append(
            f"| {vars(cls)['code']} | `{cls.name}` | `{names[cls]}` | {retriable} "
            f"| {cell(cls.description)} |"
        )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    OUT.write_text(render())
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
