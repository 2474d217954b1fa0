"""The one URL builder: every address reads back as the stage, the run, the phase and the options."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from hypothesis import given
from hypothesis import strategies as st

from app.domain.stages import Stage
from app.web.inputs import Theme
from app.web.links import Links

# Values as people type them into the run form: spaces, commas, ampersands, non-ASCII.
_values = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)
_runs = st.dictionaries(st.sampled_from(["model", "params", "gpus", "capacity", "units"]), _values)
_keeps = st.dictionaries(st.sampled_from(["controls", "calculator"]), _values)


@given(
    run=_runs,
    keep=_keeps,
    theme=st.sampled_from(list(Theme)),
    stage=st.sampled_from(list(Stage)),
    phase=st.none() | st.integers(0, 20),
)
def test_an_address_reads_back_as_the_stage_the_run_the_phase_and_the_options_in_order(
    run: dict[str, str], keep: dict[str, str], theme: Theme, stage: Stage, phase: int | None
) -> None:
    links = Links("/prefix/", tuple(run.items()), phase, tuple(keep.items()), theme)
    for at in (phase, None, 3):
        address = urlsplit(links.at(stage, at))
        assert address.path == "/prefix/"
        moment = [] if at is None else [("phase", str(at))]
        themed = [] if theme is Theme.DEFAULT else [("theme", theme.value)]
        expected = [("stage", stage.value), *run.items(), *moment, *keep.items(), *themed]
        assert parse_qsl(address.query, keep_blank_values=True) == expected
    assert links(stage) == links.at(stage, phase)
