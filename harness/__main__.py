"""Allow `python -m harness` as a synonym for the `harness` console script."""

from harness.cli.main import main

main()
