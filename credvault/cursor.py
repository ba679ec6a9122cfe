"""Django's cursor wrapper, with the calls every statement makes written as methods.

Django's `CursorWrapper` reaches `fetchall`, `fetchone` and `close` through `__getattr__`,
and wraps a fetch in a new function (`functools.wraps`) each time it is looked up. Every
request runs its statements through here, so these are plain methods, with the same
translation of the driver's errors into Django's. Both backends (credvault/sqlite,
credvault/postgresql) make their cursors with it; with queries logged, Django's debug
cursor is used as before.
"""

from __future__ import annotations

import contextlib

from django.db.backends import utils


class CursorWrapper(utils.CursorWrapper):
    def fetchone(self):
        with self.db.wrap_database_errors:
            return self.cursor.fetchone()

    def fetchall(self):
        with self.db.wrap_database_errors:
            return self.cursor.fetchall()

    def __exit__(self, type, value, traceback):
        # As Django's: close, and let an error of the cleanup pass.
        with contextlib.suppress(self.db.Database.Error):
            self.cursor.close()
