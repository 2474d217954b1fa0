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
    # (Other methods, which schemathesis tries as well, get their 405 from the checks below.)
    if case.method == "GET" and (refused := _beyond_the_schema(case)):
        # Valid by the schema, refused by a rule across fields, with a 422 that names the field: a
        # trainable count above the model's weights, nodes that do not make up the GPUs, or
        # offload_device=cpu with offload=nvme.
        response = case.call()
        assert response.status_code == 422
        assert all(name in response.json()["message"] for name in refused)
        return
    case.call_and_validate(checks=ALL_CHECKS)


CROSS_FIELD = {"trainable", "cluster", "offload_device"}
"""The refusals the schema cannot state: each depends on another field."""


def _beyond_the_schema(case: schemathesis.Case[Any]) -> set[str]:
    """The fields refused only by the rules across fields; empty when the schema says it all."""
    query = {key: str(value) for key, value in (case.query or {}).items()}
    try:
        RunQuery.model_validate(query)
    except ValidationError as exc:
        if all(e["type"] in CROSS_FIELD for e in exc.errors()):
            return {str(e["loc"][0]) for e in exc.errors()}
    return set()
