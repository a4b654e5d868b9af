"""Upstream MCP servers behind a namespace (seeds 001, 003): connections, the catalog and `toolman_activate`."""
