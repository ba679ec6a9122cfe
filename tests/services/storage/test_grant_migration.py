"""Migration 0010: grants that existed before brokered access keep their plaintext read
(`access: read`); grants made after it default to brokered calls (`proxy`)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("services", "0009_audit_proxy_call")]
AFTER = [("services", "0010_grant_access")]


@pytest.mark.django_db(transaction=True)
def test_existing_grants_are_migrated_to_read():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    account = old.get_model("services", "Account").objects.create(name="legacy")
    agent = old.get_model("services", "Agent").objects.create(account=account, name="bot")
    old.get_model("services", "Grant").objects.create(agent=agent, service="github")

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    grant = new.get_model("services", "Grant").objects.get()
    assert (grant.access, grant.methods, grant.paths) == (
        "read",
        ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
        ["/"],
    )
    fresh = new.get_model("services", "Grant").objects.create(agent_id=agent.pk, service="slack")
    assert fresh.access == "proxy"

    # Back to the newest migration for the tests after this one.
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
