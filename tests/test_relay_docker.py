"""End to end, as seed 002 says ("a droid creates a project via oubliette_project_create"): `tooldock relay`
runs inside a `--network none` container of the gateway image ToolDock builds, with only the relay
socket's directory mounted, driven by the official SDK's stdio client through `docker run -i`."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path

from conftest import Gateway, tooldock_cli
from relaykit import RELAY_TOOLS, cleanup, relay_env


def test_a_droid_creates_a_project_through_the_relay_in_a_container(docker_host: str, tmp_path: Path):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    built = json.loads(tooldock_cli("build", "--gateway", "--output", str(tmp_path / "oci"), "--load", "--json",
                                    env={"DOCKER_HOST": docker_host}).stdout)
    image = built["loaded"][0]
    shutil.copytree(RELAY_TOOLS, tmp_path / "tools")
    env, sock, keys = relay_env()
    gateway = Gateway(tmp_path / "tools", tmp_path / "gateway.log", env).start()
    try:
        _, key = keys.create("droid", "write", ("project",))
        name = f"droid-{os.getpid()}"
        args = ["run", "-i", "--rm", "--network", "none", "-v", f"{sock.parent}:/run/tooldock-relay",
                "--group-add", str(os.stat(sock).st_gid), "-e", "TOOLDOCK_API_KEY", image, "relay"]
        params = StdioServerParameters(command="docker", args=args,
                                       env={"PATH": os.environ["PATH"], "DOCKER_HOST": docker_host,
                                            "TOOLDOCK_API_KEY": key})

        async def main():
            with tempfile.TemporaryFile("w+") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        listed = sorted(t.name for t in (await session.list_tools()).tools)
                        made = await session.call_tool("oubliette_project_create", {"name": name})
                errlog.seek(0)
                return listed, made, errlog.read()

        listed, made, stderr = asyncio.run(main())
        assert listed == ["oubliette_project_create", "oubliette_project_echo", "oubliette_project_fail",
                          "oubliette_project_list_projects", "oubliette_project_slow"], stderr
        assert not made.is_error and made.structured_content["name"] == name
        assert key not in stderr
        key_id = key.split("_")[1]
        gateway.wait_for(lambda: f"key {key_id} (droid, write) relay project_create: ok" in gateway.logs,
                         what="the call's log line")
    finally:
        gateway.stop()
        cleanup(sock)
