"""The browser client's files: ``/``, ``/static/...`` and the same files at the root.

It decides which files may be served: those under the client's static folder, and no
path that leaves it. Its catch-all route must be added last (:func:`register_files`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from aiohttp import web


def register_index(app: web.Application) -> None:
    """Add ``/`` to ``app``."""
    app.router.add_get("/", index)


def register_files(app: web.Application) -> None:
    """Add ``/static/`` and the catch-all of client files to ``app``: after every other
    route, which it would otherwise shadow."""
    app.router.add_static("/static/", static_dir(), show_index=False)
    app.router.add_get("/{name:[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*}", static_file)


def static_dir() -> Path:
    """The browser client's files (package data of kibitz.client)."""
    return Path(str(resources.files("kibitz.client").joinpath("static")))


async def index(request: web.Request) -> web.StreamResponse:
    """The lobby page."""
    return web.FileResponse(static_dir() / "index.html")


async def static_file(request: web.Request) -> web.StreamResponse:
    """Client files also at the root, so pages may use relative paths."""
    root = static_dir().resolve()
    path = (root / request.match_info["name"]).resolve()
    if root not in path.parents or not path.is_file():
        raise web.HTTPNotFound(text="not found")
    return web.FileResponse(path)
