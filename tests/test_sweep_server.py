"""A real server lets go of what a closed session held (ui/sweep.py), and keeps what an open one uses.

Two websocket clients that speak Streamlit's protocol (benchmarks/load_protocol.py) open the app on
different texts; one closes. The server's log must then say it released that one session's entries, and
only then: while both are open, nothing is released. About 20 s (the bundled MiniLM loads once).
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from benchmarks.appserver import app_server
from benchmarks.load_protocol import Client, query_string

pytestmark = pytest.mark.slow

RELEASED = re.compile(r"released ([0-9.]+) MB held only by (\d+) ended session")


def _released(log_path) -> list[tuple[float, int]]:
    return [(float(mb), int(n)) for mb, n in RELEASED.findall(log_path.read_text())]


def test_a_closed_session_s_entries_are_released_and_an_open_one_s_stay(tmp_path):
    async def scenario(server) -> tuple[list, list]:
        stays = Client(server.ws_url, query_string("The cat sat on the mat."), 120.0)
        leaves = Client(server.ws_url, query_string("Paris is the capital of France."), 120.0)
        for client in (stays, leaves):
            await client.connect()
            run, _ = await client.run()
            assert not run.errors and run.finished == "FINISHED_SUCCESSFULLY"
        await asyncio.sleep(1.5)  # three sweeps with both open
        before = _released(server.log_path)
        await leaves.close()
        deadline = time.monotonic() + 15
        while not _released(server.log_path) and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
        after = _released(server.log_path)
        run, _ = await stays.run()  # the open session still works
        assert not run.errors
        await stays.close()
        return before, after

    with app_server(env={"ATTENTION_LENS_SWEEP_S": "0.5"}, log_dir=tmp_path) as server:
        before, after = asyncio.run(scenario(server))
    assert before == []
    assert len(after) == 1 and after[0][1] == 1 and after[0][0] > 0.1, after  # its capture, trace and figures
