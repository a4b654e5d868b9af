"""The manager: an MCP server through which an LLM writes tools, manages dependencies and secret
placeholders, and rebuilds + hot-swaps namespaces with `reload_core` (seed 000, "Manager (port 8001)").

    workspace   the tools directory as the manager may touch it (names, confinement, atomic writes)
    files       namespaces and tool files: create, list, read, validate-then-write, delete
    deps        requirements.txt: list, add one specifier, install through the backend
    secrets     placeholders and status only; values never pass through here
    gateway     the HTTP client for the gateway: /reload, /health, /namespaces, tool calls
    rebuild     docker backend: rebuild changed namespaces' images and deploy them as new generations
    reload      reload_core: rebuild, then signal the gateway, one reload at a time
    watcher     ENABLE_FS_WATCHER: one reload per burst of edits
    tools_*     the MCP tools and their descriptions; context: what they share
    app         the ASGI app: MCP over the gateway's stack, /health, bearer auth
"""
