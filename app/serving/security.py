"""Headers that every response carries, static files and errors included.

The middleware adds them to every response the app gives, but a failure (a 500) is answered by
Starlette's ServerErrorMiddleware, which stands outside every middleware added: its handler,
`server_error` here, adds them itself. uvicorn's own 400 for a request it cannot parse never
reaches the app, and carries none (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.paths import route_path
from app.serving.config import Settings
from app.serving.plain import plain


def content_security_policy(settings: Settings, embedded: bool = False) -> str:
    """A strict policy: this origin only, no inline code, no eval.

    Framed only by this origin, unless `embedded` (the routes made for another site's page): then where configured.
    """
    directives = {
        "default-src": "'self'",
        "script-src": "'self'",
        "style-src": "'self'",
        "img-src": "'self'",
        "connect-src": "'self'",
        "font-src": "'self'",
        "object-src": "'none'",
        "base-uri": "'none'",
        "form-action": "'self'",
        # Only the embed is made to be framed. Anywhere else another site (or another port of this one) could
        # frame the teacher's page, with the teacher's cookie, under a decoy: click-jacking.
        "frame-ancestors": settings.frame_ancestors if embedded else "'self'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def security_headers(settings: Settings, embedded: bool = False) -> dict[str, str]:
    """The headers added to every response; `embedded`, to those of the routes made to be framed.

    There is deliberately no X-Frame-Options: course pages embed this tool, and CSP
    frame-ancestors alone decides where.
    """
    return {
        "Content-Security-Policy": content_security_policy(settings, embedded),
        "X-Content-Type-Options": "nosniff",
        # Nothing to another site; to this one the page a form was sent from, which a run form sent
        # without JavaScript needs to keep the run on the screen beside a typo.
        "Referrer-Policy": "same-origin",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    }


def _encoded(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode(), v.encode()) for k, v in headers.items()]


class SecurityHeadersMiddleware:
    """Adds the security headers and removes any Server header, on every HTTP response.

    `embedded` are the paths (below the app's prefix) made to be framed by another site's page.
    """

    def __init__(self, app: ASGIApp, settings: Settings, embedded: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.headers = _encoded(security_headers(settings))
        self.framed = _encoded(security_headers(settings, embedded=True))
        self.embedded = embedded
        self.replaced = {name for name, _ in self.headers} | {b"server", b"x-frame-options"}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, rewriting the headers of the response as it starts."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        added = self.framed if route_path(scope) in self.embedded else self.headers

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in self.replaced]
                message = {**message, "headers": kept + added}
            await send(message)

        await self.app(scope, receive, send_with_headers)


SERVER_ERROR = "The server failed to answer this request. Try again; if it fails again, tell whoever runs this site."


def server_error(settings: Settings) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The handler of any failure: a 500 that says so, with the security headers, JSON for the API.

    Framed by this origin only, wherever it failed: a failure is no embed.
    """
    headers = security_headers(settings)

    async def answer(request: Request, exc: Exception) -> Response:
        body, media = plain(request.scope, "Server error", SERVER_ERROR)
        return Response(body, 500, headers=headers, media_type=media.decode())

    return answer
