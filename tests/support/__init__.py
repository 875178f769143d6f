"""Harnesses shared by the tests, integration tests and benches: helpers, scenarios, canned
endpoints, store contracts, process forking and the chaos drivers. No tests live here."""
