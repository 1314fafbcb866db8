"""``polang playground``: the page that runs the real engine in the browser (Pyodide).

Serves the page, the Pyodide runtime and polang on localhost, or writes the same files
for a static host (``--export``). docs/playground.md.
"""

from __future__ import annotations

import argparse
import sys

from polang.cli._common import add_command, echo

EPILOG = """examples:
  npm install pyodide@314.0.7
  polang playground --pyodide node_modules/pyodide            # http://127.0.0.1:8000/
  polang playground --pyodide node_modules/pyodide --port 9000
  polang playground --pyodide node_modules/pyodide --export site/   # for a static host

exit status: 0 served until interrupted / written, 2 the runtime or a package is missing
"""


def cmd_playground(args: argparse.Namespace) -> int:
    from polang import playground  # polang --help stays fast

    if args.export:
        out = playground.export(args.export, args.pyodide)
        echo(f"wrote the playground to {out} (serve the folder; open index.html over http)")
        return 0
    server = playground.serve(args.host, args.port, args.pyodide)
    host, port = str(server.server_address[0]), int(server.server_address[1])
    echo(f"polang playground on http://{host}:{port}/ (Ctrl-C stops it)", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "playground", "serve the browser playground (Pyodide) on localhost", EPILOG
    )
    p.add_argument(
        "--pyodide",
        metavar="DIR",
        help="the pyodide npm package's folder (node_modules/pyodide); default: "
        "$POLANG_PYODIDE_DIR",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    p.add_argument("--export", metavar="DIR", help="write the files to DIR instead of serving")
    p.set_defaults(func=cmd_playground)
