"""Benchmarks behind ``kibitz bench``: our code against a peer, in the same run."""
