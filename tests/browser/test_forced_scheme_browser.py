"""`theme=light|dark` (and the projector's) in Debian's Chromium: the colours forced whatever the system says."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import Watch, screenshot, settled
from tests.browser.test_themes_browser import WCAG_AA, contrast

BOX = "el => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }"


def _luminance(css: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"[\d.]+", css)[:3])

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


def _colours(page: Page) -> dict[str, str]:
    """The computed colours a reader sees first: the page's ground and ink, a card's ground, the current table row."""
    colours: dict[str, str] = page.evaluate(
        """() => { const s = (q, p) => getComputedStyle(document.querySelector(q)).getPropertyValue(p);
             return { paper: s('html', 'background-color'), ink: s('html', 'color'),
                      card: s('#grid .card', 'background-color'),
                      row: s('.figures tr.current', 'background-color') }; }"""
    )
    return colours


# theme, the system's scheme (emulated), and whether the page is dark: a forced scheme wins over the system's.
CASES = [
    ("light", "dark", False),
    ("dark", "light", True),
    ("projector-light", "dark", False),
    ("projector-dark", "light", True),
    ("default", "dark", True),  # the system's, as before
    ("projector", "light", False),
]


@pytest.mark.parametrize(("theme", "system", "dark"), CASES)
def test_a_forced_scheme_wins_over_the_systems(
    browser: Browser, server: str, theme: str, system: str, dark: bool
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800}, color_scheme=system)  # type: ignore[arg-type]
    page.goto(f"{server}/?stage=zero3&phase=9&theme={theme}")
    assert page.evaluate(f"matchMedia('(prefers-color-scheme: {system})').matches")
    colours = _colours(page)
    for ground in ("paper", "card"):
        assert (_luminance(colours[ground]) < 0.05) is dark, (ground, colours)
    assert contrast(colours["ink"], colours["paper"]) >= 7
    # The projector's full-strength ink in either scheme: the axis against its card.
    axis = page.locator("#grid .axis").first.evaluate("el => getComputedStyle(el).color")
    assert contrast(axis, colours["card"]) >= (12 if theme.startswith("projector") else 4.5)
    page.close()


@pytest.mark.parametrize("system", ["light", "dark"])
@pytest.mark.parametrize("theme", ["default", "dark", "projector-dark"])
def test_print_is_light_whatever_the_screen_shows(browser: Browser, server: str, theme: str, system: str) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800}, color_scheme=system)  # type: ignore[arg-type]
    page.goto(f"{server}/?stage=zero2&capacity=80GiB&theme={theme}")
    page.emulate_media(media="print")
    colours = _colours(page)
    # White paper, black ink, and the current row of the table a pale tint, not dark brown.
    assert [_luminance(colours[c]) > 0.8 for c in ("paper", "card", "row")] == [True, True, True], colours
    assert contrast(colours["ink"], colours["paper"]) >= 15
    track = page.locator("#grid .bar svg").first.evaluate("el => getComputedStyle(el).backgroundColor")
    assert _luminance(track) > 0.8, track
    page.close()


def test_the_toggle_forces_a_scheme_and_the_links_keep_it(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.emulate_media(color_scheme="dark")
    page.goto(f"{server}/?stage=zero1&gpus=16")
    page.click("#scheme-menu summary")
    page.click("#scheme-light")
    expect(page.locator("html")).to_have_attribute("data-scheme", "light")
    expect(page).to_have_url(re.compile(r"stage=zero1.*gpus=16.*theme=light$"))
    assert _luminance(_colours(page)["paper"]) > 0.8
    expect(page.locator("#scheme-light")).to_have_attribute("aria-current", "true")
    # A swap keeps it: the stage switcher, the step.
    page.click("#switch-zero3")
    expect(page).to_have_url(re.compile(r"stage=zero3.*theme=light"))
    page.click("#watch-step")
    expect(page).to_have_url(re.compile(r"phase=0.*theme=light"))
    settled(page)
    # The projector's type in the same colours, then the system's colours back.
    page.click("#theme-toggle")
    expect(page.locator("html")).to_have_class("theme-projector")
    expect(page).to_have_url(re.compile(r"phase=0.*theme=projector-light$"))
    page.click("#scheme-menu summary")
    page.click("#scheme-system")
    expect(page).to_have_url(re.compile(r"phase=0.*theme=projector$"))
    expect(page.locator("html")).not_to_have_attribute("data-scheme", re.compile(".*"))
    assert _luminance(_colours(page)["paper"]) < 0.05
    watch.assert_clean(page)


_OTHERS = """() => [...document.querySelectorAll('.masthead h1, .masthead > p, .switcher')]
  .filter(el => el.getClientRects().length)
  .map(el => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })"""


# The toggle at the top right beside the masthead, over none of it nor the switcher; the schemes folded
# under ◐, and opened, each link a target of 24 px at least, on the screen.
@pytest.mark.parametrize("theme", ["dark", "projector-dark"])
@pytest.mark.parametrize(("width", "height"), [(390, 844), (1024, 768), (1200, 800), (1280, 800), (1920, 1080)])
def test_the_toggle_fits_beside_the_masthead(page: Page, server: str, theme: str, width: int, height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?stage=zero3&theme={theme}")
    others: list[list[float]] = page.evaluate(_OTHERS)
    tools = [page.locator(s).evaluate(BOX) for s in ("#theme-toggle", "#scheme-menu summary", "#fullscreen")]
    page.click("#scheme-menu summary")
    links = [page.locator(f"#scheme-{s}").evaluate(BOX) for s in ("system", "light", "dark")]
    for left, top, right, bottom in tools + links:
        assert min(right - left, bottom - top) >= 24
        assert (left, min(right, width)) == (max(left, 0), right)
    for left, top, right, bottom in tools:
        for o_left, o_top, o_right, o_bottom in others:
            assert right <= o_left or left >= o_right or bottom <= o_top or top >= o_bottom, (tools, others)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    if width == 1280:
        screenshot(page, f"theme-toggle-{theme}-1280")


@pytest.mark.parametrize(
    ("path", "system"),
    [
        ("/?stage=zero3&phase=9&theme=dark", "light"),
        ("/?stage=zero2&theme=light&capacity=80GiB", "dark"),
        ("/?stage=zero1&theme=projector-dark", "light"),
        ("/embed?stage=zero3&phase=9&controls=step&calculator=1&theme=dark", "light"),
        ("/compare?left=dp&right=zero2&theme=dark", "light"),
    ],
)
def test_axe_finds_no_violation_in_a_forced_scheme(browser: Browser, server: str, path: str, system: str) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 1000}, color_scheme=system)  # type: ignore[arg-type]
    page.goto(server + path)
    settled(page)
    results = Axe().run(page, options=WCAG_AA)
    assert results.violations_count == 0, results.generate_report()
    page.close()
