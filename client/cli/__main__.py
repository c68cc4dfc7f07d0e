"""`python -m client.cli ...`: the same as the `highwater` console script."""

from client.cli.main import main

main()
