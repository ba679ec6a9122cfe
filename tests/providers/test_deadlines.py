"""The one deadline thread per process (providers/http/deadlines.py) that ends late request bodies
and outbound calls (test_proxy.py shows that a brokered call starts no thread of its own)."""

from __future__ import annotations

import threading
import time

from providers.http.deadlines import Deadlines


def wait_for(condition, seconds: float = 2.0) -> bool:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class TestDeadlines:
    def test_a_due_callback_runs_once_and_in_order(self):
        scheduler, ran = Deadlines(), []
        scheduler.schedule(0.2, lambda: ran.append("late"))
        scheduler.schedule(0.05, lambda: ran.append("early"))
        assert wait_for(lambda: len(ran) == 2)
        time.sleep(0.1)
        assert ran == ["early", "late"]

    def test_a_cancelled_callback_never_runs(self):
        scheduler, ran = Deadlines(), []
        deadline = scheduler.schedule(0.05, lambda: ran.append("cancelled"))
        scheduler.schedule(0.1, lambda: ran.append("kept"))
        deadline.cancel()
        assert wait_for(lambda: ran == ["kept"])
        time.sleep(0.1)
        assert ran == ["kept"]

    def test_a_failing_callback_does_not_stop_the_others(self, caplog):
        scheduler, ran = Deadlines(), []
        scheduler.schedule(0.02, lambda: 1 / 0)
        scheduler.schedule(0.05, lambda: ran.append("after"))
        assert wait_for(lambda: ran == ["after"])
        assert "a deadline's callback failed" in caplog.text

    def test_many_deadlines_share_one_thread(self):
        scheduler = Deadlines()
        before = threading.active_count()
        handles = [scheduler.schedule(30, lambda: None) for _ in range(200)]
        assert threading.active_count() == before + 1
        for handle in handles:
            handle.cancel()
