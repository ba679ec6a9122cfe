"""WSGI entry point for gunicorn: `credvault.wsgi:application`."""

import os

from django.core.wsgi import get_wsgi_application

from services.api.wsgi import RequestBodyMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "credvault.settings")

application = RequestBodyMiddleware(get_wsgi_application())
