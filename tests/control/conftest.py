"""The control-channel tests use the shared fixtures of tests/conftest.py
(the real agent binary, a fake xenstored)."""
