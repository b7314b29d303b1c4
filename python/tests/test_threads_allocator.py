"""The extension's allocator survives the thread that first used it: importing ferroloop in a
short-lived thread and working from other threads afterwards used to crash the process
(mimalloc v3's thread setup; the extension now uses v2)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import threading

    loaded = {}

    def load():
        import ferroloop
        loaded["ferroloop"] = ferroloop
        ferroloop.estimate_tokens("hello world " * 100)

    first = threading.Thread(target=load)
    first.start()
    first.join()

    def work():
        ferroloop = loaded["ferroloop"]
        for _ in range(100):
            parser = ferroloop.SseParser()
            assert len(parser.feed(b"data: x\\n\\n" * 50)) == 50
            ferroloop.estimate_tokens("hello " * 1000)

    for _ in range(3):
        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    print("ok")
    """
)


def test_threads_that_come_and_go_do_not_crash_the_process() -> None:
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        assert done.stdout.strip() == "ok"
