"""Row-lock races on PostgreSQL, seen rather than guessed by a sleep."""

import threading

from django.db import connection


def waits_for_a_lock(thread: threading.Thread, seconds: float = 30) -> bool:
    """Whether ``thread`` is blocked on a lock: polls pg_stat_activity until some session of
    this database waits on one (or the thread ended), then says if the thread still runs."""
    with connection.cursor() as cursor:
        for _ in range(int(seconds / 0.05)):
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND wait_event_type = 'Lock'")
            if cursor.fetchone()[0] or not thread.is_alive():
                break
            threading.Event().wait(0.05)
    return thread.is_alive()
