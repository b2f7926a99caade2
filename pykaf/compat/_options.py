"""How the drop-in shims' errors name the options the user gave (by the user's names)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pykaf.errors import ConfigError


@dataclass(frozen=True)
class UserNames:
    """pykaf's option names as the replaced library spells them, for error messages.

    An error about ``max_message_bytes`` must name ``max_request_size`` to a
    kafka-python user and ``message.max.bytes`` to a confluent-kafka one: the
    option the user set, with the value as the user gave it.

    Attributes:
        names: pykaf option -> the user's name for it (the one the user gave
            when several map to it).
        given: the user's name -> the value as given.
        scales: pykaf option -> the factor from pykaf's unit to the user's
            (1000 for seconds given in milliseconds).
    """

    names: Mapping[str, str]
    given: Mapping[str, Any] = field(default_factory=dict)
    scales: Mapping[str, float] = field(default_factory=dict)

    def text(self, error: BaseException) -> str:
        """``error``'s message, naming the user's options instead of pykaf's."""
        if isinstance(error, ConfigError) and error.option is not None:
            option = error.option
            user = self.names.get(option)
            if user is None:
                return self._renamed(str(error))
            if user in self.given:
                shown = repr(self.given[user])
            else:
                shown = repr(_in_user_units(error.value, self.scales.get(option, 1)))
            return f"{user}={shown}: {self._renamed(error.reason)}"
        return self._renamed(str(error))

    def _renamed(self, text: str) -> str:
        # Only identifiers with an underscore: plain words (acks, linger) stay
        # as they are in prose, and a name the user shares is left alone.
        own = [n for n, user in self.names.items() if "_" in n and user != n]
        if not own:
            return text
        pattern = re.compile(r"\b(" + "|".join(sorted(own, key=len, reverse=True)) + r")\b")
        return pattern.sub(lambda m: self.names[m.group(1)], text)


def _in_user_units(value: Any, scale: float) -> Any:
    if scale == 1 or isinstance(value, bool) or not isinstance(value, int | float):
        return value
    converted = value * scale
    return int(converted) if float(converted).is_integer() else converted
