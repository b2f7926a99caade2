"""L2: broker connections over trio TCP and TLS, and SASL authentication."""
