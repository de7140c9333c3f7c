"""selena.signals: a rollback defers Ctrl-C (and SIGTERM/SIGHUP made into one)."""

from __future__ import annotations

import signal
import threading

import pytest

from selena.signals import sigint_deferred


def test_ctrl_c_is_noted_not_obeyed_inside_and_obeyed_again_after():
    said: list[str] = []
    with sigint_deferred(said.append, "busy"):
        signal.raise_signal(signal.SIGINT)
        with sigint_deferred(said.append, "nested"):
            signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
    assert said == ["busy", "nested", "busy"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_sigterm_is_deferred_only_where_python_handles_it():
    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        said: list[str] = []
        with sigint_deferred(said.append, "busy"):
            signal.raise_signal(signal.SIGTERM)
        assert said == ["busy"] and signal.getsignal(signal.SIGTERM) is interrupt
    finally:
        signal.signal(signal.SIGTERM, previous)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with sigint_deferred(lambda _m: None):
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL   # still deadly
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_outside_the_main_thread_it_changes_nothing():
    seen: list[object] = []

    def run():
        with sigint_deferred(lambda _m: None):
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]
