"""The ``gnncore`` command line: one module per verb (see :mod:`gnncore.cli.main`)."""
