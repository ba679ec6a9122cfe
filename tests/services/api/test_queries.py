"""Query counts of the hot paths: constant in the number of services and fields.

Every request also appends its audit event: one statement on both databases
(`tests.support.helpers.audit_record_queries`). A change locks the account's chain head first and
appends at its end, in its own transaction (`audit_change_queries`); a store takes the head's
lock in the statement that finds its service.

The token fixtures were used a moment ago, so no request here also writes last_used_at.
The test database runs each test in a transaction, so every `atomic()` of the code shows up
as a SAVEPOINT / RELEASE SAVEPOINT pair (in production it is BEGIN / COMMIT).
"""

from __future__ import annotations

import pytest

from tests.support.helpers import (
    audit_change_queries,
    audit_record_queries,
    creds,
    replace_fields_queries,
    webhook_event_queries,
)


@pytest.fixture
def with_services(alice_api):
    def make(count: int) -> None:
        for index in range(count):
            assert (
                alice_api.store(f"svc-{index:04d}", creds(api_key="v", other="w")).status_code
                == 201
            )

    return make


@pytest.mark.django_db
@pytest.mark.parametrize("count", [0, 1, 25])
def test_list_is_constant_whatever_the_number_of_services(
    alice_api, with_services, django_assert_num_queries, count
):
    with_services(count)
    with django_assert_num_queries(2 + audit_record_queries()):
        # 1. SELECT the token by digest, joined to its account
        # 2. SELECT the account's services, ordered by service
        # then the audit event
        response = alice_api.list()
    assert len(response.json()) == count


@pytest.mark.django_db
@pytest.mark.parametrize(("existing", "fields"), [(0, 1), (25, 1), (25, 20)])
def test_storing_a_new_service_is_constant(
    alice_api, with_services, django_assert_num_queries, existing, fields, cached_data_keys
):
    with_services(existing)
    cached_data_keys()
    values = {f"field_{i}": "v" for i in range(fields)}
    # The account's first value creates its data key: SELECT its newest (none), SAVEPOINT,
    # INSERT it, RELEASE. Later ones find it in the worker's cache.
    first_key = 0 if existing else 4
    with django_assert_num_queries(
        7 + first_key + audit_record_queries() + webhook_event_queries()
    ):
        # 1. SELECT the token by digest, joined to its account
        # 2. SAVEPOINT
        # 3. SELECT the service FOR UPDATE (none yet), after locking the audit head (it
        #    orders every change of the account) in the same statement on PostgreSQL
        # 4. SELECT COUNT of the account's services (the limit)
        # 5. INSERT the service
        # 6. INSERT every field at once
        # then append the audit event, look for endpoints of its webhook event, and
        # 7. RELEASE SAVEPOINT
        response = alice_api.store("fresh", creds(**values))
    assert response.status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize(("existing", "fields"), [(1, 1), (25, 1), (25, 20)])
def test_replacing_a_service_is_constant(
    alice_api, with_services, django_assert_num_queries, existing, fields, cached_data_keys
):
    with_services(existing)
    cached_data_keys()
    values = {f"field_{i}": "v" for i in range(fields)}
    with django_assert_num_queries(
        4 + replace_fields_queries() + audit_record_queries() + webhook_event_queries()
    ):
        # 1. SELECT the token by digest, joined to its account
        # 2. SAVEPOINT
        # 3. SELECT the service FOR UPDATE, after locking the audit head (it orders every
        #    change of the account) in the same statement on PostgreSQL
        # then the replacement: move the service to its next generation, DELETE the fields
        # whose keyName is gone, write over or INSERT the others (one statement on
        # PostgreSQL, three on SQLite)
        # then append the audit event, look for endpoints of its webhook event, and
        # 4. RELEASE SAVEPOINT
        response = alice_api.store("svc-0000", creds(**values))
    assert response.status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("existing", [1, 25])
def test_removing_a_service_is_constant(
    alice_api, with_services, django_assert_num_queries, existing
):
    with_services(existing)
    with django_assert_num_queries(6 + audit_change_queries() + webhook_event_queries()):
        # 1. SELECT the token by digest, joined to its account
        # 2. SAVEPOINT, then lock the audit head (orders every change of the account)
        # 3. SELECT the service to delete (Django's deletion collector)
        # 4. DELETE its fields
        # 5. DELETE the service
        # then append the audit event, look for endpoints of its webhook event, and
        # 6. RELEASE SAVEPOINT
        response = alice_api.delete("svc-0000")
    assert response.status_code == 204


@pytest.mark.django_db
def test_testing_a_custom_service_is_the_token_and_the_audit(alice_api, django_assert_num_queries):
    with django_assert_num_queries(1 + audit_record_queries()):
        # 1. SELECT the token by digest, joined to its account; then the audit event
        response = alice_api.test("custom", creds(api_key="v"))
    assert response.json()["reason"] == "no_verifier"


@pytest.mark.django_db
def test_the_token_lookup_stays_one_query_with_thousands_of_tokens(
    alice, alice_api, django_assert_num_queries
):
    """The digest is a unique index: the lookup does not grow with the tokens in the table."""
    from services.models import ApiToken

    ApiToken.objects.bulk_create(
        ApiToken(account=alice, prefix=f"pad_{i:08d}", digest=f"{i:064x}") for i in range(5000)
    )
    with django_assert_num_queries(2 + audit_record_queries()):
        # 1. SELECT the token by digest, joined to its account
        # 2. SELECT the account's services; then the audit event
        assert alice_api.list().status_code == 200


@pytest.mark.django_db
def test_the_agent_list_and_audit_listing_are_constant(alice_api, django_assert_num_queries):
    import json

    for index in range(5):
        alice_api.raw("PUT", f"/api/v1/agents/bot-{index}", json.dumps({"services": ["a", "b"]}))
    with django_assert_num_queries(3 + audit_record_queries()):
        # 1. the token; 2. the agents; 3. their grants (prefetched); then the audit event
        response = alice_api.client.get("/api/v1/agents", headers=alice_api.headers())
    assert len(response.json()) == 5
    with django_assert_num_queries(2 + audit_record_queries()):
        # 1. the token; 2. one page of events; then the audit event
        response = alice_api.client.get(
            "/api/v1/audit-events", {"limit": "3"}, headers=alice_api.headers()
        )
    assert len(response.json()["events"]) == 3
