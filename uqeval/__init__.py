"""What users run: the ``uqeval`` command line (and, next, the Python client).

The top floor of the project: it starts and talks to the service's processes, so it may import
``service`` and ``worker``; nothing below imports it.
"""
