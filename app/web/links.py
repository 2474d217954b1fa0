"""Root-relative links, so the app works under a path prefix and behind a TLS proxy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from urllib.parse import urlencode

from jinja2 import pass_context
from jinja2.runtime import Context
from starlette.requests import Request

from app.domain.stages import Stage
from app.serving.assets import StaticAssets
from app.web.inputs import EmbedQuery, PageQuery, RunQuery, Theme


@dataclass(frozen=True)
class Links:
    """Each stage's page address, keeping the run described; hashable, so views can be cached."""

    page: str
    run: tuple[tuple[str, str], ...] = ()
    phase: int | None = None
    keep: tuple[tuple[str, str], ...] = ()
    """Options every link carries after the run and the phase (an embed's controls and calculator)."""
    theme: Theme = Theme.DEFAULT
    """Kept in every address, so a swap or a form never drops the projector view."""
    predict: str = ""
    """Predict first: the question's address (the `predict` route), kept in every address as `predict=1`;
    empty, off: a switch goes straight to the view."""

    @property
    def options(self) -> tuple[tuple[str, str], ...]:
        """What every address carries after the run: the embed's options, the theme, predict first."""
        theme = () if self.theme is Theme.DEFAULT else (("theme", self.theme.value),)
        predict = (("predict", "1"),) if self.predict else ()
        return (*self.keep, *theme, *predict)

    @property
    def kept(self) -> tuple[tuple[str, str], ...]:
        """The parameters every address carries besides the stage and the phase."""
        return (*self.run, *self.options)

    def setting(self, name: str, value: str | None) -> Links:
        """The same addresses with one run parameter set to `value`, or left out (None: its default)."""
        run = tuple((k, v) for k, v in self.run if k != name)
        return replace(self, run=run if value is None else (*run, (name, value)))

    def themed(self, theme: Theme) -> Links:
        """The same addresses in another theme."""
        return replace(self, theme=theme)

    def __call__(self, stage: Stage) -> str:
        """The address of `stage` with the same run, at the same moment of the step."""
        return self.at(stage, self.phase)

    @cached_property
    def _encoded(self) -> tuple[str, str]:
        # The run and the options, encoded once: a page writes some twenty addresses of one run.
        run, options = urlencode(self.run), urlencode(self.options)
        return (f"&{run}" if run else ""), (f"&{options}" if options else "")

    def at(self, stage: Stage, phase: int | None) -> str:
        """The address of `stage` with the same run at `phase` (None: at rest)."""
        run, options = self._encoded
        moment = "" if phase is None else f"&phase={phase}"
        # A stage's value is a plain word (dp, zero1...): nothing in it to encode.
        return f"{self.page}?stage={stage.value}{run}{moment}{options}"

    def ask(self, stage: Stage, phase: int | None, to: Stage | None) -> str:
        """The question before leaving `stage` at `phase`: for the switch `to` a stage, or (None) to the next phase."""
        run, options = self._encoded
        moment = "" if phase is None else f"&phase={phase}"
        where = "" if to is None else f"&to={to.value}"
        return f"{self.predict}?stage={stage.value}{run}{moment}{where}{options}"

    def switch(self, stage: Stage, current: Stage | None) -> str:
        """The address of `stage`, with a `from` hint naming the stage shown so the page can mark what changed."""
        if current is None or current is stage:
            return self(stage)
        return f"{self(stage)}&from={current.value}"


LinkFor = Callable[[Stage], str]
"""A stage's address: `Links`, or another page's builder (the side-by-side page's)."""


def switch_href(link: LinkFor, stage: Stage, current: Stage | None) -> str:
    """A link to `stage` that names the stage shown (`from`), so the page can mark what changed."""
    return link.switch(stage, current) if isinstance(link, Links) else link(stage)


def _route_path(request: Request, name: str, path_params: dict[str, str]) -> str:
    """The route's path below the app's root, as `request.url_for` finds it."""
    router = request.scope.get("router") or request.scope["app"]
    return str(router.url_path_for(name, **path_params))


def path_for(request: Request, name: str, /, **path_params: str) -> str:
    """The root-relative path of a named route, prefix included.

    Never scheme or host, which a TLS-terminating proxy or an iframe's parent may see differently.
    A static asset's path carries its fingerprint, so browsers may keep it for good.
    """
    # The prefix as Starlette's url_for takes it: the top-level app's root path.
    root: str = request.scope.get("app_root_path", request.scope.get("root_path", ""))
    path = root.rstrip("/") + _route_path(request, name, path_params)
    if name == "static":
        assets: StaticAssets = request.app.state.assets
        return f"{path}?{assets.fingerprint(path_params['path'])}"
    return path


@pass_context
def template_url_for(context: Context, name: str, /, **path_params: str) -> str:
    """`url_for` in templates: the same root-relative path."""
    request: Request = context["request"]
    return path_for(request, name, **path_params)


def page_links(request: Request, query: RunQuery | None = None) -> Links:
    """Builds the page's URL for a stage, keeping the run the person described and the phase."""
    run = tuple(query.canonical().items()) if query else ()
    if isinstance(query, PageQuery):
        predict = path_for(request, "predict") if query.predict else ""
        return Links(path_for(request, "page"), run, query.phase, theme=query.theme, predict=predict)
    return Links(path_for(request, "page"), run)


def embed_links(request: Request, query: PageQuery) -> Links:
    """The embed's URL for a stage: the run and phase as the page keeps them, and the embed's options."""
    page = page_links(request, query)
    options = query.options() if isinstance(query, EmbedQuery) else ()
    return Links(path_for(request, "embed"), page.run, page.phase, options, page.theme)


def absolute_url_for(request: Request, name: str, /, **path_params: str) -> str:
    """The absolute address (scheme, host and prefix) of a named route, as `request.url_for` gives it.

    With a public URL (`zero-bands --public-url`), on it instead: the address students and course pages reach.
    """
    return public_base(request) + _route_path(request, name, path_params)


def public_base(request: Request) -> str:
    """The app's absolute address without a final slash: the public URL if one is set, else the request's."""
    settings = getattr(request.app.state, "settings", None)
    public: str = settings.public_url if settings is not None else ""
    return public.rstrip("/") or str(request.base_url).rstrip("/")


def absolute_links(request: Request, links: Links, name: str) -> Links:
    """The same links made absolute (scheme, host and prefix) on the route `name`: for a snippet pasted elsewhere."""
    return Links(absolute_url_for(request, name), links.run, links.phase, links.keep, links.theme)


def compare_address(base: str, left: Stage, right: Stage, run: tuple[tuple[str, str], ...]) -> str:
    """The side-by-side page of `left` and `right`, with the run as the page keeps it."""
    return f"{base}?{urlencode({'left': left.value, 'right': right.value, **dict(run)})}"
