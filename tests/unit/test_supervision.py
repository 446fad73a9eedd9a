"""When a dead engine is restarted, and when Hearth stops trying."""

from app.services.serving.supervision import RestartPolicy


def test_a_crash_while_answering_restarts_at_once() -> None:
    decision = RestartPolicy().after_crash(0.0, while_loading=False)
    assert decision.restart and decision.delay_s == 0


def test_crashes_while_loading_back_off_then_give_up_with_the_reason() -> None:
    policy = RestartPolicy(max_load_crashes=3)
    first = policy.after_crash(0.0, while_loading=True)
    second = policy.after_crash(1.0, while_loading=True)
    third = policy.after_crash(3.0, while_loading=True)
    assert (first.restart, first.delay_s) == (True, 1.0)
    assert (second.restart, second.delay_s) == (True, 2.0)
    assert not third.restart
    assert third.reason == "it crashed 3 times in a row while loading"


def test_a_successful_load_resets_the_count() -> None:
    policy = RestartPolicy(max_load_crashes=2)
    assert policy.after_crash(0.0, while_loading=True).restart
    policy.after_ready()
    assert policy.after_crash(10.0, while_loading=True).restart


def test_too_many_crashes_in_the_window_stop_the_restarts() -> None:
    policy = RestartPolicy(max_crashes=3, window_s=60.0)
    assert policy.after_crash(0.0, while_loading=False).restart
    assert policy.after_crash(100.0, while_loading=False).restart  # the first one has left the window
    assert policy.after_crash(110.0, while_loading=False).restart
    decision = policy.after_crash(120.0, while_loading=False)
    assert not decision.restart and decision.reason == "it crashed 3 times within a minute"
