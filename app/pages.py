"""The HTML page: thin routes that validate, ask the domain, and render."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse

from app.links import stage_links
from app.paths import STATIC_DIR
from app.stages import Stage
from app.templating import render
from app.views import page_view

router = APIRouter(include_in_schema=False)


# HEAD too, for link checkers and uptime probes.
@router.api_route("/", methods=["GET", "HEAD"], name="page", response_class=HTMLResponse)
def page(request: Request, stage: Stage = Stage.DP) -> HTMLResponse:
    """The grid for one stage: the whole page, or only the widget for an htmx swap."""
    return render(request, "index.html", "widget", page_view(stage, stage_links(request)))


@router.get("/favicon.ico", name="favicon")
def favicon() -> FileResponse:
    """For clients that ask for the icon at the conventional address, not the page's link."""
    return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")
