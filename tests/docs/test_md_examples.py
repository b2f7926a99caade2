"""The docs-example harness itself: finding blocks, reading directives, judging runs."""

from __future__ import annotations

import json
from pathlib import Path

from md_examples import (
    PLACEHOLDER,
    Block,
    blocks_of,
    collect,
    pages,
    run_in_one_process,
    run_program,
    stray_directives,
)

PAGE = """\
# A page

```python
print("plain")
```

<!-- doc-example: fake -->
```python
print("fake")
```

<!-- doc-example: skip it needs a cluster of ten brokers -->

```python
print("skipped")
```

<!-- doc-example: skip -->
```python
print("no reason")
```

<!-- doc-example: fast -->
```python
print("unknown mode")
```

<!--doc-example:fake-->
```python3
print("not python: another language")
```

```text
<!-- doc-example: fake -->
```

- a list item

  ```python
  print("in a list")
  ```

```pycon
>>> 1 + 1
```
"""


def test_blocks_are_found_with_their_lines_and_directives() -> None:
    blocks = blocks_of("page.md", PAGE)
    assert [(b.line, b.mode, b.reason, bool(b.error)) for b in blocks] == [
        (3, "kafka", "", False),
        (8, "fake", "", False),
        (14, "skip", "it needs a cluster of ten brokers", False),
        (19, "skip", "", True),
        (24, "kafka", "", True),
        (39, "kafka", "", True),
    ]
    (tansu,) = blocks_of("p.md", "<!-- doc-example: tansu -->\n```python\npass\n```\n")
    assert (tansu.mode, tansu.error) == ("tansu", "")
    assert blocks[1].code == 'print("fake")\n'
    assert blocks[4].error.startswith("unknown directive")
    assert blocks[5].code == 'print("in a list")\n'
    assert "indented fence" in blocks[5].error


def test_a_directive_not_before_a_python_fence_is_reported() -> None:
    # The one before ```python3; the one inside ```text is code, not a directive.
    assert stray_directives("page.md", PAGE) == [
        "page.md:28: '<!--doc-example:fake-->' is not right before a ```python fence"
    ]


def test_a_malformed_directive_is_an_error() -> None:
    (block,) = blocks_of("p.md", "<!-- doc-example fake -->\n```python\npass\n```\n")
    assert block.error.startswith("malformed directive")


def test_program_replaces_the_placeholder_and_keeps_the_page_line_numbers() -> None:
    block = Block("sub/page.md", 7, f'connect("{PLACEHOLDER}")\nconnect("{PLACEHOLDER}")\n')
    program = block.program("127.0.0.1:1,127.0.0.1:2")
    lines = program.splitlines()
    assert lines[7] == 'connect("127.0.0.1:1,127.0.0.1:2")'  # line 8, right after the fence
    assert PLACEHOLDER not in program
    assert block.file_name() == "sub_page_md_line_7.py"


def test_spark_blocks_are_recognised() -> None:
    assert Block("p.md", 1, "from pyspark.sql import SparkSession\n").uses_spark
    assert Block("p.md", 1, "import pykaf.spark\n").uses_spark
    assert not Block("p.md", 1, "import pykaf\n# pyspark is not used\n").uses_spark


def test_run_program_reports_success_failure_and_hangs(tmp_path: Path) -> None:
    ok = tmp_path / "ok.py"
    ok.write_text("import pykaf\nprint('fine')\n")  # the checkout is importable
    failing = tmp_path / "failing.py"
    failing.write_text("\n\nraise RuntimeError('boom')\n")
    hanging = tmp_path / "hanging.py"
    hanging.write_text("import time\ntime.sleep(600)\n")

    outcome = run_program(ok, tmp_path, 60)
    assert outcome.failure == "" and "fine" in outcome.output
    outcome = run_program(failing, tmp_path, 60)
    assert "exited with status 1" in outcome.failure
    assert 'failing.py", line 3' in outcome.output and "boom" in outcome.output
    assert "did not finish" in run_program(hanging, tmp_path, 0.5).failure


def test_run_in_one_process_reports_each_program(tmp_path: Path) -> None:
    files = []
    for name, code in [
        ("first.py", "import sys\nsys.modules['shared_marker'] = sys\n"),
        ("second.py", "import sys\nassert 'shared_marker' in sys.modules\n"),  # same process
        ("third.py", "raise SystemExit(3)\n"),
        ("fourth.py", "raise ValueError('bad')\n"),
        ("fifth.py", "raise SystemExit(0)\n"),
    ]:
        path = tmp_path / name
        path.write_text(code)
        files.append(path)
    outcomes = run_in_one_process(files, tmp_path, 60)
    assert [bool(outcomes[p].failure) for p in files] == [False, False, True, True, False]
    assert "SystemExit(3)" in outcomes[files[2]].failure
    assert "ValueError: bad" in outcomes[files[3]].failure
    assert json.loads((tmp_path / "results.json").read_text())[str(files[0])] is None


def test_run_in_one_process_blames_the_programs_left_when_it_hangs(tmp_path: Path) -> None:
    done, stuck, never = (tmp_path / n for n in ("done.py", "stuck.py", "never.py"))
    done.write_text("pass\n")
    stuck.write_text("import time\ntime.sleep(600)\n")
    never.write_text("pass\n")
    outcomes = run_in_one_process([done, stuck, never], tmp_path, 2)
    assert outcomes[done].failure == ""
    assert "did not finish" in outcomes[stuck].failure
    assert "did not finish" in outcomes[never].failure


def test_the_docs_have_no_stray_directives() -> None:
    stray = [line for path in pages() for line in stray_directives(path.name, path.read_text())]
    assert stray == [], "\n".join(stray)


def test_collect_reads_every_page(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("```python\npass\n```\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("<!-- doc-example: fake -->\n```python\npass\n```\n")
    (tmp_path / "c.txt").write_text("```python\npass\n```\n")
    assert [(b.id, b.mode) for b in collect(tmp_path)] == [
        ("a.md:1", "kafka"),
        ("sub/b.md:2", "fake"),
    ]
