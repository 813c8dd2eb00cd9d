"""Clients of kibitz: the static web client (``static/``) and the Python client."""
