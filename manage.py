#!/usr/bin/env python
"""Django's command-line utility for credvault, in a checkout: credvault/manage.py's entry."""

import sys

from credvault.manage import main

if __name__ == "__main__":
    main(sys.argv)
