"""Find or fetch an Apache Kafka distribution (its jars) for tests.

Apache Kafka's broker and its tools are Java programs published on Maven
Central. :func:`kafka_home` returns a directory whose ``lib/`` (or, for an
unpacked release tarball, ``libs/``) holds every jar they need, fetching them
once with the machine's ``mvn`` into a cache:

1. ``$PYKAF_KAFKA_HOME`` when set: it must already hold the jars (a release
   tarball unpacked there, or an earlier fetch). Nothing is downloaded.
2. else ``~/.cache/pykaf/kafka-<version>`` (``$XDG_CACHE_HOME`` is honoured),
   filled by ``mvn dependency:copy-dependencies`` from the pom in this
   package (:data:`POM_TEMPLATE`) on first use, under a file lock so that
   concurrent test sessions fetch once.

A missing ``java`` or ``mvn`` is a :class:`KafkaUnavailableError` that says
what to install.

:func:`spark_kafka_jars` fetches Spark's own Kafka connector
(``spark-sql-kafka-0-10``) the same way, into
``~/.cache/pykaf/spark-sql-kafka-<version>``, and gives the jars a local
SparkSession must add to load it (``spark.jars``): the connector and what it
needs that PySpark's own jars lack (``kafka-clients``, the token provider,
``commons-pool2``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "DEFAULT_SPARK_KAFKA_VERSION",
    "KAFKA_RELEASES",
    "LOG4J2_DEPENDENCIES",
    "POM_TEMPLATE",
    "RELOAD4J_DEPENDENCIES",
    "SPARK_KAFKA_POM_TEMPLATE",
    "KafkaRelease",
    "KafkaUnavailableError",
    "default_kafka_version",
    "find_java",
    "kafka_classpath",
    "kafka_home",
    "kafka_release",
    "spark_kafka_home",
    "spark_kafka_jars",
]

DEFAULT_KAFKA_VERSION = "4.4.0"
"""The Apache Kafka release the tests run.

4.4.0: the newest, its whole tool set, ``kafka-tools`` included, on Maven
Central. ``$PYKAF_KAFKA_VERSION`` overrides it (:func:`default_kafka_version`):
``make test-brokers`` runs the compatibility suite once per release of
:data:`KAFKA_RELEASES` that way.
"""

KAFKA_RELEASES: tuple[str, ...] = (
    "3.7.2",
    "3.8.1",
    "3.9.1",
    "4.0.2",
    "4.1.2",
    "4.2.2",
    "4.3.1",
    "4.4.0",
)
"""The releases pykaf is tested on (``make test-brokers``), oldest first.

The newest patch release of each line on Maven Central, and 4.3.1, the default
before 4.4.0. Any other patch release of these lines runs too.
"""
_OLDEST_LINE = (3, 7)  # KRaft with SCRAM at format time and a StorageTool pykaf drives
_LOG4J_VERSION = "2.26.1"
# kafka-tools depends on slf4j-api 1.7, which cannot bind log4j-slf4j2-impl: with
# it the broker logs nothing at all. slf4j-api 2.x is named explicitly.
_SLF4J_VERSION = "2.0.17"
_STAMP = ".pykaf-complete"  # written last: a directory without it is an interrupted fetch
_MVN_TIMEOUT = 900.0  # seconds; the first fetch is ~60 MB

#: The pom whose dependencies are Kafka's broker (``kafka_2.13``), its tools
#: (``kafka-tools``: VerifiableProducer, the perf tools, console clients) and
#: the release's logging (:data:`LOG4J2_DEPENDENCIES` or
#: :data:`RELOAD4J_DEPENDENCIES`). ``{kafka}`` is the version, ``{logging}``
#: the logging dependencies.
POM_TEMPLATE = """\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by pykaf.testing: the jars of Apache Kafka's broker and tools. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.pykaf</groupId>
  <artifactId>pykaf-kafka-dist</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>{kafka}</version>
    </dependency>
{logging}
  </dependencies>
