"""A stop event for tests of loops that back off: every timed wait returns at once and is
recorded, so a test reads the waits a loop chose without spending them."""

import threading


class CountedWaits(threading.Event):
    """A stop event answering each timed wait at once and recording how long it was; set
    (the loop stops) after `limit` waits."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.waits = limit, []

    def wait(self, timeout=None):
        if timeout is not None:
            self.waits.append(timeout)
            if len(self.waits) >= self.limit:
                self.set()
        return super().wait(0 if timeout is not None else None)
