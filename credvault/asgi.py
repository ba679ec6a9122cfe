"""ASGI entry point (the supported deployment is gunicorn with WSGI; see README)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "credvault.settings")

application = get_asgi_application()
