"""Themes, print, phone and accessibility in Debian's Chromium: what fits, what shows, what axe says."""

from __future__ import annotations

import re
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import Watch, screenshot, settled

STAGES = ["dp", "zero1", "zero2", "zero3"]
WCAG_AA = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]}}

BOX = "el => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }"
BOTTOMS = "els => els.map(el => el.getBoundingClientRect().bottom)"


def _bottom(page: Page, selector: str) -> float:
    bottom: float = page.locator(selector).evaluate(BOX)[3]
    return bottom


def _card_bottoms(page: Page) -> list[float]:
    bottoms: list[float] = page.locator("#grid .card").evaluate_all(BOTTOMS)
    return bottoms


def _luminance(css: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"[\d.]+", css)[:3])

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two computed rgb() colours."""
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _style(page: Page, selector: str, prop: str, pseudo: str | None = None) -> str:
    value: str = page.locator(selector).first.evaluate(
        "(el, [p, pseudo]) => getComputedStyle(el, pseudo).getPropertyValue(p)", [prop, pseudo]
    )
    return value


# Arriving by the switcher (`from`) adds the sentence saying what changed: the cards stay above the fold.
# With the activations' and the overheads' bands too: a Llama run with a card to fit, overheads counted.
NEW_BANDS = "&model=llama-3-8b&capacity=80GiB&overheads=1"


@pytest.mark.parametrize("arrival", ["", "&from=dp", "&from=zero3", NEW_BANDS])
@pytest.mark.parametrize("stage", STAGES)
def test_default_at_1280_shows_every_card_and_the_key_above_the_fold(
    page: Page, server: str, stage: str, arrival: str
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?stage={stage}{arrival}")
    bottoms = _card_bottoms(page)
    assert len(bottoms) == 8
    assert max(bottoms) <= 800
    assert _bottom(page, ".legend .key.bands") <= 800
    assert _bottom(page, ".legend .key.states") <= 800
    if stage == "zero1":
        screenshot(page, "theme-default-zero1-1280")


# What must be on the projector's one screen (issue 33: the cards first, in type the back row reads):
# every card and the stage's cost (its traffic beside the cards at rest from 1181 px; in the step the
# tally, in the panel beside the cards from 1181 px, else in the bar at the foot of the window), and,
# from 1181 px, the drawings of what moves. The key follows the cards, in the back row's type: it no
# longer fits beside them on a projector's first screen, and the teacher says it.
_ON_SCREEN = """() => {
  const box = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const boxes = Array.from(document.querySelectorAll('#grid .card'), (c, i) => ['GPU ' + i, box(c)]);
  const step = document.querySelector('#step');
  const bar = document.querySelector('.step-bar');
  const foot = bar && getComputedStyle(bar).position === 'fixed';
  // At rest below 1181 px the cards take the screen and the words follow them: the cost is the step's.
  if (step || innerWidth >= 1181) {
    boxes.push(['cost', box(document.querySelector(!step ? '#traffic-line' : foot ? '.step-where' : '#tally'))]);
  }
  if (innerWidth >= 1181) {
    document.querySelectorAll('.in-flight .transfer').forEach((t, i) => boxes.push(['drawing ' + i, box(t)]));
  }
  return boxes;
}"""


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize(("width", "height"), [(1024, 768), (1280, 720), (1920, 1080)])
def test_the_projector_shows_cards_key_and_cost_on_one_screen_at_rest_and_in_every_phase(
    page: Page, server: str, watch: Watch, stage: str, width: int, height: int
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    # "from": arriving by the switcher, with the sentence saying what changed.
    arrival = f"&from={'zero3' if stage == 'dp' else 'dp'}"
    for moment in ["", arrival, *(f"&phase={phase}" for phase in range(21))]:
        page.goto(f"{server}/?stage={stage}{moment}&theme=projector")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        boxes: list[tuple[str, list[float]]] = page.evaluate(_ON_SCREEN)
        assert len([name for name, _ in boxes if name.startswith("GPU")]) == 8
        outside = [
            name
            for name, (left, top, right, bottom) in boxes
            if left < 0 or top < 0 or right > width or bottom > height
        ]
        assert outside == [], moment
        if moment.startswith("&phase"):
            expect(page.locator("#tally")).to_contain_text(re.compile(r"[0-9.]+P of [23]P"))
            expect(page.locator(".step-where")).to_contain_text(re.compile(r"· [0-9.]+P of [23]P"))
        # The form is folded away below, not gone.
        expect(page.locator("#run-form")).to_be_attached()
    watch.assert_clean(page)
    if stage == "zero3":
        page.goto(f"{server}/?stage=zero3&phase=10&theme=projector")
        screenshot(page, f"theme-projector-zero3-10-{width}x{height}")


@pytest.mark.parametrize("stage", STAGES)
def test_the_projector_holds_the_new_bands_on_one_screen(page: Page, server: str, stage: str) -> None:
    page.set_viewport_size({"width": 1920, "height": 1080})
    for moment in ["", "&phase=1", "&phase=9", "&phase=16"]:
        page.goto(f"{server}/?stage={stage}{NEW_BANDS}{moment}&theme=projector")
        expect(page.locator("#grid .card").first.locator("rect.activations, rect.overheads")).not_to_have_count(0)
        boxes: list[tuple[str, list[float]]] = page.evaluate(_ON_SCREEN)
        outside = [
            name for name, (left, top, right, bottom) in boxes if min(left, top) < 0 or right > 1920 or bottom > 1080
        ]
        assert outside == [], moment


def test_projector_type_is_larger_and_darker(browser: Browser, server: str) -> None:
    sizes: dict[str, dict[str, Any]] = {}
    for theme in ("default", "projector"):
        page = browser.new_page(viewport={"width": 1920, "height": 1080})
        # Phase 25 gathers the last column's weights for the backward pass: a transfer is drawn.
        page.goto(f"{server}/?stage=zero3&phase=25&theme={theme}")
        sizes[theme] = {
            "sub": float(_style(page, ".card-sub", "font-size")[:-2]),
            "axis": float(_style(page, ".axis", "font-size")[:-2]),
            "axis_colour": _style(page, ".axis", "color"),
            "card": _style(page, ".card", "background-color"),
            "label": page.locator(".transfer .node-label").first.evaluate(BOX),
            "cell_border": float(_style(page, "#grid .cell", "border-top-width")[:-2]),
        }
        page.close()
    projector, default = sizes["projector"], sizes["default"]
    # Per-card figures and axis numbers: larger than 16 px, and in full-strength ink, not grey.
    assert projector["sub"] > 16
    assert projector["axis"] > 16
    assert contrast(projector["axis_colour"], projector["card"]) >= 12
    assert contrast(default["axis_colour"], default["card"]) < 12
    # The transfer drawing's labels are drawn larger than in the default theme.
    label_height = projector["label"][3] - projector["label"][1]
    assert label_height > default["label"][3] - default["label"][1]
    assert label_height >= 16
    assert projector["cell_border"] > default["cell_border"]


@pytest.mark.parametrize("theme", ["default", "projector"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_band_edge_stands_out_from_the_card(browser: Browser, server: str, theme: str, scheme: str) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800}, color_scheme=scheme)  # type: ignore[arg-type]
    page.goto(f"{server}/?stage=zero2&theme={theme}")
    card = _style(page, ".card", "background-color")
    for band, state in [(b, s) for b in ("weights", "gradients", "master", "moments") for s in ("solid", "dashed")]:
        if band == "weights" and state == "dashed":
            continue  # ZeRO-2 keeps every weight on every card
        edge = _style(page, f"#grid .cell.band-{band}.{state}", "border-top-color")
        assert contrast(edge, card) >= 3, (band, state, edge, card)
    page.close()


def test_dark_mode_follows_the_system(browser: Browser, server: str) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800}, color_scheme="dark")
    page.goto(f"{server}/?stage=zero3&phase=9")
    background = _style(page, "html", "background-color")
    ink = _style(page, "html", "color")
    assert _luminance(background) < 0.05
    assert contrast(ink, background) >= 7
    # The tooltip stays readable: its text against its own background.
    cell = page.locator("#grid .cell").first
    cell.focus()
    tip_bg = _style(page, "#grid .cell:focus", "background-color", "::after")
    tip_fg = _style(page, "#grid .cell:focus", "color", "::after")
    assert contrast(tip_bg, tip_fg) >= 4.5
    screenshot(page, "theme-dark-zero3-9-1280")
    page.close()


def _pdf_pages(data: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", data))


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("paper", ["A4", "Letter"])
# The default run, and the widest: 1,024 cards with the fit columns and a verdict under every card.
@pytest.mark.parametrize("run", ["", "&gpus=1024&capacity=80GiB"])
def test_print_fits_one_page_without_controls(page: Page, server: str, stage: str, paper: str, run: str) -> None:
    page.goto(f"{server}/?stage={stage}{run}")
    page.emulate_media(media="print")
    for hidden in (
        "#run-form",
        ".switcher",
        "#watch-step",
        "#theme-toggle",
        "#fullscreen",
        ".skip-link",
        "#embed-this",
    ):
        expect(page.locator(hidden)).to_be_hidden()
    for shown in ("#grid", ".legend .key.bands", ".figures"):
        expect(page.locator(shown)).to_be_visible()
    # Filled cells print as filled even without background graphics: their colours are kept, and
    # their border is thick, unlike a gap's thin dashes.
    solid = "#grid .cell.solid"
    assert _style(page, solid, "print-color-adjust") == "exact"
    assert float(_style(page, solid, "border-top-width")[:-2]) >= 3
    if stage != "dp":  # data parallelism has no gaps
        assert _style(page, "#grid .cell.dashed", "border-top-style") == "dashed"
    assert _pdf_pages(page.pdf(format=paper)) == 1
    if stage == "zero1" and paper == "A4" and not run:
        page.set_viewport_size({"width": 718, "height": 1047})
        screenshot(page, "theme-print-zero1-a4")


def test_print_of_a_step_hides_its_controls(page: Page, server: str) -> None:
    page.goto(f"{server}/?stage=zero3&phase=9")
    page.emulate_media(media="print")
    expect(page.locator(".step-controls")).to_be_hidden()
    expect(page.locator(".step-explanation")).to_be_visible()
    assert _pdf_pages(page.pdf(format="A4")) <= 2


def test_on_a_phone_the_grid_comes_before_the_form(page: Page, server: str) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{server}/?stage=zero1")
    grid, form = page.locator("#grid").evaluate(BOX), page.locator("#run-form").evaluate(BOX)
    assert grid[3] <= form[1]
    screenshot(page, "theme-phone-zero1-390")


CONTROLS = """() => [...document.querySelectorAll(
    'a[href], a[role="link"], button, input, select, summary, [tabindex="0"]')]
  .filter(el => el.getClientRects().length && getComputedStyle(el).visibility !== 'hidden')
  .filter(el => el.type !== 'hidden')
  // Links inside a sentence are exempt (WCAG 2.5.8, inline); so are the grid's cells, whose size is
  // the data (the essential exception), reached by one tab stop and the arrow keys.
  .filter(el => !el.closest('.colophon, .cell'))
  .map(el => { const b = el.getBoundingClientRect();
    return [el.id || el.className || el.tagName, b.width, b.height]; })"""


@pytest.mark.parametrize("width", [390, 1280, 1920])
@pytest.mark.parametrize(
    ("path", "least"),
    [
        ("/?stage=zero1", 20),
        ("/?stage=zero3&phase=9", 20),
        ("/?stage=zero2&phase=4&theme=projector", 20),
        ("/embed?stage=zero1&phase=3&controls=step&calculator=1", 20),
        ("/compare?left=zero1&right=zero3", 8),
    ],
)
def test_every_control_is_at_least_24_px(page: Page, server: str, width: int, path: str, least: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(server + path)
    # Open what folds away, so the controls inside are measured too.
    for summary in page.locator("details > summary").all():
        if summary.is_visible():
            summary.click()
    controls = page.evaluate(CONTROLS)
    assert len(controls) >= least
    small = [c for c in controls if c[1] < 24 or c[2] < 24]
    assert small == []


def test_skip_link_and_focus_always_visible(page: Page, server: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?stage=zero3&phase=9")
    page.keyboard.press("Tab")
    skip = page.locator(".skip-link")
    expect(skip).to_be_focused()
    _, top, _, bottom = skip.evaluate(BOX)
    assert top >= 0
    assert bottom <= 800
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    expect(page.locator("#grid .card").first).to_be_focused()  # the grid's tab stop, read by its sentence
    # Every stop on the way through the page draws a visible focus ring.
    page.locator(".skip-link").focus()
    missing = []
    for _ in range(45):
        page.keyboard.press("Tab")
        ring = page.evaluate(
            """() => { const el = document.activeElement, s = getComputedStyle(el);
                 return [el.id || el.className || el.tagName, s.outlineStyle, parseFloat(s.outlineWidth)]; }"""
        )
        if ring[0] != "BODY" and (ring[1] == "none" or ring[2] < 2):
            missing.append(ring)
    assert missing == []


OFFLOAD = "&offload=optimizer&theme=projector"


@pytest.mark.parametrize("stage", ["zero1", "zero2", "zero3"])
def test_the_projector_shows_the_optimizer_leaving_for_the_host_on_one_screen(
    page: Page, server: str, stage: str, watch: Watch
) -> None:
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"{server}/?stage={stage}&theme=projector")
    assert page.locator("#grid .host").count() == 0
    # Switch to offload with the form, as a person would: the master copy and the moments leave every card.
    page.locator("#more-host summary").click()
    page.select_option("#f-offload", "optimizer")
    expect(page.locator("#grid .host").first).to_be_visible()
    for card in page.locator("#grid section.card").all():
        expect(card.locator(".host .cell.band-master.on-host")).to_have_count(8)
        expect(card.locator(".host .cell.band-moments.on-host")).to_have_count(8)
        expect(card.locator(".stack > .plot .cell.band-master")).to_have_count(0)
    # The morph put the new card's parts in whole: a plot and its host's strip in one stack, none nested.
    expect(page.locator("#grid section.card > .stack")).to_have_count(8)
    expect(page.locator("#grid .plot .plot")).to_have_count(0)
    # And the clicker's PageDown steps on from there with the strips in place.
    page.keyboard.press("PageDown")
    expect(page.locator("#step")).to_be_visible()
    expect(page.locator("#grid section.card > .stack.in-step")).to_have_count(8)
    expect(page.locator("#grid .plot .plot")).to_have_count(0)
    page.goto(f"{server}/?stage={stage}{OFFLOAD}")
    boxes: list[tuple[str, list[float]]] = page.evaluate(_ON_SCREEN)
    outside = [
        name for name, (left, top, right, bottom) in boxes if min(left, top) < 0 or right > 1920 or bottom > 1080
    ]
    assert outside == []
    for host in page.locator("#grid .host").all():
        box = host.bounding_box()
        assert box is not None
        assert box["y"] + box["height"] <= 1080
    watch.assert_clean(page)
    if stage == "zero2":
        screenshot(page, "projector-offload-zero2-1920x1080")


VIEWS = [
    ("/?stage=zero1&offload=optimizer&theme=projector&host_memory=300GB", "light"),
    ("/?stage=zero3&offload=nvme&accounting=deepspeed&phase=19", "dark"),
    ("/embed?stage=zero2&offload=optimizer", "light"),
    *[(f"/?stage={s}", "light") for s in STAGES],
    *[(f"/?stage={s}", "dark") for s in STAGES],
    *[(f"/?stage={s}&theme=projector", "light") for s in STAGES],
    *[(f"/?stage={s}&phase=9", "light") for s in STAGES],
    ("/?stage=zero3&phase=10&gpus=16&capacity=80GiB&model=llama-3-8b", "dark"),
    ("/?stage=zero1&phase=18&theme=projector", "light"),
    ("/?stage=zero2&theme=projector", "dark"),
    ("/?stage=zero2&from=zero1", "light"),
    ("/embed?stage=zero2", "light"),
    ("/embed?stage=zero3&phase=9&controls=step&calculator=1", "dark"),
    ("/compare?left=zero1&right=zero3", "light"),
    ("/compare?left=dp&right=zero2&theme=projector", "dark"),
    ("/measured?stage=zero3&impl=fsdp2", "light"),
    ("/measured?stage=zero2", "dark"),
    ("/measured?stage=zero1&theme=projector", "light"),
]


@pytest.mark.parametrize(("path", "scheme"), VIEWS)
@pytest.mark.parametrize("width", [1280, 1920])
def test_axe_finds_no_wcag_22_aa_violations(browser: Browser, server: str, path: str, scheme: str, width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 1000}, color_scheme=scheme)  # type: ignore[arg-type]
    page.goto(server + path)
    settled(page)
    results = Axe().run(page, options=WCAG_AA)
    assert results.violations_count == 0, results.generate_report()
    page.close()


def test_the_theme_survives_swaps_and_the_toggle_leaves_it(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"{server}/?stage=zero1&theme=projector")
    html = page.locator("html")
    expect(html).to_have_class("theme-projector")
    page.click("#switch-zero3")
    expect(page).to_have_url(re.compile(r"stage=zero3.*theme=projector"))
    page.click("#watch-step")
    expect(page).to_have_url(re.compile(r"stage=zero3.*phase=0.*theme=projector"))
    settled(page)
    page.click("#step-next")
    expect(page).to_have_url(re.compile(r"phase=1.*theme=projector"))
    settled(page)
    page.select_option("#f-units", "GB")
    expect(page).to_have_url(re.compile(r"units=GB.*theme=projector"))
    settled(page)
    expect(html).to_have_class("theme-projector")
    page.click("#theme-toggle")
    expect(html).to_have_class("theme-default")
    expect(page).to_have_url(re.compile(r"stage=zero3.*units=GB.*phase=1$"))
    watch.assert_clean(page)


LOOK = """el => { const s = getComputedStyle(el);
  return [s.borderTopStyle, s.borderTopColor, s.backgroundColor, s.backgroundImage, s.outlineStyle]; }"""


def test_forced_colours_keep_every_state_apart(browser: Browser, server: str) -> None:
    """Under Windows high contrast the page's colours are replaced: each state must still look its own."""
    page = browser.new_page(viewport={"width": 1280, "height": 800}, forced_colors="active")
    # ZeRO-3's backward pass at the last column, its compute (26): weights gathered, gradients sent, a
    # ring on the work.
    page.goto(f"{server}/?stage=zero3&phase=26")
    states = {
        "held": "#grid .cell.solid:not(.active)",
        "dashed": "#grid .cell.dashed:not(.active)",
        "gathered": "#grid .cell.gathered",
        "sent": "#grid .cell.sent",
        "ringed": "#grid .cell.solid.active:not(.gathered, .sent)",
    }
    looks = {name: tuple(page.locator(selector).first.evaluate(LOOK)) for name, selector in states.items()}
    assert page.evaluate("matchMedia('(forced-colors: active)').matches")
    assert len(set(looks.values())) == len(looks), looks
    # Without stripes, gathered and sent would be a held cell again.
    assert looks["gathered"][3] != "none"
    assert looks["sent"][3] != "none"
    assert looks["ringed"][4] != "none"
    assert looks["held"][4] == "none"
    page.close()


