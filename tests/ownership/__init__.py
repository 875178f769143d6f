"""Session ownership: leases, fencing, transfer and takeover, and SessionWorker."""
