"""What runs inside a worker: import one namespace's tools and serve them over the worker protocol.

Dependency-light on purpose: it is in every worker image and every worker virtualenv. It imports the
standard library, fastmcp (through `tooldock.namespace.extract`) and nothing from the gateway.
"""

# The worker's own framework requirement, installed in every worker environment next to a namespace's
# requirements. fastmcp-slim[server] is the part of fastmcp that `@tool` and schema extraction need; uvloop
# is the worker's event loop (libuv, in C): a call costs the worker about a sixth less than on asyncio's own.
FRAMEWORK_REQUIREMENTS = ("fastmcp-slim[server]==4.1.2", "uvloop==0.23.0; sys_platform != 'win32'")
