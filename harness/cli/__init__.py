"""The command line: `harness run`, `suites`, `ab`, `compare`, `report`, `sweep`, `bisect`."""
