"""OAuth connections: an account's clients, the connect flow, and refresh. What they promise
and how it holds is told once, in docs/oauth.md.

- `clients`: one client per account and provider, the secret sealed like a credential value.
- `connect`: the start page, its continue, and the callback that stores the set.
- `token_sets`: the set of a token answer, and when a set is due for a refresh.
- `refresh`: one refresh per service at a time, across workers and hosts.
- `expiring`: `manage.py refresh_tokens`, the sets due within a window.
"""
