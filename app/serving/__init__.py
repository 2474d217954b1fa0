"""Serving: the server, static files, compression, security headers and the one response cache."""
