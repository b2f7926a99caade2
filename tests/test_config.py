"""Client configuration: defaults, validation once at build time, clear errors."""

from __future__ import annotations

import ssl

import pytest

from pykaf._config import ClientConfig, parse_bootstrap
from pykaf.errors import ConfigError


def test_defaults_are_valid_and_documented() -> None:
    cfg = ClientConfig()
    assert cfg.bootstrap == [("localhost", 9092)]
    assert not cfg.use_tls and not cfg.use_sasl
    for name, _default, doc in ClientConfig.options():
        assert doc, f"option {name} has no documentation"


def test_unknown_option_suggests_the_right_name() -> None:
    with pytest.raises(ConfigError, match="did you mean 'request_timeout'"):
        ClientConfig.from_kwargs(request_timout=5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"request_timeout": 0},
        {"request_timeout": -1.0},
        {"connect_timeout": "10"},
        {"max_in_flight_per_connection": 0},
        {"max_in_flight_per_connection": 2.5},
        {"reconnect_backoff": -0.1},
        {"max_response_bytes": 10},
        {"security_protocol": "TLS"},
        {"sasl_mechanism": "GSSAPI"},
        {"sasl_mechanism": "PLAIN"},  # no user or password
        {"sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "u"},
        {"sasl_mechanism": "OAUTHBEARER"},  # no token provider
        {"security_protocol": "SASL_SSL"},  # SASL protocol, no mechanism
        {"security_protocol": "PLAINTEXT", "ssl_cafile": "/x"},
        {"bootstrap_servers": ""},
        {"bootstrap_servers": "host:notaport"},
        {"bootstrap_servers": "host:70000"},
    ],
)
def test_invalid_values_are_config_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ClientConfig.from_kwargs(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # a confluent-kafka style dict as the bootstrap (pykaf.sync.Producer({...}))
        ({"bootstrap_servers": {"bootstrap.servers": "h:9092"}}, "options as keywords"),
        ({"bootstrap_servers": 9092}, "must be 'host:port"),
        ({"bootstrap_servers": ["h:1", 2]}, "must be 'host:port"),
        # a string where a number belongs is a type error, not a range one
        ({"request_timeout": "abc"}, "must be a number, not str"),
        ({"retry_backoff": -1}, "must be >= 0"),
    ],
)
def test_config_errors_say_what_is_wrong(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ClientConfig.from_kwargs(**kwargs)


def test_bootstrap_parsing() -> None:
    assert parse_bootstrap("a:1, b:2,SSL://c:3") == [("a", 1), ("b", 2), ("c", 3)]
    assert parse_bootstrap(["[::1]:9093", "host"]) == [("::1", 9093), ("host", 9092)]


def test_tls_and_sasl_are_derived() -> None:
    ctx = ssl.create_default_context()
    cfg = ClientConfig.from_kwargs(ssl_context=ctx)
    assert cfg.use_tls and cfg.build_ssl_context() is ctx
    cfg = ClientConfig.from_kwargs(
        sasl_mechanism="scram-sha-512", sasl_username="u", sasl_password="p"
    )
    assert cfg.use_sasl and not cfg.use_tls
    assert ClientConfig.from_kwargs(security_protocol="SSL").use_tls


def test_missing_tls_files_are_config_errors() -> None:
    cfg = ClientConfig.from_kwargs(ssl_cafile="/nonexistent/ca.pem")
    with pytest.raises(ConfigError, match="cannot load TLS files"):
        cfg.build_ssl_context()


def test_replace_validates_again() -> None:
    cfg = ClientConfig()
    assert cfg.replace(client_id="x").client_id == "x"
    with pytest.raises(ConfigError):
        cfg.replace(request_timeout=0)


def test_configuration_reference_is_current() -> None:
    import importlib.util
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("gen", root / "tools" / "gen_config_docs.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    page = (root / "docs" / "configuration.md").read_text()
    assert page == gen.render(), "run: python tools/gen_config_docs.py"
    for name, _default, _doc in ClientConfig.options():
        assert f"`{name}`" in page
