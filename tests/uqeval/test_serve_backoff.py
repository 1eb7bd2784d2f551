"""The restart delays of ``uqeval serve``'s supervisor and how it words a child's exit."""

from __future__ import annotations

import signal

from uqeval.cli.supervisor import (
    BACKOFF_FIRST_S,
    BACKOFF_MAX_S,
    BACKOFF_RESET_S,
    Backoff,
    describe_exit,
)


def test_the_published_constants() -> None:
    assert (BACKOFF_FIRST_S, BACKOFF_MAX_S, BACKOFF_RESET_S) == (1.0, 30.0, 60.0)


def test_delays_double_from_one_second_up_to_thirty() -> None:
    b = Backoff()
    assert [b.next_delay(uptime_s=0.5) for _ in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_child_that_stayed_up_a_minute_starts_again_from_one_second() -> None:
    b = Backoff()
    assert [b.next_delay(5.0) for _ in range(4)] == [1, 2, 4, 8]
    assert b.next_delay(59.9) == 16  # not quite a minute
    assert b.next_delay(60.0) == 1
    assert b.next_delay(0.1) == 2


def test_exit_descriptions() -> None:
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(0) == "exit code 0"
    assert describe_exit(-signal.SIGKILL) == "killed by signal 9 (SIGKILL)"
    assert describe_exit(-signal.SIGTERM) == "killed by signal 15 (SIGTERM)"
