"""``df.write.format("pykaf").save()`` without a mode, as Spark's Kafka sink takes it.

Spark's Kafka sink takes the save modes Append and ErrorIfExists (the
default, what ``save()`` without ``mode(...)`` means) and refuses Overwrite
and Ignore. Spark's JVM refuses ErrorIfExists and Ignore for every Python
data source before the source sees the write, so the default mode cannot
reach pykaf. Importing :mod:`pykaf.spark` therefore wraps PySpark's
``DataFrameWriter``: a write whose format is ``pykaf`` in ErrorIfExists
mode (given or by default) is saved in Append mode, and Overwrite and Ignore
are refused on the driver, naming the modes a Kafka sink takes; the writing
thread's active session is set first (:func:`activate`), so that a write
from a thread other than the session's finds the format. Writes to any other
format are left as they are.
"""

from __future__ import annotations

import functools
from typing import Any

from pykaf import errors

#: The names Spark takes for ErrorIfExists (``mode(None)`` keeps the mode as is).
_ERROR_IF_EXISTS = {"error", "errorifexists", "default"}


def check_save_mode(mode: str | None) -> str:
    """The mode to save a ``pykaf`` write in: "append" for Append and ErrorIfExists.

    Raises:
        ConfigError: Overwrite or Ignore (a topic can only be appended to).
    """
    if mode is None or mode.lower() in _ERROR_IF_EXISTS | {"append"}:
        return "append"
    raise errors.ConfigError(
        f"save mode {mode!r} is not allowed for Kafka (format 'pykaf'): a topic can only be "
        "appended to; the allowed save modes are append and errorifexists (the default), "
        "as for Spark's Kafka sink"
    )


def activate(spark: Any) -> None:
    """Make ``spark`` the calling thread's active session in Spark's JVM.

    Spark looks a Python data source up for ``df.write...save()`` through
    the thread's active session; a thread that did not make the session has
    none, and the save fails with ``DATA_SOURCE_NOT_FOUND``. Nothing for a
    Spark Connect session (it has no JVM here).
    """
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return
    session_class = getattr(type(spark), "_get_j_spark_session_class", None)
    jclass = session_class(jvm) if session_class else jvm.org.apache.spark.sql.SparkSession
    jclass.setActiveSession(spark._jsparkSession)


def install() -> None:
    """Wrap PySpark's ``DataFrameWriter`` (once; nothing without PySpark)."""
    try:
        from pyspark.sql.readwriter import DataFrameWriter
    except ImportError:
        return
    if getattr(DataFrameWriter.save, "_pykaf", False):
        return
    format_, mode, save = DataFrameWriter.format, DataFrameWriter.mode, DataFrameWriter.save

    @functools.wraps(format_)
    def format_source(self: Any, source: str) -> Any:
        self._pykaf_format = source
        return format_(self, source)

    @functools.wraps(mode)
    def set_mode(self: Any, saveMode: str | None) -> Any:
        if saveMode is not None:
            self._pykaf_mode = saveMode
        return mode(self, saveMode)

    @functools.wraps(save)
    def save_kafka_modes(self: Any, *args: Any, **kwargs: Any) -> Any:
        names = ("path", "format", "mode")
        given = dict(zip(names, args, strict=False)) | {k: kwargs[k] for k in names if k in kwargs}
        source = given.get("format") or getattr(self, "_pykaf_format", None)
        if isinstance(source, str) and source.lower() == "pykaf":
            activate(self._spark)  # a write from another thread finds the format too
            chosen = given.get("mode") or getattr(self, "_pykaf_mode", None)
            mode(self, check_save_mode(chosen))
            self._pykaf_mode = "append"
            if len(args) >= 3:
                args = (*args[:2], "append", *args[3:])
            elif "mode" in kwargs:
                kwargs["mode"] = "append"
        return save(self, *args, **kwargs)

    save_kafka_modes._pykaf = True  # type: ignore[attr-defined]
    DataFrameWriter.format = format_source  # type: ignore[method-assign]
    DataFrameWriter.mode = set_mode  # type: ignore[method-assign]
    DataFrameWriter.save = save_kafka_modes  # type: ignore[method-assign]
