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
from app.web.live_view import COOKIE, LiveView, followed_embed


def sessions_of(request: Request) -> Sessions:
    """The app's live sessions under its settings: kept or not (several workers, no Redis), and the room cap."""
    settings: Settings = request.app.state.settings
    return Sessions(request.app.state.hub, on=settings.live, room=settings.live_followers)


def visitor_of(request: Request) -> Visitor:
    """Who asks: the client's address, and the teacher's cookie if it carries one."""
    return Visitor(request.client.host if request.client else "unknown", request.cookies.get(COOKIE))


LiveSessions = Annotated[Sessions, Depends(sessions_of)]
Who = Annotated[Visitor, Depends(visitor_of)]


async def follower_embed(request: Request, query: EmbedQuery) -> tuple[EmbedQuery, LiveView]:
    """An embed following the session `query.live` names: the teacher's view with the embed's options, and its bar."""
    session = await sessions_of(request).follow(query.live or "", visitor_of(request))
    return followed_embed(request, session, query)
