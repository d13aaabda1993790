"""Clients of the services' local APIs (HTTP over Unix sockets), shared by their consumers."""
