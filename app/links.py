"""Root-relative links, so the app works under a path prefix and behind a TLS proxy."""

from __future__ import annotations

from jinja2 import pass_context
from jinja2.runtime import Context
from starlette.requests import Request

from app.assets import StaticAssets
from app.inputs import EmbedQuery, PageQuery, RunQuery
from app.view_models import Links


def path_for(request: Request, name: str, /, **path_params: str) -> str:
    """The root-relative path of a named route, prefix included.

    Never scheme or host, which a TLS-terminating proxy or an iframe's parent may see differently.
    A static asset's path carries its fingerprint, so browsers may keep it for good.
    """
    path = request.url_for(name, **path_params).path
    if name == "static":
        assets: StaticAssets = request.app.state.assets
        return f"{path}?{assets.fingerprint(path_params['path'])}"
    return path


@pass_context
def template_url_for(context: Context, name: str, /, **path_params: str) -> str:
    """`url_for` in templates: the same root-relative path."""
    request: Request = context["request"]
    return path_for(request, name, **path_params)


def stage_links(request: Request, query: RunQuery | None = None) -> Links:
    """Builds the page's URL for a stage, keeping the run the person described and the phase."""
    run = tuple(query.canonical().items()) if query else ()
    if isinstance(query, PageQuery):
        return Links(path_for(request, "page"), run, query.phase, theme=query.theme)
    return Links(path_for(request, "page"), run)


def embed_links(request: Request, query: PageQuery) -> Links:
    """The embed's URL for a stage: the run and phase as the page keeps them, and the embed's options."""
    page = stage_links(request, query)
    options = query.options() if isinstance(query, EmbedQuery) else ()
    return Links(path_for(request, "embed"), page.run, page.phase, options, page.theme)


def absolute_links(request: Request, links: Links, name: str) -> Links:
    """The same links made absolute (scheme, host and prefix) on the route `name`: for a snippet pasted elsewhere."""
    return Links(str(request.url_for(name)), links.run, links.phase, links.keep, links.theme)
