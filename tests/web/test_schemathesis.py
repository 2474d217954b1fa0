"""Property-based tests of the JSON API against its own OpenAPI schema, in process."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from pydantic import ValidationError
from schemathesis.checks import CHECKS, load_all_checks

from app.main import create_app
from app.web.inputs import RunQuery

load_all_checks()
# Every check schemathesis has, not only the default set.
ALL_CHECKS: list[Any] = list(CHECKS.get_all())

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_api_conforms_to_its_schema(case: schemathesis.Case[Any]) -> None:
    if _beyond_the_schema(case):
        # A trainable count above the model's weights, or a percentage above 100: valid by the schema,
        # refused by a rule that depends on the model, with a 422 that says why.
        response = case.call()
        assert response.status_code == 422
        assert "trainable" in response.json()["message"]
        return
    case.call_and_validate(checks=ALL_CHECKS)


def _beyond_the_schema(case: schemathesis.Case[Any]) -> bool:
    """Whether the run's only refusal is the trainable rule, which the schema cannot state."""
    query = {key: str(value) for key, value in (case.query or {}).items()}
    try:
        RunQuery.model_validate(query)
    except ValidationError as exc:
        return {str(e["loc"][0]) for e in exc.errors()} == {"trainable"} and all(
            e["type"] == "trainable" for e in exc.errors()
        )
    return False
