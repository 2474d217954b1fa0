"""Property-based tests of the JSON API against its own OpenAPI schema, in process."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, load_all_checks

from app.main import create_app

load_all_checks()
# Every check schemathesis has, not only the default set.
ALL_CHECKS: list[Any] = list(CHECKS.get_all())

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_api_conforms_to_its_schema(case: schemathesis.Case[Any]) -> None:
    case.call_and_validate(checks=ALL_CHECKS)
