"""The grid in Debian's Chromium: switching, history, keyboard, embedding, accessibility."""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, Route, expect

from tests.browser.conftest import Watch, _free_port, screenshot, settled

STAGES = [
    ("dp", [64, 64, 64, 64]),
    ("zero1", [64, 64, 8, 8]),
    ("zero2", [64, 8, 8, 8]),
    ("zero3", [8, 8, 8, 8]),
]
BANDS = ["weights", "gradients", "master", "moments"]
TITLES = {"dp": "Data parallelism", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3"}


# The focused cell's card, weight, band and state, read as a reader's browser has them: from its
# card, its column and its classes.
ACTIVE_CELL = """() => {
  const c = document.activeElement;
  return [c.closest(".card").dataset.cardIndex, c.parentElement.dataset.weight,
          c.classList[1].replace("band-", ""), c.classList[2]];
}"""


def solid_counts(page: Page) -> list[int]:
    return [page.locator(f"#grid .cell.band-{band}.solid").count() for band in BANDS]


def test_switching_swaps_the_grid_and_back_forward_land_on_the_right_stage(
    page: Page, server: str, watch: Watch
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server + "/")
    grid = page.locator("#grid")
    expect(grid).to_have_attribute("data-stage", "dp")
    page.evaluate("window.__sameDocument = true")

    for stage, solid in STAGES[1:] + STAGES[:1]:
        page.click(f"#switch-{stage}")
        expect(grid).to_have_attribute("data-stage", stage)
        expect(page).to_have_title(f"{TITLES[stage]} · ZeRO Bands")
        expect(page).to_have_url(f"{server}/?stage={stage}")
        assert solid_counts(page) == solid
        expect(page.locator(f"#switch-{stage}")).to_have_attribute("aria-current", "page")
        expect(page.locator("table.figures tr.current")).to_have_attribute("data-stage", stage)
        # htmx swapped the widget: same document, focus back on the link that was clicked.
        assert page.evaluate("window.__sameDocument") is True
        assert page.evaluate("document.activeElement.id") == f"switch-{stage}"
        settled(page)

    swaps = [r for r in watch.requests if "stage=" in r.url and r.headers.get("hx-request") == "true"]
    # Each switch names the stage it left (`from`), so the new one can mark what changed.
    assert [parse_qs(urlsplit(r.url).query)["stage"] for r in swaps] == [["zero1"], ["zero2"], ["zero3"], ["dp"]]
    assert [parse_qs(urlsplit(r.url).query)["from"] for r in swaps] == [["dp"], ["zero1"], ["zero2"], ["zero3"]]

    for expected in ["zero3", "zero2", "zero1"]:
        page.go_back()
        expect(grid).to_have_attribute("data-stage", expected)
        expect(page).to_have_url(f"{server}/?stage={expected}")
        assert solid_counts(page) == dict(STAGES)[expected]
    page.go_forward()
    expect(grid).to_have_attribute("data-stage", "zero2")
    restores = [r for r in watch.requests if r.headers.get("hx-history-restore-request") == "true"]
    assert restores, "back/forward should ask the server, not a cache"

    page.reload()
    expect(grid).to_have_attribute("data-stage", "zero2")
    expect(page.locator("#switch-zero2")).to_have_attribute("aria-current", "page")
    watch.assert_clean(page)


@pytest.mark.parametrize(("stage", "solid"), STAGES)
def test_deep_link_shows_the_stage_and_looks_right(
    page: Page, server: str, watch: Watch, stage: str, solid: list[int]
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?stage={stage}")
    expect(page.locator("#grid")).to_have_attribute("data-stage", stage)
    assert solid_counts(page) == solid
    screenshot(page, f"grid-{stage}-1280")
    watch.assert_clean(page)


def test_links_work_without_javascript(browser: Browser, server: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server + "/?stage=zero1")
    page.click("#switch-zero3")
    page.wait_for_url(f"{server}/?stage=zero3&from=zero1")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero3")
    assert solid_counts(page) == [8, 8, 8, 8]
    # Without JavaScript the hint in the link still marks what changed: weights and gradients, 2 × 8 × 7.
    expect(page.locator("#grid .cell.changed")).to_have_count(112)
    context.close()


def test_keyboard_moves_between_cells_and_each_names_itself(page: Page, server: str, watch: Watch) -> None:
    page.goto(server + "/?stage=zero1")
    # The grid comes right after the switcher; from its last tab, Tab enters the grid: its first card, read by
    # its sentence, then an arrow key into its cells.
    page.focus("#switch-zero3")
    page.keyboard.press("Tab")
    card = page.locator("#grid .card").first
    expect(card).to_be_focused()
    expect(card).to_have_accessible_name("GPU 0")
    expect(card).to_have_accessible_description(re.compile(r"^GPU 0 keeps the bf16 weights and the bf16 gradients"))
    page.keyboard.press("ArrowDown")
    assert page.evaluate(ACTIVE_CELL)[:3] == ["0", "0", "weights"]

    page.keyboard.press("ArrowRight")
    for _ in range(3):
        page.keyboard.press("ArrowDown")
    assert page.evaluate(ACTIVE_CELL) == ["0", "1", "moments", "dashed"]
    tip = page.evaluate("getComputedStyle(document.activeElement, '::after').content")
    assert "Weight 1, Adam moments" in tip
    assert "GPU 1 holds it on this weight's behalf" in tip

    # A stage's key while a cell has the focus: that cell keeps it through the swap (static/swap.js),
    # and the arrows go on from it in the new arrangement, where GPU 0 keeps only its own weights.
    page.keyboard.press("3")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero3")
    assert page.evaluate(ACTIVE_CELL) == ["0", "1", "moments", "dashed"]
    for _ in range(3):
        page.keyboard.press("ArrowUp")
    assert page.evaluate(ACTIVE_CELL) == ["0", "1", "weights", "dashed"]

    # One tab stop: the next Tab leaves the grid for what follows it, the key's "More".
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.parentElement.id") == "key-more"
    watch.assert_clean(page)


def test_hover_shows_the_cell_details(page: Page, server: str) -> None:
    page.goto(server + "/?stage=zero3")
    cell = page.locator('#grid [data-card-index="4"] .column[data-weight="6"] > .cell.band-weights')
    cell.hover()
    tip = cell.evaluate("el => getComputedStyle(el, '::after').content")
    assert "Weight 6, Weights (bf16, 2 B): not stored here. GPU 6 holds it" in tip


def test_bad_stage_is_shown_in_place_by_the_htmx_swap(page: Page, server: str, watch: Watch) -> None:
    page.goto(server + "/?stage=zero2")
    page.evaluate("htmx.ajax('GET', '?stage=%3Cb%3Ezero9', {target: '#widget', swap: 'outerHTML'})")
    alert = page.locator('#widget [role="alert"]')
    expect(alert).to_be_visible()
    expect(alert).to_contain_text("“stage” must be 'dp', 'zero1', 'zero2' or 'zero3'; “<b>zero9” is not.")
    assert page.locator("#widget b").count() == 0
    page.click("#switch-zero1")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero1")
    watch.assert_clean(page, allow_status={422})


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def course_page(tmp_path: Path, server: str) -> Iterator[str]:
    """A page on another origin that embeds the app, as a course site would: the embed, the route made for it."""
    (tmp_path / "lesson.html").write_text(
        f"<!doctype html><title>Lesson</title><h1>Lesson 4</h1>"
        f'<iframe title="ZeRO Bands" src="{server}/embed?stage=zero1" width="1200" height="900"></iframe>'
    )
    port = _free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), partial(_Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/lesson.html"
    httpd.shutdown()
    httpd.server_close()


def test_embeds_in_a_course_page_on_another_origin(page: Page, course_page: str) -> None:
    page.goto(course_page)
    frame = page.frame_locator("iframe")
    expect(frame.locator("#grid")).to_have_attribute("data-stage", "zero1")
    frame.locator("#switch-zero2").click()
    expect(frame.locator("#grid")).to_have_attribute("data-stage", "zero2")


@pytest.mark.parametrize(("width", "height"), [(390, 844), (1280, 800), (1920, 1080)])
@pytest.mark.parametrize(
    "run", ["", "&gpus=16&capacity=80GiB", "&gpus=4096&model=gpt-3-175b&capacity=192GiB", "&phase=9"]
)
def test_nothing_is_clipped_from_phone_to_projector(page: Page, server: str, width: int, height: int, run: str) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(server + "/?stage=zero2" + run)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    overflowing = page.evaluate(
        """[...document.querySelectorAll('#grid .card, #grid .column, #grid .axis, .switch, .legend, .run-form')]
             .filter(el => el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1)
             .map(el => el.className)"""
    )
    assert overflowing == []
    # Every band stays tall enough to see, the 2-byte ones included.
    heights = page.evaluate(
        "[...document.querySelectorAll('#grid .cell')].map(el => el.getBoundingClientRect().height)"
    )
    assert min(heights) >= 6
    screenshot(page, f"grid-zero2-{width}-{run.count('&') and run.split('&')[1].replace('=', '')}")


@pytest.mark.parametrize(
    "path",
    [
        "/?stage=dp",
        "/?stage=zero3",
        "/?stage=nope",
        "/?stage=zero3&phase=9&capacity=80GiB&model=llama-3-8b",
        "/?stage=zero1&offload=optimizer&gpus=16&phase=4",
    ],
)
def test_axe_finds_no_accessibility_violations(page: Page, server: str, path: str) -> None:
    page.goto(server + path)
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()
    # With a cell focused too (by a click, or the arrow keys from its card): the plot it is in stays hidden.
    if page.locator("#grid .cell").count():
        page.locator("#grid .card").nth(1).locator(".cell").first.click()
        results = Axe().run(page)
        assert results.violations_count == 0, results.generate_report()


@pytest.mark.parametrize("query", ["stage=zero3", "stage=zero2&gpus=16&phase=12"])
def test_a_screen_reader_meets_one_sentence_a_card_and_no_cell(page: Page, server: str, query: str) -> None:
    page.goto(f"{server}/?{query}")
    cards = page.locator("#grid .card")
    # Each card a group named by its title and described by its sentence (tests/web/test_card_words.py has
    # them word for word), and not one cell an image in the accessibility tree.
    for index in range(cards.count()):
        card = cards.nth(index)
        title = card.locator("h3").inner_text()
        expect(page.get_by_role("group", name=title, exact=True)).to_have_accessible_description(
            re.compile(rf"^{title} keeps .+ GiB (now|at rest|at its peak)\.$")
        )
    assert page.get_by_role("img", name=re.compile(r"^GPU \d+, (weight|column) \d+")).count() == 0
    # Each cell still names itself to sighted readers, on hover.
    cell = cards.nth(2).locator(".cell.dashed").first
    cell.hover()
    assert "not here" in cell.evaluate("el => getComputedStyle(el, '::after').content").replace("stored ", "")


# Each card's bar, as Chromium draws it: its width, and the pixels of its stretches at rest and in hand.
_BAR_PIXELS = """() => Array.from(document.querySelectorAll('#grid .card .card-bar svg'), svg => {
  const sum = (held) => Array.from(svg.querySelectorAll('rect'))
    .filter(r => r.classList.contains('in-hand') === held && !r.classList.contains('peak'))
    .reduce((s, r) => s + r.getBoundingClientRect().width, 0);
  return [svg.getBoundingClientRect().width, sum(false), sum(true)];
})"""

# The lesson's 30B on 8 GPUs, by hand, in bytes of the bar's one scale, data parallelism's 480e9 B (16 B a
# weight, nothing in hand): at rest 16, 5.5, 3.75 and 2 B a weight × 30e9; in hand at the peak nothing,
# nothing, one layer's 3.75e9 gradients (7.5e9 B), and its weights too (15e9 B).
_SCALE = 480e9
_STAGE_BYTES = {
    "dp": (480e9, 0.0),
    "zero1": (165e9, 0.0),
    "zero2": (112.5e9, 7.5e9),
    "zero3": (60e9, 15e9),
}


def test_every_bar_is_on_one_scale_and_the_longest_holds_the_most(page: Page, server: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    drawn = {}
    for stage, (rest, hand) in _STAGE_BYTES.items():
        page.goto(f"{server}/?stage={stage}")
        bars = page.evaluate(_BAR_PIXELS)
        assert len(bars) == 8
        # One scale on every card: pixels for bytes, at rest and in hand alike, and nothing past the bar's end.
        for width, at_rest, in_hand in bars:
            assert at_rest == pytest.approx(width * rest / _SCALE, abs=0.3), stage
            assert in_hand == pytest.approx(width * hand / _SCALE, abs=0.3), stage
            assert at_rest + in_hand <= width + 0.01
        drawn[stage] = (bars[0][1], bars[0][2])
    # The state at rest in true proportion, as before (186.0 / 63.9 / 43.6 / 23.2 px at 1280 for a 186 px bar):
    # 16 : 5.5 : 3.75 : 2.
    dp = drawn["dp"][0]
    assert [drawn[s][0] / dp for s in _STAGE_BYTES] == pytest.approx([1, 5.5 / 16, 3.75 / 16, 2 / 16], abs=0.003)
    # The longest bar is the most memory: ZeRO-3's 14 GiB in hand is never longer than its 55.9 GiB at rest.
    totals = {stage: sum(pixels) for stage, pixels in drawn.items()}
    peaks = {stage: sum(nbytes) for stage, nbytes in _STAGE_BYTES.items()}
    assert sorted(totals, key=totals.__getitem__) == sorted(peaks, key=peaks.__getitem__)
    assert drawn["zero3"][1] < drawn["zero3"][0]


@pytest.mark.parametrize("phase", [0, 1, 5, 9, 12, 16, 17, 20])
def test_in_the_step_what_is_in_hand_never_runs_past_the_scale(page: Page, server: str, phase: int) -> None:
    # ZeRO-3's step: its 60e9 B at rest never moves; what it holds in hand, at most the peak's 15e9 B of the
    # 480e9 B scale, is stacked after it, and the pale peak so far after that, all inside the bar.
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?stage=zero3&phase={phase}")
    [width, at_rest, in_hand], *_ = page.evaluate(_BAR_PIXELS)
    assert at_rest == pytest.approx(width * 60e9 / _SCALE, abs=0.3)
    assert in_hand <= width * 15e9 / _SCALE + 0.3
    ends = page.evaluate(
        "Array.from(document.querySelectorAll('#grid .card .card-bar svg'), svg => Math.max(...Array.from("
        "svg.querySelectorAll('rect'), r => r.getBoundingClientRect().right)) - svg.getBoundingClientRect().right)"
    )
    assert max(ends) <= 0.01


def test_describing_a_run_updates_grid_bars_and_verdicts(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server + "/?stage=zero3")
    page.evaluate("window.__sameDocument = true")
    grid = page.locator("#grid")

    page.fill("#f-gpus", "64")
    page.press("#f-gpus", "Tab")  # a change event, as a person leaving the field
    expect(grid).to_have_attribute("data-gpus", "64")
    expect(page.locator("#grid .card")).to_have_count(8)
    # Nodes of 8: the rest of node 0, nodes 1 to 6 on the network between, the start of node 7.
    expect(page.locator("#grid .card-gap")).to_have_text(
        ["… GPU 4 to GPU 7: the same pattern", "… GPU 56 to GPU 59: the same pattern"]
    )
    expect(page.locator("#grid .network-link")).to_contain_text("Nodes 1 to 6: the same pattern")
    settled(page)

    page.select_option("#f-model", "llama-3-70b")
    expect(page.locator("table.figures caption")).to_contain_text("Llama 3 70B, 70,553,706,496 weights, on 64 GPUs")
    expect(page.locator("#grid .verdict")).to_have_count(0)
    settled(page)

    page.fill("#f-capacity", "80GiB")
    page.press("#f-capacity", "Enter")
    verdicts = page.locator("#grid .card .verdict")
    expect(verdicts).to_have_count(8)
    # One sequence of 8,192 tokens keeps 206.8 GiB of activations at the backward's start: over the card.
    expect(verdicts.first).to_contain_text("✗ over by 147.2 GiB")
    expect(page.locator("#grid .card").first.locator(".card-foot")).to_contain_text("Peak 227.2 GiB")
    expect(page.locator("#grid .card").first.locator("rect.gathered")).to_have_count(1)
    expect(page.locator("#grid .card").first.locator("rect.activations")).to_have_count(1)
    expect(page.locator("#grid .card").first.locator("line.capacity")).to_have_count(1)
    expect(page.locator(".grid-note")).to_contain_text("The card's 80.0 GiB is the line.")
    expect(page).to_have_url(f"{server}/?stage=zero3&model=llama-3-70b&gpus=64&capacity=80GiB")
    settled(page)

    page.click("#switch-zero1")
    expect(grid).to_have_attribute("data-stage", "zero1")
    expect(verdicts.first).to_contain_text("✗ over by 402.0 GiB")
    expect(page.locator("#grid .card").first.locator(".card-foot")).to_contain_text("Peak 482.0 GiB")
    expect(page.locator("#grid .card").first.locator("line.capacity")).to_have_count(1)
    expect(page.locator("table.figures tr.current .verdict")).to_have_text("✗ does not fit")
    assert page.evaluate("window.__sameDocument") is True
    screenshot(page, "run-llama-70b-64-zero1-1280")

    page.go_back()
    expect(grid).to_have_attribute("data-stage", "zero3")
    expect(page.locator("#f-capacity")).to_have_value("80GiB")
    watch.assert_clean(page)


def test_another_model_starts_from_the_count_of_the_model_shown(page: Page, server: str, watch: Watch) -> None:
    page.goto(server + "/?stage=zero3&model=llama-3-70b&gpus=16")
    count = page.locator("#f-params")
    expect(count).to_have_value("70553706496")
    expect(count).to_be_editable()  # the script's: without it the preset's count is read-only
    page.select_option("#f-model", "custom")
    # The custom model keeps the 70B count, now editable, and the figures stay those of 70B weights.
    expect(page).to_have_url(f"{server}/?stage=zero3&model=custom&params=70553706496&gpus=16")
    expect(count).to_have_value("70553706496")
    expect(count).not_to_have_attribute("readonly", "")
    expect(page.locator("table.figures caption")).to_contain_text("Custom model, 70,553,706,496 weights, on 16 GPUs")
    settled(page)
    page.fill("#f-params", "13B")
    page.press("#f-params", "Enter")
    expect(page.locator("table.figures caption")).to_contain_text("13,000,000,000 weights")
    watch.assert_clean(page)


def test_a_typo_in_the_run_form_keeps_the_run_on_the_screen(page: Page, server: str, watch: Watch) -> None:
    page.goto(server + "/?stage=zero2&gpus=16")
    grid = page.locator("#grid")
    page.fill("#f-gpus", "0")
    page.press("#f-gpus", "Tab")
    expect(page.locator("#f-gpus")).to_have_attribute("aria-invalid", "true")
    # The 16 cards stay drawn (not the 8 of the default) and the address names them, as the form sent
    # the run (the model named), not the typo.
    expect(grid).to_have_attribute("data-gpus", "16")
    expect(page.locator("#grid .card")).to_have_count(16)
    expect(page).to_have_url(f"{server}/?stage=zero2&model=seed-30b&gpus=16")
    settled(page)
    # A second change while the typo stands still draws the run on the screen, with the new model.
    page.select_option("#f-model", "llama-3-8b")
    expect(page.locator("table.figures caption")).to_contain_text("Llama 3 8B")
    expect(grid).to_have_attribute("data-gpus", "16")
    # The address and the share link follow the run drawn: the new model, the 16 GPUs still shown.
    expect(page).to_have_url(f"{server}/?stage=zero2&model=llama-3-8b&gpus=16")
    expect(page.locator("#embed-this")).to_have_attribute("hx-get", "/share?stage=zero2&model=llama-3-8b&gpus=16")
    settled(page)
    page.fill("#f-gpus", "32")
    page.press("#f-gpus", "Tab")
    expect(grid).to_have_attribute("data-gpus", "32")
    expect(page.locator("#f-gpus")).not_to_have_attribute("aria-invalid", "true")
    watch.assert_clean(page, allow_status={422})  # the two answers to the typo


def test_a_typo_without_javascript_keeps_the_run_on_the_screen(browser: Browser, server: str) -> None:
    # The browser names the page the form was sent from (Referrer-Policy same-origin): its 16 GPUs stay.
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server + "/?stage=zero2&gpus=16")
    page.fill("#f-gpus", "0")
    page.click('#run-form button[type="submit"]')
    expect(page.locator("#f-gpus")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#grid")).to_have_attribute("data-gpus", "16")
    expect(page.locator("#grid .card")).to_have_count(16)
    expect(page.locator("#embed-open")).to_have_attribute("href", re.compile(r"gpus=16"))
    context.close()


def test_the_run_form_works_without_javascript(browser: Browser, server: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server + "/?stage=zero2")
    page.select_option("#f-model", "llama-3-8b")
    page.fill("#f-gpus", "16")
    page.click('#run-form button[type="submit"]')
    expect(page.locator("#grid")).to_have_attribute("data-gpus", "16")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero2")
    expect(page.locator("#grid .card")).to_have_count(16)
    expect(page.locator("table.figures caption")).to_contain_text("Llama 3 8B")
    context.close()


def test_stepping_through_zero3_from_the_keyboard(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server + "/?stage=zero3")
    page.click("#watch-step")
    panel = page.locator("#step")
    expect(panel).to_have_attribute("data-phase", "0")
    page.evaluate("window.__sameDocument = true; document.activeElement.blur()")

    # Each forward column is three phases: gather (the tally grows), compute, discard.
    tallies = ["0.125P"] * 3 + ["0.25P"] * 3 + ["0.375P"]
    for phase, tally in enumerate(tallies, start=1):
        page.keyboard.press("ArrowRight")
        expect(panel).to_have_attribute("data-phase", str(phase))
        expect(page).to_have_url(f"{server}/?stage=zero3&phase={phase}")
        expect(page.locator("#tally strong")).to_have_text(tally)
        layer, part = divmod(phase - 1, 3)
        gathered = page.locator("#grid .cell.gathered")
        if part == 2:  # discarded: no gathered copy left anywhere
            expect(gathered).to_have_count(0)
            continue
        expect(gathered).to_have_count(7)  # the layer's weights on every card but its owner
        expect(page.locator(f'#grid .column[data-weight="{layer}"] > .cell.gathered')).to_have_count(7)

    page.keyboard.press("ArrowLeft")
    expect(panel).to_have_attribute("data-phase", "6")
    page.keyboard.press("End")
    expect(panel).to_have_attribute("data-phase", "52")
    expect(page.locator("#tally strong")).to_have_text("3P")
    expect(page.locator("#grid .cell.gathered")).to_have_count(0)
    page.keyboard.press("Home")
    expect(panel).to_have_attribute("data-phase", "0")
    assert page.evaluate("window.__sameDocument") is True
    screenshot(page, "step-zero3-phase-0-1280")

    page.go_back()
    expect(panel).to_have_attribute("data-phase", "52")
    watch.assert_clean(page)


def test_play_advances_one_request_at_a_time(page: Page, server: str, watch: Watch) -> None:
    page.goto(server + "/?stage=zero2&phase=49")
    play = page.locator("#step-play")
    expect(play).to_be_visible()
    play.click()
    expect(play).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#step")).to_have_attribute("data-phase", "52", timeout=15_000)
    expect(page.locator("#step-play")).to_have_attribute("aria-pressed", "false")
    steps = [r.url for r in watch.requests if r.headers.get("hx-request") == "true"]
    assert [url.split("phase=")[1] for url in steps] == ["50", "51", "52"]
    watch.assert_clean(page)


def test_play_works_under_reduced_motion(browser: Browser, server: str) -> None:
    # Stepping is not animation: Play steps for people who ask for less motion too.
    context = browser.new_context(reduced_motion="reduce")
    page = context.new_page()
    page.goto(server + "/?stage=zero1&phase=3")
    play = page.locator("#step-play")
    expect(play).to_be_enabled()
    expect(play).to_have_text("▶ Play")
    play.click()
    expect(play).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#step")).to_have_attribute("data-phase", "4", timeout=10_000)
    page.keyboard.press("ArrowRight")
    expect(play).to_have_attribute("aria-pressed", "false")
    expect(page.locator("#step")).to_have_attribute("data-phase", "5")
    # Space plays and pauses as it does for everyone.
    page.locator("#step-heading").click()
    page.keyboard.press(" ")
    expect(play).to_have_attribute("aria-pressed", "true")
    page.keyboard.press(" ")
    expect(play).to_have_attribute("aria-pressed", "false")
    context.close()


def test_stepping_without_javascript_is_one_phase_per_page_load(browser: Browser, server: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server + "/?stage=zero3&phase=1")
    expect(page.locator("#step-play")).to_be_hidden()
    page.click("#step-next")
    page.wait_for_url(f"{server}/?stage=zero3&phase=2")
    expect(page.locator("#step")).to_have_attribute("data-phase", "2")
    page.fill("#phase-slider", "9")
    page.click(".phase-form button")
    expect(page.locator("#step")).to_have_attribute("data-phase", "9")
    context.close()


# The widget as the server draws it: every cell's classes and name, and the texts a reader sees.
_DRAWN = """() => {
  const w = document.getElementById("widget");
  return {
    cells: Array.from(w.querySelectorAll("#grid .cell"), c => [c.className, c.getAttribute("aria-label")]),
    text: w.innerText,
    links: Array.from(w.querySelectorAll("[hx-get]"), a => a.getAttribute("hx-get")),
  };
}"""


@pytest.mark.parametrize(
    ("start", "click"),
    [
        ("/?stage=dp", "#switch-zero3"),  # another arrangement: other states and names
        ("/?stage=zero3&phase=2", "#step-next"),  # the next phase of a step: other holdings and rings
        ("/?stage=zero2&phase=4", "#step-leave"),  # out of the step: other columns, labels and bars
    ],
)
def test_a_swap_changes_only_what_differs_and_ends_as_the_server_draws_it(
    page: Page, server: str, start: str, click: str
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server + start)
    settled(page)
    page.evaluate("() => { window.__card = document.querySelector('#grid .card'); }")
    with page.expect_request(lambda r: r.headers.get("hx-request") == "true") as request:
        page.click(click)
    expect(page).not_to_have_url(server + start)
    settled(page)
    patched = page.evaluate(_DRAWN)
    # Patched in place: the first card is the same element (its plot's cells are put in afresh, static/swap.js).
    assert page.evaluate("() => window.__card === document.querySelector('#grid .card')") is True
    # The address htmx asked for, loaded afresh as a page: what the patched widget must now equal.
    page.goto(request.value.url)
    settled(page)
    assert patched == page.evaluate(_DRAWN)


@pytest.mark.parametrize("width", [390, 1280])
@pytest.mark.parametrize(("gpus", "cards"), [(16, 16), (1024, 8)])
def test_cards_keep_their_bars_in_line(page: Page, server: str, width: int, gpus: int, cards: int) -> None:
    # With 16 columns every other weight is labelled, and the card's own (odd on odd cards) too:
    # each axis keeps both label rows. Titles take the widest one's room ("GPU 15", "GPU 1,023"), so
    # totals break alike. Every card stands as tall and the bars line up.
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"{server}/?stage=zero1&gpus={gpus}")
    heights = page.evaluate("Array.from(document.querySelectorAll('#grid .axis'), a => a.offsetHeight)")
    assert len(heights) == cards
    assert max(heights) - min(heights) <= 0.5
    tops = page.evaluate(
        "Array.from(document.querySelectorAll('#grid .card'), c => c.querySelector('.bar').getBoundingClientRect().top"
        " - c.getBoundingClientRect().top)"
    )
    assert max(tops) - min(tops) <= 0.5


@pytest.mark.parametrize(
    ("trouble", "said"),
    [("busy", "Busy"), ("too-long", "far too long"), ("unreachable", "No answer from the server")],
)
def test_a_click_the_server_refuses_says_why_and_the_next_that_works_clears_it(
    page: Page, server: str, trouble: str, said: str
) -> None:
    page.goto(server + "/?stage=zero2")
    settled(page)

    def refuse(route: Route) -> None:
        if trouble == "unreachable":
            route.abort("connectionrefused")
        elif trouble == "busy":
            route.fulfill(status=503, headers={"Retry-After": "1"}, body="busy", content_type="text/html")
        else:
            route.fulfill(status=400, body="Invalid HTTP request received.", content_type="text/plain")

    page.route(lambda url: "stage=zero3" in url, refuse)
    page.locator("#table-wrap, .table-wrap").first.scroll_into_view_if_needed()  # wherever the page is scrolled
    page.click("#row-zero3")
    note = page.locator("#request-trouble")
    expect(note).to_be_visible()
    expect(note).to_contain_text(said)
    expect(page.locator("#narration")).to_contain_text(said)  # heard too
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero2")  # and nothing else changed
    assert page.evaluate("(() => { const r = document.getElementById('request-trouble').getBoundingClientRect();"
                         " return r.top >= 0 && r.bottom <= window.innerHeight; })()")  # fmt: skip
    page.unroute_all()
    page.click("#row-zero1")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero1")
    expect(note).to_be_hidden()
