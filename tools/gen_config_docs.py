"""Write docs/configuration.md from the option definitions in pykaf/_config.py.

Run: python tools/gen_config_docs.py. A test fails when the page is stale.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pykaf._config import ClientConfig  # noqa: E402
from pykaf._consumer.config import ConsumerConfig  # noqa: E402
from pykaf._group.config import GroupConfig  # noqa: E402
from pykaf._producer.config import ProducerConfig  # noqa: E402
from pykaf._share.config import ShareConsumerConfig  # noqa: E402

CONFIGS = [
    ("Client", ClientConfig),
    ("Producer", ProducerConfig),
    ("Consumer", ConsumerConfig),
    ("Consumer group", GroupConfig),
    ("Share consumer", ShareConsumerConfig),
]


def fmt_default(value: object) -> str:
    if value is None or value == "":
        return "—"
    return f"`{value!r}`"


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from the option definitions by `tools/gen_config_docs.py`; do not edit.",
        "Options are keyword arguments of `pykaf.open_client()`, `pykaf.open_producer()`,",
        "`pykaf.open_consumer()`, `pykaf.open_consumer_group()` and",
        "`pykaf.open_share_consumer()`. Durations are in seconds. An unknown name or a bad",
        "value raises `pykaf.errors.ConfigError` before anything connects.",
        "",
    ]
    for title, cls in CONFIGS:
        lines += [f"## {title} options", ""]
        parents = [(t, c) for t, c in CONFIGS if c is not cls and issubclass(cls, c)]
        inherited = [t.lower() for t, _ in parents]
        # options a parent's table shows already (a sibling's same-named ones are repeated)
        shown = {name for _, c in parents for name, _d, _doc in c.options()}
        if inherited:
            lines += [f"The {' and '.join(inherited)} options above apply too.", ""]
        lines += ["| option | default | meaning |", "|---|---|---|"]
        for name, default, doc in cls.options():
            if name not in shown:
                lines.append(f"| `{name}` | {fmt_default(default)} | {doc} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    out = ROOT / "docs" / "configuration.md"
    out.write_text(render())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
