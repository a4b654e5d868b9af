"""The relay socket (seed 002): JSON-RPC 2.0 over a unix socket, one message per line, for processes in a
sandbox that hold an API key instead of network access.

    protocol   framing, JSON-RPC shapes, error codes, the qualified tool names (`<namespace>_<tool>`)
    methods    `oubliette_tools` and `oubliette_call_tool`: check the key, apply its scope, call the engine
    server     the listener: connection and line limits, requests multiplexed by id
"""
