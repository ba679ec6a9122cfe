"""Telegram's own SDK, python-telegram-bot, through credvault: the Bot API takes the bot's token
only in the path (`/bot<token>/getMe`), so the SDK is handed the agent token as its token and
credvault's proxy as its base URL, and credvault reads the agent token from that segment and
puts the stored bot token in its place:

    Bot(token=AGENT_TOKEN, base_url=f"{CREDVAULT}/api/v1/agent/proxy/telegram/bot")

Against credvault under gunicorn and a stand-in of the Bot API on 127.0.0.1
(tests/support/sdk_stand_ins.py `TelegramStandIn`), which answers only the stored token."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from telegram import Bot

from services.models import AuditEvent
from tests.support.harness import Gunicorn
from tests.support.helpers import agent_token, creds, marked, put_agent, served_env
from tests.support.sdk_stand_ins import TelegramStandIn, carries

PROXY_PREFIX = "/api/v1/agent/proxy"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def bot_token() -> str:
    return "4242:" + marked("tg")


@pytest.fixture(scope="module")
def telegram(bot_token) -> Iterator[TelegramStandIn]:
    server = TelegramStandIn(bot_token).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credvault(django_db_setup, telegram) -> Iterator[Gunicorn]:

    env = served_env({"telegram": telegram.url})
    with Gunicorn(env, workers=1) as server:
        yield server


@pytest.fixture
def token(alice_api, telegram, credvault, bot_token) -> str:
    assert alice_api.store("telegram", creds(bot_token=bot_token)).status_code == 201
    assert put_agent(alice_api, "bot", ["telegram"], access=None).status_code == 201
    telegram.reset()
    return agent_token(alice_api, "bot")


def test_python_telegram_bot_gets_itself_and_sends_a_message(token, telegram, credvault):
    async def steps():
        async with Bot(token=token, base_url=f"{credvault.url}{PROXY_PREFIX}/telegram/bot") as bot:
            sent = await bot.send_message(chat_id=99, text="hello")
            return bot.bot, sent

    me, sent = asyncio.run(steps())
    assert (me.id, me.username) == (4242, "stand_bot")
    assert sent.chat.id == 99
    assert sent.text == "hello (sent with [REDACTED])"
    assert [request.path.lower() for request in telegram.requests] == [
        f"/bot{telegram.credential}/getme".lower(),
        f"/bot{telegram.credential}/sendmessage".lower(),
    ]
    for received in telegram.requests:
        assert not carries(received, token), received.path
    events = AuditEvent.objects.filter(action="agent.proxy").order_by("seq")
    assert [(e.method, e.path.lower(), e.upstream_status) for e in events] == [
        ("POST", "/getme", 200),
        ("POST", "/sendmessage", 200),
    ]
    assert not any(token in e.path or token[4:] in e.path for e in events)
