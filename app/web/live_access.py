"""How a request reaches the live rules: the app's sessions, who asks, and the embed that follows a session.

Routes take `LiveSessions` and `Who` as dependencies (app/web/live.py, and the embed in app/web/pages.py).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import Request

from app.live.service import Sessions, Visitor
from app.serving.config import Settings
from app.web.inputs import EmbedQuery
from app.web.live_view import COOKIE, KEY, VOTER, LiveView, Problem, followed_embed

SAME_SITE_REFUSED = (
    "This request came from another page than this site's own, so it was not carried out. "
    "Drive the session from its teacher's page."
)


def sessions_of(request: Request) -> Sessions:
    """The app's live sessions under its settings: kept or not (several workers, no Redis), and the room cap."""
    settings: Settings = request.app.state.settings
    return Sessions(
        request.app.state.hub, on=settings.live, room=settings.live_followers, share=settings.live_address_share
    )


def visitor_of(request: Request) -> Visitor:
    """Who asks: the client's address, and the teacher's cookie, the follower's token and the join key it carries."""
    cookies, key = request.cookies, request.query_params.get(KEY)
    return Visitor(request.client.host if request.client else "unknown", cookies.get(COOKIE), cookies.get(VOTER), key)


def from_this_origin(request: Request) -> None:
    """403 unless a teacher's action comes from a page of this very origin.

    SameSite=Strict keeps the teacher's cookie from another site's form, but not from another port or
    subdomain of the same site. A browser names where a request comes from in `Sec-Fetch-Site`; one that
    does not (older ones) sends `Origin` with a POST; a client with neither is no browser another page
    could drive, and its request is taken as it is.
    """
    site, origin = request.headers.get("sec-fetch-site"), request.headers.get("origin")
    own = f"{request.url.scheme}://{request.url.netloc}"
    if (site is not None and site != "same-origin") or (site is None and origin is not None and origin != own):
        raise Problem(403, "Not from the teacher's page", SAME_SITE_REFUSED)


LiveSessions = Annotated[Sessions, Depends(sessions_of)]
Who = Annotated[Visitor, Depends(visitor_of)]


async def follower_embed(request: Request, query: EmbedQuery) -> tuple[EmbedQuery, LiveView]:
    """An embed following the session `query.live` names: the teacher's view with the embed's options, and its bar."""
    session = await sessions_of(request).follow(query.live or "", visitor_of(request))
    return followed_embed(request, session, query)
