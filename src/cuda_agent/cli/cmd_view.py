"""`cuda-agent view RUN_DIR`: browse a run's report and agent episodes in a web browser.

Serves on 127.0.0.1 only (`cuda_agent.bench.view`): a bench run dir shows its report (built
fresh on every reload, so a bench in progress shows its latest results), each task's page and
each agent episode turn by turn; a `cuda-agent optimize` run dir shows its episode. Runs until
Ctrl-C (exit 0). Exit 2 with one line when RUN_DIR holds no run or the port is taken.
"""

from __future__ import annotations

import argparse
import errno
from pathlib import Path

from cuda_agent.cli.argtypes import port_number
from cuda_agent.cli.main import UsageError

HELP = "serve a run's report and agent episodes on http://127.0.0.1 (like `inspect view`)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a bench run dir (results.sqlite) or an optimize run dir (trajectory.jsonl)")
    p.add_argument("--port", type=port_number, default=8765, help="port on 127.0.0.1 (default 8765; 0: any free port)")


def run(args: argparse.Namespace) -> int:
    from cuda_agent.bench.view import make_server, run_kind

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"run directory not found: {run_dir}")
    if not run_kind(run_dir):
        raise UsageError(
            f"{run_dir} holds no run (no results.sqlite of `cuda-agent bench`, no trajectory.jsonl of "
            "`cuda-agent optimize`)"
        )
    try:
        server = make_server(run_dir, args.port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {args.port} is in use on 127.0.0.1; pick another with --port (0: any free port)"
            ) from None
        raise
    host, port = server.server_address[:2]
    print(f"serving {run_dir} at http://{host}:{port}/  (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
