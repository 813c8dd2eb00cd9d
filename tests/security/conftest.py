"""The attack suite: each test is an attack from outside, as a hostile user would make it,
against a real ``kibitz serve`` on loopback (real Redis, real sockets). Every attack here
must keep failing; a test that passes means the defence held."""
