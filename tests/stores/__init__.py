"""The stores: the store contract, URLs, the S3 and GCS transports (SigV4, the event-loop HTTP
client, canned endpoints), the I/O threads and the store probe."""
