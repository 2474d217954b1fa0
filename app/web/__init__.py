"""The web layer: routes, one module per view with its dataclasses, the URL builder, templating and errors."""
