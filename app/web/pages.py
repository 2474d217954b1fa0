"""The HTML page: thin routes that validate, ask the domain, and render."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Annotated
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from app.domain.report import Run
from app.domain.scenario import Scenario, resolve
from app.paths import STATIC_DIR
from app.serving.body import CappedBody, capped
from app.web.compare_view import compare_view
from app.web.config_view import FormBody, Refused, config_view, pasted_url, read_form
from app.web.embed_view import embed_view, share_page_view
from app.web.errors import describe
from app.web.form_view import FieldProblem
from app.web.inputs import CompareQuery, EmbedQuery, MeasuredQuery, PageQuery, PredictQuery, SetAside, set_aside
from app.web.links import Links, absolute_links, absolute_url_for, embed_links, page_links, path_for
from app.web.live_access import follower_embed
from app.web.measured_view import measured_view, theme_of
from app.web.page_view import PageView, WaysOut, compare_href, error_view, page_view, with_problems
from app.web.predict_view import predict_view
from app.web.set_aside_view import set_aside_view, with_drawn
from app.web.templating import FORM_FIRST_HEADER, render, replace_history, wants_fragment
from app.web.upload import MAX_UPLOAD_BYTES, UploadRefused, uploaded_text

router = APIRouter(include_in_schema=False)


# HEAD too, for link checkers and uptime probes.
@router.api_route("/", methods=["GET", "HEAD"], name="page", response_class=HTMLResponse)
async def page(request: Request, kept: PageRead) -> Response:
    """The grid for one stage of a run: the whole page, or only the widget for an htmx swap.

    A query with values that cannot be read takes the same way: the valid rest drawn, a 422 saying
    what was set aside.
    """
    if kept.errors:
        return _page_set_aside(request, kept)
    query = kept.query
    view, link = stage_page(request, query, first=form_first(request) and wants_fragment(request))
    return render(request, "index.html", "widget", view, push_url=link(query.stage))


def stage_page(request: Request, query: PageQuery, first: bool = False) -> tuple[PageView, Links]:
    """The page's view of the run a query describes, with its ways out, and its links.

    The run is resolved here, once, and handed down: the view and its ways out read the same scenario.
    The view is built once, whole (`first`: the form first), not amended: each `replace` of a PageView
    decides its parts again (`PageView.__post_init__`).
    """
    inputs, link = query.inputs(), page_links(request, query)
    scenario = resolve(inputs)
    compare = path_for(request, "compare")
    address = link.switch(query.stage, query.previous)
    ways = ways_out(request, query, link, scenario.run) | WaysOut(address=address, form_first=first)
    return page_view(query.stage, link, scenario, inputs, query.phase, query.previous, compare, **ways), link


def _on_screen(request: Request) -> dict[str, str]:
    """The query of the page the person was looking at when they sent this one.

    htmx names it in HX-Current-URL; a form sent without JavaScript, in Referer. Only the same page
    of the same host counts: another site's or another route's parameters mean nothing here.
    """
    sent = request.headers.get("HX-Current-URL") or request.headers.get("Referer") or ""
    shown = urlsplit(sent)
    if (shown.netloc, shown.path) != (request.url.netloc, request.url.path):
        return {}
    return dict(parse_qsl(shown.query))


def _varies_on_screen(response: Response) -> Response:
    # The body depends on the page on the screen: a shared cache must not give it to another.
    response.headers["Vary"] = f"{response.headers['Vary']}, HX-Current-URL, Referer"
    return response


def _page_set_aside(request: Request, kept: SetAside, status: int = 422) -> Response:
    """The page for the valid part of the request, the rest set aside and said so.

    A bad form field keeps the run on the screen for that field, with what was typed and the reason
    beside it; the rest of the form is drawn, and the address (htmx puts it in the bar) and the
    "Embed this" panel name the run drawn. A bad stage or phase gets a notice, and the switcher
    still carries the run.
    """
    link = page_links(request, kept.query)
    compare = compare_href(path_for(request, "compare"), kept.query.stage, link.kept)
    scenario = resolve(kept.query.inputs())  # once: the widget and its ways out read the same run
    view = _set_aside_view(kept.query, link, kept, form_first(request), scenario, compare)
    view = with_way_out(request, view, kept.query, link, scenario.run)
    push = None if kept.notice else link(kept.query.stage)
    return _varies_on_screen(render(request, "index.html", "widget", view, status_code=status, push_url=push))


def _embed_set_aside(request: Request, kept: SetAside) -> Response:
    """The embed for the valid part of the request, as the page does it; a bad `controls` is a notice.

    So is a bad field of the run in an embed without the calculator: there is no form to say it
    beside, and a picture of the default run in its place would be a wrong figure in a course page.
    """
    query = kept.query
    assert isinstance(query, EmbedQuery)
    link = embed_links(request, query)
    unseen = bool(kept.problems) and not query.calculator and not kept.notice
    if kept.notice:  # nothing of the run is drawn: it is not resolved
        view = _set_aside_view(query, link, kept, form_first(request), None)
    elif unseen:
        # In the words the page's notice uses ("GPUs: “0” is not accepted. Enter a whole number…"), not pydantic's.
        fields = set_aside_view(kept.problems, resolve(query.inputs()), kept.fell_back).fields
        said = " ".join(f"{f.label}: {f.said}" for f in fields)
        view = error_view(said, link, query.stage)
    else:
        view = _set_aside_view(query, link, kept, form_first(request), resolve(query.inputs()))
    view = replace(view, embed=embed_view(query.controls, query.calculator))
    push = None if kept.notice or unseen else link(query.stage)
    return _varies_on_screen(
        replace_history(render(request, "embed.html", "widget", view, status_code=422, push_url=push))
    )


def _set_aside_view(
    query: PageQuery, link: Links, kept: SetAside, first: bool, scenario: Scenario | None, compare: str = ""
) -> PageView:
    """The view for the valid rest of a request, whose run the route resolved (`scenario`; None for a notice).

    A notice for a bad stage, phase or embed option; else the widget with the bad form fields marked.
    When the form comes `first` (a link was followed, or the form under such a message was sent), the
    top of the widget also says which values were set aside and what the picture is of instead.
    `compare` is the side-by-side page for the run, on the page (an embed's links stay in the embed).
    """
    if kept.notice:
        stage_ok = all(e["loc"][1] != "stage" for e in kept.errors)
        message = describe(kept.errors, show_input=True)
        return error_view(message, link, query.stage if stage_ok else None, compare)
    assert scenario is not None, "the route resolves the run it draws"
    problems = with_drawn(kept.problems, scenario, kept.fell_back)
    view = with_problems(page_view(query.stage, link, scenario, query.inputs(), query.phase), problems)
    if not first:
        return replace(view, compare_href=compare)
    said = set_aside_view(kept.problems, scenario, kept.fell_back) if kept.problems else None
    return replace(view, compare_href=compare, set_aside=said, form_first=True)


def _lenient(model: type[PageQuery]) -> Callable[[Request], SetAside]:
    """A dependency that reads a query as far as it can: the valid fields, and the problems with the rest."""

    def read(request: Request) -> SetAside:
        return set_aside(request.query_params, model, shown=_on_screen(request))

    return read


PageRead = Annotated[SetAside, Depends(_lenient(PageQuery))]
EmbedRead = Annotated[SetAside, Depends(_lenient(EmbedQuery))]


@router.post("/config", name="config_paste", response_class=HTMLResponse)
async def paste_config(request: Request, query: Annotated[PageQuery, Query()], body: FormBody) -> Response:
    """A DeepSpeed config pasted in the page's box (the body), over the run on the page (the query).

    303 to the page of the run it describes, or the page again saying why not, the paste kept.
    """
    try:
        pasted = read_form(body, query)
    except Refused as refused:
        view, _ = stage_page(request, query)
        said = replace(view.configs, message=refused.message, text=refused.text) if view.configs else None
        return render(request, "index.html", "widget", replace(view, configs=said), status_code=refused.status)
    return RedirectResponse(pasted_url(request, pasted), status_code=303)


UploadBody = Annotated[CappedBody, Depends(capped(MAX_UPLOAD_BYTES))]


@router.post("/model-config", name="config_upload", response_class=HTMLResponse)
async def upload_config(request: Request, body: UploadBody) -> Response:
    """A model's config.json uploaded or pasted (the body, so up to 64 KB), over the run on the page (the query).

    303 to the page with the config in its address (the keys read, minimised), so the page's state stays in
    the URL; or the page again with the config field saying why not: 413 over the size, 422 otherwise.
    """
    params = dict(request.query_params)
    try:
        if body.over:
            raise UploadRefused(f"The file is over {MAX_UPLOAD_BYTES // 1024 - 4} KB: a config.json is a few.", 413)
        params["config"] = uploaded_text(body.data, request.headers.get("content-type", ""))
    except UploadRefused as refused:
        kept = set_aside({k: v for k, v in params.items() if k != "config"})
        said = str(refused)
        kept = replace(
            kept,
            problems=(FieldProblem("config", "", said),),
            errors=({"loc": ("query", "config"), "msg": said, "type": "config"},),
        )
        return _page_set_aside(request, kept, status=refused.status)
    kept = set_aside(params)
    if kept.errors:
        return _page_set_aside(request, kept)
    return RedirectResponse(page_links(request, kept.query)(kept.query.stage), status_code=303)


def form_first(request: Request) -> bool:
    """Whether the run form stands first, under the message, as it does for a bad link.

    A whole page is a link followed (or a form sent without JavaScript): its reader looks at the top.
    A swap keeps the form where it stood: a keystroke answered with a bad value would otherwise move
    the form away from under the typing.
    """
    return not wants_fragment(request) or request.headers.get(FORM_FIRST_HEADER) == "1"


def with_way_out(request: Request, view: PageView, query: PageQuery, link: Links, run: Run) -> PageView:
    """The page's ways elsewhere: the "Embed this" panel for the run drawn, and the measured page.

    `run` is the one the route resolved from `query`: whether DeepSpeed has a config for it.
    """
    return replace(view, **ways_out(request, query, link, run))


def ways_out(request: Request, query: PageQuery, link: Links, run: Run) -> WaysOut:
    """The fields of `with_way_out`, for a view built with them."""
    share = replace(link, page=path_for(request, "share"))(query.stage)
    measured = path_for(request, "measured") + "?" + urlencode({"stage": query.stage.value, **theme_of(query.theme)})
    # The JSON of the same run: its parameters, not the page's phase, embed options or theme.
    layout = Links(path_for(request, "api_layout"), link.run)(query.stage)
    memory = path_for(request, "api_memory") + (f"?{urlencode(link.run)}" if link.run else "")
    configs = config_view(request, link, query.stage, run)
    return WaysOut(share_href=share, measured_href=measured, memory_href=memory, layout_href=layout, configs=configs)


@router.api_route("/share", methods=["GET", "HEAD"], name="share", response_class=HTMLResponse)
def share(request: Request, query: Annotated[EmbedQuery, Query()]) -> HTMLResponse:
    """The "Embed this" panel for one view of a run: its snippets and share link, with absolute addresses.

    The embed's options (`controls`, `calculator`) choose the snippet shown first, so that the choice
    works as links where there is no JavaScript for the drop-down.
    """
    link, script = page_links(request, query), absolute_url_for(request, "static", path="embed.js")
    page, embed = absolute_links(request, link, "page"), absolute_links(request, link, "embed")
    chosen = (query.controls.value, query.calculator)
    panel = replace(link, page=path_for(request, "share"))
    view = share_page_view(query.stage, link, page, embed, script, chosen, panel)
    return render(request, "share.html", "share", view)


@router.api_route("/embed", methods=["GET", "HEAD"], name="embed", response_class=HTMLResponse)
async def embed(request: Request, kept: EmbedRead) -> Response:
    """The widget alone, for another site's page: the page's parameters, and what to show around it.

    With `live`, the view of that session's teacher, and the bar that follows it. A query with values
    that cannot be read draws the valid rest, as the page does.
    """
    if kept.errors:
        return _embed_set_aside(request, kept)
    query = kept.query
    assert isinstance(query, EmbedQuery)
    query, live = await follower_embed(request, query) if query.live else (query, None)
    inputs, link, shown = query.inputs(), embed_links(request, query), embed_view(query.controls, query.calculator)
    phase = query.phase if live else shown.phase(query.phase)  # a follower draws the teacher's view as it is
    view = page_view(query.stage, link, resolve(inputs), inputs, phase, query.previous)
    first = form_first(request) and wants_fragment(request)
    embedded = replace(view, embed=shown, form_first=first, live=live,
                       address=link.switch(query.stage, query.previous))  # fmt: skip
    response = replace_history(render(request, "embed.html", "widget", embedded, push_url=link(query.stage)))
    if live:
        response.headers["Cache-Control"] = "no-store"  # one session's now: never kept (app/serving/cache.py)
    return response


@router.api_route("/predict", methods=["GET", "HEAD"], name="predict", response_class=HTMLResponse)
def predict(request: Request, query: Annotated[PredictQuery, Query()]) -> HTMLResponse:
    """Predict first: the question before a switch of stage or the next phase, or its answer beside the prediction.

    A plain GET form and plain links, so it works without JavaScript; with htmx it is swapped into the
    widget. A bad prediction, or a move with nothing to predict, is a 422 saying why.
    """
    link = replace(page_links(request, query), predict=path_for(request, "predict"))
    view = predict_view(query, resolve(query.inputs()), link)
    own = f"{link.predict}?{request.url.query}" if request.url.query else link.predict
    return render(request, "predict.html", "widget", view, status_code=422 if view.error else 200, push_url=own)


@router.api_route("/compare", methods=["GET", "HEAD"], name="compare", response_class=HTMLResponse)
def compare(request: Request, query: Annotated[CompareQuery, Query()]) -> HTMLResponse:
    """Two stages of the same run side by side. Plain links: it needs no JavaScript."""
    run = tuple(query.canonical().items())
    view = compare_view(query.left, query.right, resolve(query.inputs()), path_for(request, "compare"),
                        path_for(request, "page"), run, query.theme)  # fmt: skip
    return render(request, "compare.html", "compare", view)


@router.api_route("/measured", methods=["GET", "HEAD"], name="measured", response_class=HTMLResponse)
def measured(request: Request, query: Annotated[MeasuredQuery, Query()]) -> HTMLResponse:
    """The model's grid beside what PyTorch held on 8 ranks, their agreement, and the step's curve."""
    base, page_path = path_for(request, "measured"), path_for(request, "page")
    view = measured_view(query.stage, query.chosen, base, page_path, query.theme)
    return render(request, "measured.html", "measured", view)


@router.api_route("/favicon.ico", methods=["GET", "HEAD"], name="favicon")
def favicon() -> FileResponse:
    """For clients that ask for the icon at the conventional address, not the page's link."""
    return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")
