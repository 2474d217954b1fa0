"""Root-relative links, so the app works under a path prefix and behind a TLS proxy."""

from __future__ import annotations

import weakref
from typing import Any
from urllib.parse import urlencode

from jinja2 import pass_context
from jinja2.runtime import Context
from starlette.requests import Request

from app.domain.stages import Stage
from app.serving.assets import StaticAssets
from app.web.inputs import EmbedQuery, PageQuery, RunQuery
from app.web.view_models import Links

# Each router's path for a route name and its parameters: routes do not change while the app runs,
# and finding one walks the route list (a page asks for a dozen). By the router's identity (routers
# are not hashable); the weak reference drops the entry when its router goes.
_Paths = dict[tuple[str, tuple[tuple[str, str], ...]], str]
_ROUTE_PATHS: dict[int, tuple[weakref.ref[Any], _Paths]] = {}


def _route_path(request: Request, name: str, path_params: dict[str, str]) -> str:
    """The route's path below the app's root, as `request.url_for` finds it."""
    router = request.scope.get("router") or request.scope["app"]
    entry = _ROUTE_PATHS.get(id(router))
    if entry is None or entry[0]() is not router:
        ident = id(router)
        # An app that goes (as tests' do) takes its entry with it.
        entry = _ROUTE_PATHS[ident] = (weakref.ref(router, lambda _: _ROUTE_PATHS.pop(ident, None)), {})
    paths: _Paths = entry[1]
    key = (name, tuple(sorted(path_params.items())))
    found = paths.get(key)
    if found is None:
        found = paths[key] = str(router.url_path_for(name, **path_params))
    return found


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
        return Links(path_for(request, "page"), run, query.phase, theme=query.theme)
    return Links(path_for(request, "page"), run)


def embed_links(request: Request, query: PageQuery) -> Links:
    """The embed's URL for a stage: the run and phase as the page keeps them, and the embed's options."""
    page = page_links(request, query)
    options = query.options() if isinstance(query, EmbedQuery) else ()
    return Links(path_for(request, "embed"), page.run, page.phase, options, page.theme)


def absolute_url_for(request: Request, name: str, /, **path_params: str) -> str:
    """The absolute address (scheme, host and prefix) of a named route, as `request.url_for` gives it."""
    return str(request.base_url).rstrip("/") + _route_path(request, name, path_params)


def absolute_links(request: Request, links: Links, name: str) -> Links:
    """The same links made absolute (scheme, host and prefix) on the route `name`: for a snippet pasted elsewhere."""
    return Links(absolute_url_for(request, name), links.run, links.phase, links.keep, links.theme)


def compare_address(base: str, left: Stage, right: Stage, run: tuple[tuple[str, str], ...]) -> str:
    """The side-by-side page of `left` and `right`, with the run as the page keeps it."""
    return f"{base}?{urlencode({'left': left.value, 'right': right.value, **dict(run)})}"
