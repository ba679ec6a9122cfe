"""What the tests share besides fixtures (those are in conftest.py files):

- `helpers`: plain functions and constants of the tests (the account API, agents, OAuth, what
  is stored, commands and documents);
- `harness`: credvault run for real (gunicorn on a free loopback port, a throwaway server's
  environment), which the scripts use too;
- `stand_ins`, `sdk_stand_ins`: the providers credvault calls, real HTTP servers on 127.0.0.1.

Importing this package imports nothing: the scripts take the harness and the stand-ins without
setting Django up.
"""
