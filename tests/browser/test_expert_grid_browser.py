"""A mixture of experts' grid in Debian's Chromium: Mixtral 8x7B with ep 8, on the projector and on a phone."""

from __future__ import annotations

from itertools import pairwise

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Host, Watch, screenshot, settled

pytestmark = pytest.mark.slow

MIXTRAL_EP8 = "model=mixtral-8x7b&gpus=8&ep=8&stage=zero3"

_COLUMNS = """() => Array.from(document.querySelectorAll('#grid .card'), card => {
  const box = card.getBoundingClientRect();
  const widths = Array.from(card.querySelectorAll('.plot .column'), c => c.getBoundingClientRect().width);
  const experts = Array.from(card.querySelectorAll('.plot .column.expert'), c => c.getBoundingClientRect());
  const dense = card.querySelectorAll('.plot .column:not(.expert)');
  const last = dense[dense.length - 1].getBoundingClientRect();
  return { left: box.left, right: box.right, bottom: box.bottom, widths, experts: experts.length,
           after: experts[0].left >= last.right };
})"""

_LOOKS = """() => {
  const look = s => { const c = getComputedStyle(document.querySelector(s));
    return [c.borderTopStyle, c.backgroundImage] };
  return { elsewhere: look('#grid .cell.absent.expert'), dashed: look('#grid .cell.dashed') };
}"""


