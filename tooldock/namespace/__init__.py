"""The drop-in namespace contract: a folder of `@tool` files, scanned and validated without importing them.

Import the submodules directly (`tooldock.namespace.scanner`, ...): this package must stay importable in
a worker environment, where only the standard library and fastmcp are guaranteed. `extract` is the one
module here that imports fastmcp; it runs only inside a worker's environment.
"""
