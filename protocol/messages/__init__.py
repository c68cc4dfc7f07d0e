"""One module per API: its request and response schemas, defined once."""
