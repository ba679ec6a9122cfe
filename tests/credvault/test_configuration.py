"""The settings' declaration is the one source of docs/production.md's table and of
credvault/settings.py's typed assignments."""

from __future__ import annotations

from credvault import configuration


def test_the_configuration_table_of_the_docs_is_current():
    document = configuration.TABLE_DOC.read_text(encoding="utf-8")
    section = document.split(configuration.TABLE_START, 1)[1].split(configuration.TABLE_END, 1)[0]
    assert section == "\n" + configuration.render_table(), (
        "run `.venv/bin/python -m credvault.configuration --write`"
    )
    for setting in configuration.SETTINGS:
        assert f"| `{setting.name}` |" in section


def test_the_settings_module_assigns_every_setting_with_its_declared_type():
    module = configuration.TYPES_MODULE.read_text(encoding="utf-8")
    assert configuration.with_types(module) == module, (
        "run `.venv/bin/python -m credvault.configuration --write`"
    )
    from django.conf import settings

    assert isinstance(settings.CREDVAULT_PROXY_MAX_BODY, int)
    assert isinstance(settings.CREDVAULT_VERIFY_TIMEOUT, float)
    assert configuration.type_of(configuration.BY_NAME["CREDVAULT_PROXY_MAX_BODY"]) == "int"
    assert configuration.type_of(configuration.BY_NAME["WEB_CONCURRENCY"]) == "int | None"