# Each card's figures against its card: how far past the card's inner right edge they reach (px).
_OVERFLOW = """() => Array.from(document.querySelectorAll('#grid .card'), card => {
  const total = card.querySelector('.card-sub');
  if (!total) { return 0; }
  const c = card.getBoundingClientRect(), t = total.getBoundingClientRect();
  return Math.max(0, t.right - (c.right - parseFloat(getComputedStyle(card).paddingRight)));
})"""


@pytest.mark.parametrize("width", [1280, 1440, 1920])
@pytest.mark.parametrize("stage", ["dp", "zero3"])
def test_projector_card_totals_stay_inside_their_cards(page: Page, server: str, width: int, stage: str) -> None:
    # The projector's larger type in four cards a row at 1280: a card's total once ran past the edge.
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"{server}/?stage={stage}&theme=projector")
    overflow = page.evaluate(_OVERFLOW)
    assert len(overflow) == 8
    assert max(overflow) <= 0.5


@pytest.mark.parametrize(
    ("theme", "width", "below"),
    [
        # The note is beside the cards now, in the column of words; the cards and their key stay put.
        ("projector", 1181, "#grid"),
        ("projector", 1280, "#grid"),
        ("projector", 1920, ".legend"),
        ("default", 1280, "#grid"),
        ("default", 1920, "#grid"),
    ],
)
def test_what_is_under_the_note_of_what_changed_stays_put_from_stage_to_stage(
    page: Page, server: str, theme: str, width: int, below: str
) -> None:
    # The note runs from none to two lines (four on the projector); what is under it (once the
    # projector's cost table, and the default theme's cards) moved 20 to 100 px a click.
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{server}/?stage=dp&theme={theme}")
    page.mouse.wheel(0, 40)  # scrolled a little first, as a person reading would be
    page.wait_for_timeout(100)
    table = page.locator(below)
    tops: list[int] = []
    for stage in ["dp", "zero1", "zero2", "zero3", "dp", "zero3", "zero1"]:
        if stage != "dp" or tops:
            page.click(f"#switch-{stage}")
            expect(page.locator("#grid")).to_have_attribute("data-stage", stage)
            settled(page)
        box = table.bounding_box()
        assert box is not None
        tops.append(round(box["y"]))
    assert page.locator("#change-note").count() == 1  # a note was there to push the table
    assert max(tops) - min(tops) <= 1, tops


