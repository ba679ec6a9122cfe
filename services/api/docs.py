"""The views that serve the OpenAPI document and the interactive docs."""

from __future__ import annotations

from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation


class FirstRendererOnMismatch(DefaultContentNegotiation):
    """The schema in the first renderer's format when the Accept header names none of them
    (`text/html` from a browser): like every other path, never 406."""

    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type


class SchemaView(SpectacularAPIView):
    """`GET /api/v1/schema`: GET and HEAD only, any Accept header. The document has one
    version, the settings' VERSION: drf-spectacular's `?version=` query parameter, which it
    would copy into `info.version` (and the file name), is ignored."""

    http_method_names = ["get", "head"]
    content_negotiation_class = FirstRendererOnMismatch

    def _get_version_parameter(self, request):
        return None


class DocsView(SpectacularSwaggerView):
    """`GET /api/docs`: GET and HEAD only (OPTIONS had no template to render: a 500)."""

    http_method_names = ["get", "head"]
