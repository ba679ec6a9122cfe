# The admin shows every moment to the second and says its zone (TIME_ZONE is UTC), in place
# of the English locale's "Nov. 23, 2026, 6:01 a.m.": "2026-11-23 06:01:15 UTC". The space
# before the zone does not break, so that a narrow column wraps a moment between its date and
# its time, never before "UTC" (services/static/services/admin.css). Only the admin's
# templates read these formats; the API writes RFC 3339 (services/times.py).
DATETIME_FORMAT = "Y-m-d H:i:s\u00a0T"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