@pytest.mark.parametrize(("theme", "in_key", "in_note"), [("default", False, True), ("projector", True, False)])
def test_what_a_ring_means_is_on_the_screen_in_either_theme(
    page: Page, server: str, theme: str, in_key: bool, in_note: bool
) -> None:
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"{server}/?stage=zero2&from=zero1&theme={theme}")
    entry, note = page.locator(".legend .ring-entry"), page.locator(".grid-note")
    if in_key:
        expect(entry).to_be_visible()
    else:
        expect(entry).to_be_hidden()
    # The projector keeps the note under the cards for screen readers only: clipped to nothing.
    box = note.bounding_box()
    assert box is not None
    assert (box["width"] > 10) is in_note


@pytest.mark.parametrize("width", [1280, 1920])
def test_projector_step_buttons_make_one_row_and_the_keys_close_is_big(page: Page, server: str, width: int) -> None:
    # In the projector's narrow panel "Last »" once wrapped alone under the others; and the list of
    # keys' Close kept the browser's small default button.
    page.set_viewport_size({"width": width, "height": 1080 if width == 1920 else 800})
    page.goto(f"{server}/?stage=zero3&phase=2&theme=projector")
    tops = [page.locator(f"#step-{rel}").evaluate(BOX)[1] for rel in ("first", "prev", "play", "next", "last")]
    assert max(tops) - min(tops) <= 1, tops
    page.keyboard.press("?")
    close = page.locator("#keys-close")
    expect(close).to_be_visible()
    left, top, right, bottom = close.evaluate(BOX)
    assert right - left >= 44
    assert bottom - top >= 32


_BELOW_THE_TABLE = """() => {
  const top = s => document.querySelector(s).getBoundingClientRect().top;
  const table = document.querySelector('.table-wrap').getBoundingClientRect().bottom;
  return [top('.overheads') >= table, top('.words') >= table];
}"""


@pytest.mark.parametrize(
    ("width", "height", "moment"),
    [
        (390, 844, ""),
        (1280, 800, "&phase=9"),
        (1920, 1080, "&theme=projector"),
        (1920, 1080, "&theme=projector&phase=9"),
    ],
)
def test_the_overheads_and_the_words_come_after_the_table(
    page: Page, server: str, width: int, height: int, moment: str
) -> None:
    # Neither has a place of its own in the grid layouts: without one, they would be put in the first free cell.
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?model=llama-3-8b&capacity=80GiB&stage=zero3{moment}")
    assert page.evaluate(_BELOW_THE_TABLE) == [True, True]
