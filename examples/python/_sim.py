"""What the simulation examples share (not an example itself): a gateway config with one
upstream `backend` and one route `api` on `/api`, plus the route's policy tables."""


def config(tables: str) -> str:
    """The config text, `tables` (e.g. `[routes.rate_limit]` ...) added to the route."""
    return (
        'server = { listen = "127.0.0.1:8080" }\n'
        'upstreams = [{ name = "backend", endpoints = ["127.0.0.1:9"] }]\n'
        '[[routes]]\nid = "api"\nmatch = { path_prefix = "/api" }\nupstream = "backend"\n'
        + tables
    )
