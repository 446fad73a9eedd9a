"""The tray icon of a Hearth kept running in the background (``hearth desktop --keep-running``): Open and Quit.

Qt's, made on the GUI thread before the window starts; only where the desktop has a tray (a status notifier or an
XEmbed tray). Elsewhere there is none, and closing the window quits as it always does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def make_tray(
    icon: Path | None, tooltip: str, on_open: Callable[[], None], on_quit: Callable[[], None]
) -> object | None:
    """The tray icon, shown; None where the desktop has no tray. The caller keeps the object alive."""
    from qtpy.QtGui import QAction, QIcon  # type: ignore[attr-defined]  # Qt 6 keeps QAction here
    from qtpy.QtWidgets import QMenu, QSystemTrayIcon

    if not QSystemTrayIcon.isSystemTrayAvailable():
        return None
    tray = QSystemTrayIcon(QIcon(str(icon)) if icon is not None else QIcon())
    tray.setToolTip(tooltip)
    menu = QMenu()
    open_action = QAction("Open Hearth", menu)
    open_action.triggered.connect(lambda _checked=False: on_open())
    quit_action = QAction("Quit Hearth", menu)
    quit_action.triggered.connect(lambda _checked=False: on_quit())
    menu.addAction(open_action)
    menu.addSeparator()
    menu.addAction(quit_action)
    tray.setContextMenu(menu)
    # A left click opens the window too, as people expect of a tray icon.
    tray.activated.connect(lambda reason: on_open() if reason == QSystemTrayIcon.ActivationReason.Trigger else None)
    tray.show()
    tray._hearth_menu = menu  # type: ignore[attr-defined]  # the menu lives as long as the icon
    return tray
