# Opt in to tickgate's contract kit (it is never enabled implicitly).
pytest_plugins = ["tickgate.testing"]
