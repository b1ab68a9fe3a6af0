"""Allow `python -m harness` as a synonym for the `harness` console script."""

from harness.cli import main

main()