</project>
"""

#: Kafka 4.x's logging: log4j 2 (KIP-653) through slf4j 2.
LOG4J2_DEPENDENCIES = f"""\
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>{_SLF4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>{_LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
      <version>{_LOG4J_VERSION}</version>
    </dependency>"""

#: Kafka 3.x's logging: slf4j 1.7 to reload4j (log4j 1's API, which 3.x's own
#: ``Log4jController`` calls), as the 3.x release tarballs ship.
RELOAD4J_DEPENDENCIES = """\
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>1.7.36</version>
    </dependency>"""


@dataclass(frozen=True)
class KafkaRelease:
    """What pykaf's launcher must do differently for one Apache Kafka release.

    Built by :func:`kafka_release`, which refuses releases pykaf cannot run.

    Attributes:
        version: the release, ``"3.9.1"``.
        line: its ``(major, minor)``.
    """

    version: str
    line: tuple[int, int]

    @property
    def log4j2(self) -> bool:
        """Kafka 4.0+ logs with log4j 2 (a YAML config); 3.x with log4j 1 (properties)."""
        return self.line >= (4, 0)

    @property
    def storage_features(self) -> bool:
        """Whether the storage tool takes ``--feature name=level`` (Kafka 3.8+)."""
        return self.line >= (3, 8)

    @property
    def share_groups(self) -> bool:
        """Whether the broker knows share groups' settings (KIP-932, Kafka 4.0+)."""
        return self.line >= (4, 0)

    @property
    def unclean_election_interval(self) -> bool:
        """Whether ``unclean.leader.election.interval.ms`` exists (KIP-966, Kafka 4.0+)."""
        return self.line >= (4, 0)

    @property
    def initial_task_delay(self) -> bool:
        """Whether ``log.initial.task.delay.ms`` exists (Kafka 3.8+; 3.7 waits a fixed 30 s)."""
        return self.line >= (3, 8)

    def pom(self) -> str:
        """The pom whose dependencies are this release's broker, tools and logging."""
        logging = LOG4J2_DEPENDENCIES if self.log4j2 else RELOAD4J_DEPENDENCIES
        return POM_TEMPLATE.format(kafka=self.version, logging=logging)


def default_kafka_version() -> str:
    """``$PYKAF_KAFKA_VERSION`` when set, else :data:`DEFAULT_KAFKA_VERSION`."""
    return os.environ.get("PYKAF_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION


def kafka_release(version: str | None = None) -> KafkaRelease:
    """The launcher's view of ``version`` (default :func:`default_kafka_version`).

    Raises:
        KafkaUnavailableError: at once, for a version that is not ``X.Y.Z`` or
            whose line pykaf cannot run: before 3.7 (ZooKeeper-era storage
            tools without SCRAM at format time) or after the newest line
            tested (5.x is not known yet).
    """
    version = version or default_kafka_version()
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if match is None:
        raise KafkaUnavailableError(
            f"Apache Kafka release {version!r} is not MAJOR.MINOR.PATCH (e.g. 4.4.0)"
        )
    line = (int(match.group(1)), int(match.group(2)))
    newest = tuple(int(part) for part in KAFKA_RELEASES[-1].split(".")[:2])
    if line < _OLDEST_LINE or line > newest:
        raise KafkaUnavailableError(
            f"pykaf.testing cannot run Apache Kafka {version}: it runs releases "
            f"{_OLDEST_LINE[0]}.{_OLDEST_LINE[1]} to {newest[0]}.{newest[1]} in KRaft mode "
            f"(tested: {', '.join(KAFKA_RELEASES)})"
        )
    return KafkaRelease(version, line)


#: The release of Spark's Kafka connector fetched by default: the newest on
#: Maven Central. PySpark 4.3.0 is on PyPI but Spark 4.3.0's jars are not on
#: Maven Central yet (``spark-sql-kafka-0-10_2.13`` stops at 4.2.0), and the
#: 4.2.0 connector loads and runs in a 4.3.0 session (``tests/spark``'s
#: parity tests use it). ``$PYKAF_SPARK_KAFKA_VERSION`` overrides it.
DEFAULT_SPARK_KAFKA_VERSION = "4.2.0"

#: The pom whose runtime dependencies are Spark's Kafka connector and what it
#: needs (``{spark}`` is its version). Hadoop is left out: PySpark ships it.
SPARK_KAFKA_POM_TEMPLATE = """\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by pykaf.testing: Spark's Kafka connector and its dependencies. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.pykaf</groupId>
  <artifactId>pykaf-spark-kafka</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>{spark}</version>
      <exclusions>
        <exclusion>
          <groupId>org.apache.hadoop</groupId>
          <artifactId>*</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
"""


class KafkaUnavailableError(RuntimeError):
    """Apache Kafka cannot be run here: no Java, no Maven, or the fetch failed."""


def find_java() -> str:
    """The ``java`` executable (``$JAVA_HOME/bin/java``, else ``java`` on PATH).

    Raises:
        KafkaUnavailableError: no Java runtime was found.
    """
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaUnavailableError(
            "Apache Kafka needs a Java 17+ runtime and no 'java' was found on PATH "
            "(install one, e.g. apt-get install openjdk-17-jre-headless, or set JAVA_HOME)"
        )
    return found


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pykaf"


def _jar_dir(home: Path) -> Path | None:
    """``home/lib`` (a pykaf fetch) or ``home/libs`` (a release tarball), if it has jars."""
    for name in ("lib", "libs"):
        directory = home / name
        if directory.is_dir() and any(directory.glob("kafka_2.13-*.jar")):
            return directory
    return None


def home_kafka_version() -> str | None:
    """The release of the jars in ``$PYKAF_KAFKA_HOME`` (from ``kafka_2.13-X.Y.Z.jar``).

    None when ``$PYKAF_KAFKA_HOME`` is unset, or holds no such jar (then
    :func:`kafka_home` says what is wrong with it).
    """
    override = os.environ.get("PYKAF_KAFKA_HOME")
    return jars_kafka_version(Path(override)) if override else None


def jars_kafka_version(home: Path) -> str | None:
    """The release of the distribution at ``home``, from its ``kafka_2.13-X.Y.Z.jar``."""
    directory = _jar_dir(home)
    if directory is None:
        return None
    for jar in sorted(directory.glob("kafka_2.13-*.jar")):
        match = re.fullmatch(r"kafka_2\.13-(\d+\.\d+\.\d+)\.jar", jar.name)
        if match is not None:
            return match.group(1)
    return None


def kafka_home(version: str | None = None) -> Path:
    """The directory of a usable Kafka distribution, fetching it on first use.

    Args:
        version: the Apache Kafka release (default :func:`default_kafka_version`);
            ignored when ``$PYKAF_KAFKA_HOME`` is set.

    Raises:
        KafkaUnavailableError: ``$PYKAF_KAFKA_HOME`` holds no Kafka jars, the
            release is one pykaf cannot run (:func:`kafka_release`, at once), or
            the fetch is impossible (no ``mvn``) or failed (its output is quoted).
    """
    override = os.environ.get("PYKAF_KAFKA_HOME")
    if override:
        home = Path(override)
        if _jar_dir(home) is None:
            raise KafkaUnavailableError(
                f"PYKAF_KAFKA_HOME={override} holds no Kafka jars (expected lib/ or libs/ "
                "with kafka_2.13-*.jar); unset it to let pykaf fetch Kafka with Maven"
            )
        return home
    release = kafka_release(version)
    version = release.version
    home = _cache_root() / f"kafka-{version}"
    if (home / _STAMP).exists() and _jar_dir(home) is not None:
        return home
    with _locked(home.parent / f"kafka-{version}.lock"):
        if not (home / _STAMP).exists():  # another session may have fetched it meanwhile
            _fetch(release, home)
    return home


def kafka_classpath(home: Path) -> str:
    """The Java class path of every jar of the distribution at ``home``."""
    directory = _jar_dir(home)
    if directory is None:
        raise KafkaUnavailableError(f"{home} holds no Kafka jars")
    return str(directory / "*")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fetch(release: KafkaRelease, home: Path) -> None:
    """Fetch ``release``'s jars from Maven Central into ``home/lib``."""
    _fetch_pom(release.pom(), home, f"Apache Kafka {release.version}", _jar_dir, [])


def _fetch_pom(
    pom_text: str,
    home: Path,
    what: str,
    check: Callable[[Path], Path | None],
    options: list[str],
) -> None:
    """Copy the dependencies of ``pom_text`` from Maven Central into ``home/lib``.

    They land in a staging directory beside ``home`` that is renamed to
    ``home`` once complete (and stamped), so an interrupted fetch leaves
    nothing that looks usable. ``check(staging)`` must find the jars;
    ``options`` are more ``-D`` settings for ``copy-dependencies``.
    """
    find_java()  # say what is missing before a long download
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailableError(
            f"fetching {what} needs Maven and no 'mvn' was found on PATH "
            "(install it, e.g. apt-get install maven, or point PYKAF_KAFKA_HOME at an "
            "unpacked Kafka release)"
        )
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{home.name}-", dir=home.parent))
    try:
        pom = staging / "pom.xml"
        pom.write_text(pom_text)
        command = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging / 'lib'}",
            *options,
        ]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=_MVN_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise KafkaUnavailableError(
                f"fetching {what} with Maven took over {_MVN_TIMEOUT:.0f} s"
            ) from exc
        if done.returncode != 0 or check(staging) is None:
            output = (done.stdout + done.stderr)[-3000:]
            raise KafkaUnavailableError(
                f"fetching {what} with Maven failed (exit {done.returncode}): {output}"
            )
        (staging / _STAMP).write_text(f"{what}\n")
        if home.exists():
            shutil.rmtree(home)
        staging.rename(home)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


# -- Spark's Kafka connector ---------------------------------------------------------


def _connector_dir(home: Path) -> Path | None:
    """``home/lib`` if it holds Spark's Kafka connector."""
    directory = home / "lib"
    if directory.is_dir() and any(directory.glob("spark-sql-kafka-0-10_2.13-*.jar")):
        return directory
    return None


def _artifact(jar: Path) -> str:
    """A jar's artifact name: ``kafka-clients-3.9.2.jar`` -> ``kafka-clients``.

    The version is what follows the first ``-<digits>.``, so
    ``spark-sql-kafka-0-10_2.13-4.2.0.jar`` is ``spark-sql-kafka-0-10_2.13``.
    """
    match = re.match(r"(.+?)-(\d+\.[\w.-]*)\.jar$", jar.name)
    return match.group(1) if match else jar.stem


def spark_kafka_home(version: str | None = None) -> Path:
    """The cache directory holding Spark's Kafka connector ``version`` and its dependencies.

    Fetched with Maven on first use (under a file lock), like :func:`kafka_home`.

    Args:
        version: the connector's release (default ``$PYKAF_SPARK_KAFKA_VERSION``,
            else :data:`DEFAULT_SPARK_KAFKA_VERSION`).

    Raises:
        KafkaUnavailableError: no ``java`` or ``mvn``, or the fetch failed
            (Maven's output is quoted: e.g. a version not on Maven Central).
    """
    version = version or os.environ.get("PYKAF_SPARK_KAFKA_VERSION") or DEFAULT_SPARK_KAFKA_VERSION
    home = _cache_root() / f"spark-sql-kafka-{version}"
    if (home / _STAMP).exists() and _connector_dir(home) is not None:
        return home
    with _locked(home.parent / f"spark-sql-kafka-{version}.lock"):
        if not (home / _STAMP).exists():
            _fetch_pom(
                SPARK_KAFKA_POM_TEMPLATE.format(spark=version),
                home,
                f"Spark's Kafka connector {version}",
                _connector_dir,
                ["-DincludeScope=runtime"],  # not Spark itself (provided) nor tests
            )
    return home


def spark_kafka_jars(version: str | None = None, provided: Path | None = None) -> list[Path]:
    """The jars a SparkSession adds (``spark.jars``) to load Spark's Kafka connector.

    The connector's runtime dependencies less those whose artifact (of any
    version) is already in ``provided``, PySpark's own ``jars`` directory
    (found from the installed ``pyspark`` when not given): Scala, Hadoop,
    compression codecs and logging come from Spark itself, so only the
    connector, its token provider, ``kafka-clients`` and ``commons-pool2``
    remain.

    Raises:
        KafkaUnavailableError: as :func:`spark_kafka_home`.
        ImportError: ``provided`` is not given and pyspark is not installed.
    """
    if provided is None:
        import pyspark

        provided = Path(pyspark.__file__).parent / "jars"
    have = {_artifact(jar) for jar in provided.glob("*.jar")}
    directory = _connector_dir(spark_kafka_home(version))
    assert directory is not None  # spark_kafka_home checked it
    return sorted(jar for jar in directory.glob("*.jar") if _artifact(jar) not in have)
