"""The gateway: a registry snapshot of namespaces, the backends that run their workers, and the MCP / REST
front ends that route calls to them."""
