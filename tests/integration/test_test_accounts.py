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


def test_an_account_is_deleted_when_the_last_run_using_it_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make test` runs the browser tests beside the others: the run that ends first leaves alone an account the
    other still uses, and the last one deletes it."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setattr(helpers, "ACCOUNTS_STATE", state)
    other_run, gone_run = os.getppid(), 2**22 + 17  # a live process and (above pid_max's default) none
    me = helpers.this_run()
    (state / "made").write_text(
        f"hearth-test-shared {me}\nhearth-test-shared {other_run}\nhearth-test-mine {me}\n"
        f"hearth-test-left {gone_run}\nhearth-test-theirs {other_run}\n"
    )
    deleted: list[str] = []

    def run(args: list[str], **_: object) -> None:
        assert args[0] == "userdel"
        deleted.append(args[1])

    monkeypatch.setattr(helpers.subprocess, "run", run)
    helpers.remove_made_accounts()
    assert deleted == ["hearth-test-mine", "hearth-test-left"]  # and one a run that died left behind
    assert sorted((state / "made").read_text().splitlines()) == [
        f"hearth-test-shared {other_run}",
        f"hearth-test-theirs {other_run}",
    ]
    monkeypatch.setenv(helpers.RUN_VARIABLE, str(other_run))  # the other run ends: it deletes what it used
    helpers.remove_made_accounts()
    assert deleted == ["hearth-test-mine", "hearth-test-left", "hearth-test-shared", "hearth-test-theirs"]
    assert (state / "made").read_text() == ""
