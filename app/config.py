"""Settings read from the environment once, at start-up."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

FRAME_ANCESTORS_ENV = "ZERO_BANDS_FRAME_ANCESTORS"
DEFAULT_FRAME_ANCESTORS = "*"

# A CSP source expression: a keyword, a scheme, or a host with optional scheme, port and path.
# Anything else (a ';' or ',' above all) could smuggle a second directive into the header.
_SOURCE = re.compile(
    r"""^(?:
        \*
      | '(?:self|none)'
      | [a-z][a-z0-9+.-]*:
      | (?:[a-z][a-z0-9+.-]*://)?(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::(?:\d{1,5}|\*))?(?:/[^\s;,]*)?
    )$""",
    re.IGNORECASE | re.VERBOSE,
)


class ConfigError(ValueError):
    """A setting in the environment is not usable; the message says which and why."""


@dataclass(frozen=True)
class Settings:
    """What an operator can configure."""

    frame_ancestors: str = DEFAULT_FRAME_ANCESTORS

    def __post_init__(self) -> None:
        if not self.frame_ancestors.isprintable():
            raise ConfigError(f"{FRAME_ANCESTORS_ENV} contains a line break or control character")
        sources = self.frame_ancestors.split(" ")
        sources = [source for source in sources if source]
        if not sources:
            raise ConfigError(f"{FRAME_ANCESTORS_ENV} is empty; use 'none' to forbid embedding")
        for source in sources:
            if not _SOURCE.match(source):
                raise ConfigError(
                    f"{FRAME_ANCESTORS_ENV}: {source!r} is not a CSP source expression "
                    "(examples: * 'self' 'none' https: https://*.example.edu)"
                )
        if "'none'" in sources and len(sources) > 1:
            raise ConfigError(f"{FRAME_ANCESTORS_ENV}: 'none' cannot be combined with other sources")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """Settings from environment variables, with defaults for the unset ones."""
        return cls(frame_ancestors=environ.get(FRAME_ANCESTORS_ENV, DEFAULT_FRAME_ANCESTORS).strip())
