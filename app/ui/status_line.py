"""The line at the top of the page: the model answering, where it runs, and the adapter every answer uses.

The adapter is read where it is kept (the tuning folder's attachments) each time the line is drawn: attaching one
for every answer in the Tuning tab, or detaching it, shows here at once.
"""

from __future__ import annotations

from app.services.container import Services
from app.services.training.tuning import attached_use
from app.ui.render import status_markdown


def page_status(services: Services) -> str:
    """The status line for the model in use now."""
    status = services.runtime.status
    model = services.runtime.model
    use = attached_use(services.paths, model.path) if model is not None and status.state == "ready" else None
    return status_markdown(status, use.name if use is not None else None)
