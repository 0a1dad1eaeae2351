"""A small MCP server for agent-runner's tests, on the official Python SDK (`mcp`).

Its one tool, `lookup`, answers a topic with a word the test knows, and logs each
call to $MCP_TEST_LOG (one JSON line: the tool, its arguments, whether its secret
variable was set, and whether that secret was on any process's command line in
this container at the time of the call). Stdio by default; `--http HOST:PORT`
serves streamable HTTP instead (the remote server of the tests).
"""

import json
import os
import sys
import time

from mcp.server.mcpserver import MCPServer

ANSWER = "MCP-ANSWER-7f3a"

server = MCPServer("agent-runner-test")


def secret_in_argv(secret):
    """Whether `secret` is in any process's command line here (/proc/*/cmdline)."""
    if not secret:
        return False
    found = False
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if secret.encode() in f.read():
                    found = True
        except OSError:
            pass
    return found


def log(entry):
    path = os.environ.get("MCP_TEST_LOG")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\n")


@server.tool()
def lookup(topic: str) -> str:
    """Looks up the answer word for a topic."""
    secret = os.environ.get("MCP_TEST_SECRET", "")
    log(
        {
            "at": time.time(),
            "tool": "lookup",
            "topic": topic,
            "secret_set": bool(secret),
            "secret_in_argv": secret_in_argv(secret),
        }
    )
    return f"{ANSWER} for {topic}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        from mcp.server.transport_security import TransportSecuritySettings

        host, port = sys.argv[2].rsplit(":", 1)
        server.run(
            "streamable-http",
            host=host,
            port=int(port),
            transport_security=TransportSecuritySettings(
                enable_dns_rebinding_protection=False
            ),
        )
    else:
        server.run()