@pytest.mark.parametrize(
    ("theme", "width", "height", "first_screen"),
    [("&theme=projector", 1024, 768, True), ("", 390, 844, False)],
    ids=["projector", "phone"],
)
def test_each_card_draws_its_experts_apart(
    page: Page, server: str, watch: Watch, theme: str, width: int, height: int, first_screen: bool
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?{MIXTRAL_EP8}{theme}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    cards = page.evaluate(_COLUMNS)
    assert len(cards) == 8
    for card in cards:
        # Sixteen columns, the experts' eight after the dense ones, each wide enough to see its fill.
        assert len(card["widths"]) == 16
        assert card["experts"] == 8
        assert card["after"]
        assert min(card["widths"]) >= 4
        assert card["left"] >= 0
        assert card["right"] <= width
    if first_screen:  # the projector: every card on the first screen
        assert max(card["bottom"] for card in cards) <= height
    assert page.locator("#grid .experts-note").is_visible()
    # Another card's experts: no outline, hatched; unlike ZeRO's dashed outline.
    looks = page.evaluate(_LOOKS)
    assert looks["elsewhere"][0] != "dashed"
    assert "repeating-linear-gradient" in looks["elsewhere"][1]
    assert looks["dashed"][0] == "dashed"
    screenshot(page, f"experts-mixtral-ep8{'-projector' if theme else '-phone'}")
    watch.assert_clean(page)


def test_the_step_walks_with_the_experts(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"{server}/?model=mixtral-8x7b&gpus=16&ep=8&stage=zero3&phase=1&theme=projector")
    assert page.locator("#grid .column.expert .cell.gathered").count() > 0
    page.locator("body").press("PageDown")
    page.wait_for_url("**phase=2**")
    assert page.locator("#grid .column.expert .cell.gathered.active").count() > 0
    screenshot(page, "experts-step-projector")
    watch.assert_clean(page)


@pytest.mark.parametrize(
    "query",
    [
        "model=llama-3-70b&gpus=16&tp=8&pp=2&stage=zero1",
        "model=mixtral-8x7b&gpus=16&ep=8&stage=zero1",
        "model=mixtral-8x7b&gpus=16&ep=8&stage=zero3&controls=step&phase=10",
        "model=deepseek-v3&gpus=2048&nodes=256&pp=16&ep=64&stage=zero1",
    ],
    ids=["cut", "mixtral", "mixtral-step", "deepseek"],
)
def test_the_embed_fits_a_760_px_column(page: Page, server: str, host: Host, query: str) -> None:
    # A node's or stage's frame reached 0.35rem into main's 0.3rem margin: 760.75 px, a scrollbar in the frame.
    page.set_viewport_size({"width": 1000, "height": 900})
    frame_html = f'<iframe src="{server}/embed?{query}" width="760" height="800" title="Lesson"></iframe>'
    page.goto(host.page("lesson.html", frame_html))
    expect(page.frame_locator("iframe").locator("#grid .card").first).to_be_visible()
    frame = page.frame(url=lambda url: url.startswith(server + "/embed"))
    assert frame is not None
    settled(frame)
    width, client = frame.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width <= client
    boxes = frame.evaluate("Array.from(document.querySelectorAll('.node-box'), b => b.getBoundingClientRect().right)")
    assert boxes
    assert max(boxes) <= client


_LABELS = """() => Array.from(document.querySelectorAll('#grid .card .axis'), axis =>
  Array.from(axis.children, label => {
    const range = document.createRange();
    range.selectNodeContents(label);
    const box = range.getBoundingClientRect();
    return [box.left, box.right];
  }))"""


@pytest.mark.parametrize(
    ("theme", "width", "height"), [("&theme=projector", 1024, 768), ("", 1024, 768)], ids=["projector", "1024"]
)
def test_in_the_step_the_numbers_under_a_card_do_not_overlap(
    page: Page, server: str, watch: Watch, theme: str, width: int, height: int
) -> None:
    # In the step the grid is not `.cut`: with the usual gaps a column was 3 px wide under a 16 px number.
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?{MIXTRAL_EP8}&phase=10{theme}")
    for labels in page.evaluate(_LABELS):
        assert len(labels) == 16
        assert all(left[1] <= right[0] + 0.5 for left, right in pairwise(labels))
    watch.assert_clean(page)


_STEP_CARDS = """() => Array.from(document.querySelectorAll('#grid .card'), card => {
  const box = card.getBoundingClientRect();
  const labels = Array.from(card.querySelector('.axis').children, label => {
    const range = document.createRange();
    range.selectNodeContents(label);
    const b = range.getBoundingClientRect();
    return [b.left, b.right];
  });
  const look = cell => { const c = getComputedStyle(cell);
    return { border: c.borderTopStyle, color: c.borderTopColor, image: c.backgroundImage, inner: cell.clientWidth } };
  return { right: box.right - parseFloat(getComputedStyle(card).borderRightWidth), labels,
           columns: Array.from(card.querySelectorAll('.column.expert'), c => c.querySelectorAll('.cell.absent').length),
           elsewhere: Array.from(card.querySelectorAll('.column.expert .cell.absent'), look),
           held: Array.from(card.querySelectorAll('.column.expert .cell:is(.solid, .gathered)'), look),
           dashed: Array.from(card.querySelectorAll('.cell.dashed'), look) };
})"""


@pytest.mark.parametrize(
    ("query", "width", "height"),
    [
        ("stage=zero3&phase=2", 1024, 768),
        ("stage=zero3&phase=10", 1024, 768),
        ("stage=zero3&phase=26", 1024, 768),
        ("stage=zero1&phase=2", 1024, 768),
        ("stage=zero3&phase=2", 1280, 720),
    ],
    ids=["zero3-2", "zero3-10", "zero3-26", "zero1-2", "zero3-2-1280"],
)
def test_in_the_step_on_the_projector_the_three_kinds_of_cell_stay_apart(
    page: Page, server: str, watch: Watch, query: str, width: int, height: int
) -> None:
    # A field test on two nodes: the projector's 3 px borders filled a 6 px column, so another rank's experts lost
    # their hatch (no room inside the borders) and held and dashed cells were alike dotted pills; the numbers at
    # 1rem overlapped and ran past the card's edge.
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?model=mixtral-8x7b&gpus=16&ep=8&{query}&theme=projector")
    cards = page.evaluate(_STEP_CARDS)
    assert len(cards) == 16
    for card in cards:
        labels = card["labels"]
        assert len(labels) == 16
        assert all(left[1] <= right[0] + 0.5 for left, right in pairwise(labels))
        assert labels[-1][1] <= card["right"]
        # Seven of the eight experts' columns are another rank's: hatched, with room inside to show it, no outline.
        assert sorted(card["columns"]) == [0] + [max(card["columns"])] * 7
        for cell in card["elsewhere"]:
            assert "repeating-linear-gradient" in cell["image"]
            assert cell["inner"] >= 3
            assert cell["border"] != "dashed"
            assert cell["color"] == "rgba(0, 0, 0, 0)"
        assert card["held"]
        assert all(cell["border"] == "solid" and cell["color"] != "rgba(0, 0, 0, 0)" for cell in card["held"])
        assert card["dashed"]
        assert all(cell["border"] == "dashed" and cell["image"] == "none" for cell in card["dashed"])
    screenshot(page, f"experts-step-projector-{width}-{query.replace('&', '-').replace('=', '')}")
    watch.assert_clean(page)
