"""The suite's other-account helpers run as root: what they keep between processes (the accounts a run made, which
the run deletes at its end) is in a folder of root's alone, so another account can neither plant a name for root
to delete nor a link for root to write through."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests import helpers
from tests.integration.conftest import as_other

pytestmark = pytest.mark.integration


def test_another_account_cannot_write_where_the_made_accounts_are_listed(other_account: tuple[int, int]) -> None:
    state = helpers.ACCOUNTS_STATE  # made when the fixture made (or found) the account
    found = state.lstat()
    assert stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and stat.S_IMODE(found.st_mode) == 0o700
    planted = as_other(other_account, "/usr/bin/python3", "-c", f"open({str(state / 'made')!r}, 'a').write('root\\n')")
    assert planted.returncode != 0 and "PermissionError" in planted.stderr, planted.stderr
    listed = as_other(other_account, "/usr/bin/ls", str(state))
    assert listed.returncode != 0


def test_a_state_folder_that_is_a_link_or_open_to_others_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o755)
    open_folder.chmod(0o755)
    monkeypatch.setattr(helpers, "ACCOUNTS_STATE", open_folder)
    with pytest.raises(RuntimeError, match="alone"):
        helpers.ensure_account("hearth-test-other")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    monkeypatch.setattr(helpers, "ACCOUNTS_STATE", link)
    with pytest.raises(RuntimeError, match="alone"):
        helpers.ensure_account("hearth-test-other")
    with pytest.raises(AssertionError):
        helpers.ensure_account("root")  # only the suite's own accounts are made (and so deleted)
