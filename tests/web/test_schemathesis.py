"""Property-based tests of the JSON API against its own OpenAPI schema, in process."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.core.result import Err

from app.domain.configs import (
    ConfigError,
    NoConfig,
    cut_parameter,
    deepspeed_config,
    deepspeed_refused,
    read_deepspeed,
)
from app.domain.scenario import resolve
from app.main import create_app
from app.web.config_view import LAYOUT_EXPORTS, ConfigFormat, ConfigQuery, layout_written
from app.web.inputs import RunQuery
from tests.conftest import examples

load_all_checks()
# Every check schemathesis has, not only the default set.
ALL_CHECKS: list[Any] = list(CHECKS.get_all())

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())


# The rules that join fields, which a schema of one field at a time cannot state: a trainable count
# within the model's weights, nodes times GPUs per node equal to gpus, no CPU for offload=nvme, a shard
# group or hpZ's group that divides the cards and lines up with the nodes (`run.groups_refused`), a model cut
# that divides the cards and the blocks (`parallel.cut_refused`); and a model's config.json, a string to the
# schema, whose keys only its reader judges (`hf_config.read_config`: a 422 naming the key).
CROSS_FIELD = frozenset({"trainable", "cluster", "offload_device", "groups", "cut", "config"})


# One test id per operation, by hand: schemathesis's own `schema.parametrize()` gives its seven operations
# one and the same node id, and pytest-xdist, which runs every run here, then ran only one of them.
OPERATIONS = {
    operation.label: operation
    for operation in (result.ok() for result in schema.get_all_operations() if not isinstance(result, Err))
}


def test_every_operation_is_tested() -> None:
    gets = {f"GET /api/{name}" for name in ("stages", "layout", "memory", "step", "timeline", "measured", "config")}
    assert set(OPERATIONS) == gets | {"POST /api/config"}


@pytest.mark.parametrize("label", sorted(OPERATIONS))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_api_conforms_to_its_schema(label: str, data: st.DataObject) -> None:
    case: schemathesis.Case[Any] = data.draw(OPERATIONS[label].as_strategy())
    said = _beyond_the_schema(case)
    if said is not None:
        # Valid by the schema, refused by a rule across fields (or, in a DeepSpeed config, across
        # keys: offload_param below stage 3), with a 422 that names what was refused.
        response = case.call()
        assert response.status_code == 422
        assert said in response.json()["message"]
        return
    case.call_and_validate(checks=ALL_CHECKS)


def _beyond_the_schema(case: schemathesis.Case[Any]) -> str | None:
    """What the only refusal of a schema-valid request names, when it is a rule the schema cannot state."""
    if case.method.upper() != case.operation.method.upper():
        return None  # another method, sent to hear it refused (405)
    query = {key: str(value) for key, value in (case.query or {}).items()}
    try:
        RunQuery.model_validate(query)
    except ValidationError as exc:
        if {e["type"] for e in exc.errors()} <= CROSS_FIELD:
            return str(exc.errors()[0]["loc"][0])
        return None
    if case.method == "GET" and case.path == "/api/config":
        # DeepSpeed has no hybrid sharding (MiCS is gone), nor fp32 accumulation of bf16 gradients without
        # ZeRO: its export of such a run is refused, naming the parameter that asks for it.
        asked = ConfigQuery.model_validate(query)
        scenario = resolve(asked.inputs())
        run = scenario.run
        if asked.format is ConfigFormat.DEEPSPEED and deepspeed_refused(asked.stage, run):
            with pytest.raises(NoConfig) as refused:
                deepspeed_config(asked.stage, run)
            return refused.value.parameter
        if asked.format is ConfigFormat.FSDP2 and (cut := cut_parameter(run)):
            return cut  # a model cut across cards: the layout's exports say it, not fully_shard over every card
        if asked.format in LAYOUT_EXPORTS:
            # torchtitan and FSDP2 have no ZeRO-1; hybrid groups must split the data-parallel cards.
            try:
                layout_written(asked.format, asked.stage, run, scenario.architecture)
            except NoConfig as exc:
                return exc.parameter
    if case.method == "POST" and case.path == "/api/config" and isinstance(case.body, dict):
        try:
            read_deepspeed(case.body)
        except ConfigError as exc:
            return exc.key
    return None
